"""Redistribution of sub-split (marked) tensors, recorded as ordinary operators.

A marked tensor (``Shard(d, sub_split_coordinates=c)``, what ``cat`` of sharded parts makes)
is redistributed part by part: slice every part at its boundaries (a plain ``Shard(d)``
tensor each, no data moves), redistribute the parts with d whole, ``cat`` them, and
redistribute that to the target. A marked target is made the other way round: the source with
d whole, sliced into the target's parts, each chunked to ``Shard(d)`` (a local slice), and
``cat`` (which marks the result). Both runners run these steps like any others.

Example:
    >>> import torch, dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2)
    >>> a = dtorch.from_torch(torch.arange(4.0), device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> b = dtorch.from_torch(torch.arange(6.0), device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> dtorch.cat([a, b]).redistribute(mesh, [dtorch.Replicate()]).to_torch().tolist()
    [0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtorch.api.record import record_one, redistribute_to
from dtorch.errors import PlacementError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.params import ConcatParam, GetItemParam, SliceIndex
from dtorch.ir.placement import Placement, Replicate, Shard
from dtorch.ir.span import Span
from dtorch.ir.subsplit import segments

if TYPE_CHECKING:
    from dtorch.api.handle import TensorBase
    from dtorch.api.tensor import Tensor


def redistribute_marked(
    tensor: TensorBase, mesh: DeviceMesh, placements: tuple[Placement, ...], span: Span | None
) -> Tensor:
    """``redistribute_to`` where the source or the target is marked (see the module)."""
    source = _first_mark(tensor._operand.placements)
    if source is not None:
        return _from_marked(tensor, source, mesh, placements, span)
    target = _first_mark(placements)
    assert target is not None
    return _to_marked(tensor, target, mesh, placements, span)


# (mesh dim, placement) of the first marked Shard.
def _first_mark(placements: tuple[Placement, ...]) -> tuple[int, Shard] | None:
    for m, p in enumerate(placements):
        if isinstance(p, Shard) and p.has_sub_split_coordinates():
            return m, p
    return None


def _from_marked(
    tensor: TensorBase,
    mark: tuple[int, Shard],
    mesh: DeviceMesh,
    placements: tuple[Placement, ...],
    span: Span | None,
) -> Tensor:
    dim = mark[1].dim
    whole = tuple(Replicate() if p.is_shard(dim) else p for p in placements)
    parts = [redistribute_to(part, mesh, whole, span) for part in _parts(tensor, mark[1])]
    joined = record_one("cat", ConcatParam(dim), tuple(parts), known=3)
    return redistribute_to(joined, mesh, placements, span)


def _to_marked(
    tensor: TensorBase,
    mark: tuple[int, Shard],
    mesh: DeviceMesh,
    placements: tuple[Placement, ...],
    span: Span | None,
) -> Tensor:
    m, p = mark
    if sum(q.is_shard(p.dim) for q in placements) != 1 or _first_mark(placements[m + 1 :]):
        raise PlacementError(
            f"redistribute: the target {placements} marks more than one mesh dim or shards the "
            f"marked dim {p.dim} on several; accepted: one mesh dim marking its dim"
        )
    whole = list(placements)
    whole[m] = Replicate()
    source = redistribute_to(tensor, mesh, tuple(whole), span)
    plain = list(placements)
    plain[m] = p.plain()
    parts = [redistribute_to(part, mesh, tuple(plain), span) for part in _parts(source, p)]
    joined = record_one("cat", ConcatParam(p.dim), tuple(parts), known=3)
    assert joined._operand.placements == placements, (joined._operand.placements, placements)
    return joined


# The parts of ``tensor`` between the boundaries of ``mark`` (slices of dim ``mark.dim``).
def _parts(tensor: TensorBase, mark: Shard) -> list[Tensor]:
    shape = tensor._operand.shape
    lead = tuple(SliceIndex(0, n) for n in shape[: mark.dim])
    parts = []
    for start, length in segments(shape[mark.dim], mark.sub_split_coordinates):
        param = GetItemParam((*lead, SliceIndex(start, start + length)))
        parts.append(record_one("getitem", param, (tensor,), known=3))
    return parts
