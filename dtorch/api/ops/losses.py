"""Loss functions of ``torch.nn.functional``, built from dtorch's operators.

``mse_loss``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``, ``binary_cross_entropy``,
``binary_cross_entropy_with_logits`` and ``kl_div`` here (``nll_loss``, ``cross_entropy``
and ``one_hot`` in ``dtorch.api.ops.class_losses``), with torch's signatures, formulas and
reductions (``"none"``, ``"mean"``,
``"sum"``; ``kl_div`` also ``"batchmean"``; the legacy ``size_average``/``reduce`` flags
through torch's own translation). The result dtype (or torch's refusal) is torch's, learned
once per dtype combination by running torch's function on tiny tensors; the operands are
converted to it and the loss computed in it operator by operator (float16 and bfloat16
results can differ from torch's in the last bit: its CPU kernels compute some losses in
float32 and round once, others step by step).

The parts are recorded under the loss's own name, so a placement refusal names what the user
called. Placements follow the parts: the batch dims shard freely (a ``"mean"`` or ``"sum"``
of a sharded loss is Partial, as ``sum`` is). A weighted mean divides by the weights' sum,
both made whole first (a Partial divided by a tensor is refused).

torch checks some values (``binary_cross_entropy`` inputs in [0, 1]); the values live on the
devices, so dtorch checks only what it reads anyway: an input outside [0, 1] gives torch's
formula's NaN.

Example:
    >>> import dtorch
    >>> mse_loss(dtorch.tensor([1.0, 3.0]), dtorch.tensor([0.0, 0.0])).item()
    5.0
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.nn import _reduction as torch_reduction

from dtorch.api.create import beside
from dtorch.api.dims import as_flag
from dtorch.api.handle import TensorBase
from dtorch.api.ops.clamp import clamp
from dtorch.api.ops.convert import cast, fits
from dtorch.api.ops.elementwise import binary, unary
from dtorch.api.ops.masked import select
from dtorch.api.ops.reduce import reduce as reduce_by  # the losses' own ``reduce`` is torch's flag
from dtorch.api.record import record_one, tensor_arg, with_inputs
from dtorch.api.redistribute import sum_partials
from dtorch.errors import ParamError
from dtorch.ir.opkind import ActivationKind, BinaryKind, MathKind, ReduceKind
from dtorch.ir.params import ActivationParam
from dtorch.ir.rules.promotion import function_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

B, M = BinaryKind, MathKind
_INDEX_TARGETS = (torch.int64, torch.uint8)  # torch's "Long or Byte"


# --- reductions, dtypes, operands -----------------------------------------------------------
def reduction_of(reduction: str, size_average: Any, reduce_: Any, extra: tuple = ()) -> str:
    """torch's reduction: the legacy flags translated (with torch's warning), then checked."""
    if size_average is not None or reduce_ is not None:
        reduction = torch_reduction.legacy_get_string(size_average, reduce_)
    if reduction not in ("none", "mean", "sum", *extra):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def reduced_loss(name: str, loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return reduce_by(ReduceKind.MEAN, name, loss)
    return reduce_by(ReduceKind.SUM, name, loss) if reduction == "sum" else loss


def _ratio(name: str, total: Tensor, count: Tensor) -> Tensor:
    # both whole: a Partial over a tensor is refused (a device's 0 / 0 where torch has inf)
    return binary(B.DIV, name, sum_partials(total), sum_partials(count))


def loss_operand(name: str, arg: str, value: Any, like: Tensor | None = None) -> Tensor:
    """A dtorch tensor argument; a torch tensor beside ``like`` (Replicate on its mesh)."""
    if isinstance(value, torch.Tensor) and like is not None:
        return beside(like, value)
    if not isinstance(value, TensorBase):
        raise TypeError(f"{name}: {arg} must be a dtorch.Tensor, got {type(value).__name__}")
    return value  # type: ignore[return-value]


def loss_dtype(name: str, probe: Callable[..., torch.Tensor], *tensors: Tensor) -> torch.dtype:
    return function_dtype(name, probe, tuple((t.dtype, False) for t in tensors))


def _weighted(name: str, loss: Tensor, w: Tensor | None, reduction: str, divide: bool) -> Tensor:
    """``loss`` reduced; with torch's elementwise weight ``w`` (the input's shape), the loss
    times it, a mean divided by its sum where ``divide`` (mse, l1), else by the count
    (huber)."""
    if w is None:
        return reduced_loss(name, loss, reduction)
    if tuple(w.shape) != tuple(loss.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = binary(B.MUL, name, loss, w)
    return mean_over((name, reduction), loss, w) if divide else reduced_loss(name, loss, reduction)


def _warn_sizes(input: Tensor, target: Tensor) -> None:
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.",
            stacklevel=4,  # past the loss and with_inputs
        )


# --- pointwise losses -----------------------------------------------------------------------
def _pointwise(
    name: str,
    how: tuple[Callable[..., torch.Tensor], str],
    input: Any,
    target: Any,
    weight: Any = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Both operands in torch's result dtype (or its refusal) for ``how``: its functional
    and the reduction (torch takes integers where it can sum them, not average them), with
    the ``weight`` that changes the dtype of mse_loss, l1_loss and huber_loss; and that
    weight as a dtorch tensor (a torch one distributed once), or None."""
    tensor_arg(name, input)
    target = loss_operand(name, "target", target, input)
    fn, reduction = how
    if weight is None:
        dtype = _work(
            loss_dtype(name, _probe_of(fn, reduction, False), input, target), input, target
        )
        return cast(input, dtype), cast(target, dtype), None
    w = loss_operand(name, "weight", weight, input)
    dtype = loss_dtype(name, _probe_of(fn, reduction, True), input, target, w)
    dtype = _work(dtype, input, target)
    return cast(input, dtype), cast(target, dtype), w


def _work(dtype: torch.dtype, input: Tensor, target: Tensor) -> torch.dtype:
    # a real loss of complex operands (l1_loss: |input - target|) is computed in complex:
    # casting them to the real result first would drop their imaginary parts
    if dtype.is_complex or not (input.dtype.is_complex or target.dtype.is_complex):
        return dtype
    return torch.promote_types(input.dtype, target.dtype)


@functools.cache
def _probe_of(
    fn: Callable[..., torch.Tensor], reduction: str, weighted: bool
) -> Callable[..., torch.Tensor]:
    """torch's loss ``fn`` as a dtype probe of one reduction: one callable per combination
    (the probes' results are cached by callable)."""
    if weighted:
        return lambda a, b, w: fn(a, b, reduction=reduction, weight=w)
    return lambda a, b: fn(a, b, reduction=reduction)


def _abs_error(name: str, a: Tensor, b: Tensor) -> Tensor:
    return unary(M.ABS, name, binary(B.SUB, name, a, b))


@with_inputs
def mse_loss(
    input: Tensor,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> Tensor:
    """torch's ``mse_loss``: ``(input - target) ** 2``, reduced; ``weight`` (the input's
    shape) scales each term, and a weighted mean divides by the weights' sum.

    Example:
        >>> import dtorch
        >>> mse_loss(dtorch.tensor([1.0, 3.0]), dtorch.tensor([0.0, 1.0])).item()
        2.5
    """
    reduction = reduction_of(reduction, size_average, reduce)
    a, b, w = _pointwise("mse_loss", (F.mse_loss, reduction), input, target, weight)
    _warn_sizes(input, b)
    loss = binary(B.POW, "mse_loss", binary(B.SUB, "mse_loss", a, b), 2)
    return _weighted("mse_loss", loss, w, reduction, divide=True)


@with_inputs
def l1_loss(
    input: Tensor,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> Tensor:
    """torch's ``l1_loss``: ``|input - target|``, reduced; ``weight`` as ``mse_loss``'s.

    Example:
        >>> import dtorch
        >>> l1_loss(dtorch.tensor([1.0, -3.0]), dtorch.zeros(2)).item()
        2.0
    """
    reduction = reduction_of(reduction, size_average, reduce)
    a, b, w = _pointwise("l1_loss", (F.l1_loss, reduction), input, target, weight)
    _warn_sizes(input, b)
    return _weighted("l1_loss", _abs_error("l1_loss", a, b), w, reduction, divide=True)


def _quadratic_then_linear(name: str, z: Tensor, limit: float, scale: float) -> Tensor:
    """``0.5 * z**2 * scale`` below ``limit``, else ``(z - 0.5 * limit)`` times ``limit *
    scale`` (smooth L1: ``scale = 1 / beta``; Huber: ``scale = 1``)."""
    square = binary(B.MUL, name, binary(B.POW, name, z, 2), 0.5 * scale)
    line = binary(B.MUL, name, binary(B.SUB, name, z, 0.5 * limit), limit * scale)
    return select(name, binary(B.LT, name, z, limit), square, line)


@with_inputs
def smooth_l1_loss(
    input: Tensor,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """torch's ``smooth_l1_loss``: ``0.5 * z ** 2 / beta`` where ``z = |input - target|`` is
    below ``beta``, else ``z - 0.5 * beta`` (``beta=0``: ``l1_loss``).

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([0.5, 3.0])
        >>> smooth_l1_loss(x, dtorch.zeros(2), reduction="none").tolist()
        [0.125, 2.5]
    """
    if not beta >= 0:  # torch refuses NaN too
        raise ParamError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:
        return l1_loss(input, target, size_average, reduce, reduction)
    reduction = reduction_of(reduction, size_average, reduce)
    a, b, _ = _pointwise("smooth_l1_loss", (F.smooth_l1_loss, reduction), input, target)
    z = _abs_error("smooth_l1_loss", a, b)
    loss = _quadratic_then_linear("smooth_l1_loss", z, beta, 1 / beta)
    return reduced_loss("smooth_l1_loss", loss, reduction)


@with_inputs
def huber_loss(
    input: Tensor, target: Any, reduction: str = "mean", delta: float = 1.0, weight: Any = None
) -> Tensor:
    """torch's ``huber_loss``: ``0.5 * z ** 2`` where ``z = |input - target|`` is below
    ``delta``, else ``delta * (z - 0.5 * delta)``; ``weight`` scales each term (a weighted
    mean is the mean of the weighted terms, as torch's).

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([0.5, 3.0])
        >>> huber_loss(x, dtorch.zeros(2), reduction="none").tolist()
        [0.125, 2.5]
    """
    reduction = reduction_of(reduction, None, None)
    if not delta > 0:  # torch refuses NaN too
        raise ParamError("huber_loss does not support non-positive values for delta.")
    a, b, w = _pointwise("huber_loss", (F.huber_loss, reduction), input, target, weight)
    _warn_sizes(input, b)
    loss = _quadratic_then_linear("huber_loss", _abs_error("huber_loss", a, b), delta, 1)
    return _weighted("huber_loss", loss, w, reduction, divide=False)


def _log_clamped(name: str, t: Tensor) -> Tensor:
    # torch's binary_cross_entropy clamps each log at -100 (a 0 or 1 probability stays finite);
    # a number bound keeps the dtype (maximum with a 0-d float32 -100 promoted a 0-d float16)
    return clamp(unary(M.LOG, name, t), -100.0)


@with_inputs
def binary_cross_entropy(
    input: Tensor,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """torch's ``binary_cross_entropy`` of probabilities: ``-(target * log(input) + (1 -
    target) * log(1 - input))``, each log clamped at -100; ``weight`` broadcasts onto the
    terms. ``input`` and ``target`` must have one shape.

    Example:
        >>> import dtorch
        >>> p = dtorch.tensor([0.5, 0.5])
        >>> round(binary_cross_entropy(p, dtorch.ones(2)).item(), 4)
        0.6931
    """
    name = "binary_cross_entropy"
    reduction = reduction_of(reduction, size_average, reduce)
    target = _same_shapes(name, input, target, _BCE_SIZES)
    x, t, _ = _pointwise(name, (F.binary_cross_entropy, reduction), input, target)
    hit = binary(B.MUL, name, t, _log_clamped(name, x))
    miss_log = _log_clamped(name, binary(B.SUB, name, 1, x))
    miss = binary(B.MUL, name, binary(B.SUB, name, 1, t), miss_log)
    loss = unary(M.NEG, name, binary(B.ADD, name, hit, miss))
    return _scaled(name, loss, weight, reduction)


_BCE_SIZES = (
    "Using a target size ({target}) that is different to the input size ({input}) is "
    "deprecated. Please ensure they have the same size."
)
_LOGITS_SIZES = "Target size ({target}) must be the same as input size ({input})"


def _same_shapes(name: str, input: Any, target: Any, message: str) -> Tensor:
    """``target`` as a dtorch tensor; torch's ValueError (``message``) where its shape is not
    ``input``'s."""
    tensor_arg(name, input)
    target = loss_operand(name, "target", target, input)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(message.format(target=target.shape, input=input.shape))
    return target


def _scaled(name: str, loss: Tensor, weight: Any, reduction: str) -> Tensor:
    """``loss`` times ``weight`` (if any) as torch's in-place ``mul_``: the weight must
    broadcast to the loss's shape, and the loss keeps its dtype; then reduced."""
    if weight is not None:
        loss = _times(name, loss, loss_operand(name, "weight", weight, loss))
    return reduced_loss(name, loss, reduction)


def _times(name: str, loss: Tensor, factor: Tensor) -> Tensor:
    fits(name, loss, factor)
    return binary(B.MUL, name, loss, cast(factor, loss.dtype))


@with_inputs
def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> Tensor:
    """torch's ``binary_cross_entropy_with_logits``: ``(1 - target) * input -
    log_sigmoid(input) * (1 + (pos_weight - 1) * target)``, times ``weight``, with torch's
    own ``log_sigmoid``.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([0.0, 0.0])
        >>> round(binary_cross_entropy_with_logits(x, dtorch.ones(2)).item(), 4)
        0.6931
    """
    name = "binary_cross_entropy_with_logits"
    reduction = reduction_of(reduction, size_average, reduce)
    target = _same_shapes(name, input, target, _LOGITS_SIZES)
    x, t, _ = _pointwise(name, (F.binary_cross_entropy_with_logits, reduction), input, target)
    log_sig = log_sigmoid_of(name, x)
    if pos_weight is not None:
        pw = loss_operand(name, "pos_weight", pos_weight, input)
        scale = binary(B.ADD, name, binary(B.MUL, name, binary(B.SUB, name, pw, 1), t), 1)
        log_sig = _times(name, log_sig, scale)
    loss = binary(B.SUB, name, binary(B.MUL, name, binary(B.SUB, name, 1, t), x), log_sig)
    return _scaled(name, loss, weight, reduction)


def log_sigmoid_of(name: str, x: Tensor) -> Tensor:
    # torch's own log_sigmoid on each shard (an Activation), as its loss kernel calls it
    return record_one(name, ActivationParam(ActivationKind.LOGSIGMOID), (x,))


@with_inputs
def kl_div(
    input: Tensor,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """torch's ``kl_div`` of log-probabilities ``input``: ``target * (log(target) - input)``
    (0 where ``target`` is 0), or ``exp(target) * (target - input)`` with ``log_target``;
    ``"batchmean"`` divides the sum by the first dim's size (``"mean"``, torch's default,
    by every element's count, with torch's warning).

    Example:
        >>> import dtorch
        >>> p = dtorch.tensor([0.5, 0.5])
        >>> kl_div(p.log(), p, reduction="sum").item()
        0.0
    """
    name = "kl_div"
    if size_average is not None or reduce is not None:
        reduction = reduction_of(reduction, size_average, reduce)
    else:
        reduction = reduction_of(reduction, None, None, extra=("batchmean",))
        if reduction == "mean":
            warnings.warn(_KL_MEAN, stacklevel=3)  # past with_inputs
    x, t, _ = _pointwise(name, (F.kl_div, "sum"), input, target)
    if as_flag(log_target, name, "log_target"):
        loss = binary(B.MUL, name, unary(M.EXP, name, t), binary(B.SUB, name, t, x))
    else:
        plogp = select(
            name, binary(B.EQ, name, t, 0), 0.0, binary(B.MUL, name, t, unary(M.LOG, name, t))
        )
        loss = binary(B.SUB, name, plogp, binary(B.MUL, name, t, x))
    if reduction == "batchmean":
        total = reduce_by(ReduceKind.SUM, name, loss)
        return binary(B.DIV, name, total, input.shape[0]) if input.ndim else total
    return reduced_loss(name, loss, reduction)


_KL_MEAN = (
    "reduction: 'mean' divides the total loss by both the batch size and the support size."
    "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
    "'mean' will be changed to behave the same as 'batchmean' in the next major release."
)


def mean_over(how: tuple[str, str], loss: Tensor, counts: Tensor) -> Tensor:
    """``loss`` reduced as ``how`` says, a mean divided by the sum of ``counts``."""
    name, reduction = how
    if reduction != "mean":
        return reduced_loss(name, loss, reduction)
    total = reduce_by(ReduceKind.SUM, name, loss)
    return _ratio(name, total, reduce_by(ReduceKind.SUM, name, counts))
