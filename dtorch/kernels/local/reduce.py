"""Local kernels of Reduce, MaxMin, Softmax and Scan.

``mean`` over a sharded dim sums the local shard and divides by the GLOBAL element count of
the reduced dims, so the Partial results add up to the mean; every other reduction runs
torch's function on the local shard (the rules never let it reduce a sharded dim); so does a
scan (the scanned dim is whole on every device).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.opkind import ReduceKind
    >>> from dtorch.ir.params import ReduceParam
    >>> from dtorch.ir.placement import Partial, Shard
    >>> from dtorch.ir.span import Span
    >>> from dtorch.kernels.base import KernelContext
    >>> mesh = init_device_mesh("cpu", 2)
    >>> x = Operand(1, (4,), torch.float32, mesh, (Shard(0),))
    >>> y = Operand(2, (), torch.float32, mesh, (Partial(),))
    >>> op = Operator(3, "mean_3", ReduceParam(ReduceKind.MEAN), (1,), (2,), Span.unknown())
    >>> reduce_kernel(KernelContext(op, (x,), (y,), (0, 1)), 0, [torch.tensor([1.0, 3.0])])
    [tensor(1.)]
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from dtorch.ir.opkind import MaxMinKind, OpKind, ReduceKind
from dtorch.ir.params import MaxMinParam, ReduceParam, ScanParam, SoftmaxParam
from dtorch.ir.placement import Shard
from dtorch.ir.rules.reduce import reduce_plan
from dtorch.ir.rules.torch_ops import REDUCE, SCAN
from dtorch.kernels.base import KernelContext, LocalKernel, Shards


def reduce_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``sum mean max ...`` of the local shard over the param's dims."""
    param = ctx.param
    assert isinstance(param, ReduceParam)
    source = ctx.inputs[0]
    dims = reduce_plan(ctx.operator.name, source.shape, param.dims, param.keepdim)[0]  # cached
    sharded = {p.dim for p in source.placements if isinstance(p, Shard)}
    x = inputs[0]
    if param.reduce is ReduceKind.MEAN and sharded.intersection(dims):
        total = torch.sum(x, dims, keepdim=param.keepdim, dtype=param.dtype)
        return [total / math.prod(source.shape[d] for d in dims)]
    return [REDUCE[param.reduce](x, dims, param.keepdim, param.dtype)]


def maxmin_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``max/min(x, dim, keepdim)`` of the local shard: values and indices."""
    param = ctx.param
    assert isinstance(param, MaxMinParam)
    fn = torch.max if param.maxmin is MaxMinKind.MAX else torch.min
    values, indices = fn(inputs[0], param.dim, keepdim=param.keepdim)
    return [values, indices]


def softmax_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``softmax``/``log_softmax`` of the local shard (the softmax dim is whole)."""
    param = ctx.param
    assert isinstance(param, SoftmaxParam)
    fn = F.log_softmax if param.log else F.softmax
    return [fn(inputs[0], param.dim, dtype=param.dtype)]


def scan_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``cumsum``/``cumprod``/``logcumsumexp`` of the local shard along the (whole) scanned
    dim."""
    param = ctx.param
    assert isinstance(param, ScanParam)
    return [SCAN[param.scan](inputs[0], param.dim, param.dtype)]


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.Reduce: reduce_kernel,
    OpKind.MaxMin: maxmin_kernel,
    OpKind.Softmax: softmax_kernel,
    OpKind.Scan: scan_kernel,
}
