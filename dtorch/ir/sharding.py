"""Sharding math: the local shape and global offset of every device, for any placements.

Each tensor dimension is split with ``torch.chunk`` semantics by the mesh dimensions that shard
it, nested in ``shard_order`` (outermost first). Chunk ``i`` of ``n`` elements over ``k`` parts
has ``c = ceil(n / k)`` elements at offset ``i * c``, clipped to the end: uneven and empty
shards are normal.

Example:
    >>> from dtorch.ir.placement import Shard, Replicate
    >>> [chunk_bounds(11, 4, i) for i in range(4)]
    [(0, 3), (3, 3), (6, 3), (9, 2)]
    >>> local_shape_and_offset((11, 6), (4, 2), (Shard(0), Shard(1)), (3, 1))
    ((2, 3), (9, 3))
    >>> local_shape_and_offset((5, 4), (2,), (Replicate(),), (1,))
    ((5, 4), (0, 0))
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dtorch.ir.placement import Placement, Shard, shard_order
from dtorch.ir.subsplit import check_unmarked, segment_pieces

if TYPE_CHECKING:
    from dtorch.ir.mesh import DeviceMesh

#: Layouts whose shards are remembered: every kernel and redistribution asks for the shards
#: of the operands it touches, the same few layouts over and over (a Llama forward: about ten).
CACHED_LAYOUTS = 1 << 14


def capped_product(values: Sequence[int], cap: int) -> int:
    """The product of ``values`` (non-negative ints), or ``cap + 1`` where it exceeds ``cap``.

    For sizes read from outside (a payload, a file): ``math.prod`` of many large values
    multiplies ever longer ints, quadratic in their number, where this stops at the cap.

    Example:
        >>> capped_product((3, 4), 100), capped_product((2**62,) * 9999 + (0,), 10)
        (12, 0)
        >>> capped_product((2**62,) * 9999, 10)
        11
    """
    if 0 in values:
        return 0
    product = 1
    for value in values:
        product *= value
        if product > cap:
            return cap + 1
    return product


def sharding_mesh_dims(
    placements: Sequence[Placement], ndim: int, dims: Collection[int]
) -> tuple[int, ...]:
    """The mesh dims whose placement shards one of ``dims`` (counted from 0) of an ``ndim``-D
    tensor, in order: the lines a group kernel gathers or reduces along.

    Example:
        >>> sharding_mesh_dims((Shard(0), Shard(-1)), 2, (1,))
        (1,)
    """
    return tuple(
        m for m, p in enumerate(placements) if isinstance(p, Shard) and p.dim % ndim in dims
    )


def chunk_bounds(size: int, parts: int, index: int) -> tuple[int, int]:
    """``(offset, length)`` of chunk ``index`` when ``torch.chunk`` splits ``size`` in ``parts``."""
    step = -(-size // parts) if size else 0
    start = min(index * step, size)
    return start, min(step, size - start)


def chunk_sizes(size: int, parts: int) -> tuple[int, ...]:
    """Lengths of all ``parts`` chunks (trailing ones may be empty)."""
    lengths = filled_chunk_sizes(size, parts)
    return lengths + (0,) * (parts - len(lengths))


def filled_chunk_sizes(size: int, parts: int) -> tuple[int, ...]:
    """Lengths of the non-empty chunks when ``torch.chunk`` splits ``size`` in ``parts``: at
    most ``size`` of them, whatever ``parts`` is (computed in that many steps, not ``parts``).

    Example:
        >>> filled_chunk_sizes(5, 4), filled_chunk_sizes(3, 2**64), filled_chunk_sizes(0, 3)
        ((2, 2, 1), (1, 1, 1), ())
    """
    if size == 0:
        return ()
    step = -(-size // parts)
    full, rest = divmod(size, step)
    return (step,) * full + ((rest,) if rest else ())


def local_shape_and_offset(
    shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    coordinate: Sequence[int],
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Local shape and global offset of the device at ``coordinate`` of the mesh.

    A Shard with sub-split coordinates (``dtorch.ir.subsplit``) gives the local length of its
    pieces, and the offset of its first piece (the pieces are not one contiguous range).
    Remembered per layout (``CACHED_LAYOUTS``): kernel streams ask on every operator.
    """
    return _local_shape_and_offset(
        tuple(shape), tuple(mesh_shape), tuple(placements), tuple(coordinate)
    )


@functools.lru_cache(maxsize=CACHED_LAYOUTS)
def _local_shape_and_offset(
    shape: tuple[int, ...],
    mesh_shape: tuple[int, ...],
    placements: tuple[Placement, ...],
    coordinate: tuple[int, ...],
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    local = list(shape)
    offset = [0] * len(shape)
    for tensor_dim in sorted({p.dim for p in placements if isinstance(p, Shard)}):
        for mesh_dim in shard_order(placements, tensor_dim):
            start, length = _bounds(
                placements[mesh_dim], local[tensor_dim], mesh_shape[mesh_dim], coordinate[mesh_dim]
            )
            offset[tensor_dim] += start
            local[tensor_dim] = length
    return tuple(local), tuple(offset)


# A marked shard holds one piece of every segment; a plain one a single chunk.
def _bounds(placement: Placement, size: int, parts: int, index: int) -> tuple[int, int]:
    coords = placement.get_sub_split_coordinates()  # type: ignore[attr-defined]
    if not coords:
        return chunk_bounds(size, parts, index)
    pieces = segment_pieces(size, coords, parts, index)
    return pieces[0][0], sum(n for _, n in pieces)


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """Where one device's shard lies in the full tensor, and whether it contributes to a sum.

    ``partial_owner`` is true when, on every Partial mesh dimension, the device sits at
    coordinate 0: that is the device that holds a distributed full value (others hold zeros).
    """

    shape: tuple[int, ...]
    offset: tuple[int, ...]
    partial_owner: bool

    def slices(self) -> tuple[slice, ...]:
        """Index of this shard in the full tensor."""
        return tuple(slice(o, o + s) for o, s in zip(self.offset, self.shape, strict=True))


def shard_spec(
    shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    coordinate: Sequence[int],
) -> ShardSpec:
    """The ShardSpec of the device at ``coordinate``."""
    check_unmarked("the layout of a tensor", placements, "a placement")  # not one box
    local, offset = local_shape_and_offset(shape, mesh_shape, placements, coordinate)
    return ShardSpec(local, offset, is_partial_owner(placements, coordinate))


def is_partial_owner(placements: Sequence[Placement], coordinate: Sequence[int]) -> bool:
    """True where the device sits at coordinate 0 of every Partial mesh dim: the one that
    holds a distributed full value (``ShardSpec.partial_owner``).

    Example:
        >>> from dtorch.ir.placement import Partial
        >>> is_partial_owner((Partial(), Shard(0)), (0, 1)), is_partial_owner((Partial(),), (1,))
        (True, False)
    """
    return all(c == 0 for c, p in zip(coordinate, placements, strict=True) if p.is_partial())


def local_pieces(
    shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    coordinate: Sequence[int],
) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per tensor dim, the global ``(start, length)`` runs the device's local tensor holds
    along it, in order: its box for a plain layout (one run), its piece of every segment
    along a marked dim (``segment_pieces``; its mesh dim the only one sharding it, as
    ``dtorch.ir.subsplit.check_marks`` makes sure).

    Example:
        >>> local_pieces((10, 4), (2,), (Shard(0, sub_split_coordinates=(4,)),), (1,))
        (((2, 2), (7, 3)), ((0, 4),))
    """
    local, offset = local_shape_and_offset(shape, mesh_shape, placements, coordinate)
    runs: list[tuple[tuple[int, int], ...]] = [
        ((o, n),) for o, n in zip(offset, local, strict=True)
    ]
    for m, p in enumerate(placements):
        if isinstance(p, Shard) and p.has_sub_split_coordinates():
            coords = p.sub_split_coordinates
            runs[p.dim] = segment_pieces(shape[p.dim], coords, mesh_shape[m], coordinate[m])
    return tuple(runs)


def device_shard(
    shape: Sequence[int], mesh: DeviceMesh, placements: Sequence[Placement], device: int
) -> ShardSpec:
    """The ShardSpec of device ``device`` of ``mesh`` (MeshError if it is not in the mesh).

    Example:
        >>> from dtorch.ir.mesh import init_device_mesh
        >>> device_shard((5,), init_device_mesh("cpu", 2), (Shard(0),), 1).offset
        (3,)
    """
    return _device_shard(tuple(shape), mesh, tuple(placements), device)


@functools.lru_cache(maxsize=CACHED_LAYOUTS)
def _device_shard(
    shape: tuple[int, ...], mesh: DeviceMesh, placements: tuple[Placement, ...], device: int
) -> ShardSpec:
    return shard_spec(shape, mesh.shape, placements, mesh.coordinate_of(device))


def is_replica_leader(placements: Sequence[Placement], coordinate: Sequence[int]) -> bool:
    """True for the one device per distinct shard whose copy a gather should read.

    Replicate mesh dims hold copies: only coordinate 0 along them is read.
    """
    return all(c == 0 for c, p in zip(coordinate, placements, strict=True) if p.is_replicate())
