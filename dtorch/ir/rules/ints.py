"""Ints as torch takes them: sizes, steps, counts and dims are int64s; scalars fit 64 bits.

A Python int has no bound, but torch converts every int argument to an int64 and refuses one
beyond that at once (a fill value or a bound may also be a uint64). dtorch refuses the same
at record time: ``check_param_ints`` looks at every int of an operator's param (``infer``
calls it, so it covers every operator the rules see), ``check_sizes`` at a shape a rule or a
creation makes, ``check_scalars`` at a creation's numbers. An int beyond 64 bits would
otherwise reach the devices: a kernel failure later in thread mode, a batch the codec
cannot write in process mode.

A number within 64 bits may still not fit the tensor's dtype: torch converts it with a check
in some operators (``int8.clamp(min=300)``, ``int8 ** 300``, ``masked_fill`` of NaN into
int32, ``uint8[0] = 300``) and wraps it in others (``int8 + 300``). ``numbers_refusal`` asks
torch itself, through the operator's own probe on a tensor of one element, once per number
and dtype.

Example:
    >>> from dtorch.ir.params import RepeatInterleaveParam
    >>> check_param_ints("repeat_interleave", RepeatInterleaveParam(3))
    >>> check_param_ints("repeat_interleave", RepeatInterleaveParam(2**64))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    dtorch.errors.ParamError: repeat_interleave: repeats holds 18446744073709551616, beyond ...
    >>> check_sizes("repeat", (3, 2**63))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    dtorch.errors.ShapeError: repeat: shape [3, 9223372036854775808] has a size beyond 2**63-1...
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch

from dtorch.errors import ParamError, ScalarError, ShapeError
from dtorch.ir.params import CreateParam, OpParam, SliceIndex
from dtorch.ir.scalar import Scalar

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1

#: Param fields that hold numbers, not sizes: fill values and bounds are torch scalars
#: (int64 or uint64), checked by ``check_scalars``.
_SCALAR_FIELDS: dict[type, frozenset[str]] = {CreateParam: frozenset({"args"})}


def check_param_ints(name: str, param: OpParam) -> None:
    """ParamError naming ``name`` and the field if an int of ``param`` is no int64."""
    for field in _int_fields(type(param)):
        bad = outside_int64(getattr(param, field))
        if bad is not None:
            raise ParamError(
                f"{name}: {field} holds {bad}, beyond the int64s torch takes (-2**63 to 2**63-1)"
            )


def check_sizes(name: str, shape: Sequence[int], what: str = "shape") -> None:
    """ShapeError if a size of ``shape`` exceeds int64 (negative ones are the rules' to refuse)."""
    if shape and max(shape) > INT64_MAX:
        raise ShapeError(
            f"{name}: {what} {list(shape)} has a size beyond 2**63-1, the largest torch takes"
        )


def check_storage(name: str, shape: Sequence[int], dtype: torch.dtype) -> None:
    """ShapeError if a tensor of ``shape`` and ``dtype`` has more bytes than int64 counts:
    torch refuses to make it ("Storage size calculation overflowed"); the devices would."""
    if math.prod(shape) * dtype.itemsize > INT64_MAX:
        raise ShapeError(
            f"{name}: a {dtype} tensor of shape {list(shape)} would hold more than 2**63-1 "
            "bytes (torch: storage size calculation overflowed)"
        )


def check_scalars(name: str, values: Sequence[Any]) -> None:
    """ScalarError if an int of ``values`` is beyond torch's scalars (-2**63 to 2**64-1)."""
    for value in values:
        if type(value) is int and not INT64_MIN <= value <= UINT64_MAX:
            raise ScalarError(
                f"{name}: {value} is beyond the ints torch takes as a number (-2**63 to 2**64-1)"
            )


def numbers_refusal(
    probe: Callable[..., object],
    context: Hashable,
    numbers: tuple[Scalar | None, ...],
    dtype: torch.dtype | None = None,
) -> str | None:
    """torch's message refusing ``numbers`` where ``probe(context, *values)`` runs torch's
    operator on them (``value cannot be converted to type int8_t without overflow``), or None
    where torch takes them (an absent number is None). Numbers every dtype holds in every
    operator (-128 to 127, bools) and numbers within the range of ``dtype`` (the tensor's,
    where given) skip the probe: torch refuses a number only where it overflows. Others are
    probed once (cached: a loop of new numbers within range costs a comparison each).

    Example:
        >>> def fill(dtype, value):
        ...     torch.ones(1, dtype=dtype).fill_(value)
        >>> numbers_refusal(fill, torch.int8, (Scalar.of(300),))
        'value cannot be converted to type int8_t without overflow'
        >>> numbers_refusal(fill, torch.int16, (Scalar.of(300),)) is None
        True
    """
    for number in numbers:
        if number is None or number.value is None or _held(number.value, dtype):
            continue
        return _probed(probe, context, numbers)
    return None


def _held(value: bool | int | float, dtype: torch.dtype | None) -> bool:
    """Whether every dtype (-128 to 127, bools), or ``dtype``, holds ``value`` without
    overflow (NaN fails the comparisons: probed, but a float dtype holds it). An int beyond
    int64 is probed whatever the dtype: torch reads it as uint64 in some operators and
    refuses it in others (``t[0] = 2**63`` of a float tensor)."""
    if -128 <= value <= 127 and not (value < 0 and isinstance(value, float) and _unsigned(dtype)):
        return True  # (torch refuses a negative float for an unsigned dtype: its lowest is 0)
    if outside_int64(value) is not None:
        return False
    if dtype is None or dtype == torch.bool or dtype.is_complex:
        return False
    if dtype.is_floating_point:
        return not math.isfinite(value) or abs(value) <= _range(dtype)[1]
    low, high = _range(dtype)
    return math.isfinite(value) and low <= value <= high


def _unsigned(dtype: torch.dtype | None) -> bool:
    # unknown, or an unsigned integer dtype (torch.uint8 ... torch.uint64)
    return dtype is None or (not dtype.is_signed and dtype != torch.bool)


@functools.lru_cache(maxsize=32)
def _range(dtype: torch.dtype) -> tuple[float, float]:
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    return info.min, info.max


@functools.lru_cache(maxsize=1024)
def _probed(
    probe: Callable[..., object], context: Hashable, numbers: tuple[Scalar | None, ...]
) -> str | None:
    # Scalars key the cache: 1, 1.0 and True differ, a NaN finds its earlier probe
    try:
        probe(context, *(None if n is None else n.value for n in numbers))
    except (RuntimeError, ValueError) as error:
        return str(error).split("\n", 1)[0]
    return None


def _int_fields(cls: type) -> tuple[str, ...]:
    """The fields of param type ``cls`` that may hold sizes (found once per type)."""
    names = _FIELDS.get(cls)
    if names is None:
        skipped = _SCALAR_FIELDS.get(cls, frozenset())
        fields = dataclasses.fields(cls)
        names = _FIELDS[cls] = tuple(f.name for f in fields if f.name not in skipped)
    return names


_FIELDS: dict[type, tuple[str, ...]] = {}


def outside_int64(value: Any) -> int | None:
    """The first int in ``value`` (an int, a SliceIndex, tuples of them) outside int64.

    Example:
        >>> outside_int64((1, 2.5, 2**63)), outside_int64(-(2**63))
        (9223372036854775808, None)
    """
    kind = type(value)
    if kind is int:
        return None if INT64_MIN <= value <= INT64_MAX else value
    if kind is tuple:
        for item in value:
            bad = outside_int64(item)
            if bad is not None:
                return bad
        return None
    if kind is SliceIndex:
        return outside_int64((value.start, value.stop, value.step))
    return None
