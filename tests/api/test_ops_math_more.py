"""More elementwise math through the public API against torch on the full tensors: the unary
``lgamma digamma erfinv i0 sinc logit deg2rad rad2deg signbit asinh acosh atanh`` (and the
``arc*`` names), ``negative``, ``positive``, ``frac``; the binary ``fmod copysign heaviside
float_power true_divide gcd lcm logical_xor nextafter ldexp clamp_min clamp_max``; and their
in-place forms. Every layout of a 1-D mesh (2 or 3 devices) and a seeded sample of a 2-D or
3-D one; torch's dtypes over every pair of ten dtypes, and torch's refusals at the call;
Python numbers on either side; edge values; Partial kept only by the linear ones."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, PlacementError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    P,
    R,
    choices,
    compare,
    elementwise_table,
    expect_refusal,
    place,
    run_api,
)
from tests.simulate import layout_combos

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(61)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(61)


DTYPES = [
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
]  # fmt: skip
_ND = [m for m in ALL_MESHES if len(m) > 1]


def _meshes(i: int) -> list[tuple[int, ...]]:
    """A 1-D mesh of 2 or 3 devices and one N-D mesh, taken in turn: every mesh meets some."""
    return [ALL_MESHES[i % 2], _ND[i % len(_ND)]]


def _special(*shape: int) -> torch.Tensor:
    """Values in (-3, 3) with zeros of both signs, halves, infinities and a NaN."""
    x = torch.randn(shape, generator=_G) * 1.5
    x.view(-1)[:7] = torch.tensor([0.0, -0.0, 0.5, -2.0, float("inf"), -float("inf"), float("nan")])
    return x


def _unit(*shape: int) -> torch.Tensor:
    """Values in (-1.2, 1.2) with the domain edges of erfinv, atanh and logit."""
    x = torch.rand(shape, generator=_G) * 2.4 - 1.2
    x.view(-1)[:5] = torch.tensor([0.0, 1.0, -1.0, 0.25, float("nan")])
    return x


def _method(name: str, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
    return lambda t: getattr(t, name)(*args, **kwargs)


#: name in messages, method (with its arguments), dtorch function (or None), torch's form,
#: values, exact, linear (keeps a Partial).
_UNARY: list[tuple[Any, ...]] = [
    ("lgamma", _method("lgamma"), dtorch.lgamma, torch.lgamma, _special, False, False),
    ("digamma", _method("digamma"), dtorch.digamma, torch.digamma, _special, False, False),
    ("erfinv", _method("erfinv"), dtorch.erfinv, torch.erfinv, _unit, False, False),
    ("i0", _method("i0"), dtorch.i0, torch.i0, _special, False, False),
    ("sinc", _method("sinc"), dtorch.sinc, torch.sinc, _special, False, False),
    ("logit", _method("logit"), dtorch.logit, torch.logit, _unit, False, False),
    ("logit", _method("logit", eps=0.1), lambda t: dtorch.logit(t, 0.1),
     lambda x: torch.logit(x, 0.1), _unit, False, False),
    ("deg2rad", _method("deg2rad"), dtorch.deg2rad, torch.deg2rad, _special, False, True),
    ("rad2deg", _method("rad2deg"), dtorch.rad2deg, torch.rad2deg, _special, False, True),
    ("signbit", _method("signbit"), dtorch.signbit, torch.signbit, _special, True, False),
    ("asinh", _method("asinh"), dtorch.asinh, torch.asinh, _special, False, False),
    ("asinh", _method("arcsinh"), dtorch.arcsinh, torch.arcsinh, _special, False, False),
    ("acosh", _method("acosh"), dtorch.acosh, torch.acosh, _special, False, False),
    ("acosh", _method("arccosh"), dtorch.arccosh, torch.arccosh, _special, False, False),
    ("atanh", _method("atanh"), dtorch.atanh, torch.atanh, _unit, False, False),
    ("atanh", _method("arctanh"), dtorch.arctanh, torch.arctanh, _unit, False, False),
    ("negative", _method("negative"), dtorch.negative, torch.negative, _special, True, True),
    ("positive", _method("positive"), dtorch.positive, torch.positive, _special, True, True),
    ("frac", _method("frac"), dtorch.frac, torch.frac, _special, True, False),
]  # fmt: skip


@pytest.mark.parametrize(("i", "case"), list(enumerate(_UNARY)), ids=[c[0] for c in _UNARY])
def test_unary_layouts(i: int, case: tuple[Any, ...], graph: dtorch.Graph) -> None:
    """Method and function on every layout of a 1-D mesh (a sample of 8 on an N-D one) of
    an uneven (5, 3) input with the edge values; shards kept; Partial kept by the linear ones
    (to within a rounding: each part is scaled on its own), refused by the others (on finite
    values, so that the refusal is the only possible outcome)."""
    name, method, function, ref, values, exact, linear = case
    x = values(5, 3)
    finite = x.nan_to_num(0.0, 0.0, 0.0)
    table: dict[tuple[Any, ...], Any] = {(p,): p for p in choices(2, partial=linear)}
    for mesh_shape in _meshes(i):
        combos = layout_combos(len(mesh_shape), [x], limit=8 if len(mesh_shape) > 1 else 99)
        for call in (method, function):
            run_api(
                graph, name, call, [x], mesh_shape, [ref(x)], table=table, exact=exact,
                combos=[c for c in combos if P not in c[0]],
            )  # fmt: skip
            run_api(
                graph, name, call, [finite], mesh_shape, [ref(finite)], table=table,
                exact=exact and not linear, combos=[c for c in combos if P in c[0]],
            )  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_unary_dtypes(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """Every unary operator on every dtype: torch's dtype and values (integers promote to
    the default float where torch promotes them), or torch's refusal at the call with a
    DTorchError naming the operator (``frac`` of integers, ``negative`` of bools)."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.tensor([-3.0, -1.0, 0.0, 0.25, 0.5, 1.0, 2.0, 5.0, 0.75, -0.5, 3.0, 7.0])
    x = x.reshape(6, 2).to(dtype)
    t = place(x, mesh, [S0, S1], graph)
    for name, method, _, ref, _, exact, _ in _UNARY:
        try:
            want = ref(x)
        except RuntimeError as error:
            with pytest.raises(dtorch.DTorchError, match=rf"^{name}: "):
                method(t)
            expect_refusal(lambda method=method: method(t), error)
            continue
        out = method(t)
        assert out.dtype == want.dtype and out.placements == [S0, S1], name
        compare(out.to_torch(), want, exact or not want.is_floating_point(), f"{name} {dtype}")


def test_logit_eps(graph: dtorch.Graph) -> None:
    """``eps`` clamps as torch's kernel does: below ``eps`` to ``eps``, else above ``1 - eps``
    to ``1 - eps`` (so ``eps > 0.5`` gives torch's values too), none for ``eps < 0``; for
    every floating dtype and integers; a bad ``eps`` named."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = _unit(7, 3)
    for dtype, eps in itertools.product(
        (torch.float32, torch.float64, torch.float16, torch.bfloat16), (0.0, 1e-6, 0.2, 0.7, -0.1)
    ):
        full = x.to(dtype)
        out = place(full, mesh, [S0], graph).logit(eps)
        compare(out.to_torch(), torch.logit(full, eps), False, f"{dtype} eps={eps}")
    ints = torch.arange(-3, 3)
    out = dtorch.logit(place(ints, mesh, [S0], graph), eps=0.25)
    compare(out.to_torch(), torch.logit(ints, 0.25), False, "int64")
    with pytest.raises(TypeError, match=r"^logit: eps must be a number or None, got str"):
        dtorch.logit(place(x, mesh, [R], graph), "0.1")


#: name in messages, the call, torch's form, operand values ("float", "int", "pair"), exact.
_BINARY: list[tuple[str, Callable[..., Any], Callable[..., Any], str, bool]] = [
    ("fmod", dtorch.fmod, torch.fmod, "float", True),
    ("fmod", lambda a, b: a.fmod(b), torch.fmod, "int", True),
    ("copysign", dtorch.copysign, torch.copysign, "float", True),
    ("heaviside", lambda a, b: a.heaviside(b), torch.heaviside, "float", True),
    ("float_power", dtorch.float_power, torch.float_power, "float", False),
    ("true_divide", lambda a, b: a.true_divide(b), torch.true_divide, "float", True),
    ("gcd", dtorch.gcd, torch.gcd, "int", True),
    ("lcm", lambda a, b: a.lcm(b), torch.lcm, "int", True),
    ("logical_xor", dtorch.logical_xor, torch.logical_xor, "float", True),
    ("nextafter", dtorch.nextafter, torch.nextafter, "float", True),
    ("ldexp", dtorch.ldexp, torch.ldexp, "pair", False),
    ("clamp_min", dtorch.clamp_min, torch.clamp_min, "float", True),
    ("clamp_max", lambda a, b: a.clamp_max(b), torch.clamp_max, "float", True),
]


def _operands(kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A (5, 3) and a broadcast (3,) operand: floats with the edge values, non-zero integers
    (an integer divided by 0 fails on the devices, tested on its own), or floats by ints."""
    if kind == "int":
        a = torch.randint(-40, 40, (5, 3), generator=_G)
        b = torch.tensor([6, -4, 15])
        return a, b
    if kind == "pair":
        return _special(5, 3), torch.tensor([3, -2, 0])
    return _special(5, 3), torch.tensor([-0.0, float("inf"), -1.5])


@pytest.mark.parametrize(("i", "case"), list(enumerate(_BINARY)), ids=[c[0] for c in _BINARY])
def test_binary_layouts(i: int, case: tuple[Any, ...], graph: dtorch.Graph) -> None:
    """A (5, 3) operand with a broadcast (3,) one: every layout without Partial on a 1-D mesh,
    a sample on an N-D one, placements as the elementwise table gives them; a Partial is
    refused (none of them is linear), named after what the user called."""
    name, call, ref, kind, exact = case
    a, b = _operands(kind)
    table = elementwise_table([a.shape, b.shape])
    for mesh_shape in _meshes(i):
        combos = layout_combos(len(mesh_shape), [a, b], limit=10 if len(mesh_shape) > 1 else 99)
        run_api(
            graph, name, call, [a, b], mesh_shape, [ref(a, b)], table=table, exact=exact,
            combos=[c for c in combos if not any(P in p for p in c)],
        )  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", 2)
    with pytest.raises(PlacementError, match=rf"^{name}: got \(P,\).*accepted"):
        call(place(a, mesh, [P], graph), place(b, mesh, [R], graph))


def _typed(values: list[float], dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(values).to(dtype)


@pytest.mark.parametrize(("name", "call", "ref"), [c[:3] for c in _BINARY[1:]],
                         ids=[c[0] for c in _BINARY[1:]])  # fmt: skip
def test_binary_dtype_pairs(name: str, call: Any, ref: Any, graph: dtorch.Graph) -> None:
    """Every pair of the ten dtypes (a 1-d by a 0-d operand too): torch's result dtype and
    values, or torch's refusal at the call as a DTorchError naming the operator."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    a_values, b_values = [-7.0, -1.0, 0.0, 3.0, 5.5, 12.0], [2.0, -3.0, 4.0, 1.0, 2.5, 8.0]
    fulls = {d: (_typed(a_values, d), _typed(b_values, d)) for d in DTYPES}
    placed = {
        d: (place(a, mesh, [S0], graph), place(b, mesh, [R], graph)) for d, (a, b) in fulls.items()
    }
    pending = []
    for da, db in itertools.product(DTYPES, DTYPES):
        for zero_dim in (False, True):
            a, b = fulls[da][0], fulls[db][1]
            ta, tb = placed[da][0], placed[db][1]
            if zero_dim:
                b, tb = b[1], tb[1]
            context = f"{name}({da}, {db}{' 0-d' if zero_dim else ''})"
            try:
                want = ref(a, b)
            except RuntimeError as error:
                with pytest.raises(dtorch.DTorchError, match=rf"^{name}: ") as info:
                    call(ta, tb)
                assert str(error).split("\n")[0][:20] in str(info.value), context
                continue
            out = call(ta, tb)
            assert (out.dtype, out.placements) == (want.dtype, [S0]), context
            pending.append((out.to_torch_async(), want, context))
    for future, want, context in pending:
        compare(future.get(), want, name not in _ROUNDED, context)


#: Operators whose values may differ from torch's in the last bit: ``float_power`` and
#: ``ldexp`` go through ``pow``, whose vectorised and scalar loops differ; ``number / t`` is
#: Python's ``2 / t`` in dtorch (``reciprocal(t) * 2``), a true division in torch's 0-d form.
_ROUNDED = ("float_power", "ldexp", "true_divide")
#: The numbers a binary operator meets on either side.
_NUMBERS = [3, -2, 0, 2.5, -0.0, float("inf"), True, False]
#: Operators whose torch function takes no number first and whose dtorch one refuses one:
#: clamp_min and clamp_max clamp a tensor; heaviside takes tensors only (as in torch).
_TENSOR_FIRST = {"clamp_min", "clamp_max", "heaviside"}


@pytest.mark.parametrize("name", [c[0] for c in _BINARY[1:]])
def test_binary_numbers(name: str, graph: dtorch.Graph) -> None:
    """Numbers on either side of a tensor of each dtype: torch's result with the number
    where torch takes one (``fmod(t, 2)``, ``float_power(2, t)``), else with its 0-d tensor
    (dtorch takes the number there too), or torch's refusal (at the call where it is the
    dtypes', when fetched where it is the values': an integer ``fmod`` by 0 is refused at the
    call, as in torch); heaviside takes no number, as in torch."""
    call, ref = getattr(dtorch, name), getattr(torch, name)
    mesh = dtorch.init_device_mesh("cpu", 3)
    values = [-7.0, -1.0, 0.0, 3.0, 5.5, 12.0, -0.0, 1.0]
    pending = []
    for dtype in DTYPES:
        x = _typed(values, dtype)
        t = place(x, mesh, [S0], graph)
        for number, first in itertools.product(_NUMBERS, (False, True)):
            context = f"{name}({'number, ' if first else ''}{dtype}{'' if first else ', number'})"
            if name == "heaviside" or (first and name in _TENSOR_FIRST):
                with pytest.raises(TypeError, match=rf"^{name}: "):
                    call(number, t) if first else call(t, number)
                continue
            run = partial(call, number, t) if first else partial(call, t, number)
            try:
                want = _torch_with_number(ref, x, number, first)
            except RuntimeError as error:
                expect_refusal(lambda run=run: run().to_torch(), error)
                continue
            out = run()
            assert out.dtype == want.dtype, context
            pending.append((out.to_torch_async(), want, context))
    for future, want, context in pending:
        compare(future.get(), want, name not in _ROUNDED, context)


def _torch_with_number(ref: Any, x: torch.Tensor, number: Any, first: bool) -> torch.Tensor:
    """torch with the number where its function takes one, else with the number's 0-d tensor
    (in torch's dtype for it: int64, the default float, bool)."""
    try:
        return ref(number, x) if first else ref(x, number)
    except TypeError:
        zero_dim = torch.tensor(number)
        return ref(zero_dim, x) if first else ref(x, zero_dim)


def test_edge_values(graph: dtorch.Graph) -> None:
    """torch's special cases, bit for bit: fmod's sign and its 0, inf and NaN divisors; gcd
    and lcm of huge, negative and zero integers (int64's extremes wrap as in torch); copysign
    of -0.0 and NaN; heaviside at 0 and NaN; float_power of negative bases; nextafter at the
    extremes; ldexp that overflows; clamp bounds of NaN; the special functions' poles."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    inf, nan, big = float("inf"), float("nan"), 2**62
    lo = -(2**63)
    floats = torch.tensor([-7.5, 7.5, -0.0, 0.0, inf, -inf, nan, 1e-45, 3.0, -3.0])
    divisors = torch.tensor([2.0, -2.0, 0.0, -0.0, 2.0, inf, 1.0, -inf, nan, 0.0])
    ints = torch.tensor([-7, 7, 0, 0, big, -big, lo, lo, 2**63 - 1, 12])
    others = torch.tensor([3, -3, 5, 0, big // 2, 6 * 2**40, 0, -1, 3, 2**40])
    f, d = place(floats, mesh, [S0], graph), place(divisors, mesh, [S0], graph)
    i, o = place(ints, mesh, [S0], graph), place(others, mesh, [R], graph)
    e = place(torch.tensor(200), mesh, [R], graph)
    cases: list[tuple[str, Any, torch.Tensor]] = [
        ("fmod", dtorch.fmod(f, d), torch.fmod(floats, divisors)),
        ("fmod int", dtorch.fmod(i, 5), torch.fmod(ints, 5)),
        ("fmod -int", dtorch.fmod(i, -3), torch.fmod(ints, -3)),
        ("gcd", dtorch.gcd(i, o), torch.gcd(ints, others)),
        ("lcm", dtorch.lcm(i, o), torch.lcm(ints, others)),
        ("gcd int32", dtorch.gcd(i.int(), o.int()), torch.gcd(ints.int(), others.int())),
        ("copysign", dtorch.copysign(d, f), torch.copysign(divisors, floats)),
        ("heaviside", dtorch.heaviside(f, d), torch.heaviside(floats, divisors)),
        ("float_power", dtorch.float_power(f, d), torch.float_power(floats, divisors)),
        ("float_power 0", dtorch.float_power(d, -1), torch.float_power(divisors, -1)),
        ("nextafter", dtorch.nextafter(f, d), torch.nextafter(floats, divisors)),
        ("ldexp", dtorch.ldexp(f, e), torch.ldexp(floats, torch.tensor(200))),
        ("clamp_min nan", dtorch.clamp_min(f, nan), torch.clamp_min(floats, nan)),
        ("clamp_max t", dtorch.clamp_max(f, d), torch.clamp_max(floats, divisors)),
        ("true_divide", dtorch.true_divide(i, o), torch.true_divide(ints, others)),
        ("lgamma", dtorch.lgamma(d), torch.lgamma(divisors)),
        ("digamma", dtorch.digamma(f), torch.digamma(floats)),
        ("i0", dtorch.i0(f), torch.i0(floats)),
        ("sinc", dtorch.sinc(f), torch.sinc(floats)),
        ("signbit", dtorch.signbit(d), torch.signbit(divisors)),
        ("signbit int", dtorch.signbit(i), torch.signbit(ints)),
    ]  # fmt: skip
    transcendental = ("float_power", "lgamma", "digamma", "i0", "sinc")
    for context, out, want in cases:
        compare(out.to_torch(), want, not context.startswith(transcendental), context)
    lgamma_poles = torch.tensor([-2.0, -1.0, 0.0, 1.0])
    compare(dtorch.lgamma(place(lgamma_poles, mesh, [S0], graph)).to_torch(),
            torch.lgamma(lgamma_poles), False, "lgamma poles")  # fmt: skip


def test_integer_division_by_zero(graph: dtorch.Graph) -> None:
    """An integer ``fmod`` by the number 0 is refused at the call (torch's ZeroDivisionError),
    by a tensor holding 0 when the value is fetched; floats give NaN."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    ints = torch.tensor([5, -5, 3])
    t = place(ints, mesh, [S0], graph)
    with pytest.raises(dtorch.DTorchError, match=r"^fmod: ZeroDivisionError"):
        dtorch.fmod(t, 0)
    with pytest.raises(dtorch.DTorchError, match=r"ZeroDivisionError"):
        t.fmod(place(torch.tensor([1, 0, 2]), mesh, [S0], graph)).to_torch()
    compare(t.float().fmod(0).to_torch(), torch.fmod(ints.float(), 0), True, "float")


def test_empty_integer_division_by_zero_is_empty(graph: dtorch.Graph) -> None:
    """torch divides none of an empty integer tensor's elements: ``fmod``, ``%``, ``//`` and
    ``div`` with a rounding mode by the number 0 give an empty tensor (a non-empty one is
    refused, above)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    for shape, dtype in (((0,), torch.int64), ((2, 0), torch.int32)):
        empty = torch.ones(shape, dtype=dtype)
        t = place(empty, mesh, [R], graph)
        for got, want in (
            (dtorch.fmod(t, 0), torch.fmod(empty, 0)),
            (t % 0, empty % 0),
            (t // 0, empty // 0),
            (dtorch.div(t, 0, rounding_mode="trunc"), torch.div(empty, 0, rounding_mode="trunc")),
        ):
            out = got.to_torch()
            assert out.dtype == want.dtype and out.shape == want.shape


def test_integer_partial_deg2rad_says_why(graph: dtorch.Graph) -> None:
    """deg2rad is linear, but an integer Partial's parts converted to float one by one are
    not: the refusal says so (the dtypes), not only that the operator is not linear."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    ints = place(torch.tensor([180, 90]), mesh, [P], graph)
    for call in (ints.deg2rad, lambda: dtorch.rad2deg(ints), lambda: ints * 0.5):
        with pytest.raises(PlacementError) as refused:
            call()
        text = str(refused.value)
        assert "torch.float32" in text and "Partial torch.int64" in text, text
        assert "accepted" in text and "redistribute" in text, text


def test_partial(graph: dtorch.Graph) -> None:
    """The linear ones keep a Partial (``negative``, ``deg2rad``, ``rad2deg`` and ``positive``,
    which is the input) where its dtype converts linearly (not int64 to float32); every
    other operator refuses it with a message naming the operator the user called."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    full = torch.randn((4, 3), generator=_G)
    p, s = place(full, mesh, [S0, P], graph), place(full, mesh, [S0, S1], graph)
    for out, want in ((p.negative(), -full), (p.deg2rad(), full.deg2rad()),
                      (dtorch.rad2deg(p), full.rad2deg())):  # fmt: skip
        assert out.placements == [S0, P]
        compare(out.to_torch(), want, False, "linear")
    assert dtorch.positive(p) is p
    ints = place(torch.arange(12).reshape(4, 3), mesh, [S0, P], graph)
    with pytest.raises(PlacementError, match=r"^deg2rad: got \(S\(0\), P\)"):
        ints.deg2rad()
    assert ints.negative().placements == [S0, P]
    refusals: list[tuple[str, Callable[[], Any]]] = [
        ("lgamma", p.lgamma),
        ("signbit", lambda: dtorch.signbit(p)),
        ("logit", lambda: p.logit(eps=0.1)),
        ("fmod", lambda: p.fmod(2)),
        ("copysign", lambda: dtorch.copysign(s, p)),
        ("float_power", lambda: p.float_power(2)),
        ("clamp_min", lambda: p.clamp_min(0.0)),
        ("clamp_max", lambda: dtorch.clamp_max(p, s)),
        ("true_divide", lambda: dtorch.true_divide(s, p)),
    ]
    for name, run in refusals:
        with pytest.raises(PlacementError, match=rf"^{name}: got .*P.*accepted"):
            run()


def test_refusals(graph: dtorch.Graph) -> None:
    """Arguments torch refuses, refused at the call and named: heaviside of mixed dtypes or
    a number, gcd of floats, a number first where a tensor is clamped, a bound that is
    neither a number nor a tensor, positive of bools."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    f = place(torch.randn(4, generator=_G), mesh, [S0], graph)
    i = place(torch.arange(4), mesh, [S0], graph)
    bad: list[tuple[type[Exception], str, Callable[[], Any]]] = [
        (DtypeError, r"^heaviside: torch rejects these dtypes.*different dtypes",
         lambda: dtorch.heaviside(f, f.double())),
        (TypeError, r"^heaviside: values must be a tensor, got float", lambda: f.heaviside(0.5)),
        (DtypeError, r"^gcd: torch rejects these dtypes.*gcd_cpu", lambda: dtorch.gcd(f, i)),
        (DtypeError, r"^lcm: torch rejects these dtypes", lambda: i.lcm(2.5)),
        (DtypeError, r"^nextafter: torch rejects these dtypes", lambda: dtorch.nextafter(i, i)),
        (TypeError, r"^clamp_min: input must be a dtorch.Tensor", lambda: dtorch.clamp_min(2, f)),
        (TypeError, r"^clamp_max: the bound must be a number or a tensor, got str",
         lambda: f.clamp_max("1")),
        (DtypeError, r"^positive: The `\+` operator, on a bool tensor",
         lambda: dtorch.positive(i > 0)),
        (DtypeError, r"^frac: .*frac_cpu", i.frac),
    ]  # fmt: skip
    for error, pattern, run in bad:
        with pytest.raises(error, match=pattern):
            run()


#: in-place method, its arguments (a function of the placed or full operands), its keywords.
_PLAIN_INPLACE = [
    "lgamma_", "digamma_", "i0_", "sinc_", "deg2rad_", "rad2deg_", "asinh_", "arcsinh_",
    "acosh_", "arccosh_", "negative_", "frac_",
]  # fmt: skip
_INPLACE: list[tuple[str, Callable[..., tuple[Any, ...]], dict[str, Any]]] = [
    (name, lambda o: (), {}) for name in _PLAIN_INPLACE
] + [
    ("erfinv_", lambda o: (), {}),
    ("atanh_", lambda o: (), {}),
    ("arctanh_", lambda o: (), {}),
    ("logit_", lambda o: (), {}),
    ("logit_", lambda o: (), {"eps": 0.2}),
    ("fmod_", lambda o: (o["row"],), {}),
    ("fmod_", lambda o: (1.5,), {}),
    ("copysign_", lambda o: (o["row"],), {}),
    ("copysign_", lambda o: (-1,), {}),
    ("heaviside_", lambda o: (o["row"],), {}),
    ("true_divide_", lambda o: (o["full"],), {}),
    ("logical_xor_", lambda o: (o["row"],), {}),
    ("nextafter_", lambda o: (o["full"],), {}),
    ("ldexp_", lambda o: (o["exponent"],), {}),
    ("clamp_min_", lambda o: (o["row"],), {}),
    ("clamp_min_", lambda o: (0.25,), {}),
    ("clamp_max_", lambda o: (o["full"],), {}),
    ("clamp_max_", lambda o: (-0.25,), {}),
]


#: The in-place forms whose domain is about [-1, 1].
_UNIT_INPLACE = {"erfinv_", "atanh_", "arctanh_", "logit_"}


@pytest.mark.parametrize("layout", [[S0], [S1]])
def test_in_place_changes_aliases_and_views(layout: list[Any], graph: dtorch.Graph) -> None:
    """``t.op_(...)`` returns ``t``, holds torch's values in ``t``, in an alias and in a view
    taken before; ``t``'s placements unchanged."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    fulls = {
        "row": torch.randn(3, generator=_G), "full": torch.rand(4, 3, generator=_G) + 0.5,
        "exponent": torch.tensor([2, -1, 0]),
    }  # fmt: skip
    operands: dict[str, Any] = {k: place(v, mesh, [R], graph) for k, v in fulls.items()}
    index = (slice(None), slice(1, None)) if layout == [S0] else (slice(1, None),)
    for name, args, kwargs in _INPLACE:
        full = _unit(4, 3) if name in _UNIT_INPLACE else _special(4, 3)
        want = full.clone()
        getattr(want, name)(*args(fulls), **kwargs)
        t = place(full, mesh, layout, graph)
        alias, view = t, t[index]
        assert getattr(t, name)(*args(operands), **kwargs) is t, name
        assert t.placements == layout, name
        context = f"{name} on {layout}"
        compare(alias.to_torch(), want, False, context)
        compare(view.to_torch(), want[index], False, context)


def test_in_place_integers_and_refusals(graph: dtorch.Graph) -> None:
    """Integer in-place forms (``gcd_``, ``lcm_``, ``fmod_``) and torch's refusals at the
    call, the tensor unchanged: a result dtype that does not cast back (``lgamma_`` of
    int64), ``float_power_`` of anything but float64 (whose own form works)."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    ints = torch.tensor([12, -18, 0, 7, 30, -4])
    t = place(ints, mesh, [S0], graph)
    for name, arg in (("gcd_", 8), ("lcm_", 6), ("fmod_", -5)):
        want = ints.clone()
        getattr(want, name)(torch.tensor(arg))
        out = place(ints, mesh, [S0], graph)
        assert getattr(out, name)(arg) is out
        compare(out.to_torch(), want, True, name)
    for name in ("lgamma_", "deg2rad_", "copysign_"):
        args = (1,) if name == "copysign_" else ()
        with pytest.raises(DtypeError, match=rf"^{name}: result type torch.float32 can't be cast"):
            getattr(t, name)(*args)
    f = place(ints.float(), mesh, [S0], graph)
    with pytest.raises(DtypeError, match=r"^float_power_: the base given to float_power_ has"):
        f.float_power_(2)
    assert torch.equal(t.to_torch(), ints) and torch.equal(f.to_torch(), ints.float())
    d = place(ints.double(), mesh, [S0], graph)
    assert d.float_power_(place(torch.tensor(0.5), mesh, [R], graph)) is d
    compare(d.to_torch(), ints.double().float_power(0.5), False, "float_power_")


#: One-tensor operators of a transposed tensor, as ``fn(module, t)`` for torch and dtorch:
#: torch keeps the transposed order (``fmod``, ``lgamma``, ``float_power(t, 2)``) or makes a
#: row-major result (``float_power(2, t)``, through ``pow`` of a number).
_ORDERS: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("fmod", lambda m, t: m.fmod(t.T, 2)),
    ("lgamma", lambda m, t: m.lgamma(t.T)),
    ("float_power", lambda m, t: m.float_power(t.T, 2)),
    ("float_power first", lambda m, t: m.float_power(2, t.T)),
]


@pytest.mark.parametrize(("name", "fn"), _ORDERS, ids=[c[0] for c in _ORDERS])
def test_memory_order(name: str, fn: Callable[[Any, Any], Any], graph: dtorch.Graph) -> None:
    """``y = f(t.T)``: ``y.T.contiguous()`` is ``y`` itself where torch keeps the transposed
    order (writes through it reach ``y``) and a copy where torch's result is row-major."""
    full = torch.arange(6.0).reshape(2, 3) / 7
    y_want = fn(torch, full)
    y_want.T.contiguous().add_(100)
    for mesh_shape, placements in (((2,), [S0]), ((3,), [S1]), ((2,), [R])):
        mesh = dtorch.init_device_mesh("cpu", mesh_shape)
        y = fn(dtorch, place(full, mesh, placements, graph))
        y.T.contiguous().add_(100)
        compare(y.to_torch(), y_want, False, f"{name} on {mesh_shape} {placements}")
