"""Ints as torch takes them: sizes, steps, counts and dims are int64s; scalars fit 64 bits.

A Python int has no bound, but torch converts every int argument to an int64 and refuses one
beyond that at once (a fill value or a bound may also be a uint64). dtorch refuses the same
at record time: ``check_param_ints`` looks at every int of an operator's param (``infer``
calls it, so it covers every operator the rules see), ``check_sizes`` at a shape a rule or a
creation makes, ``check_scalars`` at a creation's numbers. An int beyond 64 bits would
otherwise reach the devices: a kernel failure later in thread mode, a batch the codec
cannot write in process mode.

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
import math
from collections.abc import Sequence
from typing import Any

import torch

from dtorch.errors import ParamError, ScalarError, ShapeError
from dtorch.ir.params import CreateParam, OpParam, SliceIndex

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1

#: Param fields that hold numbers, not sizes: fill values and bounds are torch scalars
#: (int64 or uint64), checked by ``check_scalars``.
_SCALAR_FIELDS: dict[type, frozenset[str]] = {CreateParam: frozenset({"args"})}


def check_param_ints(name: str, param: OpParam) -> None:
    """ParamError naming ``name`` and the field if an int of ``param`` is no int64."""
    for field in _int_fields(type(param)):
        bad = _outside(getattr(param, field))
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


def _int_fields(cls: type) -> tuple[str, ...]:
    """The fields of param type ``cls`` that may hold sizes (found once per type)."""
    names = _FIELDS.get(cls)
    if names is None:
        skipped = _SCALAR_FIELDS.get(cls, frozenset())
        fields = dataclasses.fields(cls)
        names = _FIELDS[cls] = tuple(f.name for f in fields if f.name not in skipped)
    return names


_FIELDS: dict[type, tuple[str, ...]] = {}


def _outside(value: Any) -> int | None:
    """The first int in ``value`` (an int, a SliceIndex, tuples of them) outside int64."""
    kind = type(value)
    if kind is int:
        return None if INT64_MIN <= value <= INT64_MAX else value
    if kind is tuple:
        for item in value:
            bad = _outside(item)
            if bad is not None:
                return bad
        return None
    if kind is SliceIndex:
        return _outside((value.start, value.stop, value.step))
    return None
