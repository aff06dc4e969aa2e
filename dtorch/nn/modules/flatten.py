"""``Flatten``: torch.nn.Flatten on dtorch tensors (``Tensor.flatten`` of a dim range).

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> nn.Flatten()(dtorch.zeros(2, 3, 4)).shape, nn.Flatten(0, 1)
    (torch.Size([2, 12]), Flatten(start_dim=0, end_dim=1))
"""

from __future__ import annotations

from typing import Any

from dtorch.api.ops.shape import flatten
from dtorch.api.tensor import Tensor
from dtorch.nn.modules.activation import _NoParameters


class Flatten(_NoParameters):
    """Flattens dims ``start_dim..end_dim`` (default: all but the batch dim) into one; the
    placement rule is ``flatten``'s (a shard of the first flattened dim stays a shard)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


__all__ = ["Flatten"]
