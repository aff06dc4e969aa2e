"""``linear_cross_entropy``: torch.nn.functional's cross entropy of a linear projection, an
LLM head and its loss in one call.

dtorch computes torch's reference form, ``cross_entropy(linear(input, linear_weight,
linear_bias), target, ...)`` (a K-dimensional weight flattened for the linear and its logits
shaped back, as torch's), with ``linear``'s and ``cross_entropy``'s placement rules: a head
sharded on its classes (a weight ``Shard(0)``, as ``ColumnParallelLinear`` holds it) gives
vocab-parallel logits whose log-softmax all-reduces each row's maximum and sum, the logits
never gathered. torch's ``options`` choose how its own kernel chunks the batch to save
memory; they change no value beyond rounding, and dtorch's devices compute the logits of
their own shards, so they are taken and not used.

Example:
    >>> import dtorch
    >>> x, w = dtorch.tensor([[1.0, 0.0]]), dtorch.tensor([[0.0, 0.0], [0.0, 0.0]])
    >>> round(linear_cross_entropy(x, w, dtorch.tensor([1])).item(), 4)
    0.6931
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from dtorch.api.ops.class_losses import cross_entropy
from dtorch.api.ops.linalg import linear
from dtorch.api.ops.shape import reshape
from dtorch.api.record import named_as, tensor_arg
from dtorch.errors import ParamError, ShapeError

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_NAME = "linear_cross_entropy"


def linear_cross_entropy(
    input: Tensor,
    linear_weight: Tensor,
    target: Any,
    *,
    linear_bias: Tensor | None = None,
    weight: Any = None,
    reduction: str = "mean",
    ignore_index: int | None = None,
    label_smoothing: float = 0.0,
    options: Any = None,
) -> Tensor:
    """``torch.nn.functional.linear_cross_entropy``: the cross entropy of ``input`` (N, in)
    or (in) projected by ``linear_weight`` (C, *out, in) (and ``linear_bias`` (C, *out)),
    against ``target`` class indices or probabilities; ``ignore_index`` None is -100 (and
    refused beside probabilities, as torch's).

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[1.0, 2.0]])
        >>> w = dtorch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> round(linear_cross_entropy(x, w, dtorch.tensor([1]), reduction="sum").item(), 4)
        0.3133
    """
    tensor_arg(_NAME, input)
    tensor_arg(_NAME, linear_weight, "linear_weight")
    out_features = _check(input, linear_weight, linear_bias)
    classes = linear_weight.shape[0]
    logits_shape = (*input.shape[:-1], classes, *out_features)
    soft = tuple(getattr(target, "shape", ())) == logits_shape
    if soft and ignore_index is not None:
        raise ParamError("ignore_index cannot be specified when target contains probabilities")
    with named_as(_NAME):
        if out_features:  # torch's: the K-dim weight flattened for linear
            rows = math.prod(out_features, start=classes)
            linear_weight = reshape(linear_weight, (rows, input.shape[-1]))
            linear_bias = None if linear_bias is None else reshape(linear_bias, (rows,))
        logits = reshape(linear(input, linear_weight, linear_bias), logits_shape)
        return cross_entropy(
            logits, target, weight=weight, reduction=reduction,
            ignore_index=-100 if ignore_index is None else ignore_index,
            label_smoothing=label_smoothing,
        )  # fmt: skip


def _check(input: Tensor, linear_weight: Tensor, linear_bias: Tensor | None) -> tuple[int, ...]:
    """torch's checks, in its order and words; the weight's out_features."""
    if input.ndim < 1 or input.ndim > 2:
        raise ShapeError(f"expected input with dimensionality 1 or 2, got {input.ndim}")
    if linear_weight.ndim < 2:
        raise ShapeError(
            f"expected linear_weight with dimensionality at least 2, got {linear_weight.ndim}"
        )
    if input.shape[-1] != linear_weight.shape[-1]:
        raise ShapeError(
            "expected equal input and linear_weight last dimensions (in_features), got "
            f"{input.shape[-1]} and {linear_weight.shape[-1]}, respectively"
        )
    out_features = tuple(linear_weight.shape[1:-1])
    wanted = (linear_weight.shape[0], *out_features)
    if linear_bias is not None and tuple(linear_bias.shape) != wanted:
        raise ShapeError(f"expected linear_bias shape {wanted}, got {tuple(linear_bias.shape)}")
    if out_features and input.ndim == 1:
        raise ShapeError(
            f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} "
            f"requires batched input, (N, {input.shape[-1]}), got unbatched input with shape "
            f"{tuple(input.shape)}"
        )
    return out_features
