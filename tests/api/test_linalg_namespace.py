"""``dtorch.linalg`` (and ``dtorch.det logdet slogdet inverse``) through the public API
against torch.linalg on the full tensors: float32 and float64 (int64 where torch takes it),
even and uneven batch shards, every layout on 1-D meshes of 2 and 3 devices and a seeded
sample on 2-D and 3-D meshes. The matrix functions keep batch shards and refuse shards of the
matrix dims and Partial inputs (the one-mesh-dim tables below); the norms and products are
compositions, checked for values; torch's refusals are refused at the call."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, ParamError, PlacementError, ShapeError
from tests.api.ops_harness import S0, S1, R, limit_for, place, run_api

pytestmark = pytest.mark.timeout(120)

MESHES = ((2,), (3,), (2, 2), (2, 2, 2))
_G = torch.Generator().manual_seed(11)

#: One input: a batch shard stays, anything else (matrix-dim shards, Partial) is refused.
_ONE = {(R,): R, (S0,): S0}
#: Two inputs of one batch shape: the batch dim sharded by either (the other is chunked).
_TWO = {(R, R): R, (S0, S0): S0, (S0, R): S0, (R, S0): S0}


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(11)


def _rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(shape, generator=_G, dtype=torch.float64).to(dtype)


def _general(b: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    # well conditioned: random plus n on the diagonal
    return (_rand(b, n, n, dtype=torch.float64) + n * torch.eye(n, dtype=torch.float64)).to(dtype)


def _spd(b: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    # symmetric positive definite: x x^T + n I
    x = _rand(b, n, n, dtype=torch.float64)
    return (x @ x.mT + n * torch.eye(n, dtype=torch.float64)).to(dtype)


def _run(graph: Any, name: str, fn: Callable[..., Any], fulls: list[torch.Tensor], want: Any,
         mesh_shape: tuple[int, ...], table: Any = None) -> None:  # fmt: skip
    wants = list(want) if isinstance(want, (tuple, list)) else [want]
    limit = limit_for(mesh_shape, n_d=5)
    exact = not any(t.is_floating_point() for t in fulls)
    accepted = run_api(
        graph, name, fn, fulls, mesh_shape, wants, table=table, exact=exact, limit=limit
    )
    assert accepted, f"{name}: no layout accepted on {mesh_shape}"


_SQUARE: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., torch.Tensor]]] = {
    "linalg.det": (dtorch.linalg.det, torch.linalg.det, _general),
    "linalg.slogdet": (dtorch.linalg.slogdet, torch.linalg.slogdet, _general),
    "logdet": (dtorch.logdet, torch.logdet, _spd),
    "linalg.inv": (dtorch.linalg.inv, torch.linalg.inv, _general),
    "linalg.cholesky": (
        lambda a: dtorch.linalg.cholesky(a, upper=True),
        lambda a: torch.linalg.cholesky(a, upper=True),
        _spd,
    ),
    "linalg.qr": (dtorch.linalg.qr, torch.linalg.qr, _general),
    "linalg.eigh": (
        lambda a: dtorch.linalg.eigh(a, "U"),
        lambda a: torch.linalg.eigh(a, "U"),
        _spd,
    ),
    "linalg.eigvalsh": (dtorch.linalg.eigvalsh, torch.linalg.eigvalsh, _spd),
    "linalg.svdvals": (dtorch.linalg.svdvals, torch.linalg.svdvals, _general),
    "linalg.pinv": (dtorch.linalg.pinv, torch.linalg.pinv, _general),
    "linalg.matrix_rank": (dtorch.linalg.matrix_rank, torch.linalg.matrix_rank, _general),
    "linalg.matrix_power": (
        lambda a: dtorch.linalg.matrix_power(a, -2),
        lambda a: torch.linalg.matrix_power(a, -2),
        _general,
    ),
    "linalg.matrix_exp": (
        dtorch.linalg.matrix_exp,
        torch.linalg.matrix_exp,
        lambda b, n, d: _general(b, n, d) / n,
    ),
}


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("name", sorted(_SQUARE))
def test_matrix_functions_keep_batch_shards(name: str, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    ours, theirs, make = _SQUARE[name]
    dtype = torch.float64 if len(mesh_shape) % 2 else torch.float32
    batch = 5 if mesh_shape[0] == 2 else 6  # uneven on 2 devices, even on 3
    a = make(batch, 3, dtype)
    _run(graph, name, ours, [a], theirs(a), mesh_shape, _ONE)


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_of_wide_matrices(full_matrices: bool, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a = _rand(3, 3, 5)
    want = torch.linalg.svd(a, full_matrices=full_matrices)
    fn = lambda t: dtorch.linalg.svd(t, full_matrices=full_matrices)  # noqa: E731
    _run(graph, "linalg.svd", fn, [a], want, mesh_shape, _ONE)


def test_a_4d_batch_sharded_on_both_batch_dims(graph) -> None:  # type: ignore[no-untyped-def]
    a = _general(6, 3, torch.float64).reshape(2, 3, 3, 3)
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    t = place(a, mesh, [S0, S1], graph)
    got = dtorch.linalg.inv(t)
    assert got.placements == [S0, S1]
    torch.testing.assert_close(got.to_torch(), torch.linalg.inv(a))
    sign, logabs = dtorch.linalg.slogdet(t)
    assert sign.placements == [S0, S1]
    torch.testing.assert_close(logabs.to_torch(), torch.linalg.slogdet(a).logabsdet)


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2)])
def test_solve_left_right_vectors_and_broadcast(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a, b = _general(4, 3, torch.float64), _rand(4, 3, 2, dtype=torch.float64)
    _run(
        graph,
        "linalg.solve",
        dtorch.linalg.solve,
        [a, b],
        torch.linalg.solve(a, b),
        mesh_shape,
        _TWO,
    )
    bt = b.mT.contiguous()
    right = lambda x, y: dtorch.linalg.solve(x, y, left=False)  # noqa: E731
    _run(
        graph,
        "linalg.solve",
        right,
        [a, bt],
        torch.linalg.solve(a, bt, left=False),
        mesh_shape,
        _TWO,
    )
    v = _rand(4, 3, dtype=torch.float64)  # a batch of vectors
    _run(graph, "linalg.solve", dtorch.linalg.solve, [a, v], torch.linalg.solve(a, v), mesh_shape)
    one = _general(1, 3, torch.float64)[0]  # one matrix for the whole batch of b
    _run(
        graph, "linalg.solve", dtorch.linalg.solve, [one, b], torch.linalg.solve(one, b), mesh_shape
    )


def test_integer_matrix_power(graph) -> None:  # type: ignore[no-untyped-def]
    a = torch.randint(-3, 4, (5, 3, 3), generator=_G)
    for n in (0, 1, 3):
        fn = lambda t, n=n: dtorch.linalg.matrix_power(t, n)  # noqa: E731
        _run(graph, "linalg.matrix_power", fn, [a], torch.linalg.matrix_power(a, n), (2,), _ONE)


def test_matrix_power_of_the_least_int64_is_refused(graph) -> None:  # type: ignore[no-untyped-def]
    """torch's matrix_power negates a negative n for the inverse's power: n = -2**63 has no
    negation and torch loops forever (at the call, in dtorch's dtype check): refused at once;
    the nearest powers that have one still run."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    eye = place(torch.eye(3).expand(2, 3, 3).contiguous(), mesh, [S0], graph)
    for call in (dtorch.linalg.matrix_power, dtorch.matrix_power):
        with pytest.raises(ParamError, match=r"n=-9223372036854775808 has no negation in int64"):
            call(eye, -(2**63))
    for n in (-(2**63) + 1, 2**63 - 1):
        got = dtorch.linalg.matrix_power(eye, n).to_torch()
        assert torch.equal(got, torch.linalg.matrix_power(eye.to_torch(), n))


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2), (2, 2, 2)])
def test_norms(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _rand(5, 4, 3)
    cases: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
        ("linalg.vector_norm", lambda t: dtorch.linalg.vector_norm(t, 3, (0, 2)),
         lambda t: torch.linalg.vector_norm(t, 3, (0, 2))),
        ("linalg.vector_norm", lambda t: dtorch.linalg.vector_norm(t, -1, dtype=torch.float64),
         lambda t: torch.linalg.vector_norm(t, -1, dtype=torch.float64)),
        ("linalg.vector_norm", lambda t: dtorch.linalg.vector_norm(t, float("inf")),
         lambda t: torch.linalg.vector_norm(t, float("inf"))),
        ("linalg.norm", lambda t: dtorch.linalg.norm(t, dim=1, keepdim=True),
         lambda t: torch.linalg.norm(t, dim=1, keepdim=True)),
        ("linalg.norm", dtorch.linalg.norm, torch.linalg.norm),
    ]  # fmt: skip
    for order in ("fro", "nuc", 1, -1, 2, -2, float("inf"), float("-inf")):
        cases.append((
            "linalg.matrix_norm",
            lambda t, o=order: dtorch.linalg.matrix_norm(t, o, dim=(2, 0), keepdim=True),
            lambda t, o=order: torch.linalg.matrix_norm(t, o, dim=(2, 0), keepdim=True),
        ))  # fmt: skip
    for name, ours, theirs in cases:
        _run(graph, name, ours, [x], theirs(x), mesh_shape)


def test_norm_of_a_matrix_with_ord(graph) -> None:  # type: ignore[no-untyped-def]
    m = _rand(5, 4, dtype=torch.float64)
    for order in ("fro", 2, -1, float("inf")):
        fn = lambda t, o=order: dtorch.linalg.norm(t, o)  # noqa: E731
        _run(graph, "linalg.norm", fn, [m], torch.linalg.norm(m, order), (2,))
    _run(
        graph,
        "linalg.norm",
        lambda t: dtorch.linalg.norm(t, 1),
        [m[0]],
        torch.linalg.norm(m[0], 1),
        (3,),
    )
    mat = lambda t: dtorch.linalg.matrix_norm(t, dtype=torch.float64)  # noqa: E731
    _run(
        graph,
        "linalg.matrix_norm",
        mat,
        [m.float()],
        torch.linalg.matrix_norm(m.float(), dtype=torch.float64),
        (2,),
    )


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_products(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    def draw(*shape: int) -> torch.Tensor:
        return _rand(*shape).to(dtype) if dtype.is_floating_point else torch.randint(
            -4, 5, shape, generator=_G)  # fmt: skip

    a, b = draw(5, 3), draw(5, 3)
    _run(graph, "linalg.cross", dtorch.linalg.cross, [a, b], torch.linalg.cross(a, b), mesh_shape)
    c, d = draw(3, 4), draw(1, 4)
    on0 = lambda x, y: dtorch.linalg.cross(x, y, dim=0)  # noqa: E731
    _run(
        graph,
        "linalg.cross",
        on0,
        [c, d.expand(3, 4).contiguous()],
        torch.linalg.cross(c, d.expand(3, 4), dim=0),
        mesh_shape,
    )
    m1, m2, m3, v = draw(4, 3), draw(3, 5), draw(5, 2), draw(4)
    chain = lambda x, y, z: dtorch.linalg.multi_dot([x, y, z])  # noqa: E731
    _run(
        graph,
        "linalg.multi_dot",
        chain,
        [m1, m2, m3],
        torch.linalg.multi_dot([m1, m2, m3]),
        mesh_shape,
    )
    ends = lambda x, y: dtorch.linalg.multi_dot([x, y, y.mT])  # noqa: E731
    _run(
        graph, "linalg.multi_dot", ends, [v, m1], torch.linalg.multi_dot([v, m1, m1.mT]), mesh_shape
    )
    t = draw(2, 4, 4)
    diag = lambda x: dtorch.linalg.diagonal(x, offset=1)  # noqa: E731
    _run(graph, "linalg.diagonal", diag, [t], torch.linalg.diagonal(t, offset=1), mesh_shape)
    mm = dtorch.linalg.matmul
    _run(graph, "matmul", mm, [m1, m2], torch.linalg.matmul(m1, m2), mesh_shape)


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2)])
def test_vecdot(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x, y = _rand(5, 4, dtype=torch.float64), _rand(4, dtype=torch.float64)
    _run(
        graph, "linalg.vecdot", dtorch.linalg.vecdot, [x, y], torch.linalg.vecdot(x, y), mesh_shape
    )
    on0 = lambda p, q: dtorch.linalg.vecdot(p, q, dim=0)  # noqa: E731
    _run(graph, "linalg.vecdot", on0, [x, x], torch.linalg.vecdot(x, x, dim=0), mesh_shape)


def test_aliases_methods_and_named_tuples(graph) -> None:  # type: ignore[no-untyped-def]
    a = _general(3, 3, torch.float64)
    t = dtorch.from_torch(a, device_mesh=dtorch.init_device_mesh("cpu", 2), graph=graph)
    for name in ("det", "logdet", "inverse"):
        torch.testing.assert_close(getattr(t, name)().to_torch(), getattr(a, name)())
        torch.testing.assert_close(
            getattr(dtorch, name)(input=t).to_torch(), getattr(torch, name)(a)
        )
    for got, want in ((t.slogdet(), a.slogdet()), (dtorch.linalg.slogdet(t),
                                                   torch.linalg.slogdet(a))):  # fmt: skip
        assert type(got) is type(want)
        torch.testing.assert_close(got.logabsdet.to_torch(), want.logabsdet)
    q, r = dtorch.linalg.qr(t, mode="r")
    assert tuple(q.shape) == (0,) and q.placements == [R]
    torch.testing.assert_close(r.to_torch(), torch.linalg.qr(a, mode="r").R)
    assert type(dtorch.linalg.svd(t)) is torch.return_types.linalg_svd
    assert type(dtorch.linalg.eigh(t)) is torch.return_types.linalg_eigh


def test_placements_refused_say_what_to_do(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    for placements in ([dtorch.Shard(1)], [dtorch.Shard(2)], [dtorch.Partial()]):
        t = place(_general(4, 3, torch.float32), mesh, placements, graph)
        with pytest.raises(
            PlacementError, match=r"^linalg\.inv: .*accepted.*Redistribute the matrix dims"
        ):
            dtorch.linalg.inv(t)
    b = place(_rand(4, 3, 2), mesh, [dtorch.Shard(1)], graph)
    with pytest.raises(PlacementError, match=r"^linalg\.solve: .*S\(1\)"):
        dtorch.linalg.solve(place(_general(4, 3, torch.float32), mesh, [R], graph), b)


def _refused(graph: Any) -> list[tuple[type[Exception], str, Callable[[], Any]]]:
    mesh = dtorch.init_device_mesh("cpu", 2)

    def put(x: torch.Tensor) -> dtorch.Tensor:
        return place(x, mesh, [R], graph)

    sq, wide = put(_general(2, 3, torch.float32)), put(_rand(2, 3, 4))
    ints, half = put(torch.ones(3, 3, dtype=torch.int64)), put(torch.eye(3).half())
    la = dtorch.linalg
    return [
        (ShapeError, "square", lambda: la.inv(wide)),
        (ShapeError, "at least 2 dimensions", lambda: la.det(put(torch.ones(3)))),
        (DtypeError, "floating point", lambda: la.inv(ints)),
        (DtypeError, "Half", lambda: la.det(half)),
        (DtypeError, "floating point", lambda: la.matrix_power(ints, -1)),
        (TypeError, "n", lambda: la.matrix_power(sq, 1.5)),
        (ParamError, "mode", lambda: la.qr(sq, mode="x")),
        (ParamError, "UPLO", lambda: la.eigh(sq, UPLO="x")),
        (TypeError, "upper", lambda: la.cholesky(sq, upper=1)),
        (ParamError, "Order 3", lambda: la.matrix_norm(sq, 3)),
        (TypeError, "ord", lambda: la.vector_norm(sq, "fro")),
        (DtypeError, "dtype", lambda: la.vector_norm(sq, dtype=torch.int64)),
        (ParamError, "different", lambda: la.matrix_norm(sq, dim=(1, 1))),
        (ShapeError, "1D or 2D", lambda: la.norm(sq, 2)),
        (ParamError, "2-tuple", lambda: la.norm(sq, "fro", dim=0)),
        (ShapeError, "length 3", lambda: la.cross(wide, wide)),
        (ShapeError, "same number of dimensions", lambda: la.cross(sq, sq[0])),
        (ShapeError, "at least 2 tensors", lambda: la.multi_dot([sq[0]])),
        (ShapeError, "2D", lambda: la.multi_dot([sq[0], sq, sq[0]])),
        (DtypeError, "same dtype", lambda: la.vecdot(sq, put(torch.ones(3, dtype=torch.float64)))),
        (DtypeError, "floating", lambda: la.vecdot(ints, ints)),
        (ShapeError, "Incompatible", lambda: la.solve(sq, put(_rand(2, 4, 1)))),
        (TypeError, "atol", lambda: la.pinv(sq, atol="x")),
    ]


def test_bad_arguments_are_refused_at_the_call(graph) -> None:  # type: ignore[no-untyped-def]
    for error, text, call in _refused(graph):
        with pytest.raises(error, match=text):
            call()


def test_refusals_derive_from_torchs_classes() -> None:
    # torch raises RuntimeError for these shapes, dtypes and arguments
    assert issubclass(ShapeError, RuntimeError) and issubclass(ParamError, RuntimeError)
    assert issubclass(DtypeError, RuntimeError)


def test_review_findings_match_torch(graph: dtorch.Graph) -> None:
    """A differential review's findings: qr's empty Q beside a sharded batch, the matrix
    norms' refusals, empty matrices and a sharded summed dim, the older tolerance
    arguments, either case of UPLO, and torch's refusal of a vector B with left=False."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    batch = _rand(4, 3, 3)
    q, r = dtorch.linalg.qr(place(batch, mesh, [S0], graph), mode="r")
    assert q.shape == (0,) and torch.equal(r.to_torch(), torch.linalg.qr(batch, mode="r").R)
    for shape, order in (((0, 5), 2), ((5, 0), 1), ((2, 0, 5), -1), ((3, 0), "nuc")):
        empty = torch.ones(shape)
        got = dtorch.linalg.matrix_norm(place(empty, mesh, [R], graph), order).to_torch()
        assert torch.equal(got, torch.linalg.matrix_norm(empty, order))
    a = _rand(4, 6)
    for order in (1, -1, math.inf, -math.inf):
        for where in (S0, S1):
            got = dtorch.linalg.matrix_norm(place(a, mesh, [where], graph), order).to_torch()
            torch.testing.assert_close(got, torch.linalg.matrix_norm(a, order))
    ints = place(torch.ones(2, 2, dtype=torch.int64), mesh, [R], graph)
    with pytest.raises(DtypeError, match="floating point"):
        dtorch.linalg.matrix_norm(ints, 1)
    with pytest.raises(DtypeError, match="narrowing"):
        dtorch.linalg.matrix_norm(place(a.double(), mesh, [R], graph), 1, dtype=torch.float32)
    near = torch.tensor([[2.0, 0.0], [0.0, 1e-3]])
    d_near = place(near, mesh, [R], graph)
    assert torch.equal(dtorch.linalg.pinv(d_near, 0.01).to_torch(), torch.linalg.pinv(near, 0.01))
    rank = dtorch.linalg.matrix_rank(d_near, 0.01).to_torch()
    assert torch.equal(rank, torch.linalg.matrix_rank(near, 0.01))
    with pytest.raises(TypeError, match="not both"):
        dtorch.linalg.pinv(d_near, 0.01, atol=0.1)
    spd = _spd(1, 3, torch.float64)[0]
    got = dtorch.linalg.eigvalsh(place(spd, mesh, [R], graph), UPLO="u").to_torch()
    torch.testing.assert_close(got, torch.linalg.eigvalsh(spd, UPLO="U"))
    with pytest.raises(ShapeError, match="left=False"):
        one, vector = (
            place(torch.ones(1, 1), mesh, [R], graph),
            place(torch.ones(1), mesh, [R], graph),
        )
        dtorch.linalg.solve(one, vector, left=False)
    with pytest.raises(DtypeError, match="one dtype"):
        single, double = (
            place(torch.ones(3, dtype=t), mesh, [R], graph) for t in (torch.float32, torch.float64)
        )
        dtorch.linalg.cross(single, double)


def test_norms_of_empty_matrices_and_dtype_kinds_as_torch(graph: dtorch.Graph) -> None:
    """An empty matrix's norm is 0 for the non-negative orders; a negative order takes a
    minimum over an empty dim and raises torch's IndexError (it returned 0); ``dtype=`` must
    be real for a real input and complex for a complex one, as torch says."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    for shape in ((3, 0, 0), (2, 3, 0), (2, 0, 3)):
        z = torch.zeros(shape)
        t = dtorch.from_torch(z, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
        for order in (2, 1, math.inf, -2, -1, -math.inf, "nuc", "fro"):
            try:
                want = torch.linalg.matrix_norm(z, order)
            except IndexError:
                with pytest.raises(IndexError, match="to have non-zero size"):
                    dtorch.linalg.matrix_norm(t, order)
                continue
            assert torch.equal(dtorch.linalg.matrix_norm(t, order).to_torch(), want), order
    x = dtorch.from_torch(torch.randn(3, 4), device_mesh=mesh, graph=graph)
    with pytest.raises(
        RuntimeError, match="dtype should be real for real inputs, but got ComplexDouble"
    ):
        dtorch.linalg.vector_norm(x, dtype=torch.complex128)
    with pytest.raises(RuntimeError, match="dtype should be real for real inputs"):
        dtorch.linalg.matrix_norm(x, dtype=torch.complex64)
    with pytest.raises(
        RuntimeError, match="dtype should be complex for complex inputs, but got Double"
    ):
        dtorch.linalg.vector_norm(x.cdouble(), dtype=torch.float64)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("vector", [False, True])
def test_solve_ex(vector: bool, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    """solve_ex's result and info, a singular matrix among them (its info non-zero)."""
    a = torch.randn(3, 4, 4, generator=_G, dtype=torch.float64)
    a[1, :, 2] = 0.0
    b = torch.randn(3, 4, *(() if vector else (2,)), generator=_G, dtype=torch.float64)
    want = torch.linalg.solve_ex(a, b)
    run_api(
        graph, "linalg.solve_ex", lambda x, y: tuple(torch.linalg.solve_ex(x, y)), [a, b],
        mesh_shape, [want.result, want.info],
        table=_TWO, limit=limit_for(mesh_shape, n_d=8), exact=False,
    )  # fmt: skip
    with pytest.raises(dtorch.DTorchError, match="singular"):
        dtorch.linalg.solve_ex(
            dtorch.tensor(a), dtorch.tensor(b), check_errors=True
        ).info.to_torch()


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl(hermitian: bool, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    """ldl_factor(_ex) and ldl_solve of symmetric (Hermitian) matrices: torch's own values."""
    dtype = torch.complex128 if hermitian else torch.float64
    a = torch.randn(3, 4, 4, generator=_G, dtype=dtype)
    a = a + a.mH if hermitian else a + a.mT
    b = torch.randn(3, 4, 2, generator=_G, dtype=dtype)
    factors = torch.linalg.ldl_factor_ex(a, hermitian=hermitian)
    run_api(
        graph, "linalg.ldl_factor_ex",
        lambda x: tuple(torch.linalg.ldl_factor_ex(x, hermitian=hermitian)), [a], mesh_shape,
        list(factors), table=_ONE, limit=limit_for(mesh_shape, n_d=8),
    )  # fmt: skip
    ld, pivots = factors.LD, factors.pivots
    run_api(
        graph, "linalg.ldl_solve",
        lambda f, p, y: torch.linalg.ldl_solve(f, p, y, hermitian=hermitian), [ld, pivots, b],
        mesh_shape, [torch.linalg.ldl_solve(ld, pivots, b, hermitian=hermitian)],
        table={(R, R, R): R, (S0, S0, S0): S0, (S0, R, R): S0, (R, S0, R): S0, (R, R, S0): S0,
               (S0, S0, R): S0, (S0, R, S0): S0, (R, S0, S0): S0},
        limit=limit_for(mesh_shape, n_d=8),
    )  # fmt: skip
    plain = dtorch.linalg.ldl_factor(dtorch.tensor(a), hermitian=hermitian)
    assert torch.equal(plain.LD.to_torch(), ld) and torch.equal(plain.pivots.to_torch(), pivots)


@pytest.mark.parametrize(("a", "b"), [((3, 3), (6, 3, 2)), ((1, 6, 3, 3), (4, 6, 3, 2))])
def test_solve_ex_info_has_the_batch_of_a(a, b, graph) -> None:  # type: ignore[no-untyped-def]
    """torch's info is A's own batch, not the batch A and B broadcast to."""
    ta, tb = torch.randn(a, generator=_G), torch.randn(b, generator=_G)
    want = torch.linalg.solve_ex(ta, tb)
    got = dtorch.linalg.solve_ex(dtorch.tensor(ta), dtorch.tensor(tb))
    assert torch.equal(got.info.to_torch(), want.info)
    torch.testing.assert_close(got.result.to_torch(), want.result)
