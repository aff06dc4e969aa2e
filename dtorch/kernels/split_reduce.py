"""The group kernels of operators over a dim that mesh dims shard: SplitReduce (``max min
prod any all argmax argmin``, and the values and indices of ``max(dim)``/``min(dim)``),
SplitTopK (``topk``), SplitScan (``cumsum cumprod logcumsumexp``) and SplitCumExtreme
(``cummax cummin``).

Each device reduces its own block as torch would the whole tensor; the blocks' results (one
number per output entry, two with indices) are gathered along every mesh dim that shards a
reduced dim (one line at a time, in the one (mesh dim, line) order every caller follows) and
reduced again. An index is made global first (the block's offset added). Of equal extremes
the smallest index wins, and a NaN beats every number (the first NaN's index), as in torch.
A device whose block holds no entry of a reduced dim still takes part in the gathers, with
the reduction's identity (``-inf`` or the dtype's least value to a max) and an index above
every real one.

A top ``k`` is picked the same way: each device's block's top ``k`` (padded to ``k`` where the
block holds fewer), gathered along the line, and the ``k`` first of them in (value, index)
order kept: of equal values the smallest indices (torch's choice among equal values is
unspecified, and differs between its kernels); a NaN is the largest, as torch has it.

A scan runs on each block, then each device adds (multiplies, log-adds) the totals of the
blocks before its own along the dim, gathered among the devices that split it (one number per
row and device; in block order, so nested shards need nothing more). A running extreme does
the same with each block's last (value, index): the blocks before a device's are folded as
torch's kernel runs (a later equal value wins, and a NaN, once met, stays with the last NaN's
index), and that carry stands wherever it beats the device's own running extreme.

Example:
    >>> import torch
    >>> left, right = torch.tensor([[1.0, 7.0]]), torch.tensor([[7.0, 2.0]])  # two blocks
    >>> values = torch.stack([left.amax(1), right.amax(1)])  # what the line gathers
    >>> indices = torch.stack([left.argmax(1), right.argmax(1) + 2])  # made global
    >>> picked(values, indices, ReduceKind.ARGMAX)
    (tensor([7.]), tensor([1]))
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.opkind import MaxMinKind, OpKind, ReduceKind, ScanKind
from dtorch.ir.params import (
    SplitCumExtremeParam,
    SplitReduceParam,
    SplitScanParam,
    SplitTopKParam,
)
from dtorch.ir.rules.reduce import reduce_plan
from dtorch.ir.rules.torch_ops import REDUCE, SCAN
from dtorch.ir.sharding import ShardSpec, sharding_mesh_dims
from dtorch.kernels.base import GroupKernel, KernelContext, Shards
from dtorch.kernels.softmax import sharding_groups

if TYPE_CHECKING:
    from dtorch.comm.group import ThreadGroup

#: An index no real one reaches: an empty block's, which never wins.
_NO_INDEX = torch.iinfo(torch.int64).max
_HIGH = (ReduceKind.MAX, ReduceKind.ARGMAX)
_INDEXED = (ReduceKind.ARGMAX, ReduceKind.ARGMIN)

#: A block's partial result: the values, and their global indices where the result has them.
Part = tuple[torch.Tensor, torch.Tensor | None]


def split_reduce_kernel(ctx: KernelContext, inputs: dict[int, Shards]) -> dict[int, Shards]:
    """Every held device's copy of the reduction (see the module).

    Every line's group is opened before anything can fail, in the callers' one order (see
    ``dtorch.kernels.softmax``): a caller that fails later still holds the groups its peers
    wait in, so the runtime's abort reaches them."""
    param, x_op = ctx.param, ctx.inputs[0]
    assert isinstance(param, SplitReduceParam)
    dims = reduce_plan(ctx.operator.name, x_op.shape, param.dims, param.keepdim)[0]
    lines, groups = sharding_groups(ctx, dims)
    parts = {d: _block(ctx, param, dims, d, shards[0]) for d, shards in inputs.items()}
    for line, group in zip(lines, groups, strict=True):
        held = [d for d in line if d in parts]
        values = group.all_gather({line.index(d): parts[d][0].unsqueeze(0) for d in held})
        indices = _gathered_indices(group, line, held, parts)
        for rank, stacked in values.items():
            parts[line[rank]] = _combined(param.reduce, stacked, indices.get(rank))
    return {d: _outputs(param, part) for d, part in parts.items()}


def _gathered_indices(
    group: ThreadGroup, line: tuple[int, ...], held: list[int], parts: dict[int, Part]
) -> dict[int, torch.Tensor]:
    """The line's blocks' global indices (none for a reduction without them)."""
    local = {line.index(d): index.unsqueeze(0) for d in held if (index := parts[d][1]) is not None}
    return group.all_gather(local) if local else {}


def _outputs(param: SplitReduceParam, part: Part) -> Shards:
    values, indices = part
    if param.reduce not in _INDEXED and not param.indices:
        return [values]
    assert indices is not None
    return [indices] if param.reduce in _INDEXED else [values, indices]


def _block(
    ctx: KernelContext, param: SplitReduceParam, dims: tuple[int, ...], device: int, x: torch.Tensor
) -> Part:
    """One device's block reduced over ``dims``, its indices global."""
    if param.reduce not in _INDEXED and not param.indices:
        if param.reduce in _HIGH or param.reduce is ReduceKind.MIN:
            return _extreme(param.reduce, x, dims, param.keepdim), None
        return REDUCE[param.reduce](x, dims, param.keepdim, param.dtype), None
    offset = ctx.inputs[0].shard(device).offset
    if len(dims) == 1:
        return _along(param.reduce, x, dims[0], offset[dims[0]], param.keepdim)
    return _flat(param.reduce, x, offset, ctx.inputs[0].shape, param.keepdim)


def _extreme(
    kind: ReduceKind, x: torch.Tensor, dims: tuple[int, ...], keepdim: bool
) -> torch.Tensor:
    """``amax``/``amin`` of a block; the identity where it holds no entry of ``dims``."""
    if any(x.shape[d] == 0 for d in dims):
        shape = [1 if d in dims else s for d, s in enumerate(x.shape) if keepdim or d not in dims]
        return torch.full(shape, _identity(kind, x.dtype), dtype=x.dtype, device=x.device)
    return torch.amax(x, dims, keepdim) if kind in _HIGH else torch.amin(x, dims, keepdim)


def _along(kind: ReduceKind, x: torch.Tensor, dim: int, start: int, keepdim: bool) -> Part:
    """A block's extremes along ``dim`` and their indices in the whole dim."""
    if x.shape[dim] == 0:
        values = _extreme(kind, x, (dim,), keepdim)
        return values, torch.full(values.shape, _NO_INDEX, device=x.device)
    found = torch.max(x, dim, keepdim) if kind in _HIGH else torch.min(x, dim, keepdim)
    return found.values, found.indices.add_(start)


def _flat(
    kind: ReduceKind,
    x: torch.Tensor,
    offset: tuple[int, ...],
    shape: tuple[int, ...],
    keepdim: bool,
) -> Part:
    """A block's extreme over every dim and its index in the whole tensor, flattened."""
    out_shape = (1,) * x.ndim if keepdim else ()
    if x.numel() == 0:
        value = torch.full(out_shape, _identity(kind, x.dtype), dtype=x.dtype, device=x.device)
        return value, torch.full(out_shape, _NO_INDEX, device=x.device)
    flat = x.reshape(-1)
    local = flat.argmax() if kind in _HIGH else flat.argmin()
    where = torch.unravel_index(local, x.shape)  # the block's coordinates of the extreme
    index = sum(
        int(c + o) * stride for c, o, stride in zip(where, offset, _strides(shape), strict=True)
    )
    value = flat[local].reshape(out_shape)
    return value, torch.full(out_shape, index, device=x.device)


def _strides(shape: tuple[int, ...]) -> list[int]:
    # the row-major strides of ``shape``: a flat index from coordinates
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return strides[::-1]


def _combined(kind: ReduceKind, stacked: torch.Tensor, indices: torch.Tensor | None) -> Part:
    """The line's blocks' results (stacked along dim 0) reduced to one."""
    if indices is not None:
        return picked(stacked, indices, kind)
    if kind in _HIGH:
        return stacked.amax(0), None
    if kind is ReduceKind.MIN:
        return stacked.amin(0), None
    # any/all/prod of the blocks' results, in their dtype (torch's prod of small ints and
    # bools would give int64: the result's dtype= wraps the same way modulo its size)
    return REDUCE[kind](stacked, (0,), False, None).to(stacked.dtype), None


def picked(values: torch.Tensor, indices: torch.Tensor, kind: ReduceKind) -> Part:
    """Of candidates stacked along dim 0, each entry's extreme and its smallest index (a NaN
    beats every number, as torch's ``max``/``argmax`` have it)."""
    best = values.amax(0) if kind in _HIGH else values.amin(0)
    hit = (values == best) | values.isnan()  # a NaN is only there where best is NaN
    position = indices.masked_fill(~hit, _NO_INDEX).argmin(0, keepdim=True)
    return values.gather(0, position)[0], indices.gather(0, position)[0]


def _identity(kind: ReduceKind, dtype: torch.dtype) -> float | int | bool:
    """What an empty block contributes to a max (the dtype's least value) or a min."""
    high = kind in _HIGH
    if dtype is torch.bool:
        return not high
    if dtype.is_floating_point:
        return -float("inf") if high else float("inf")
    info = torch.iinfo(dtype)
    return info.min if high else info.max


def split_topk_kernel(ctx: KernelContext, inputs: dict[int, Shards]) -> dict[int, Shards]:
    """Every held device's copy of the top ``k`` values and their indices (see the module;
    every line's group opened first, as ``split_reduce_kernel`` does)."""
    param, x_op = ctx.param, ctx.inputs[0]
    assert isinstance(param, SplitTopKParam)
    dim = param.dim % x_op.ndim
    lines, groups = sharding_groups(ctx, (dim,) if param.k else ())  # k=0: nothing to pick
    parts = {
        d: _top_block(shards[0], param, dim, x_op.shard(d).offset[dim])
        for d, shards in inputs.items()
    }
    for line, group in zip(lines, groups, strict=True):
        held = [d for d in line if d in parts]
        values = group.all_gather({line.index(d): parts[d][0] for d in held}, dim)
        indices = group.all_gather({line.index(d): parts[d][1] for d in held}, dim)
        for rank, candidates in values.items():
            parts[line[rank]] = top(candidates, indices[rank], param.k, dim, param.largest)
    # contiguous, as torch's topk is (a write through ``contiguous()`` of it must reach it)
    return {d: [part.contiguous() for part in pair] for d, pair in parts.items()}


def _top_block(
    x: torch.Tensor, param: SplitTopKParam, dim: int, start: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """A block's top ``k`` along ``dim`` (of equal values the first), indices global, padded
    to ``k`` entries (index ``_NO_INDEX``: they never win) where the block holds fewer."""
    values, indices = _first_top(x, min(param.k, x.shape[dim]), dim, param.largest)
    indices.add_(start)
    missing = param.k - values.shape[dim]
    if not missing:
        return values, indices
    shape = [*x.shape[:dim], missing, *x.shape[dim + 1 :]]
    padding = torch.zeros(shape, dtype=x.dtype, device=x.device)
    nowhere = torch.full(shape, _NO_INDEX, device=x.device)
    return torch.cat([values, padding], dim), torch.cat([indices, nowhere], dim)


def _first_top(
    x: torch.Tensor, k: int, dim: int, largest: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """The top ``k`` along ``dim`` where, of values equal to the ``k``-th, the first are
    taken (torch's ``topk`` takes any of them): torch's own where no value equal to the
    ``k``-th is left out (the set is then the only one), else every entry better than the
    ``k``-th and the first of the equal ones up to ``k``, in index order.

    Example:
        >>> [t.tolist() for t in _first_top(torch.tensor([1, 3, 3, 0, 3]), 2, 0, True)]
        [[3, 3], [1, 2]]
    """
    if k == 0:
        empty = x.narrow(dim, 0, 0)
        return empty, torch.empty(empty.shape, dtype=torch.int64, device=x.device)
    found = torch.topk(x, k, dim, largest)
    kth = found.values.narrow(dim, k - 1, 1)
    kth_nan = kth.isnan()
    if not kth_nan.any():  # the usual case: is every value equal to the k-th one taken?
        equal = x == kth
        if torch.equal(equal.sum(dim), (found.values == kth).sum(dim)):
            return found.values, found.indices  # then the top k are one set, ties or not
    nan = x.isnan()  # a NaN is the largest
    better = (x > kth) | (nan & ~kth_nan) if largest else (x < kth) | (kth_nan & ~nan)
    equal = (x == kth) | (nan & kth_nan)
    wanted = k - better.sum(dim, keepdim=True)
    taken = better | (equal & (equal.cumsum(dim) <= wanted))
    # exactly k taken per row: their positions are the k smallest of these distinct keys
    position = torch.arange(x.shape[dim], device=x.device).reshape(
        [-1 if d == dim else 1 for d in range(x.ndim)]
    )
    key = torch.where(taken, position, position + x.shape[dim])
    indices = torch.topk(key, k, dim, largest=False).indices
    return x.gather(dim, indices), indices


def top(
    values: torch.Tensor, indices: torch.Tensor, k: int, dim: int, largest: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Of candidates along ``dim``, the first ``k`` in (real before padding, value, smaller
    index) order, values sorted as torch's ``topk`` sorts them (a NaN the largest).

    Example:
        >>> values, indices = torch.tensor([5.0, 7.0, 5.0, 0.0]), torch.tensor([9, 4, 2, 3])
        >>> [t.tolist() for t in top(values, indices, 3, 0, True)]
        [[7.0, 5.0, 5.0], [4, 2, 9]]
    """
    # stable sorts: the key sorted last is the first compared
    values, indices = _sorted(indices, values, indices, dim)
    values, indices = _sorted(values, values, indices, dim, descending=largest)
    values, indices = _sorted((indices == _NO_INDEX).to(torch.uint8), values, indices, dim)
    return values.narrow(dim, 0, k), indices.narrow(dim, 0, k)


def _sorted(
    key: torch.Tensor,
    values: torch.Tensor,
    indices: torch.Tensor,
    dim: int,
    descending: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``values`` and ``indices`` in the (stable) order of ``key`` along ``dim``."""
    position = torch.argsort(key, dim=dim, descending=descending, stable=True)
    return values.gather(dim, position), indices.gather(dim, position)


def split_scan_kernel(ctx: KernelContext, inputs: dict[int, Shards]) -> dict[int, Shards]:
    """Every held device's block of the scan (see the module): its own scan carried on from
    the totals of the blocks before it. One group per plane of devices that split the dim
    (the devices alike on every other mesh dim), opened first, in one order."""
    param, x_op = ctx.param, ctx.inputs[0]
    assert isinstance(param, SplitScanParam)
    dim = param.dim % x_op.ndim
    planes, groups = _planes(ctx, dim)
    scans = {d: SCAN[param.scan](shards[0], dim, param.dtype) for d, shards in inputs.items()}
    for plane, group in zip(planes, groups, strict=True):
        held = [d for d in plane if d in scans]
        totals = group.all_gather({plane.index(d): _last(scans[d], dim) for d in held}, dim)
        blocks = [x_op.shard(e) for e in plane]
        for rank, gathered in totals.items():
            before = _earlier(blocks, rank, dim)
            scans[plane[rank]] = _carried(param.scan, scans[plane[rank]], gathered, before, dim)
    return {d: [scan] for d, scan in scans.items()}


def _planes(ctx: KernelContext, dim: int) -> tuple[list[tuple[int, ...]], list[ThreadGroup]]:
    """The planes of devices that split ``dim`` of the first input and hold a device of this
    caller (sorted), and their groups, opened in that order."""
    x_op = ctx.inputs[0]
    assert ctx.groups is not None, "a group kernel needs the caller's ThreadGroupManager"
    splitting = sharding_mesh_dims(x_op.placements, x_op.ndim, (dim,))
    planes = sorted({_plane(x_op.mesh, d, splitting) for d in ctx.devices})
    groups = [ctx.groups.get_group(x_op.mesh.device_kind, plane, ctx.devices) for plane in planes]
    return planes, groups


def _plane(mesh: DeviceMesh, device: int, splitting: Sequence[int]) -> tuple[int, ...]:
    """The devices of ``mesh`` alike ``device`` on every mesh dim but ``splitting``."""
    coordinate = list(mesh.coordinate_of(device))
    plane = []
    for place in itertools.product(*(range(mesh.shape[m]) for m in splitting)):
        for m, c in zip(splitting, place, strict=True):
            coordinate[m] = c
        plane.append(mesh.device_at(coordinate))
    return tuple(plane)


def _earlier(blocks: list[ShardSpec], rank: int, dim: int) -> list[int]:
    """The ranks of the blocks holding entries of ``dim`` before ``rank``'s, in block order
    (what a scan carries on from; empty blocks add nothing)."""
    start = blocks[rank].offset[dim]
    before = [r for r, b in enumerate(blocks) if b.shape[dim] and b.offset[dim] < start]
    return sorted(before, key=lambda r: blocks[r].offset[dim])


def _last(t: torch.Tensor, dim: int) -> torch.Tensor:
    """The last entry along ``dim`` (zeros for an empty block: ``_earlier`` never picks it)."""
    if t.shape[dim]:
        return t.narrow(dim, t.shape[dim] - 1, 1)
    shape = [1 if d == dim else s for d, s in enumerate(t.shape)]
    return torch.zeros(shape, dtype=t.dtype, device=t.device)


def _carried(
    kind: ScanKind, scan: torch.Tensor, totals: torch.Tensor, before: list[int], dim: int
) -> torch.Tensor:
    """A block's scan carried on from the totals (along ``dim``) of the blocks ``before``."""
    if not before:
        return scan
    chosen = totals.index_select(dim, torch.tensor(before, device=totals.device))
    if kind is ScanKind.SUM:
        return scan + chosen.sum(dim, keepdim=True, dtype=scan.dtype)
    if kind is ScanKind.PROD:
        return scan * chosen.prod(dim, keepdim=True, dtype=scan.dtype)
    return torch.logaddexp(scan, chosen.logsumexp(dim, keepdim=True))


def split_cum_extreme_kernel(ctx: KernelContext, inputs: dict[int, Shards]) -> dict[int, Shards]:
    """Every held device's block of ``cummax``/``cummin`` (see the module): its own running
    extreme, indices made global, where the blocks before it do not beat it."""
    param, x_op = ctx.param, ctx.inputs[0]
    assert isinstance(param, SplitCumExtremeParam)
    dim, high = param.dim % x_op.ndim, param.extreme is MaxMinKind.MAX
    planes, groups = _planes(ctx, dim)
    runs = {d: _run(s[0], dim, high, x_op.shard(d).offset[dim]) for d, s in inputs.items()}
    for plane, group in zip(planes, groups, strict=True):
        held = [d for d in plane if d in runs]
        values = group.all_gather({plane.index(d): _last(runs[d][0], dim) for d in held}, dim)
        indices = group.all_gather({plane.index(d): _last(runs[d][1], dim) for d in held}, dim)
        blocks = [x_op.shard(e) for e in plane]
        for rank, gathered in values.items():
            carry = _fold(gathered, indices[rank], _earlier(blocks, rank, dim), dim, high)
            if carry is not None:
                runs[plane[rank]] = _beaten(runs[plane[rank]], carry, high)
    return {d: list(run) for d, run in runs.items()}


Run = tuple[torch.Tensor, torch.Tensor]


def _run(x: torch.Tensor, dim: int, high: bool, start: int) -> Run:
    """A block's running extreme and its global indices."""
    found = torch.cummax(x, dim) if high else torch.cummin(x, dim)
    return found.values, found.indices.add_(start)


def _wins(new: torch.Tensor, old: torch.Tensor, high: bool) -> torch.Tensor:
    """Where a later running extreme replaces an earlier one, as torch's kernel has it: a
    NaN always, a number where the earlier is not NaN and it is at least as extreme."""
    reached = new >= old if high else new <= old
    return new.isnan() | (~old.isnan() & reached)


def _fold(
    values: torch.Tensor, indices: torch.Tensor, before: list[int], dim: int, high: bool
) -> Run | None:
    """The running extreme over the blocks ``before`` (in order), from their last entries."""
    carry: Run | None = None
    for r in before:
        value, index = values.narrow(dim, r, 1), indices.narrow(dim, r, 1)
        if carry is not None:
            win = _wins(value, carry[0], high)
            value, index = torch.where(win, value, carry[0]), torch.where(win, index, carry[1])
        carry = value, index
    return carry


def _beaten(run: Run, carry: Run, high: bool) -> Run:
    """A block's running extreme where it beats the blocks' before it, else theirs."""
    own = _wins(run[0], carry[0], high)
    return torch.where(own, run[0], carry[0]), torch.where(own, run[1], carry[1])


GROUP_KERNELS: dict[OpKind, GroupKernel] = {
    OpKind.SplitReduce: split_reduce_kernel,
    OpKind.SplitTopK: split_topk_kernel,
    OpKind.SplitScan: split_scan_kernel,
    OpKind.SplitCumExtreme: split_cum_extreme_kernel,
}
