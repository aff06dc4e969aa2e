"""Loss functions of ``torch.nn.functional``, built from dtorch's operators.

``mse_loss``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``, ``binary_cross_entropy``,
``binary_cross_entropy_with_logits``, ``kl_div``, ``nll_loss``, ``cross_entropy`` and
``one_hot``, with torch's signatures, formulas and reductions (``"none"``, ``"mean"``,
``"sum"``; ``kl_div`` also ``"batchmean"``; the legacy ``size_average``/``reduce`` flags
through torch's own translation). The result dtype (or torch's refusal) is torch's, learned
once per dtype combination by running torch's function on tiny tensors; the operands are
converted to it and the loss computed in it operator by operator (float16 and bfloat16
results can differ from torch's in the last bit: its CPU kernels compute some losses in
float32 and round once, others step by step).

The parts are recorded under the loss's own name, so a placement refusal names what the user
called. Placements follow the parts: the batch dims shard freely (a ``"mean"`` or ``"sum"``
of a sharded loss is Partial, as ``sum`` is); the class dim of ``cross_entropy`` and
``nll_loss`` must not be sharded (``log_softmax`` and ``gather`` along it). A weighted mean
divides by the weights' sum, both made whole first (a Partial divided by a tensor is refused).

torch checks some values (``nll_loss`` targets in range, ``binary_cross_entropy`` inputs in
[0, 1]); the values live on the devices, so dtorch checks only what it reads anyway: a target
out of range fails at the fetch (the gather's KernelError), an input outside [0, 1] gives
torch's formula's NaN. ``one_hot`` reads its input's range (one fetch) and raises as torch.

Example:
    >>> import dtorch, torch
    >>> logits = dtorch.tensor([[2.0, 0.0], [0.0, 2.0]])
    >>> round(cross_entropy(logits, dtorch.tensor([0, 1])).item(), 4)
    0.1269
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
from dtorch.api.dims import as_flag, as_int
from dtorch.api.handle import TensorBase
from dtorch.api.ops.convert import cast, fits
from dtorch.api.ops.elementwise import binary, unary
from dtorch.api.ops.masked import select
from dtorch.api.ops.order import gather_aligned
from dtorch.api.ops.reduce import reduce as reduce_by  # the losses' own ``reduce`` is torch's flag
from dtorch.api.ops.reduce import softmax_param
from dtorch.api.ops.shape import squeeze, unsqueeze
from dtorch.api.record import record, record_one, tensor_arg, with_inputs
from dtorch.api.redistribute import redistribute, sum_partials
from dtorch.errors import DtypeError, ParamError, ShapeError
from dtorch.ir.dtypes import scalar_type_name
from dtorch.ir.opkind import ActivationKind, BinaryKind, MathKind, ReduceKind
from dtorch.ir.params import ActivationParam
from dtorch.ir.placement import Placement, Replicate, Shard
from dtorch.ir.rules.promotion import function_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

B, M = BinaryKind, MathKind
_INDEX_TARGETS = (torch.int64, torch.uint8)  # torch's "Long or Byte"


# --- reductions, dtypes, operands -----------------------------------------------------------
def _reduction(reduction: str, size_average: Any, reduce_: Any, extra: tuple = ()) -> str:
    """torch's reduction: the legacy flags translated (with torch's warning), then checked."""
    if size_average is not None or reduce_ is not None:
        reduction = torch_reduction.legacy_get_string(size_average, reduce_)
    if reduction not in ("none", "mean", "sum", *extra):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduced(name: str, loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return reduce_by(ReduceKind.MEAN, name, loss)
    return reduce_by(ReduceKind.SUM, name, loss) if reduction == "sum" else loss


def _ratio(name: str, total: Tensor, count: Tensor) -> Tensor:
    # both whole: a Partial over a tensor is refused (a device's 0 / 0 where torch has inf)
    return binary(B.DIV, name, sum_partials(total), sum_partials(count))


def _operand(name: str, arg: str, value: Any, like: Tensor | None = None) -> Tensor:
    """A dtorch tensor argument; a torch tensor beside ``like`` (Replicate on its mesh)."""
    if isinstance(value, torch.Tensor) and like is not None:
        return beside(like, value)
    if not isinstance(value, TensorBase):
        raise TypeError(f"{name}: {arg} must be a dtorch.Tensor, got {type(value).__name__}")
    return value  # type: ignore[return-value]


def _dtype(name: str, probe: Callable[..., torch.Tensor], *tensors: Tensor) -> torch.dtype:
    return function_dtype(name, probe, tuple((t.dtype, False) for t in tensors))


def _weighted(name: str, loss: Tensor, w: Tensor | None, reduction: str, divide: bool) -> Tensor:
    """``loss`` reduced; with torch's elementwise weight ``w`` (the input's shape), the loss
    times it, a mean divided by its sum where ``divide`` (mse, l1), else by the count
    (huber)."""
    if w is None:
        return _reduced(name, loss, reduction)
    if tuple(w.shape) != tuple(loss.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = binary(B.MUL, name, loss, w)
    return _mean_over((name, reduction), loss, w) if divide else _reduced(name, loss, reduction)


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
    target = _operand(name, "target", target, input)
    fn, reduction = how
    if weight is None:
        dtype = _work(_dtype(name, _probe_of(fn, reduction, False), input, target), input, target)
        return cast(input, dtype), cast(target, dtype), None
    w = _operand(name, "weight", weight, input)
    dtype = _dtype(name, _probe_of(fn, reduction, True), input, target, w)
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
    reduction = _reduction(reduction, size_average, reduce)
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
    reduction = _reduction(reduction, size_average, reduce)
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
    reduction = _reduction(reduction, size_average, reduce)
    a, b, _ = _pointwise("smooth_l1_loss", (F.smooth_l1_loss, reduction), input, target)
    z = _abs_error("smooth_l1_loss", a, b)
    loss = _quadratic_then_linear("smooth_l1_loss", z, beta, 1 / beta)
    return _reduced("smooth_l1_loss", loss, reduction)


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
    reduction = _reduction(reduction, None, None)
    if not delta > 0:  # torch refuses NaN too
        raise ParamError("huber_loss does not support non-positive values for delta.")
    a, b, w = _pointwise("huber_loss", (F.huber_loss, reduction), input, target, weight)
    _warn_sizes(input, b)
    loss = _quadratic_then_linear("huber_loss", _abs_error("huber_loss", a, b), delta, 1)
    return _weighted("huber_loss", loss, w, reduction, divide=False)


def _log_clamped(name: str, t: Tensor) -> Tensor:
    # torch's binary_cross_entropy clamps each log at -100 (a 0 or 1 probability stays finite)
    return binary(B.MAXIMUM, name, unary(M.LOG, name, t), -100.0)


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
    reduction = _reduction(reduction, size_average, reduce)
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
    target = _operand(name, "target", target, input)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(message.format(target=target.shape, input=input.shape))
    return target


def _scaled(name: str, loss: Tensor, weight: Any, reduction: str) -> Tensor:
    """``loss`` times ``weight`` (if any) as torch's in-place ``mul_``: the weight must
    broadcast to the loss's shape, and the loss keeps its dtype; then reduced."""
    if weight is not None:
        loss = _times(name, loss, _operand(name, "weight", weight, loss))
    return _reduced(name, loss, reduction)


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
    reduction = _reduction(reduction, size_average, reduce)
    target = _same_shapes(name, input, target, _LOGITS_SIZES)
    x, t, _ = _pointwise(name, (F.binary_cross_entropy_with_logits, reduction), input, target)
    log_sig = _log_sigmoid(name, x)
    if pos_weight is not None:
        pw = _operand(name, "pos_weight", pos_weight, input)
        scale = binary(B.ADD, name, binary(B.MUL, name, binary(B.SUB, name, pw, 1), t), 1)
        log_sig = _times(name, log_sig, scale)
    loss = binary(B.SUB, name, binary(B.MUL, name, binary(B.SUB, name, 1, t), x), log_sig)
    return _scaled(name, loss, weight, reduction)


def _log_sigmoid(name: str, x: Tensor) -> Tensor:
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
        reduction = _reduction(reduction, size_average, reduce)
    else:
        reduction = _reduction(reduction, None, None, extra=("batchmean",))
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
    return _reduced(name, loss, reduction)


_KL_MEAN = (
    "reduction: 'mean' divides the total loss by both the batch size and the support size."
    "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
    "'mean' will be changed to behave the same as 'batchmean' in the next major release."
)


# --- classification losses ------------------------------------------------------------------
def _class_dim(name: str, input: Tensor) -> int:
    if input.ndim == 0:
        raise ShapeError(
            f"{name}: the input has no class dim (a 0-d tensor); accepted: (C), (N, C) or "
            "(N, C, d1, ...)"
        )
    return 0 if input.ndim == 1 else 1


def _check_index_target(name: str, input: Tensor, target: Tensor, class_dim: int) -> None:
    if target.dtype is torch.uint8 and input.ndim > 2:  # torch's spatial kernel: Long only
        raise DtypeError("expected scalar type Long but found Byte")
    if target.dtype not in _INDEX_TARGETS:
        raise DtypeError(
            f"expected target dtype to be Long or Byte, but got {scalar_type_name(target.dtype)}"
        )
    want = tuple(input.shape[:class_dim]) + tuple(input.shape[class_dim + 1 :])
    if tuple(target.shape) != want:
        if input.ndim >= 2 and (not target.ndim or target.shape[0] != input.shape[0]):
            raise ValueError(
                f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                f"({target.shape[0] if target.ndim else 0})."
            )
        raise ShapeError(
            f"{name}: a target of shape {list(target.shape)} for an input of shape "
            f"{list(input.shape)}; accepted: the input's shape without its class dim, {list(want)}"
        )


def _log_probs(name: str, input: Tensor, class_dim: int) -> Tensor:
    # one log_softmax recorded under the loss's name (a sharded class dim: vocab-parallel)
    return record(name, softmax_param(input, class_dim, True, None), (input,))[0]


def _class_weights(name: str, weight: Any, input: Tensor, class_dim: int) -> Tensor | None:
    """``weight`` (one per class) shaped to broadcast along ``input``'s class dim."""
    if weight is None:
        return None
    w = _operand(name, "weight", weight, input)
    classes = input.shape[class_dim]
    if w.ndim != 1 or w.shape[0] != classes:
        raise RuntimeError(
            f"weight tensor should be defined either for all {classes} classes or no classes "
            f"but got weight tensor of shape: {list(w.shape)}"
        )
    if w.dtype != input.dtype:
        raise DtypeError(
            f"expected scalar type {scalar_type_name(input.dtype)} but found "
            f"{scalar_type_name(w.dtype)}"
        )
    return _along_classes(w, input, class_dim)


def _along_classes(w: Tensor, input: Tensor, class_dim: int) -> Tensor:
    """The class weights ``w`` shaped to broadcast along ``input``'s class dim (unsqueezed,
    so a shard stays on the class dim, even for one class), sharded only where ``input``'s
    class dim is (elsewhere gathered: C numbers, beside logits sharded otherwise)."""
    mesh_dims = [
        Replicate() if isinstance(p, Shard) and not _shards(q, class_dim, input.ndim) else p
        for p, q in zip(w.placements, input.placements, strict=True)
    ]
    if mesh_dims != list(w.placements):
        w = redistribute(w, None, mesh_dims)
    for _ in range(class_dim):
        w = unsqueeze(w, 0)
    for _ in range(input.ndim - class_dim - 1):
        w = unsqueeze(w, -1)
    return w


def _shards(placement: Placement, dim: int, ndim: int) -> bool:
    return isinstance(placement, Shard) and placement.dim % ndim == dim


def _counted(name: str, target: Tensor, ignore_index: int) -> tuple[Tensor, Tensor]:
    """The class indices in int64 (compared as torch's: -100 is no uint8) and where they are
    not ``ignore_index``."""
    ignore_index = as_int(name, "ignore_index", ignore_index)  # torch: an int of int64
    target = cast(target, torch.int64)
    return target, binary(B.NE, name, target, ignore_index)


def _nll(
    name: str,
    logp: Tensor,
    targets: tuple[Tensor, Tensor],
    weight: Tensor | None,
    class_dim: int,
) -> tuple[Tensor, Tensor]:
    """The unreduced negative log-likelihood of each target (``_counted``'s pair) and the
    weight each counts with (0 where the target is ignored)."""
    target, valid = targets
    safe = select(name, valid, target, 0)  # an ignored target reads class 0, weighted 0
    index = unsqueeze(safe, class_dim)
    picked = squeeze(gather_aligned(logp, index, class_dim, name), class_dim)
    if weight is None:
        counts = cast(valid, logp.dtype)
    else:
        table = weight.expand(*logp.shape)
        chosen = squeeze(gather_aligned(table, index, class_dim, name), class_dim)
        chosen = sum_partials(chosen)  # picked from weights sharded on the classes: Partial
        counts = select(name, valid, cast(chosen, logp.dtype), 0.0)
    loss = unary(M.NEG, name, binary(B.MUL, name, picked, counts))
    return select(name, valid, loss, 0.0), counts  # an ignored -inf class 0: 0, not NaN


@with_inputs
def nll_loss(
    input: Tensor,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """torch's ``nll_loss`` of log-probabilities ``input`` ((C), (N, C) or (N, C, d1, ...))
    at class indices ``target`` (int64 or uint8, the input's shape without the class dim):
    ``-weight[t] * input[t]``, 0 where ``t == ignore_index``; a mean divides by the weights of
    the targets counted (NaN when none is).

    Example:
        >>> import dtorch
        >>> logp = dtorch.tensor([[-0.5, -1.0], [-2.0, -0.1]])
        >>> nll_loss(logp, dtorch.tensor([0, 1]), reduction="none").tolist()
        [0.5, 0.10000000149011612]
    """
    reduction = _reduction(reduction, size_average, reduce)
    tensor_arg("nll_loss", input)
    class_dim = _class_dim("nll_loss", input)
    target = _operand("nll_loss", "target", target, input)
    _check_index_target("nll_loss", input, target, class_dim)
    _dtype("nll_loss", _log_softmax_probe, input)  # torch's refusal of integer inputs
    weights = _class_weights("nll_loss", weight, input, class_dim)
    targets = _counted("nll_loss", target, ignore_index)
    loss, counts = _nll("nll_loss", input, targets, weights, class_dim)
    return _mean_over(("nll_loss", reduction), loss, counts)


def _mean_over(how: tuple[str, str], loss: Tensor, counts: Tensor) -> Tensor:
    """``loss`` reduced as ``how`` says, a mean divided by the sum of ``counts``."""
    name, reduction = how
    if reduction != "mean":
        return _reduced(name, loss, reduction)
    total = reduce_by(ReduceKind.SUM, name, loss)
    return _ratio(name, total, reduce_by(ReduceKind.SUM, name, counts))


def _log_softmax_probe(input: torch.Tensor) -> torch.Tensor:
    return F.log_softmax(input, 0)


@with_inputs
def cross_entropy(
    input: Tensor,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """torch's ``cross_entropy`` of unnormalised ``input`` ((C), (N, C) or (N, C, d1, ...)):
    ``nll_loss(log_softmax(input, class dim), target, ...)`` for class indices (int64 or
    uint8), or ``-sum(target * log_softmax(input))`` over the class dim for class
    probabilities (a float ``target`` of the input's shape); ``label_smoothing`` mixes in the
    uniform distribution, as torch's. The class dim may be sharded (vocab-parallel logits:
    the log-softmax all-reduces each row's maximum and sum; nothing is gathered).

    Example:
        >>> import dtorch
        >>> logits = dtorch.tensor([[0.0, 0.0], [0.0, 0.0]])
        >>> round(cross_entropy(logits, dtorch.tensor([0, 1])).item(), 4)
        0.6931
    """
    name = "cross_entropy"
    reduction = _reduction(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    tensor_arg(name, input)
    class_dim = _class_dim(name, input)
    target = _operand(name, "target", target, input)
    weights = _class_weights(name, weight, input, class_dim)
    if target.dtype.is_floating_point:
        if ignore_index >= 0:
            raise ParamError("ignore_index is not supported for floating point target")
        how = (reduction, label_smoothing, class_dim)
        return _soft_targets(name, input, target, weights, how)
    _check_index_target(name, input, target, class_dim)
    _dtype(name, _log_softmax_probe, input)
    logp = _log_probs(name, input, class_dim)
    targets = _counted(name, target, ignore_index)
    loss, counts = _nll(name, logp, targets, weights, class_dim)
    nll = _mean_over((name, reduction), loss, counts)
    if label_smoothing == 0:
        return nll
    smooth = _smoothing(name, logp, weights, class_dim, targets[1])
    smooth = _mean_over((name, reduction), smooth, counts)
    eps, classes = label_smoothing, input.shape[class_dim]
    if nll.placements != smooth.placements:  # a vocab-parallel nll is Partial, its smoothing not
        nll, smooth = sum_partials(nll), sum_partials(smooth)
    return binary(
        B.ADD, name, binary(B.MUL, name, nll, 1 - eps), binary(B.MUL, name, smooth, eps / classes)
    )


def _smoothing(
    name: str, logp: Tensor, weights: Tensor | None, class_dim: int, valid: Tensor
) -> Tensor:
    """torch's smoothing term: ``-sum(logp * weight)`` over the classes, 0 where ignored."""
    terms = logp if weights is None else binary(B.MUL, name, logp, weights)
    total = unary(M.NEG, name, reduce_by(ReduceKind.SUM, name, terms, class_dim))
    return select(name, valid, sum_partials(total), 0.0)


def _soft_targets(
    name: str,
    input: Tensor,
    target: Tensor,
    weights: Tensor | None,
    how: tuple[str, float, int],
) -> Tensor:
    """Cross entropy with class probabilities, as torch's ``cross_entropy_loss_prob_target``
    (``how``: the reduction, the label smoothing and the class dim)."""
    reduction, eps, class_dim = how
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(
            f"{name}: class-probability targets must have the input's shape {list(input.shape)}, "
            f"got {list(target.shape)}"
        )
    _dtype(name, _soft_probe, input, target)
    logp = _log_probs(name, input, class_dim)
    if eps > 0:
        target = binary(
            B.ADD, name, binary(B.MUL, name, target, 1 - eps), eps / input.shape[class_dim]
        )
    terms = binary(B.MUL, name, logp, target)
    if weights is not None:
        terms = binary(B.MUL, name, terms, weights)
    if reduction == "none":
        return unary(M.NEG, name, reduce_by(ReduceKind.SUM, name, terms, class_dim))
    total = unary(M.NEG, name, reduce_by(ReduceKind.SUM, name, terms))
    if reduction == "sum":
        return total
    rows = input.numel() // input.shape[class_dim] if input.numel() else 0
    return binary(B.DIV, name, total, rows if rows else float("nan"))


def _soft_probe(input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(input.reshape(1, 1), target.reshape(1, 1))


@with_inputs
def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """torch's ``one_hot`` of int64 class indices: a new last dim of ``num_classes`` (-1: the
    largest index plus one), int64 ones at the indices. The indices' range is read first
    (one fetch), to refuse what torch refuses: negative ones, ones not below
    ``num_classes``, and an empty tensor with ``num_classes=-1``.

    Example:
        >>> import dtorch
        >>> one_hot(dtorch.tensor([0, 2])).tolist()
        [[1, 0, 0], [0, 0, 1]]
    """
    tensor_arg("one_hot", tensor)
    if tensor.dtype != torch.int64:
        raise DtypeError("one_hot is only applicable to index tensor of type LongTensor.")
    classes = _classes(tensor, as_int("one_hot", "num_classes", num_classes))
    hits = binary(B.EQ, "one_hot", unsqueeze(tensor, -1), beside(tensor, torch.arange(classes)))
    return cast(hits, torch.int64)


def _classes(tensor: Tensor, num_classes: int) -> int:
    """``num_classes`` checked against the indices (torch's messages), -1 resolved."""
    if tensor.numel() == 0:
        if num_classes in (-1, 0):  # torch's: 0 classes of nothing is refused alike
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        return num_classes
    values = tensor.to_torch()  # one fetch (a min over a sharded dim is refused)
    low, high = int(values.min()), int(values.max())
    if low < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        return high + 1
    if high >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    return num_classes
