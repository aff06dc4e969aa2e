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

from dtorch.api.handle import TensorBase
from dtorch.ir.scalar import Scalar


def is_scalar(value: Any) -> bool:
    """Python/numpy numbers and one-element torch tensors of no dims."""
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return True
    return isinstance(value, torch.Tensor) and value.ndim == 0


def python_number(value: Any) -> bool | int | float:
    """The Python number a scalar argument stands for (a complex one is refused: a numpy
    complex or a complex 0-d torch tensor as well as ``1j``)."""
    if isinstance(value, (torch.Tensor, np.number, np.bool_)):
        value = value.item()
    if isinstance(value, numbers.Number) and not isinstance(value, (bool, int, float)):
        raise TypeError(_not_real(value))
    return value


def converted_number(value: Any, dtype: torch.dtype) -> Any:
    """A number as torch writes it through a 0-d tensor of its own (int64, double, bool)
    converted to ``dtype`` - ``copy_`` and ``t[mask] = value`` do - where ``fill_`` and
    ``masked_fill`` refuse a number ``dtype`` cannot hold: 300 wraps to 44 in uint8, 1e10 is
    inf in float16. A complex ``dtype`` holds a real number as it is.

    Example:
        >>> import torch
        >>> converted_number(300, torch.uint8), converted_number(1e10, torch.float16)
        (44, inf)
    """
    if dtype.is_complex:
        return value
    number = python_number(value)
    wide = torch.float64 if isinstance(number, float) else None  # torch's double, not float32
    return torch.tensor(number, dtype=wide).to(dtype).item()


def _not_real(value: Any) -> str:
    return (
        f"{value!r} is not a real number; accepted scalars: bool, int, float (dtorch has no "
        f"complex scalars: hold complex values in a complex tensor, e.g. dtorch.tensor({value!r}))"
    )


def not_a_number(what: str, value: Any, accepted: str = "a number") -> TypeError:
    """The TypeError for ``value`` where ``what`` (``"full: fill_value"``) takes ``accepted``;
    a complex number gets the reason it is refused, which "must be a number" would not give."""
    if isinstance(value, numbers.Number):
        return TypeError(f"{what}: {_not_real(value)}")
    return TypeError(f"{what} must be {accepted}, got {type(value).__name__}")


def as_real(what: str, value: Any) -> float:
    """``value`` as the float an argument ``what`` (``"leaky_relu: negative_slope"``) takes:
    a Python or numpy real number, or a 0-d torch tensor; anything else a TypeError naming
    the argument (``float("a")`` raised a ValueError that named neither).

    Example:
        >>> as_real("elu: alpha", 2)
        2.0
    """
    if not is_scalar(value):
        raise not_a_number(what, value)
    return float(python_number(value))


def as_scalar(value: Any) -> Scalar:
    """The tagged Scalar of a scalar argument (TypeError for anything else)."""
    if isinstance(value, numbers.Number) and not is_scalar(value):
        raise TypeError(_not_real(value))  # 1j is a number, so say why it is refused
    if isinstance(value, TensorBase):  # its value is on the devices: never read implicitly
        raise TypeError(
            f"expected a number, got a dtorch tensor ({value.dtype}, shape "
            f"{list(value.shape)}): dtorch does not wait for a tensor's value here; pass the "
            "number (t.item()) or a 0-d torch tensor"
        )
    if not is_scalar(value):
        raise TypeError(
            f"expected a dtorch.Tensor or a number, got {type(value).__name__}; "
            "convert torch tensors with dtorch.tensor(...) first"
        )
    return Scalar.of(python_number(value))
