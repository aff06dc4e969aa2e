"""Elementwise operators built from other operators: ``lerp``, ``addcmul``, ``addcdiv``,
``addmm``, ``nan_to_num``, ``xlogy``, ``logaddexp``, ``frac``.

Each follows torch's formula and torch's dtypes: the result dtype (or torch's refusal) is
learned once per dtype combination by running the torch function on one-element tensors,
numbers are applied in the result dtype (truncated for integer results, as torch's kernels
cast them), and float16/bfloat16 are computed in float32 and rounded once, as torch's opmath
does. The parts are recorded under the operator's own name, so a refusal (a Partial where
the operator is not linear in it, shards that do not line up) names what the user called.

Example:
    >>> import dtorch
    >>> a, b = dtorch.tensor([0.0, 10.0]), dtorch.tensor([10.0, 20.0])
    >>> a.lerp(b, 0.25).tolist(), dtorch.addcmul(a, a, b, value=0.5).tolist()
    ([2.5, 12.5], [0.0, 110.0])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

import dtorch.api.ops.math_more as _mm
from dtorch.api.create import beside
from dtorch.api.handle import TensorBase
from dtorch.api.ops.convert import cast, clone
from dtorch.api.ops.elementwise import binary, unary
from dtorch.api.ops.masked import select
from dtorch.api.ops.scalars import is_scalar, python_number
from dtorch.api.ops.shape import expand
from dtorch.api.record import record
from dtorch.errors import ParamError, ShapeError, UnsupportedDtypeError
from dtorch.ir.opkind import BinaryKind, MathKind
from dtorch.ir.params import MatmulParam
from dtorch.ir.rules.elementwise import broadcast_or_reason
from dtorch.ir.rules.ints import numbers_refusal
from dtorch.ir.rules.promotion import ProbeOperand, function_dtype
from dtorch.ir.scalar import Scalar

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


_REDUCED = (torch.float16, torch.bfloat16)  # computed in float32 by torch's kernels (opmath)


def _addmm(a: torch.Tensor, m1: torch.Tensor, m2: torch.Tensor, beta: Any, alpha: Any) -> Any:
    return torch.addmm(a, m1.reshape(1, 1), m2.reshape(1, 1), beta=beta, alpha=alpha)


#: The torch function of each composite, probed for its result dtype.
_TORCH: dict[str, Callable[..., torch.Tensor]] = {
    "lerp": torch.lerp,
    "addcmul": lambda a, b, c, value: torch.addcmul(a, b, c, value=value),
    "addcdiv": lambda a, b, c, value: torch.addcdiv(a, b, c, value=value),
    "addmm": _addmm,
    "xlogy": torch.xlogy,
    "logaddexp": torch.logaddexp,
}


def probe_spec(value: Any) -> ProbeOperand:
    if isinstance(value, TensorBase):
        return value.dtype, not value.shape
    return type(value)(1) if isinstance(value, (bool, int)) else 0.5


def result_dtype(name: str, *operands: Any) -> torch.dtype:
    """torch's result dtype of ``name`` on these tensors and numbers, or its refusal as a
    DtypeError (``lerp`` of integers, ``addcdiv`` of integers, ``addmm`` of mixed dtypes)."""
    return function_dtype(name, _TORCH[name], tuple(probe_spec(v) for v in operands))


def _tensor(name: str, arg: str, value: Any) -> Tensor:
    if not isinstance(value, TensorBase):
        raise TypeError(f"{name}: {arg} must be a dtorch.Tensor, got {type(value).__name__}")
    return value  # type: ignore[return-value]


def _number(name: str, arg: str, value: Any) -> bool | int | float:
    if isinstance(value, TensorBase) or not is_scalar(value):
        raise TypeError(
            f"{name}: {arg} must be a number (bool, int, float), got {type(value).__name__}"
        )
    return python_number(value)


def applied_number(dtype: torch.dtype, number: bool | int | float) -> bool | int | float:
    """``number`` as torch's kernels apply it to a ``dtype`` result (an integer one cast, so
    truncated; a bool one as its truth; a floating or complex one keeps the fraction)."""
    if dtype == torch.bool:
        return bool(number)
    return number if dtype.is_floating_point or dtype.is_complex else int(number)


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in _REDUCED else dtype


def lerp(input: Tensor, end: Tensor, weight: Any) -> Tensor:
    """``input + weight * (end - input)``, with torch's formula for ``|weight| >= 0.5``
    (``end - (end - input) * (1 - weight)``); ``weight`` a number or a tensor, all three of
    one floating-point dtype, broadcast together.

    Example:
        >>> import dtorch
        >>> dtorch.lerp(dtorch.zeros(2), dtorch.ones(2), dtorch.tensor([0.25, 0.75])).tolist()
        [0.25, 0.75]
    """
    _tensor("lerp", "input", input), _tensor("lerp", "end", end)
    w = weight if isinstance(weight, TensorBase) else _number("lerp", "weight", weight)
    dtype = result_dtype("lerp", input, end, w)
    work = work_dtype(dtype)
    a, b = cast(input, work), cast(end, work)
    diff = binary(BinaryKind.SUB, "lerp", b, a)
    if isinstance(w, TensorBase):
        w = cast(w, work)  # type: ignore[arg-type]
        small = _lerp_small(a, w, diff)
        large = _lerp_large(b, w, diff)
        near_input = binary(BinaryKind.LT, "lerp", unary(MathKind.ABS, "lerp", w), 0.5)
        out = select("lerp", near_input, small, large)
    else:
        out = _lerp_small(a, w, diff) if abs(w) < 0.5 else _lerp_large(b, w, diff)
    return cast(out, dtype)


def _lerp_small(a: Tensor, w: Any, diff: Tensor) -> Tensor:
    return binary(BinaryKind.ADD, "lerp", a, binary(BinaryKind.MUL, "lerp", w, diff))


def _lerp_large(b: Tensor, w: Any, diff: Tensor) -> Tensor:
    rest = binary(BinaryKind.SUB, "lerp", 1, w) if isinstance(w, TensorBase) else 1 - w
    return binary(BinaryKind.SUB, "lerp", b, binary(BinaryKind.MUL, "lerp", diff, rest))


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``input + value * tensor1 * tensor2``, broadcast, in torch's promoted dtype.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([1, 2])
        >>> dtorch.addcmul(t, t, t, value=2).tolist()
        [3, 10]
    """
    return _addc(BinaryKind.MUL, "addcmul", input, tensor1, tensor2, value)


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``input + value * tensor1 / tensor2``, broadcast; torch refuses integer inputs.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([1.0, 2.0])
        >>> dtorch.addcdiv(t, t, t + 1, value=3).tolist()
        [2.5, 4.0]
    """
    return _addc(BinaryKind.DIV, "addcdiv", input, tensor1, tensor2, value)


def _addc(kind: BinaryKind, name: str, input: Any, t1: Any, t2: Any, value: Any) -> Tensor:
    args = zip(("input", "tensor1", "tensor2"), (input, t1, t2), strict=True)
    tensors = [_tensor(name, arg, v) for arg, v in args]
    number = _number(name, "value", value)
    dtype = result_dtype(name, *tensors, number)
    refusal = numbers_refusal(_addc_probe, (kind, dtype), (Scalar.of(number),), dtype)
    if refusal is not None:  # torch converts the value to the result dtype with a check
        raise ParamError(f"{name}: value={number!r} for a {dtype} result: {refusal}")
    work = work_dtype(dtype)
    base, a, b = (cast(t, work) for t in tensors)
    number = applied_number(dtype, number)  # torch's (value * tensor1) <op> tensor2
    exact = number == 1 and not dtype.is_complex  # a complex 1·(inf+1j) is NaN, as torch's
    scaled = a if exact else binary(BinaryKind.MUL, name, a, number)
    return cast(_plain_sum(name, base, binary(kind, name, scaled, b)), dtype)


def _plain_sum(name: str, a: Tensor, b: Tensor) -> Tensor:
    """``a + b`` as torch's addcmul/addcdiv kernels add: complex parts apart, where torch's
    add computes ``a + 1·b`` and ``1·(inf+infj)`` is NaN (``x + 1.5j / 0`` is inf there)."""
    if not a.dtype.is_complex:
        return binary(BinaryKind.ADD, name, a, b)
    parts = (binary(BinaryKind.ADD, name, f(a), f(b)) for f in (_mm.real, _mm.imag))
    return _mm.complex(*parts)


def _addc_probe(context: tuple[BinaryKind, torch.dtype], value: bool | int | float) -> object:
    # torch's addcmul/addcdiv on one-element tensors of the result dtype, with ``value``
    kind, dtype = context
    one = torch.ones(1, dtype=dtype)
    return (torch.addcmul if kind is BinaryKind.MUL else torch.addcdiv)(one, one, one, value=value)


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)`` for matrices ``mat1`` (n, k) and ``mat2``
    (k, p), ``input`` broadcast to (n, p); as in torch, ``beta=0`` ignores ``input``'s values
    (NaN included) and ``alpha=0`` the product's; all three of one dtype.

    Example:
        >>> import dtorch
        >>> m = dtorch.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> dtorch.addmm(dtorch.ones(2), m, m, beta=0.5).tolist()
        [[7.5, 10.5], [15.5, 22.5]]
    """
    names = ("input", "mat1", "mat2")
    x, m1, m2 = (
        _tensor("addmm", arg, v) for arg, v in zip(names, (input, mat1, mat2), strict=True)
    )
    size = _addmm_shape(x, m1, m2)
    b, a = _number("addmm", "beta", beta), _number("addmm", "alpha", alpha)
    dtype = result_dtype("addmm", x, m1, m2, b, a)
    b, a = applied_number(dtype, b), applied_number(dtype, a)
    work = work_dtype(dtype)
    x, m1, m2 = cast(x, work), cast(m1, work), cast(m2, work)
    if a == 0:
        return cast(_scaled_input(x, size, b), dtype)
    product = record("addmm", MatmulParam(), (m1, m2))[0]
    if a != 1:
        product = binary(BinaryKind.MUL, "addmm", product, a)
    if b != 0:
        base = x if b == 1 else binary(BinaryKind.MUL, "addmm", x, b)
        product = binary(BinaryKind.ADD, "addmm", base, product)
    return cast(product, dtype)


def _addmm_shape(x: Tensor, m1: Tensor, m2: Tensor) -> tuple[int, int]:
    """The output's (n, p); torch's messages for non-matrices, matrices that do not multiply
    (checked here too: ``alpha=0`` skips the product) and an input that does not broadcast."""
    for arg, m in (("mat1", m1), ("mat2", m2)):
        if m.ndim != 2:
            raise ShapeError(f"addmm: {arg} must be a matrix, got {m.ndim}-D tensor")
    (n, k), (k2, p) = m1.shape, m2.shape
    if k != k2:
        raise ShapeError(f"addmm: mat1 and mat2 shapes cannot be multiplied ({n}x{k} and {k2}x{p})")
    size = (int(n), int(p))
    if broadcast_or_reason((tuple(x.shape), size)) != size:
        raise ShapeError(
            f"addmm: input of shape {list(x.shape)} does not broadcast to {list(size)}"
        )
    return size


def _scaled_input(x: Tensor, size: tuple[int, int], beta: Any) -> Tensor:
    """``addmm`` with ``alpha=0``: ``beta * input`` at the output's shape (zeros for 0)."""
    full = expand(x, size)
    if beta == 0:
        return full.new_zeros(size)
    return clone(full) if beta == 1 else binary(BinaryKind.MUL, "addmm", full, beta)


def nan_to_num(input: Tensor, nan: Any = 0.0, posinf: Any = None, neginf: Any = None) -> Tensor:
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0 and the
    dtype's largest and lowest finite values), in each part of a complex tensor; integer and
    bool tensors come back as a copy.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([float("nan"), float("-inf"), 1.0]).nan_to_num(posinf=9.0).tolist()
        [0.0, -3.4028234663852886e+38, 1.0]
    """
    _tensor("nan_to_num", "input", input)
    values = [
        _number("nan_to_num", arg, v) if v is not None else None
        for arg, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf))
    ]
    if input.dtype.is_complex:  # torch's: each part on its own
        parts = (_mm.real(input), _mm.imag(input))
        return _mm.complex(*(nan_to_num(part, nan, posinf, neginf) for part in parts))
    if not input.dtype.is_floating_point:
        return clone(input)
    info = torch.finfo(input.dtype)
    kinds = (MathKind.ISNAN, MathKind.ISPOSINF, MathKind.ISNEGINF)
    fills = zip(kinds, values, (0.0, info.max, info.min), strict=True)
    out = input
    for kind, value, default in fills:
        found = unary(kind, "nan_to_num", input)
        out = select(
            "nan_to_num", found, _rounded(default if value is None else value, input.dtype), out
        )
    return out


def _rounded(value: Any, dtype: torch.dtype) -> float:
    """``value`` as torch's ``nan_to_num`` stores it in ``dtype``: converted without a check
    (``posinf=1e300`` in float32 is inf)."""
    return float(torch.tensor(value, dtype=torch.float64).to(dtype))


def xlogy(input: Any, other: Any) -> Tensor:
    """``input * log(other)``, 0 where ``input`` is 0 and NaN where ``other`` is NaN; either
    may be a number; integers promote to a float, as in torch.

    Example:
        >>> import dtorch
        >>> dtorch.xlogy(dtorch.tensor([0.0, 2.0]), dtorch.tensor([0.0, 1.0])).tolist()
        [0.0, 0.0]
    """
    x, y = tensor_operands("xlogy", input, other)
    dtype = result_dtype("xlogy", x, y)
    x, y = cast(x, dtype), cast(y, dtype)  # torch's kernel rounds log(y) to the dtype too
    out = binary(BinaryKind.MUL, "xlogy", x, unary(MathKind.LOG, "xlogy", y))
    out = select("xlogy", binary(BinaryKind.EQ, "xlogy", x, 0), 0, out)
    return select("xlogy", unary(MathKind.ISNAN, "xlogy", y), y, out)


def logaddexp(input: Any, other: Any) -> Tensor:
    """``log(exp(input) + exp(other))`` without overflow, as torch computes it:
    ``max + log1p(exp(-|input - other|))``, and ``input`` where both are the same infinity.

    Example:
        >>> import dtorch
        >>> round(dtorch.logaddexp(dtorch.tensor([0.0]), dtorch.tensor([0.0])).item(), 4)
        0.6931
    """
    a, b = tensor_operands("logaddexp", input, other)
    dtype = result_dtype("logaddexp", a, b)
    work = work_dtype(dtype)
    a, b = cast(a, work), cast(b, work)
    name, m, op = "logaddexp", MathKind, BinaryKind
    gap = unary(m.NEG, name, unary(m.ABS, name, binary(op.SUB, name, a, b)))
    tail = unary(m.LOG1P, name, unary(m.EXP, name, gap))
    out = binary(op.ADD, name, binary(op.MAXIMUM, name, a, b), tail)
    same = binary(op.EQ, name, a, b)
    same_infinity = binary(op.LOGICAL_AND, name, unary(m.ISINF, name, a), same)
    return cast(select(name, same_infinity, a, out), dtype)


def tensor_operands(name: str, a: Any, b: Any) -> tuple[Tensor, Tensor]:
    """Both operands as tensors: a number (or 0-d torch tensor) becomes a 0-d Replicate tensor
    on the other's mesh, which promotes as the number does."""
    like = a if isinstance(a, TensorBase) else b
    if not isinstance(like, TensorBase):
        raise TypeError(f"{name}: at least one argument must be a dtorch.Tensor")
    return _as_tensor(name, "input", a, like), _as_tensor(name, "other", b, like)


def _as_tensor(name: str, arg: str, value: Any, like: TensorBase) -> Tensor:
    if isinstance(value, TensorBase):
        return value  # type: ignore[return-value]
    if isinstance(value, torch.Tensor) and value.ndim == 0:
        return beside(like, value)
    number, dtype = _held(like.dtype, _number(name, arg, value))
    return beside(like, torch.tensor(number, dtype=dtype))


def _held(dtype: torch.dtype, number: bool | int | float) -> tuple[Any, torch.dtype]:
    """``number`` and a dtype for its 0-d tensor beside a ``dtype`` tensor: the result's
    is only held where it is inexact (``0.1`` rounded as torch rounds it for a float16
    tensor); an integer result dtype would wrap the number (-3 in uint8 is 253), so it
    keeps its own, which promotes like the number (the callers cast to the result dtype).

    Example:
        >>> _held(torch.uint8, -3), _held(torch.float16, 0.1)
        ((-3, torch.int64), (0.1, torch.float16))
    """
    common = torch.result_type(torch.empty(0, dtype=dtype), number)
    if common.is_floating_point or common.is_complex:
        return number, common
    if isinstance(number, bool):
        return number, torch.bool
    return number, torch.uint64 if number >= 2**63 else torch.int64


def frac(input: Tensor) -> Tensor:
    """The fractional part, ``input - trunc(input)``, as ``torch.frac`` (the sign of
    ``input``; NaN for infinities); floating-point tensors only, as in torch. The result keeps
    the input's shards; a Partial is refused (``trunc`` is not linear).

    Example:
        >>> import dtorch
        >>> dtorch.frac(dtorch.tensor([1.5, -2.25, 3.0])).tolist()
        [0.5, -0.25, 0.0]
    """
    _tensor("frac", "input", input)
    if not input.dtype.is_floating_point:
        raise UnsupportedDtypeError(
            f'frac: "frac_cpu" not implemented for {input.dtype}; cast first'
        )
    return binary(BinaryKind.SUB, "frac", input, unary(MathKind.TRUNC, "frac", input))
