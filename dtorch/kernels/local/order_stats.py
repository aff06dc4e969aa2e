"""Local kernels of OrderStat and CumExtreme: torch's ``median``, ``nanmedian``,
``kthvalue``, ``mode``, ``cummax`` and ``cummin`` of the local shard.

The rules keep the operated dim whole on every device (and the whole tensor for the
all-elements forms), so each device runs torch's own function on rows that are exactly the
full tensor's: values, ties, NaNs and the indices torch picks among equal entries are torch's.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.opkind import OrderStatKind
    >>> from dtorch.ir.params import OrderStatParam
    >>> from dtorch.ir.span import Span
    >>> x = Operand(1, (2, 3), torch.float32, DeviceMesh("cpu"), ())
    >>> param = OrderStatParam(OrderStatKind.MEDIAN, 1)
    >>> op = Operator(4, "median_4", param, (1,), (2, 3), Span.unknown())
    >>> order_stat_kernel(KernelContext(op, (x,), (), (0,)), 0, [torch.tensor([[3., 1, 2]] * 2)])
    [tensor([2., 2.]), tensor([2, 2])]
"""

from __future__ import annotations

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import CumExtremeParam, OrderStatParam
from dtorch.ir.rules.order_stats import CUM_EXTREMES, ORDER_STATS, WHOLE_STATS
from dtorch.kernels.base import KernelContext, LocalKernel, Shards


def order_stat_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The statistic of the local shard along the (whole) dim, or of the whole tensor."""
    param = ctx.param
    assert isinstance(param, OrderStatParam)
    x = inputs[0]
    if 0 in x.stride():  # torch's CPU median reads an expanded (stride-0) tensor wrongly
        x = x.contiguous()
    if param.dim is None:
        return [WHOLE_STATS[param.stat](x)]
    return list(ORDER_STATS[param.stat](x, param.dim, param.k, param.keepdim))


def cum_extreme_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``cummax``/``cummin`` of the local shard along the (whole) dim: values and indices."""
    param = ctx.param
    assert isinstance(param, CumExtremeParam)
    return list(CUM_EXTREMES[param.extreme](inputs[0], param.dim))


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.OrderStat: order_stat_kernel,
    OpKind.CumExtreme: cum_extreme_kernel,
}
