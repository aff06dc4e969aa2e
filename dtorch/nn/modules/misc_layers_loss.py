"""Margin loss layers of torch.nn: ``MultiMarginLoss``, ``MultiLabelMarginLoss`` and
``TripletMarginWithDistanceLoss``, each calling its ``dtorch.nn.functional`` loss
(``dtorch.api.ops.nn_misc_losses``: their placements) with torch's constructor arguments.
``MultiMarginLoss``'s ``weight`` is a buffer, as in torch: a dtorch tensor, or a torch one
distributed Replicate on ``device_mesh=``.

Example:
    >>> import dtorch
    >>> dtorch.nn.MultiMarginLoss(p=2)
    MultiMarginLoss()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dtorch.api.ops import nn_misc_losses as fn
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.nn.modules.linear import placement_keywords
from dtorch.nn.modules.loss import _Loss, _WeightedLoss
from dtorch.nn.modules.nn_more import PairwiseDistance


@placement_keywords
class MultiMarginLoss(_WeightedLoss):
    """``multi_margin_loss`` with ``p`` (1 or 2), ``margin`` and a class ``weight``.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.MultiMarginLoss()
        >>> round(m(dtorch.tensor([[0.1, 0.2, 0.4, 0.8]]), dtorch.tensor([3])).item(), 4)
        0.325
    """

    def __init__(
        self, p: int = 1, margin: float = 1.0, weight: Any = None, size_average: Any = None,
        reduce: Any = None, reduction: str = "mean", *, device_mesh: DeviceMesh | None = None,
    ) -> None:  # fmt: skip
        super().__init__(weight, size_average, reduce, reduction, device_mesh=device_mesh)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.dim() != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got "
                             f"{weight.dim()}D instead")  # fmt: skip
        self.p, self.margin = p, margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return fn.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                    weight=self.weight, reduction=self.reduction)  # fmt: skip


@placement_keywords
class MultiLabelMarginLoss(_Loss):
    """``multilabel_margin_loss``.

    Example:
        >>> import dtorch
        >>> x, y = dtorch.tensor([[0.1, 0.2, 0.4, 0.8]]), dtorch.tensor([[3, 0, -1, 1]])
        >>> round(dtorch.nn.MultiLabelMarginLoss()(x, y).item(), 4)
        0.85
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return fn.multilabel_margin_loss(input, target, reduction=self.reduction)


@placement_keywords
class TripletMarginWithDistanceLoss(_Loss):
    """``triplet_margin_with_distance_loss`` with ``distance_function`` (default
    ``PairwiseDistance()``, a submodule as in torch), ``margin`` and ``swap``.

    Example:
        >>> import dtorch
        >>> a, p, n = dtorch.zeros(1, 2), dtorch.zeros(1, 2), dtorch.tensor([[3.0, 4.0]])
        >>> round(dtorch.nn.TripletMarginWithDistanceLoss(margin=6.0)(a, p, n).item(), 4)
        1.0
    """

    def __init__(
        self, *, distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
        margin: float = 1.0, swap: bool = False, reduction: str = "mean",
    ) -> None:  # fmt: skip
        super().__init__(size_average=None, reduce=None, reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")  # fmt: skip
        distance = distance_function if distance_function is not None else PairwiseDistance()
        self.distance_function: Any = distance
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return fn.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction,
        )  # fmt: skip


__all__ = ["MultiLabelMarginLoss", "MultiMarginLoss", "TripletMarginWithDistanceLoss"]
