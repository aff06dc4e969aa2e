"""More loss layers of torch.nn: ``CosineEmbeddingLoss``, ``MarginRankingLoss``,
``TripletMarginLoss``, ``PoissonNLLLoss``, ``GaussianNLLLoss``, ``HingeEmbeddingLoss``,
``SoftMarginLoss`` and ``MultiLabelSoftMarginLoss``, each calling its
``dtorch.nn.functional`` loss (``dtorch.api.ops.nn_more_losses``) with torch's constructor
arguments (the legacy ``size_average``/``reduce`` flags translated once, as torch's
``_Loss``). ``MultiLabelSoftMarginLoss``'s ``weight`` is a buffer, as in torch: a dtorch
tensor, or a torch one distributed Replicate on ``device_mesh=``.

Example:
    >>> import dtorch
    >>> loss = dtorch.nn.SoftMarginLoss(reduction="sum")
    >>> round(loss(dtorch.zeros(2), dtorch.ones(2)).item(), 4), loss
    (1.3863, SoftMarginLoss())
"""

from __future__ import annotations

from typing import Any

from dtorch.api.ops import nn_more_losses as fn
from dtorch.api.tensor import Tensor
from dtorch.nn.modules.linear import placement_keywords
from dtorch.nn.modules.loss import _Loss, _WeightedLoss


@placement_keywords
class CosineEmbeddingLoss(_Loss):
    """``cosine_embedding_loss`` with ``margin``.

    Example:
        >>> import dtorch
        >>> a, b = dtorch.tensor([[1.0, 0.0]]), dtorch.tensor([[1.0, 0.0]])
        >>> dtorch.nn.CosineEmbeddingLoss()(a, b, dtorch.tensor([-1])).item()
        1.0
    """

    def __init__(
        self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
        reduction: str = "mean",
    ) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return fn.cosine_embedding_loss(input1, input2, target, self.margin,
                                        reduction=self.reduction)  # fmt: skip


@placement_keywords
class MarginRankingLoss(_Loss):
    """``margin_ranking_loss`` with ``margin``.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.MarginRankingLoss(margin=1.0)
        >>> m(dtorch.tensor([2.0]), dtorch.tensor([1.5]), dtorch.tensor([1.0])).item()
        0.5
    """

    def __init__(
        self, margin: float = 0.0, size_average: Any = None, reduce: Any = None,
        reduction: str = "mean",
    ) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return fn.margin_ranking_loss(input1, input2, target, self.margin,
                                      reduction=self.reduction)  # fmt: skip


@placement_keywords
class TripletMarginLoss(_Loss):
    """``triplet_margin_loss`` with ``margin``, ``p``, ``eps`` and ``swap``.

    Example:
        >>> import dtorch
        >>> a, n = dtorch.zeros(1, 2), dtorch.tensor([[3.0, 4.0]])
        >>> dtorch.nn.TripletMarginLoss(margin=6.0, eps=0.0)(a, a, n).item()
        1.0
    """

    def __init__(
        self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
        size_average: Any = None, reduce: Any = None, reduction: str = "mean",
    ) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:  # torch's check, at construction
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")  # fmt: skip
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return fn.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps,
                                      self.swap, reduction=self.reduction)  # fmt: skip


@placement_keywords
class PoissonNLLLoss(_Loss):
    """``poisson_nll_loss`` with ``log_input``, ``full`` and ``eps``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.PoissonNLLLoss()(dtorch.zeros(2), dtorch.ones(2)).item()
        1.0
    """

    def __init__(
        self, log_input: bool = True, full: bool = False, size_average: Any = None,
        eps: float = 1e-8, reduce: Any = None, reduction: str = "mean",
    ) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return fn.poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps,
                                   reduction=self.reduction)  # fmt: skip


@placement_keywords
class GaussianNLLLoss(_Loss):
    """``gaussian_nll_loss`` with ``full`` and ``eps``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.GaussianNLLLoss()(dtorch.ones(2), dtorch.zeros(2), dtorch.ones(2)).item()
        0.5
    """

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        self.full, self.eps = full, eps

    def forward(self, input: Tensor, target: Tensor, var: Any) -> Tensor:
        return fn.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                    reduction=self.reduction)  # fmt: skip


@placement_keywords
class HingeEmbeddingLoss(_Loss):
    """``hinge_embedding_loss`` with ``margin``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.HingeEmbeddingLoss()(dtorch.tensor([0.25]), dtorch.tensor([-1.0])).item()
        0.75
    """

    def __init__(
        self, margin: float = 1.0, size_average: Any = None, reduce: Any = None,
        reduction: str = "mean",
    ) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return fn.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


@placement_keywords
class SoftMarginLoss(_Loss):
    """``soft_margin_loss``.

    Example:
        >>> import dtorch
        >>> round(dtorch.nn.SoftMarginLoss()(dtorch.zeros(1), dtorch.ones(1)).item(), 4)
        0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return fn.soft_margin_loss(input, target, reduction=self.reduction)


@placement_keywords
class MultiLabelSoftMarginLoss(_WeightedLoss):
    """``multilabel_soft_margin_loss`` with a ``weight`` buffer per class.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.MultiLabelSoftMarginLoss()
        >>> round(m(dtorch.zeros(1, 2), dtorch.tensor([[1.0, 0.0]])).item(), 4)
        0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return fn.multilabel_soft_margin_loss(input, target, self.weight,
                                              reduction=self.reduction)  # fmt: skip


__all__ = [
    "CosineEmbeddingLoss",
    "GaussianNLLLoss",
    "HingeEmbeddingLoss",
    "MarginRankingLoss",
    "MultiLabelSoftMarginLoss",
    "PoissonNLLLoss",
    "SoftMarginLoss",
    "TripletMarginLoss",
]
