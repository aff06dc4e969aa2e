"""``isclose``/``allclose``, ``broadcast_to``, ``linspace`` and ``eye`` against torch: every
layout of 1-D, 2-D and 3-D meshes (even and uneven), infinities and NaN, integer and bool
tensors, torch's refusals; thread and process mode."""

from __future__ import annotations

import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, PlacementError
from tests.api.ops_harness import ALL_MESHES, S0, S1, P, R, limit_for, place, run_api

pytestmark = pytest.mark.timeout(120)

_A = torch.tensor([[1.0, 2.0, float("inf"), float("nan"), 0.0], [5.0, -1.0, 3.0, 1e-9, -0.0]])
_B = torch.tensor(
    [[1.0, 2.05, float("inf"), float("nan"), 1e-9], [5.0 + 1e-6, 1.0, float("-inf"), 0.0, 0.0]]
)
_TABLE = {(R, R): R, (S0, S0): S0, (S1, S1): S1, (R, S0): S0, (S0, R): S0, (R, S1): S1, (S1, R): S1}


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(
    ("rtol", "atol", "equal_nan"), [(1e-5, 1e-8, False), (0.05, 0.0, True), (0.0, 0.0, False)]
)
def test_isclose_every_layout(  # type: ignore[no-untyped-def]
    rtol, atol, equal_nan, mesh_shape, graph
) -> None:
    want = torch.isclose(_A, _B, rtol, atol, equal_nan)
    run_api(
        graph, "isclose", lambda a, b: dtorch.isclose(a, b, rtol, atol, equal_nan), [_A, _B],
        mesh_shape, [want], table=_TABLE, limit=limit_for(mesh_shape, n_d=8),
    )  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.float16, torch.float64])
def test_isclose_and_allclose_of_other_dtypes(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    a, b = (
        (torch.arange(10).reshape(2, 5) % 3).to(dtype),
        (torch.arange(10).reshape(2, 5) % 2).to(dtype),
    )
    x, y = place(a, mesh, [S0, S1], graph), place(b, mesh, [R, S1], graph)
    for kwargs in ({}, {"rtol": 1.0}, {"atol": 1, "rtol": 0}):
        want = torch.isclose(a, b, **kwargs)  # type: ignore[arg-type]
        assert torch.equal(dtorch.isclose(x, y, **kwargs).to_torch(), want), (dtype, kwargs)
        assert dtorch.allclose(x, y, **kwargs) is torch.allclose(a, b, **kwargs)  # type: ignore[arg-type]
        assert torch.equal(x.isclose(y, **kwargs).to_torch(), want)
    assert dtorch.allclose(x, x) and x.allclose(x)


def test_isclose_refusals_follow_torch(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, i = place(_A, mesh, [S0], graph), place(_A.long(), mesh, [S0], graph)
    with pytest.raises(RuntimeError, match="did not match"):
        torch.isclose(_A, _A.long())
    with pytest.raises(DtypeError, match="Float did not match Long"):
        dtorch.isclose(x, i)
    with pytest.raises(ValueError, match="rtol must be greater than or equal to zero, but got -1"):
        dtorch.isclose(x, x, rtol=-1)
    with pytest.raises(PlacementError, match=r"^isclose: got \(P,\)"):
        dtorch.isclose(place(_A, mesh, [P], graph), x)


def test_broadcast_to(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    full = torch.arange(3.0).reshape(3, 1)
    t = place(full, mesh, [S0, R], graph)
    for shape in [(3, 4), (2, 3, 4), (-1, 5)]:
        want = torch.broadcast_to(full, shape)
        for got in (dtorch.broadcast_to(t, shape), t.broadcast_to(shape)):
            assert tuple(got.shape) == tuple(want.shape)
            assert torch.equal(got.to_torch(), want)


def test_linspace_and_eye_however_placed(graph: dtorch.Graph) -> None:
    for mesh_shape, placements in [((2,), [S0]), ((3,), [S0]), ((2, 2), [S0, S1]), ((2,), [R])]:
        mesh = dtorch.init_device_mesh("cpu", mesh_shape)
        ones = [p if p != S1 else R for p in placements]  # linspace has one dim
        for args, kwargs in [
            ((0, 1, 5), {}),
            ((-2.5, 7, 7), {"dtype": torch.float64}),
            ((0, 10, 3), {"dtype": torch.int64}),
        ]:
            got = dtorch.linspace(*args, device_mesh=mesh, placements=ones, **kwargs)
            want = torch.linspace(*args, **kwargs)  # type: ignore[arg-type]
            assert got.dtype == want.dtype and torch.equal(got.to_torch(), want)
        for n, m in [(3, None), (2, 5), (5, 2)]:
            got = dtorch.eye(n, m, device_mesh=mesh, placements=placements)
            want = torch.eye(n, n if m is None else m)
            assert got.placements == placements and torch.equal(got.to_torch(), want)
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        dtorch.linspace(0, 1, -1)
    with pytest.raises(TypeError, match=r"^linspace: its bounds must be numbers"):
        dtorch.linspace(dtorch.tensor(0.0), 1, 3)
    with graph.dtype_guard(torch.float64):
        assert (
            dtorch.linspace(0, 1, 3).dtype == torch.float64 and dtorch.eye(2).dtype == torch.float64
        )


def test_isclose_of_integers_compares_in_the_default_dtype_as_torch(graph: dtorch.Graph) -> None:
    """torch casts integers (and bools) to the default dtype first; dtorch subtracted in the
    integer dtype, which wraps (int8 -128 vs 127 'close' within 1)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    for dtype, a, b, kwargs in [
        (torch.int8, -128, 127, {"atol": 1}),
        (torch.uint8, 0, 2, {"atol": 3}),
        (torch.int32, -(2**31), 2**31 - 1, {"atol": 1}),
        (torch.int64, 2**62, 2**62 + 1, {"atol": 0.5, "rtol": 0}),
    ]:
        x, y = torch.tensor([a, a], dtype=dtype), torch.tensor([b, a], dtype=dtype)
        want = torch.isclose(x, y, **kwargs)  # type: ignore[arg-type]
        got = dtorch.isclose(place(x, mesh, [S0], graph), place(y, mesh, [S0], graph), **kwargs)
        assert torch.equal(got.to_torch(), want), dtype
