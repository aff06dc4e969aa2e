"""Margin losses of ``torch.nn.functional``, compositions of dtorch's operators:
``multi_margin_loss``, ``multilabel_margin_loss`` and ``triplet_margin_with_distance_loss``.

Each follows ATen's formula (the Python one for the triplet loss) with torch's signature,
reductions and legacy ``size_average``/``reduce`` flags. The class losses pick each sample's
target scores with ``gather`` along the class dim and mask the target classes out with a
comparison against ``arange(C)``; ``multilabel_margin_loss`` holds an (N, C, C) tensor of
every (target, other class) pair (torch loops over them). Targets are not read at the call:
a target class out of range fails on the devices (at the fetch), where torch refuses it at
the call.

Placements follow the parts: the batch dim shards freely (``"mean"``/``"sum"`` of a sharded
loss is Partial, as ``sum`` is); a sharded class dim is refused by ``gather`` (naming the
loss), and a Partial input by the first non-linear step. ``triplet_margin_with_distance_loss``
takes any ``distance_function`` of dtorch tensors (default ``pairwise_distance``).

Example:
    >>> import dtorch
    >>> x, y = dtorch.tensor([[0.0, 1.0]]), dtorch.tensor([1])
    >>> dtorch.nn.functional.multi_margin_loss(x, y).item()
    0.0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from dtorch.api.create import beside
from dtorch.api.dims import as_flag
from dtorch.api.ops.elementwise import relu
from dtorch.api.ops.losses import loss_operand, reduced_loss, reduction_of
from dtorch.api.ops.masked import select
from dtorch.api.ops.nn_more_losses import pairwise_distance
from dtorch.api.ops.order import gather_aligned
from dtorch.api.ops.scalars import as_real
from dtorch.api.record import composite, tensor_arg
from dtorch.errors import DtypeError, ShapeError
from dtorch.ir.rules.promotion import function_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def _check_float(name: str, input: Tensor, probe: Callable[[torch.Tensor], Any]) -> None:
    # a floating input whose dtype torch's CPU kernel has (no half precision for these)
    if not input.dtype.is_floating_point:
        raise DtypeError(f"{name}: expected a floating point input; got {input.dtype}")
    function_dtype(name, probe, ((input.dtype, False),))


def _multi_margin_probe(a: torch.Tensor) -> torch.Tensor:
    return F.multi_margin_loss(a.reshape(1, 1), torch.zeros(1, dtype=torch.int64))


def _multilabel_probe(a: torch.Tensor) -> torch.Tensor:
    return F.multilabel_margin_loss(a.reshape(1, 1), torch.zeros(1, 1, dtype=torch.int64))


def _check_target(name: str, target: Tensor) -> None:
    if target.dtype != torch.int64:
        raise DtypeError(f"{name}: expected a target of dtype torch.int64 (class indices); got "
                         f"{target.dtype}")  # fmt: skip


def _frames(name: str, input: Tensor) -> tuple[int, int]:
    """(N, C) of a (C,) or (N, C) input (a 0-d input is one class), as ATen reads them."""
    if input.ndim > 2 or (input.numel() == 0 and input.ndim != 2):
        raise ShapeError(f"{name}: Expected non-empty vector or matrix with optional 0-dim "
                         f"batch size, but got: {list(input.shape)}")  # fmt: skip
    if input.ndim <= 1:
        return 1, max(input.numel(), 1)
    return input.shape[0], input.shape[1]


def _classes(like: Tensor, n: int) -> Tensor:
    # 0 .. n - 1 beside ``like``: the class of every column
    return beside(like, torch.arange(n))


# --- multi_margin_loss --------------------------------------------------------------------------
@composite()
def multi_margin_loss(
    input: Tensor, target: Any, p: int = 1, margin: float = 1.0, weight: Any = None,
    size_average: Any = None, reduce: Any = None, reduction: str = "mean",
) -> Tensor:  # fmt: skip
    """``torch.nn.functional.multi_margin_loss``: for each sample, the mean over the other
    classes j of ``max(0, margin - x[y] + x[j]) ** p`` (times ``weight[y]``).

    Example:
        >>> import dtorch
        >>> x, y = dtorch.tensor([[0.1, 0.2, 0.4, 0.8]]), dtorch.tensor([3])
        >>> round(dtorch.nn.functional.multi_margin_loss(x, y).item(), 4)
        0.325
    """
    name = "multi_margin_loss"
    reduction = reduction_of(reduction, size_average, reduce)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    tensor_arg(name, input)
    target = loss_operand(name, "target", target, input)
    w = None if weight is None else loss_operand(name, "weight", weight, input)
    if w is not None and w.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    _check_float(name, input, _multi_margin_probe)
    _check_target(name, target)
    n, c = _frames(name, input)
    if target.ndim > 1 or target.numel() != n:
        raise ShapeError(f"{name}: inconsistent target size, expected {n} but got "
                         f"{list(target.shape)}")  # fmt: skip
    if w is not None and w.numel() != c:
        raise ShapeError(f"{name}: inconsistent weight size, expected {c} but got "
                         f"{list(w.shape)}")  # fmt: skip
    x, t = input.reshape((n, c)), target.reshape((n, 1))
    z = relu(as_real(f"{name}: margin", margin) - gather_aligned(x, t, 1, name) + x)
    h = z * z if p == 2 else z
    h = h if w is None else h * w.to(x.dtype).index_select(0, t.reshape(n)).reshape((n, 1))
    others = select(name, t == _classes(input, c), 0.0, h)
    loss = others.sum(1) / c
    return reduced_loss(name, loss if target.ndim else loss.reshape(()), reduction)


# --- multilabel_margin_loss ---------------------------------------------------------------------
@composite()
def multilabel_margin_loss(
    input: Tensor, target: Any, size_average: Any = None, reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:  # fmt: skip
    """``torch.nn.functional.multilabel_margin_loss``: ``target`` lists each sample's classes,
    ended by the first -1; the loss is the sum over its classes y and the other classes j of
    ``max(0, 1 - x[y] + x[j])``, over C.

    Example:
        >>> import dtorch
        >>> x, y = dtorch.tensor([[0.1, 0.2, 0.4, 0.8]]), dtorch.tensor([[3, 0, -1, 1]])
        >>> round(dtorch.nn.functional.multilabel_margin_loss(x, y).item(), 4)
        0.85
    """
    name = "multilabel_margin_loss"
    reduction = reduction_of(reduction, size_average, reduce)
    tensor_arg(name, input)
    target = loss_operand(name, "target", target, input)
    _check_float(name, input, _multilabel_probe)
    _check_target(name, target)
    n, c = _frames(name, input)
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(f"{name}: inconsistent target size: {list(target.shape)} for input "
                         f"of size: {list(input.shape)}")  # fmt: skip
    x, t = input.reshape((n, c)), target.reshape((n, c))
    valid = (t < 0).to(torch.int64).cumsum(1) == 0  # the classes before the first -1
    # an index below -1 becomes C, out of range: the gather fails when the value is read, as
    # one of C or more does (torch refuses both at the call: it reads the target there)
    picked = select(name, t < -1, c, t.clamp(min=0))
    labelled = ((picked.unsqueeze(2) == _classes(input, c)) & valid.unsqueeze(2)).any(1)
    z = relu(1 - gather_aligned(x, picked, 1, name).unsqueeze(2) + x.unsqueeze(1))  # (N, t, C)
    pairs = valid.unsqueeze(2) & labelled.logical_not().unsqueeze(1)
    loss = select(name, pairs, z, 0.0).sum((1, 2)) / c
    return reduced_loss(name, loss if input.ndim == 2 else loss.reshape(()), reduction)


# --- triplet_margin_with_distance_loss ----------------------------------------------------------
@composite()
def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Any,
    negative: Any,
    *,
    distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """``torch.nn.functional.triplet_margin_with_distance_loss``: ``max(0, margin + d(anchor,
    positive) - d(anchor, negative))`` with ``d`` the ``distance_function`` (default
    ``pairwise_distance``; with ``swap``, the smaller of the negative's distances).

    Example:
        >>> import dtorch
        >>> a, p, n = dtorch.zeros(1, 2), dtorch.zeros(1, 2), dtorch.tensor([[3.0, 4.0]])
        >>> F = dtorch.nn.functional
        >>> round(F.triplet_margin_with_distance_loss(a, p, n, margin=6.0).item(), 4)
        1.0
    """
    name = "triplet_margin_with_distance_loss"
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if not as_real(f"{name}: margin", margin) > 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    tensor_arg(name, anchor)
    pos = loss_operand(name, "positive", positive, anchor)
    neg = loss_operand(name, "negative", negative, anchor)
    if not anchor.ndim == pos.ndim == neg.ndim:
        raise ShapeError(
            f"The anchor, positive, and negative tensors are expected to have the same number "
            f"of dimensions, but got: anchor {anchor.ndim}D, positive {pos.ndim}D, and negative "
            f"{neg.ndim}D inputs"
        )
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = distance(anchor, pos), distance(anchor, neg)
    if as_flag(swap, name, "swap"):
        d_neg = d_neg.minimum(distance(pos, neg))
    return reduced_loss(name, (margin + d_pos - d_neg).clamp(min=0), reduction)
