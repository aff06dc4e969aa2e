"""torch.nn.functional's remaining activations against torch: ``softplus``, ``logsigmoid``,
``hardswish``, ``hardsigmoid``, ``mish``, ``selu``, ``celu``, ``softsign``, ``tanhshrink``,
``hardshrink``, ``softshrink``, ``threshold`` on every layout (shards and Replicate kept,
Partial refused, values bit-equal to torch's), their ``inplace=`` forms, dtypes and torch's
refusals (dtypes, numbers, non-numbers); ``softmin`` with torch's signature; the top-level
``dtorch.selu``/``celu``/``threshold``/``hardshrink`` and ``Tensor.hardshrink``. 1-D, 2-D
and 3-D meshes, even and uneven, thread and process mode."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import ParamError, PlacementError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    P,
    R,
    compare,
    expect_refusal,
    limit_for,
    place,
    run_api,
)

pytestmark = pytest.mark.timeout(120)

_X = torch.randn((5, 3), generator=torch.Generator().manual_seed(5)) * 3
_TABLE = {(R,): R, (S0,): S0, (S1,): S1}

Case = tuple[str, Callable[..., Any], Callable[..., Any]]

#: (operator name, dtorch call, torch call): defaults, then other numbers.
_CASES: list[Case] = [
    ("softplus", DF.softplus, F.softplus),
    ("softplus", lambda t: DF.softplus(t, 2, threshold=1.5), lambda x: F.softplus(x, 2, 1.5)),
    ("logsigmoid", DF.logsigmoid, F.logsigmoid),
    ("hardswish", DF.hardswish, F.hardswish),
    ("hardsigmoid", DF.hardsigmoid, F.hardsigmoid),
    ("mish", DF.mish, F.mish),
    ("selu", DF.selu, F.selu),
    ("celu", DF.celu, F.celu),
    ("celu", lambda t: DF.celu(t, alpha=0.5), lambda x: F.celu(x, alpha=0.5)),
    ("softsign", DF.softsign, F.softsign),
    ("tanhshrink", DF.tanhshrink, F.tanhshrink),
    ("hardshrink", DF.hardshrink, F.hardshrink),
    ("hardshrink", lambda t: DF.hardshrink(t, lambd=2), lambda x: F.hardshrink(x, lambd=2)),
    ("softshrink", DF.softshrink, F.softshrink),
    ("softshrink", lambda t: DF.softshrink(t, 1.5), lambda x: F.softshrink(x, 1.5)),
    ("threshold", lambda t: DF.threshold(t, 0.5, -2.0), lambda x: F.threshold(x, 0.5, -2.0)),
    ("threshold", lambda t: DF.threshold(t, -1, 7), lambda x: F.threshold(x, -1, 7)),
]


#: torch's CPU kernels of these compute the SIMD body and the scalar tail of a float32/64
#: tensor differently (by an ulp): a shard's elements may fall in the other part than in the
#: full tensor, so they are compared within tolerance; the others must be bit-equal.
_ULP = {"softplus", "mish", "selu", "celu"}


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_every_layout(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    limit = limit_for(mesh_shape, n_d=6)
    for seed, (name, call, ref) in enumerate(_CASES):
        exact = name not in _ULP
        accepted = run_api(
            graph, name, call, [_X], mesh_shape, [ref(_X)], table=_TABLE, limit=limit,
            seed=seed, exact=exact,
        )  # fmt: skip
        assert accepted


_INPLACE: list[tuple[Callable[..., Any], Callable[..., Any]]] = [
    (lambda t: DF.hardswish(t, inplace=True), lambda x: F.hardswish(x, inplace=True)),
    (lambda t: DF.hardsigmoid(t, True), lambda x: F.hardsigmoid(x, True)),
    (lambda t: DF.mish(t, inplace=True), lambda x: F.mish(x, inplace=True)),
    (lambda t: DF.selu(t, True), lambda x: F.selu(x, True)),
    (lambda t: DF.celu(t, 2.0, True), lambda x: F.celu(x, 2.0, True)),
    (lambda t: DF.threshold(t, 0.2, 9.0, True), lambda x: F.threshold(x, 0.2, 9.0, True)),
]


def test_inplace_returns_the_input(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    for call, ref in _INPLACE:
        x = _X.clone()
        t = place(x, mesh, [S1, S0], graph)
        assert call(t) is t and t.placements == [S1, S0]
        assert ref(x) is x
        torch.testing.assert_close(t.to_torch(), x, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16, torch.int64])
def test_dtypes(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """torch's result dtypes and values; where torch refuses the dtype, its message."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = (_X * 3).to(dtype)
    t = place(x, mesh, [S0], graph)
    answered = set()
    for name, call, ref in _CASES:
        try:
            want = ref(x)
        except RuntimeError as error:
            expect_refusal(lambda call=call: call(t), error)
            continue
        compare(call(t).to_torch(), want, name not in _ULP, name)
        answered.add(name)
    if dtype == torch.int64:  # the three torch computes on integers
        assert answered == {"softsign", "tanhshrink", "threshold"}
    else:
        assert len(answered) == 12


def test_bool_is_refused_as_torch_refuses_it(graph: dtorch.Graph) -> None:
    x = _X > 0
    t = place(x, dtorch.init_device_mesh("cpu", 2), [S1], graph)
    for _, call, ref in _CASES:
        with pytest.raises(RuntimeError) as error:
            ref(x)
        expect_refusal(lambda call=call: call(t), error.value)


@pytest.mark.parametrize(
    ("call", "ref"),
    [
        (lambda t: DF.celu(t, 0.0), lambda x: F.celu(x, 0.0)),
        (lambda t: DF.softshrink(t, -0.5), lambda x: F.softshrink(x, -0.5)),
        # beyond float16's range
        (lambda t: DF.softshrink(t.half(), 1e5), lambda x: F.softshrink(x.half(), 1e5)),
    ],
)
def test_numbers_torch_refuses(
    call: Callable[..., Any], ref: Callable[..., Any], graph: dtorch.Graph
) -> None:
    t = place(_X, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    with pytest.raises(RuntimeError) as error:
        ref(_X)
    with pytest.raises(ParamError, match=re.escape(str(error.value))):
        call(t)


def test_non_numbers_are_refused(graph: dtorch.Graph) -> None:
    t = place(_X, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    for call in (
        lambda x: DF.softplus(x, "2"),
        lambda x: DF.celu(x, alpha=None),
        lambda x: DF.hardshrink(x, "0.5"),
        lambda x: DF.threshold(x, 0.5, "1"),
    ):
        with pytest.raises(TypeError):
            call(_X)
        with pytest.raises(TypeError, match="must be a number"):
            call(t)


def test_partial_is_refused(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    t = place(_X, mesh, [S0, P], graph)
    for name, call, _ in _CASES:
        with pytest.raises(PlacementError, match=rf"^{name}: got \(S\(0\), P\).*accepted"):
            call(t)


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_softmin_every_layout(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    """Every shard stays, the softmin dim's too (its rows' maxima and sums all-reduced)."""
    limit = limit_for(mesh_shape, n_d=8)
    table = {(R,): R, (S0,): S0, (S1,): S1}  # the softmin dim's shard too (split)
    for dim in (1, 0):
        run_api(
            graph, "softmin", lambda t, d=dim: DF.softmin(t, d), [_X], mesh_shape,
            [F.softmin(_X, dim)], table=table, limit=limit, exact=False,
        )  # fmt: skip


def test_softmin_signature(graph: dtorch.Graph) -> None:
    """torch's ``(input, dim=None, _stacklevel=3, dtype=None)``, its implicit dim and its
    refusals (a bool input cannot be negated, an integer one has no softmax)."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x3 = torch.randn((4, 5, 6), generator=torch.Generator().manual_seed(2))
    t = place(x3, mesh, [S1, R], graph)
    torch.testing.assert_close(
        DF.softmin(t, -1, 3, torch.float64).to_torch(), F.softmin(x3, -1, 3, torch.float64)
    )
    out = DF.softmin(t, dim=2, dtype=torch.bfloat16)
    assert out.placements == [S1, R]
    torch.testing.assert_close(out.to_torch(), F.softmin(x3, dim=2, dtype=torch.bfloat16))
    t0 = place(x3, mesh, [S1, dtorch.Shard(2)], graph)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        want = F.softmin(x3)  # torch's legacy implicit dim: 0 for a 3-D input
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        torch.testing.assert_close(DF.softmin(t0).to_torch(), want)
    for bad in (x3 > 0, x3.long()):  # the last dim: torch names its last-dim kernel
        with pytest.raises(RuntimeError) as error:
            F.softmin(bad, -1)
        expect_refusal(lambda b=bad: DF.softmin(place(b, mesh, [R, R], graph), -1), error.value)
    with pytest.raises(PlacementError, match=r"^softmin: got \(P, R\)"):
        DF.softmin(place(x3, mesh, [P, R], graph), 0)


def test_top_level_forms_and_method(graph: dtorch.Graph) -> None:
    """``torch.selu``/``celu``/``threshold``/``hardshrink`` and ``Tensor.hardshrink`` exist in
    torch; dtorch has them as the same functions."""
    t = place(_X, dtorch.init_device_mesh("cpu", 2), [S1], graph)
    for name in ("selu", "celu", "threshold", "hardshrink"):
        assert hasattr(torch, name) and getattr(dtorch, name) is getattr(DF, name)
    assert torch.equal(dtorch.selu(t).to_torch(), torch.selu(_X))
    assert torch.equal(dtorch.celu(t, 0.3).to_torch(), torch.celu(_X, 0.3))
    assert torch.equal(dtorch.threshold(t, 1, 0).to_torch(), torch.threshold(_X, 1, 0))
    out = t.hardshrink(1.0)
    assert out.placements == [S1] and torch.equal(out.to_torch(), _X.hardshrink(1.0))
    for name in ("softplus", "mish", "softsign", "softmin"):  # not torch's top-level names
        assert not hasattr(torch, name) and not hasattr(dtorch, name)
