"""``plan_redistribute``: the pure, cached planner from one layout to another.

On one mesh (same device type, shape and ids; dim names do not matter) the plan is the
cheapest path of single-mesh-dim steps (``search``). Between two different meshes the source
first drops its Partial mesh dims (reduce-scatter or all-reduce, whichever makes the whole plan
cheaper), then one transfer step copies to every destination device the pieces it needs; a
Partial destination gets the value on its owner devices and zeros elsewhere, so no step
follows the transfer. Between two meshes of one shape the planner also weighs the *relay*:
plan on the source mesh, then move every local value (Partial summands too) to the device at
the same coordinate; ties go to the relay, which reduces nothing.

Example:
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.placement import Shard, Partial
    >>> mesh = init_device_mesh("cpu", 4)
    >>> plan_redistribute((8, 8), mesh, (Shard(0),), mesh, (Shard(-1),)).steps
    (AllToAll(mesh_dim=0, src_dim=0, dst_dim=1),)
    >>> plan_redistribute((8, 8), mesh, (Partial(),), mesh, (Shard(0),)).steps
    (ReduceScatter(mesh_dim=0, tensor_dim=0),)
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

from dtorch.errors import MeshError, ShapeError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement, normalize_placements
from dtorch.ir.redistribute.layout import (
    PARTIAL,
    REPLICATE,
    Layout,
    from_placements,
    to_placements,
    with_entry,
)
from dtorch.ir.redistribute.search import Path, Problem, add, cheapest
from dtorch.ir.redistribute.steps import (
    Move,
    RedistributePlan,
    Step,
    crossing,
    transfer_step,
)
from dtorch.ir.redistribute.transfer import plan_moves, relay_moves
from dtorch.ir.subsplit import check_unmarked


def plan_redistribute(
    shape: Sequence[int],
    src_mesh: DeviceMesh,
    src: Sequence[Placement],
    dst_mesh: DeviceMesh,
    dst: Sequence[Placement],
) -> RedistributePlan:
    """The cheapest correct plan to move a tensor of ``shape`` from ``src`` on ``src_mesh`` to
    ``dst`` on ``dst_mesh``; cached, so asking twice costs a dictionary look-up.

    Placements are normalised first (``Shard(-1)`` counts from the end; a wrong count or an
    out-of-range dim raises PlacementError).

    Example:
        >>> from dtorch.ir.mesh import init_device_mesh
        >>> from dtorch.ir.placement import Shard, Replicate
        >>> mesh = init_device_mesh("cpu", (2, 2))
        >>> plan = plan_redistribute((4, 6), mesh, (Shard(0), Shard(1)),
        ...                          mesh, (Replicate(), Replicate()))
        >>> plan.steps
        (AllGather(mesh_dim=0, tensor_dim=0), AllGather(mesh_dim=1, tensor_dim=1))
    """
    shape = _check_shape(shape)  # before any cache: True would hash as 1
    for mesh in (src_mesh, dst_mesh):
        if not isinstance(mesh, DeviceMesh):
            raise MeshError(f"plan_redistribute needs DeviceMesh meshes, got {mesh!r}")
    key = (shape, src_mesh, tuple(src), dst_mesh, tuple(dst))
    try:
        hash(key)
    except TypeError:  # an unhashable placement: the uncached checks say what is wrong
        return _as_given.__wrapped__(key)
    return _as_given(key)  # every Convert kernel plans again: cached as given


#: (shape, source mesh, source placements, destination mesh, destination placements).
_Key = tuple[tuple[int, ...], DeviceMesh, tuple[Placement, ...], DeviceMesh, tuple[Placement, ...]]


@functools.lru_cache(maxsize=4096)
def _as_given(key: _Key) -> RedistributePlan:
    """``_plan`` of the placements as given: normalised and checked first (a refusal raises
    and is not cached), so each layout's plan is one object however it was written."""
    shape, src_mesh, src, dst_mesh, dst = key
    src = normalize_placements(src, src_mesh.shape, len(shape))
    dst = normalize_placements(dst, dst_mesh.shape, len(shape))
    check_unmarked("redistribute", src, "the source layout")  # no plan knows the pieces yet
    check_unmarked("redistribute", dst, "the target layout")
    return _plan(shape, src_mesh, src, dst_mesh, dst)


def _check_shape(shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(shape)
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in shape):
        raise ShapeError(f"a tensor shape needs non-negative int sizes, got {shape}")
    return shape


def same_mesh(a: DeviceMesh, b: DeviceMesh) -> bool:
    """True when two meshes place every coordinate on the same device (names aside)."""
    return (a.device_type, a.shape, a.device_ids) == (b.device_type, b.shape, b.device_ids)


@functools.lru_cache(maxsize=4096)
def _plan(
    shape: tuple[int, ...],
    src_mesh: DeviceMesh,
    src: tuple[Placement, ...],
    dst_mesh: DeviceMesh,
    dst: tuple[Placement, ...],
) -> RedistributePlan:
    start = from_placements(src, src_mesh.shape)
    if same_mesh(src_mesh, dst_mesh):
        steps, layouts = _on_one_mesh(shape, src_mesh, start, from_placements(dst, dst_mesh.shape))
    else:
        steps, layouts = _across_meshes(shape, src_mesh, start, dst_mesh, dst)
    return RedistributePlan(shape, src_mesh, src, dst_mesh, dst, steps, layouts)


def _shard_dims(*layouts: Layout) -> tuple[int, ...]:
    """Tensor dims the layouts shard, in first-seen order: the dims a step may shard."""
    dims = [kind for layout in layouts for kind, _ in layout if kind >= 0]
    return tuple(dict.fromkeys(dims))


Planned = tuple[tuple[Step, ...], tuple[tuple[Placement, ...], ...]]


def _placed(layouts: tuple[Layout, ...], ndim: int) -> tuple[tuple[Placement, ...], ...]:
    return tuple(to_placements(layout, ndim) for layout in layouts)


def _path_on_mesh(shape: tuple[int, ...], mesh: DeviceMesh, start: Layout, goal: Layout) -> Path:
    partial = frozenset(m for m, (kind, _) in enumerate(goal) if kind == PARTIAL)
    problem = Problem(shape, mesh.shape, _shard_dims(goal, start), partial)
    return cheapest(problem, start, (goal,))[goal]


def _on_one_mesh(shape: tuple[int, ...], mesh: DeviceMesh, start: Layout, goal: Layout) -> Planned:
    _, steps, layouts = _path_on_mesh(shape, mesh, start, goal)
    return steps, _placed(layouts, len(shape))


def _partial_free(start: Layout, dims: tuple[int, ...]) -> list[Layout]:
    """Every layout that turns each Partial mesh dim of ``start`` into R or a new shard."""
    partial = [m for m, (kind, _) in enumerate(start) if kind == PARTIAL]
    layouts = []
    for choice in itertools.product((REPLICATE, *dims), repeat=len(partial)):
        layout = start
        for m, kind in zip(partial, choice, strict=True):
            layout = with_entry(layout, m, kind)
        layouts.append(layout)
    return layouts


def _across_meshes(
    shape: tuple[int, ...],
    src_mesh: DeviceMesh,
    start: Layout,
    dst_mesh: DeviceMesh,
    dst: tuple[Placement, ...],
) -> Planned:
    """The cheaper of: (equal mesh shapes) plan, then relay; or drop Partial, move pieces."""
    goal = from_placements(dst, dst_mesh.shape)
    wanted = to_placements(goal, len(shape))
    dims = tuple(dict.fromkeys(_shard_dims(goal, start) + _largest_dim(shape)))
    problem = Problem(shape, src_mesh.shape, dims, frozenset())
    options = []
    if src_mesh.shape == dst_mesh.shape:
        path = _path_on_mesh(shape, src_mesh, start, goal)
        moves = relay_moves(shape, src_mesh, dst_mesh, wanted)
        options.append(_add_transfer(path, moves, src_mesh, dst_mesh, goal))
    for path in cheapest(problem, start, _partial_free(start, dims)).values():
        ready = to_placements(path[2][-1], len(shape))
        moves = plan_moves(shape, src_mesh, ready, dst_mesh, wanted)
        options.append(_add_transfer(path, moves, src_mesh, dst_mesh, goal))
    # min keeps the first of equal options: the relay (no reduction), then search order
    _, steps, layouts = min(options, key=lambda option: option[0])
    return steps, _placed(layouts, len(shape))


def _add_transfer(
    path: Path, moves: tuple[Move, ...], src_mesh: DeviceMesh, dst_mesh: DeviceMesh, dst: Layout
) -> Path:
    """``path`` followed by the transfer step of ``moves``; a transfer costs its collective
    count, then the elements it moves between devices."""
    cost, steps, layouts = path
    same_kind = src_mesh.device_kind == dst_mesh.device_kind
    step = transfer_step(moves, same_kind)
    sent = sum(math.prod(m.size) for m in crossing(moves, same_kind))
    price = (step.count, sent, 1)
    return add(cost, price), (*steps, step), (*layouts, dst)


def _largest_dim(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The largest tensor dim (first on ties), where a Partial source reduce-scatters to."""
    return (max(range(len(shape)), key=lambda d: (shape[d], -d)),) if shape else ()
