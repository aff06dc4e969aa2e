"""Local kernels of Scatter and IndexAdd: entries written into a copy of the local shard.

The rules keep the scattered dim of ``x`` whole on every device (but for ``index_add``, whose
devices may each hold a block of rows: each adds the slices its rows are given) and let the
other dims be sharded only where ``x``, the index and the source hold matching blocks (or,
for the sums of a Partial ``x``, where each device adds its own block of a source sharded
along that dim), so each kernel is torch's own function on the local shards, and the global
index values are local ones. The values are checked before torch reads them, as Gather's
are: an out-of-range one raises IndexError here (a failure of the operator, raised where its
value is read) rather than a device-side assert on CUDA.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.opkind import ScatterReduceKind
    >>> from dtorch.ir.params import ScatterParam
    >>> from dtorch.ir.span import Span
    >>> x = Operand(1, (2, 3), torch.float32, DeviceMesh("cpu"), ())
    >>> i = Operand(2, (2, 2), torch.int64, DeviceMesh("cpu"), ())
    >>> param = ScatterParam(1, ScatterReduceKind.SUM)
    >>> op = Operator(4, "scatter_add_4", param, (1, 2, 1), (3,), Span.unknown())
    >>> ctx = KernelContext(op, (x, i, x), (), (0,))
    >>> index = torch.tensor([[2, 2], [0, 1]])
    >>> scatter_kernel(ctx, 0, [torch.zeros(2, 3), index, torch.ones(2, 3)])
    [tensor([[0., 0., 2.],
            [1., 1., 0.]])]
"""

from __future__ import annotations

import torch

from dtorch.ir.opkind import OpKind, ScatterReduceKind
from dtorch.ir.params import IndexAddParam, ScatterParam
from dtorch.ir.rules.scatter import REDUCE_NAMES, VALUE_REDUCE_NAMES
from dtorch.kernels.base import KernelContext, LocalKernel, Shards
from dtorch.kernels.local.gather import checked_index


def scatter_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``torch.scatter``/``scatter_reduce`` of the local shards (the scattered dim whole)."""
    param = ctx.param
    assert isinstance(param, ScatterParam)
    x, index, *rest = inputs
    dim = param.dim % max(x.ndim, 1)
    if index.numel():
        checked_index(ctx.operator.name, index, dim, x.shape[dim] if x.ndim else 1, wrap=False)
    if rest:
        return [_scatter_tensor(param, x, dim, index, rest[0])]
    assert param.value is not None and param.value.value is not None
    value = param.value.value
    if param.reduce is ScatterReduceKind.NONE:
        return [torch.scatter(x, dim, index, value)]
    return [torch.scatter(x, dim, index, value, reduce=VALUE_REDUCE_NAMES[param.reduce])]


def _scatter_tensor(
    param: ScatterParam, x: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor
) -> torch.Tensor:
    if param.reduce is ScatterReduceKind.NONE:
        return torch.scatter(x, dim, index, src)
    how = REDUCE_NAMES[param.reduce]
    return torch.scatter_reduce(x, dim, index, src, how, include_self=param.include_self)


def index_add_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``torch.index_add`` of the local shards; where ``x``'s dim added along is sharded, of
    the slices whose index falls in the device's own rows (in their order: each row adds
    what torch's full ``index_add`` adds to it, in the same order)."""
    param = ctx.param
    assert isinstance(param, IndexAddParam)
    x, index, source = inputs
    dim = param.dim % max(x.ndim, 1)
    whole = ctx.inputs[0].shape[dim] if x.ndim else 1
    checked_index(ctx.operator.name, index, dim, whole, wrap=False)
    if index.numel() == 0:  # adds nothing; the full source may not match a local shard of x
        return [x.clone()]
    alpha = 1 if param.alpha is None or param.alpha.value is None else param.alpha.value
    if x.ndim and x.shape[dim] != whole:
        start = ctx.inputs[0].shard(device).slices()[dim].start
        local = index - start
        mine = ((local >= 0) & (local < x.shape[dim])).nonzero().squeeze(1)
        index, source = local[mine], source.index_select(dim, mine)
    return [torch.index_add(x, dim, index, source, alpha=alpha)]


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.Scatter: scatter_kernel,
    OpKind.IndexAdd: index_add_kernel,
}
