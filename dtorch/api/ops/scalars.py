"""Python numbers as operator arguments: which values count as scalars, and their tags.

Example:
    >>> import torch
    >>> as_scalar(torch.tensor(2.5)), as_scalar(3)
    (Scalar(FLOAT, 2.5), Scalar(INT, 3))
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from dtorch.ir.scalar import Scalar


def is_scalar(value: Any) -> bool:
    """Python/numpy numbers and one-element torch tensors of no dims."""
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return True
    return isinstance(value, torch.Tensor) and value.ndim == 0


def python_number(value: Any) -> bool | int | float:
    """The Python number a scalar argument stands for."""
    if isinstance(value, torch.Tensor):
        return value.item()
    if isinstance(value, (np.number, np.bool_)):
        return value.item()
    if isinstance(value, numbers.Number) and not isinstance(value, (bool, int, float)):
        raise TypeError(f"{value!r} is not a real number; accepted: bool, int, float")
    return value


def as_scalar(value: Any) -> Scalar:
    """The tagged Scalar of a scalar argument (TypeError for anything else)."""
    if not is_scalar(value):
        raise TypeError(
            f"expected a dtorch.Tensor or a number, got {type(value).__name__}; "
            "convert torch tensors with dtorch.tensor(...) first"
        )
    return Scalar.of(python_number(value))
