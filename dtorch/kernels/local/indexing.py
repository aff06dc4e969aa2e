"""Local kernels of GetItem, Concat, Chunk and RepeatInterleave.

GetItem translates the global index to the device's local one: a slice of a sharded dim
starts at the first element of the device's output chunk, counted from the device's input
offset (the rule has checked that this lands on the chunk). Integer indices and unsharded
dims need no translation.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import GetItemParam, SliceIndex
    >>> from dtorch.ir.placement import Shard
    >>> from dtorch.ir.span import Span
    >>> mesh = init_device_mesh("cpu", 2)
    >>> x = Operand(1, (8,), torch.int64, mesh, (Shard(0),))
    >>> y = Operand(2, (4,), torch.int64, mesh, (Shard(0),))
    >>> op = Operator(3, "getitem_3", GetItemParam((SliceIndex(2, 6),)), (1,), (2,), Span.unknown())
    >>> getitem_kernel(KernelContext(op, (x,), (y,), (0, 1)), 1, [torch.arange(4, 8)])
    [tensor([4, 5])]
"""

from __future__ import annotations

import torch

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import (
    ChunkParam,
    ConcatParam,
    GetItemParam,
    RepeatInterleaveParam,
    RepeatParam,
    SliceIndex,
)
from dtorch.ir.rules.indexing import plan_index
from dtorch.ir.subsplit import is_marked
from dtorch.kernels.base import KernelContext, LocalKernel, Shards
from dtorch.kernels.local.marked import marked_getitem_kernel

_Index = int | slice | None


def getitem_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``t[index]`` on the local shard, with slices moved to the device's chunk."""
    param = ctx.param
    assert isinstance(param, GetItemParam)
    source, result = ctx.inputs[0], ctx.outputs[0]
    if is_marked(source.placements):  # a slice at part boundaries (dtorch.ir.rules.marked)
        return marked_getitem_kernel(ctx, device, inputs)
    entries, _, _ = plan_index(ctx.operator.name, source.shape, param.index)
    src, out = source.shard(device), result.shard(device)
    index: list[_Index] = []
    d = j = 0
    for entry in entries:
        if entry is None:
            index.append(None)
        elif isinstance(entry, SliceIndex):
            index.append(local_slice(entry, out.shape[j], out.offset[j], src.offset[d]))
        else:
            index.append(entry - src.offset[d])
        d += entry is not None
        j += not isinstance(entry, int)
    return [inputs[0][tuple(index)]]


def local_slice(entry: SliceIndex, count: int, out_offset: int, in_offset: int) -> slice:
    """The local slice holding output elements ``[out_offset, out_offset + count)``."""
    if count == 0:
        return slice(0, 0)
    start = entry.start + out_offset * entry.step - in_offset
    return slice(start, start + (count - 1) * entry.step + 1, entry.step)


def concat_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``torch.cat`` (or ``torch.stack``) of the local shards along ``param.dim``."""
    param = ctx.param
    assert isinstance(param, ConcatParam)
    fn = torch.stack if param.stack else torch.cat
    return [fn(inputs, param.dim)]


def chunk_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``torch.chunk`` of the local shard (the rule keeps the chunked dim whole)."""
    param = ctx.param
    assert isinstance(param, ChunkParam)
    return list(torch.chunk(inputs[0], param.chunks, param.dim))


def repeat_interleave_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``repeat_interleave`` of the local shard (the rule checked the chunks line up)."""
    param = ctx.param
    assert isinstance(param, RepeatInterleaveParam)
    return [torch.repeat_interleave(inputs[0], param.repeats, param.dim)]


def repeat_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``repeat`` (tile) of the local shard: the rule keeps tiled dims whole."""
    param = ctx.param
    assert isinstance(param, RepeatParam)
    return [inputs[0].repeat(param.repeats)]


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.Repeat: repeat_kernel,
    OpKind.GetItem: getitem_kernel,
    OpKind.Concat: concat_kernel,
    OpKind.Chunk: chunk_kernel,
    OpKind.RepeatInterleave: repeat_interleave_kernel,
}
