"""Search and counting (``searchsorted``, ``bucketize``, ``isin``, ``histc``, ``bincount``,
``unique``, ``unique_consecutive``) through the public API against torch on the full
tensors: 1-D, 2-D and 3-D meshes, even and uneven shards, several dtypes; the output
placements from one-mesh-dim tables (the values keep theirs; a whole table beside them;
histc Partial where sharded; the waiting ones Replicate); refusals at the call."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DTorchError, PlacementError
from tests.api.ops_harness import S0, S1, P, R, limit_for, run_api

pytestmark = pytest.mark.timeout(60)

MESHES = ((2,), (3,), (2, 2), (2, 2, 2))
_G = torch.Generator().manual_seed(11)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(11)


def _rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    # few distinct values, so that ties with the sequence and repeats occur
    return torch.randint(-4, 5, shape, generator=_G).to(dtype)


def _run(
    graph: Any,
    name: str,
    fn: Any,
    fulls: list[torch.Tensor],
    want: Any,
    mesh_shape: tuple[int, ...],
    table: Any,
    n_d: int = 8,
) -> None:
    wants = list(want) if isinstance(want, tuple) else [want]
    limit = limit_for(mesh_shape, one_d=400, n_d=n_d)
    accepted = run_api(graph, name, fn, fulls, mesh_shape, wants, table=table, limit=limit)
    assert accepted, f"{name}: no layout accepted on {mesh_shape}"


_VALUES_KEPT = {(R, R): R, (R, S0): S0, (R, S1): S1}


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_1d(
    right: bool, dtype: torch.dtype, mesh_shape: tuple[int, ...], graph
) -> None:  # type: ignore[no-untyped-def]
    seq, values = _rand(5, dtype=dtype).sort().values, _rand(4, 5, dtype=dtype)
    want = torch.searchsorted(seq, values, right=right)
    fn = lambda s, v: dtorch.searchsorted(s, v, right=right)  # noqa: E731
    _run(graph, "searchsorted", fn, [seq, values], want, mesh_shape, _VALUES_KEPT)


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_searchsorted_nd_out_int32(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    seq, values = _rand(5, 3, dtype=torch.float64).sort(-1).values, _rand(5, 6).double()
    want = torch.searchsorted(seq, values, out_int32=True, side="right")
    fn = lambda s, v: dtorch.searchsorted(s, v, out_int32=True, side="right")  # noqa: E731
    # rows sharded alike (a Replicate sequence chunked so), or the values' last dim
    table = {(R, R): R, (S0, S0): S0, (R, S0): S0, (R, S1): S1}
    _run(graph, "searchsorted", fn, [seq, values], want, mesh_shape, table)


@pytest.mark.parametrize("mesh_shape", [(3,), (2, 2)])
def test_searchsorted_sorter(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    seq, values = _rand(7), _rand(5)
    sorter = seq.argsort()
    want = torch.searchsorted(seq, values, sorter=sorter)
    fn = lambda s, v, o: dtorch.searchsorted(s, v, sorter=o)  # noqa: E731
    table = {(R, R, R): R, (R, S0, R): S0}
    _run(graph, "searchsorted", fn, [seq, values, sorter], want, mesh_shape, table)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_bucketize(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    values, bounds = _rand(3, 5, dtype=dtype), torch.tensor([-2, 0, 1, 3], dtype=dtype)
    want = torch.bucketize(values, bounds, right=True, out_int32=True)
    fn = lambda v, b: dtorch.bucketize(v, b, right=True, out_int32=True)  # noqa: E731
    table = {(R, R): R, (S0, R): S0, (S1, R): S1}
    _run(graph, "bucketize", fn, [values, bounds], want, mesh_shape, table)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
@pytest.mark.parametrize("invert", [False, True])
def test_isin(invert: bool, dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    elements, test = _rand(4, 5, dtype=dtype), _rand(3, dtype=dtype)
    want = torch.isin(elements, test, invert=invert)
    fn = lambda e, t: dtorch.isin(e, t, invert=invert)  # noqa: E731
    table = {(R, R): R, (S0, R): S0, (S1, R): S1}
    _run(graph, "isin", fn, [elements, test], want, mesh_shape, table)


def test_torch_tensors_and_numbers_beside(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", (2,))
    seq, values = torch.tensor([1.0, 2.5, 4.0]), torch.tensor([[0.5, 2.5, 9.0]] * 3)
    v = dtorch.from_torch(values, device_mesh=mesh, placements=[S0], graph=graph)
    s = dtorch.from_torch(seq, device_mesh=mesh, placements=[R], graph=graph)
    out = dtorch.searchsorted(seq, v)
    assert out.placements == [S0]
    assert torch.equal(out.to_torch(), torch.searchsorted(seq, values))
    assert torch.equal(dtorch.searchsorted(s, 2.5).to_torch(), torch.searchsorted(seq, 2.5))
    assert torch.equal(dtorch.bucketize(v, seq).to_torch(), torch.bucketize(values, seq))
    assert torch.equal(dtorch.isin(v, 2.5).to_torch(), torch.isin(values, 2.5))
    assert torch.equal(dtorch.isin(2.5, s).to_torch(), torch.isin(2.5, seq))
    assert torch.equal(dtorch.isin(v, seq).to_torch(), torch.isin(values, seq))


_COUNTED = {(R,): R, (S0,): P, (S1,): P}


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("span", [(-2.0, 3.0), (0, 0), (3.0, 3.0)])
def test_histc(
    span: tuple[float, float], dtype: torch.dtype, mesh_shape: tuple[int, ...], graph
) -> None:  # type: ignore[no-untyped-def]
    x = _rand(5, 7, dtype=dtype) / 2
    want = torch.histc(x, 6, *span)
    fn = lambda t: t.histc(6, *span)  # noqa: E731
    _run(graph, "histc", fn, [x], want, mesh_shape, _COUNTED)


def test_histc_edges(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", (3,))
    same = dtorch.from_torch(torch.full((4,), 2.0), device_mesh=mesh, placements=[S0], graph=graph)
    assert torch.equal(dtorch.histc(same, bins=4).to_torch(), torch.histc(torch.full((4,), 2.0), 4))
    empty = dtorch.from_torch(torch.empty(0, 2), device_mesh=mesh, placements=[S0], graph=graph)
    assert torch.equal(empty.histc(3).to_torch(), torch.histc(torch.empty(0, 2), 3))


_WAITED = {(R,): R, (S0,): R, (S1,): R, (P,): R}


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2, 2)])
def test_bincount(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = torch.randint(0, 6, (9,), generator=_G)
    _run(
        graph,
        "bincount",
        lambda t: t.bincount(minlength=8),
        [x],
        torch.bincount(x, minlength=8),
        mesh_shape,
        {(R,): R, (S0,): R, (P,): R},
    )
    w = torch.rand(9, generator=_G, dtype=torch.float64)
    table = {(a, b): R for a in (R, S0, P) for b in (R, S0, P)}
    _run(graph, "bincount", dtorch.bincount, [x, w], torch.bincount(x, w), mesh_shape, table)


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2)])
@pytest.mark.parametrize("dim", [None, 0, 1])
def test_unique(dim: int | None, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = torch.randint(0, 3, (5, 4), generator=_G)
    x[2] = x[0]  # a repeated row for dim=0
    want = torch.unique(x, return_inverse=True, return_counts=True, dim=dim)
    fn = lambda t: t.unique(return_inverse=True, return_counts=True, dim=dim)  # noqa: E731
    _run(graph, "unique", fn, [x], want, mesh_shape, _WAITED)
    want = torch.unique_consecutive(x, return_counts=True, dim=dim)
    fn = lambda t: dtorch.unique_consecutive(t, return_counts=True, dim=dim)  # noqa: E731
    _run(graph, "unique_consecutive", fn, [x], want, mesh_shape, _WAITED)
    plain = dtorch.unique(dtorch.from_torch(x.float(), graph=graph), False)
    assert torch.equal(plain.to_torch(), torch.unique(x.float(), False))


def _t(values: Any, graph: Any, placements: Any = None, dtype: Any = None) -> dtorch.Tensor:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    full = torch.as_tensor(values, dtype=dtype)
    places = placements or [R]
    return dtorch.from_torch(full, device_mesh=mesh, placements=places, graph=graph)


_REFUSALS: list[tuple[str, Any, type[Exception], str]] = [
    (
        "searchsorted",
        lambda g: dtorch.searchsorted(_t([1.0, 2.0], g), _t([1.0], g), side="left", right=True),
        RuntimeError,
        "side and right",
    ),
    (
        "searchsorted",
        lambda g: dtorch.searchsorted(_t([1.0], g), _t([1.0], g), side="up"),
        ValueError,
        "'left' or 'right'",
    ),
    (
        "searchsorted",
        lambda g: dtorch.searchsorted(_t(1.0, g), _t([1.0], g)),
        RuntimeError,
        "0-d",
    ),
    (
        "searchsorted",
        lambda g: dtorch.searchsorted(_t([[1.0, 2.0]] * 2, g), _t([[1.0]] * 3, g)),
        RuntimeError,
        "leading dims",
    ),
    (
        "searchsorted",
        lambda g: dtorch.searchsorted(
            _t([1.0, 2.0], g), _t([1.0], g), sorter=_t([0, 1], g, dtype=torch.int32)
        ),
        TypeError,
        "int64",
    ),
    (
        "searchsorted",
        lambda g: dtorch.searchsorted(_t([True], g), _t([True], g)),
        NotImplementedError,
        "Bool",
    ),
    (
        "searchsorted",
        lambda g: dtorch.searchsorted(_t([1.0, 2.0, 3.0], g, [S0]), _t([1.0], g)),
        PlacementError,
        "accepted",
    ),
    (
        "searchsorted",
        lambda g: dtorch.searchsorted(torch.ones(2), torch.ones(2)),
        TypeError,
        "dtorch tensor",
    ),
    (
        "bucketize",
        lambda g: dtorch.bucketize(_t([1.0], g), _t([[1.0]], g)),
        RuntimeError,
        "1 dimension",
    ),
    (
        "isin",
        lambda g: dtorch.isin(_t([1.0, 2.0], g, [P]), _t([1.0], g)),
        PlacementError,
        "Partial",
    ),
    (
        "isin",
        lambda g: dtorch.isin(_t([1.0, 2.0], g), _t([1.0], g), invert=1),
        TypeError,
        "invert",
    ),
    ("histc", lambda g: _t([1, 2], g).histc(), NotImplementedError, "Long"),
    ("histc", lambda g: _t([1.0, 2.0], g).histc(0), RuntimeError, "bins must be > 0"),
    ("histc", lambda g: _t([1.0, 2.0], g).histc(4, 3, 1), RuntimeError, "larger than min"),
    ("histc", lambda g: _t([1.0, float("nan")], g).histc(4), RuntimeError, "not finite"),
    (
        "histc",
        lambda g: _t([1.0, 2.0], g).histc(4, 0, float("inf")),
        RuntimeError,
        "not finite",
    ),
    ("histc", lambda g: _t([1.0, 2.0], g, [P]).histc(4, 0, 1), PlacementError, "Partial"),
    ("bincount", lambda g: _t([1, -1], g).bincount(), RuntimeError, "non-negative"),
    ("bincount", lambda g: _t([1, 2], g).bincount(minlength=-1), RuntimeError, "minlength"),
    ("unique", lambda g: _t([1, 2], g).unique(dim=3), IndexError, "Dimension out of range"),
    ("unique", lambda g: _t([1, 2], g).unique(sorted=None), TypeError, "sorted"),
    (
        "unique_consecutive",
        lambda g: _t([1, 2], g).unique_consecutive(dim=2),
        IndexError,
        "Dimension out of range",
    ),
]


@pytest.mark.parametrize(("name", "call", "kind", "text"), _REFUSALS)
def test_refusals(name: str, call: Any, kind: type[Exception], text: str, graph) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(kind, match=text) as info:
        call(graph)
    assert isinstance(info.value, DTorchError) or kind is TypeError
    assert str(info.value).startswith(f"{name}")


@pytest.mark.parametrize("mesh_shape", [(3,), (2, 2)])
def test_searchsorted_nd_sorter(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    seq, values = _rand(5, 4), _rand(5, 3)
    sorter = seq.argsort(-1)
    want = torch.searchsorted(seq, values, sorter=sorter, right=True)
    fn = lambda s, v, o: dtorch.searchsorted(s, v, sorter=o, right=True)  # noqa: E731
    table = {(R, R, R): R, (S0, S0, S0): S0, (R, S0, R): S0, (R, S1, R): S1}
    _run(graph, "searchsorted", fn, [seq, values, sorter], want, mesh_shape, table)


def test_isin_takes_numbers_as_torch_wraps_them(graph: dtorch.Graph) -> None:
    """A bool number is refused (torch has no isin of bools), an int too large for the
    elements' dtype wraps as torch's wrapped number does (a differential review's finding)."""
    with pytest.raises(DTorchError, match="Bool"):
        dtorch.isin(_t([1.0, 2.0], graph), True)
    ints = torch.tensor([1, 3], dtype=torch.int32)
    got = dtorch.isin(_t(ints, graph), 2**33 + 1).to_torch()
    assert torch.equal(got, torch.isin(ints, 2**33 + 1))
