"""Loss layers: torch.nn's ``MSELoss``, ``L1Loss``, ``SmoothL1Loss``, ``HuberLoss``,
``BCELoss``, ``BCEWithLogitsLoss``, ``KLDivLoss``, ``NLLLoss`` and ``CrossEntropyLoss``, each
calling its ``dtorch.nn.functional`` loss (``dtorch.api.ops.losses`` and ``class_losses``)
with torch's constructor arguments (the legacy ``size_average``/``reduce`` flags translated
once, as torch's ``_Loss`` does). A class ``weight`` (and ``pos_weight``) is a buffer, as in
torch: a dtorch tensor, or a torch tensor distributed Replicate on ``device_mesh=`` (the
graph's default mesh when None).

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> loss = nn.CrossEntropyLoss(label_smoothing=0.1)
    >>> round(loss(dtorch.tensor([[0.0, 0.0]]), dtorch.tensor([1])).item(), 4), loss
    (0.6931, CrossEntropyLoss())
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.nn import _reduction as torch_reduction

from dtorch.api.creation import from_torch
from dtorch.api.ops import class_losses, linear_losses, losses
from dtorch.api.tensor import Tensor
from dtorch.errors import ParamError
from dtorch.ir.mesh import DeviceMesh
from dtorch.nn.modules.linear import Linear, placement_keywords
from dtorch.nn.modules.module import Module


class _Loss(Module):
    """torch's ``_Loss``: the reduction, from the legacy flags when either is given."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = torch_reduction.legacy_get_string(size_average, reduce)
        self.reduction: str = reduction


class _WeightedLoss(_Loss):
    """A ``_Loss`` with a ``weight`` buffer (one per class, or per element)."""

    def __init__(
        self,
        weight: Any = None,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", _buffer(weight, device_mesh))


def _buffer(value: Any, device_mesh: DeviceMesh | None) -> Tensor | None:
    """A weight buffer: a dtorch tensor as given, a torch one distributed Replicate."""
    if isinstance(value, torch.Tensor):
        return from_torch(value, device_mesh=device_mesh)
    return value  # None, a dtorch tensor, or what register_buffer refuses with its message


@placement_keywords
class MSELoss(_Loss):
    """``mse_loss``: the squared error, reduced.

    Example:
        >>> import dtorch
        >>> dtorch.nn.MSELoss(reduction="sum")(dtorch.ones(2), dtorch.zeros(2)).item()
        2.0
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return losses.mse_loss(input, target, reduction=self.reduction)


@placement_keywords
class L1Loss(_Loss):
    """``l1_loss``: the absolute error, reduced.

    Example:
        >>> import dtorch
        >>> dtorch.nn.L1Loss()(dtorch.tensor([1.0, -3.0]), dtorch.zeros(2)).item()
        2.0
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return losses.l1_loss(input, target, reduction=self.reduction)


@placement_keywords
class SmoothL1Loss(_Loss):
    """``smooth_l1_loss`` with ``beta``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.SmoothL1Loss(beta=2.0)(dtorch.tensor([1.0]), dtorch.zeros(1)).item()
        0.25
    """

    def __init__(
        self,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
        beta: float = 1.0,
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return losses.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


@placement_keywords
class HuberLoss(_Loss):
    """``huber_loss`` with ``delta``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.HuberLoss(delta=0.5)(dtorch.tensor([2.0]), dtorch.zeros(1)).item()
        0.875
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        if not isinstance(delta, (float, int)):
            raise TypeError(f"delta must be a float or int, got: {type(delta)}")
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return losses.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


@placement_keywords
class BCELoss(_WeightedLoss):
    """``binary_cross_entropy`` of probabilities, ``weight`` broadcast onto the terms.

    Example:
        >>> import dtorch
        >>> round(dtorch.nn.BCELoss()(dtorch.tensor([0.5]), dtorch.ones(1)).item(), 4)
        0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return losses.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


@placement_keywords
class BCEWithLogitsLoss(_Loss):
    """``binary_cross_entropy_with_logits``, with ``weight`` and ``pos_weight`` buffers.

    Example:
        >>> import dtorch
        >>> round(dtorch.nn.BCEWithLogitsLoss()(dtorch.zeros(1), dtorch.ones(1)).item(), 4)
        0.6931
    """

    def __init__(
        self,
        weight: Any = None,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
        pos_weight: Any = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", _buffer(weight, device_mesh))
        self.register_buffer("pos_weight", _buffer(pos_weight, device_mesh))

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return losses.binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )


@placement_keywords
class KLDivLoss(_Loss):
    """``kl_div`` of log-probabilities (``log_target``: the target's too).

    Example:
        >>> import dtorch
        >>> p = dtorch.tensor([0.5, 0.5])
        >>> dtorch.nn.KLDivLoss(reduction="batchmean")(p.log(), p).item()
        0.0
    """

    def __init__(
        self,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
        log_target: bool = False,
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return losses.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


@placement_keywords
class NLLLoss(_WeightedLoss):
    """``nll_loss`` of log-probabilities at class indices, ``ignore_index`` skipped.

    Example:
        >>> import dtorch
        >>> dtorch.nn.NLLLoss()(dtorch.tensor([[-0.5, -2.0]]), dtorch.tensor([0])).item()
        0.5
    """

    def __init__(
        self,
        weight: Any = None,
        size_average: Any = None,
        ignore_index: int = -100,
        reduce: Any = None,
        reduction: str = "mean",
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__(weight, size_average, reduce, reduction, device_mesh=device_mesh)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return class_losses.nll_loss(
            input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction
        )


@placement_keywords
class CrossEntropyLoss(_WeightedLoss):
    """``cross_entropy`` of logits at class indices or class probabilities.

    Example:
        >>> import dtorch
        >>> round(dtorch.nn.CrossEntropyLoss()(dtorch.zeros(1, 2), dtorch.tensor([1])).item(), 4)
        0.6931
    """

    def __init__(
        self,
        weight: Any = None,
        size_average: Any = None,
        ignore_index: int = -100,
        reduce: Any = None,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__(weight, size_average, reduce, reduction, device_mesh=device_mesh)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return class_losses.cross_entropy(
            input,
            target,
            self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )


class LinearCrossEntropyLoss(_WeightedLoss):
    """torch's ``LinearCrossEntropyLoss``: a ``linear`` head of ``num_classes`` (times
    ``out_features``) rows and the cross entropy of its logits
    (``dtorch.nn.functional.linear_cross_entropy``); its ``linear`` is a ``dtorch.nn.Linear``
    drawn as torch draws it, on ``device_mesh=``.

    Example:
        >>> import dtorch
        >>> loss = dtorch.nn.LinearCrossEntropyLoss(4, 3)
        >>> loss.linear
        Linear(in_features=4, out_features=3, bias=False)
    """

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        *,
        out_features: tuple[int, ...] = (),
        bias: bool = False,
        device: Any = None,
        dtype: torch.dtype | None = None,
        reduction: str = "mean",
        weight: Any = None,
        ignore_index: int | None = None,
        label_smoothing: float = 0.0,
        options: Any = None,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise ParamError(
                f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}"
            )
        if not 0.0 <= label_smoothing <= 1.0:
            raise ParamError(
                f"expected label_smoothing to be in range [0, 1], got {label_smoothing}"
            )
        super().__init__(weight, reduction=reduction, device_mesh=device_mesh)
        self.num_classes, self.out_features = num_classes, tuple(out_features)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing
        rows = math.prod(self.out_features, start=num_classes)
        self.linear = Linear(in_features, rows, bias=bias, device=device, dtype=dtype,
                             device_mesh=device_mesh)  # fmt: skip
        self.options = options

    def forward(self, input: Tensor, target: Any) -> Tensor:
        shape = (self.num_classes, *self.out_features)
        linear_weight = self.linear.weight.reshape((*shape, self.linear.in_features))
        bias = self.linear.bias
        return linear_losses.linear_cross_entropy(
            input, linear_weight, target, linear_bias=None if bias is None else bias.reshape(shape),
            weight=self.weight, reduction=self.reduction, ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing, options=self.options,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
            f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
            f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
            f"label_smoothing={self.label_smoothing}, options={self.options}"
        )
