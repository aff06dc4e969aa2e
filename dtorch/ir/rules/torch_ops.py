"""The torch function behind each small enum kind: one table, read by two users.

The rules probe these functions once per dtype combination to learn torch's result dtype
(``dtorch.ir.rules.promotion``), and the local kernels call them on shards
(``dtorch.kernels.local``). Keeping one table means the dtype a rule promises is the dtype a
kernel produces.

Example:
    >>> import torch
    >>> from dtorch.ir.opkind import BinaryKind, MathKind
    >>> BINARY[BinaryKind.ADD](torch.ones(2), torch.ones(2)).tolist()
    [2.0, 2.0]
    >>> MATH[MathKind.SQUARE](torch.tensor([3])).tolist()
    [9]
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from dtorch.ir.opkind import ActivationKind, BinaryKind, MathKind, ReduceKind, ScanKind
from dtorch.ir.scalar import Scalar, ScalarKind

Binary = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Unary = Callable[[torch.Tensor], torch.Tensor]
#: ``reduce(x, dims, keepdim, dtype)``; ``dims`` is normalised and never empty for a >0-d x.
Reducer = Callable[[torch.Tensor, tuple[int, ...], bool, "torch.dtype | None"], torch.Tensor]


def trunc_divide(a: Any, b: Any) -> torch.Tensor:
    """``torch.div(a, b, rounding_mode="trunc")``: exact on integers of any size (a true
    division then a rounding would go through float32). On integers a divisor of -1 is a
    negation: torch's kernel traps (SIGFPE, the process dies) on the dtype's least value
    divided by -1, whose quotient wraps to itself, as floor division and ``neg`` give it.

    Example:
        >>> trunc_divide(torch.tensor([-2**63, 7]), torch.tensor([-1, -2])).tolist()
        [-9223372036854775808, -3]
    """
    dtype = torch.result_type(a, b)
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        return torch.div(a, b, rounding_mode="trunc")
    if not isinstance(b, torch.Tensor):
        return (
            torch.neg(torch.as_tensor(a, dtype=dtype))
            if b == -1
            else torch.div(a, b, rounding_mode="trunc")
        )
    negated = b == -1
    quotient = torch.div(a, torch.where(negated, torch.ones_like(b), b), rounding_mode="trunc")
    return torch.where(negated, torch.neg(quotient), quotient)


def ldexp(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.ldexp``; for its exact kernel (a float ``a``, an integer ``b``), which writes
    into ``a``'s shape and warns when it must grow it, ``a`` broadcast to the result's shape
    first (the dtype is ``a``'s float either way; others promote as they are)."""
    exact = a.is_floating_point() and not (b.is_floating_point() or b.dtype == torch.bool)
    if exact and a.shape != b.shape:
        a = a.expand(torch.broadcast_shapes(a.shape, b.shape))
    return torch.ldexp(a, b)


BINARY: dict[BinaryKind, Binary] = {
    BinaryKind.ADD: torch.add,
    BinaryKind.SUB: torch.sub,
    BinaryKind.MUL: torch.mul,
    BinaryKind.DIV: torch.div,
    BinaryKind.POW: torch.pow,
    BinaryKind.EQ: torch.eq,
    BinaryKind.NE: torch.ne,
    BinaryKind.GT: torch.gt,
    BinaryKind.LT: torch.lt,
    BinaryKind.GE: torch.ge,
    BinaryKind.LE: torch.le,
    BinaryKind.LOGICAL_AND: torch.logical_and,
    BinaryKind.LOGICAL_OR: torch.logical_or,
    BinaryKind.MAXIMUM: torch.maximum,
    BinaryKind.MINIMUM: torch.minimum,
    BinaryKind.FLOOR_DIV: torch.floor_divide,
    BinaryKind.REMAINDER: torch.remainder,
    BinaryKind.BITWISE_AND: torch.bitwise_and,
    BinaryKind.BITWISE_OR: torch.bitwise_or,
    BinaryKind.BITWISE_XOR: torch.bitwise_xor,
    BinaryKind.ATAN2: torch.atan2,
    BinaryKind.HYPOT: torch.hypot,
    BinaryKind.TRUNC_DIV: trunc_divide,
    BinaryKind.FMOD: torch.fmod,
    BinaryKind.COPYSIGN: torch.copysign,
    BinaryKind.HEAVISIDE: torch.heaviside,
    BinaryKind.FLOAT_POWER: torch.float_power,
    BinaryKind.GCD: torch.gcd,
    BinaryKind.LCM: torch.lcm,
    BinaryKind.LOGICAL_XOR: torch.logical_xor,
    BinaryKind.NEXTAFTER: torch.nextafter,
    BinaryKind.LDEXP: ldexp,
    BinaryKind.LEFT_SHIFT: torch.bitwise_left_shift,
    BinaryKind.RIGHT_SHIFT: torch.bitwise_right_shift,
    BinaryKind.ZETA: torch.special.zeta,
    BinaryKind.FMAX: torch.fmax,
    BinaryKind.FMIN: torch.fmin,
    BinaryKind.COMPLEX: torch.complex,
    BinaryKind.XLOG1PY: torch.special.xlog1py,
    BinaryKind.GAMMAINC: torch.special.gammainc,
    BinaryKind.GAMMAINCC: torch.special.gammaincc,
    BinaryKind.CHEBYSHEV_T: torch.special.chebyshev_polynomial_t,
    BinaryKind.CHEBYSHEV_U: torch.special.chebyshev_polynomial_u,
    BinaryKind.CHEBYSHEV_V: torch.special.chebyshev_polynomial_v,
    BinaryKind.CHEBYSHEV_W: torch.special.chebyshev_polynomial_w,
    BinaryKind.SHIFTED_CHEBYSHEV_T: torch.special.shifted_chebyshev_polynomial_t,
    BinaryKind.SHIFTED_CHEBYSHEV_U: torch.special.shifted_chebyshev_polynomial_u,
    BinaryKind.SHIFTED_CHEBYSHEV_V: torch.special.shifted_chebyshev_polynomial_v,
    BinaryKind.SHIFTED_CHEBYSHEV_W: torch.special.shifted_chebyshev_polynomial_w,
    BinaryKind.HERMITE_H: torch.special.hermite_polynomial_h,
    BinaryKind.HERMITE_HE: torch.special.hermite_polynomial_he,
    BinaryKind.LAGUERRE_L: torch.special.laguerre_polynomial_l,
    BinaryKind.LEGENDRE_P: torch.special.legendre_polynomial_p,
}

MATH: dict[MathKind, Unary] = {
    MathKind.NEG: torch.neg,
    MathKind.RECIPROCAL: torch.reciprocal,
    MathKind.EXP: torch.exp,
    MathKind.LOG: torch.log,
    MathKind.LOG2: torch.log2,
    MathKind.LOG10: torch.log10,
    MathKind.SQRT: torch.sqrt,
    MathKind.RSQRT: torch.rsqrt,
    MathKind.SQUARE: torch.square,
    MathKind.ABS: torch.abs,
    MathKind.ROUND: torch.round,
    MathKind.FLOOR: torch.floor,
    MathKind.SIN: torch.sin,
    MathKind.COS: torch.cos,
    MathKind.ASIN: torch.asin,
    MathKind.ISINF: torch.isinf,
    MathKind.ISNAN: torch.isnan,
    MathKind.CEIL: torch.ceil,
    MathKind.LOGICAL_NOT: torch.logical_not,
    MathKind.BITWISE_NOT: torch.bitwise_not,
    MathKind.SIGN: torch.sign,
    MathKind.SGN: torch.sgn,
    MathKind.ERF: torch.erf,
    MathKind.ERFC: torch.erfc,
    MathKind.EXPM1: torch.expm1,
    MathKind.LOG1P: torch.log1p,
    MathKind.TRUNC: torch.trunc,
    MathKind.TAN: torch.tan,
    MathKind.ATAN: torch.atan,
    MathKind.ACOS: torch.acos,
    MathKind.SINH: torch.sinh,
    MathKind.COSH: torch.cosh,
    MathKind.EXP2: torch.exp2,
    MathKind.ISFINITE: torch.isfinite,
    MathKind.ISPOSINF: torch.isposinf,
    MathKind.ISNEGINF: torch.isneginf,
    MathKind.LGAMMA: torch.lgamma,
    MathKind.DIGAMMA: torch.digamma,
    MathKind.ERFINV: torch.erfinv,
    MathKind.LOGIT: torch.logit,  # eps=None; a clamp first makes torch's eps
    MathKind.SINC: torch.sinc,
    MathKind.DEG2RAD: torch.deg2rad,
    MathKind.RAD2DEG: torch.rad2deg,
    MathKind.SIGNBIT: torch.signbit,
    MathKind.I0: torch.i0,
    MathKind.ASINH: torch.asinh,
    MathKind.ACOSH: torch.acosh,
    MathKind.ATANH: torch.atanh,
    MathKind.TRIGAMMA: functools.partial(torch.polygamma, 1),
    MathKind.CONJ: torch.conj_physical,
    MathKind.REAL: lambda x: torch.real(x).clone(),  # no view of the input on the devices
    MathKind.IMAG: lambda x: torch.imag(x).clone(),
    MathKind.ANGLE: torch.angle,
    MathKind.ENTR: torch.special.entr,
    MathKind.NDTR: torch.special.ndtr,
    MathKind.NDTRI: torch.special.ndtri,
    MathKind.LOG_NDTR: torch.special.log_ndtr,
    MathKind.I0E: torch.special.i0e,
    MathKind.I1: torch.special.i1,
    MathKind.I1E: torch.special.i1e,
    MathKind.ERFCX: torch.special.erfcx,
    MathKind.BESSEL_J0: torch.special.bessel_j0,
    MathKind.BESSEL_J1: torch.special.bessel_j1,
    MathKind.BESSEL_Y0: torch.special.bessel_y0,
    MathKind.BESSEL_Y1: torch.special.bessel_y1,
    MathKind.MODIFIED_BESSEL_I0: torch.special.modified_bessel_i0,
    MathKind.MODIFIED_BESSEL_I1: torch.special.modified_bessel_i1,
    MathKind.MODIFIED_BESSEL_K0: torch.special.modified_bessel_k0,
    MathKind.MODIFIED_BESSEL_K1: torch.special.modified_bessel_k1,
    MathKind.SCALED_MODIFIED_BESSEL_K0: torch.special.scaled_modified_bessel_k0,
    MathKind.SCALED_MODIFIED_BESSEL_K1: torch.special.scaled_modified_bessel_k1,
    MathKind.SPHERICAL_BESSEL_J0: torch.special.spherical_bessel_j0,
    MathKind.AIRY_AI: torch.special.airy_ai,
}


def _gelu(x: torch.Tensor, approximate: str) -> torch.Tensor:
    return F.gelu(x, approximate=approximate)


#: ``activation(x, approximate)``; only GELU reads ``approximate``.
ACTIVATION: dict[ActivationKind, Callable[[torch.Tensor, str], torch.Tensor]] = {
    ActivationKind.RELU: lambda x, _: torch.relu(x),
    ActivationKind.GELU: _gelu,
    ActivationKind.SILU: lambda x, _: F.silu(x),
    ActivationKind.SIGMOID: lambda x, _: torch.sigmoid(x),
    ActivationKind.TANH: lambda x, _: torch.tanh(x),
    # torch's default numbers: enough for the dtype probes; kernels use NUMBERED
    ActivationKind.LEAKY_RELU: lambda x, _: F.leaky_relu(x),
    ActivationKind.ELU: lambda x, _: F.elu(x),
    ActivationKind.SOFTPLUS: lambda x, _: F.softplus(x),
    ActivationKind.LOGSIGMOID: lambda x, _: F.logsigmoid(x),
    ActivationKind.HARDSWISH: lambda x, _: F.hardswish(x),
    ActivationKind.HARDSIGMOID: lambda x, _: F.hardsigmoid(x),
    ActivationKind.MISH: lambda x, _: F.mish(x),
    ActivationKind.SELU: lambda x, _: F.selu(x),
    ActivationKind.CELU: lambda x, _: F.celu(x),
    ActivationKind.SOFTSIGN: lambda x, _: F.softsign(x),
    ActivationKind.TANHSHRINK: lambda x, _: F.tanhshrink(x),
    ActivationKind.HARDSHRINK: lambda x, _: F.hardshrink(x),
    ActivationKind.SOFTSHRINK: lambda x, _: F.softshrink(x),
    ActivationKind.THRESHOLD: lambda x, _: F.threshold(x, 0.0, 0.0),
}

#: ``activation(x, alpha, beta)`` of the kinds that take numbers (ActivationParam's).
NUMBERED: dict[ActivationKind, Callable[[torch.Tensor, float, float], torch.Tensor]] = {
    ActivationKind.LEAKY_RELU: lambda x, a, _: F.leaky_relu(x, a),
    ActivationKind.ELU: lambda x, a, _: F.elu(x, a),
    ActivationKind.CELU: lambda x, a, _: F.celu(x, a),
    ActivationKind.HARDSHRINK: lambda x, a, _: F.hardshrink(x, a),
    ActivationKind.SOFTSHRINK: lambda x, a, _: F.softshrink(x, a),
    ActivationKind.SOFTPLUS: F.softplus,
    ActivationKind.THRESHOLD: F.threshold,
}


def _prod(x: torch.Tensor, dims: tuple[int, ...], keepdim: bool, dtype: torch.dtype | None):  # type: ignore[no-untyped-def]
    # torch.prod takes one dim: reduce the highest dims first so lower indices stay valid;
    # every step in ``dtype`` (without it, a second step would widen an int8 product to int64)
    for d in sorted(dims, reverse=True):
        x = torch.prod(x, d, keepdim=keepdim, dtype=dtype)
    return x if dims else torch.prod(x, dtype=dtype)


def _arg(fn: Callable[..., torch.Tensor]) -> Reducer:
    def reduce(
        x: torch.Tensor, dims: tuple[int, ...], keepdim: bool, dtype: torch.dtype | None
    ) -> torch.Tensor:
        # one dim, or every dim of a >1-D tensor: torch's flat index (dim=None).
        return fn(x, dims[0] if len(dims) == 1 else None, keepdim=keepdim)

    return reduce


REDUCE: dict[ReduceKind, Reducer] = {
    ReduceKind.SUM: lambda x, d, k, t: torch.sum(x, d, keepdim=k, dtype=t),
    ReduceKind.MEAN: lambda x, d, k, t: torch.mean(x, d, keepdim=k, dtype=t),
    ReduceKind.MAX: lambda x, d, k, _: torch.amax(x, d, keepdim=k),
    ReduceKind.MIN: lambda x, d, k, _: torch.amin(x, d, keepdim=k),
    ReduceKind.ANY: lambda x, d, k, _: torch.any(x, d, keepdim=k),
    ReduceKind.ALL: lambda x, d, k, _: torch.all(x, d, keepdim=k),
    ReduceKind.PROD: _prod,
    ReduceKind.ARGMAX: _arg(torch.argmax),
    ReduceKind.ARGMIN: _arg(torch.argmin),
}

#: ``scan(x, dim, dtype)``: the cumulative operators (Scan), torch's ``dtype=`` passed on
#: (``logcumsumexp`` has none: the API never sets it).
SCAN: dict[ScanKind, Callable[[torch.Tensor, int, torch.dtype | None], torch.Tensor]] = {
    ScanKind.SUM: lambda x, d, t: torch.cumsum(x, d, dtype=t),
    ScanKind.PROD: lambda x, d, t: torch.cumprod(x, d, dtype=t),
    ScanKind.LOGSUMEXP: lambda x, d, t: torch.logcumsumexp(x if t is None else x.to(t), d),
}

#: The dtype a Python scalar of each kind has when torch promotes it (FLOAT: the default).
SCALAR_DTYPES: dict[ScalarKind, torch.dtype | None] = {
    ScalarKind.INT: torch.int64,
    ScalarKind.UINT: torch.uint64,
    ScalarKind.FLOAT: None,
    ScalarKind.BOOL: torch.bool,
}


def scalar_tensor(scalar: Scalar) -> torch.Tensor:
    """A 0-d CPU tensor of ``scalar``: promotes like the Python number (a 0-d CPU tensor
    also combines with tensors on any device), for torch functions that take tensors only."""
    return torch.tensor(scalar.value, dtype=SCALAR_DTYPES[scalar.kind])


#: Binary kinds a Python operator expresses: ``t <op> 2`` and ``2 <op> t`` go through
#: torch's own number handling, so they mean exactly what that expression means in torch.
OPERATORS: dict[BinaryKind, Callable[[Any, Any], Any]] = {
    BinaryKind.ADD: operator.add,
    BinaryKind.SUB: operator.sub,
    BinaryKind.MUL: operator.mul,
    BinaryKind.DIV: operator.truediv,
    BinaryKind.POW: operator.pow,
    BinaryKind.EQ: operator.eq,
    BinaryKind.NE: operator.ne,
    BinaryKind.GT: operator.gt,
    BinaryKind.LT: operator.lt,
    BinaryKind.GE: operator.ge,
    BinaryKind.LE: operator.le,
    BinaryKind.FLOOR_DIV: operator.floordiv,
    BinaryKind.REMAINDER: operator.mod,
    BinaryKind.BITWISE_AND: operator.and_,
    BinaryKind.BITWISE_OR: operator.or_,
    BinaryKind.BITWISE_XOR: operator.xor,
    BinaryKind.LEFT_SHIFT: operator.lshift,
    BinaryKind.RIGHT_SHIFT: operator.rshift,
}


#: torch.special's functions of two tensors that take a number on either side.
_SPECIAL_PAIRS = (
    BinaryKind.ZETA, BinaryKind.XLOG1PY, BinaryKind.CHEBYSHEV_T, BinaryKind.CHEBYSHEV_U,
    BinaryKind.CHEBYSHEV_V, BinaryKind.CHEBYSHEV_W, BinaryKind.SHIFTED_CHEBYSHEV_T,
    BinaryKind.SHIFTED_CHEBYSHEV_U, BinaryKind.SHIFTED_CHEBYSHEV_V,
    BinaryKind.SHIFTED_CHEBYSHEV_W, BinaryKind.HERMITE_H, BinaryKind.HERMITE_HE,
    BinaryKind.LAGUERRE_L, BinaryKind.LEGENDRE_P,
)  # fmt: skip

#: Binary kinds whose torch function takes a Python number on that side, keyed by (kind,
#: scalar_first): called with the number itself, so its range checks and promotion are
#: torch's own for ``torch.fmod(t, 2)`` (``torch.fmod(2, t)`` takes no number: a 0-d tensor).
NUMBER_FORMS: frozenset[tuple[BinaryKind, bool]] = frozenset(
    {
        (BinaryKind.FMOD, False),
        (BinaryKind.COPYSIGN, False),
        (BinaryKind.FLOAT_POWER, False),
        (BinaryKind.FLOAT_POWER, True),
        *((kind, first) for kind in _SPECIAL_PAIRS for first in (False, True)),
    }
)


def binary_with_scalar(
    kind: BinaryKind,
    x: torch.Tensor,
    scalar: Scalar,
    scalar_first: bool,
    cast: torch.dtype | None = None,
) -> torch.Tensor:
    """``x <kind> scalar`` (or ``scalar <kind> x``): the Python operator with the number, the
    torch function with the number where it takes one (``NUMBER_FORMS``), or with a 0-d
    tensor where torch takes tensors only. ``cast``: the float dtype a kernel cast an integer
    ``x`` to (its result's), which the 0-d tensor takes too, as both of two integer tensors
    would (``ldexp(int, True)`` is torch's; ``ldexp`` of a float by a bool tensor it refuses)."""
    fn = OPERATORS.get(kind)
    value: Any = scalar.value
    if fn is None:
        fn = BINARY[kind]
        if (kind, scalar_first) not in NUMBER_FORMS:
            value = scalar_tensor(scalar) if cast is None else scalar_tensor(scalar).to(cast)
    out = fn(value, x) if scalar_first else fn(x, value)
    assert isinstance(out, torch.Tensor)
    return out


def binary_with_alpha(kind: BinaryKind, a: torch.Tensor, b: torch.Tensor, alpha: Scalar) -> Any:
    """``torch.add(a, b, alpha=)`` or ``torch.sub``: ``b`` scaled inside torch's kernel, in
    the result dtype (scaling it first, in its own dtype, could overflow or wrap)."""
    return BINARY[kind](a, b, alpha=alpha.value)  # type: ignore[call-arg]
