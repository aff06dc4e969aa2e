"""The planner's compact layout: one ``(kind, pos)`` entry per mesh dimension.

``kind`` is ``REPLICATE``, ``PARTIAL`` or the sharded tensor dimension; ``pos`` is the nesting
position of a shard among the mesh dims that split the same tensor dim (0 = outermost). Mesh
dims of size 1 are always ``REPLICATE``: one device holds the whole value whatever the
placement says, so the planner never spends a step on them.

Example:
    >>> from dtorch.ir.placement import Shard, Partial, Replicate
    >>> layout = from_placements((Shard(0, 1), Partial(), Shard(0, 0)), (2, 2, 3))
    >>> layout
    ((0, 1), (-2, 0), (0, 0))
    >>> to_placements(layout, 1)
    (Shard(dim=0, split_order=1), Partial(sum), Shard(dim=0, split_order=0))
    >>> from_placements((Shard(1), Replicate()), (1, 2))
    ((-1, 0), (-1, 0))
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dtorch.ir.placement import (
    Partial,
    Placement,
    Replicate,
    Shard,
    normalize_placements,
    shard_order,
)

REPLICATE = -1
PARTIAL = -2

Entry = tuple[int, int]
Layout = tuple[Entry, ...]


def from_placements(placements: Sequence[Placement], mesh_shape: Sequence[int]) -> Layout:
    """The effective layout of normalised ``placements`` on a mesh of ``mesh_shape``."""
    entries: list[Entry] = []
    for m, p in enumerate(placements):
        if mesh_shape[m] == 1 or p.is_replicate():
            entries.append((REPLICATE, 0))
        elif isinstance(p, Shard):
            order = [o for o in shard_order(placements, p.dim) if mesh_shape[o] > 1]
            entries.append((p.dim, order.index(m)))
        else:
            entries.append((PARTIAL, 0))
    return tuple(entries)


def to_placements(layout: Layout, tensor_ndim: int) -> tuple[Placement, ...]:
    """Canonical placements of ``layout`` (sub-split positions only where not mesh order)."""
    raw = [_placement(kind, pos) for kind, pos in layout]
    return normalize_placements(raw, len(layout), tensor_ndim)


def _placement(kind: int, pos: int) -> Placement:
    if kind == REPLICATE:
        return Replicate()
    return Partial() if kind == PARTIAL else Shard(kind, pos)


def splits(layout: Layout, tensor_dim: int) -> int:
    """How many mesh dims split ``tensor_dim``."""
    return sum(1 for kind, _ in layout if kind == tensor_dim)


def is_innermost(layout: Layout, mesh_dim: int) -> bool:
    """True when ``mesh_dim`` shards a tensor dim and is its innermost split."""
    kind, pos = layout[mesh_dim]
    return kind >= 0 and pos == splits(layout, kind) - 1


def with_entry(layout: Layout, mesh_dim: int, kind: int) -> Layout:
    """``layout`` with ``mesh_dim`` set to ``kind``; a new shard becomes the innermost split.

    The caller has made sure ``mesh_dim`` was R, P or the innermost split of its tensor dim,
    so no other mesh dim's position changes.
    """
    cleared = (*layout[:mesh_dim], (REPLICATE, 0), *layout[mesh_dim + 1 :])
    pos = splits(cleared, kind) if kind >= 0 else 0
    return (*layout[:mesh_dim], (kind, pos), *layout[mesh_dim + 1 :])


def max_local_numel(layout: Layout, shape: Sequence[int], mesh_shape: Sequence[int]) -> int:
    """Elements of the largest local shard: nested ceil-chunks equal one ceil by the product."""
    parts = [1] * len(shape)
    for m, (kind, _) in enumerate(layout):
        if kind >= 0:
            parts[kind] *= mesh_shape[m]
    return math.prod(-(-size // k) for size, k in zip(shape, parts, strict=True))
