"""dtorch: a single-controller, eager-graph distributed tensor runtime for PyTorch.

Example:
    >>> import dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 4)
    >>> mesh.shape
    (4,)
"""

from dtorch.errors import DTorchError
from dtorch.ir.mesh import DeviceMesh, init_device_mesh
from dtorch.ir.placement import Partial, Placement, Replicate, Shard
from dtorch.options import GlobalOption

__all__ = [
    "DTorchError",
    "DeviceMesh",
    "GlobalOption",
    "Partial",
    "Placement",
    "Replicate",
    "Shard",
    "init_device_mesh",
]
