"""Rules of OrderStat and CumExtreme: order statistics of a dim (``median``, ``nanmedian``,
``kthvalue``, ``mode``) and its running extremes (``cummax``, ``cummin``).

Each picks entries of one dim by their order, so, per mesh dim, that dim must be whole on every
device and a Partial input is refused (the median of a sum is not the sum of the medians); a
shard of another dim stays a shard (its index shifts when ``keepdim`` is false and the dim is
dropped). The all-elements forms (``median()``, ``nanmedian()``) need the whole tensor: every
mesh dim Replicate. Values keep the input's dtype; indices are int64. The dtypes torch refuses
(bool for median and kthvalue, complex, the unsigned types torch has no kernel for) are learned
by running torch's function once per dtype, and refused with torch's message.
``SplitCumExtreme`` (the running extreme the API records where its dim is sharded) keeps
every shard, that dim's included; it refuses a Partial input too. ``SplitOrderStat`` (the
statistic along one dim the API records where that dim is sharded, and the all-elements
``median()``/``nanmedian()`` of a sharded tensor) takes its shards too: Replicate on those
mesh dims (each device computes it from the whole dim, or the whole tensor, gathered).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.opkind import OrderStatKind
    >>> from dtorch.ir.params import OrderStatParam
    >>> from dtorch.ir.placement import Shard
    >>> x = Operand(1, (4, 6), torch.float32, init_device_mesh("cpu", 2), (Shard(1),))
    >>> out = order_stat_rule("median", OrderStatParam(OrderStatKind.MEDIAN, 0), (x,))
    >>> [(o.shape, o.dtype, o.placements) for o in out.outputs]
    [((6,), torch.float32, (Shard(dim=0),)), ((6,), torch.int64, (Shard(dim=0),))]
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from dtorch.errors import DimError, ParamError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import MaxMinKind, OpKind, OrderStatKind
from dtorch.ir.params import (
    CumExtremeParam,
    OpParam,
    OrderStatParam,
    SplitCumExtremeParam,
    SplitOrderStatParam,
)
from dtorch.ir.rules.base import Inference, OutputMeta, Rule, norm_dim
from dtorch.ir.rules.promotion import refusal, refused
from dtorch.ir.rules.reduce import check_nonempty, reduce_plan
from dtorch.ir.rules.signature import Labels, fresh_labels, identity, one_input, signature

#: Why an order (a sort, a median) of a Partial input is refused, and what to do instead.
PARTIAL_ORDER_HINT = (
    "the order of a sum is not the sum of the orders: redistribute a Partial input to "
    "Replicate first"
)
_PICKED = signature(
    "R -> R", "Si -> Si", legend="i: a dim other than the one the statistic is taken along",
    hint="redistribute that dim to Replicate first (the whole dim is needed on every device)",
)  # fmt: skip
_SPLIT_PICKED = signature(
    "R -> R", "Si -> Si", "Sk -> R",
    legend="i: a dim other than the one the statistic is taken along; k: that dim",
    hint=PARTIAL_ORDER_HINT,
)  # fmt: skip
_SPLIT_WHOLE = signature(
    "R -> R", "Sk -> R", legend="k: any dim (every element's statistic gathers them all)",
    hint=PARTIAL_ORDER_HINT,
)  # fmt: skip
_WHOLE = signature(
    "R -> R", legend="the statistic of every element needs the whole tensor",
    hint="redistribute to Replicate first",
)  # fmt: skip
_SCANNED = signature(
    "R -> R", "Si -> Si", legend="i: a dim other than the scanned dim",
    hint="redistribute the scanned dim to Replicate first",
)  # fmt: skip
_SPLIT_SCANNED = signature(
    "R -> R", "Si -> Si", legend="i: any dim, the scanned dim included",
    hint="a running extreme of a sum is not the sum of the running extremes: redistribute a "
    "Partial input to Replicate first",
)  # fmt: skip

Pair = tuple[torch.Tensor, torch.Tensor]


def _median(x: torch.Tensor, dim: int, k: int, keepdim: bool) -> Pair:
    values, indices = torch.median(x, dim, keepdim)
    return values, indices


def _nanmedian(x: torch.Tensor, dim: int, k: int, keepdim: bool) -> Pair:
    values, indices = torch.nanmedian(x, dim, keepdim)
    return values, indices


def _kthvalue(x: torch.Tensor, dim: int, k: int, keepdim: bool) -> Pair:
    values, indices = torch.kthvalue(x, k, dim, keepdim)
    return values, indices


def _mode(x: torch.Tensor, dim: int, k: int, keepdim: bool) -> Pair:
    values, indices = torch.mode(x, dim, keepdim)
    return values, indices


def _cummax(x: torch.Tensor, dim: int) -> Pair:
    values, indices = torch.cummax(x, dim)
    return values, indices


def _cummin(x: torch.Tensor, dim: int) -> Pair:
    values, indices = torch.cummin(x, dim)
    return values, indices


#: torch's function of each statistic along a dim: ``(x, dim, k, keepdim) -> (values,
#: indices)``, ``k`` read by kthvalue alone.
ORDER_STATS: dict[OrderStatKind, Callable[[torch.Tensor, int, int, bool], Pair]] = {
    OrderStatKind.MEDIAN: _median,
    OrderStatKind.NANMEDIAN: _nanmedian,
    OrderStatKind.KTHVALUE: _kthvalue,
    OrderStatKind.MODE: _mode,
}
#: The statistics with an all-elements form (one 0-d value, no index).
WHOLE_STATS: dict[OrderStatKind, Callable[[torch.Tensor], torch.Tensor]] = {
    OrderStatKind.MEDIAN: torch.median,
    OrderStatKind.NANMEDIAN: torch.nanmedian,
}
#: torch's function of each running extreme: ``(x, dim) -> (values, indices)``.
CUM_EXTREMES: dict[MaxMinKind, Callable[[torch.Tensor, int], Pair]] = {
    MaxMinKind.MAX: _cummax,
    MaxMinKind.MIN: _cummin,
}

#: What the dtype probe runs for (operator kind, its sub-kind, all elements).
_Probe = tuple[OpKind, int, bool]


def _run_probe(probe: _Probe, x: torch.Tensor) -> object:
    kind, sub, whole = probe
    if kind is OpKind.CumExtreme:
        return CUM_EXTREMES[MaxMinKind(sub)](x, 0)
    if whole:
        return WHOLE_STATS[OrderStatKind(sub)](x)
    return ORDER_STATS[OrderStatKind(sub)](x, 0, 1, False)


@functools.cache
def _refusal(probe: _Probe, dtype: torch.dtype) -> str:
    """torch's message when it refuses a tensor of ``dtype`` for ``probe`` ('' when it takes
    it)."""
    try:
        _run_probe(probe, torch.ones(1, dtype=dtype))
    except (RuntimeError, TypeError) as error:
        return refusal(error, str(error).strip().split("\n", 1)[0])
    return ""


def _check_dtype(name: str, probe: _Probe, dtype: torch.dtype) -> None:
    message = _refusal(probe, dtype)
    if message:
        refused(name, dtype, message)


def _check_k(name: str, k: int, dim: int, size: int) -> None:
    if not 1 <= k <= size:
        raise ParamError(
            f"{name}(): selected number k out of range for dimension {dim}: k={k} for a dim of "
            f"size {size}; accepted: 1 <= k <= {size}"
        )


def order_stat_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``median``/``nanmedian``/``kthvalue``/``mode`` along ``dim`` (values, int64 indices), or
    of every element (``dim`` None: one 0-d value, the input Replicate)."""
    assert isinstance(param, OrderStatParam)
    (x,) = inputs
    if param.dim is None:
        return _whole_rule(name, param.stat, x)
    labels, metas = _along_metas(name, param.stat, x, param.dim, param.k, param.keepdim)
    return one_input(name, _PICKED, x, labels, metas)


def split_order_stat_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``median``/``nanmedian``/``kthvalue``/``mode`` along a ``dim`` whose shards are
    allowed: Replicate on their mesh dims (of every element, ``dim`` None: Replicate
    everywhere); a Partial input is refused."""
    assert isinstance(param, SplitOrderStatParam)
    (x,) = inputs
    if param.dim is None:
        _whole_checks(name, param.stat, x)
        return one_input(name, _SPLIT_WHOLE, x, (), [OutputMeta((), x.dtype, ())])
    labels, metas = _along_metas(name, param.stat, x, param.dim, param.k, param.keepdim)
    return one_input(name, _SPLIT_PICKED, x, labels, metas)


def _along_metas(
    name: str, stat: OrderStatKind, x: Operand, dim: int, k: int, keepdim: bool
) -> tuple[Labels, list[OutputMeta]]:
    """The labels and outputs of a statistic along ``dim``, after torch's checks."""
    _, shape, labels = reduce_plan(name, x.shape, (dim,), keepdim)
    dim = norm_dim(name, dim, x.ndim)
    if x.ndim:
        check_nonempty(name, x.shape, (dim,), DimError)  # before the dtype and k, as torch
    _check_dtype(name, (OpKind.OrderStat, stat, False), x.dtype)
    if stat is OrderStatKind.KTHVALUE:
        _check_k(name, k, dim, x.shape[dim] if x.shape else 1)
    return labels, [OutputMeta(shape, x.dtype, ()), OutputMeta(shape, torch.int64, ())]


def _whole_rule(name: str, stat: OrderStatKind, x: Operand) -> Inference:
    _whole_checks(name, stat, x)
    return one_input(name, _WHOLE, x, (), [OutputMeta((), x.dtype, ())])


def _whole_checks(name: str, stat: OrderStatKind, x: Operand) -> None:
    # a statistic with an all-elements form, of a dtype torch takes there
    if stat not in WHOLE_STATS:
        raise ParamError(f"{name}: takes a dim (only median and nanmedian have a form without)")
    _check_dtype(name, (OpKind.OrderStat, stat, True), x.dtype)


def cum_extreme_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``cummax``/``cummin`` along ``dim``: values and int64 indices shaped like the input."""
    assert isinstance(param, CumExtremeParam)
    (x,) = inputs
    dim = norm_dim(name, param.dim, x.ndim)
    _check_dtype(name, (OpKind.CumExtreme, param.extreme, False), x.dtype)
    metas = [OutputMeta(x.shape, x.dtype, ()), OutputMeta(x.shape, torch.int64, ())]
    return one_input(name, _SCANNED, x, fresh_labels(x.ndim, (dim,)), metas)


def split_cum_extreme_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``cummax``/``cummin`` where shards of ``dim`` are allowed: every shard stays (each
    device carries on from the blocks before its own); a Partial input is refused."""
    assert isinstance(param, SplitCumExtremeParam)
    (x,) = inputs
    norm_dim(name, param.dim, x.ndim)
    _check_dtype(name, (OpKind.CumExtreme, param.extreme, False), x.dtype)
    metas = [OutputMeta(x.shape, x.dtype, ()), OutputMeta(x.shape, torch.int64, ())]
    return one_input(name, _SPLIT_SCANNED, x, identity(x.ndim), metas)


RULES: dict[OpKind, Rule] = {
    OpKind.OrderStat: order_stat_rule,
    OpKind.CumExtreme: cum_extreme_rule,
    OpKind.SplitCumExtreme: split_cum_extreme_rule,
    OpKind.SplitOrderStat: split_order_stat_rule,
}
