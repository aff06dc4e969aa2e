"""Sub-split layouts: a Shard whose dim is a concatenation of separately chunked segments.

``Shard(d, sub_split_coordinates=(c1, ..., ck))`` cuts tensor dim ``d`` (of size ``n``) into
the segments ``[0, c1)``, ``[c1, c2)``, ..., ``[ck, n)``. Each segment is chunked over the mesh
dimension on its own with ``torch.chunk`` sizes, and a device's local tensor is the
concatenation of its chunk of every segment, in segment order. That is what ``cat`` of tensors
sharded along the cat dim gives without moving data (DTorch's layout): the coordinates are the
boundaries between the concatenated parts.

State of support: ``cat`` makes marks, elementwise operators keep them and slices at part
boundaries remove them (``dtorch.ir.rules.marked``); redistribution from and to a marked
layout, and so ``to_torch``, goes part by part (``dtorch.api.marked``); creation makes them
(``zeros_like`` of a marked tensor, ``zeros(..., placements=[marked])``) where each marked dim
is sharded by its one mesh dim (``check_marks``). Every other operator
refuses marked placements with a message naming it (``check_unmarked``), so no marked tensor
can ever produce a silently wrong value. ``Shard.plain()`` is the placement a
``view(placements)`` reinterprets it as (the local data is unchanged).

Example:
    >>> segment_pieces(10, (4,), 2, 1)
    ((2, 2), (7, 3))
    >>> local_length(10, (4,), 2, 1)
    5
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from dtorch.errors import PlacementError
from dtorch.ir.placement import Placement, Shard


def segments(size: int, coords: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """``(start, length)`` of every segment of a dim of ``size`` cut at ``coords``.

    Example:
        >>> segments(10, (4, 6))
        ((0, 4), (4, 2), (6, 4))
    """
    if coords and coords[-1] >= size:
        raise PlacementError(
            f"sub_split_coordinates {tuple(coords)} must lie inside the dim (size {size})"
        )
    bounds = (0, *coords, size)
    return tuple((a, b - a) for a, b in itertools.pairwise(bounds))


def segment_pieces(
    size: int, coords: Sequence[int], parts: int, index: int
) -> tuple[tuple[int, int], ...]:
    """Global ``(start, length)`` of the pieces device ``index`` of ``parts`` holds, in the
    order its local tensor concatenates them (``torch.chunk`` of each segment).

    Example:
        >>> segment_pieces(5, (2,), 2, 0)
        ((0, 1), (2, 2))
    """
    from dtorch.ir.sharding import chunk_bounds  # sharding imports this module

    pieces = []
    for start, length in segments(size, coords):
        offset, n = chunk_bounds(length, parts, index)
        pieces.append((start + offset, n))
    return tuple(pieces)


def local_length(size: int, coords: Sequence[int], parts: int, index: int) -> int:
    """Local length of the marked dim on device ``index``: the sum of its pieces.

    Example:
        >>> [local_length(10, (4,), 3, i) for i in range(3)]
        [4, 4, 2]
    """
    return sum(n for _, n in segment_pieces(size, coords, parts, index))


def is_marked(placements: Sequence[Placement]) -> bool:
    """Whether any placement is a Shard with sub-split coordinates.

    Example:
        >>> is_marked((Shard(0), Shard(1, sub_split_coordinates=(2,))))
        True
    """
    return any(isinstance(p, Shard) and p.has_sub_split_coordinates() for p in placements)


def check_unmarked(name: str, placements: Sequence[Placement], what: str = "an input") -> None:
    """Refuse sub-split placements in ``name``, which does not understand them.

    Example:
        >>> check_unmarked("matmul", (Shard(0, sub_split_coordinates=(4,)),))
        Traceback (most recent call last):
        ...
        dtorch.errors.PlacementError: matmul: an input is Shard(dim=0, ...
    """
    marked = [p for p in placements if isinstance(p, Shard) and p.has_sub_split_coordinates()]
    if marked:
        raise PlacementError(
            f"{name}: {what} is {marked[0]!r} (a concatenation of separately sharded parts), "
            f"which {name} does not support yet; accepted: Shard(d) without "
            f"sub_split_coordinates, Replicate(), Partial(). Redistribute it to one of them first"
        )


def marks_problem(shape: Sequence[int], placements: Sequence[Placement]) -> str | None:
    """What keeps a tensor of ``shape`` from being laid out as ``placements`` (None: nothing):
    a mark's coordinates outside its dim, or its dim sharded by another mesh dim too (the
    pieces of nested chunks are not defined).

    Example:
        >>> marks_problem((10,), (Shard(0, sub_split_coordinates=(4,)),)) is None
        True
        >>> marks_problem((10,), (Shard(0, sub_split_coordinates=(4,)), Shard(0)))
        'Shard(dim=0, sub_split_coordinates=(4,)) marks dim 0, which another mesh dim shards too'
    """
    for p in placements:
        if not (isinstance(p, Shard) and p.has_sub_split_coordinates()):
            continue
        if sum(q.is_shard(p.dim) for q in placements) > 1:
            return f"{p!r} marks dim {p.dim}, which another mesh dim shards too"
        if p.sub_split_coordinates[-1] >= shape[p.dim]:
            return f"{p!r} has a coordinate outside dim {p.dim} (size {shape[p.dim]})"
    return None


def check_marks(name: str, shape: Sequence[int], placements: Sequence[Placement]) -> None:
    """Refuse, naming ``name``, marked ``placements`` that no tensor of ``shape`` can have
    (``marks_problem``).

    Example:
        >>> check_marks("zeros", (3,), (Shard(0, sub_split_coordinates=(4,)),))
        Traceback (most recent call last):
        ...
        dtorch.errors.PlacementError: zeros: the placement Shard(dim=0, ...
    """
    problem = marks_problem(shape, placements)
    if problem is not None:
        raise PlacementError(
            f"{name}: the placement {problem}; accepted: Shard(d, sub_split_coordinates=c) "
            f"with every coordinate inside dim d and no other mesh dim sharding d, or plain "
            f"Shard(d), Replicate(), Partial()"
        )
