"""Rules of the elementwise kinds: BroadcastBinary, BaseMath, Activation.

Shapes broadcast as in torch; dtypes are torch's (probed once, see ``promotion``). On one mesh
dimension an elementwise operator keeps a shard of any kept dim and accepts Partial only where
it is linear in that operand: ``P + P``, ``P - P``, ``P * R``, ``R * P``, ``P * scalar``
(a finite one), ``P / scalar`` (a non-zero one), ``-P``, ``deg2rad(P)``, ``rad2deg(P)``.
``P * R`` keeps Partial as DTensor does, which is exact for finite values: an infinite element
of the Replicate factor meets the other ranks' zero summands and gives NaN where torch gives
+-inf (a known gap, tested as such).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.opkind import BinaryKind
    >>> from dtorch.ir.params import BroadcastBinaryParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> a = Operand(1, (4, 3), torch.float32, mesh, (Shard(0),))
    >>> b = Operand(2, (3,), torch.int64, mesh, (Replicate(),))
    >>> out = binary_rule("add", BroadcastBinaryParam(BinaryKind.ADD), (a, b)).outputs[0]
    >>> out.shape, out.dtype, out.placements
    ((4, 3), torch.float32, (Shard(dim=0),))
"""

from __future__ import annotations

import cmath
import dataclasses
import functools
from collections.abc import Sequence

import torch

from dtorch.errors import ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import ActivationKind, BinaryKind, MathKind, OpKind
from dtorch.ir.params import (
    ActivationParam,
    BaseMathParam,
    BroadcastBinaryParam,
    ClampParam,
    OpParam,
)
from dtorch.ir.rules.base import (
    DtypeError,
    Inference,
    OutputMeta,
    ParamError,
    Rule,
    all_replicate,
    replicated,
)
from dtorch.ir.rules.ints import numbers_refusal
from dtorch.ir.rules.promotion import (
    Side,
    activation_dtype,
    activation_numbers_refusal,
    alpha_binary_dtype,
    binary_dtype,
    cast_is_linear,
    math_dtype,
    scalar_binary_dtype,
)
from dtorch.ir.rules.signature import Labels, Signature, elementwise, expand, identity
from dtorch.ir.rules.torch_ops import binary_with_scalar
from dtorch.ir.scalar import Scalar, ScalarKind

_NOT_LINEAR = "Partial is accepted only where the operator is linear in it; redistribute first"

#: Binary operators broadcast: a dim an input holds one row of to broadcast is no shard.
_BROADCAST = "i: a dim of the result the input has at full size; k: a dim it broadcasts from 1"
_PLAIN2 = elementwise(2, legend=_BROADCAST, hint=_NOT_LINEAR)
_BINARY_SIGS: dict[BinaryKind, Signature] = {
    BinaryKind.ADD: elementwise(2, ["P P -> P"], legend=_BROADCAST, hint=_NOT_LINEAR),
    BinaryKind.SUB: elementwise(2, ["P P -> P"], legend=_BROADCAST, hint=_NOT_LINEAR),
    BinaryKind.COMPLEX: elementwise(2, ["P P -> P"], legend=_BROADCAST, hint=_NOT_LINEAR),
    BinaryKind.MUL: elementwise(2, ["P R -> P", "R P -> P"], legend=_BROADCAST, hint=_NOT_LINEAR),
    # No "P R -> P" for a tensor divisor (as in DTensor): the non-owning ranks would compute
    # 0 / 0 = NaN wherever the divisor is 0, where torch gives +-inf.
    BinaryKind.DIV: elementwise(2, legend=_BROADCAST, hint=_NOT_LINEAR),
}
_LINEAR2 = frozenset({BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MUL})  # with Partial rows
#: One tensor with a Python scalar, keyed by (kind, scalar_first).
_LINEAR1 = elementwise(1, ["P -> P"], hint=_NOT_LINEAR)
_PLAIN1 = elementwise(1, hint=_NOT_LINEAR)
_SCALAR_SIGS: dict[tuple[BinaryKind, bool], Signature] = {
    (BinaryKind.MUL, False): _LINEAR1,
    (BinaryKind.MUL, True): _LINEAR1,
    (BinaryKind.DIV, False): _LINEAR1,
}
#: ``P * inf`` and ``P / 0`` are not linear: summands of mixed sign (or zero) make
#: ``inf - inf`` or ``0 * inf`` = NaN where torch gives +-inf.
_UNBOUNDED1 = elementwise(
    1,
    hint="a Partial times an infinite number, or divided by 0, would add infinite summands "
    "to NaN; redistribute to Replicate first",
)
#: The linear unary kinds: a negation and the scalings by pi / 180 and 180 / pi.
_MATH_SIGS: dict[MathKind, Signature] = {
    MathKind.NEG: _LINEAR1,
    MathKind.DEG2RAD: _LINEAR1,
    MathKind.RAD2DEG: _LINEAR1,
    MathKind.CONJ: _LINEAR1,
    MathKind.REAL: _LINEAR1,
    MathKind.IMAG: _LINEAR1,
}


def broadcast_shapes(name: str, shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """torch's broadcast of ``shapes``; ShapeError naming the clashing dimension.

    Example:
        >>> broadcast_shapes("add", ((4, 1, 3), (2, 1)))
        (4, 2, 3)
    """
    out = broadcast_or_reason(shapes)
    if isinstance(out, str):
        raise ShapeError(f"{name}: shapes {' x '.join(str(list(s)) for s in shapes)} {out}")
    return out


@functools.lru_cache(maxsize=4096)
def broadcast_or_reason(shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...] | str:
    """The broadcast shape, or why there is none (cached: shapes repeat in a program)."""
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for shape in shapes:
        for j, size in enumerate(shape, ndim - len(shape)):
            if size != out[j] and out[j] != 1 and size != 1:
                return f"do not broadcast: size {size} against {out[j]} at dimension {j - ndim}"
            out[j] = size if out[j] == 1 else out[j]
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def broadcast_labels(
    shapes: tuple[tuple[int, ...], ...], out: tuple[int, ...]
) -> tuple[Labels, ...]:
    """Labels of broadcast inputs: an output dim's index, or a label of its own for a size-1
    dim that broadcasts (sharding it cannot produce the output's shards)."""
    return tuple(
        tuple(
            j if size == out[j] else -1000 * (i + 1) - j
            for j, size in enumerate(shape, len(out) - len(shape))
        )
        for i, shape in enumerate(shapes)
    )


def elementwise_placements(
    name: str, sig: Signature, inputs: Sequence[Operand], shape: tuple[int, ...], dtype: torch.dtype
) -> Inference:
    """Placements of an elementwise operator's one output (``shape``, ``dtype``)."""
    if all_replicate(inputs):
        return replicated(shape, dtype, len(inputs[0].placements))
    labels = broadcast_labels(tuple(o.shape for o in inputs), shape)
    # one_output inlined: this is the per-operator hot path, and a call costs 0.1 us of 3
    expansion = expand(name, sig, inputs, labels, (identity(len(shape)),))
    return Inference((OutputMeta(shape, dtype, expansion.outputs[0]),), expansion.requested)


def binary_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``a <op> b``, or one tensor with a Python scalar on either side; in place (``add_``),
    only where the result is exactly the first input's (``in_place_refusal``): the API
    records the in-place form only then, so this refuses a program built otherwise."""
    assert isinstance(param, BroadcastBinaryParam)
    if param.in_place:
        return in_place_inference(name, binary_rule, param, inputs)
    return _binary(name, param, inputs)


def in_place_inference(
    name: str, rule: Rule, param: BroadcastBinaryParam | ClampParam, inputs: tuple[Operand, ...]
) -> Inference:
    """``rule``'s inference of ``param``'s out-of-place form, which its in-place form writes
    into the first input's shards: refused (a ParamError) where it does not fit there."""
    inference = rule(name, dataclasses.replace(param, in_place=False), inputs)
    refusal = in_place_refusal(inference, inputs[0])
    if refusal is not None:
        raise ParamError(f"{name}: cannot write the result in place: {refusal}")
    return inference


def in_place_refusal(inference: Inference, target: Operand) -> str | None:
    """Why an elementwise result (``inference``) cannot be written into ``target``'s shards,
    as an in-place operator's devices write it; None where it can: it has ``target``'s
    dtype, shape and placements, and ``target`` is used where it is.

    Example:
        >>> from dtorch.ir.mesh import DeviceMesh
        >>> from dtorch.ir.placement import Replicate, Shard
        >>> mesh = DeviceMesh("cpu", [0, 1])
        >>> a = Operand(0, (4,), torch.int64, mesh, (Shard(0),))
        >>> half = binary_rule("div", BroadcastBinaryParam(BinaryKind.DIV, Scalar.of(2)), (a,))
        >>> in_place_refusal(half, a)
        "the result's dtype torch.float32 is not the tensor's, torch.int64"
    """
    out = inference.outputs[0]
    if out.dtype != target.dtype:
        return f"the result's dtype {out.dtype} is not the tensor's, {target.dtype}"
    if out.shape != target.shape:
        return f"the result's shape {list(out.shape)} is not the tensor's, {list(target.shape)}"
    if out.placements != target.placements:
        return f"the result's placements {out.placements} are not the tensor's, {target.placements}"
    if inference.input_placement(0, target) != target.placements:
        return "the tensor would be redistributed first"
    return None


def _binary(name: str, param: BroadcastBinaryParam, inputs: tuple[Operand, ...]) -> Inference:
    if param.scalar is not None:
        return _scalar_rule(name, param, inputs[0])
    a, b = inputs
    shape = a.shape if a.shape == b.shape else broadcast_shapes(name, (a.shape, b.shape))
    sides = (a.dtype, not a.shape), (b.dtype, not b.shape)
    if param.alpha is None:
        dtype = binary_dtype(name, param.binary, *sides)
    else:
        dtype = alpha_binary_dtype(name, param.binary, *sides, _alpha_kind(name, param))
    sig = _BINARY_SIGS.get(param.binary, _PLAIN2)
    if not _converts_linearly(inputs, dtype):
        linear = param.binary in _LINEAR2
        sig = _unconverted(2, _partial_dtype(inputs, dtype), dtype) if linear else _PLAIN2
    return elementwise_placements(name, sig, inputs, shape, dtype)


def _converts_linearly(inputs: tuple[Operand, ...], dtype: torch.dtype) -> bool:
    """Whether each Partial input converts to the result ``dtype`` linearly: the operator
    converts every part (a bool Partial, whose parts saturate, times 3 would add 3 per True
    part where the value is one True); otherwise no Partial row applies."""
    return all(
        cast_is_linear(x.dtype, dtype) for x in inputs if any(p.is_partial() for p in x.placements)
    )


def _partial_dtype(inputs: Sequence[Operand], dtype: torch.dtype) -> torch.dtype:
    # the dtype of the Partial input that does not convert linearly to the result's
    partial = [x for x in inputs if any(p.is_partial() for p in x.placements)]
    return next(x.dtype for x in partial if not cast_is_linear(x.dtype, dtype))


@functools.lru_cache(maxsize=64)
def _unconverted(arity: int, src: torch.dtype, dst: torch.dtype) -> Signature:
    """A linear operator's signature without its Partial rows, saying why: a Partial ``src``
    input whose result is ``dst`` (each part converted on its own) is not linear."""
    why = (
        "a bool Partial is the OR of its parts, which converted would add up"
        if src == torch.bool
        else "an integer's parts wrap in its own width, a float's are each rounded"
    )
    hint = (
        f"The operator is linear, but its result is {dst}: converting each part of a Partial "
        f"{src} input is not ({why}); redistribute to Replicate first, or pass a Partial of "
        f"dtype {dst}"
    )
    return elementwise(arity, legend=_BROADCAST if arity == 2 else "", hint=hint)


def _alpha_kind(name: str, param: BroadcastBinaryParam) -> ScalarKind:
    """The kind of ``alpha``, which only ADD and SUB take, and only as a number."""
    assert param.alpha is not None
    if param.binary not in (BinaryKind.ADD, BinaryKind.SUB):
        raise ParamError(f"{name}: alpha is accepted by add and sub only, not {param.binary.name}")
    if param.alpha.kind is ScalarKind.NONE:
        raise DtypeError(f"{name}: alpha is None; accepted: int, float, bool")
    return param.alpha.kind


def _scalar_rule(name: str, param: BroadcastBinaryParam, x: Operand) -> Inference:
    assert param.scalar is not None
    if param.scalar.kind is ScalarKind.NONE:
        raise DtypeError(f"{name}: the scalar operand is None; accepted: int, float, bool")
    if param.alpha is not None:
        raise ParamError(f"{name}: alpha is accepted with two tensors only, not with a scalar")
    side = (x.dtype, not x.shape)
    dtype = scalar_binary_dtype(name, param.binary, side, param.scalar.kind, param.scalar_first)
    _check_number(name, param, x, side, dtype)
    return elementwise_placements(name, _scalar_sig(param, x, dtype), (x,), x.shape, dtype)


def _check_number(
    name: str,
    param: BroadcastBinaryParam,
    x: Operand,
    side: tuple[torch.dtype, bool],
    dtype: torch.dtype,
) -> None:
    """torch's refusals of the number itself, known here: it is data, not a tensor."""
    assert param.scalar is not None
    if _negative_int_power(param, dtype):
        raise DtypeError(
            f"{name}: Integers to negative integer powers are not allowed (an integer tensor "
            f"to the power {param.scalar.value}); accepted: a float exponent, or a float tensor"
        )
    if _integer_division_by_zero(param, dtype) and 0 not in x.shape:
        raise ParamError(
            f"{name}: ZeroDivisionError (a {dtype} tensor divided by {param.scalar.value!r}, "
            f"which is 0 as {dtype}: torch converts the divisor to the tensor's dtype, "
            "wrapping); accepted: a divisor that is not 0 in the dtype, or a float tensor "
            "(whose quotients by 0 are inf or nan)"
        )
    context = (param.binary, side, param.scalar_first, 0 in x.shape)
    refusal = numbers_refusal(_binary_probe, context, (param.scalar,), x.dtype)
    if refusal is not None:  # ``int8 ** 300``: torch converts the exponent with a check
        raise ParamError(
            f"{name}: the number {param.scalar.value!r} with a {x.dtype} tensor: {refusal} "
            f"(torch's refusal); accepted: a number {dtype} holds, or a tensor of a wider dtype"
        )


def _scalar_sig(param: BroadcastBinaryParam, x: Operand, dtype: torch.dtype) -> Signature:
    """The placements a tensor-and-number operator accepts: linear ones keep a Partial unless
    the number is unbounded or the dtype conversion is not linear."""
    assert param.scalar is not None
    sig = _SCALAR_SIGS.get((param.binary, param.scalar_first), _PLAIN1)
    if sig is _LINEAR1 and _unbounded(param.binary, param.scalar.value, dtype):
        return _UNBOUNDED1
    if sig is not _PLAIN1 and not _converts_linearly((x,), dtype):
        return _unconverted(1, x.dtype, dtype)
    return sig


def _negative_int_power(param: BroadcastBinaryParam, dtype: torch.dtype) -> bool:
    """``int_tensor ** -n``: an integer result of a negative integer exponent."""
    scalar = param.scalar
    if param.binary is not BinaryKind.POW or param.scalar_first or scalar is None:
        return False
    integral = not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)
    return integral and scalar.kind is ScalarKind.INT and scalar.value < 0  # type: ignore[operator]


#: The integer divisions torch refuses by zero (true division gives a float).
_INTEGER_DIVISIONS = frozenset(
    {BinaryKind.FLOOR_DIV, BinaryKind.TRUNC_DIV, BinaryKind.REMAINDER, BinaryKind.FMOD}
)


def _integer_division_by_zero(param: BroadcastBinaryParam, dtype: torch.dtype) -> bool:
    """``int_tensor // 0``, ``% 0``, ``fmod(int_tensor, 0)``, ``div(..., rounding_mode=...)``
    by a number that is 0 in the result ``dtype`` (``uint8 % 256``: torch wraps the divisor
    to the dtype's width first), refused where the tensor has elements (torch divides none
    of an empty one)."""
    scalar = param.scalar
    if param.binary not in _INTEGER_DIVISIONS or param.scalar_first or scalar is None:
        return False
    integral = not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)
    # an integral result has an integer (or bool) divisor: a float one would give a float
    return integral and scalar.value % (1 << 8 * dtype.itemsize) == 0  # type: ignore[operator]


def _binary_probe(
    context: tuple[BinaryKind, Side, bool, bool], value: bool | int | float
) -> torch.Tensor:
    """torch's operator on a tensor of ``context``'s side (empty where the operand is) with
    the number ``value``: ``numbers_refusal``'s probe of a number operand."""
    kind, (dtype, zero_dim), first, empty = context
    x = torch.ones(() if zero_dim else (0 if empty else 1), dtype=dtype)
    return binary_with_scalar(kind, x, Scalar.of(value), first)


#: The magnitudes float32 (the narrowest arithmetic of a number operand) holds finite and
#: non-zero, with a margin.
_NORMAL, _LARGE = 2.0**-125, 2.0**127


def _unbounded(kind: BinaryKind, value: object, dtype: torch.dtype) -> bool:
    """Whether ``x * value`` (``x / value``) is infinite for a finite non-zero ``x`` as torch
    computes it, so that a zero summand of a Partial becomes NaN: the number rounded to the
    arithmetic's dtype (``1e39`` is infinite in float32, ``1e-320`` is 0; float16 and
    bfloat16 compute with float32 numbers). A NaN number makes NaN of any sum: not refused."""
    if kind is BinaryKind.DIV and value == 0:
        return True
    if not isinstance(value, (float, complex)) or cmath.isnan(value):
        return False
    if not (dtype.is_floating_point or dtype.is_complex) or _NORMAL <= abs(value) <= _LARGE:
        return False  # finite and not 0 in any arithmetic: no torch call at record time
    zero = torch.zeros((), dtype=dtype)
    return bool(torch.isnan(zero * value if kind is BinaryKind.MUL else zero / value))


def math_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``neg``, ``exp``, ``isnan``, ... of one tensor; a linear one (``neg``, ``deg2rad``)
    keeps a Partial whose dtype converts linearly to the result's."""
    assert isinstance(param, BaseMathParam)
    (x,) = inputs
    dtype = math_dtype(name, param.math, x.dtype)
    sig = _MATH_SIGS.get(param.math, _PLAIN1)
    if sig is not _PLAIN1 and not _converts_linearly(inputs, dtype):
        sig = _unconverted(1, x.dtype, dtype)
    return elementwise_placements(name, sig, inputs, x.shape, dtype)


def activation_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``relu``, ``gelu``, ``softplus``, ``threshold``, ... of one tensor (never Partial);
    numbers torch refuses (``celu``'s ``alpha=0``) are refused with torch's message, and so
    is an in-place form whose result would change the tensor's dtype (``sigmoid_`` of an
    integer tensor)."""
    assert isinstance(param, ActivationParam)
    (x,) = inputs
    if param.activation is ActivationKind.GELU and param.approximate not in ("none", "tanh"):
        raise ParamError(f"{name}: approximate={param.approximate!r}; accepted: 'none', 'tanh'")
    dtype = activation_dtype(name, param.activation, param.approximate, x.dtype)
    refusal = activation_numbers_refusal(param.activation, param.alpha, param.beta, x.dtype)
    if refusal is not None:
        raise ParamError(f"{name}: {refusal}")
    if param.in_place and dtype != x.dtype:
        raise DtypeError(
            f"{name}: result type {dtype} can't be cast to the desired output type {x.dtype}"
        )
    return elementwise_placements(name, _PLAIN1, inputs, x.shape, dtype)


RULES: dict[OpKind, Rule] = {
    OpKind.BroadcastBinary: binary_rule,
    OpKind.BaseMath: math_rule,
    OpKind.Activation: activation_rule,
}
