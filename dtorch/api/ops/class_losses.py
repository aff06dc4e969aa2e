"""The classification losses of ``torch.nn.functional``: ``nll_loss``, ``cross_entropy`` and
``one_hot``, built from dtorch's operators as the other losses are (``dtorch.api.ops.losses``:
torch's signatures, reductions, dtypes and refusals).

Placements: the batch dims shard freely (a ``"mean"`` or ``"sum"`` of a sharded loss is
Partial, as ``sum`` is), and so may the class dim (vocab-parallel logits, as Megatron's and
DTensor's ``loss_parallel``): the log-softmax is then a SplitSoftmax (each row's maximum and
sum all-reduced), the pick of each target's log-probability a masked gather whose result is
Partial (each device picks the targets in its range of classes), and class weights are
sharded where the classes are, gathered elsewhere (C numbers). A weighted mean divides by the
weights' sum, both made whole first.

torch checks the targets' range on the host; here they live on the devices: a target out of
range fails at the fetch (the gather's KernelError). ``one_hot`` reads its input's range (one
fetch) and raises as torch.

Example:
    >>> import dtorch
    >>> logits = dtorch.tensor([[2.0, 0.0], [0.0, 2.0]])
    >>> round(cross_entropy(logits, dtorch.tensor([0, 1])).item(), 4)
    0.1269
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from dtorch.api.create import beside
from dtorch.api.dims import as_int
from dtorch.api.ops.convert import cast
from dtorch.api.ops.elementwise import binary, unary
from dtorch.api.ops.losses import loss_dtype, loss_operand, mean_over, reduction_of
from dtorch.api.ops.masked import select
from dtorch.api.ops.order import gather_aligned
from dtorch.api.ops.reduce import reduce as reduce_by  # the losses' own ``reduce`` is torch's flag
from dtorch.api.ops.reduce import softmax_param
from dtorch.api.ops.shape import squeeze, unsqueeze
from dtorch.api.record import record, tensor_arg, with_inputs
from dtorch.api.redistribute import redistribute, sum_partials
from dtorch.errors import DtypeError, ParamError, ShapeError
from dtorch.ir.dtypes import scalar_type_name
from dtorch.ir.opkind import BinaryKind, MathKind, ReduceKind
from dtorch.ir.placement import Placement, Replicate, Shard

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

B, M = BinaryKind, MathKind
_INDEX_TARGETS = (torch.int64, torch.uint8)  # torch's "Long or Byte"


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


def _class_weights(
    name: str, weight: Any, input: Tensor, class_dim: int, same_dtype: bool = True
) -> Tensor | None:
    """``weight`` (one per class) shaped to broadcast along ``input``'s class dim; of the
    input's dtype where ``same_dtype`` (class-index targets: torch's check; probabilities
    multiply by it and promote)."""
    if weight is None:
        return None
    w = loss_operand(name, "weight", weight, input)
    classes = input.shape[class_dim]
    if w.ndim != 1 or w.shape[0] != classes:
        raise RuntimeError(
            f"weight tensor should be defined either for all {classes} classes or no classes "
            f"but got weight tensor of shape: {list(w.shape)}"
        )
    if same_dtype and w.dtype != input.dtype:
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
    reduction = reduction_of(reduction, size_average, reduce)
    tensor_arg("nll_loss", input)
    class_dim = _class_dim("nll_loss", input)
    target = loss_operand("nll_loss", "target", target, input)
    _check_index_target("nll_loss", input, target, class_dim)
    loss_dtype("nll_loss", _log_softmax_probe, input)  # torch's refusal of integer inputs
    weights = _class_weights("nll_loss", weight, input, class_dim)
    targets = _counted("nll_loss", target, ignore_index)
    loss, counts = _nll("nll_loss", input, targets, weights, class_dim)
    return mean_over(("nll_loss", reduction), loss, counts)


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
    reduction = reduction_of(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ParamError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    tensor_arg(name, input)
    class_dim = _class_dim(name, input)
    target = loss_operand(name, "target", target, input)
    soft = target.dtype.is_floating_point
    weights = _class_weights(name, weight, input, class_dim, same_dtype=not soft)
    if soft:
        if ignore_index >= 0:
            raise ParamError("ignore_index is not supported for floating point target")
        how = (reduction, label_smoothing, class_dim)
        return _soft_targets(name, input, target, weights, how)
    _check_index_target(name, input, target, class_dim)
    loss_dtype(name, _log_softmax_probe, input)
    logp = _log_probs(name, input, class_dim)
    targets = _counted(name, target, ignore_index)
    loss, counts = _nll(name, logp, targets, weights, class_dim)
    nll = mean_over((name, reduction), loss, counts)
    if label_smoothing == 0:
        return nll
    smooth = _smoothing(name, logp, weights, class_dim, targets[1])
    smooth = mean_over((name, reduction), smooth, counts)
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
    loss_dtype(name, _soft_probe, input, target)
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
