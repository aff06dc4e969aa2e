"""``Flatten`` and ``Unflatten``: torch.nn.Flatten (``Tensor.flatten`` of a dim range) and
torch.nn.Unflatten (``Tensor.unflatten`` of one dim) on dtorch tensors.

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> nn.Flatten()(dtorch.zeros(2, 3, 4)).shape, nn.Flatten(0, 1)
    (torch.Size([2, 12]), Flatten(start_dim=0, end_dim=1))
    >>> nn.Unflatten(1, (3, 4))(dtorch.zeros(2, 12)).shape
    torch.Size([2, 3, 4])
"""

from __future__ import annotations

from typing import Any

from dtorch.api.ops.shape import flatten, unflatten
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


class Unflatten(_NoParameters):
    """Splits dim ``dim`` into ``unflattened_size`` (a tuple or list of ints, one -1 at most);
    the placement rule is ``unflatten``'s (a reshape: a shard of the split dim stays a shard
    of its first part where the chunks line up). torch's named form (a str ``dim`` with
    named sizes) is refused: dtorch tensors have no dim names.

    Example:
        >>> import dtorch
        >>> dtorch.nn.Unflatten(-1, [2, -1])
        Unflatten(dim=-1, unflattened_size=[2, -1])
    """

    def __init__(self, dim: int, unflattened_size: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(dim, str):
            raise TypeError("Unflatten: a named dim (str) needs named tensors, which dtorch "
                            "has not; give the dim's index")  # fmt: skip
        if not isinstance(dim, int):
            raise TypeError("invalid argument type for dim parameter")  # torch's
        _require_tuple_int(unflattened_size)
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        return unflatten(input, self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


def _require_tuple_int(sizes: Any) -> None:
    # torch's checks and messages, at construction
    if not isinstance(sizes, (tuple, list)):
        raise TypeError(
            f"unflattened_size must be a tuple of ints, but found type {type(sizes).__name__}"
        )
    for idx, elem in enumerate(sizes):
        if not isinstance(elem, int):
            raise TypeError(
                f"unflattened_size must be tuple of ints, but found element of type "
                f"{type(elem).__name__} at pos {idx}"
            )


__all__ = ["Flatten", "Unflatten"]
