"""The local kernel of a slice of a sub-split (marked) dim at part boundaries.

A device's local tensor of ``Shard(d, sub_split_coordinates=c)`` is its pieces of every
segment, in order (``dtorch.ir.subsplit``); the slice ``[a, b)`` from one boundary to another
is the run of pieces of the segments inside it, a different local range on every device.

Example:
    >>> segment_run(10, (4,), 2, 1, 4, 10)
    (2, 3)
"""

from __future__ import annotations

from collections.abc import Sequence

from dtorch.ir.params import GetItemParam, SliceIndex
from dtorch.ir.placement import Shard
from dtorch.ir.rules.indexing import plan_index
from dtorch.ir.subsplit import segment_pieces
from dtorch.kernels.base import KernelContext, Shards


def segment_run(
    size: int, coords: Sequence[int], parts: int, index: int, start: int, stop: int
) -> tuple[int, int]:
    """Local ``(start, length)`` of device ``index``'s pieces of the segments in
    ``[start, stop)`` (both on boundaries).

    Example:
        >>> segment_run(10, (4, 6), 2, 0, 4, 6)
        (2, 1)
    """
    bounds = (0, *coords)
    local = length = 0
    for begin, (_, n) in zip(bounds, segment_pieces(size, coords, parts, index), strict=True):
        if begin < start:
            local += n
        elif begin < stop:
            length += n
    return local, length


def marked_getitem_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``t[a:b]`` of a marked dim at part boundaries (``dtorch.ir.rules.marked``)."""
    param = ctx.param
    assert isinstance(param, GetItemParam)
    source = ctx.inputs[0]
    entries, _, _ = plan_index(ctx.operator.name, source.shape, param.index)
    coordinate = source.mesh.coordinate_of(device)
    for m, p in enumerate(source.placements):
        if not (isinstance(p, Shard) and p.has_sub_split_coordinates()):
            continue
        entry = entries[p.dim]
        assert isinstance(entry, SliceIndex)  # the rule accepts nothing else
        size = source.shape[p.dim]
        if (entry.start, entry.stop) != (0, size):
            parts = source.mesh.shape[m]
            run = segment_run(size, p.sub_split_coordinates, parts, coordinate[m], *_ends(entry))
            return [inputs[0].narrow(p.dim, *run)]
    return [inputs[0]]


def _ends(entry: SliceIndex) -> tuple[int, int]:
    return entry.start, entry.stop
