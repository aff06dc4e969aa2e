"""Scalar: a tagged number (int, uint, float, bool or none), as operator params carry it.

Example:
    >>> from dtorch.ir.scalar import Scalar, ScalarKind
    >>> Scalar.of(2.5), Scalar.of(3).kind, Scalar.of(2**64 - 1).kind
    (Scalar(FLOAT, 2.5), <ScalarKind.INT: 0>, <ScalarKind.UINT: 1>)
    >>> Scalar.of(True).value
    True
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from dtorch.errors import ScalarError


class ScalarKind(enum.IntEnum):
    INT = 0
    UINT = 1
    FLOAT = 2
    BOOL = 3
    NONE = 4


_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


@dataclass(frozen=True, slots=True, repr=False)
class Scalar:
    """A tagged scalar: INT (int64), UINT (uint64 above int64), FLOAT, BOOL or NONE."""

    kind: ScalarKind
    value: int | float | bool | None

    def __post_init__(self) -> None:
        if not _CHECKS[self.kind](self.value):
            if self.kind in (ScalarKind.INT, ScalarKind.UINT) and isinstance(self.value, int):
                raise ScalarError(
                    f"{self.value} is beyond the ints torch takes as a number (-2**63 to 2**64-1)"
                )
            raise ScalarError(f"{self.value!r} is not a valid {self.kind.name} scalar")

    @classmethod
    def of(cls, value: object) -> Scalar:
        """Tag a Python number (or a 0-d-like torch scalar already converted to Python)."""
        if value is None:
            return cls(ScalarKind.NONE, None)
        if isinstance(value, bool):
            return cls(ScalarKind.BOOL, value)
        if isinstance(value, int):
            return cls(ScalarKind.INT if value <= _INT64_MAX else ScalarKind.UINT, value)
        if isinstance(value, float):
            return cls(ScalarKind.FLOAT, value)
        raise ScalarError(
            f"{value!r} ({type(value).__name__}) is not a scalar; accepted: int, float, bool, None"
        )

    def __repr__(self) -> str:
        return f"Scalar({self.kind.name}, {self.value!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Scalar):
            return NotImplemented
        if self.kind != other.kind:
            return False
        # NaN == NaN here: params holding the same NaN fill value are the same param; -0.0 is
        # not 0.0 (x / -0.0 is -inf: a param cached for one must not serve the other)
        if isinstance(self.value, float) and isinstance(other.value, float):
            return same_float(self.value, other.value)
        return self.value == other.value

    def __hash__(self) -> int:
        return hash((self.kind, self.value if self.value == self.value else "nan"))


def same_float(a: float, b: float) -> bool:
    """Whether ``a`` and ``b`` are one value: NaN is NaN, 0.0 is not -0.0 (they divide
    differently).

    Example:
        >>> same_float(float("nan"), float("nan")), same_float(0.0, -0.0), same_float(1.0, 1.0)
        (True, False, True)
    """
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


_CHECKS = {
    ScalarKind.INT: lambda v: type(v) is int and _INT64_MIN <= v <= _INT64_MAX,
    ScalarKind.UINT: lambda v: type(v) is int and 0 <= v <= _UINT64_MAX,
    ScalarKind.FLOAT: lambda v: type(v) is float,
    ScalarKind.BOOL: lambda v: type(v) is bool,
    ScalarKind.NONE: lambda v: v is None,
}
