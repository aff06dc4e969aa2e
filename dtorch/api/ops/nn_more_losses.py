"""More losses of ``torch.nn.functional``, compositions of dtorch's operators:
``pairwise_distance``, ``cosine_embedding_loss``, ``margin_ranking_loss``,
``triplet_margin_loss``, ``poisson_nll_loss``, ``gaussian_nll_loss``,
``hinge_embedding_loss``, ``soft_margin_loss`` and ``multilabel_soft_margin_loss``.

Each follows torch's own formula step by step (ATen's for the C++ losses), with torch's
signature, reductions and legacy ``size_average``/``reduce`` flags; the result dtype (or
torch's refusal) is torch's, learned once per dtype combination from torch's function on
one-element tensors, and the operands are cast to it first (float16/bfloat16 results may
differ from torch's in the last bit).

Placements follow the parts: every dim may be sharded (a sum over a sharded dim is Partial,
then summed where a non-linear step needs it whole); ``"mean"``/``"sum"`` of a sharded loss is
Partial, as ``sum`` is. A Partial input is refused by the first non-linear part, naming the
loss. ``gaussian_nll_loss`` does not read ``var``'s values: torch's refusal of a negative
entry is not made (the entry is clamped to ``eps`` as torch clamps small ones).

Example:
    >>> import dtorch
    >>> soft_margin_loss(dtorch.tensor([0.0, 0.0]), dtorch.tensor([1.0, -1.0])).item()
    0.6931471824645996
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from dtorch.api.dims import as_flag
from dtorch.api.ops.convert import cast
from dtorch.api.ops.losses import log_sigmoid_of, loss_operand, reduced_loss, reduction_of
from dtorch.api.ops.masked import select
from dtorch.api.ops.scalars import as_real
from dtorch.api.ops.statistics import norm
from dtorch.api.record import composite, tensor_arg
from dtorch.api.redistribute import sum_partials
from dtorch.errors import ParamError, ShapeError
from dtorch.ir.rules.promotion import function_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_EPSILON = 1e-12  # ATen's cosine_embedding_loss: added to each squared magnitude


def _result_dtype(name: str, probe: Callable[..., torch.Tensor], *ts: Tensor) -> torch.dtype:
    # torch's result dtype for these operands (or its refusal, naming the loss)
    return function_dtype(name, probe, tuple((t.dtype, False) for t in ts))


def _in(dtype: torch.dtype, *ts: Tensor) -> tuple[Tensor, ...]:
    return tuple(cast(t, dtype) for t in ts)


def _mean_or_sum(name: str, loss: Tensor, reduction: str) -> Tensor:
    return reduced_loss(name, loss, reduction)


# --- distances ---------------------------------------------------------------------------------
def _pairwise_probe(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.pairwise_distance(a, b)


@composite()
def pairwise_distance(
    x1: Tensor, x2: Any, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """``torch.nn.functional.pairwise_distance``: the ``p``-norm of ``x1 - x2 + eps`` over the
    last dim (torch's formula), ``x1`` and ``x2`` broadcast together. A sharded last dim
    gives a whole (Replicate) norm on that mesh dim; other shards stay.

    Example:
        >>> import dtorch
        >>> a, b = dtorch.tensor([[3.0, 4.0]]), dtorch.zeros(1, 2)
        >>> dtorch.nn.functional.pairwise_distance(a, b, eps=0.0).tolist()
        [5.0]
    """
    tensor_arg("pairwise_distance", x1)
    x2 = loss_operand("pairwise_distance", "x2", x2, x1)
    dtype = _result_dtype("pairwise_distance", _pairwise_probe, x1, x2)
    p = as_real("pairwise_distance: p", p)
    eps = as_real("pairwise_distance: eps", eps)
    last = max(x1.ndim, x2.ndim) - 1
    diff = cast(x1 - x2, dtype) + eps
    return norm(diff, p, max(last, 0), keepdim=as_flag(keepdim, "pairwise_distance", "keepdim"))


def _cosine_probe(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return torch.cosine_embedding_loss(a.view(1, 1), b.view(1, 1), t)


def _check_cosine_dims(x1: Tensor, x2: Tensor, target: Tensor) -> None:
    # ATen's checks: 1-D inputs with a 0-d target, 2-D ones with a 1-D target
    if target.ndim == 1 and not (x1.ndim == 2 and x2.ndim == 2):
        raise ShapeError(
            f"1D target tensor expects 2D input tensors, but found inputs with sizes "
            f"{list(x1.shape)} and {list(x2.shape)}."
        )
    if target.ndim == 0 and not (x1.ndim == 1 and x2.ndim == 1):
        raise ShapeError(
            f"0D target tensor expects 1D input tensors, but found inputs with sizes "
            f"{list(x1.shape)} and {list(x2.shape)}."
        )
    if target.ndim > 1:
        raise ShapeError(f"0D or 1D target tensor expected, multi-target not supported; got "
                         f"a {target.ndim}D target")  # fmt: skip


@composite()
def cosine_embedding_loss(
    input1: Tensor,
    input2: Any,
    target: Any,
    margin: float = 0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """torch's ``cosine_embedding_loss``: ``1 - cos`` where ``target`` is 1, ``max(0, cos -
    margin)`` where it is -1 (0 elsewhere), ``cos`` taken over the last dim of (N, D) or (D,)
    inputs as ATen computes it.

    Example:
        >>> import dtorch
        >>> a, b = dtorch.tensor([[1.0, 0.0]]), dtorch.tensor([[0.0, 1.0]])
        >>> dtorch.nn.functional.cosine_embedding_loss(a, b, dtorch.tensor([1])).item()
        1.0
    """
    reduction = reduction_of(reduction, size_average, reduce)
    tensor_arg("cosine_embedding_loss", input1)
    x2 = loss_operand("cosine_embedding_loss", "input2", input2, input1)
    t = loss_operand("cosine_embedding_loss", "target", target, input1)
    _check_cosine_dims(input1, x2, t)
    dtype = _result_dtype("cosine_embedding_loss", _cosine_probe, input1, x2, t)
    a, b = _in(dtype, input1, x2)
    d = input1.ndim - 1
    # sums over a sharded dim are Partial: summed before the non-linear steps
    prod_sum, square1, square2 = (sum_partials((u * v).sum(d)) for u, v in ((a, b), (a, a), (b, b)))
    magnitudes = (square1 + _EPSILON) * (square2 + _EPSILON)
    cos = prod_sum / magnitudes.sqrt()
    pos = select("cosine_embedding_loss", t == 1, 1 - cos, 0.0)
    neg = select("cosine_embedding_loss", t == -1, (cos - as_real("margin", margin)).clamp(min=0),
                 0.0)  # fmt: skip
    return _mean_or_sum("cosine_embedding_loss", pos + neg, reduction)


def _ranking_probe(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return F.margin_ranking_loss(a, b, t)


@composite()
def margin_ranking_loss(
    input1: Tensor,
    input2: Any,
    target: Any,
    margin: float = 0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """torch's ``margin_ranking_loss``: ``max(0, -target * (input1 - input2) + margin)``.

    Example:
        >>> import dtorch
        >>> x, y, t = dtorch.tensor([1.0, 2.0]), dtorch.tensor([2.0, 1.0]), dtorch.ones(2)
        >>> dtorch.nn.functional.margin_ranking_loss(x, y, t, reduction="none").tolist()
        [1.0, 0.0]
    """
    reduction = reduction_of(reduction, size_average, reduce)
    tensor_arg("margin_ranking_loss", input1)
    x2 = loss_operand("margin_ranking_loss", "input2", input2, input1)
    t = loss_operand("margin_ranking_loss", "target", target, input1)
    if not input1.ndim == x2.ndim == t.ndim:
        raise ShapeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
            f"input1: {input1.shape}, input2: {x2.shape}, target: {t.shape} "
        )
    dtype = _result_dtype("margin_ranking_loss", _ranking_probe, input1, x2, t)
    a, b, t = _in(dtype, input1, x2, t)
    loss = (-t * (a - b) + as_real("margin", margin)).clamp(min=0)
    return _mean_or_sum("margin_ranking_loss", loss, reduction)


@composite()
def triplet_margin_loss(
    anchor: Tensor,
    positive: Any,
    negative: Any,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """torch's ``triplet_margin_loss``: ``max(0, margin + d(anchor, positive) - d(anchor,
    negative))`` with ``d`` the ``pairwise_distance`` (with ``swap``, the smaller of the
    negative's distances to the anchor and to the positive).

    Example:
        >>> import dtorch
        >>> a, p, n = dtorch.zeros(1, 2), dtorch.zeros(1, 2), dtorch.tensor([[3.0, 4.0]])
        >>> dtorch.nn.functional.triplet_margin_loss(a, p, n, margin=6.0, eps=0.0).item()
        1.0
    """
    reduction = reduction_of(reduction, size_average, reduce)
    if not as_real("triplet_margin_loss: margin", margin) > 0:
        raise ParamError(f"margin must be greater than 0, got {margin}")
    tensor_arg("triplet_margin_loss", anchor)
    pos = loss_operand("triplet_margin_loss", "positive", positive, anchor)
    neg = loss_operand("triplet_margin_loss", "negative", negative, anchor)
    if not anchor.ndim == pos.ndim == neg.ndim:
        raise ShapeError(
            f"The anchor, positive, and negative tensors are expected to have the same number "
            f"of dimensions, but got: anchor {anchor.ndim}D, positive {pos.ndim}D, and negative "
            f"{neg.ndim}D inputs"
        )
    d_pos = pairwise_distance(anchor, pos, p, eps)
    d_neg = pairwise_distance(anchor, neg, p, eps)
    if as_flag(swap, "triplet_margin_loss", "swap"):
        d_neg = d_neg.minimum(pairwise_distance(pos, neg, p, eps))
    return _mean_or_sum("triplet_margin_loss", (margin + d_pos - d_neg).clamp(min=0), reduction)


# --- likelihoods --------------------------------------------------------------------------------
def _poisson_probe(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.poisson_nll_loss(a, b, reduction="none")


@composite()
def poisson_nll_loss(
    input: Tensor,
    target: Any,
    log_input: bool = True,
    full: bool = False,
    size_average: Any = None,
    eps: float = 1e-8,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """torch's ``poisson_nll_loss``: ``exp(input) - target * input`` (``log_input``), else
    ``input - target * log(input + eps)``; ``full`` adds Stirling's term where ``target > 1``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.poisson_nll_loss(dtorch.zeros(2), dtorch.ones(2)).item()
        1.0
    """
    reduction = reduction_of(reduction, size_average, reduce)
    tensor_arg("poisson_nll_loss", input)
    t = loss_operand("poisson_nll_loss", "target", target, input)
    dtype = _result_dtype("poisson_nll_loss", _poisson_probe, input, t)
    x, t = _in(dtype, input, t)
    if as_flag(log_input, "poisson_nll_loss", "log_input"):
        loss = x.exp() - t * x
    else:
        loss = x - t * (x + as_real("eps", eps)).log()
    if as_flag(full, "poisson_nll_loss", "full"):
        stirling = t * t.log() - t + 0.5 * (2 * math.pi * t).log()
        loss = loss + select("poisson_nll_loss", t <= 1, 0.0, stirling)
    return _mean_or_sum("poisson_nll_loss", loss, reduction)


def _gaussian_probe(a: torch.Tensor, b: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.gaussian_nll_loss(a, b, v.abs(), reduction="none")


def _checked_var(name: str, var: Any, input: Tensor) -> Tensor:
    """``var`` as a tensor beside ``input`` (a number filled to its shape), refused first of
    all where torch refuses it: with a negative entry (a tensor's values are waited for)."""
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise _negative_var()
        return input.new_full(tuple(input.shape), float(var))
    var = loss_operand(name, "var", var, input)
    if (var < 0).any().item():
        raise _negative_var()
    return var


def _negative_var() -> ParamError:
    # torch's ValueError and its words: a variance is >= 0 (and 0 is clamped at eps)
    return ParamError("var has negative entry/entries")


def _var_shaped(input: Tensor, var: Tensor) -> Tensor:
    """``var`` broadcastable as torch takes it: the input's shape, that shape without its last
    dim (unsqueezed), or one dim of size 1 where the input's is not."""
    x_shape, v_shape = tuple(input.shape), tuple(var.shape)
    if v_shape == x_shape:
        return var
    if x_shape[:-1] == v_shape:
        return var.unsqueeze(-1)
    if len(x_shape) == len(v_shape) and sum(v for x, v in zip(x_shape, v_shape, strict=True)
                                            if x != v) == 1:  # fmt: skip
        return var
    raise ValueError("var is of incorrect size")


@composite()
def gaussian_nll_loss(
    input: Tensor,
    target: Any,
    var: Any,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """torch's ``gaussian_nll_loss``: ``0.5 * (log(var) + (input - target) ** 2 / var)``, var
    clamped at ``eps`` (``full`` adds ``0.5 * log(2 pi)``); ``var`` a tensor or a float. A
    negative entry of ``var`` is refused, as torch refuses it, at the call: for a tensor
    ``var`` this waits for one bool (whether any entry is negative).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.gaussian_nll_loss(dtorch.ones(2), dtorch.zeros(2), 1.0).item()
        0.5
    """
    name = "gaussian_nll_loss"
    tensor_arg(name, input)
    t = loss_operand(name, "target", target, input)
    v = _var_shaped(input, _checked_var(name, var, input))
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid")
    dtype = _result_dtype(name, _gaussian_probe, input, t, v)
    x, t, v = _in(dtype, input, t, v)
    v = v.clamp(min=as_real("eps", eps))
    loss = 0.5 * (v.log() + (x - t) ** 2 / v)
    if as_flag(full, name, "full"):
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _mean_or_sum("gaussian_nll_loss", loss, reduction)


# --- margins ------------------------------------------------------------------------------------
#: torch's loss under each reduction: an integer input gives an integer loss unless averaged
_HINGE_PROBES = {
    r: functools.partial(F.hinge_embedding_loss, reduction=r) for r in ("none", "mean", "sum")
}


@composite()
def hinge_embedding_loss(
    input: Tensor,
    target: Any,
    margin: float = 1.0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """torch's ``hinge_embedding_loss``: ``max(0, margin - input)`` where ``target`` is not 1,
    plus ``input`` where it is not -1 (ATen's formula).

    Example:
        >>> import dtorch
        >>> x, y = dtorch.tensor([0.25, 2.0]), dtorch.tensor([-1.0, 1.0])
        >>> dtorch.nn.functional.hinge_embedding_loss(x, y, reduction="none").tolist()
        [0.75, 2.0]
    """
    reduction = reduction_of(reduction, size_average, reduce)
    tensor_arg("hinge_embedding_loss", input)
    t = loss_operand("hinge_embedding_loss", "target", target, input)
    dtype = _result_dtype("hinge_embedding_loss", _HINGE_PROBES[reduction], input, t)
    (x,) = _in(dtype, input)
    exact = dtype.is_floating_point or dtype.is_complex
    edge = as_real("margin", margin)
    zero = 0.0 if exact else 0  # torch casts the margin to an integer input's dtype (trunc)
    clamped = ((edge if exact else int(edge)) - x).clamp(min=0)
    margins = select("hinge_embedding_loss", t != 1, clamped, zero)
    selves = select("hinge_embedding_loss", t != -1, x, zero)
    return _mean_or_sum("hinge_embedding_loss", margins + selves, reduction)


def _soft_margin_probe(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.soft_margin_loss(a, b)


@composite()
def soft_margin_loss(
    input: Tensor,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """torch's ``soft_margin_loss``: ``log(1 + exp(-target * input))``.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([0.0])
        >>> round(dtorch.nn.functional.soft_margin_loss(x, dtorch.ones(1)).item(), 4)
        0.6931
    """
    reduction = reduction_of(reduction, size_average, reduce)
    tensor_arg("soft_margin_loss", input)
    t = loss_operand("soft_margin_loss", "target", target, input)
    dtype = _result_dtype("soft_margin_loss", _soft_margin_probe, input, t)
    loss = (-cast(input, dtype) * t).exp().log1p()
    return _mean_or_sum("soft_margin_loss", cast(loss, dtype), reduction)


def _multilabel_probe(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.multilabel_soft_margin_loss(a, b, reduction="none")


@composite()
def multilabel_soft_margin_loss(
    input: Tensor,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """torch's ``multilabel_soft_margin_loss``: ``-(target * logsigmoid(input) + (1 - target)
    * logsigmoid(-input))``, times ``weight``, averaged over the last (class) dim.

    Example:
        >>> import dtorch
        >>> x, y = dtorch.zeros(1, 2), dtorch.tensor([[1.0, 0.0]])
        >>> round(dtorch.nn.functional.multilabel_soft_margin_loss(x, y).item(), 4)
        0.6931
    """
    name = "multilabel_soft_margin_loss"
    reduction = reduction_of(reduction, size_average, reduce)
    tensor_arg(name, input)
    t = loss_operand(name, "target", target, input)
    dtype = _result_dtype(name, _multilabel_probe, input, t)
    x, t = _in(dtype, input, t)
    loss = -(t * log_sigmoid_of(name, x) + (1 - t) * log_sigmoid_of(name, -x))
    if weight is not None:
        loss = loss * loss_operand(name, "weight", weight, input)
    d = input.ndim - 1
    loss = loss.sum(d) / input.shape[d]
    return _mean_or_sum("multilabel_soft_margin_loss", loss, reduction)
