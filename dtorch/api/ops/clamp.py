"""``clamp`` (also ``clip``): ``input`` clamped to ``[min, max]``. Number bounds clamp in one
Clamp operator; tensor bounds (dtorch's, or 0-d torch tensors, whose dtypes promote) are
``minimum(maximum(input, min), max)`` after all three are promoted at once, as torch's one
kernel promotes them.

Example:
    >>> import dtorch
    >>> t = dtorch.tensor([-2, 0, 5], dtype=dtorch.int8)
    >>> dtorch.clamp(t, dtorch.tensor(-1.5), dtorch.tensor(3.0)).tolist()  # float32, as torch
    [-1.5, 0.0, 3.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.handle import TensorBase, is_tensor
from dtorch.api.ops.convert import cast
from dtorch.api.ops.elementwise import maximum, minimum, probe, zero_dim
from dtorch.api.ops.scalars import as_scalar, is_scalar, not_a_number
from dtorch.api.record import record
from dtorch.errors import ParamError, UnsupportedDtypeError
from dtorch.ir.params import ClampParam

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """``input`` clamped to ``[min, max]`` (also ``clip``); numbers clamp in one operator,
    dtorch tensor bounds as ``minimum(maximum(input, min), max)`` (broadcast, dtype
    promoted as torch does). A Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.clamp(dtorch.tensor([-2, 0, 5]), min=-1, max=3).tolist()
        [-1, 0, 3]
    """
    param = number_bounds(min, max)
    if param is None:
        return _clamp_tensors(input, zero_dim(min, input), zero_dim(max, input))
    return record("clamp", param, (input,))[0]


def number_bounds(min: Any, max: Any) -> ClampParam | None:
    """The Clamp of number bounds ``min`` and ``max`` (None: a bound is a tensor, which
    ``clamp`` computes otherwise); neither bound, or one of another type, is refused.

    Example:
        >>> number_bounds(0, 1.5).max.value, number_bounds(torch.tensor(0), torch.tensor(1))
        (1.5, None)
    """
    if min is None and max is None:
        raise ParamError("clamp: at least one of min and max must be given")
    if isinstance(min, TensorBase) or isinstance(max, TensorBase) or _torch_bounds(min, max):
        return None
    for bound in (min, max):
        if bound is not None and not is_scalar(bound):
            raise not_a_number("clamp: bounds", bound, "numbers")
    low = None if min is None else as_scalar(min)
    high = None if max is None else as_scalar(max)
    return ClampParam(low, high)


def _clamp_tensors(input: Tensor, low: Any, high: Any) -> Tensor:
    """Tensor bounds: torch's ``clamp`` is ``min(max(input, low), high)`` elementwise."""
    for bound in (low, high):
        if bound is not None and not isinstance(bound, TensorBase) and not is_scalar(bound):
            raise TypeError(
                f"clamp: bounds must be numbers or dtorch tensors, got {type(bound).__name__}"
            )
    both = low is not None and high is not None  # one tensor bound: torch's clamp_min/max
    if any(getattr(t, "dtype", torch.float32).is_complex for t in (input, low, high)):
        raise UnsupportedDtypeError(
            "clamp: clamp is not supported for complex types (as in torch); accepted: real "
            "tensors and bounds"
        )
    if input.dtype == torch.bool and both and all(map(_bool_bound, (low, high))):
        raise UnsupportedDtypeError(  # torch has no bool clamp; minimum/maximum would make one
            "clamp: \"clamp_cpu\" not implemented for 'Bool' (torch clamps no bool tensor by "
            "bool bounds); accepted: a bound of another dtype, or logical_and/logical_or"
        )
    dtype = _clamp_dtype(input, low, high)
    result = cast(input, dtype)  # all three promoted at once, as torch's one kernel does
    if low is not None:
        result = maximum(result, cast(low, dtype) if is_tensor(low) else low)
    if high is not None:
        result = minimum(result, cast(high, dtype) if is_tensor(high) else high)
    return result


def _torch_bounds(low: Any, high: Any) -> bool:
    """Whether torch takes ``clamp``'s torch bounds (at least one given) as tensors: when
    every given bound is one (a 0-d torch tensor's dtype then promotes); beside a number,
    torch reads a 0-d tensor as a number."""
    return all(isinstance(b, torch.Tensor) for b in (low, high) if b is not None)


def _clamp_dtype(input: Tensor, low: Any, high: Any) -> torch.dtype:
    """torch's result dtype for these bounds, asked of torch's own ``clamp`` on stand-ins of
    their dtypes and dims (a tensor bound beside a number is torch's TypeError)."""
    try:
        return torch.clamp(probe(input), probe(low), probe(high)).dtype
    except TypeError:
        raise TypeError(
            "clamp: give both bounds as tensors or both as numbers (torch takes no mix of a "
            f"tensor and a number), got {type(low).__name__} and {type(high).__name__}"
        ) from None


def _bool_bound(bound: Any) -> bool:
    """Whether a clamp bound leaves the result bool (absent, a bool, a bool tensor)."""
    return bound is None or type(bound) is bool or getattr(bound, "dtype", None) == torch.bool
