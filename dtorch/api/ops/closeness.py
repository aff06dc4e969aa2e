"""``isclose`` and ``allclose``: torch's tolerance test, built from elementwise operators.

``|input - other| <= atol + rtol * |other|`` where that error is finite, or the two are equal
(infinities of one sign), or, with ``equal_nan``, both NaN; computed in torch's promoted
dtype, recorded under the caller's name, so placements follow the elementwise rule (shards
kept, Replicate broadcast, Partial refused: closeness is not linear).

Example:
    >>> import dtorch
    >>> a, b = dtorch.tensor([1.0, 2.0, float("nan")]), dtorch.tensor([1.0, 2.1, float("nan")])
    >>> isclose(a, b).tolist(), isclose(a, b, equal_nan=True, atol=0.2).tolist()
    ([True, False, False], [True, True, True])
    >>> allclose(a[:1], b[:1])
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from dtorch.api.handle import TensorBase
from dtorch.api.ops.convert import cast
from dtorch.api.ops.elementwise import binary, unary
from dtorch.api.ops.reduce import reduce
from dtorch.api.ops.scalars import as_real
from dtorch.api.record import tensor_arg
from dtorch.errors import DtypeError, ParamError
from dtorch.ir.dtypes import scalar_type_name
from dtorch.ir.opkind import BinaryKind, MathKind, ReduceKind

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

B, M = BinaryKind, MathKind


def isclose(
    input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Tensor:
    """torch's ``isclose``: a bool tensor, True where ``input`` and ``other`` (one dtype,
    broadcast together) are within ``atol + rtol * |other|`` of each other.

    Example:
        >>> import dtorch
        >>> dtorch.isclose(dtorch.tensor([1, 2]), dtorch.tensor([1, 3]), rtol=0.4).tolist()
        [True, True]
    """
    name = "isclose"
    tensor_arg(name, input)
    if not isinstance(other, TensorBase):
        got = type(other).__name__
        raise TypeError(f"isclose(): argument 'other' must be a dtorch.Tensor, got {got}")
    if input.dtype != other.dtype:
        names = scalar_type_name(input.dtype), scalar_type_name(other.dtype)
        raise DtypeError(f"{names[0]} did not match {names[1]}")
    rtol, atol = as_real(f"{name}: rtol", rtol), as_real(f"{name}: atol", atol)
    if not (rtol >= 0 and atol >= 0):  # torch refuses NaN too
        which, value = ("rtol", rtol) if not rtol >= 0 else ("atol", atol)
        raise ParamError(f"{which} must be greater than or equal to zero, but got {value}")
    close = binary(B.EQ, name, input, other)
    if equal_nan and input.dtype.is_floating_point:
        both = binary(B.LOGICAL_AND, name, unary(M.ISNAN, name, input), unary(M.ISNAN, name, other))
        close = binary(B.LOGICAL_OR, name, close, both)
    if (rtol, atol) == (0, 0):  # torch's: the test degenerates to equality
        return close
    if not input.dtype.is_floating_point:  # torch's: integers and bools in the default dtype
        input, other = (
            cast(input, torch.get_default_dtype()),
            cast(other, torch.get_default_dtype()),
        )
    return binary(B.LOGICAL_OR, name, close, _within(name, input, other, (rtol, atol)))


def _within(name: str, input: Tensor, other: Tensor, tolerances: tuple[float, float]) -> Tensor:
    """``|input - other| <= atol + |rtol * other|`` where the error is finite (floats)."""
    rtol, atol = tolerances
    allowed = binary(B.ADD, name, unary(M.ABS, name, binary(B.MUL, name, other, rtol)), atol)
    error = unary(M.ABS, name, binary(B.SUB, name, input, other))
    within = binary(B.LE, name, error, allowed)
    return binary(B.LOGICAL_AND, name, unary(M.ISFINITE, name, error), within)


def allclose(
    input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> bool:
    """torch's ``allclose``: whether ``isclose`` holds everywhere (a Python bool: one fetch).

    Example:
        >>> import dtorch
        >>> dtorch.allclose(dtorch.tensor([1.0]), dtorch.tensor([1.0 + 1e-9]))
        True
    """
    close = isclose(input, other, rtol, atol, equal_nan)
    # a count of the misses (a sum may be Partial; ``all`` of a sharded dim is refused)
    misses = reduce(ReduceKind.SUM, "allclose", unary(M.LOGICAL_NOT, "allclose", close))
    return misses.item() == 0
