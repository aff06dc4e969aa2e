"""Dimension arguments: negative dims counted from the end; torch's IndexError (a DimError).

The IndexError names the operator (``op=``), the dim it got and the range it accepts.

Example:
    >>> normalize_dims(-1, 3), normalize_dims((0, -2), 2)
    ((2,), (0, 0))
    >>> normalize_dims(3, 2, op="sum")
    Traceback (most recent call last):
    dtorch.errors.DimError: sum: dimension 3 is out of range for a 2-D tensor; accepted: -2 to 1
"""

from __future__ import annotations

from collections.abc import Sequence

from dtorch.ir.rules.base import norm_dim


def _dim(dim: int, ndim: int, op: str) -> int:
    return norm_dim(op, dim, ndim)  # the rules' check: one message and error type for both


def normalize_dims(
    dims: int | Sequence[int], ndim: int, *, op: str = "dim argument"
) -> tuple[int, ...]:
    """Non-negative dims (IndexError naming ``op``, the bad dim and the accepted range)."""
    if isinstance(dims, int):
        return (_dim(dims, ndim, op),)
    return tuple(_dim(d, ndim, op) for d in dims)
