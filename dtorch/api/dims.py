"""Dimension arguments: negative dims counted from the end, with torch's IndexError.

Example:
    >>> normalize_dims(-1, 3), normalize_dims((0, -2), 2)
    ((2,), (0, 0))
"""

from __future__ import annotations

from collections.abc import Sequence


def _dim(dim: int, ndim: int) -> int:
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"dimension {dim} is out of range for a {ndim}-D tensor")
    return dim % max(ndim, 1)


def normalize_dims(dims: int | Sequence[int], ndim: int) -> tuple[int, ...]:
    """Non-negative dims (IndexError naming the bad one)."""
    if isinstance(dims, int):
        return (_dim(dims, ndim),)
    return tuple(_dim(d, ndim) for d in dims)
