"""The group kernels of sorts and order statistics along a dim that mesh dims shard:
SplitSort (``sort argsort msort``) and SplitOrderStat (``median nanmedian kthvalue mode``
along one dim, and ``median()``/``nanmedian()`` of every element of a sharded tensor).

An order depends on every entry of the dim, so each device needs them all: the blocks are
gathered along every mesh dim that shards the dim (one line at a time, in the order every
caller follows), each padded to the longest block of its line so the gathers are even, with
the global position of every entry gathered beside it (padding has none). Each device then
puts the entries back in their order along the dim and runs torch's own function on the
whole dim - so values, indices, NaN handling and the order of equal entries are exactly
torch's on the full tensor. A sort keeps the input's placements: each device keeps its
block of the sorted dim. An order statistic drops the dim (or keeps it at size 1), so its
results are Replicate on those mesh dims. Each device holds its whole dim while the kernel
runs: the memory of an all-gather of it (of the whole tensor, for the statistic of every
element, whose result is Replicate everywhere); a sort then keeps only its own block.

Example:
    >>> import torch
    >>> blocks = [torch.tensor([[5.0, 1.0]]), torch.tensor([[3.0, 0.0]])]  # two devices
    >>> positions = [torch.tensor([0, 1]), torch.tensor([2, 3])]
    >>> whole = in_order(torch.cat(blocks, 1), torch.cat(positions), 1)
    >>> torch.sort(whole, 1).indices.narrow(1, 2, 2)  # the second device's block
    tensor([[2, 0]])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import SplitOrderStatParam, SplitSortParam
from dtorch.ir.placement import Shard
from dtorch.ir.rules.order_stats import ORDER_STATS, WHOLE_STATS
from dtorch.kernels.base import GroupKernel, KernelContext, Shards
from dtorch.kernels.softmax import sharding_groups

if TYPE_CHECKING:
    from dtorch.comm.group import ThreadGroup

#: A device's entries of the dim and their global positions (-1: padding).
Entries = tuple[torch.Tensor, torch.Tensor]


def split_sort_kernel(ctx: KernelContext, inputs: dict[int, Shards]) -> dict[int, Shards]:
    """Every held device's block of torch's sort of the whole dim (see the module)."""
    param, x_op = ctx.param, ctx.inputs[0]
    assert isinstance(param, SplitSortParam)
    dim = param.dim % x_op.ndim
    out: dict[int, Shards] = {}
    for device, whole in _whole_dims(ctx, (dim,), inputs).items():
        found = torch.sort(whole, dim=dim, descending=param.descending, stable=param.stable)
        shard = x_op.shard(device)  # its block of the sorted dim, as of the input
        start, length = shard.offset[dim], shard.shape[dim]
        # its own block, not a view of the whole dim: as small as any shard, and contiguous
        # as torch's sort result is (a write through ``.contiguous()`` must reach it)
        out[device] = [t.narrow(dim, start, length).contiguous() for t in found]
    return out


def split_order_stat_kernel(ctx: KernelContext, inputs: dict[int, Shards]) -> dict[int, Shards]:
    """Every held device's copy of torch's order statistic of the whole dim (of every
    element: ``dim`` None)."""
    param, x_op = ctx.param, ctx.inputs[0]
    assert isinstance(param, SplitOrderStatParam)
    if param.dim is None:
        every = WHOLE_STATS[param.stat]
        wholes = _whole_dims(ctx, tuple(range(x_op.ndim)), inputs)
        return {device: [every(whole)] for device, whole in wholes.items()}
    dim = param.dim % x_op.ndim
    statistic = ORDER_STATS[param.stat]
    return {
        device: list(statistic(whole, dim, param.k, param.keepdim))
        for device, whole in _whole_dims(ctx, (dim,), inputs).items()
    }


def _whole_dims(
    ctx: KernelContext, dims: tuple[int, ...], inputs: dict[int, Shards]
) -> dict[int, torch.Tensor]:
    """Each held device's block with every entry of ``dims``, in order. Every group is opened
    before anything can fail (see ``dtorch.kernels.softmax.sharding_groups``)."""
    lines, groups = sharding_groups(ctx, dims)
    group_of = dict(zip(lines, groups, strict=True))
    blocks = {d: shards[0] for d, shards in inputs.items()}
    for dim in dims:
        entries = {d: (block, _positions(ctx, d, dim, block.device)) for d, block in blocks.items()}
        for line, longest in _padded_lines(ctx, dim):
            if line in group_of:
                held = {d: _padded(entries[d], longest, dim) for d in line if d in entries}
                entries.update(_gather(group_of[line], line, held, dim))
        blocks = {d: in_order(values, places, dim) for d, (values, places) in entries.items()}
    return blocks


def _padded_lines(ctx: KernelContext, dim: int) -> list[tuple[tuple[int, ...], int]]:
    """Every line of the gathers, in order (mesh dim by mesh dim), with the length its
    blocks are padded to: its longest block's at that point. Worked out from the metadata
    for the whole mesh, so every caller pads a line alike, whichever devices it holds."""
    x_op = ctx.inputs[0]
    mesh, ndim = x_op.mesh, x_op.ndim
    lengths = {d: x_op.local_shape(d)[dim] for d in mesh.device_ids}
    padded = []
    for mesh_dim, placement in enumerate(x_op.placements):
        if not (isinstance(placement, Shard) and placement.dim % ndim == dim):
            continue
        for line in sorted({mesh.group_of(d, mesh_dim) for d in mesh.device_ids}):
            padded.append((line, max(lengths[d] for d in line)))
            lengths.update(dict.fromkeys(line, sum(lengths[d] for d in line)))
    return padded


def _positions(ctx: KernelContext, device: int, dim: int, where: torch.device) -> torch.Tensor:
    """The global positions along ``dim`` of a device's block (a box: one run), on the
    block's device (a collective's tensors share one)."""
    shard = ctx.inputs[0].shard(device)
    start = shard.offset[dim]
    return torch.arange(start, start + shard.shape[dim], device=where)


def _padded(entries: Entries, length: int, dim: int) -> Entries:
    """A block (and its positions) padded along ``dim`` to ``length`` (padding: -1)."""
    values, positions = entries
    missing = length - values.shape[dim]
    if not missing:
        return entries
    shape = [*values.shape[:dim], missing, *values.shape[dim + 1 :]]
    padding = torch.zeros(shape, dtype=values.dtype, device=values.device)
    nowhere = torch.full((missing,), -1, dtype=positions.dtype, device=positions.device)
    return torch.cat([values, padding], dim), torch.cat([positions, nowhere])


def _gather(
    group: ThreadGroup, line: tuple[int, ...], held: dict[int, Entries], dim: int
) -> dict[int, Entries]:
    """The line's padded blocks and positions concatenated, padding dropped."""
    values = group.all_gather({line.index(d): v for d, (v, _) in held.items()}, dim)
    positions = group.all_gather({line.index(d): p for d, (_, p) in held.items()}, 0)
    out: dict[int, Entries] = {}
    for rank, everything in values.items():
        real = (positions[rank] >= 0).nonzero().flatten()
        out[line[rank]] = everything.index_select(dim, real), positions[rank][real]
    return out


def in_order(values: torch.Tensor, positions: torch.Tensor, dim: int) -> torch.Tensor:
    """``values`` with its entries along ``dim`` put in the order of their ``positions``."""
    order = positions.argsort()
    if torch.equal(order, torch.arange(order.numel(), device=order.device)):
        return values
    return values.index_select(dim, order)


GROUP_KERNELS: dict[OpKind, GroupKernel] = {
    OpKind.SplitSort: split_sort_kernel,
    OpKind.SplitOrderStat: split_order_stat_kernel,
}
