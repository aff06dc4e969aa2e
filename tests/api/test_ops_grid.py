"""The shape and geometry composites of ``dtorch.api.ops.grid`` and ``grid_more``
(``broadcast_tensors``, ``meshgrid``, ``cartesian_prod``, ``atleast_*``, ``ravel``, the splits,
``rot90``, ``block_diag``, ``tril/triu_indices``, ``unfold``, ``cross``, ``cdist``, ``cov``,
``corrcoef`` and the scatters) through the public API against torch on the full tensors:
several dtypes, even and uneven shards, layouts on 1-D meshes of 2 and 3 devices and a seeded
sample on 2-D and 3-D meshes; the placements each keeps; torch's refusals refused at the call
with an error of torch's class."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import PlacementError
from dtorch.ir.placement import format_placements
from tests.api.ops_harness import S0, S1, R, limit_for, place, run_api

pytestmark = pytest.mark.timeout(90)

MESHES = ((2,), (3,), (2, 2))
_G = torch.Generator().manual_seed(11)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(11)


def _rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=_G).to(dtype)
    return torch.randint(-5, 6, shape, generator=_G).to(dtype)


def _run(graph: Any, name: str, fn: Callable[..., Any], fulls: list[torch.Tensor], want: Any,
         mesh_shape: tuple[int, ...], *, exact: bool = True, limit: int = 60) -> None:  # fmt: skip
    wants = list(want) if isinstance(want, (tuple, list)) else [want]
    limit = min(limit, limit_for(mesh_shape, n_d=8))
    accepted = run_api(
        graph, name, _named(name, fn), fulls, mesh_shape, wants, table=None, exact=exact,
        limit=limit,
    )  # fmt: skip
    assert accepted, f"{name}: no layout accepted on {mesh_shape}"


def _named(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, whose placement refusals must name ``name`` and what it accepts (a composite's
    part names its own operands, so the inputs' placements are added for the harness)."""

    def run(*inputs: dtorch.Tensor) -> Any:
        try:
            return fn(*inputs)
        except PlacementError as error:
            text = str(error)
            assert text.startswith(f"{name}: ") and "accepted" in text, text
            given = ", ".join(format_placements(t.placements) for t in inputs)
            raise PlacementError(f"{text} (inputs {given})") from error

    return run


@pytest.mark.parametrize("mesh_shape", [*MESHES, (2, 2, 2)])
def test_broadcast_meshgrid_cartesian(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a, b = _rand(3, 1, 5), _rand(2, 5)
    _run(graph, "broadcast_tensors", dtorch.broadcast_tensors, [a, b],
         torch.broadcast_tensors(a, b), mesh_shape)  # fmt: skip
    x, y, z = _rand(3, dtype=torch.int64), _rand(5, dtype=torch.int64), _rand(2, dtype=torch.int64)
    for mode in ("ij", "xy"):
        want = torch.meshgrid(x, y, z, indexing=mode)
        _run(graph, "meshgrid", lambda *t, m=mode: dtorch.meshgrid(*t, indexing=m), [x, y, z],
             want, mesh_shape, limit=20)  # fmt: skip
    _run(graph, "cartesian_prod", dtorch.cartesian_prod, [x, y], torch.cartesian_prod(x, y),
         mesh_shape)  # fmt: skip


def test_meshgrid_forms(graph) -> None:  # type: ignore[no-untyped-def]
    x, y = torch.arange(3), torch.arange(4)
    with pytest.warns(UserWarning, match="indexing argument"):
        got = dtorch.meshgrid([dtorch.from_torch(x), dtorch.from_torch(y)])
    want = torch.meshgrid(x, y, indexing="ij")
    assert all(torch.equal(g.to_torch(), w) for g, w in zip(got, want, strict=True))
    single = dtorch.meshgrid(dtorch.tensor(7), indexing="xy")
    assert [t.to_torch() for t in single] == list(torch.meshgrid(torch.tensor(7), indexing="xy"))
    t = dtorch.from_torch(x)
    assert dtorch.cartesian_prod(t) is t


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_atleast_ravel(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    for shape in ((), (5,), (3, 2), (2, 3, 2)):
        x = _rand(*shape, dtype=dtype)
        for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
            _run(graph, name, getattr(dtorch, name), [x], getattr(torch, name)(x), mesh_shape,
                 limit=8)  # fmt: skip
        _run(graph, "ravel", lambda t: t.ravel(), [x], x.ravel(), mesh_shape, limit=8)
    a, b = _rand(), _rand(4)
    _run(graph, "atleast_3d", dtorch.atleast_3d, [a, b], torch.atleast_3d(a, b),
         mesh_shape, limit=12)  # fmt: skip
    got = dtorch.atleast_2d([dtorch.from_torch(b)])
    assert isinstance(got, tuple) and got[0].shape == (1, 4)


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_splits(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _rand(4, 6, 4)
    cases: list[tuple[str, Any]] = [
        ("hsplit", 3), ("hsplit", [1, 4]), ("vsplit", 2), ("vsplit", [3]), ("dsplit", 2),
        ("dsplit", [1, 1, 3]),
    ]  # fmt: skip
    for name, arg in cases:
        want = getattr(torch, name)(x, arg)
        _run(graph, name, lambda t, n=name, a=arg: getattr(t, n)(a), [x], want, mesh_shape,
             limit=12)  # fmt: skip
    v = _rand(6)
    _run(graph, "hsplit", lambda t: dtorch.hsplit(t, 2), [v], torch.hsplit(v, 2), mesh_shape)


@pytest.mark.parametrize("mesh_shape", [*MESHES, (2, 2, 2)])
def test_rot90(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _rand(3, 5, 2, dtype=torch.int64)
    for k, dims in ((1, (0, 1)), (2, (0, 1)), (3, (2, 0)), (-1, (1, -1)), (4, (0, 2))):
        _run(graph, "rot90", lambda t, k=k, d=dims: dtorch.rot90(t, k, d), [x],
             torch.rot90(x, k, dims), mesh_shape, limit=10)  # fmt: skip


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_block_diag(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a, b, c = _rand(2, 3, dtype=torch.int64), _rand(3), torch.tensor(4, dtype=torch.int32)
    _run(graph, "block_diag", dtorch.block_diag, [a, b, c], torch.block_diag(a, b, c),
         mesh_shape, limit=30)  # fmt: skip
    e = torch.zeros(0, 2)
    _run(graph, "block_diag", dtorch.block_diag, [e, b], torch.block_diag(e, b), mesh_shape)


@pytest.mark.parametrize("mesh_shape", [(3,), (2, 2)])
def test_tri_indices(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    placements = [S1] + [R] * (len(mesh_shape) - 1)
    for name in ("tril_indices", "triu_indices"):
        for row, col, offset in ((4, 5, 0), (5, 3, -1), (3, 3, 2), (0, 2, 0)):
            got = getattr(dtorch, name)(row, col, offset, dtype=torch.int32, device_mesh=mesh,
                                        placements=placements)  # fmt: skip
            assert got.placements == placements
            want = getattr(torch, name)(row, col, offset, dtype=torch.int32)
            assert torch.equal(got.to_torch(), want), name
    assert dtorch.tril_indices(3, 3).dtype == torch.int64


@pytest.mark.parametrize("mesh_shape", [*MESHES, (2, 2, 2)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.int32])
def test_unfold(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _rand(7, 5, dtype=dtype)
    for dim, size, step in ((0, 3, 2), (1, 2, 1), (-1, 5, 3), (0, 0, 1)):
        _run(graph, "unfold", lambda t, a=(dim, size, step): t.unfold(*a), [x],
             x.unfold(dim, size, step), mesh_shape, limit=12)  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", 2)
    out = place(x, mesh, [S1], graph).unfold(0, 3, 1)
    assert out.placements == [S1]  # the other dim keeps its shards


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_cross(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a, b, c = _rand(4, 3, 5, dtype=dtype), _rand(4, 3, 5, dtype=dtype), _rand(1, 3, 5, dtype=dtype)
    exact = not dtype.is_floating_point  # torch's kernel rounds its products otherwise
    _run(graph, "cross", lambda x, y: x.cross(y, dim=1), [a, b], torch.cross(a, b, dim=1),
         mesh_shape, exact=exact)  # fmt: skip
    _run(graph, "cross", lambda x, y: dtorch.cross(x, y, -2), [a, c], torch.cross(a, c, -2),
         mesh_shape, exact=exact, limit=30)  # fmt: skip
    v, w = _rand(3, 2, dtype=dtype), _rand(3, 2, dtype=dtype)
    with pytest.warns(UserWarning, match="without specifying the dim"):
        got = dtorch.cross(dtorch.from_torch(v), dtorch.from_torch(w))
    torch.testing.assert_close(got.to_torch(), torch.linalg.cross(v, w, dim=0))


@pytest.mark.parametrize("mesh_shape", [*MESHES, (2, 2, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cdist(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a, b = _rand(2, 5, 3, dtype=dtype), _rand(4, 3, dtype=dtype)
    for p in (0.0, 1.0, 2.0, 3.0, math.inf):
        want = torch.cdist(a, b, p=p, compute_mode="donot_use_mm_for_euclid_dist")
        _run(graph, "cdist", lambda x, y, p=p: dtorch.cdist(x, y, p=p), [a, b], want,
             mesh_shape, exact=False, limit=10)  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", 2)
    out = dtorch.cdist(place(a, mesh, [S1], graph), place(b, mesh, [S0], graph))
    assert out.placements == [S1]  # x1's rows keep their shards


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_cov_of_complex_variables_is_hermitian(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    """torch's ``X X^H``: the second factor conjugated (the plain transpose gave a
    non-Hermitian matrix with a complex diagonal), weighted forms too."""
    x = torch.randn((3, 7), dtype=torch.complex128, generator=_G)
    fw, aw = torch.tensor([1, 0, 2, 3, 1, 1, 4]), torch.rand(7, generator=_G, dtype=torch.float64)
    _run(graph, "cov", lambda t: t.cov(), [x], torch.cov(x), mesh_shape, exact=False, limit=12)
    _run(graph, "cov", lambda t, f, a: dtorch.cov(t, fweights=f, aweights=a), [x, fw, aw],
         torch.cov(x, fweights=fw, aweights=aw), mesh_shape, exact=False, limit=12)  # fmt: skip
    # corrcoef was refused: each part is clipped
    _run(graph, "corrcoef", lambda t: t.corrcoef(), [x], torch.corrcoef(x), mesh_shape,
         exact=False, limit=12)  # fmt: skip


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
def test_cov_corrcoef(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x, v = _rand(3, 7, dtype=dtype), _rand(5, dtype=dtype)
    fw, aw = torch.tensor([1, 0, 2, 3, 1, 1, 4]), torch.rand(7, generator=_G, dtype=torch.float64)
    for correction in (0, 1, 2):
        _run(graph, "cov", lambda t, c=correction: t.cov(correction=c), [x],
             torch.cov(x, correction=correction), mesh_shape, exact=False, limit=12)  # fmt: skip
    _run(graph, "cov", lambda t, f, a: dtorch.cov(t, fweights=f, aweights=a), [x, fw, aw],
         torch.cov(x, fweights=fw, aweights=aw), mesh_shape, exact=False, limit=12)  # fmt: skip
    _run(graph, "cov", lambda t, f: dtorch.cov(t, fweights=f), [x, fw],
         torch.cov(x, fweights=fw), mesh_shape, exact=False, limit=12)  # fmt: skip
    _run(graph, "cov", dtorch.cov, [v], torch.cov(v), mesh_shape, exact=False, limit=12)
    _run(graph, "corrcoef", lambda t: t.corrcoef(), [x], torch.corrcoef(x), mesh_shape,
         exact=False, limit=12)  # fmt: skip
    _run(graph, "corrcoef", dtorch.corrcoef, [v], torch.corrcoef(v), mesh_shape, exact=False,
         limit=12)  # fmt: skip


@pytest.mark.parametrize("mesh_shape", [*MESHES, (2, 2, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatters(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _rand(5, 4, 3, dtype=dtype)
    s = _rand(5, 3, dtype=torch.float64)  # cast to x's dtype, as torch does
    _run(graph, "select_scatter", lambda t, u: t.select_scatter(u, 1, -2), [x, s],
         torch.select_scatter(x, s, 1, -2), mesh_shape, limit=20)  # fmt: skip
    s = _rand(2, 4, 3, dtype=dtype)
    _run(graph, "slice_scatter", lambda t, u: dtorch.slice_scatter(t, u, 0, 1, None, 3),
         [x, s], torch.slice_scatter(x, s, 0, 1, None, 3), mesh_shape, limit=20)  # fmt: skip
    s = _rand(5, 4, 2, dtype=dtype)
    _run(graph, "slice_scatter", lambda t, u: t.slice_scatter(u, dim=2, start=-2), [x, s],
         torch.slice_scatter(x, s, dim=2, start=-2), mesh_shape, limit=20)  # fmt: skip
    for offset, d1, d2 in ((0, 0, 1), (1, 2, 0), (-2, 1, 0)):
        s = _rand(*x.diagonal(offset, d1, d2).shape, dtype=dtype)
        _run(graph, "diagonal_scatter", lambda t, u, a=(offset, d1, d2): t.diagonal_scatter(u, *a),
             [x, s], torch.diagonal_scatter(x, s, offset, d1, d2), mesh_shape,
             limit=20)  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", 2)
    src = place(_rand(4, 3, dtype=dtype), mesh, [R], graph)
    assert place(x, mesh, [S0], graph).select_scatter(src, 0, 4).placements == [S0]


def _refused(error: type[BaseException], match: str, fn: Callable[[], Any]) -> None:
    with pytest.raises(error, match=match):
        fn()


def test_refusals(graph) -> None:  # type: ignore[no-untyped-def]
    m, v = dtorch.ones(2, 6), dtorch.ones(6)
    cases: list[tuple[type[BaseException], str, Callable[[], Any]]] = [
        (RuntimeError, "not divisible", lambda: m.hsplit(4)),
        (RuntimeError, "at least 2 dimension", lambda: v.vsplit(2)),
        (RuntimeError, "at least 3 dimension", lambda: dtorch.dsplit(m, 2)),
        (RuntimeError, "0D or 1D", lambda: dtorch.meshgrid(m, indexing="ij")),
        (RuntimeError, "indexing must be", lambda: dtorch.meshgrid(v, indexing="yx")),
        (RuntimeError, "same dtype", lambda: dtorch.meshgrid(v, v.long(), indexing="ij")),
        (RuntimeError, "non-empty", lambda: dtorch.meshgrid(indexing="ij")),
        (RuntimeError, "broadcast", lambda: dtorch.broadcast_tensors(v, dtorch.ones(3))),
        (RuntimeError, "rotation dims to be different", lambda: m.rot90(1, (0, -2))),
        (RuntimeError, "total dims >= 2", v.rot90),
        (RuntimeError, "rotation dims == 2", lambda: m.rot90(1, (0,))),
        (IndexError, "out of range", lambda: m.rot90(1, (0, 2))),
        (RuntimeError, "1D vector", lambda: dtorch.cartesian_prod(m)),
        (RuntimeError, "2 or fewer dimensions", lambda: dtorch.block_diag(dtorch.ones(1, 1, 1))),
        (NotImplementedError, "tril", lambda: dtorch.tril_indices(3, 3, dtype=torch.float)),
        (RuntimeError, "must be non-negative", lambda: dtorch.triu_indices(-1, 3)),
        (RuntimeError, "maximum size", lambda: v.unfold(0, 7, 1)),
        (RuntimeError, "must be > 0", lambda: v.unfold(0, 2, 0)),
        (IndexError, "out of range", lambda: v.unfold(1, 2, 1)),
        (RuntimeError, "same number of dimensions", lambda: dtorch.cross(m, v, dim=1)),
        (RuntimeError, "must have length 3", lambda: m.cross(m, dim=1)),
        (RuntimeError, "no dimension of size 3", lambda: _quiet(lambda: m.cross(m))),
        (NotImplementedError, "Bool", lambda: dtorch.cross(m.bool(), m.bool(), dim=0)),
        (RuntimeError, "at least 2D", lambda: dtorch.cdist(v, v)),
        (RuntimeError, "floating-point", lambda: dtorch.cdist(m.long(), m.long())),
        (RuntimeError, "same number of columns", lambda: dtorch.cdist(m, dtorch.ones(2, 5))),
        (RuntimeError, "non-negative p", lambda: dtorch.cdist(m, m, p=-1.0)),
        (ValueError, "compute_mode", lambda: dtorch.cdist(m, m, compute_mode="bad")),
        (RuntimeError, "two or fewer", lambda: dtorch.cov(dtorch.ones(2, 2, 2))),
        (RuntimeError, "bool dtype", lambda: m.bool().cov()),
        (TypeError, "correction", lambda: m.cov(correction=1.5)),
        (RuntimeError, "integral dtype", lambda: m.cov(fweights=v)),
        (RuntimeError, "floating point dtype", lambda: m.cov(aweights=v.long())),
        (RuntimeError, "cannot be negative", lambda: m.cov(fweights=torch.tensor([1, -1] * 3))),
        (RuntimeError, "same numel", lambda: m.cov(aweights=dtorch.ones(5))),
        (RuntimeError, "size equal to the slice", lambda: m.select_scatter(dtorch.ones(2), 0, 0)),
        (IndexError, "out of range", lambda: m.select_scatter(v, 0, 2)),
        (RuntimeError, "step must be positive", lambda: m.slice_scatter(m, 0, None, None, 0)),
        (RuntimeError, "size equal to the slice", lambda: m.slice_scatter(m, 1, 0, 3)),
        (RuntimeError, "size equal to the slice", lambda: m.diagonal_scatter(dtorch.ones(3))),
        (RuntimeError, "cannot be identical", lambda: m.diagonal_scatter(v, 0, 1, 1)),
    ]  # fmt: skip
    for error, match, fn in cases:
        _refused(error, match, fn)


def _quiet(fn: Callable[[], Any]) -> Any:
    with pytest.warns(UserWarning):
        return fn()


def test_torch_refuses_alike(graph) -> None:  # type: ignore[no-untyped-def]
    """The refusals above are torch's too (so the oracle agrees they are refusals)."""
    m, v = torch.ones(2, 6), torch.ones(6)
    for fn in (lambda: m.hsplit(4), v.rot90, lambda: v.unfold(0, 7, 1),
               lambda: torch.cdist(m.long(), m.long()), lambda: m.cov(correction=1.5),
               lambda: m.select_scatter(torch.ones(2), 0, 0)):  # fmt: skip
        with pytest.raises((RuntimeError, TypeError)):
            fn()
    assert dtorch.broadcast_shapes((2, 1), (3,)) == torch.Size([2, 3])


def test_review_findings_match_torch(graph: dtorch.Graph) -> None:
    """A differential review's findings: cross without dim takes the first size-3 dim of the
    input (not of the broadcast shape) and one dtype; cdist's NaN under p=inf and p=0 and a
    0-d tensor p; unfold of a 0-d tensor with size 0; block_diag's dtype with a 0-d tensor;
    cov's weights summing to zero; the 0-d scatters; hsplit's indices one by one."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    d = lambda t: place(t, mesh, [R], graph)  # noqa: E731
    a, b = torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[0.0, 0.0, 1.0], [1, 0, 0], [0, 1, 0]])
    with warnings.catch_warnings():  # torch warns once per process: the warning is not tested
        warnings.simplefilter("ignore")
        want, got = torch.cross(a, b), dtorch.cross(d(a), d(b)).to_torch()
    assert torch.equal(got, want)
    _refused(RuntimeError, "one dtype", lambda: dtorch.cross(d(a), d(b.double()), dim=1))
    nan = float("nan")
    x1, x2 = torch.tensor([[0.0, nan], [1.0, 2.0]]), torch.tensor([[0.0, 0.0], [3.0, math.inf]])
    for p in (0.0, math.inf, 1.0, 2.0):
        got = dtorch.cdist(d(x1), d(x2), p=p).to_torch()
        torch.testing.assert_close(got, torch.cdist(x1, x2, p=p), equal_nan=True)
    got = dtorch.cdist(d(x1), d(x2), p=torch.tensor(1.0)).to_torch()
    torch.testing.assert_close(got, torch.cdist(x1, x2, p=1.0), equal_nan=True)
    _refused(NotImplementedError, "cdist", lambda: dtorch.cdist(d(x1.bfloat16()), d(x2.bfloat16())))
    five = torch.tensor(5.0)
    assert d(five).unfold(0, 0, 1).shape == five.unfold(0, 0, 1).shape
    low = torch.ones(1, 2, dtype=torch.bfloat16)
    assert dtorch.block_diag(d(low), d(five)).dtype == torch.block_diag(low, five).dtype
    obs = torch.tensor([[1.0, 2.0, 3.0], [2.0, 0.0, 1.0]])
    none = torch.zeros(3, dtype=torch.int64)
    _refused(RuntimeError, "sum to zero", lambda: dtorch.cov(d(obs), fweights=none))
    _refused(IndexError, "0-dim", lambda: dtorch.select_scatter(d(five), d(five), 0, 0))
    two = d(torch.zeros(2))
    _refused(IndexError, "out of range", lambda: dtorch.select_scatter(two, d(five), 0, 2))
    _refused(IndexError, "0-dim", lambda: dtorch.slice_scatter(d(five), d(five)))
    m = torch.arange(12).reshape(2, 6)
    got = [p.to_torch() for p in d(m).hsplit(1, 2)]
    assert all(torch.equal(g, w) for g, w in zip(got, m.hsplit([1, 2]), strict=True))
    _refused(TypeError, "tensor", lambda: dtorch.hsplit(d(m), torch.tensor([1])))
