"""Elementwise operators (BroadcastBinary, BaseMath, Activation) simulated on 1-D, 2-D and 3-D
meshes against torch on the full tensors, over every placement combination (or a seeded
sample of them on the larger meshes)."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from dtorch.ir.opkind import ActivationKind, BinaryKind, MathKind
from dtorch.ir.params import ActivationParam, BaseMathParam, BroadcastBinaryParam
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.rules import DtypeError
from dtorch.ir.scalar import Scalar
from dtorch.kernels.direct import direct_form
from tests.python_ops import PYTHON_OPS
from tests.simulate import MESHES, run_layouts

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(7)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


def _ints(*shape: int, low: int = -5, high: int = 6) -> torch.Tensor:
    return torch.randint(low, high, shape, generator=_G)


_BINARY_FNS = {
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
    BinaryKind.TRUNC_DIV: lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    BinaryKind.FMOD: torch.fmod,
    BinaryKind.COPYSIGN: torch.copysign,
    BinaryKind.HEAVISIDE: torch.heaviside,
    BinaryKind.FLOAT_POWER: torch.float_power,
    BinaryKind.GCD: torch.gcd,
    BinaryKind.LCM: torch.lcm,
    BinaryKind.LOGICAL_XOR: torch.logical_xor,
    BinaryKind.NEXTAFTER: torch.nextafter,
    BinaryKind.LDEXP: torch.ldexp,
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
#: Kinds tested on integers (torch's bitwise, shift, gcd and lcm kernels refuse floats).
_INT_KINDS = {
    BinaryKind.FLOOR_DIV,
    BinaryKind.TRUNC_DIV,
    BinaryKind.REMAINDER,
    BinaryKind.BITWISE_AND,
    BinaryKind.BITWISE_OR,
    BinaryKind.BITWISE_XOR,
    BinaryKind.GCD,
    BinaryKind.LCM,
    BinaryKind.LEFT_SHIFT,
    BinaryKind.RIGHT_SHIFT,
}

#: Shapes of (a, b): same shape, b broadcast on the left, b broadcast with a size-1 dim.
_SHAPE_PAIRS = [((5, 3), (5, 3)), ((5, 3), (3,)), ((5, 3), (5, 1)), ((1, 3), (4, 1))]


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("kind", list(BinaryKind))
def test_binary_all_layouts(kind: BinaryKind, mesh_shape: tuple[int, ...]) -> None:
    fn = _BINARY_FNS[kind]
    limit = 120 if len(mesh_shape) > 1 else 400
    for shape_a, shape_b in _SHAPE_PAIRS:
        a, b = _randn(*shape_a), _randn(*shape_b)
        if kind in _INT_KINDS:
            a, b = _ints(*shape_a), _ints(*shape_b, low=1)
        accepted = run_layouts(
            kind.name.lower(), BroadcastBinaryParam(kind), [a, b], mesh_shape, [fn(a, b)],
            limit=limit,
        )  # fmt: skip
        assert accepted, "even all-Replicate was rejected"


def _linear_partials(kind: BinaryKind) -> set[tuple[object, object]]:
    """The Partial rows each kind accepts on one mesh dim, from the operator's math (division
    by a tensor is not among them: a zero divisor would give the other ranks 0 / 0 = NaN)."""
    return {
        BinaryKind.ADD: {(Partial(), Partial())},
        BinaryKind.SUB: {(Partial(), Partial())},
        BinaryKind.MUL: {(Partial(), Replicate()), (Replicate(), Partial())},
        BinaryKind.COMPLEX: {(Partial(), Partial())},  # re + im * 1j: linear in both
    }.get(kind, set())


@pytest.mark.parametrize("kind", list(BinaryKind))
def test_binary_accepted_set_on_one_mesh_dim(kind: BinaryKind) -> None:
    """Same-shape 2-D operands on a 1-D mesh: exactly R x R, matching shards (with R turned
    into the other operand's shard) and the linear Partial rows are accepted."""
    a, b = _randn(4, 3), _randn(4, 3) + 3
    if kind in _INT_KINDS:
        a, b = _ints(4, 3), _ints(4, 3, low=1)
    accepted = run_layouts(
        "op", BroadcastBinaryParam(kind), [a, b], (2,), [_BINARY_FNS[kind](a, b)]
    )
    got = {(pa[0], pb[0]) for pa, pb in accepted}
    shards = {(Shard(0), Shard(0)), (Shard(1), Shard(1))}
    implicit = {(Shard(d), Replicate()) for d in (0, 1)} | {(Replicate(), Shard(d)) for d in (0, 1)}
    want = {(Replicate(), Replicate())} | shards | implicit | _linear_partials(kind)
    assert got == want


_SCALARS = [2, 0.5, True, -3]


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 3)])
@pytest.mark.parametrize("scalar_first", [False, True])
@pytest.mark.parametrize("kind", list(BinaryKind))
def test_binary_with_scalar(
    kind: BinaryKind, scalar_first: bool, mesh_shape: tuple[int, ...]
) -> None:
    """Every kind with int/float/bool scalars on either side; where torch refuses the dtypes,
    the rule refuses them at record time with torch's reason."""
    for value in _SCALARS:
        x = _randn(5, 3) if isinstance(value, float) else _ints(5, 3, low=1)
        param = BroadcastBinaryParam(kind, Scalar.of(value), scalar_first)
        fn, s = PYTHON_OPS.get(kind), value  # what the user writes in torch: t + 2, 2 - t
        if fn is None:  # maximum, logical_and, ...: torch takes a tensor there
            fn, s = _BINARY_FNS[kind], torch.tensor(value)
        try:
            want = fn(s, x) if scalar_first else fn(x, s)
        except RuntimeError as error:
            # dtypes torch refuses fail at record time; values it refuses (int ** -3) fail in
            # the kernel, with torch's message either way
            with pytest.raises((DtypeError, AssertionError), match=re.escape(str(error)[:30])):
                run_layouts("op", param, [x], mesh_shape, [])
            continue
        accepted = run_layouts("op", param, [x], mesh_shape, [want])
        partial = any(Partial() in pl for (pl,) in accepted)
        # x / s of int64 parts is a float32 of each part, rounded on its own: not linear
        exact = x.is_floating_point()
        linear = kind is BinaryKind.MUL or (kind is BinaryKind.DIV and not scalar_first and exact)
        assert partial == linear, (kind, scalar_first, value)


_MATH_FNS = {
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
    MathKind.LOGIT: torch.logit,
    MathKind.SINC: torch.sinc,
    MathKind.DEG2RAD: torch.deg2rad,
    MathKind.RAD2DEG: torch.rad2deg,
    MathKind.SIGNBIT: torch.signbit,
    MathKind.I0: torch.i0,
    MathKind.ASINH: torch.asinh,
    MathKind.ACOSH: torch.acosh,
    MathKind.ATANH: torch.atanh,
    MathKind.TRIGAMMA: lambda x: torch.polygamma(1, x),
    MathKind.CONJ: torch.conj_physical,
    MathKind.REAL: torch.real,
    MathKind.IMAG: torch.imag,
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
#: The linear unary kinds: they keep a Partial (of a dtype that converts linearly).
_LINEAR_MATH = {MathKind.NEG, MathKind.DEG2RAD, MathKind.RAD2DEG}
#: The linear kinds whose result has the input's dtype (or its real part's): any Partial.
_KEEPING_MATH = {MathKind.NEG, MathKind.CONJ, MathKind.REAL, MathKind.IMAG}


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("kind", list(MathKind))
def test_math_all_layouts(kind: MathKind, mesh_shape: tuple[int, ...]) -> None:
    if kind is MathKind.BITWISE_NOT:  # torch's bitwise_not refuses floats
        inputs = (_ints(5, 3), _ints(2, 3, 4), _ints(7))
    elif kind is MathKind.IMAG:  # torch's imag refuses real tensors
        inputs = tuple(_randn(*s).to(torch.complex64) for s in ((5, 3), (2, 3, 4), (7,)))
    else:
        inputs = (_randn(5, 3), _randn(2, 3, 4), _ints(7))
    for x in inputs:
        accepted = run_layouts("op", BaseMathParam(kind), [x], mesh_shape, [_MATH_FNS[kind](x)])
        partial = any(Partial() in pl for (pl,) in accepted)
        # deg2rad of int64 parts is a float32 of each part, rounded on its own: not linear
        linear = kind in _KEEPING_MATH or (kind in _LINEAR_MATH and x.is_floating_point())
        assert partial == linear
        assert len(accepted) > 1


_ACT_FNS = {
    ActivationKind.RELU: torch.relu,
    ActivationKind.GELU: F.gelu,
    ActivationKind.SILU: F.silu,
    ActivationKind.SIGMOID: torch.sigmoid,
    ActivationKind.TANH: torch.tanh,
    # ActivationParam's default alpha, 0.0
    ActivationKind.LEAKY_RELU: lambda x: F.leaky_relu(x, 0.0),
    ActivationKind.ELU: lambda x: F.elu(x, 0.0),
    ActivationKind.LOGSIGMOID: F.logsigmoid,
    ActivationKind.HARDSWISH: F.hardswish,
    ActivationKind.HARDSIGMOID: F.hardsigmoid,
    ActivationKind.MISH: F.mish,
    ActivationKind.SELU: F.selu,
    ActivationKind.SOFTSIGN: F.softsign,
    ActivationKind.TANHSHRINK: F.tanhshrink,
    # the numbers of _NUMBERS
    ActivationKind.SOFTPLUS: lambda x: F.softplus(x, 2.0, 1.0),
    ActivationKind.CELU: lambda x: F.celu(x, 1.5),
    ActivationKind.HARDSHRINK: lambda x: F.hardshrink(x, 0.4),
    ActivationKind.SOFTSHRINK: lambda x: F.softshrink(x, 0.4),
    ActivationKind.THRESHOLD: lambda x: F.threshold(x, 0.1, -3.0),
}
_ALPHA = {ActivationKind.LEAKY_RELU: 0.3, ActivationKind.ELU: 1.5}
#: (alpha, beta) of the kinds tested with other numbers than ActivationParam's defaults
_NUMBERS = {
    ActivationKind.SOFTPLUS: (2.0, 1.0),
    ActivationKind.CELU: (1.5, 0.0),  # torch refuses alpha=0
    ActivationKind.HARDSHRINK: (0.4, 0.0),
    ActivationKind.SOFTSHRINK: (0.4, 0.0),
    ActivationKind.THRESHOLD: (0.1, -3.0),
}


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("kind", list(ActivationKind))
def test_activation_all_layouts(kind: ActivationKind, mesh_shape: tuple[int, ...]) -> None:
    x = _randn(5, 3)
    alpha, beta = _NUMBERS.get(kind, (0.0, 0.0))
    param = ActivationParam(kind, alpha=alpha, beta=beta)
    accepted = run_layouts("act", param, [x], mesh_shape, [_ACT_FNS[kind](x)])
    assert not any(Partial() in pl for (pl,) in accepted)
    assert len(accepted) == 3 ** len(mesh_shape)


def test_sloped_activations_read_alpha() -> None:
    x = _randn(6, 2)
    for kind, want in (
        (ActivationKind.LEAKY_RELU, F.leaky_relu(x, 0.3)),
        (ActivationKind.ELU, F.elu(x, 1.5)),
    ):
        assert run_layouts("act", ActivationParam(kind, alpha=_ALPHA[kind]), [x], (4,), [want])


@pytest.mark.parametrize("kind", list(_NUMBERS))
def test_direct_forms_read_both_numbers(kind: ActivationKind) -> None:
    """The compiled-body form of an activation with numbers is its kernel's computation."""
    x = _randn(6, 2) * 3
    alpha, beta = _NUMBERS[kind]
    direct = direct_form(ActivationParam(kind, alpha=alpha, beta=beta))
    assert direct is not None and torch.equal(direct(x), _ACT_FNS[kind](x))


def test_gelu_tanh_approximation() -> None:
    x = _randn(6, 2)
    want = F.gelu(x, approximate="tanh")
    param = ActivationParam(ActivationKind.GELU, "tanh")
    assert run_layouts("gelu", param, [x], (4,), [want])


def test_empty_and_zero_dim_shards() -> None:
    """Sizes below the mesh size (empty shards) and 0-d operands broadcast against shards."""
    a, b = _randn(2, 3), torch.tensor(1.5)
    accepted = run_layouts("add", BroadcastBinaryParam(BinaryKind.ADD), [a, b], (4,), [a + b])
    assert ((Shard(0),), (Replicate(),)) in accepted
    empty = _randn(0, 3)
    assert run_layouts("exp", BaseMathParam(MathKind.EXP), [empty], (3,), [empty.exp()])


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (torch.ones(3, dtype=torch.int32), torch.tensor(2.5, dtype=torch.float64)),
        (torch.ones(3, dtype=torch.float16), torch.ones(3, dtype=torch.float64)),
        (torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.uint8)),
        (torch.ones(3, dtype=torch.int8), torch.ones((), dtype=torch.int64)),
    ],
)
def test_binary_promotion_on_shards(a: torch.Tensor, b: torch.Tensor) -> None:
    for kind in (BinaryKind.ADD, BinaryKind.DIV, BinaryKind.MAXIMUM, BinaryKind.GE):
        run_layouts("op", BroadcastBinaryParam(kind), [a, b], (2,), [_BINARY_FNS[kind](a, b)])
