"""``dtorch.distributed_spec``: meshes and placements, the default mesh, and helpers that
build placements and pipeline stages from a mesh.

Example:
    >>> from dtorch.distributed_spec import DeviceMesh, Shard, get_default_device_mesh
    >>> get_default_device_mesh() == DeviceMesh("cpu")
    True
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from dtorch.api.graph import Graph
from dtorch.errors import MeshError
from dtorch.ir.mesh import DeviceMesh, by_mesh_dim, init_device_mesh
from dtorch.ir.placement import Partial, Placement, Replicate, Shard, parse_placement


def get_default_device_mesh(
    device: str | torch.device | None = None,
    device_mesh: DeviceMesh | None = None,
    graph: Graph | None = None,
) -> DeviceMesh:
    """``device_mesh`` if given, else the one-device mesh of ``device``, else the default mesh
    of ``graph`` (default: the calling thread's default graph).

    Example:
        >>> get_default_device_mesh("cuda:1")
        DeviceMesh('cuda', [1])
        >>> mesh = init_device_mesh("cpu", 2)
        >>> get_default_device_mesh("cuda:1", mesh) is mesh
        True
    """
    if device_mesh is not None:
        if not isinstance(device_mesh, DeviceMesh):
            raise MeshError(
                f"get_default_device_mesh: device_mesh must be a DeviceMesh, got {device_mesh!r}"
            )
        return device_mesh
    if device is not None:
        return DeviceMesh(device)
    return (graph or Graph.default_graph()).default_device_mesh


def assign_layers_to_stages(num_layers: int, num_stages: int) -> list[list[int]]:
    """Layer indices ``0..num_layers-1`` in ``num_stages`` consecutive groups, as even as
    possible; the first ``num_layers % num_stages`` stages take one layer more
    (``numpy.array_split``'s convention; a stage may be empty when there are fewer layers).

    Example:
        >>> assign_layers_to_stages(5, 3)
        [[0, 1], [2, 3], [4]]
    """
    for name, value, least in (("num_layers", num_layers, 0), ("num_stages", num_stages, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(
                f"assign_layers_to_stages: {name} must be an int >= {least}, got {value!r}"
            )
    return [part.tolist() for part in np.array_split(np.arange(num_layers), num_stages)]


def get_placements_from_dict(
    device_mesh: DeviceMesh,
    placements_dict: Mapping[str | int, Placement | str],
    default_placement: Placement | str = "R",
) -> list[Placement]:
    """One placement per mesh dim from ``{dim name or int: placement}``: keys the mesh lacks
    are ignored (as in ``redistribute_by_dict``), dims without a key get
    ``default_placement`` (default Replicate), placements may be text (``"S0"``), and a mesh
    dim of size 1 gets ``Replicate()``. Two keys naming the same dim, and an int key out of the
    mesh's range, are refused (MeshError): the keys read as in ``redistribute_by_dict``
    (``dtorch.ir.mesh.by_mesh_dim``).

    Example:
        >>> mesh = init_device_mesh("cpu", (2, 2), ("dp", "tp"))
        >>> get_placements_from_dict(mesh, {"tp": Shard(1), "pp": Shard(0)})
        [Replicate(), Shard(dim=1)]
        >>> get_placements_from_dict(mesh, {0: "S0"}, default_placement="P")
        [Shard(dim=0), Partial(sum)]
    """
    out = [parse_placement(default_placement)] * device_mesh.ndim
    for dim, placement in by_mesh_dim(
        "get_placements_from_dict", device_mesh, placements_dict
    ).items():
        out[dim] = parse_placement(placement)
    return [Replicate() if size == 1 else p for p, size in zip(out, device_mesh.shape, strict=True)]


__all__ = [
    "DeviceMesh",
    "Partial",
    "Placement",
    "Replicate",
    "Shard",
    "assign_layers_to_stages",
    "get_default_device_mesh",
    "get_placements_from_dict",
    "init_device_mesh",
]
