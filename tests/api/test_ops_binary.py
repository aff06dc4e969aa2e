"""Broadcast binary operators through the public API against torch: Python operators, the
named functions and methods, comparisons, logical_and/or, maximum/minimum, Python scalars on
either side, dtypes and promotion, on 1-D, 2-D and 3-D meshes, even and uneven shards, every
placement combination on 1-D meshes (a seeded sample on the larger ones), with the output
placements and the rejection messages."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import dtorch
from dtorch.errors import MeshError, PlacementError, ShapeError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    P,
    R,
    compare,
    elementwise_table,
    expect_refusal,
    limit_for,
    place,
    run_api,
)

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(2024)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(2024)


def _randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(shape, generator=_G).to(dtype)


def _ints(*shape: int, low: int = -6, high: int = 7) -> torch.Tensor:
    return torch.randint(low, high, shape, generator=_G)


def _bools(*shape: int) -> torch.Tensor:
    return torch.rand(shape, generator=_G) > 0.5


_ADDITIVE = {(P, P): P}
_MULTIPLICATIVE = {(P, R): P, (R, P): P}

#: name in messages, the dtorch call, the torch call, inputs, Partial rows, exact.
_OPS: list[tuple[str, Callable[..., Any], Callable[..., Any], str, dict, bool]] = [
    ("add", operator.add, torch.add, "float", _ADDITIVE, True),
    ("sub", operator.sub, torch.sub, "float", _ADDITIVE, True),
    ("mul", operator.mul, torch.mul, "float", _MULTIPLICATIVE, True),
    ("div", operator.truediv, torch.div, "float", {}, True),
    ("pow", operator.pow, torch.pow, "positive", {}, False),
    ("floor_divide", operator.floordiv, torch.floor_divide, "int", {}, True),
    ("remainder", operator.mod, torch.remainder, "int", {}, True),
    ("eq", operator.eq, torch.eq, "int", {}, True),
    ("ne", operator.ne, torch.ne, "int", {}, True),
    ("gt", operator.gt, torch.gt, "float", {}, True),
    ("lt", operator.lt, torch.lt, "float", {}, True),
    ("ge", operator.ge, torch.ge, "int", {}, True),
    ("le", operator.le, torch.le, "int", {}, True),
    ("logical_and", dtorch.logical_and, torch.logical_and, "bool", {}, True),
    ("logical_or", dtorch.logical_or, torch.logical_or, "bool", {}, True),
    ("maximum", dtorch.maximum, torch.maximum, "float", {}, True),
    ("minimum", dtorch.minimum, torch.minimum, "float", {}, True),
    ("bitwise_and", operator.and_, torch.bitwise_and, "int", {}, True),
    ("bitwise_or", operator.or_, torch.bitwise_or, "int", {}, True),
    ("bitwise_xor", operator.xor, torch.bitwise_xor, "int", {}, True),
]

_SHAPES = [((5, 3), (5, 3)), ((5, 3), (3,)), ((4, 1), (1, 3))]


def _inputs(kind: str, sa: tuple[int, ...], sb: tuple[int, ...]) -> list[torch.Tensor]:
    if kind == "int":
        return [_ints(*sa), _ints(*sb, low=1)]
    if kind == "bool":
        return [_bools(*sa), _bools(*sb)]
    if kind == "positive":
        return [_randn(*sa).abs() + 0.5, _randn(*sb)]
    return [_randn(*sa), _randn(*sb)]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "fn", "ref", "kind", "partial", "exact"), _OPS)
def test_binary_every_layout(  # type: ignore[no-untyped-def]
    name, fn, ref, kind, partial, exact, mesh_shape, graph
) -> None:
    """Every layout on 1-D meshes (a seeded sample on 2-D/3-D), equal and broadcast shapes;
    the output placements follow the one-mesh-dim table of torch's broadcasting."""
    shapes = _SHAPES if len(mesh_shape) == 1 else _SHAPES[:2]
    for sa, sb in shapes:
        a, b = _inputs(kind, sa, sb)
        table = elementwise_table([sa, sb], partial, bools=[kind == "bool"] * 2)
        accepted = run_api(
            graph, name, fn, [a, b], mesh_shape, [ref(a, b)], table=table, exact=exact,
            limit=limit_for(mesh_shape, n_d=12), seed=len(sb),
        )  # fmt: skip
        assert accepted


def test_binary_accepted_set_on_one_mesh_dim(graph: dtorch.Graph) -> None:
    """The exact accepted set and output of ``+`` and ``*`` for same-shape 2-D operands."""
    a, b = _randn(4, 3), _randn(4, 3)
    plus = run_api(graph, "add", operator.add, [a, b], (2,), [a + b], table=None)
    times = run_api(graph, "mul", operator.mul, [a, b], (2,), [a * b], table=None)
    shards = {(R, R), (S0, S0), (S1, S1), (S0, R), (R, S0), (S1, R), (R, S1)}
    assert {(x[0], y[0]) for x, y in plus} == shards | {(P, P)}
    assert {(x[0], y[0]) for x, y in times} == shards | {(P, R), (R, P)}


_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool]


def _values(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    if dtype == torch.bool:
        return _bools(*shape)
    if dtype.is_floating_point:
        return (_randn(*shape) * 3).to(dtype)
    return _ints(*shape, low=1)


@pytest.mark.parametrize("dtype_b", _DTYPES)
@pytest.mark.parametrize("dtype_a", _DTYPES)
def test_binary_dtypes_and_promotion(
    dtype_a: torch.dtype, dtype_b: torch.dtype, graph: dtorch.Graph
) -> None:
    """Every operator on every dtype pair: torch's result dtype and values where torch
    computes it, an error at the call where torch refuses the dtypes."""
    mesh = dtorch.init_device_mesh("cpu", (3,))
    a, b = _values(dtype_a, 7, 2), _values(dtype_b, 7, 2)
    ta, tb = place(a, mesh, [S0], graph), place(b, mesh, [R], graph)
    for name, fn, ref, _, _, exact in _OPS:
        try:
            want = ref(a, b)
        except RuntimeError as error:  # torch refuses the dtypes (or divides ints by zero)
            expect_refusal(lambda fn=fn: fn(ta, tb).to_torch(), error)
            continue
        out = fn(ta, tb)
        assert out.dtype == want.dtype and out.placements == [S0], name
        got = out.to_torch()
        if exact and not want.is_floating_point():
            assert torch.equal(got, want), name
        else:
            torch.testing.assert_close(got, want, equal_nan=True, msg=name)


_SCALARS: list[Any] = [2, -3, 0.5, True]
#: ``2 > t`` is Python's ``t.__lt__(2)``: the operator the message names.
_REFLECTED = {"gt": "lt", "lt": "gt", "ge": "le", "le": "ge"}
_PY_OPS = [op for op in _OPS if not op[1].__module__.startswith("dtorch")]


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 3), (2, 1, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
@pytest.mark.parametrize("scalar_first", [False, True], ids=["t_op_s", "s_op_t"])
def test_python_scalars_either_side(
    scalar_first: bool, dtype: torch.dtype, mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """``t op s`` and ``s op t`` for every Python operator, int/float/bool scalars: torch's
    values and dtypes, or torch's refusal (at record time for dtypes, at fetch for values);
    Partial stays Partial only for ``t * s``, ``s * t`` and ``t / s``."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    full = _values(dtype, 5, 3)
    layouts = [[S0] + [R] * (len(mesh_shape) - 1), [S1] * len(mesh_shape)]
    if dtype != torch.bool:
        layouts.append([P] + [S0] * (len(mesh_shape) - 1))
    for name, fn, _, _, _, _ in _PY_OPS:
        for s in _SCALARS:
            call = (
                (lambda x, s=s, fn=fn: fn(s, x))
                if scalar_first
                else (lambda x, s=s, fn=fn: fn(x, s))
            )
            linear = name == "mul" or (name == "div" and not scalar_first)
            shown = _REFLECTED.get(name, name) if scalar_first else name
            _check_scalar_case(shown, call, linear, full, mesh, layouts, graph)


def _check_scalar_case(  # type: ignore[no-untyped-def]
    name, call, linear, full, mesh, layouts, graph
) -> None:
    try:
        want = call(full)
    except RuntimeError as error:
        t = place(full, mesh, layouts[0], graph)
        expect_refusal(lambda: call(t).to_torch(), error)
        return
    for given in layouts:
        t = place(full, mesh, given, graph)
        pl = t.placements  # a size-1 mesh dim holds Replicate whatever was given
        try:
            out = call(t)
        except PlacementError as error:
            assert P in pl, f"{name} rejected {pl}: {error}"
            assert str(error).startswith(f"{name}: got (P"), str(error)
            assert "accepted" in str(error)
            continue
        assert out.dtype == want.dtype, (name, pl)
        assert out.placements == pl, (name, pl, out.placements)
        if P in pl:
            assert linear, f"{name} kept Partial"
        got = out.to_torch()
        if want.is_floating_point():
            torch.testing.assert_close(got, want, equal_nan=True, msg=f"{name} {pl}")
        else:
            assert torch.equal(got, want), (name, pl)


_TYPED_SCALARS = [
    torch.tensor(2.5, dtype=torch.float64),
    torch.tensor(1.5, dtype=torch.bfloat16),
    torch.tensor(3),
    torch.tensor(True),
    np.float64(2.5),
    np.int64(-2),
]


@pytest.mark.parametrize("scalar", _TYPED_SCALARS, ids=repr)
@pytest.mark.parametrize("dtype", [torch.int32, torch.float16, torch.bool], ids=str)
def test_zero_dim_torch_tensors_and_numpy_scalars(
    dtype: torch.dtype, scalar: Any, graph: dtorch.Graph
) -> None:
    """0-d torch tensors promote like torch's 0-d tensors (``int32 + tensor(2.5, float64)`` is
    float64, unlike ``+ 2.5``), numpy scalars like Python numbers; on either side (numpy
    defers to the tensor, as to torch's: ``np.float64(2) + t`` is a tensor)."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    full = _values(dtype, 5, 3)
    for name, fn, _, _, _, _ in _PY_OPS:
        for first in (False, True):
            call = (lambda x, fn=fn: fn(scalar, x)) if first else (lambda x, fn=fn: fn(x, scalar))
            shown = _REFLECTED.get(name, name) if first else name
            _check_scalar_case(shown, call, False, full, mesh, [[S0, S1]], graph)


@pytest.mark.parametrize("scalar", [3, 0.25])
def test_partial_linearity_with_scalars(scalar: float, graph: dtorch.Graph) -> None:
    """``P * s``, ``s * P`` and ``P / s`` stay Partial; ``P + s``, ``s - P``, ``s / P`` and
    ``P ** s`` are rejected with the operator's name."""
    mesh = dtorch.init_device_mesh("cpu", 4)
    full = _randn(6, 2)
    t = place(full, mesh, [P], graph)
    products = ((t * scalar, full * scalar), (scalar * t, scalar * full))
    for out, want in (*products, (t / scalar, full / scalar)):
        assert out.placements == [P]
        torch.testing.assert_close(out.to_torch(), want)
    for name, call in (
        ("add", lambda: t + scalar),
        ("sub", lambda: scalar - t),
        ("div", lambda: scalar / t),
        ("pow", lambda: t**scalar),
    ):
        with pytest.raises(PlacementError, match=rf"^{name}: got \(P,\) on mesh \(4,\); accepted"):
            call()


_NAMED = [
    ("add", dtorch.add, torch.add),
    ("add", lambda a, b: a.add(b), torch.add),
    ("sub", dtorch.sub, torch.sub),
    ("sub", lambda a, b: a.sub(b), torch.sub),
    ("mul", dtorch.mul, torch.mul),
    ("mul", lambda a, b: a.mul(b), torch.mul),
    ("div", dtorch.div, torch.div),
    ("div", lambda a, b: a.div(b), torch.div),
    ("pow", lambda a, b: dtorch.pow(a.abs(), b), lambda a, b: torch.pow(a.abs(), b)),
    ("pow", lambda a, b: a.abs().pow(b), lambda a, b: a.abs().pow(b)),
    ("eq", dtorch.eq, torch.eq),
    ("eq", lambda a, b: a.eq(b), torch.eq),
    ("ne", dtorch.ne, torch.ne),
    ("gt", dtorch.gt, torch.gt),
    ("gt", dtorch.greater, torch.greater),
    ("gt", lambda a, b: a.greater(b), torch.greater),
    ("gt", lambda a, b: a.gt(b), torch.gt),
    ("lt", dtorch.lt, torch.lt),
    ("lt", dtorch.less, torch.less),
    ("lt", lambda a, b: a.less(b), torch.less),
    ("ge", dtorch.ge, torch.ge),
    ("ge", dtorch.greater_equal, torch.greater_equal),
    ("ge", lambda a, b: a.greater_equal(b), torch.greater_equal),
    ("le", dtorch.le, torch.le),
    ("le", dtorch.less_equal, torch.less_equal),
    ("le", lambda a, b: a.less_equal(b), torch.less_equal),
    ("logical_and", lambda a, b: a.logical_and(b), torch.logical_and),
    ("logical_or", lambda a, b: a.logical_or(b), torch.logical_or),
    ("bitwise_and", lambda a, b: (a > 0) & (b > 0), lambda a, b: (a > 0) & (b > 0)),
    ("bitwise_or", lambda a, b: (a > 0) | (b > 0), lambda a, b: (a > 0) | (b > 0)),
    ("bitwise_xor", lambda a, b: (a > 0) ^ (b > 0), lambda a, b: (a > 0) ^ (b > 0)),
    ("bitwise_and", lambda a, b: dtorch.bitwise_and(a > 0, b > 0), lambda a, b: (a > 0) & (b > 0)),
    ("bitwise_or", lambda a, b: (a > 0).bitwise_or(b > 0), lambda a, b: (a > 0) | (b > 0)),
    ("bitwise_xor", lambda a, b: dtorch.bitwise_xor(a > 0, b > 0), lambda a, b: (a > 0) ^ (b > 0)),
    ("maximum", lambda a, b: a.maximum(b), torch.maximum),
    ("minimum", lambda a, b: a.minimum(b), torch.minimum),
    ("maximum", dtorch.max, torch.max),
    ("minimum", dtorch.min, torch.min),
    ("maximum", lambda a, b: a.max(b), torch.max),
    ("minimum", lambda a, b: a.min(b), torch.min),
    ("ne", lambda a, b: a != b, torch.ne),
]


@pytest.mark.parametrize("mesh_shape", [(3,), (2, 2)])
@pytest.mark.parametrize(("name", "fn", "ref"), _NAMED)
def test_named_functions_and_methods(  # type: ignore[no-untyped-def]
    name, fn, ref, mesh_shape, graph
) -> None:
    """The ``dtorch.*`` functions and Tensor methods give torch's values; R turns into the
    other operand's shard; rejections name the operator."""
    a, b = _randn(7, 4), _randn(4)
    want = ref(a, b)
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    rest = [R] * (len(mesh_shape) - 1)
    out = fn(place(a, mesh, [S0, *rest], graph), place(b, mesh, [R, *rest], graph))
    assert out.placements == [S0, *rest] and out.dtype == want.dtype
    torch.testing.assert_close(out.to_torch(), want, rtol=0, atol=0)
    with pytest.raises(PlacementError, match=rf"^{name}: got \(S\(0\)"):
        fn(place(a, mesh, [S0, *rest], graph), place(b, mesh, [S0, *rest], graph))


def test_alpha_and_rounding_modes(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    a, b = _randn(5, 2) * 4, _randn(5, 2) + 0.1
    ia, ib = _ints(5, 2), _ints(5, 2, low=1)
    ta, tb = place(a, mesh, [S0], graph), place(b, mesh, [S0], graph)
    tia, tib = place(ia, mesh, [S1], graph), place(ib, mesh, [R], graph)
    cases = [
        (ta.add(tb, alpha=2), torch.add(a, b, alpha=2)),
        (dtorch.sub(ta, tb, alpha=0.5), torch.sub(a, b, alpha=0.5)),
        (ta.add(3, alpha=2), torch.add(a, 3, alpha=2)),
        (ta.sub(1.5, alpha=2), torch.sub(a, 1.5, alpha=2)),
        (ta.div(tb, rounding_mode="floor"), torch.div(a, b, rounding_mode="floor")),
        (ta.div(tb, rounding_mode="trunc"), torch.div(a, b, rounding_mode="trunc")),
        (tia.div(tib, rounding_mode="trunc"), torch.div(ia, ib, rounding_mode="trunc")),
        (tia.div(tib, rounding_mode="floor"), torch.div(ia, ib, rounding_mode="floor")),
        (tia.div(tib), torch.div(ia, ib)),
        (tia // 2, ia // 2),
        (7 // tib, 7 // ib),
        (tia % 3, ia % 3),
        (-7 % tib, -7 % ib),
    ]
    for out, want in cases:
        assert out.dtype == want.dtype
        torch.testing.assert_close(out.to_torch(), want, rtol=0, atol=0)
    with pytest.raises(ValueError, match="rounding_mode"):
        ta.div(tb, rounding_mode="ceil")


def test_comparisons_and_logical_with_scalars_and_not(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = _ints(5, 4)
    t = place(x, mesh, [S0, S1], graph)
    for out, want in (
        (t == 2, x == 2), (operator.eq(2, t), x == 2), (t != 0, x != 0), (t > 1, x > 1),
        (operator.lt(1, t), x > 1), (t >= -1, x >= -1), (t <= 0, x <= 0),
        (operator.le(0.5, t), x >= 0.5),
        (~(t > 0), ~(x > 0)), ((t > 0).logical_not(), (x > 0).logical_not()),
        (dtorch.logical_and(t, 1), torch.logical_and(x, torch.tensor(1))),
        (dtorch.logical_or(t > 2, False), torch.logical_or(x > 2, torch.tensor(False))),
    ):  # fmt: skip
        assert out.dtype == torch.bool and out.placements == [S0, S1]
        assert torch.equal(out.to_torch(), want)
    assert torch.equal((~t).to_torch(), ~x)  # bitwise on integers, as in torch
    with pytest.raises(TypeError, match="integer and bool"):
        _ = ~place(_randn(5, 4), mesh, [S0, S1], graph)


def test_zero_dim_and_empty_operands(graph: dtorch.Graph) -> None:
    """A 0-d operand broadcasts against shards; empty shards (fewer rows than devices)."""
    mesh = dtorch.init_device_mesh("cpu", 4)
    a, s = _randn(2, 3), torch.tensor(1.5)
    out = place(a, mesh, [S0], graph) + place(s, mesh, [R], graph)
    assert out.placements == [S0] and torch.equal(out.to_torch(), a + s)
    out = place(s, mesh, [P], graph) * place(a, mesh, [R], graph)
    assert out.placements == [P]
    torch.testing.assert_close(out.to_torch(), s * a, rtol=0, atol=0)
    e = _randn(0, 3)
    out = place(e, mesh, [S0], graph) - place(e, mesh, [R], graph)
    assert out.shape == (0, 3) and out.to_torch().shape == (0, 3)


def test_rejections(graph: dtorch.Graph) -> None:
    """Wrong placements, shapes and meshes fail at the call, naming the operator and what it
    accepts; nothing runs."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    a = place(_randn(4, 3), mesh, [S0], graph)
    b = place(_randn(4, 3), mesh, [S1], graph)
    with pytest.raises(PlacementError) as info:
        a + b
    text = str(info.value)
    assert text.startswith("add: got (S(0),) x (S(1),) on mesh (2,); accepted per mesh dimension")
    assert "P x P -> P" in text and "S(i) x S(i) -> S(i)" in text
    with pytest.raises(PlacementError, match=r"^maximum: got \(S\(0\),\) x \(P,\)"):
        dtorch.maximum(a, place(_randn(4, 3), mesh, [P], graph))
    with pytest.raises(PlacementError, match=r"^mul: got \(P,\) x \(P,\).*accepted.*P x R -> P"):
        place(_randn(4, 3), mesh, [P], graph) * place(_randn(4, 3), mesh, [P], graph)
    with pytest.raises(ShapeError, match=r"^add: shapes \[4, 3\] x \[4\]"):
        a + place(_randn(4), mesh, [R], graph)
    other = dtorch.init_device_mesh("cpu", 3)
    with pytest.raises(MeshError, match=r"^mul: inputs lie on different meshes"):
        a * place(_randn(4, 3), other, [S0], graph)
    with pytest.raises(TypeError, match=r"dtorch\.Tensor or a number"):
        a + "x"
    with pytest.raises(TypeError, match=r"dtorch\.Tensor or a number"):
        a * torch.ones(4, 3)


@pytest.mark.parametrize(
    "dtype", [torch.int64, torch.int32, torch.bfloat16, torch.float64], ids=str
)
def test_partial_arithmetic_in_other_dtypes(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """``P + P``, ``P - P``, ``P * R`` and ``R * P`` on integer and low-precision tensors, on a
    2-D mesh with the other mesh dim sharded; ``P / R`` is refused."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    a, b = _values(dtype, 7, 4), _values(dtype, 7, 4)
    pa, pb = place(a, mesh, [P, S0], graph), place(b, mesh, [P, S0], graph)
    rb = place(b, mesh, [R, S0], graph)
    for out, want in ((pa + pb, a + b), (pa - pb, a - b), (pa * rb, a * b), (rb * pa, b * a)):
        assert out.placements == [P, S0] and out.dtype == want.dtype
        assert torch.equal(out.to_torch(), want)
    with pytest.raises(PlacementError, match=r"^div: got \(P, S\(0\)\) x \(R, S\(0\)\)"):
        pa / rb


@pytest.mark.xfail(
    strict=True,
    reason="P * R is accepted as linear (as in DTensor), but not for non-finite factors: an "
    "infinite factor gives the non-owning ranks 0 * inf = NaN, so the sum is NaN where "
    "torch has +-inf",
)
def test_partial_times_infinity_matches_torch(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    a, b = torch.tensor([1.0, -2.0, 3.0]), torch.tensor([float("inf"), 1.0, 2.0])
    out = place(a, mesh, [P], graph) * place(b, mesh, [R], graph)
    assert out.placements == [P]
    assert torch.equal(out.to_torch(), a * b)


_ALPHA_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int64]


@pytest.mark.parametrize("dtype_b", _ALPHA_DTYPES, ids=str)
@pytest.mark.parametrize("dtype_a", _ALPHA_DTYPES, ids=str)
def test_alpha_scales_in_the_result_dtype(
    dtype_a: torch.dtype, dtype_b: torch.dtype, graph: dtorch.Graph
) -> None:
    """``add``/``sub`` with ``alpha`` are torch's own kernel: ``alpha * b`` is computed in the
    promoted dtype (an int8 100 times 2 is 200 in a float32 sum, not a wrapped -56), bit-equal
    to torch; torch's refusals (a float alpha for integer results) are refused at the call."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    big = 100 if not dtype_b.is_floating_point else 30000
    a, b = torch.zeros(4, 3).to(dtype_a), torch.full((4, 3), big).to(dtype_b)
    ta, tb = place(a, mesh, [S0], graph), place(b, mesh, [R], graph)
    for alpha in (2, 3, 0.5, -1):
        for fn, ref in (
            (dtorch.add, torch.add),
            (lambda x, y, alpha: x.sub(y, alpha=alpha), torch.sub),
        ):
            try:
                want = ref(a, b, alpha=alpha)
            except RuntimeError as error:
                expect_refusal(lambda fn=fn, alpha=alpha: fn(ta, tb, alpha=alpha), error)
                continue
            out = fn(ta, tb, alpha=alpha)
            assert out.dtype == want.dtype and out.placements == [S0]
            compare_exact = out.to_torch()
            assert torch.equal(compare_exact, want), (alpha, compare_exact, want)


def test_alpha_keeps_partial_sums_and_scalars(graph: dtorch.Graph) -> None:
    """``P + alpha * P`` stays Partial (it is linear); a number ``b`` is scaled by Python after
    torch's alpha check; a number ``a`` with a tensor ``b`` casts ``b`` before scaling."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    a, b = _randn(4, 3), _randn(4, 3)
    out = place(a, mesh, [P], graph).sub(place(b, mesh, [P], graph), alpha=3)
    assert out.placements == [P]
    torch.testing.assert_close(out.to_torch(), torch.sub(a, b, alpha=3))
    ints = place(torch.arange(4, dtype=torch.int8), mesh, [S0], graph)
    with pytest.raises(dtorch.DTorchError, match="alpha must not be a floating point"):
        ints.add(2, alpha=0.5)
    want = 1.5 + torch.arange(4, dtype=torch.int8).to(torch.float32) * 100
    assert torch.equal(dtorch.add(1.5, ints, alpha=100).to_torch(), want)


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.int8])
def test_trunc_division_with_zero_dim_operands_keeps_the_tensor_dtype(
    dtype: torch.dtype, graph: dtorch.Graph
) -> None:
    """``div(rounding_mode='trunc')`` promotes as torch does with 0-d operands (which do not
    raise the dimensioned operand's category): ``int32 // int64 0-d`` is int32."""
    mesh = dtorch.init_device_mesh("cpu", (3,))
    x = torch.tensor([5, 7, 100, 9, 3, 12], dtype=dtype)
    zero_dim = torch.tensor(2, dtype=torch.int64)
    t, z = place(x, mesh, [S0], graph), place(zero_dim, mesh, [R], graph)
    for got, want in (
        (t.div(zero_dim, rounding_mode="trunc"), x.div(zero_dim, rounding_mode="trunc")),
        (t.div(z, rounding_mode="trunc"), x.div(zero_dim, rounding_mode="trunc")),
        (z.div(t, rounding_mode="trunc"), zero_dim.div(x, rounding_mode="trunc")),
    ):
        assert got.dtype == want.dtype
        assert torch.equal(got.to_torch(), want)


@pytest.mark.parametrize(
    ("dtype", "values"),
    [
        (torch.int32, [16777217, 2**31 - 1, 7, -7, -(2**31), 5]),
        (torch.int64, [2**53 + 1, 3, -7, 9, -(2**62) - 1, 11]),
        (torch.int8, [100, -100, 50, 3, -128, 127]),
    ],
)
def test_trunc_division_of_big_integers_is_exact(
    dtype: torch.dtype, values: list[int], graph: dtorch.Graph
) -> None:
    """Integers beyond float32's 24 bits divide exactly (a true division rounded afterwards
    gave 16777216 for 16777217 // 1 and wrapped int32's largest to its smallest); a number
    beyond the tensor's dtype wraps as torch wraps it (int8 / 300)."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = torch.tensor(values, dtype=dtype)
    t = place(x, mesh, [S0], graph)
    for divisor in (1, 3, -7, 300, x.flip(0)):
        other = place(divisor, mesh, [S0], graph) if isinstance(divisor, torch.Tensor) else divisor
        got = dtorch.div(t, other, rounding_mode="trunc")
        want = torch.div(x, divisor, rounding_mode="trunc")
        assert got.dtype == want.dtype
        assert torch.equal(got.to_torch(), want)
    want = torch.div(7, x.flip(0), rounding_mode="trunc")
    assert torch.equal(
        dtorch.div(7, place(x.flip(0), mesh, [S0], graph), rounding_mode="trunc").to_torch(), want
    )


def test_trunc_division_of_a_number_by_bfloat16_rounds_once(graph: dtorch.Graph) -> None:
    """``7 / bf16`` rounded toward zero as torch's own kernel does (rounding the quotient to
    bfloat16 first made -16.9 into -17)."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    den = torch.tensor([-0.4140625, 2.0, 3.0, -0.3], dtype=torch.bfloat16)
    got = dtorch.div(7, place(den, mesh, [S0], graph), rounding_mode="trunc").to_torch()
    assert torch.equal(got, torch.div(7, den, rounding_mode="trunc"))


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("div", lambda t: t / 0),
        ("div", lambda t: t / 0.0),
        ("div", lambda t: t / False),
        ("mul", lambda t: t * float("inf")),
        ("mul", lambda t: float("-inf") * t),
        ("mul", lambda t: t * 1e39),  # infinite in float32 arithmetic
        ("div", lambda t: t / 1e-320),  # 0 in float32
    ],
)
def test_partial_times_infinity_or_over_zero_is_refused(  # type: ignore[no-untyped-def]
    name, call, graph
) -> None:
    """A Partial's summands times inf (or over 0) add to NaN where torch has +-inf: the
    scalar forms are refused with the reason; a Replicate or Shard gives torch's values;
    ``P * nan`` and ``P / inf`` stay linear (NaN and 0 are what torch gives too)."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    full = torch.tensor([1.0, -2.0, 3.0, 4.0])
    with pytest.raises(PlacementError, match=rf"^{name}: got \(P,\).*infinite"):
        call(place(full, mesh, [P], graph))
    out = call(place(full, mesh, [S0], graph))
    assert out.placements == [S0] and torch.equal(out.to_torch(), call(full))
    partial = place(full, mesh, [P], graph)
    for got, want in (
        (partial * float("nan"), full * float("nan")),
        (partial / float("inf"), full / float("inf")),
    ):
        assert got.placements == [P]
        compare(got.to_torch(), want, True, name)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_partial_times_a_number_finite_in_its_arithmetic_stays_partial(
    dtype: torch.dtype, graph: dtorch.Graph
) -> None:
    """``1e39`` is finite in float64, and float16/bfloat16 compute with float32 numbers, so
    a float16 Partial times 7e4 (whose product overflows float16 in torch too) or over
    1e-30 stays Partial and equals torch."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    full = torch.tensor([1.0, -2.0, 3.0, 0.5], dtype=dtype)
    numbers = (1e39, 1e-320) if dtype == torch.float64 else (7e4, 1e-30)
    partial = place(full, mesh, [P], graph)
    for got, want in (
        (partial * numbers[0], full * numbers[0]),
        (partial / numbers[1], full / numbers[1]),
    ):
        assert got.placements == [P]
        compare(got.to_torch(), want, True, str(dtype))


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t * 3,
        lambda t: t / 2,
        lambda t: 2.5 * t,
        lambda t: t * t.new_ones(t.shape, dtype=torch.int64),
    ],
    ids=["times-3", "over-2", "2.5-times", "times-int-tensor"],
)
def test_a_bool_partial_is_not_widened_part_by_part(call: Any, graph: dtorch.Graph) -> None:
    """A bool Partial (a ``sum(dtype=bool)`` over a sharded dim) is the OR of its parts: a
    product that converts it to a number converted each part (True + True made 6 of 3 * True);
    it is refused now, as ``.float()`` of it is; after a redistribution the value is torch's."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    parts = torch.tensor([[True, True, False], [True, False, False]])
    p = place(parts, mesh, [S0], graph).sum(0, dtype=torch.bool)
    assert p.placements == [P]
    with pytest.raises(PlacementError, match="a bool Partial is the OR of its parts"):
        call(p)
    want = call(parts.any(0))
    got = call(p.redistribute(placements=[R]))
    assert got.dtype == want.dtype and torch.equal(got.to_torch(), want)


def test_the_sign_of_a_zero_number_is_kept(graph: dtorch.Graph) -> None:
    """Operator params are cached by their numbers: 0.0 and -0.0 compared equal, so x / -0.0
    after x / 0.0 gave +inf (and x * 0.0 after x * -0.0 gave -0.0)."""
    full = torch.tensor([1.0, -2.0])
    x = dtorch.from_torch(full, graph=graph)
    for first, second in ((0.0, -0.0), (-0.0, 0.0)):
        for op in (operator.truediv, operator.mul, operator.add, operator.sub):
            for number in (first, second):
                got, want = op(x, number).to_torch(), op(full, number)
                assert torch.equal(got, want), (op, number)
                assert torch.equal(got.signbit(), want.signbit()), (op, number)


def test_a_shard_of_a_broadcast_dim_is_refused_saying_why(graph: dtorch.Graph) -> None:
    """A (1, 4) shard of dim 0 (devices holding nothing of it) beside a (3, 4) tensor: the
    refusal read 'S(k) x R is not one of these' beside an accepted 'S(i) x R', with no word
    of what k is."""
    mesh = dtorch.init_device_mesh("cpu", (3,))
    x = dtorch.from_torch(torch.ones(1, 4), device_mesh=mesh, placements=[dtorch.Shard(0)])
    y = dtorch.from_torch(torch.ones(3, 4), device_mesh=mesh)
    with pytest.raises(PlacementError, match=r"k: a dim it broadcasts from 1\); mesh dim 0 is S"):
        x + y
