"""Local kernels of Sort, TopK, Flip and Gather: entries moved or picked along dims.

The rules keep every operated dim whole on each device (a sorted, topk'd or flipped dim, the
gathered dim of the input unless the output is Partial), and let the other dims be sharded
only where input, index and output hold matching blocks; so each kernel is torch's own
function on the local shards, and the indices sort and topk return are global ones. A
gather whose input is split along the gathered dim (index Replicate, output Partial) picks
the entries in the device's range and writes zeros for the others. Flip of a Partial
tensor flips every summand. Gather's index values are checked (against the whole dim)
before torch reads them, as IndexSelect's are: an out-of-range one raises IndexError here
(a failure of the operator, raised where its value is read) rather than a device-side
assert on CUDA.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import GatherParam
    >>> from dtorch.ir.span import Span
    >>> x = Operand(1, (2, 3), torch.float32, DeviceMesh("cpu"), ())
    >>> i = Operand(2, (2, 2), torch.int64, DeviceMesh("cpu"), ())
    >>> op = Operator(4, "gather_4", GatherParam(1), (1, 2), (3,), Span.unknown())
    >>> ctx = KernelContext(op, (x, i), (), (0,))
    >>> gather_kernel(ctx, 0, [torch.arange(6.0).view(2, 3), torch.tensor([[2, 0], [1, 1]])])
    [tensor([[2., 0.],
            [4., 4.]])]
"""

from __future__ import annotations

import torch

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import FlipParam, GatherParam, SortParam, TopKParam
from dtorch.kernels.base import KernelContext, LocalKernel, Shards
from dtorch.kernels.local.gather import checked_index, neutral_zero


def sort_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``sort`` of the local shard along the (whole) dim: values and indices."""
    param = ctx.param
    assert isinstance(param, SortParam)
    values, indices = torch.sort(
        inputs[0], dim=param.dim, descending=param.descending, stable=param.stable
    )
    return [values, indices]


def topk_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``topk`` of the local shard along the (whole) dim: values and indices."""
    param = ctx.param
    assert isinstance(param, TopKParam)
    values, indices = torch.topk(
        inputs[0], param.k, dim=param.dim, largest=param.largest, sorted=param.sorted
    )
    return [values, indices]


def flip_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The local shard with each of the (whole) dims reversed."""
    param = ctx.param
    assert isinstance(param, FlipParam)
    return [torch.flip(inputs[0], param.dims)]


def gather_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``torch.gather`` of the local shards; where the gathered dim of the input is split
    (the output is Partial), the entries of the device's own range, zeros elsewhere."""
    param = ctx.param
    assert isinstance(param, GatherParam)
    x, index = inputs
    dim = param.dim % max(x.ndim, 1)
    source = ctx.inputs[0]
    size = source.shape[dim] if x.ndim else 1
    checked_index(ctx.operator.name, index, dim, size, wrap=False)
    if x.ndim and x.shape[dim] != size:
        return [_masked_gather(x, index, dim, source.shard(device).offset[dim])]
    return [torch.gather(x, dim, index)]


def _masked_gather(x: torch.Tensor, index: torch.Tensor, dim: int, start: int) -> torch.Tensor:
    # the device holds entries start .. start + x.shape[dim] - 1 of the gathered dim; the
    # others' places get -0.0, which adds to any value without changing it (+0.0 would
    # turn a picked -0.0 into +0.0)
    local = index - start
    outside = (local < 0) | (local >= x.shape[dim])
    if not x.shape[dim]:  # an empty block: every index is another device's
        return torch.full(index.shape, neutral_zero(x.dtype), dtype=x.dtype, device=x.device)
    picked = torch.gather(x, dim, local.masked_fill(outside, 0))
    return picked.masked_fill_(outside, neutral_zero(x.dtype))


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.Sort: sort_kernel,
    OpKind.TopK: topk_kernel,
    OpKind.Flip: flip_kernel,
    OpKind.Gather: gather_kernel,
}
