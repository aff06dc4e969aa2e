"""Per-device layout checks: is every device's local result its chunk of the global result?

Operators that regroup elements (views that merge or split dims, slicing with a start or a
step, repeat_interleave) keep a shard only when the local computation lands exactly on the
device's ``torch.chunk`` slice of the output. These checks walk every device of the mesh
once per (shapes, placements) combination and are cached.

Example:
    >>> from dtorch.ir.placement import Shard
    >>> g = (Group((0, 1), (0,)),)
    >>> check_groups((8, 3), (24,), (4,), (Shard(0),), (Shard(0),), g) is None
    True
    >>> check_groups((6, 3), (18,), (4,), (Shard(0),), (Shard(0),), g)
    (0,)
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from dtorch.ir.placement import Placement
from dtorch.ir.sharding import local_shape_and_offset


@dataclass(frozen=True, slots=True)
class Group:
    """Input dims ``src`` and output dims ``dst`` holding the same elements in the same order
    (a view merges or splits them); a shard may only sit on ``src[0]`` -> ``dst[0]``."""

    src: tuple[int, ...]
    dst: tuple[int, ...]


#: ``expected(arg, local length, offset of the input dim) -> (local length, offset) the output
#: dim needs``; a module-level function, so that it and its ``arg`` can key the cache.
RangeMap = Callable[[Any, int, int], tuple[int, int]]


def coordinates(mesh_shape: tuple[int, ...]) -> itertools.product[tuple[int, ...]]:
    """Every device coordinate of a mesh of ``mesh_shape``."""
    return itertools.product(*(range(s) for s in mesh_shape))


@functools.lru_cache(maxsize=4096)
def check_groups(
    in_shape: tuple[int, ...],
    out_shape: tuple[int, ...],
    mesh_shape: tuple[int, ...],
    in_placements: tuple[Placement, ...],
    out_placements: tuple[Placement, ...],
    groups: tuple[Group, ...],
) -> tuple[int, ...] | None:
    """The first device coordinate whose flat range of some group differs between the input
    and the output layout, or None when every device's local view is its output chunk."""
    inner = [
        (math.prod(in_shape[d] for d in g.src[1:]), math.prod(out_shape[d] for d in g.dst[1:]))
        for g in groups
    ]
    for coordinate in coordinates(mesh_shape):
        lin, oin = local_shape_and_offset(in_shape, mesh_shape, in_placements, coordinate)
        lout, oout = local_shape_and_offset(out_shape, mesh_shape, out_placements, coordinate)
        for g, (ki, ko) in zip(groups, inner, strict=True):
            if not g.src or not g.dst:
                continue
            s, d = g.src[0], g.dst[0]
            if not _same_range((lin[s] * ki, oin[s] * ki), (lout[d] * ko, oout[d] * ko)):
                return coordinate
    return None


@functools.lru_cache(maxsize=4096)
def check_dim_map(
    in_shape: tuple[int, ...],
    out_shape: tuple[int, ...],
    mesh_shape: tuple[int, ...],
    placements: tuple[tuple[Placement, ...], tuple[Placement, ...]],
    dims: tuple[int, int],
    expected: RangeMap,
    arg: Hashable,
) -> tuple[int, ...] | None:
    """The first device coordinate where output dim ``dims[1]``'s local (length, offset) is
    not ``expected(arg, input dim dims[0]'s local length, offset)``, or None when all agree."""
    src, dst = dims
    for coordinate in coordinates(mesh_shape):
        lin, oin = local_shape_and_offset(in_shape, mesh_shape, placements[0], coordinate)
        lout, oout = local_shape_and_offset(out_shape, mesh_shape, placements[1], coordinate)
        if not _same_range(expected(arg, lin[src], oin[src]), (lout[dst], oout[dst])):
            return coordinate
    return None


def _same_range(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Equal (length, offset) ranges; empty ranges are equal wherever they sit."""
    return a[0] == b[0] and (a[0] == 0 or a[1] == b[1])
