"""The SplitSoftmax group kernel: ``softmax``/``log_softmax`` over a dim that mesh dims shard
(the vocab-parallel softmax of Megatron, DTensor's ``loss_parallel``).

Each device holds a block of every row along the softmax dim. Each row's maximum is
all-reduced (max) along every mesh dim that shards the softmax dim, then the sum of
``exp(x - max)`` (sum), and each device finishes its own block as torch's kernel does:
``exp(x - max) / sum``, or ``x - max - log(sum)``. Two all-reduces of one number per row,
where gathering the dim would move every entry. A device holding no entries of the dim
contributes -inf and 0. float16 and bfloat16 compute in float32, as torch's CPU kernel does,
and the result is rounded once.

Example:
    >>> import torch
    >>> x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    >>> left, right = x[:, :2], x[:, 2:]  # two devices' blocks
    >>> m = torch.maximum(local_max(left, 1), local_max(right, 1))  # the all-reduced max
    >>> exps = [(left - m).exp_(), (right - m).exp_()]
    >>> s = exps[0].sum(1, keepdim=True) + exps[1].sum(1, keepdim=True)  # the all-reduced sum
    >>> torch.allclose(finish(exps[0], s, False), torch.softmax(x, 1)[:, :2])
    True
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import TYPE_CHECKING

import torch

from dtorch.comm.group.reduce_op import ReduceOp
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import SplitSoftmaxParam
from dtorch.ir.sharding import sharding_mesh_dims
from dtorch.kernels.base import GroupKernel, KernelContext, Shards

if TYPE_CHECKING:
    from dtorch.comm.group import ThreadGroup


def split_softmax_kernel(ctx: KernelContext, inputs: dict[int, Shards]) -> dict[int, Shards]:
    """Every held device's block of the softmax (see the module).

    Every line's group is opened first, before anything can fail, in the one order every
    caller follows (mesh dim, then line), as ring attention does: a caller that fails later
    still holds the groups its peers wait in, so the runtime's abort reaches them."""
    param, x_op = ctx.param, ctx.inputs[0]
    assert isinstance(param, SplitSoftmaxParam)
    dim, out_dtype = param.dim % x_op.ndim, ctx.outputs[0].dtype
    lines, groups = sharding_groups(ctx, (dim,))
    xs = {d: computed_in(shards[0], out_dtype) for d, shards in inputs.items()}
    maxima = _all_reduced(
        lines, groups, {d: local_max(x, dim) for d, x in xs.items()}, ReduceOp.MAX
    )
    # x - max: the result's buffer; a softmax exponentiates it in place (passes and
    # allocations are the cost here: the block is large, the rows' numbers small)
    values = {d: x - maxima[d] for d, x in xs.items()}
    if param.log:
        sums = {d: torch.exp(v).sum(dim, keepdim=True) for d, v in values.items()}
    else:
        sums = {d: v.exp_().sum(dim, keepdim=True) for d, v in values.items()}
    sums = _all_reduced(lines, groups, sums, ReduceOp.SUM)
    # torch's CPU log-softmax along the last dim of a float16/bfloat16 tensor keeps the sum
    # and its log in that dtype (its other kernels keep float32): so does this, for equal values
    kept_in = out_dtype if param.log and dim == x_op.ndim - 1 and out_dtype in _REDUCED else None
    # row-major whatever the input's strides, as torch's softmax; rounded once
    done = {d: finish(v, sums[d], param.log, kept_in) for d, v in values.items()}
    return {d: [y.to(out_dtype, memory_format=torch.contiguous_format)] for d, y in done.items()}


#: The dtypes torch's CPU softmax kernels compute in float32 (and round the result of).
_REDUCED = (torch.float16, torch.bfloat16)


def sharding_lines(ctx: KernelContext, dims: Collection[int]) -> list[tuple[int, ...]]:
    """The groups to reduce over, in order: per mesh dim sharding one of ``dims`` (of the
    first input), the lines along it that hold a device of this caller (sorted)."""
    x = ctx.inputs[0]
    lines: list[tuple[int, ...]] = []
    for mesh_dim in sharding_mesh_dims(x.placements, x.ndim, dims):
        lines.extend(sorted({x.mesh.group_of(d, mesh_dim) for d in ctx.devices}))
    return lines


def sharding_groups(
    ctx: KernelContext, dims: Collection[int]
) -> tuple[list[tuple[int, ...]], list[ThreadGroup]]:
    """``sharding_lines`` and this caller's group on each, opened in that order: before
    anything can fail, so a caller that fails later still holds the groups its peers wait in
    (the runtime's abort reaches them)."""
    assert ctx.groups is not None, "a group kernel needs the caller's ThreadGroupManager"
    kind = ctx.inputs[0].mesh.device_kind
    lines = sharding_lines(ctx, dims)
    return lines, [ctx.groups.get_group(kind, line, ctx.devices) for line in lines]


def _all_reduced(
    lines: list[tuple[int, ...]],
    groups: list[ThreadGroup],
    values: dict[int, torch.Tensor],
    op: ReduceOp,
) -> dict[int, torch.Tensor]:
    """``values`` (one per held device) reduced along every line in turn."""
    for line, group in zip(lines, groups, strict=True):
        held = {line.index(d): values[d] for d in line if d in values}
        for rank, value in group.all_reduce(held, op).items():
            values[line[rank]] = value
    return values


def computed_in(x: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """The block in the dtype the softmax is computed in: the result's, float32 at least;
    rounded to the result's first, as torch casts the input to ``dtype=`` before it starts
    (a float32 1e5 is inf in float16).

    Example:
        >>> computed_in(torch.tensor([1e5, 100.3]), torch.float16).tolist()
        [inf, 100.3125]
    """
    return x.to(out_dtype).to(torch.promote_types(out_dtype, torch.float32))


def local_max(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Each row's maximum over the block (kept as a size-1 dim; -inf for an empty block)."""
    if x.shape[dim] == 0:
        shape = list(x.shape)
        shape[dim] = 1
        return torch.full(shape, -math.inf, dtype=x.dtype, device=x.device)
    return x.amax(dim, keepdim=True)


def finish(
    values: torch.Tensor, total: torch.Tensor, log: bool, log_kept_in: torch.dtype | None = None
) -> torch.Tensor:
    """The block's softmax from ``exp(x - max)`` (``values``, divided in place) and the
    row's sum, or its log-softmax from ``x - max`` (the sum and its log each rounded to
    ``log_kept_in`` if given; the log subtracted in place after the max, as torch does,
    which keeps a small log exact beside a large max)."""
    if not log:
        return values.div_(total)
    if log_kept_in is None:
        return values.sub_(torch.log(total))
    total = total.to(log_kept_in).to(values.dtype)
    return values.sub_(torch.log(total).to(log_kept_in).to(values.dtype))


GROUP_KERNELS: dict[OpKind, GroupKernel] = {OpKind.SplitSoftmax: split_softmax_kernel}
