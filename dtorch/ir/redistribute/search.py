"""Cheapest path between two layouts on one mesh: Dijkstra over single-mesh-dim steps.

An edge changes one mesh dimension with one step, and only where that step is correct on its
own: a shard can leave its tensor dim (all-gather, all-to-all, pad to Partial) only as the
innermost split, because the devices of an outer split's group hold pieces of different
blocks (DTensor's nesting rule); a new shard (local chunk, reduce-scatter, all-to-all)
always becomes the innermost split. Entering Partial is allowed only where the goal has
Partial: it never helps otherwise.

The cost is compared lexicographically: collectives first (what CommDebugMode counts), then
elements sent (ring model, on the largest shard, summed over devices), then local steps. So
S(0) -> S(1) is one all-to-all, P -> S is one reduce-scatter, R -> S costs nothing, and of
two plans with equally many collectives the one that moves less data wins.

Example:
    >>> from dtorch.ir.redistribute.layout import PARTIAL
    >>> problem = Problem((8, 8), (2, 2), (0, 1), frozenset())
    >>> start, goal = ((0, 0), (PARTIAL, 0)), ((1, 0), (0, 0))
    >>> cost, steps, layouts = cheapest(problem, start, {goal})[goal]
    >>> steps
    (AllToAll(mesh_dim=0, src_dim=0, dst_dim=1), ReduceScatter(mesh_dim=1, tensor_dim=0))
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from dtorch.ir.redistribute.layout import (
    PARTIAL,
    REPLICATE,
    Layout,
    is_innermost,
    max_local_numel,
    with_entry,
)
from dtorch.ir.redistribute.steps import (
    AllGather,
    AllReduce,
    AllToAll,
    LocalChunk,
    ReduceScatter,
    ShardToPartial,
    Step,
    ZeroNonOwner,
)

#: (collectives, elements sent summed over devices, local steps); compared as a tuple.
Cost = tuple[int, int, int]
Edge = tuple[Step, Layout, Cost]

ZERO: Cost = (0, 0, 0)
_FREE: Cost = (0, 0, 1)


@dataclass(frozen=True, slots=True)
class Problem:
    """What every edge needs besides the layout: the tensor and mesh shapes, the tensor dims
    a step may shard, and the mesh dims where the goal has Partial."""

    shape: tuple[int, ...]
    mesh_shape: tuple[int, ...]
    dims: tuple[int, ...]
    partial_dims: frozenset[int]

    def sent(self, layout: Layout, mesh_dim: int, factor: int = 1) -> Cost:
        """Cost of one collective along ``mesh_dim`` in which each device sends ``factor *
        numel * (k - 1) / k`` elements (ring model), summed over every device of the mesh: an
        exact integer, in the same unit as a transfer's elements."""
        k = self.mesh_shape[mesh_dim]
        scale = math.prod(self.mesh_shape) // k
        numel = max_local_numel(layout, self.shape, self.mesh_shape)
        return (1, factor * numel * (k - 1) * scale, 0)


def _shard_edges(pb: Problem, layout: Layout, m: int) -> Iterator[Edge]:
    if not is_innermost(layout, m):
        return
    a = layout[m][0]
    gathered = with_entry(layout, m, REPLICATE)
    yield AllGather(m, a), gathered, pb.sent(gathered, m)
    for b in pb.dims:
        if b != a:
            yield AllToAll(m, a, b), with_entry(layout, m, b), pb.sent(layout, m)
    if m in pb.partial_dims:
        yield ShardToPartial(m, a), with_entry(layout, m, PARTIAL), _FREE


def _replicate_edges(pb: Problem, layout: Layout, m: int) -> Iterator[Edge]:
    for b in pb.dims:
        yield LocalChunk(m, b), with_entry(layout, m, b), _FREE
    if m in pb.partial_dims:
        yield ZeroNonOwner(m), with_entry(layout, m, PARTIAL), _FREE


def _partial_edges(pb: Problem, layout: Layout, m: int) -> Iterator[Edge]:
    yield AllReduce(m), with_entry(layout, m, REPLICATE), pb.sent(layout, m, factor=2)
    for b in pb.dims:
        yield ReduceScatter(m, b), with_entry(layout, m, b), pb.sent(layout, m)


def edges(pb: Problem, layout: Layout) -> Iterator[Edge]:
    """Every single-step move from ``layout``, mesh dim by mesh dim (size-1 dims never move)."""
    for m, (kind, _) in enumerate(layout):
        if pb.mesh_shape[m] == 1:
            continue
        if kind == REPLICATE:
            yield from _replicate_edges(pb, layout, m)
        elif kind == PARTIAL:
            yield from _partial_edges(pb, layout, m)
        else:
            yield from _shard_edges(pb, layout, m)


def add(a: Cost, b: Cost) -> Cost:
    """The cost of two things done one after the other."""
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


Path = tuple[Cost, tuple[Step, ...], tuple[Layout, ...]]


def cheapest(pb: Problem, start: Layout, goals: Collection[Layout]) -> dict[Layout, Path]:
    """The cheapest path from ``start`` to each of ``goals``: its cost, its steps, and the
    layouts on the way (``start`` first). Ties go to the path found first, so plans are
    deterministic."""
    best: dict[Layout, Cost] = {start: ZERO}
    back: dict[Layout, tuple[Layout, Step]] = {}
    tie = itertools.count()
    heap: list[tuple[Cost, int, Layout]] = [(ZERO, next(tie), start)]
    found: dict[Layout, Path] = {}
    while heap and len(found) < len(goals):
        cost, _, layout = heapq.heappop(heap)
        if cost > best[layout]:
            continue
        if layout in goals:
            found[layout] = (cost, *_unwind(back, start, layout))
        for step, nxt, price in edges(pb, layout):
            total = add(cost, price)
            if nxt not in best or total < best[nxt]:
                best[nxt] = total
                back[nxt] = (layout, step)
                heapq.heappush(heap, (total, next(tie), nxt))
    if len(found) < len(goals):
        raise AssertionError(f"no plan from {start}: the step set is complete, this is a bug")
    return found


def _unwind(
    back: dict[Layout, tuple[Layout, Step]], start: Layout, goal: Layout
) -> tuple[tuple[Step, ...], tuple[Layout, ...]]:
    steps: list[Step] = []
    layouts = [goal]
    while layouts[-1] != start:
        previous, step = back[layouts[-1]]
        steps.append(step)
        layouts.append(previous)
    return tuple(reversed(steps)), tuple(reversed(layouts))
