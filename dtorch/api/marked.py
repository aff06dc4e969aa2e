"""Redistribution of sub-split (marked) tensors as ordinary operators: the plan.

A marked tensor (``Shard(d, sub_split_coordinates=c)``, what ``cat`` of sharded parts makes)
is redistributed part by part: slice every part at its boundaries (a plain ``Shard(d)``
tensor each, no data moves), redistribute the parts with d whole, ``cat`` them, and
redistribute that to the target. A marked target is made the other way round: the source with
d whole, sliced into the target's parts, each chunked to ``Shard(d)`` (a local slice), and
``cat`` (which marks the result). Both runners run these steps like any others.

This module plans the steps (``MarkedSteps``, data); ``dtorch.api.record`` records them, so
that recording and planning do not import each other.

Example:
    >>> import torch, dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2)
    >>> a = dtorch.from_torch(torch.arange(4.0), device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> b = dtorch.from_torch(torch.arange(6.0), device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> dtorch.cat([a, b]).redistribute(mesh, [dtorch.Replicate()]).to_torch().tolist()
    [0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
"""

from __future__ import annotations

from dataclasses import dataclass

from dtorch.errors import PlacementError
from dtorch.ir.params import ConcatParam, GetItemParam, SliceIndex
from dtorch.ir.placement import Placement, Replicate, Shard
from dtorch.ir.subsplit import segments


@dataclass(frozen=True)
class MarkedSteps:
    """The operators of one redistribution to or from marked placements, in order."""

    #: the source redistributed to these first (its marked dim whole), or None: it is used as is
    before: tuple[Placement, ...] | None
    #: the parts: slices of the marked dim at the mark's boundaries
    slices: tuple[GetItemParam, ...]
    #: each part redistributed to these
    parts: tuple[Placement, ...]
    #: the parts joined again along the marked dim
    cat: ConcatParam
    #: the joined tensor redistributed to these, or None: it has the target placements
    after: tuple[Placement, ...] | None


def plan_marked(
    shape: tuple[int, ...], source: tuple[Placement, ...], target: tuple[Placement, ...]
) -> MarkedSteps:
    """The steps from ``source`` to ``target`` placements, one of them marked (see the module)."""
    mark = _first_mark(source)
    if mark is not None:
        return _from_marked(shape, mark[1], target)
    mark = _first_mark(target)
    assert mark is not None
    return _to_marked(shape, mark, target)


# (mesh dim, placement) of the first marked Shard.
def _first_mark(placements: tuple[Placement, ...]) -> tuple[int, Shard] | None:
    for m, p in enumerate(placements):
        if isinstance(p, Shard) and p.has_sub_split_coordinates():
            return m, p
    return None


# A marked source: its parts with the marked dim whole (and the target's marks of other dims
# plain: cat joins plain shards only), joined, then redistributed to the target.
def _from_marked(shape: tuple[int, ...], mark: Shard, target: tuple[Placement, ...]) -> MarkedSteps:
    whole = tuple(_whole_part(p, mark.dim) for p in target)
    return MarkedSteps(None, _slices(shape, mark), whole, ConcatParam(mark.dim), target)


def _whole_part(p: Placement, dim: int) -> Placement:
    # a part's placement: its marked dim whole, the target's other marks plain
    if p.is_shard(dim):
        return Replicate()
    return p.plain() if isinstance(p, Shard) else p


def _to_marked(
    shape: tuple[int, ...], mark: tuple[int, Shard], target: tuple[Placement, ...]
) -> MarkedSteps:
    """A marked target: the source with the marked dim whole, sliced into the target's parts,
    each chunked to the plain Shard; their ``cat`` is marked as the target."""
    m, p = mark
    if sum(q.is_shard(p.dim) for q in target) != 1 or _first_mark(target[m + 1 :]):
        raise PlacementError(
            f"redistribute: the target {target} marks more than one mesh dim or shards the "
            f"marked dim {p.dim} on several; accepted: one mesh dim marking its dim"
        )
    whole, plain = list(target), list(target)
    whole[m], plain[m] = Replicate(), p.plain()
    return MarkedSteps(tuple(whole), _slices(shape, p), tuple(plain), ConcatParam(p.dim), None)


# The slices between the boundaries of ``mark`` (along dim ``mark.dim``).
def _slices(shape: tuple[int, ...], mark: Shard) -> tuple[GetItemParam, ...]:
    lead = tuple(SliceIndex(0, n) for n in shape[: mark.dim])
    return tuple(
        GetItemParam((*lead, SliceIndex(start, start + length)))
        for start, length in segments(shape[mark.dim], mark.sub_split_coordinates)
    )
