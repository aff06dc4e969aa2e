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
from dtorch.api.record import record_one, redistribute_to, tensor_arg
from dtorch.errors import MeshError, PlacementError
from dtorch.ir.mesh import DeviceMesh, by_mesh_dim
from dtorch.ir.params import ViewPlacementsParam
from dtorch.ir.placement import (
    Placement,
    Replicate,
    Shard,
    normalize_placements,
    parse_placement,
)
from dtorch.ir.rules.registry import check_summable

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
    mesh rank allows, else Replicate): any placements to any, on N-D meshes, even or uneven,
    and onto another mesh; the value is the same.

    Example:
        >>> import dtorch
        >>> t = dtorch.arange(6.0, device_mesh=dtorch.init_device_mesh("cpu", 2))
        >>> s = t.redistribute(placements=[dtorch.Shard(0)])
        >>> s.placements, s.tolist() == t.tolist()
        ([Shard(dim=0)], True)
    """
    tensor_arg("redistribute", t)
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
    wanted = _default_placements(t, mesh) if placements is None else _placements(placements, mesh)
    placed = normalized("redistribute", wanted, mesh, t.ndim)
    check_summable("redistribute", t.dtype, placed)
    return redistribute_to(t, mesh, placed)


def normalized(
    name: str, placements: Sequence[Placement], mesh: DeviceMesh, ndim: int
) -> tuple[Placement, ...]:
    """``normalize_placements`` of ``placements`` for an ``ndim``-D tensor on ``mesh``, its
    refusal naming ``name``, the call that was given them.

    Example:
        >>> import dtorch
        >>> normalized("to", [dtorch.Shard(-1)], dtorch.init_device_mesh("cpu", 2), 2)
        (Shard(dim=1),)
    """
    try:
        return normalize_placements(placements, mesh.shape, ndim)
    except PlacementError as error:
        raise PlacementError(f"{name}: {error}") from None


def _placements(placements: Any, mesh: DeviceMesh) -> tuple[Placement, ...]:
    """``placements`` as a tuple; one placement (``Shard(0)``, ``"S0"``) or a value that is
    no sequence is refused with from_torch's message (``normalize_placements``'s check)."""
    if isinstance(placements, (Placement, str)) or not hasattr(placements, "__iter__"):
        try:
            normalize_placements(placements, mesh.shape, 0)
        except (PlacementError, TypeError) as error:
            if isinstance(error, PlacementError):
                raise PlacementError(f"redistribute: {error}") from None
        raise PlacementError(
            f"redistribute: placements must be a list of one placement per mesh dimension, "
            f"got {placements!r}"
        )
    return tuple(placements)


def sum_partials(t: Tensor) -> Tensor:
    """``t`` with its Partial mesh dims made Replicate (one all-reduce); ``t`` itself when it
    has none (a statistic's sums, before a square root or a division).

    Example:
        >>> import dtorch, torch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> t = dtorch.from_torch(torch.ones(4), device_mesh=mesh, placements=[dtorch.Shard(0)])
        >>> sum_partials(t.sum()).placements
        [Replicate()]
    """
    placements = [Replicate() if p.is_partial() else p for p in t.placements]
    return t if placements == list(t.placements) else redistribute(t, None, placements)


def gathered(t: Tensor, dims: Sequence[int] = (), *, partial: bool = False) -> Tensor:
    """``t`` with every mesh dim that shards one of ``dims`` made Replicate (an all-gather),
    and with ``partial`` its Partial mesh dims too (an all-reduce); other placements stay.
    ``t`` itself when nothing changes. For compositions that need a whole dim on each device
    (``quantile``, ``rot90``, ``cdist``, ...); operators themselves never redistribute (their
    rules refuse what they cannot take).

    Example:
        >>> import dtorch, torch
        >>> mesh = dtorch.init_device_mesh("cpu", (2, 2))
        >>> t = dtorch.from_torch(torch.ones(4, 4), device_mesh=mesh,
        ...                       placements=[dtorch.Shard(0), dtorch.Shard(1)])
        >>> gathered(t, (1,)).placements
        [Shard(dim=0), Replicate()]
    """
    placements = [
        Replicate()
        if (isinstance(p, Shard) and p.dim in dims) or (partial and p.is_partial())
        else p
        for p in t.placements
    ]
    return t if placements == list(t.placements) else redistribute(t, None, placements)


def replicated(t: Tensor) -> Tensor:
    """``t`` Replicate on every mesh dim (its shards gathered, its Partials summed).

    Example:
        >>> import dtorch, torch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> t = dtorch.from_torch(torch.ones(4), device_mesh=mesh, placements=[dtorch.Shard(0)])
        >>> replicated(t).placements
        [Replicate()]
    """
    return gathered(t, range(t.ndim), partial=True)


def redistribute_like(t: Tensor, other: Tensor) -> Tensor:
    """``t`` on ``other``'s mesh with ``other``'s placements.

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> other = dtorch.zeros(4, device_mesh=mesh, placements=[dtorch.Shard(0)])
        >>> dtorch.ones(4, device_mesh=mesh).redistribute_like(other).placements
        [Shard(dim=0)]
    """
    tensor_arg("redistribute_like", other, "other")
    return redistribute(t, other.device_mesh, other.placements)


def redistribute_by_dict(
    t: Tensor,
    device_mesh: DeviceMesh | None = None,
    placements_dict: Mapping[Any, Placement] | None = None,
    default_placement_mode: str = "keep",
    *,
    convert_shard_size_one_to_replicate: bool = True,
) -> Tensor:
    """``t`` on ``device_mesh`` (default: its own) with placements given per mesh dim: keys are
    dim names or ints (names the mesh lacks are ignored). Mesh dims not in the dict follow
    ``default_placement_mode``: ``keep`` (the default, as API.md gives it: the placement on the
    same-named dim - or, unnamed, the same index - of the current mesh, else Replicate),
    ``replicate`` or ``raise_error`` (a call that names every dim runs the same under all three).
    A one-device target is all Replicate; a ``Shard(d)`` of a tensor dim of size 1 becomes
    Replicate when ``convert_shard_size_one_to_replicate``.

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        >>> t = dtorch.zeros(4, 1, device_mesh=mesh)
        >>> t.redistribute_by_dict(placements_dict={"tp": dtorch.Shard(1), "pp": dtorch.Shard(0),
        ...     0: dtorch.Shard(0)}).placements == [dtorch.Shard(0), dtorch.Replicate()]
        True
    """
    tensor_arg("redistribute_by_dict", t)
    mesh = t.device_mesh if device_mesh is None else device_mesh
    if not isinstance(mesh, DeviceMesh):
        raise MeshError(
            f"redistribute_by_dict: device_mesh must be a DeviceMesh, got "
            f"{type(mesh).__name__}; pass the placements as placements_dict={{...}}"
        )
    if placements_dict is not None and not isinstance(placements_dict, Mapping):
        raise TypeError(
            f"redistribute_by_dict: placements_dict must be a dict of mesh dim (a name or an "
            f"int) -> placement, got {type(placements_dict).__name__} {placements_dict!r}; "
            "for a list of placements use redistribute(placements=...)"
        )
    if default_placement_mode not in _MODES:
        raise ValueError(
            f"redistribute_by_dict: default_placement_mode {default_placement_mode!r}; "
            f"accepted: {', '.join(_MODES)}"
        )
    if len(mesh.device_ids) == 1:
        return redistribute(t, mesh, [Replicate()] * mesh.ndim)
    given = {  # text placements ("R", "S0") read as Placement(text) reads them
        i: parse_placement(p)
        for i, p in by_mesh_dim("redistribute_by_dict", mesh, placements_dict or {}).items()
    }
    placements = [
        _placement_for(t, mesh, i, given, default_placement_mode) for i in range(mesh.ndim)
    ]
    if convert_shard_size_one_to_replicate:
        placements = [_size_one_replicates(t, p) for p in placements]
    return redistribute(t, mesh, placements)


def _placement_for(
    t: Tensor, mesh: DeviceMesh, index: int, given: Mapping[int, Placement], mode: str
) -> Placement:
    """The placement of mesh dim ``index``: given, else as ``mode`` says."""
    if index in given:
        return given[index]
    if mesh.shape[index] == 1 or mode == "replicate":
        return Replicate()
    if mode == "raise_error":
        raise PlacementError(
            f"redistribute_by_dict: no placement for mesh dim {_dim_label(mesh, index)} "
            "(default_placement_mode 'raise_error'); accepted: a dict with every mesh dim "
            "of size > 1, or default_placement_mode 'keep' or 'replicate'"
        )
    current = _same_dim(t.device_mesh, mesh, index)
    return Replicate() if current is None else t.placements[current]


def _same_dim(source: DeviceMesh, target: DeviceMesh, index: int) -> int | None:
    """``keep``: the source mesh dim of the same name (same index when unnamed)."""
    if target.dim_names:
        name = target.dim_names[index]
        return source.dim_name_index(name) if source.dim_names else None
    return index if index < source.ndim else None


def _dim_label(mesh: DeviceMesh, index: int) -> str:
    return repr(mesh.dim_names[index]) if mesh.dim_names else str(index)


def _size_one_replicates(t: Tensor, placement: Placement) -> Placement:
    """A Shard of a tensor dim of size 1 holds nothing on most devices: Replicate it."""
    if placement.is_shard():
        dim = placement.get_shard_index() % max(t.ndim, 1)
        if t.ndim and t.shape[dim] == 1:
            return Replicate()
    return placement


def tensors_redistribute_by_dict(
    tensors: Sequence[Tensor], *args: Any, **kwargs: Any
) -> list[Tensor]:
    """``redistribute_by_dict`` of each tensor, with the same arguments.

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
        >>> a, b = dtorch.tensors_redistribute_by_dict(
        ...     [dtorch.zeros(2, device_mesh=mesh), dtorch.ones(4, device_mesh=mesh)],
        ...     placements_dict={"tp": dtorch.Shard(0)})
        >>> a.placements == b.placements == [dtorch.Shard(0)]
        True
    """
    if isinstance(tensors, (str, Mapping)) or not hasattr(tensors, "__iter__"):
        raise TypeError(
            "tensors_redistribute_by_dict: tensors must be a list of dtorch.Tensor, got "
            f"{type(tensors).__module__}.{type(tensors).__name__}"
        )
    tensors = list(tensors)
    for i, t in enumerate(tensors):  # all checked before any is recorded
        tensor_arg("tensors_redistribute_by_dict", t, f"tensors[{i}]")
    return [redistribute_by_dict(t, *args, **kwargs) for t in tensors]


def check_placement(t: Tensor, dim: Any, expected: Placement, skip_size_one: bool = True) -> None:
    """``Tensor.check_placement``: a PlacementError unless mesh dim ``dim`` holds ``expected``.

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
        >>> dtorch.zeros(2, device_mesh=mesh).check_placement("tp", dtorch.Replicate())
    """
    mesh = t.device_mesh
    index = _mesh_dim(mesh, dim)
    if skip_size_one and mesh.shape[index] == 1:
        return
    actual = t.placements[index]
    if actual != expected:
        raise PlacementError(
            f"check_placement: mesh dim {_dim_label(mesh, index)} of {t!r} has {actual!r}; "
            f"expected {expected!r}"
        )


def _mesh_dim(mesh: DeviceMesh, dim: Any) -> int:
    """A mesh dim index from an int or a name, with a clear error."""
    index = mesh.dim_name_index(dim) if isinstance(dim, str) and mesh.dim_names else dim
    if isinstance(index, int) and not isinstance(index, bool) and -mesh.ndim <= index < mesh.ndim:
        return index % mesh.ndim
    raise MeshError(
        f"check_placement: mesh dim {dim!r} is not a dim of {mesh!r}; accepted: an int in "
        f"[{-mesh.ndim}, {mesh.ndim}) or one of {list(mesh.dim_names or [])}"
    )


def view_placements(t: Tensor, placements: Any) -> Tensor:
    """``t.view([placements])``: every device's local shard read under ``placements`` (one per
    mesh dim), without moving data; the global shape follows from the local shapes.

    A Replicate viewed as Partial sums to n times the value (n: the mesh dim's size); a
    Partial viewed as Replicate is one device's partial value; a marked shard (from ``cat``)
    viewed as a plain Shard drops the mark where each local size is the plain chunk size.
    PlacementError when the local shapes cannot be the chunks of one global shape.

    Example:
        >>> import dtorch, torch
        >>> from dtorch import Partial, Replicate
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> t = dtorch.from_torch(torch.ones(3), device_mesh=mesh, placements=[Replicate()])
        >>> t.view([Partial()]).tolist()
        [2.0, 2.0, 2.0]
    """
    if not isinstance(placements, (list, tuple)):
        raise PlacementError(
            f"view: placements must be a list or tuple of placements, got "
            f"{type(placements).__name__}; accepted: one Shard(d), Replicate() or Partial() per "
            f"mesh dim"
        )
    wanted = normalized("view", placements, t.device_mesh, t.ndim)
    return record_one("view", ViewPlacementsParam(wanted), (t,))


def move(t: Tensor, target: Any) -> Tensor:
    """``Tensor.to(mesh_or_device)``: onto another mesh (or one device), as a full value on a
    single device, keeping the placements when the mesh rank allows."""
    mesh = mesh_of(target)
    if mesh == t.device_mesh:
        return t
    t.graph.require(mesh, "to")
    return redistribute_to(t, mesh, normalized("to", _default_placements(t, mesh), mesh, t.ndim))
