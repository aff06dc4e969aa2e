"""``dtorch.distributed_spec``: meshes and placements, and the default mesh.

Example:
    >>> from dtorch.distributed_spec import DeviceMesh, Shard, get_default_device_mesh
    >>> get_default_device_mesh() == DeviceMesh("cpu")
    True
"""

from dtorch.api.graph import Graph
from dtorch.ir.mesh import DeviceMesh, init_device_mesh
from dtorch.ir.placement import Partial, Placement, Replicate, Shard


def get_default_device_mesh() -> DeviceMesh:
    """The calling thread's default graph's default mesh."""
    return Graph.default_graph().default_device_mesh


__all__ = [
    "DeviceMesh",
    "Partial",
    "Placement",
    "Replicate",
    "Shard",
    "get_default_device_mesh",
    "init_device_mesh",
]
