"""Order statistics and running extremes: ``median nanmedian kthvalue mode cummax cummin
logcumsumexp``.

Each is one operator whose kernel is torch's own function on the local shard (OrderStat,
CumExtreme, Scan; rules in ``dtorch.ir.rules.order_stats`` and ``dtorch.ir.rules.reduce``), so
values, NaN handling (``median`` and ``kthvalue`` rank NaN above every number; ``nanmedian``
skips NaN), torch's lower median of an even count and the index torch picks among equal
entries are torch's. Layouts: along a sharded dim the order statistics gather its blocks
inside the operator (SplitOrderStat: each device computes from the whole dim; Replicate
there); the running ones
(``cummax cummin logcumsumexp``) carry each device's block on from the blocks before it
there (SplitCumExtreme, SplitScan); the other dims keep their shards, a Partial input is
refused; ``median()`` and ``nanmedian()`` of every element gather every sharded dim. The
functions with two results return torch's named tuples (``torch.return_types.median``, ...)
holding dtorch tensors: ``.values`` and int64 ``.indices``.

Example:
    >>> import dtorch
    >>> t = dtorch.tensor([[3.0, 1.0, 2.0, 1.0], [0.0, 5.0, 4.0, 4.0]])
    >>> t.median(1).values.tolist(), t.mode(1).values.tolist(), t.median().item()
    ([1.0, 4.0], [1.0, 4.0], 2.0)
    >>> t.cummax(1).indices.tolist()
    [[0, 0, 0, 0], [0, 1, 1, 1]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.dims import as_flag, as_int, normalize_dim, numpy_names
from dtorch.api.ops.reduce import scan_param, splits
from dtorch.api.record import record, record_one, tensor_arg
from dtorch.ir.opkind import MaxMinKind, OrderStatKind, ScanKind
from dtorch.ir.params import (
    CumExtremeParam,
    OpParam,
    OrderStatParam,
    SplitCumExtremeParam,
    SplitOrderStatParam,
)

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def _dim(name: str, t: Tensor, dim: Any) -> int:
    # one int dim (torch takes no list here), normalised
    tensor_arg(name, t)
    return normalize_dim(as_int(name, "dim", dim), t.ndim, op=name)


def _pair(name: str, kind: OrderStatKind, t: Tensor, dim: Any, k: int, keepdim: Any) -> Any:
    # values and indices of one statistic along one dim, as torch's named tuple of ``name``
    along, keep = _dim(name, t, dim), as_flag(keepdim, name, "keepdim")
    param: OpParam = OrderStatParam(kind, along, k, keep)
    if splits(t, (along,)):  # the devices gather the dim's blocks
        param = SplitOrderStatParam(kind, along, k, keep)
    values, indices = record(name, param, (t,))
    return getattr(torch.return_types, name)((values, indices))


def _whole(name: str, kind: OrderStatKind, t: Tensor, dim: Any, keepdim: Any) -> Any:
    # the all-elements form when ``dim`` is None, else the pair along ``dim``
    if dim is not None:
        return _pair(name, kind, t, dim, 0, keepdim)
    tensor_arg(name, t)
    if keepdim is not False:
        raise TypeError(f'{name}() missing 1 required positional arguments: "dim" (keepdim given)')
    param: OpParam = OrderStatParam(kind, None)
    if splits(t, ()):  # the devices gather every sharded dim
        param = SplitOrderStatParam(kind, None)
    return record_one(name, param, (t,))


@numpy_names
def median(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """``torch.median``: without ``dim``, the lower median of every element (a 0-d tensor;
    NaN if any element is NaN; a sharded tensor's blocks gathered, a Partial refused); with
    ``dim``, the lower median
    along it and its index, as ``torch.return_types.median`` (a sharded ``dim``: see the
    module).

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([[4, 1, 3, 2], [7, 7, 5, 6]])
        >>> t.median().item(), dtorch.median(t, 1).values.tolist()
        (4, [2, 6])
    """
    return _whole("median", OrderStatKind.MEDIAN, input, dim, keepdim)


@numpy_names
def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """``torch.nanmedian``: ``median`` with NaN ignored (NaN only where every entry is NaN).

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([[1.0, float("nan"), 3.0], [float("nan")] * 3])
        >>> t.nanmedian(1).values.tolist(), t.nanmedian().item()
        ([1.0, nan], 1.0)
    """
    return _whole("nanmedian", OrderStatKind.NANMEDIAN, input, dim, keepdim)


@numpy_names
def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> Any:
    """``torch.kthvalue``: the ``k``-th smallest entry along ``dim`` (``k`` from 1 to the
    dim's size; NaN ranks above every number) and its index, as
    ``torch.return_types.kthvalue``.

    Example:
        >>> import dtorch
        >>> dtorch.kthvalue(dtorch.tensor([[5.0, 1.0, 4.0]]), 2, 1).values.tolist()
        [4.0]
    """
    rank = as_int("kthvalue", "k", k)
    return _pair("kthvalue", OrderStatKind.KTHVALUE, input, dim, rank, keepdim)


@numpy_names
def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> Any:
    """``torch.mode``: the most frequent entry along ``dim`` (the smallest among equally
    frequent ones) and an index of it, as ``torch.return_types.mode``.

    Example:
        >>> import dtorch
        >>> dtorch.mode(dtorch.tensor([[2, 1, 1, 2, 3]])).values.tolist()
        [1]
    """
    return _pair("mode", OrderStatKind.MODE, input, dim, 0, keepdim)


def _running(name: str, kind: MaxMinKind, t: Tensor, dim: Any) -> Any:
    along = _dim(name, t, dim)
    param: OpParam = CumExtremeParam(kind, along)
    if splits(t, (along,)):  # each device carries on from the blocks before its own
        param = SplitCumExtremeParam(kind, along)
    values, indices = record(name, param, (t,))
    return getattr(torch.return_types, name)((values, indices))


@numpy_names
def cummax(input: Tensor, dim: int) -> Any:
    """``torch.cummax``: the running maximum along ``dim`` and the index where it was reached
    (the latest of equal entries; NaN, once met, stays), as ``torch.return_types.cummax``.
    Every shard stays: along a sharded ``dim`` each device takes the running extreme of the
    blocks before its own where it beats its own. A Partial input is refused.

    Example:
        >>> import dtorch
        >>> r = dtorch.cummax(dtorch.tensor([1, 3, 2, 3]), 0)
        >>> r.values.tolist(), r.indices.tolist()
        ([1, 3, 3, 3], [0, 1, 1, 3])
    """
    return _running("cummax", MaxMinKind.MAX, input, dim)


@numpy_names
def cummin(input: Tensor, dim: int) -> Any:
    """``torch.cummin``: the running minimum along ``dim`` and its index (as ``cummax``).

    Example:
        >>> import dtorch
        >>> dtorch.cummin(dtorch.tensor([3, 1, 2, 1]), 0).indices.tolist()
        [0, 1, 1, 3]
    """
    return _running("cummin", MaxMinKind.MIN, input, dim)


@numpy_names
def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``torch.logcumsumexp``: ``log(cumsum(exp(input)))`` along ``dim``, computed stably by
    torch's kernel (floats only); along a sharded dim each device log-adds the totals of the
    blocks before its own (the shards stay). A Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.logcumsumexp(dtorch.tensor([0.0, 0.0, 0.0, 0.0]), 0).exp().tolist()
        [1.0, 2.0, 3.0, 4.0]
    """
    param = scan_param(ScanKind.LOGSUMEXP, input, _dim("logcumsumexp", input, dim))
    return record_one("logcumsumexp", param, (input,))
