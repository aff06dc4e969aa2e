"""Redistribution on the client: ``redistribute``, ``redistribute_like``,
``redistribute_by_dict`` and the mesh/device moves of ``Tensor.to``.

Each records one Convert operator; the devices run the planned collectives
(``dtorch.ir.redistribute`` plans, the Convert kernel executes).

Example:
    >>> import dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
    >>> t = dtorch.arange(6.0, device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> r = t.redistribute_by_dict(placements_dict={"tp": dtorch.Replicate()})
    >>> r.placements, r.to_torch().tolist()
    ([Replicate()], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dtorch.api.graph import mesh_of
from dtorch.api.record import redistribute_to
from dtorch.errors import MeshError, PlacementError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement, Replicate, normalize_placements

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_MODES = ("keep", "replicate", "raise_error")


def _default_placements(t: Tensor, mesh: DeviceMesh) -> tuple[Placement, ...]:
    """Same-rank meshes keep the placements; otherwise every mesh dim replicates."""
    if mesh.ndim == t.device_mesh.ndim:
        return tuple(t.placements)
    return (Replicate(),) * mesh.ndim


def redistribute(
    t: Tensor, device_mesh: DeviceMesh | None = None, placements: Sequence[Placement] | None = None
) -> Tensor:
    """``t`` on ``device_mesh`` (default: its own) with ``placements`` (default: kept when the
    mesh rank allows, else Replicate)."""
    mesh = t.device_mesh if device_mesh is None else device_mesh
    if not isinstance(mesh, DeviceMesh):
        raise MeshError(
            f"redistribute: device_mesh must be a DeviceMesh, got {type(mesh).__name__}"
        )
    if mesh.device_kind != t.device_mesh.device_kind:
        raise MeshError(
            f"redistribute: cannot move a {t.device_mesh.device_kind} tensor to a "
            f"{mesh.device_kind} mesh with redistribute; use .to(mesh)"
        )
    wanted = _default_placements(t, mesh) if placements is None else tuple(placements)
    return redistribute_to(t, mesh, normalize_placements(wanted, mesh.shape, t.ndim))


def redistribute_like(t: Tensor, other: Tensor) -> Tensor:
    """``t`` on ``other``'s mesh with ``other``'s placements."""
    return redistribute(t, other.device_mesh, other.placements)


def redistribute_by_dict(
    t: Tensor,
    device_mesh: DeviceMesh | None = None,
    placements_dict: Mapping[str, Placement] | None = None,
    default_placement_mode: str = "keep",
) -> Tensor:
    """Placements by mesh dim name; names not in the dict follow ``default_placement_mode``:
    ``keep`` (the placement on the same-named dim of the current mesh, else Replicate),
    ``replicate``, or ``raise_error``."""
    mesh = t.device_mesh if device_mesh is None else device_mesh
    placements_dict = dict(placements_dict or {})
    if default_placement_mode not in _MODES:
        raise ValueError(
            f"default_placement_mode {default_placement_mode!r}; accepted: {', '.join(_MODES)}"
        )
    names = mesh.dim_names
    if not names:
        raise MeshError(f"redistribute_by_dict needs a mesh with dim names, got {mesh!r}")
    unknown = sorted(set(placements_dict) - set(names))
    if unknown:
        raise MeshError(
            f"redistribute_by_dict: {unknown} are not dim names of {mesh!r}; "
            f"accepted: {list(names)}"
        )
    placements = [_by_name(t, name, placements_dict, default_placement_mode) for name in names]
    return redistribute(t, mesh, placements)


def _by_name(t: Tensor, name: str, given: Mapping[str, Placement], mode: str) -> Placement:
    if name in given:
        return given[name]
    if mode == "raise_error":
        raise PlacementError(
            f"redistribute_by_dict: no placement for mesh dim {name!r} (mode 'raise_error')"
        )
    current = t.device_mesh.dim_name_index(name)
    if mode == "keep" and current is not None:
        return t.placements[current]
    return Replicate()


def move(t: Tensor, target: Any) -> Tensor:
    """``Tensor.to(mesh_or_device)``: onto another mesh (or one device), as a full value on a
    single device, keeping the placements when the mesh rank allows."""
    mesh = mesh_of(target)
    if mesh == t.device_mesh:
        return t
    return redistribute_to(
        t, mesh, normalize_placements(_default_placements(t, mesh), mesh.shape, t.ndim)
    )
