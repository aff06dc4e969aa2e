"""Unary math and activations through the public API against torch: methods, ``dtorch.*``
functions and ``dtorch.nn.functional``, on 1-D, 2-D and 3-D meshes, even and uneven shards,
every layout on 1-D meshes (a seeded sample on the larger ones), with dtypes where torch
accepts them, the output placements (Partial kept by ``neg`` only) and the rejections."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import PlacementError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    P,
    R,
    choices,
    expect_refusal,
    limit_for,
    place,
    run_api,
)
from tests.simulate import layout_combos

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(31)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(31)


def _special(*shape: int) -> torch.Tensor:
    """Values in (-3, 3) with zeros, halves (round's ties), infinities and a NaN."""
    x = torch.randn(shape, generator=_G) * 1.5
    flat = x.view(-1)
    flat[:6] = torch.tensor([0.0, 0.5, -2.5, float("inf"), -float("inf"), float("nan")])
    return x


#: name, method call, dtorch function (or None), torch reference, exact.
_MATH: list[tuple[str, Callable[..., Any], Callable[..., Any] | None, Callable[..., Any], bool]] = [
    ("neg", lambda t: t.neg(), dtorch.neg, torch.neg, True),
    ("neg", lambda t: -t, None, torch.neg, True),
    ("reciprocal", lambda t: t.reciprocal(), dtorch.reciprocal, torch.reciprocal, True),
    ("exp", lambda t: t.exp(), dtorch.exp, torch.exp, False),
    ("log", lambda t: t.log(), dtorch.log, torch.log, False),
    ("log2", lambda t: t.log2(), dtorch.log2, torch.log2, False),
    ("log10", lambda t: t.log10(), dtorch.log10, torch.log10, False),
    ("sqrt", lambda t: t.sqrt(), dtorch.sqrt, torch.sqrt, True),
    ("rsqrt", lambda t: t.rsqrt(), dtorch.rsqrt, torch.rsqrt, False),
    ("square", lambda t: t.square(), dtorch.square, torch.square, True),
    ("abs", lambda t: t.abs(), dtorch.abs, torch.abs, True),
    ("abs", abs, None, torch.abs, True),
    ("round", lambda t: t.round(), dtorch.round, torch.round, True),
    ("floor", lambda t: t.floor(), dtorch.floor, torch.floor, True),
    ("ceil", lambda t: t.ceil(), None, torch.ceil, True),
    ("sin", lambda t: t.sin(), dtorch.sin, torch.sin, False),
    ("cos", lambda t: t.cos(), dtorch.cos, torch.cos, False),
    ("asin", lambda t: t.asin(), dtorch.asin, torch.asin, False),
    ("isinf", lambda t: t.isinf(), dtorch.isinf, torch.isinf, True),
    ("isnan", lambda t: t.isnan(), dtorch.isnan, torch.isnan, True),
]


def _unary_table(ndim: int, partial: bool) -> dict[tuple[Any, ...], Any]:
    """One mesh dim: a shard stays a shard of the same dim; Partial only where linear."""
    table: dict[tuple[Any, ...], Any] = {(p,): p for p in choices(ndim, partial=False)}
    return {**table, (P,): P} if partial else table


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "method", "function", "ref", "exact"), _MATH)
def test_math_every_layout(  # type: ignore[no-untyped-def]
    name, method, function, ref, exact, mesh_shape, graph
) -> None:
    """The method (and the ``dtorch.*`` function) on every layout of a 2-D and a 3-D input,
    with NaN and infinities in the values (none under a Partial layout: ``inf - inf``)."""
    inputs = [_special(5, 3), _special(2, 3, 4)] if len(mesh_shape) == 1 else [_special(7, 3)]
    calls = [method] if function is None else [method, function]
    for x in inputs:
        table = _unary_table(x.ndim, name == "neg")
        combos = layout_combos(len(mesh_shape), [x], limit=limit_for(mesh_shape, n_d=16))
        finite = x.nan_to_num(0.0, 0.0, 0.0)
        cases = [
            (x, [c for c in combos if P not in c[0]]),
            (finite, [c for c in combos if P in c[0]]),
        ]
        for call in calls:
            for values, layouts in cases:
                run_api(
                    graph, name, call, [values], mesh_shape, [ref(values)], table=table,
                    exact=exact, combos=layouts,
                )  # fmt: skip


_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool]


def _typed(dtype: torch.dtype) -> torch.Tensor:
    x = torch.randn((7, 2), generator=_G) * 3
    if dtype == torch.bool:
        return x > 0
    return x.to(dtype)


@pytest.mark.parametrize("dtype", _DTYPES)
def test_math_dtypes(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """Every unary operator on every dtype: torch's dtype and values, or torch's refusal at
    the call (``neg`` of bool, ``abs`` of bool, ...)."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = _typed(dtype)
    t = place(x, mesh, [S0, S1], graph)
    for name, method, _, ref, exact in _MATH:
        try:
            want = ref(x)
        except RuntimeError as error:
            expect_refusal(lambda method=method: method(t), error)
            continue
        out = method(t)
        assert out.dtype == want.dtype and out.placements == [S0, S1], name
        got = out.to_torch()
        if exact or not want.is_floating_point():
            assert torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0)), name
        else:
            torch.testing.assert_close(got, want, equal_nan=True, msg=name)


_ACTIVATIONS: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
    ("relu", lambda t: t.relu(), torch.relu),
    ("relu", dtorch.relu, torch.relu),
    ("relu", DF.relu, F.relu),
    ("gelu", DF.gelu, F.gelu),
    ("gelu", lambda t: DF.gelu(t, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh")),
    ("silu", DF.silu, F.silu),
    ("sigmoid", lambda t: t.sigmoid(), torch.sigmoid),
    ("sigmoid", dtorch.sigmoid, torch.sigmoid),
    ("sigmoid", DF.sigmoid, F.sigmoid),
    ("tanh", lambda t: t.tanh(), torch.tanh),
    ("tanh", dtorch.tanh, torch.tanh),
    ("tanh", DF.tanh, F.tanh),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "call", "ref"), _ACTIVATIONS)
def test_activations_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, mesh_shape, graph
) -> None:
    """Activations keep shards and never accept Partial (none of them is linear)."""
    x = torch.randn((5, 3), generator=_G) * 2
    table = _unary_table(2, partial=False)
    accepted = run_api(
        graph, name, call, [x], mesh_shape, [ref(x)], table=table, exact=name == "relu",
        limit=limit_for(mesh_shape, n_d=16),
    )  # fmt: skip
    assert len(accepted) == 3 ** len(mesh_shape) or len(mesh_shape) > 1


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.int64])
def test_activation_dtypes(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = _typed(dtype)
    t = place(x, mesh, [S0], graph)
    for name, call, ref in _ACTIVATIONS:
        try:
            want = ref(x)
        except RuntimeError as error:
            expect_refusal(lambda call=call: call(t), error)
            continue
        out = call(t)
        assert out.dtype == want.dtype, name
        torch.testing.assert_close(out.to_torch(), want, msg=name)


def test_rejections(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    t = place(torch.randn((4, 3), generator=_G), mesh, [S0, P], graph)
    with pytest.raises(PlacementError) as info:
        t.exp()
    text = str(info.value)
    assert text.startswith("exp: got (S(0), P) on mesh (2, 2); accepted per mesh dimension: ")
    assert "R -> R, S(i) -> S(i)" in text and "mesh dim 1 is P" in text
    with pytest.raises(PlacementError, match=r"^gelu: got \(S\(0\), P\).*accepted"):
        DF.gelu(t)
    with pytest.raises(PlacementError, match=r"^relu: got \(S\(0\), P\).*accepted"):
        dtorch.relu(t)
    assert (-t).placements == [S0, P]
    with pytest.raises(ValueError, match="approximate"):
        DF.gelu(t, approximate="erf")
    with pytest.raises(TypeError, match="bool"):
        _ = ~place(torch.ones(2), mesh, [R, R], graph)
