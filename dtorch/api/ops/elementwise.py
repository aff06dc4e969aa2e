"""Elementwise operators: binary (with Python scalars on either side; bitwise operators and
shifts among them), unary math, activations and clamp (``where`` and the masked operators are
``dtorch.api.ops.masked``).

Example:
    >>> import dtorch
    >>> a = dtorch.arange(4.0)
    >>> (2 - a).tolist(), dtorch.maximum(a, 2 * a.sin()).round().tolist()
    ([2.0, 1.0, 0.0, -1.0], [0.0, 2.0, 2.0, 3.0])
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_int
from dtorch.api.handle import TensorBase, is_tensor
from dtorch.api.ops.convert import assign, cast, fits, wrote
from dtorch.api.ops.scalars import as_scalar
from dtorch.api.record import not_a_tensor, record, record_one
from dtorch.errors import UnsupportedDtypeError
from dtorch.ir.opkind import ActivationKind, BinaryKind, MathKind
from dtorch.ir.params import (
    ActivationParam,
    BaseMathParam,
    BroadcastBinaryParam,
)
from dtorch.ir.rules.promotion import alpha_binary_dtype
from dtorch.ir.rules.torch_ops import SCALAR_DTYPES
from dtorch.ir.scalar import Scalar

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_TENSOR_PARAMS = {kind: BroadcastBinaryParam(kind) for kind in BinaryKind}


@functools.lru_cache(maxsize=1024)
def _scalar_param(kind: BinaryKind, scalar: Scalar, first: bool) -> BroadcastBinaryParam:
    return BroadcastBinaryParam(kind, scalar, first)


def binary(kind: BinaryKind, name: str, a: Any, b: Any) -> Tensor:
    """``a <kind> b`` where either side may be a Python number (or a 0-d torch tensor).

    Called only by dtorch's operator methods and functions: with this frame, two frames above
    ``record_one`` are dtorch's (its ``known``)."""
    tensor = TensorBase
    if isinstance(a, tensor):
        if not isinstance(b, tensor):
            b = zero_dim(b, a)
            if not isinstance(b, tensor):
                return record_one(name, _scalar_param(kind, as_scalar(b), False), (a,), 2)
        return record_one(name, _TENSOR_PARAMS[kind], (a, b), 2)
    if isinstance(b, tensor):
        a = zero_dim(a, b)
        if isinstance(a, tensor):
            return record_one(name, _TENSOR_PARAMS[kind], (a, b), 2)
        return record_one(name, _scalar_param(kind, as_scalar(a), True), (b,), 2)
    raise TypeError(f"{name}: at least one argument must be a dtorch.Tensor")


def zero_dim(value: Any, other: TensorBase) -> Any:
    """A 0-d torch tensor operand stays a tensor, as in torch (a replicated one on ``other``'s
    mesh): its dtype promotes unlike the number it holds (``int32 tensor + torch.tensor(2.5,
    dtype=torch.float64)`` is float64, ``+ 2.5`` is float32), and torch's tensor-tensor
    kernels accept other dtypes than its scalar ones. Other values are returned as they are."""
    if not isinstance(value, torch.Tensor) or value.ndim != 0:
        return value
    return beside(other, value)


def add(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``input + alpha * other``, ``alpha`` applied in the result dtype as torch does; either
    side may be a number. Two Partials stay Partial (``P + P``); a number added to a
    Partial is refused (each part would add it).

    Example:
        >>> import dtorch
        >>> dtorch.add(dtorch.arange(3), 2, alpha=3).tolist()
        [6, 7, 8]
    """
    return _scaled_binary(BinaryKind.ADD, "add", input, other, alpha)


def sub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``input - alpha * other``, ``alpha`` applied in the result dtype as torch does; either
    side may be a number. Two Partials stay Partial (``P - P``); a number and a Partial
    are refused.

    Example:
        >>> import dtorch
        >>> dtorch.sub(dtorch.arange(3), 1, alpha=2).tolist()
        [-2, -1, 0]
    """
    return _scaled_binary(BinaryKind.SUB, "sub", input, other, alpha)


def _scaled_binary(kind: BinaryKind, name: str, a: Any, b: Any, alpha: Any) -> Tensor:
    """``a <kind> alpha * b``: two tensors in one operator (torch's kernel scales ``b`` in the
    result dtype: scaling first in ``b``'s own dtype could overflow or wrap); a number ``b``
    scaled by Python, after torch's check of ``alpha`` against the result dtype."""
    if type(alpha) is int and alpha == 1:
        return binary(kind, name, a, b)
    scale = as_scalar(alpha)
    if isinstance(a, TensorBase):
        b = zero_dim(b, a)
    elif isinstance(b, TensorBase):
        a = zero_dim(a, b)
    if isinstance(a, TensorBase) and isinstance(b, TensorBase):
        return record_one(name, BroadcastBinaryParam(kind, alpha=scale), (a, b), 2)
    if not isinstance(a, TensorBase) and not isinstance(b, TensorBase):
        return binary(kind, name, a, b)  # two numbers: binary's TypeError
    _check_alpha(kind, name, a, b, scale)
    dtype = torch.result_type(probe(a), probe(b))
    if not isinstance(b, TensorBase):
        return binary(kind, name, a, _times(as_scalar(b), scale, dtype))
    factor = bool(alpha) if dtype == torch.bool else alpha  # ``number - alpha * tensor``
    return binary(kind, name, a, mul(cast(b, dtype), factor))  # type: ignore[arg-type]


def binary_in_place(
    name: str, kind: BinaryKind, inner: str, target: Tensor, other: Any, alpha: Any = 1
) -> Tensor:
    """torch's in-place ``target.<name>(other, alpha=alpha)`` of the operator ``kind`` (named
    ``inner`` out of place): one operator whose devices write ``target``'s shards where the
    result is exactly ``target``'s (dtype, shape and placements: ``in_place_refusal``);
    otherwise the operator's result written back (``assign``), which casts, redistributes or
    refuses as torch's in-place form does. Returns ``target``.

    Example:
        >>> import dtorch
        >>> t = dtorch.arange(3.0)
        >>> binary_in_place("mul_", BinaryKind.MUL, "mul", t, 2) is t, t.tolist()
        (True, [0.0, 2.0, 4.0])
    """
    fits(name, target, other)
    other = zero_dim(other, target)
    one = _one_binary(kind, target, other, alpha)
    if one is not None and wrote(name, inner, *one):
        return target
    return assign(name, target, _scaled_binary(kind, inner, target, other, alpha))


def _one_binary(
    kind: BinaryKind, target: TensorBase, other: Any, alpha: Any
) -> tuple[BroadcastBinaryParam, tuple[TensorBase, ...]] | None:
    """The one operator ``_scaled_binary`` records for ``target <kind> alpha * other`` (a
    0-d torch ``other`` made a tensor already); None for a number scaled by ``alpha``, which
    Python scales first."""
    if isinstance(other, TensorBase):
        if type(alpha) is int and alpha == 1:
            return _TENSOR_PARAMS[kind], (target, other)
        return BroadcastBinaryParam(kind, alpha=as_scalar(alpha)), (target, other)
    if type(alpha) is int and alpha == 1:
        return _scalar_param(kind, as_scalar(other), False), (target,)
    return None


def _check_alpha(kind: BinaryKind, name: str, a: Any, b: Any, alpha: Scalar) -> None:
    """torch's refusal of a float alpha for integer results (a bool one for non-bool)."""
    alpha_binary_dtype(name, kind, _side(a), _side(b), alpha.kind)


def _side(value: Any) -> tuple[torch.dtype, bool]:
    # a tensor's dtype and 0-d-ness, or a number's as a 0-d tensor of its scalar dtype
    if isinstance(value, TensorBase):
        return value.dtype, not value.shape
    return SCALAR_DTYPES[as_scalar(value).kind] or torch.get_default_dtype(), True


def _times(number: Scalar, factor: Scalar, dtype: torch.dtype) -> Any:
    """``factor * number`` as torch's kernel scales it in the result ``dtype``: a bool result
    multiplies bools (``True`` times 2 is ``True``, where Python's 2 would widen it)."""
    assert number.value is not None and factor.value is not None  # numbers are never NONE
    if dtype == torch.bool:
        return bool(number.value) and bool(factor.value)
    return number.value * factor.value


def mul(input: Any, other: Any) -> Tensor:
    """``input * other``, elementwise, as ``torch.mul``; either side may be a number.
    A Partial times a Replicate (either order) or a finite number stays Partial, as in
    DTensor: exact for finite values (an infinite factor gives NaN where torch gives
    +-inf, see docs/compatibility.md); ``P * P``, and a bool Partial that the product
    would widen part by part, are refused.

    Example:
        >>> import dtorch
        >>> dtorch.mul(dtorch.tensor([1.0, -2.0]), 3).tolist()
        [3.0, -6.0]
    """
    return binary(BinaryKind.MUL, "mul", input, other)


def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """``input / other`` as ``torch.div``: true division (integers give a float), or rounded
    with ``rounding_mode`` ``'floor'`` or ``'trunc'``; either side may be a number.
    A Partial divided by a non-zero number stays Partial (not a bool one); unlike DTensor,
    a Partial divided by a tensor is refused (where the divisor is 0 the parts give NaN).

    Example:
        >>> import dtorch
        >>> a = dtorch.tensor([7, -7])
        >>> dtorch.div(a, 2).tolist(), dtorch.div(a, 2, rounding_mode="floor").tolist()
        ([3.5, -3.5], [3, -4])
    """
    found = division(rounding_mode)
    if found is None:
        raise ValueError(f"div: rounding_mode {rounding_mode!r}; accepted: None, 'floor', 'trunc'")
    return binary(found[0], found[1], input, other)


#: ``div``'s rounding modes: the operator of each and its name (TRUNC_DIV: exact on big ints).
_DIVISIONS: dict[str | None, tuple[BinaryKind, str]] = {
    None: (BinaryKind.DIV, "div"),
    "floor": (BinaryKind.FLOOR_DIV, "floor_divide"),
    "trunc": (BinaryKind.TRUNC_DIV, "div"),
}


def division(rounding_mode: Any) -> tuple[BinaryKind, str] | None:
    """The operator of ``div``'s ``rounding_mode`` and its name (None: not a rounding mode,
    whatever its type).

    Example:
        >>> division("floor"), division(["floor"])
        ((<BinaryKind.FLOOR_DIV: 15>, 'floor_divide'), None)
    """
    if rounding_mode is not None and not isinstance(rounding_mode, str):
        return None
    return _DIVISIONS.get(rounding_mode)


def probe(value: Any) -> Any:
    """A stand-in with ``value``'s dtype and dims for torch's promotion rules (a 0-d tensor
    promotes unlike a 1-d one; not hot)."""
    if isinstance(value, TensorBase):
        return torch.empty((1,) * bool(value.shape), dtype=value.dtype)
    return value


def floor_divide(input: Any, other: Any) -> Tensor:
    return binary(BinaryKind.FLOOR_DIV, "floor_divide", input, other)


def remainder(input: Any, other: Any) -> Tensor:
    """``input % other``, elementwise, as ``torch.remainder``: the sign of ``other`` (Python's
    modulo; ``fmod`` keeps the sign of ``input``); either side may be a number.

    Example:
        >>> import dtorch
        >>> dtorch.remainder(dtorch.tensor([5, -5]), 3).tolist(), (7 % dtorch.tensor([4])).tolist()
        ([2, 1], [3])
    """
    return binary(BinaryKind.REMAINDER, "remainder", input, other)


def pow(input: Any, exponent: Any) -> Tensor:
    """``input ** exponent``, elementwise, as ``torch.pow``; either side may be a number.

    Example:
        >>> import dtorch
        >>> a = dtorch.tensor([1, 2, 3])
        >>> dtorch.pow(a, 2).tolist(), dtorch.pow(2, a).tolist()
        ([1, 4, 9], [2, 4, 8])
    """
    return binary(BinaryKind.POW, "pow", input, exponent)


def eq(input: Any, other: Any) -> Tensor:
    """``input == other``, elementwise, as ``torch.eq``: a bool tensor; either side may
    be a number.

    Example:
        >>> import dtorch
        >>> dtorch.eq(dtorch.tensor([1, 2, 3]), 2).tolist()
        [False, True, False]
    """
    return binary(BinaryKind.EQ, "eq", input, other)


def ne(input: Any, other: Any) -> Tensor:
    """``input != other``, elementwise, as ``torch.ne``: a bool tensor; either side may
    be a number.

    Example:
        >>> import dtorch
        >>> dtorch.ne(dtorch.tensor([1, 2, 3]), 2).tolist()
        [True, False, True]
    """
    return binary(BinaryKind.NE, "ne", input, other)


def gt(input: Any, other: Any) -> Tensor:
    """``input > other``, elementwise, as ``torch.gt`` (also ``greater``): a bool tensor;
    either side may be a number.

    Example:
        >>> import dtorch
        >>> dtorch.gt(dtorch.tensor([1, 2, 3]), 2).tolist()
        [False, False, True]
    """
    return binary(BinaryKind.GT, "gt", input, other)


def lt(input: Any, other: Any) -> Tensor:
    """``input < other``, elementwise, as ``torch.lt`` (also ``less``): a bool tensor;
    either side may be a number.

    Example:
        >>> import dtorch
        >>> dtorch.lt(dtorch.tensor([1, 2, 3]), 2).tolist()
        [True, False, False]
    """
    return binary(BinaryKind.LT, "lt", input, other)


def ge(input: Any, other: Any) -> Tensor:
    """``input >= other``, elementwise, as ``torch.ge`` (also ``greater_equal``): a bool tensor;
    either side may be a number.

    Example:
        >>> import dtorch
        >>> dtorch.ge(dtorch.tensor([1, 2, 3]), 2).tolist()
        [False, True, True]
    """
    return binary(BinaryKind.GE, "ge", input, other)


def le(input: Any, other: Any) -> Tensor:
    """``input <= other``, elementwise, as ``torch.le`` (also ``less_equal``): a bool tensor;
    either side may be a number.

    Example:
        >>> import dtorch
        >>> dtorch.le(dtorch.tensor([1, 2, 3]), 2).tolist()
        [True, True, False]
    """
    return binary(BinaryKind.LE, "le", input, other)


def logical_and(input: Any, other: Any) -> Tensor:
    """True where both are non-zero (a bool tensor), as ``torch.logical_and``; unlike torch,
    ``other`` may be a number.

    Example:
        >>> import dtorch
        >>> a, b = dtorch.tensor([0, 1, 2]), dtorch.tensor([1.0, 0.0, 3.0])
        >>> dtorch.logical_and(a, b).tolist()
        [False, False, True]
    """
    return binary(BinaryKind.LOGICAL_AND, "logical_and", input, other)


def logical_or(input: Any, other: Any) -> Tensor:
    """True where either is non-zero (a bool tensor), as ``torch.logical_or``; unlike torch,
    ``other`` may be a number.

    Example:
        >>> import dtorch
        >>> a, b = dtorch.tensor([0, 1, 0]), dtorch.tensor([0.0, 0.0, 2.0])
        >>> dtorch.logical_or(a, b).tolist()
        [False, True, True]
    """
    return binary(BinaryKind.LOGICAL_OR, "logical_or", input, other)


def bitwise_and(input: Any, other: Any) -> Tensor:
    """``input & other``: bitwise for integers, logical for bools (torch refuses floats);
    either side may be a number.

    Example:
        >>> import dtorch
        >>> dtorch.bitwise_and(dtorch.tensor([12, 10]), 6).tolist()
        [4, 2]
    """
    return binary(BinaryKind.BITWISE_AND, "bitwise_and", input, other)


def bitwise_or(input: Any, other: Any) -> Tensor:
    """``input | other``: bitwise for integers, logical for bools (torch refuses floats);
    either side may be a number.

    Example:
        >>> import dtorch
        >>> dtorch.bitwise_or(dtorch.tensor([12, 10]), 6).tolist()
        [14, 14]
    """
    return binary(BinaryKind.BITWISE_OR, "bitwise_or", input, other)


def bitwise_xor(input: Any, other: Any) -> Tensor:
    """``input ^ other``: bitwise for integers, logical for bools (torch refuses floats);
    either side may be a number.

    Example:
        >>> import dtorch
        >>> dtorch.bitwise_xor(dtorch.tensor([12, 10]), 6).tolist()
        [10, 12]
    """
    return binary(BinaryKind.BITWISE_XOR, "bitwise_xor", input, other)


def bitwise_left_shift(input: Any, other: Any) -> Tensor:
    """``input << other``: integers only, as torch (a bool side promotes to an integer;
    floats are refused); either side may be a number. A shift by a negative count or by the
    dtype's width or more gives 0, as in torch.

    Example:
        >>> import dtorch
        >>> dtorch.bitwise_left_shift(dtorch.tensor([1, -3]), 2).tolist()
        [4, -12]
    """
    return binary(BinaryKind.LEFT_SHIFT, "bitwise_left_shift", input, other)


def bitwise_right_shift(input: Any, other: Any) -> Tensor:
    """``input >> other``: an arithmetic shift (the sign is kept) of integers, as torch's
    (floats are refused); either side may be a number. A shift by a negative count or by the
    dtype's width or more gives 0 (-1 for a negative ``input``), as in torch.

    Example:
        >>> import dtorch
        >>> dtorch.bitwise_right_shift(dtorch.tensor([16, -16]), 3).tolist()
        [2, -2]
    """
    return binary(BinaryKind.RIGHT_SHIFT, "bitwise_right_shift", input, other)


def bitwise_not(input: Tensor) -> Tensor:
    """``~input``: bitwise for integers, logical for bools (torch refuses floats).

    Example:
        >>> import dtorch
        >>> a, b = dtorch.tensor([0, 5]), dtorch.tensor([True, False])
        >>> dtorch.bitwise_not(a).tolist(), dtorch.bitwise_not(b).tolist()
        ([-1, -6], [False, True])
    """
    if not is_tensor(input):
        raise not_a_tensor("bitwise_not", "input 0", input)
    if input.dtype.is_floating_point or input.dtype.is_complex:
        raise UnsupportedDtypeError(  # torch's NotImplementedError, and ~'s TypeError
            f"bitwise_not (~) is only implemented on integer and bool tensors, got {input.dtype}"
        )
    return unary(MathKind.BITWISE_NOT, "bitwise_not", input)


def maximum(input: Tensor, other: Any) -> Tensor:
    """The larger of ``input`` and ``other``, elementwise (NaN if either is NaN), as
    ``torch.maximum``; unlike torch, ``other`` may be a number.

    Example:
        >>> import dtorch
        >>> dtorch.maximum(dtorch.tensor([1.0, 5.0]), 3).tolist()
        [3.0, 5.0]
    """
    return binary(BinaryKind.MAXIMUM, "maximum", input, other)


def minimum(input: Tensor, other: Any) -> Tensor:
    """The smaller of ``input`` and ``other``, elementwise (NaN if either is NaN), as
    ``torch.minimum``; unlike torch, ``other`` may be a number.

    Example:
        >>> import dtorch
        >>> dtorch.minimum(dtorch.tensor([1.0, 5.0]), 3).tolist()
        [1.0, 3.0]
    """
    return binary(BinaryKind.MINIMUM, "minimum", input, other)


def atan2(input: Any, other: Any) -> Tensor:
    """The angle of the point ``(other, input)``; integers promote to a float, as in torch.

    Example:
        >>> import dtorch
        >>> dtorch.atan2(dtorch.tensor([1.0, -1.0]), 0).tolist()
        [1.5707963705062866, -1.5707963705062866]
    """
    return binary(BinaryKind.ATAN2, "atan2", input, other)


def hypot(input: Any, other: Any) -> Tensor:
    """``sqrt(input**2 + other**2)`` without overflow; floating-point dtypes only, as in torch
    (unlike torch, either side may be a number).

    Example:
        >>> import dtorch
        >>> dtorch.hypot(dtorch.tensor([3.0, 5.0]), dtorch.tensor([4.0, 12.0])).tolist()
        [5.0, 13.0]
    """
    return binary(BinaryKind.HYPOT, "hypot", input, other)


_MATH_PARAMS = {kind: BaseMathParam(kind) for kind in MathKind}


def unary(kind: MathKind, name: str, t: Tensor) -> Tensor:
    """One BaseMath operator."""
    return record_one(name, _MATH_PARAMS[kind], (t,))


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """torch's ``round``: halves to even; with ``decimals``, ``round(x * 10**d) / 10**d``
    (``d < 0``: ``round(x / 10**-d) * 10**-d``) computed as torch computes it, in float32 for
    float16/bfloat16 (torch's opmath), so the values are torch's bit for bit.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([1.2345, 2.5, 1250.0]).round(decimals=2).tolist()
        [1.2300000190734863, 2.5, 1250.0]
    """
    decimals = as_int("round", "decimals", decimals)  # an int64, as torch takes it
    if decimals == 0:
        return unary(MathKind.ROUND, "round", input)
    if not input.dtype.is_floating_point:
        raise UnsupportedDtypeError(  # torch: "round_cpu" not implemented
            f"round: decimals={decimals} needs a floating-point tensor, got {input.dtype}; "
            "accepted: float16, bfloat16, float32, float64 (or decimals=0)"
        )
    wide = input if input.dtype in (torch.float32, torch.float64) else cast(input, torch.float32)
    # 10.0 ** 309 overflows a Python float; torch's scale is inf there (and the result nan)
    scale = 10.0 ** abs(decimals) if abs(decimals) <= 308 else math.inf
    if decimals > 0:
        rounded = div(unary(MathKind.ROUND, "round", mul(wide, scale)), scale)
    else:
        rounded = mul(unary(MathKind.ROUND, "round", div(wide, scale)), scale)
    return cast(rounded, input.dtype)


_ACTIVATION_PARAMS = {kind: ActivationParam(kind) for kind in ActivationKind}


def activation(kind: ActivationKind, name: str, t: Tensor, approximate: str = "none") -> Tensor:
    param = (
        _ACTIVATION_PARAMS[kind] if approximate == "none" else ActivationParam(kind, approximate)
    )
    return record(name, param, (t,))[0]


def relu(input: Tensor) -> Tensor:
    """``max(input, 0)``, elementwise, as ``torch.relu``; a Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.relu(dtorch.tensor([-1.0, 0.0, 2.0])).tolist()
        [0.0, 0.0, 2.0]
    """
    return activation(ActivationKind.RELU, "relu", input)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    if not isinstance(approximate, str) or approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate={approximate!r}; accepted: 'none', 'tanh'")
    return activation(ActivationKind.GELU, "gelu", input, str(approximate))  # a numpy str too


def silu(input: Tensor) -> Tensor:
    return activation(ActivationKind.SILU, "silu", input)


def sigmoid(input: Tensor) -> Tensor:
    """``1 / (1 + exp(-input))``, elementwise, as ``torch.sigmoid``; a Partial input is
    refused.

    Example:
        >>> import dtorch
        >>> dtorch.sigmoid(dtorch.tensor([0.0, 2.0])).tolist()
        [0.5, 0.8807970285415649]
    """
    return activation(ActivationKind.SIGMOID, "sigmoid", input)


def tanh(input: Tensor) -> Tensor:
    """The hyperbolic tangent, elementwise, as ``torch.tanh``; a Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.tanh(dtorch.tensor([0.0, 1.0])).tolist()
        [0.0, 0.7615941762924194]
    """
    return activation(ActivationKind.TANH, "tanh", input)
