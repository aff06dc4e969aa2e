"""torch's older linear algebra names (``dtorch.cholesky qr svd lu ...``, ``dtorch.linalg.lu
lu_factor solve_triangular ...``) through the public API against torch on the full tensors:
float32 and float64, even and uneven batch shards, every layout on 1-D meshes and a seeded
sample on 2-D and 3-D ones. The Linalg operators keep batch shards and refuse shards of the
matrix dims and Partial inputs (the one-mesh-dim tables below); the compositions are checked
for values; bad arguments are refused at the call."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, ParamError, PlacementError, ShapeError
from tests.api.ops_harness import S0, R, limit_for, place, run_api

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:.*deprecated:UserWarning"),
]

_G = torch.Generator().manual_seed(5)

#: One input: a batch shard stays, anything else (matrix-dim shards, Partial) is refused.
_ONE = {(R,): R, (S0,): S0}
#: Two or three inputs of one batch shape: the batch dim sharded by any (the others chunked).
_TWO = {(R, R): R, (S0, S0): S0, (S0, R): S0, (R, S0): S0}
_THREE = {
    (R, R, R): R, (S0, S0, S0): S0, (S0, R, R): S0, (R, S0, R): S0, (R, R, S0): S0,
    (S0, S0, R): S0, (S0, R, S0): S0, (R, S0, S0): S0,
}  # fmt: skip


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(5)


def _rand(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(shape, generator=_G, dtype=torch.float64).to(dtype)


def _general(b: int, n: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    # well conditioned: random plus n on the diagonal
    return (_rand(b, n, n) + n * torch.eye(n, dtype=torch.float64)).to(dtype)


def _spd(b: int, n: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    x = _rand(b, n, n)
    return (x @ x.mT + n * torch.eye(n, dtype=torch.float64)).to(dtype)


def _run(graph: Any, name: str, fn: Callable[..., Any], fulls: list[torch.Tensor], want: Any,
         mesh_shape: tuple[int, ...], table: Any = None, n_d: int = 6) -> None:  # fmt: skip
    wants = list(want) if isinstance(want, (tuple, list)) else [want]
    limit = limit_for(mesh_shape, n_d=n_d)
    accepted = run_api(
        graph, name, fn, fulls, mesh_shape, wants, table=table, exact=False, limit=limit
    )
    assert accepted, f"{name}: no layout accepted on {mesh_shape}"


def _torch(fn: Callable[..., Any], *args: Any) -> Any:
    # torch's value, its deprecation warnings silenced
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


_L = lambda b, n, d: torch.linalg.cholesky(_spd(b, n, d))  # noqa: E731

#: name (and a case) -> (dtorch's call, torch's call, the input's maker (batch, n, dtype)).
_SQUARE: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., torch.Tensor]]] = {
    "cholesky": (lambda a: a.cholesky(True), lambda a: torch.cholesky(a, True), _spd),
    "cholesky_inverse": (dtorch.cholesky_inverse, torch.cholesky_inverse, _L),
    "qr": (lambda a: dtorch.qr(a, some=False), lambda a: torch.qr(a, some=False), _general),
    "svd": (dtorch.svd, torch.svd, _general),
    "svd no_uv": (lambda a: a.svd(compute_uv=False), lambda a: a.svd(compute_uv=False), _general),
    "pinverse": (lambda a: a.pinverse(1e-3), lambda a: a.pinverse(1e-3), _general),
    "matrix_power": (lambda a: a.matrix_power(3), lambda a: a.matrix_power(3), _general),
    "matrix_exp": (dtorch.matrix_exp, torch.matrix_exp, lambda b, n, d: _general(b, n, d) / n),
    "lu": (lambda a: a.lu(get_infos=True), lambda a: a.lu(get_infos=True), _general),
    "linalg.lu_factor": (dtorch.linalg.lu_factor, torch.linalg.lu_factor, _general),
    "linalg.lu_factor_ex": (dtorch.linalg.lu_factor_ex, torch.linalg.lu_factor_ex, _general),
    "linalg.lu": (dtorch.linalg.lu, torch.linalg.lu, _general),
    "linalg.inv_ex": (dtorch.linalg.inv_ex, torch.linalg.inv_ex, _general),
    "linalg.cholesky_ex": (
        lambda a: dtorch.linalg.cholesky_ex(a, upper=True),
        lambda a: torch.linalg.cholesky_ex(a, upper=True),
        _spd,
    ),
    "geqrf": (dtorch.geqrf, torch.geqrf, _general),
    "linalg.cond": (dtorch.linalg.cond, torch.linalg.cond, _general),
    "linalg.cond nuc": (
        lambda a: dtorch.linalg.cond(a, "nuc"),
        lambda a: torch.linalg.cond(a, "nuc"),
        _general,
    ),
    "linalg.cond -inf": (
        lambda a: dtorch.linalg.cond(a, -float("inf")),
        lambda a: torch.linalg.cond(a, -float("inf")),
        _general,
    ),
    "linalg.eig": (dtorch.linalg.eig, torch.linalg.eig, _spd),
    "linalg.eigvals": (dtorch.linalg.eigvals, torch.linalg.eigvals, _spd),
}


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2), (2, 2, 2)])
@pytest.mark.parametrize("name", sorted(_SQUARE))
def test_one_matrix_functions_keep_batch_shards(
    name: str, mesh_shape: tuple[int, ...], graph
) -> None:  # type: ignore[no-untyped-def]
    if (
        len(mesh_shape) > 1 and sorted(_SQUARE).index(name) % 2
    ):  # a sample of names on the larger meshes
        mesh_shape = mesh_shape[:1]
    ours, theirs, make = _SQUARE[name]
    dtype = torch.float64 if len(mesh_shape) % 2 else torch.float32
    batch = 5 if mesh_shape[0] == 2 else 6  # uneven on 2 devices, even on 3
    a = make(batch, 3, dtype)
    _run(graph, name.split(maxsplit=1)[0], ours, [a], _torch(theirs, a), mesh_shape, _ONE)


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2)])
def test_two_input_functions(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a, b, spd = _general(5, 3), _rand(5, 3, 2), _spd(5, 3)
    low, up = a.tril(), a.triu()
    L = torch.linalg.cholesky(spd)
    cases: list[tuple[str, Callable[..., Any], list[torch.Tensor], Any]] = [
        ("cholesky_solve", lambda x, y: x.cholesky_solve(y), [b, L], torch.cholesky_solve(b, L)),
        ("cholesky_solve", lambda x, y: dtorch.cholesky_solve(x, y, True), [b, L.mT],
         torch.cholesky_solve(b, L.mT, True)),
        ("linalg.solve_triangular", lambda x, y: dtorch.linalg.solve_triangular(x, y, upper=True),
         [up, b], torch.linalg.solve_triangular(up, b, upper=True)),
        ("linalg.solve_triangular", lambda x, y: dtorch.linalg.solve_triangular(
            x, y, upper=False, left=False, unitriangular=True), [low, b.mT],
         torch.linalg.solve_triangular(low, b.mT, upper=False, left=False, unitriangular=True)),
        ("triangular_solve", lambda x, y: x.triangular_solve(y, False, True), [b, low],
         _torch(torch.triangular_solve, b, low, False, True)),
    ]  # fmt: skip
    LU, piv = torch.linalg.lu_factor(a)
    cases.append(("lu_unpack", dtorch.lu_unpack, [LU, piv], torch.lu_unpack(LU, piv)))
    h, tau = torch.geqrf(_rand(5, 4, 3))
    cases.append(("orgqr", dtorch.orgqr, [h, tau], torch.orgqr(h, tau)))
    cases.append(("linalg.householder_product", dtorch.linalg.householder_product, [h, tau],
                  torch.linalg.householder_product(h, tau)))  # fmt: skip
    for name, ours, fulls, want in cases:
        _run(graph, name, ours, fulls, want, mesh_shape, _TWO)


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2)])
def test_three_input_functions(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a, b = _general(5, 3), _rand(5, 3, 2)
    LU, piv = torch.linalg.lu_factor(a)
    solve = lambda x, p, y: dtorch.linalg.lu_solve(x, p, y, adjoint=True)  # noqa: E731
    want = torch.linalg.lu_solve(LU, piv, b, adjoint=True)
    _run(graph, "linalg.lu_solve", solve, [LU, piv, b], want, mesh_shape, _THREE, n_d=4)
    older = lambda x, p, y: y.lu_solve(x, p)  # noqa: E731
    want = _torch(torch.lu_solve, b, LU, piv)
    _run(graph, "lu_solve", older, [LU, piv, b], want, mesh_shape, _THREE, n_d=4)
    h, tau = torch.geqrf(_rand(5, 4, 3))
    c = _rand(5, 2, 4)
    mul = lambda x, t, y: dtorch.ormqr(x, t, y, left=False, transpose=True)  # noqa: E731
    want = torch.ormqr(h, tau, c, left=False, transpose=True)
    _run(graph, "ormqr", mul, [h, tau, c], want, mesh_shape, _THREE, n_d=4)


def test_broadcast_batches_and_right_sides(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    a, b = _general(1, 3)[0], _rand(4, 3, 2)
    LU, piv = torch.linalg.lu_factor(a)
    got = dtorch.linalg.lu_solve(*(place(t, mesh, [R], graph) for t in (LU, piv)),
                                 place(b, mesh, [S0], graph))  # fmt: skip
    assert got.placements == [S0]
    torch.testing.assert_close(got.to_torch(), torch.linalg.lu_solve(LU, piv, b))
    got = dtorch.linalg.lu_solve(*(place(t, mesh, [R], graph) for t in (LU, piv, b.mT[0])),
                                 left=False)  # fmt: skip
    torch.testing.assert_close(got.to_torch(), torch.linalg.lu_solve(LU, piv, b.mT[0], left=False))
    up = a.triu()
    got = dtorch.linalg.solve_triangular(place(up, mesh, [R], graph), place(b, mesh, [S0], graph),
                                         upper=True)  # fmt: skip
    torch.testing.assert_close(got.to_torch(), torch.linalg.solve_triangular(up, b, upper=True))
    L = torch.linalg.cholesky(_spd(1, 3)[0])
    got = dtorch.cholesky_solve(place(b, mesh, [S0], graph), place(L, mesh, [R], graph))
    torch.testing.assert_close(got.to_torch(), torch.cholesky_solve(b, L))


@pytest.mark.parametrize("layout", [[S0], [R]], ids=["S0", "R"])
def test_lu_solve_takes_pivots_of_lu_batch_shape_only(layout: list[Any], graph: Any) -> None:
    """torch's lu_solve broadcasts LU's batch dims with B's, and LU's pivots with LU, but
    refuses pivots whose shape is not LU.shape[:-1] (it does not broadcast them)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    LU, piv = torch.linalg.lu_factor(_general(2, 3))
    LU1, piv1 = torch.linalg.lu_factor(_general(1, 3))
    b = _rand(2, 3, 2)

    def put(x: torch.Tensor) -> dtorch.Tensor:  # the batch dim of 2 as ``layout``
        return place(x, mesh, layout if x.ndim > 1 and x.shape[0] == 2 else [R], graph)

    words = r"Expected LU.shape\[:-1\] and pivots.shape to be the same"
    for lu_, p in ((LU, piv1), (LU1, piv), (LU, piv[0]), (LU[0], piv)):
        with pytest.raises(RuntimeError, match=words):
            torch.linalg.lu_solve(lu_, p, b)
        with pytest.raises(ShapeError, match=f"^linalg.lu_solve: {words}"):
            dtorch.linalg.lu_solve(put(lu_), put(p), put(b))
        with pytest.raises(ShapeError, match=f"^lu_solve: linalg.lu_solve: {words}"):
            dtorch.lu_solve(put(b), put(lu_), put(p))
    got = dtorch.linalg.lu_solve(put(LU1), put(piv1), put(b))  # LU and pivots broadcast to B
    torch.testing.assert_close(got.to_torch(), torch.linalg.lu_solve(LU1, piv1, b))


@pytest.mark.parametrize("layout", [[S0], [R]], ids=["S0", "R"])
def test_lu_unpack_refuses_pivots_that_do_not_fit(layout: list[Any], graph: Any) -> None:
    """torch's lu_unpack does not check that the pivots fit LU and reads past them (an
    index error, or a heap corrupted enough to abort the process): dtorch refuses pivots not
    shaped LU's batch dims and min(m, n) before anything runs, and unpacks those that are."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    LU, piv = torch.linalg.lu_factor(_general(2, 3))
    wide, wide_piv = torch.linalg.lu_factor(_rand(2, 3, 4))

    def put(x: torch.Tensor) -> dtorch.Tensor:  # the batch dim of 2 as ``layout``
        return place(x, mesh, layout if x.ndim > 1 and x.shape[0] == 2 else [R], graph)

    for lu_, p in ((LU, piv[:1]), (LU[:1], piv), (LU[0], piv), (LU, piv[0]), (wide, piv[:, :2])):
        with pytest.raises(ShapeError, match=r"^lu_unpack: LU_pivots of shape .* do not fit"):
            dtorch.lu_unpack(put(lu_), put(p))
    for lu_, p in ((LU, piv), (wide, wide_piv), (LU[0], piv[0])):
        unpacked = zip(dtorch.lu_unpack(put(lu_), put(p)), torch.lu_unpack(lu_, p), strict=True)
        for got, want in unpacked:
            torch.testing.assert_close(got.to_torch(), want)


def test_lstsq_refusals_are_of_the_class_of_what_torch_refused(graph: Any) -> None:
    """torch refuses lstsq's dtypes and shapes with RuntimeErrors: dtorch raises them as a
    DtypeError and a ShapeError (both RuntimeErrors), in torch's words."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    f, i = _rand(3, 2, dtype=torch.float32), torch.ones(3, 2, dtype=torch.int64)
    cases = [  # (A, B, the class)
        (i, f[:, :1], DtypeError), (i, i[:, :1], DtypeError),
        (f.half(), f[:, :1].half(), DtypeError), (f, f[:, :1].double(), DtypeError),
        (f[:, 0], f[:, :1], ShapeError),
        (i[:, 0], f[:, :1], ShapeError), (f, _rand(4, 1, dtype=torch.float32), ShapeError),
        (_rand(2, 3, 2), _rand(3, 3, 1), ShapeError),
    ]  # fmt: skip
    for a, b, kind in cases:
        with pytest.raises(RuntimeError) as theirs:
            torch.linalg.lstsq(a, b)
        with pytest.raises(kind) as ours:
            dtorch.linalg.lstsq(place(a, mesh, [S0], graph), place(b, mesh, [R], graph))
        assert str(ours.value) == f"linalg.lstsq: {str(theirs.value).strip()}"


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2)])
def test_compositions(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x, m1, m2, m3 = _rand(5, 4, 3), _rand(4, 3), _rand(3, 5), _rand(5, 2)
    v = _rand(5)
    cases: list[tuple[str, Callable[..., Any], list[torch.Tensor], Any]] = [
        ("chain_matmul", dtorch.chain_matmul, [m1, m2, m3],
         _torch(torch.chain_matmul, m1, m2, m3)),
        ("frobenius_norm", lambda t: dtorch.frobenius_norm(t, (0, 2), True), [x],
         torch.frobenius_norm(x, (0, 2), True)),
        ("frobenius_norm", lambda t: dtorch.frobenius_norm(t, 1), [x], torch.frobenius_norm(x, 1)),
        ("nuclear_norm", dtorch.nuclear_norm, [m1], torch.nuclear_norm(m1)),
        ("nuclear_norm", lambda t: dtorch.nuclear_norm(t, True), [m1],
         torch.nuclear_norm(m1, True)),
        ("nuclear_norm", lambda t: dtorch.nuclear_norm(t, (2, 0), keepdim=True), [x],
         torch.nuclear_norm(x, (2, 0), keepdim=True)),
        ("linalg.vander", dtorch.linalg.vander, [v], torch.linalg.vander(v)),
        ("linalg.vander", lambda t: dtorch.linalg.vander(t, N=3), [x], torch.linalg.vander(x, N=3)),
    ]  # fmt: skip
    a = _general(1, 6)[0].reshape(2, 3, 6)  # a 6 x 6 matrix: rows (2, 3), columns (6,)
    cases.append(("linalg.tensorinv", dtorch.linalg.tensorinv, [a], torch.linalg.tensorinv(a)))
    rhs = _rand(2, 3)
    cases.append(("linalg.tensorsolve", dtorch.linalg.tensorsolve, [a, rhs],
                  torch.linalg.tensorsolve(a, rhs)))  # fmt: skip
    moved = a.permute(2, 0, 1).contiguous()
    solve0 = lambda p, q: dtorch.linalg.tensorsolve(p, q, dims=(0,))  # noqa: E731
    cases.append(("linalg.tensorsolve", solve0, [moved, rhs],
                  torch.linalg.tensorsolve(moved, rhs, dims=(0,))))  # fmt: skip
    for name, ours, fulls, want in cases:
        _run(graph, name, ours, fulls, want, mesh_shape, n_d=4)


def test_integer_vander_and_lstsq(graph) -> None:  # type: ignore[no-untyped-def]
    ints = torch.randint(-3, 4, (3, 4), generator=_G)
    _run(graph, "linalg.vander", dtorch.linalg.vander, [ints], torch.linalg.vander(ints), (2,))
    mesh = dtorch.init_device_mesh("cpu", 2)
    a, b = _rand(2, 5, 3), _rand(2, 5, 2)
    for driver in (None, "gelsd"):
        got = dtorch.linalg.lstsq(place(a, mesh, [S0], graph), place(b, mesh, [R], graph),
                                  driver=driver)  # fmt: skip
        want = torch.linalg.lstsq(a, b, driver=driver)
        assert type(got) is type(want)
        for g, w in zip(got, want, strict=True):
            assert g.placements == [R]
            torch.testing.assert_close(g.to_torch(), w)


def test_named_tuples_and_flags(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    a = _general(4, 3)
    t = place(a, mesh, [S0], graph)
    pairs = [
        (dtorch.qr(t), torch.qr(a)), (t.svd(), a.svd()), (dtorch.geqrf(t), torch.geqrf(a)),
        (dtorch.linalg.lu(t), torch.linalg.lu(a)),
        (dtorch.linalg.inv_ex(t), torch.linalg.inv_ex(a)),
        (t.triangular_solve(t), _torch(torch.triangular_solve, a, a)),
    ]  # fmt: skip
    for got, want in pairs:
        assert type(got) is type(want)
    LU, piv = torch.linalg.lu_factor(a)
    dLU, dpiv = (place(x, mesh, [S0], graph) for x in (LU, piv))
    for data, pivots in ((False, True), (True, False), (False, False)):
        got = dtorch.lu_unpack(dLU, dpiv, data, pivots)
        for g, w in zip(got, torch.lu_unpack(LU, piv, data, pivots), strict=True):
            assert g.shape == w.shape
            torch.testing.assert_close(g.to_torch(), w)
    zeros = torch.zeros(2, 3, 3)
    singular = place(zeros, mesh, [S0], graph)
    for ours, theirs in ((dtorch.linalg.lu_factor_ex, torch.linalg.lu_factor_ex),
                         (dtorch.linalg.inv_ex, torch.linalg.inv_ex),
                         (dtorch.linalg.cholesky_ex, torch.linalg.cholesky_ex)):  # fmt: skip
        assert torch.equal(ours(singular).info.to_torch(), theirs(zeros).info)
    assert len(singular.lu()) == 2
    with pytest.raises(dtorch.DTorchError, match=r"singular|zero|invertible"):
        dtorch.linalg.lu_factor(singular)[0].to_torch()


def test_placements_refused_say_what_to_do(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    a = _general(4, 3)
    for placements in ([dtorch.Shard(1)], [dtorch.Partial()]):
        t = place(a, mesh, placements, graph)
        with pytest.raises(PlacementError, match=r"^cholesky_inverse: .*accepted.*Redistribute"):
            dtorch.cholesky_inverse(t)
    LU, piv = torch.linalg.lu_factor(a)
    with pytest.raises(PlacementError, match=r"^linalg\.lu_solve: .*S\(1\)"):
        dtorch.linalg.lu_solve(place(LU, mesh, [R], graph), place(piv, mesh, [dtorch.Shard(1)],
                               graph), place(_rand(4, 3, 1), mesh, [R], graph))  # fmt: skip


def _refused(graph: Any) -> list[tuple[type[Exception], str, Callable[[], Any]]]:
    mesh = dtorch.init_device_mesh("cpu", 2)

    def put(x: torch.Tensor) -> dtorch.Tensor:
        return place(x, mesh, [R], graph)

    sq, wide = put(_general(2, 3)), put(_rand(2, 3, 4))
    ints = put(torch.ones(3, 3, dtype=torch.int64))
    la = dtorch.linalg
    return [
        (TypeError, "upper", lambda: dtorch.cholesky(sq, 1)),
        (TypeError, "some", lambda: dtorch.qr(sq, "yes")),
        (TypeError, "compute_uv", lambda: dtorch.svd(sq, True, None)),
        (TypeError, "rcond", lambda: dtorch.pinverse(sq, "x")),
        (TypeError, "pivot", lambda: la.lu_factor(sq, pivot=0)),
        (ParamError, "pivot=True", lambda: la.lu(sq, pivot=False)),
        (ParamError, "pivot=True", lambda: sq.lu(False)),
        (ShapeError, "square", lambda: dtorch.cholesky_inverse(wide)),
        (ShapeError, "at least 2 dimensions", lambda: dtorch.geqrf(put(torch.ones(3)))),
        (DtypeError, "Long", lambda: dtorch.cholesky_inverse(ints)),
        (ShapeError, "Incompatible", lambda: la.solve_triangular(sq, wide.mT, upper=True)),
        (TypeError, "upper", lambda: la.solve_triangular(sq, sq)),  # upper is required
        (ParamError, "norm type", lambda: la.cond(sq, 3)),
        (ParamError, "norm type", lambda: la.cond(sq, "x")),
        (ParamError, "driver", lambda: la.lstsq(sq, sq, driver="x")),
        (ParamError, "positive", lambda: la.tensorinv(sq, 0)),
        (ShapeError, "prod", lambda: la.tensorinv(wide, 1)),
        (ShapeError, "prod", lambda: la.tensorsolve(wide, put(torch.ones(2)))),
        (ShapeError, "2D", lambda: dtorch.chain_matmul(sq, sq)),
        (ShapeError, "one or more", dtorch.chain_matmul),
        (ParamError, "at most 2", lambda: dtorch.frobenius_norm(sq, (0, 1, 2))),
        (ShapeError, "at least 2 dimensions", lambda: dtorch.nuclear_norm(put(torch.ones(3)))),
        (ShapeError, "at least one", lambda: la.vander(put(torch.tensor(1.0)))),
        (DtypeError, "bool", lambda: la.vander(put(torch.ones(2, dtype=torch.bool)))),
        (DtypeError, "float16", lambda: la.vander(put(torch.ones(2, dtype=torch.float16)))),
        (IndexError, "range", lambda: la.tensorsolve(wide, put(torch.ones(2, 3)), dims=(5,))),
        (
            ShapeError,
            "tau",
            lambda: dtorch.ormqr(sq, put(torch.ones(2, 5, dtype=torch.float64)), sq),
        ),
    ]


def test_bad_arguments_are_refused_at_the_call(graph) -> None:  # type: ignore[no-untyped-def]
    for error, text, call in _refused(graph):
        with pytest.raises(error, match=text):
            call()


def test_vander_of_one_element_and_refused_n(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.tensor([[2.0], [3.0]])
    got = dtorch.linalg.vander(place(x, mesh, [S0], graph), N=2).to_torch()
    assert torch.equal(got, torch.linalg.vander(x, N=2))
    odd = torch.tensor([float("nan"), float("inf"), 0.0, -2.0])
    got = dtorch.linalg.vander(place(odd, mesh, [S0], graph), N=3).to_torch()
    torch.testing.assert_close(got, torch.linalg.vander(odd, N=3), equal_nan=True)
    for n in (0, 1):
        with pytest.raises(ParamError, match="greater than 1"):
            dtorch.linalg.vander(place(x, mesh, [S0], graph), N=n)


def test_review_findings_match_torch(graph: dtorch.Graph) -> None:
    """A differential review's findings: eigvals of a NaN fails the operator (torch's LAPACK
    call crashes the whole process there); tensorsolve needs only torch's size check;
    nuclear_norm batches over leading dims and reads an int dim as torch does; cond takes a
    bool order as the number."""
    mesh = dtorch.init_device_mesh("cpu", 2)

    def d(t: torch.Tensor) -> dtorch.Tensor:
        return dtorch.from_torch(t, device_mesh=mesh, graph=graph)

    nan = torch.randn(4, 4, dtype=torch.complex64)
    nan[0, 0] = float("nan")
    with pytest.raises(dtorch.KernelError, match="infs or NaNs"):
        dtorch.linalg.eigvals(d(nan)).to_torch()
    a, b = torch.randn(2, 2, 4, dtype=torch.float64), torch.randn(4, 1, dtype=torch.float64)
    got = dtorch.linalg.tensorsolve(d(a), d(b)).to_torch()
    torch.testing.assert_close(got, torch.linalg.tensorsolve(a, b))
    batch = torch.randn(3, 4, 5)
    with warnings.catch_warnings():  # torch's deprecation of nuclear_norm
        warnings.simplefilter("ignore")
        want = torch.nuclear_norm(batch)
    torch.testing.assert_close(dtorch.nuclear_norm(d(batch)).to_torch(), want)
    with pytest.raises(RuntimeError, match="dims must be different"):
        dtorch.nuclear_norm(d(torch.randn(3, 3)), 0)
    square = torch.randn(3, 3, dtype=torch.float64)
    got = dtorch.linalg.cond(d(square), True).to_torch()
    torch.testing.assert_close(got, torch.linalg.cond(square, True))
