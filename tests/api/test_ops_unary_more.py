"""More unary math through the public API against torch: ``sign sgn erf erfc expm1 log1p
trunc fix tan atan arctan acos arccos sinh cosh exp2 isfinite isposinf isneginf ceil`` and
``nan_to_num`` as methods and ``dtorch.*`` functions, on 1-D, 2-D and 3-D meshes (every
layout of a 1-D mesh, a seeded sample of the larger ones), with torch's dtypes and refusals;
none of them keeps a Partial. Then the in-place forms (``exp_``, ``sign_``, ``lerp_``, ...):
the tensor's own values change (aliases and views see them), its layout stays, and torch's
refusals (``exp_`` of an integer tensor) change nothing."""

from __future__ import annotations

from collections.abc import Callable
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
    expect_refusal,
    place,
    run_api,
)
from tests.simulate import layout_combos

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(47)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(47)


def _special(*shape: int) -> torch.Tensor:
    """Values in (-3, 3) with zeros, halves, infinities and a NaN."""
    x = torch.randn(shape, generator=_G) * 1.5
    x.view(-1)[:6] = torch.tensor([0.0, 0.5, -2.5, float("inf"), -float("inf"), float("nan")])
    return x


def _method(name: str) -> Callable[[Any], Any]:
    return lambda t: getattr(t, name)()


#: name in messages, method name, dtorch function name (or None), torch reference, exact.
_MATH: list[tuple[str, str, str | None, Callable[..., Any], bool]] = [
    ("sign", "sign", "sign", torch.sign, True),
    ("sgn", "sgn", "sgn", torch.sgn, True),
    ("erf", "erf", "erf", torch.erf, False),
    ("erfc", "erfc", "erfc", torch.erfc, False),
    ("expm1", "expm1", "expm1", torch.expm1, False),
    ("log1p", "log1p", "log1p", torch.log1p, False),
    ("trunc", "trunc", "trunc", torch.trunc, True),
    ("trunc", "fix", "fix", torch.fix, True),
    ("tan", "tan", "tan", torch.tan, False),
    ("atan", "atan", "atan", torch.atan, False),
    ("atan", "arctan", "arctan", torch.arctan, False),
    ("acos", "acos", "acos", torch.acos, False),
    ("acos", "arccos", "arccos", torch.arccos, False),
    ("sinh", "sinh", "sinh", torch.sinh, False),
    ("cosh", "cosh", "cosh", torch.cosh, False),
    ("exp2", "exp2", "exp2", torch.exp2, False),
    ("isfinite", "isfinite", "isfinite", torch.isfinite, True),
    ("isposinf", "isposinf", "isposinf", torch.isposinf, True),
    ("isneginf", "isneginf", "isneginf", torch.isneginf, True),
    ("ceil", "ceil", "ceil", torch.ceil, True),
    ("nan_to_num", "nan_to_num", "nan_to_num", torch.nan_to_num, True),
]
_ND = [m for m in ALL_MESHES if len(m) > 1]


def _meshes(i: int) -> list[tuple[int, ...]]:
    """A 1-D mesh and one of the N-D meshes, taken in turn: every mesh is met by some op."""
    return [ALL_MESHES[i % 2], _ND[i % len(_ND)]]


@pytest.mark.parametrize(("i", "case"), list(enumerate(_MATH)), ids=[c[1] for c in _MATH])
def test_math_layouts(i: int, case: tuple[Any, ...], graph: dtorch.Graph) -> None:
    """Method and function on every layout of a 1-D mesh (a sample of 8 on an N-D one) of
    an uneven 2-D input with NaN and infinities; shards kept, Partial refused (its layouts
    get finite values, so that the refusal is the only possible outcome)."""
    name, method, function, ref, exact = case
    x = _special(5, 3)
    table: dict[tuple[Any, ...], Any] = {(p,): p for p in choices(2, partial=False)}
    calls = [_method(method), getattr(dtorch, function)] if function else [_method(method)]
    for mesh_shape in _meshes(i):
        combos = layout_combos(len(mesh_shape), [x], limit=8 if len(mesh_shape) > 1 else 99)
        finite = x.nan_to_num(0.0, 0.0, 0.0)
        for call in calls:
            for values, layouts in ((x, [c for c in combos if P not in c[0]]), (finite, combos)):
                run_api(
                    graph, name, call, [values], mesh_shape, [ref(values)], table=table,
                    exact=exact, combos=layouts,
                )  # fmt: skip


_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool]


@pytest.mark.parametrize("dtype", _DTYPES)
def test_math_dtypes(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """Every operator on every dtype: torch's dtype and values (integers promote to a float
    where torch promotes them), or torch's refusal at the call (``trunc`` of bool)."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.randn((7, 2), generator=_G) * 3
    x = x > 0 if dtype == torch.bool else x.to(dtype)
    t = place(x, mesh, [S0, S1], graph)
    for name, method, _, ref, exact in _MATH:
        try:
            want = ref(x)
        except RuntimeError as error:
            expect_refusal(lambda method=method: getattr(t, method)(), error)
            continue
        out = getattr(t, method)()
        assert out.dtype == want.dtype and out.placements == [S0, S1], name
        compare(out.to_torch(), want, exact or not want.is_floating_point(), name)


def test_nan_to_num_arguments(graph: dtorch.Graph) -> None:
    """Explicit replacements, numbers that do not fit the dtype (torch's cast: +inf in
    float16), integer tensors copied, and a bad replacement named."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = _special(6, 2)
    t = place(x, mesh, [S0], graph)
    for kwargs in (
        {"nan": 1.5, "posinf": 9, "neginf": -9.0},
        {"nan": None},
        {"posinf": 1e10},
        {"posinf": 1e300, "neginf": -1e300, "nan": 1e39},  # inf in float32, as torch casts
    ):
        compare(t.nan_to_num(**kwargs).to_torch(), x.nan_to_num(**kwargs), True, str(kwargs))
    half = place(x.half(), mesh, [S0], graph)
    compare(dtorch.nan_to_num(half, posinf=1e10).to_torch(), x.half().nan_to_num(posinf=1e10),
            True, "float16")  # fmt: skip
    ints = torch.arange(-3, 3)
    out = place(ints, mesh, [P], graph).nan_to_num()
    assert out.placements == [P] and torch.equal(out.to_torch(), ints)
    with pytest.raises(TypeError, match=r"^nan_to_num: posinf must be a number .*got str"):
        t.nan_to_num(posinf="inf")
    z = torch.complex(x, x.flip(0))  # each part replaced on its own (it was left untouched)
    c = place(z, mesh, [S0], graph)
    for kwargs in ({}, {"nan": 0.5, "posinf": 7.0}):
        compare(
            c.nan_to_num(**kwargs).to_torch(), z.nan_to_num(**kwargs), True, f"complex {kwargs}"
        )
    c.nan_to_num_(neginf=-3.0)
    compare(c.to_torch(), z.nan_to_num(neginf=-3.0), True, "complex in place")


def test_partial_is_refused(graph: dtorch.Graph) -> None:
    """None of these is linear: a Partial input is refused as ``exp`` refuses it, with a
    message naming the operator the user called (``nan_to_num``, not its parts)."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    t = place(torch.randn((4, 3), generator=_G), mesh, [S0, P], graph)
    for name, method, *_ in _MATH:
        with pytest.raises(PlacementError) as info:
            getattr(t, method)()
        text = str(info.value)
        assert text.startswith(f"{name}: got (S(0), P) on mesh (2, 2); accepted"), text
        assert "R -> R, S(i) -> S(i)" in text and "mesh dim 1 is P" in text
    assert (-t).placements == [S0, P]  # neg, the linear one, keeps it


_UNARY_INPLACE = (
    "neg_ reciprocal_ exp_ exp2_ expm1_ log_ log2_ log10_ log1p_ sqrt_ rsqrt_ square_ abs_ "
    "sign_ sgn_ round_ floor_ ceil_ trunc_ fix_ sin_ cos_ tan_ asin_ acos_ arccos_ atan_ "
    "arctan_ sinh_ cosh_ erf_ erfc_ relu_ sigmoid_ tanh_ nan_to_num_ logical_not_"
)
#: in-place method, its arguments (a function of the placed or full operands), its keywords.
_INPLACE: list[tuple[str, Callable[..., tuple[Any, ...]], dict[str, Any]]] = [
    (name, lambda o: (), {}) for name in _UNARY_INPLACE.split()
] + [
    ("round_", lambda o: (), {"decimals": 1}),
    ("nan_to_num_", lambda o: (), {"nan": 2.0, "posinf": 5.0}),
    ("atan2_", lambda o: (o["row"],), {}),
    ("arctan2_", lambda o: (o["two"],), {}),
    ("hypot_", lambda o: (o["row"],), {}),
    ("xlogy_", lambda o: (o["full"],), {}),
    ("lerp_", lambda o: (o["full"], 0.75), {}),
    ("lerp_", lambda o: (o["row"], o["weight"]), {}),
    ("addcmul_", lambda o: (o["full"], o["row"]), {"value": 0.5}),
    ("addcdiv_", lambda o: (o["row"], o["full"]), {"value": 2}),
    ("addmm_", lambda o: (o["full"], o["square"]), {"beta": 0.5}),
]


@pytest.mark.parametrize("layout", [[S0], [S1]])
def test_in_place_changes_aliases_and_views(layout: list[Any], graph: dtorch.Graph) -> None:
    """``t.op_(...)`` returns ``t``, holds torch's values in ``t``, in an alias and in a view
    taken before; ``t``'s placements unchanged."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = _special(4, 3).nan_to_num(0.0)  # infinities only where nan_to_num_ meets them
    full[0, :2] = torch.tensor([float("inf"), float("nan")])
    fulls = {
        "row": torch.randn(3, generator=_G), "weight": torch.rand(3, generator=_G),
        "full": torch.rand(4, 3, generator=_G) + 0.5, "square": torch.randn(3, 3, generator=_G),
    }  # fmt: skip
    operands: dict[str, Any] = {k: place(v, mesh, [R], graph) for k, v in fulls.items()}
    fulls["two"], operands["two"] = torch.tensor(2.0), 2.0  # a number (torch takes a tensor)
    index = (slice(None), slice(1, None)) if layout == [S0] else (slice(1, None),)
    for name, args, kwargs in _INPLACE:
        want = full.clone()
        getattr(want, name)(*args(fulls), **kwargs)
        t = place(full, mesh, layout, graph)
        alias, view = t, t[index]
        assert getattr(t, name)(*args(operands), **kwargs) is t, name
        assert t.placements == layout, name
        context = f"{name} on {layout}"
        compare(alias.to_torch(), want, False, context)
        compare(view.to_torch(), want[index], False, context)


def test_in_place_refusals(graph: dtorch.Graph) -> None:
    """torch's refusals at the call, the tensor unchanged: a result dtype that does not cast
    back (``exp_`` of int64; ``sign_`` of bool is fine), ``bitwise_not_`` of a float, a
    Partial where the operator is not linear."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    ints = torch.arange(-3, 3)
    t = place(ints, mesh, [S0], graph)
    for name in ("exp_", "sqrt_", "erf_", "atan_", "sigmoid_"):
        with pytest.raises(DtypeError, match=rf"^{name}: result type torch.float32 can't be cast"):
            getattr(t, name)()
    with pytest.raises(DtypeError, match=r"^lerp_: torch rejects these dtypes"):
        t.lerp_(t, 0.5)
    assert torch.equal(t.to_torch(), ints)
    flags = place(ints > 0, mesh, [S0], graph)
    assert torch.equal(flags.sign_().to_torch(), (ints > 0).sign())
    assert torch.equal(t.bitwise_not_().to_torch(), ~ints)
    with pytest.raises(TypeError, match=r"integer and bool tensors, got torch\.float32"):
        place(ints.float(), mesh, [S0], graph).bitwise_not_()
    partial = place(ints.double(), mesh, [P], graph)
    with pytest.raises(PlacementError, match=r"^sign_: got \(P,\)"):
        partial.sign_()
    assert partial.neg_().placements == [P]
    assert torch.equal(partial.to_torch(), -ints.double())
