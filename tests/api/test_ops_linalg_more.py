"""The composites of ``dtorch.api.ops.linalg_more`` and ``index_more`` (``dot``, ``mv``,
``addmv``, ``baddbmm``, ``addbmm``, ``tensordot``, ``inner``, ``kron``, ``diagonal``,
``diag``, ``diag_embed``, ``trace``, ``index_fill``, ``index_copy``, ``take``, ``aminmax``)
through the public API against torch on the full tensors: float32, float64 and int64, even
and uneven shards, every layout on 1-D meshes of 2 and 3 devices (a seeded sample on 2-D
meshes); the output placements of the plain products from the one-mesh-dim tables of
``matmul``; torch's refusals refused at the call, naming the function called."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DTorchError, PlacementError
from dtorch.ir.placement import format_placements
from tests.api.ops_harness import S0, S1, P, R, limit_for, place, run_api

pytestmark = pytest.mark.timeout(60)

MESHES = ((2,), (3,), (2, 2), (2, 3))
DTYPES = (torch.float32, torch.float64, torch.int64)
_G = torch.Generator().manual_seed(7)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(7)


def _rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=_G, dtype=dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=_G).bool()
    return torch.randint(-5, 6, shape, generator=_G).to(dtype)


def _run(graph: Any, name: str, fn: Callable[..., Any], fulls: list[torch.Tensor], want: Any,
         mesh_shape: tuple[int, ...], table: Any = None, limit: int = 400) -> None:  # fmt: skip
    inexact = any(t.dtype.is_floating_point or t.dtype.is_complex for t in fulls)
    exact = not inexact or name in _EXACT
    wants = list(want) if isinstance(want, tuple) else [want]
    limit = min(limit, limit_for(mesh_shape, n_d=6))
    accepted = run_api(
        graph, name, _named(name, fn), fulls, mesh_shape, wants, table=table, exact=exact,
        limit=limit,
    )  # fmt: skip
    assert accepted, f"{name}: no layout accepted on {mesh_shape}"


def _named(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, whose placement refusals must name ``name`` and what it accepts; a composite's
    names the operands of its refusing part, so the harness is shown the inputs' too."""

    def run(*inputs: dtorch.Tensor) -> Any:
        try:
            return fn(*inputs)
        except PlacementError as error:
            text = str(error)
            assert text.startswith(f"{name}: ") and "accepted" in text, text
            given = ", ".join(format_placements(t.placements) for t in inputs)
            raise PlacementError(f"{text} (inputs {given})") from error

    return run


_EXACT = {"diagonal", "diag", "diag_embed", "index_fill", "index_copy", "take", "aminmax"}
_PRODUCT = {(R, R): R, (P, R): P, (R, P): P}


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [5, 6])
def test_dot_vdot_mv(n: int, dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a, b, m = _rand(n, dtype=dtype), _rand(n, dtype=dtype), _rand(4, n, dtype=dtype)
    # a Replicate operand is chunked like the other's shard of the contracted dim
    table = {**_PRODUCT, (S0, S0): P, (S0, R): P, (R, S0): P}
    _run(graph, "dot", dtorch.dot, [a, b], torch.dot(a, b), mesh_shape, table)
    _run(graph, "vdot", lambda x, y: x.vdot(y), [a, b], torch.vdot(a, b), mesh_shape, table)
    table = {**_PRODUCT, (S0, R): S0, (S1, S0): P, (S1, R): P, (R, S0): P}
    _run(graph, "mv", dtorch.mv, [m, b], torch.mv(m, b), mesh_shape, table)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", (*DTYPES, torch.complex64))  # complex: beta 0.5 was 0
def test_add_products(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    beta, alpha = (2, 3) if dtype == torch.int64 else (0.5, -1.5)
    x, m, v = _rand(5, dtype=dtype), _rand(5, 3, dtype=dtype), _rand(3, dtype=dtype)
    want = torch.addmv(x, m, v, beta=beta, alpha=alpha)
    _run(graph, "addmv", lambda *t: dtorch.addmv(*t, beta=beta, alpha=alpha), [x, m, v], want,
         mesh_shape, limit=60)  # fmt: skip
    b1, b2 = _rand(3, 5, 4, dtype=dtype), _rand(3, 4, 2, dtype=dtype)
    x3, x2 = _rand(5, 1, dtype=dtype), _rand(5, 2, dtype=dtype)
    want = torch.baddbmm(x3, b1, b2, beta=beta, alpha=alpha)
    _run(graph, "baddbmm", lambda *t: t[0].baddbmm(*t[1:], beta=beta, alpha=alpha),
         [x3, b1, b2], want, mesh_shape, limit=40)  # fmt: skip
    want = torch.addbmm(x2, b1, b2, beta=beta, alpha=alpha)
    _run(graph, "addbmm", lambda *t: dtorch.addbmm(*t, beta=beta, alpha=alpha), [x2, b1, b2],
         want, mesh_shape, limit=40)  # fmt: skip


def test_add_products_beta_alpha_zero(graph) -> None:  # type: ignore[no-untyped-def]
    nan = torch.full((2,), float("nan"))
    m, v = torch.ones(2, 3), torch.ones(3)
    out = dtorch.addmv(dtorch.from_torch(nan), dtorch.from_torch(m), dtorch.from_torch(v), beta=0)
    assert out.tolist() == torch.addmv(nan, m, v, beta=0).tolist() == [3.0, 3.0]
    bad = dtorch.from_torch(torch.full((2, 3), float("nan")))
    out = dtorch.addmv(dtorch.ones(2), bad, dtorch.from_torch(v), alpha=0, beta=2)
    assert out.tolist() == [2.0, 2.0]
    i = dtorch.tensor([1, 1])  # numbers are truncated for integer tensors, as in torch
    ti = torch.tensor([1, 1])
    im, iv = torch.ones(2, 3, dtype=torch.int64), torch.ones(3, dtype=torch.int64)
    got = dtorch.addmv(i, dtorch.from_torch(im), dtorch.from_torch(iv), beta=0.5, alpha=1.5)
    assert got.tolist() == torch.addmv(ti, im, iv, beta=0.5, alpha=1.5).tolist()


def test_in_place_products(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, m, v = _rand(4), _rand(4, 3), _rand(3)
    t = place(x, mesh, [S0], graph)
    assert t.addmv_(place(m, mesh, [R], graph), place(v, mesh, [R], graph), beta=2) is t
    torch.testing.assert_close(t.to_torch(), torch.addmv(x, m, v, beta=2))
    assert t.placements == [S0]
    x3, b1, b2 = _rand(2, 4, 2), _rand(2, 4, 3), _rand(2, 3, 2)
    t = place(x3, mesh, [S0], graph)
    t.baddbmm_(place(b1, mesh, [S0], graph), place(b2, mesh, [S0], graph), alpha=0.5)
    torch.testing.assert_close(t.to_torch(), torch.baddbmm(x3, b1, b2, alpha=0.5))
    x2 = _rand(4, 2)
    t = place(x2, mesh, [R], graph)
    t.addbmm_(place(b1, mesh, [S1], graph), place(b2, mesh, [R], graph))
    torch.testing.assert_close(t.to_torch(), torch.addbmm(x2, b1, b2))
    assert t.placements == [R]


_TENSORDOT = [
    ((2, 3, 4), (4, 3, 5), ([1, 2], [1, 0])),
    ((2, 3, 4), (4, 5), 1),
    ((3, 2), (2, 3), 0),
    ((3, 5), (3, 5), 2),
]


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize(("sa", "sb", "dims"), _TENSORDOT)
def test_tensordot(sa, sb, dims, mesh_shape, graph) -> None:  # type: ignore[no-untyped-def]
    a, b = _rand(*sa, dtype=torch.float64), _rand(*sb, dtype=torch.float64)
    want = torch.tensordot(a, b, dims=dims)
    _run(graph, "tensordot", lambda x, y: dtorch.tensordot(x, y, dims=dims), [a, b], want,
         mesh_shape, limit=60)  # fmt: skip


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_inner_kron(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    a, b = _rand(3, 4, dtype=dtype), _rand(5, 4, dtype=dtype)
    _run(graph, "inner", dtorch.inner, [a, b], torch.inner(a, b), mesh_shape, limit=60)
    s = _rand(dtype=dtype)
    _run(graph, "inner", lambda x, y: y.inner(x), [a, s], torch.inner(s, a), mesh_shape, limit=20)
    k1, k2 = _rand(3, 2, dtype=dtype), _rand(2, 3, dtype=dtype)
    _run(graph, "kron", dtorch.kron, [k1, k2], torch.kron(k1, k2), mesh_shape, limit=60)
    v = _rand(3, dtype=torch.int64)
    _run(graph, "kron", lambda x, y: x.kron(y), [k1, v], torch.kron(k1, v), mesh_shape, limit=30)


_DIAGONALS = [
    ((4, 5), 0, 0, 1),
    ((4, 5), 2, 0, 1),
    ((5, 4), -1, 0, 1),
    ((3, 4, 5), -1, 2, 0),
    ((2, 3, 3), 1, -1, -2),
    ((3, 2), 4, 0, 1),
]


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize(("shape", "offset", "d1", "d2"), _DIAGONALS)
def test_diagonal(shape, offset, d1, d2, mesh_shape, graph) -> None:  # type: ignore[no-untyped-def]
    for dtype in (torch.float32, torch.int64, torch.bool):
        x = _rand(*shape, dtype=dtype)
        want = torch.diagonal(x, offset, d1, d2).contiguous()
        fn = lambda t: t.diagonal(offset, d1, d2)  # noqa: E731
        _run(graph, "diagonal", fn, [x], want, mesh_shape, limit=30)
    if len(shape) == 2:
        _run(graph, "diag", lambda t: dtorch.diag(t, offset), [x], torch.diag(x, offset),
             mesh_shape)  # fmt: skip
        y = _rand(*shape, dtype=torch.float64)
        _run(graph, "trace", lambda t: t.trace(), [y], torch.trace(y), mesh_shape)


_EMBEDS = [((5,), 0, -2, -1), ((5,), 2, 0, 1), ((2, 3), -1, 0, 2), ((2, 3), 1, 2, 0)]


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize(("shape", "offset", "d1", "d2"), _EMBEDS)
def test_diag_embed(shape, offset, d1, d2, mesh_shape, graph) -> None:  # type: ignore[no-untyped-def]
    for dtype in (torch.float64, torch.int64):
        x = _rand(*shape, dtype=dtype)
        want = torch.diag_embed(x, offset, d1, d2)
        fn = lambda t: dtorch.diag_embed(t, offset, d1, d2)  # noqa: E731
        _run(graph, "diag_embed", fn, [x], want, mesh_shape, limit=30)
    if len(shape) == 1:
        _run(graph, "diag", lambda t: t.diag(offset), [x], torch.diag(x, offset), mesh_shape)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_index_fill_copy(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _rand(5, 3, dtype=dtype)
    index = torch.tensor([4, -1, 0])
    for dim, ids in ((0, index), (1, torch.tensor(1))):
        want = torch.index_fill(x, dim, ids, 2.5)
        fn = lambda t, d=dim, i=ids: t.index_fill(d, i, 2.5)  # noqa: E731
        _run(graph, "index_fill", fn, [x], want, mesh_shape, limit=30)
    zero = torch.index_fill(x, 1, torch.tensor([0, 2]), 0)
    _run(graph, "index_fill", lambda t: dtorch.index_fill(t, 1, torch.tensor([0, 2]), 0), [x],
         zero, mesh_shape, table={(R,): R, (S0,): S0, (S1,): S1, (P,): P})  # fmt: skip
    src, ids = _rand(2, 3, dtype=dtype), torch.tensor([3, 1])
    want = torch.index_copy(x, 0, ids, src)
    fn = lambda t, s: dtorch.index_copy(t, 0, ids, s)  # noqa: E731
    _run(graph, "index_copy", fn, [x, src], want, mesh_shape, limit=30)
    src = _rand(5, 2, dtype=dtype)
    want = torch.index_copy(x, 1, torch.tensor([2, 0]), src)
    fn = lambda t, s: t.index_copy(1, torch.tensor([2, 0]), s)  # noqa: E731
    _run(graph, "index_copy", fn, [x, src], want, mesh_shape, limit=30)


def test_index_ops_dtorch_index_and_in_place(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = _rand(4, 6)
    ids = torch.tensor([5, -2, 0])
    for pi in ([R], [S0]):
        index = place(ids, mesh, pi, graph)
        for px in ([R], [S0], [S1]):
            t = place(x, mesh, px, graph)
            got = t.index_fill(1, index, place(torch.tensor(-3.0), mesh, [R], graph))
            assert torch.equal(got.to_torch(), x.index_fill(1, ids, -3.0))
            assert t.index_fill_(1, index, 9) is t and t.placements == px
            assert torch.equal(t.to_torch(), x.index_fill(1, ids, 9))
            flat = place(torch.tensor([[23, -1], [0, 7]]), mesh, pi, graph)
            assert torch.equal(
                dtorch.take(t, flat).to_torch(), torch.take(t.to_torch(), flat.to_torch())
            )
    src = _rand(4, 2)
    for px in ([R], [S0]):
        t = place(x, mesh, px, graph)
        index = place(torch.tensor([5, 1]), mesh, [R], graph)
        assert t.index_copy_(1, index, place(src, mesh, [R], graph)) is t
        assert torch.equal(t.to_torch(), x.index_copy(1, torch.tensor([5, 1]), src))
        assert t.placements == px


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_take(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _rand(3, 5, dtype=dtype)
    ids = torch.tensor([[14, -1, 0], [7, 7, -15]])
    _run(graph, "take", lambda t: dtorch.take(t, ids), [x], torch.take(x, ids), mesh_shape)
    _run(graph, "take", lambda t: t.take(torch.tensor(3)), [x], torch.take(x, torch.tensor(3)),
         mesh_shape)  # fmt: skip


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", (*DTYPES, torch.bool))
def test_aminmax(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _rand(5, 3, dtype=dtype)
    for kw in ({}, {"dim": 0}, {"dim": -1, "keepdim": True}, {"keepdim": True}):
        want = torch.aminmax(x, **kw)  # type: ignore[arg-type]
        fn = lambda t, kw=kw: dtorch.aminmax(t, **kw)  # noqa: E731
        _run(graph, "aminmax", fn, [x], (want.min, want.max), mesh_shape)
    got = dtorch.tensor([[3, 1]]).aminmax(dim=1)
    assert isinstance(got, torch.return_types.aminmax)
    assert (got.min.tolist(), got.max.tolist()) == ([1], [3])


_I = torch.int64
_D = torch.float64
_ZERO = torch.tensor([0])
_I8 = torch.int8
_B = torch.bool
#: (the function's name, a call of it on ``m``: ``torch`` or ``dtorch``).
_REFUSALS: list[tuple[str, Callable[[Any], Any]]] = [
    ("dot", lambda m: m.dot(m.ones(3), m.ones(4))),
    ("dot", lambda m: m.dot(m.ones(3), m.ones(3, dtype=_D))),
    ("dot", lambda m: m.dot(m.ones(3, 1), m.ones(3))),
    ("dot", lambda m: m.dot(m.ones(2, dtype=torch.bool), m.ones(2, dtype=torch.bool))),
    ("vdot", lambda m: m.vdot(m.ones(2), m.ones(3))),
    ("mv", lambda m: m.mv(m.ones(2, 3), m.ones(4))),
    ("mv", lambda m: m.mv(m.ones(2, 3), m.ones(3, 1))),
    ("mv", lambda m: m.mv(m.ones(2, 3), m.ones(3, dtype=_D))),
    ("addmv", lambda m: m.addmv(m.ones(3), m.ones(2, 3), m.ones(3))),
    ("addmv", lambda m: m.addmv(m.ones(2), m.ones(2, 3, dtype=_I), m.ones(3, dtype=_I))),
    ("baddbmm", lambda m: m.baddbmm(m.ones(2, 3), m.ones(2, 2, 3), m.ones(3, 3, 3))),
    ("baddbmm", lambda m: m.baddbmm(m.ones(2, 4), m.ones(2, 2, 3), m.ones(2, 3, 3))),
    ("addbmm", lambda m: m.addbmm(m.ones(2, 3), m.ones(2, 2, 3, dtype=_D), m.ones(2, 3, 3))),
    ("addbmm", lambda m: m.addbmm(m.ones(2, 3), m.ones(2, 3), m.ones(3, 3, 3))),
    ("tensordot", lambda m: m.tensordot(m.ones(2, 3), m.ones(4, 4), dims=1)),
    ("tensordot", lambda m: m.tensordot(m.ones(2, 3), m.ones(3, 4), dims=-1)),
    ("tensordot", lambda m: m.tensordot(m.ones(2, 3), m.ones(3, 4), dims=3)),
    ("tensordot", lambda m: m.tensordot(m.ones(2, 3), m.ones(3, 4), dims=([0], [0, 1]))),
    ("tensordot", lambda m: m.tensordot(m.ones(2, 3), m.ones(3, 4, dtype=_D), dims=1)),
    ("inner", lambda m: m.inner(m.ones(2, 3), m.ones(4, 2))),
    ("inner", lambda m: m.inner(m.ones(2, 3), m.ones(4, 3, dtype=_D))),
    ("diagonal", lambda m: m.diagonal(m.ones(2, 3), 0, 1, 1)),
    ("diagonal", lambda m: m.diagonal(m.ones(2, 3), 0, 0, 3)),
    ("diag_embed", lambda m: m.diag_embed(m.ones(3), 0, 0, 0)),
    ("diag", lambda m: m.diag(m.ones(2, 2, 2))),
    ("trace", lambda m: m.ones(2, 2, 2).trace()),
    ("trace", lambda m: m.ones(2, 2, dtype=torch.bool).trace()),
    ("index_fill", lambda m: m.index_fill(m.ones(2, 3), 1, torch.tensor([3]), 1.0)),
    ("index_fill", lambda m: m.index_fill(m.ones(2, 3), 1, torch.tensor([1.0]), 1.0)),
    ("index_fill", lambda m: m.index_fill(m.ones(2, 3), 2, torch.tensor([0]), 1.0)),
    ("index_fill", lambda m: m.index_fill(m.ones(3), 0, torch.tensor([0]), m.ones(1))),
    ("index_copy", lambda m: m.index_copy(m.ones(2, 3), 1, torch.tensor([-1]), m.ones(2, 1))),
    ("index_copy", lambda m: m.index_copy(m.ones(2, 3), 1, torch.tensor([0, 1]), m.ones(2, 3))),
    ("index_copy", lambda m: m.index_copy(m.ones(2, 3), 1, torch.tensor([0]), m.ones(2, 1, 1))),
    ("index_copy", lambda m: m.index_copy(m.ones(2, 3), 1, torch.tensor([[0]]), m.ones(2, 1))),
    ("index_copy", lambda m: m.index_copy(m.ones(2, 3), 1, torch.tensor([0]), m.ones(3, 1))),
    ("index_copy", lambda m: m.index_copy(m.ones(2, 3), 1, _ZERO, m.ones(2, 1, dtype=_D))),
    ("index_fill", lambda m: m.index_fill(m.zeros(3, dtype=_I8), 0, _ZERO, 300)),
    ("index_fill", lambda m: m.index_fill(m.zeros(3, dtype=_I8), 0, _ZERO, float("nan"))),
    ("index_fill", lambda m: m.index_fill(m.zeros(3, dtype=_I8), 0, _ZERO, torch.tensor(-129))),
    ("index_fill", lambda m: m.index_fill(m.zeros(3, dtype=torch.float16), 0, _ZERO, 1e6)),
    ("index_fill", lambda m: m.index_fill(m.tensor(1.0), 1, _ZERO, 2.0)),
    ("index_fill", lambda m: m.index_fill(m.tensor(1.0), 0, torch.tensor([1]), 2.0)),
    ("index_copy", lambda m: m.index_copy(m.tensor(1.0), 0, torch.tensor([-1]), m.tensor(2.0))),
    ("index_copy", lambda m: m.index_copy(m.tensor(1.0), 0, _ZERO, m.ones(1, 1))),
    ("index_copy", lambda m: m.index_copy(m.ones(3), 0, torch.tensor([0, 1]), m.tensor(2.0))),
    ("index_copy", lambda m: m.index_copy(m.ones(3, 2), 0, _ZERO, m.tensor(2.0))),
    ("tensordot", lambda m: m.tensordot(m.ones(2, 3, dtype=_B), m.ones(3, 2, dtype=_B), 1)),
    ("tensordot", lambda m: m.tensordot(m.ones(3, dtype=_B), m.ones(3, dtype=_B), 1)),
    ("tensordot", lambda m: m.tensordot(m.ones(0, dtype=_B), m.ones(0, dtype=_B), 1)),
    ("tensordot", lambda m: m.tensordot(m.ones(2, dtype=_B), m.ones(3, dtype=_B), 0)),
    ("tensordot", lambda m: m.tensordot(m.ones(2, 3), m.ones(3, 4), dims=(1, 0))),
    ("tensordot", lambda m: m.tensordot(m.ones(2, 3), m.ones(3, 4), dims=[1, 0])),
    ("tensordot", lambda m: m.tensordot(m.ones(2, 3), m.ones(3, 4), dims=([1], 0))),
    ("tensordot", lambda m: m.tensordot(m.ones(2, 3), m.ones(3, 4), dims=([True], [0]))),
    ("tensordot", lambda m: m.tensordot(m.ones(2, 0), m.ones(0, 2, dtype=_D), dims=1)),
    ("take", lambda m: m.take(m.ones(2, 3), torch.tensor([6]))),
    ("take", lambda m: m.take(m.ones(2, 3), torch.tensor([0], dtype=torch.int32))),
    ("aminmax", lambda m: m.aminmax(m.ones(0))),
    ("aminmax", lambda m: m.aminmax(m.ones(2, 3), dim=(0, 1))),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "call"), _REFUSALS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(_REFUSALS)]
)
def test_refusals(name: str, call: Callable[[Any], Any], graph) -> None:  # type: ignore[no-untyped-def]
    """Refused at the call, with an exception of torch's class (a dtorch error, too, where it
    is one of torch's RuntimeErrors), the message naming the function."""
    with pytest.raises(Exception) as torch_error:
        call(torch)
    with pytest.raises(Exception) as ours:
        call(dtorch)
    wanted = type(torch_error.value)
    if wanted is NotImplementedError:  # torch's "not implemented for 'Bool'": a dtype refusal
        wanted = RuntimeError
    assert isinstance(ours.value, wanted), f"{ours.value!r} is no {wanted.__name__}"
    if not isinstance(ours.value, TypeError):
        assert isinstance(ours.value, (DTorchError, IndexError))
    assert str(ours.value).startswith(f"{name}"), str(ours.value)


def test_index_fill_and_copy_of_a_0d_input(graph: dtorch.Graph) -> None:
    """torch indexes a 0-d tensor as one of one element (dim 0 or -1, index 0 or, for
    index_fill, -1); index_copy takes a 0-d source, or a one-element one, too."""
    x = torch.tensor(5.0)
    cases: list[Callable[[Any, Any], Any]] = [
        lambda m, t: m.index_fill(t, 0, torch.tensor([0]), 7.0),
        lambda m, t: m.index_fill(t, -1, torch.tensor(-1), 7.0),
        lambda m, t: m.index_fill(t, 0, torch.tensor([], dtype=torch.int64), 7.0),
        lambda m, t: t.index_fill(0, torch.tensor([0]), torch.tensor(3)),
        lambda m, t: m.index_copy(t, 0, torch.tensor([0]), m.tensor(3.0)),
        lambda m, t: m.index_copy(t, -1, torch.tensor(0), m.tensor([3.0])),
        lambda m, t: m.index_copy(t, 0, torch.tensor([], dtype=torch.int64), m.ones(0)),
        lambda m, t: m.index_copy(m.zeros(3), 0, torch.tensor([2]), m.tensor(3.0)),
    ]
    for call in cases:
        want = call(torch, x.clone())
        got = call(dtorch, dtorch.from_torch(x))  # on the default mesh, as m.tensor's
        assert got.shape == want.shape and torch.equal(got.to_torch(), want)
    t = dtorch.from_torch(x)
    assert t.index_fill_(0, torch.tensor([0]), 1.5) is t and t.to_torch().item() == 1.5
    assert t.index_copy_(0, _ZERO, dtorch.tensor([2.5])) is t and t.to_torch().item() == 2.5
    assert t.shape == torch.Size([])


def test_index_fill_values_that_fit(graph: dtorch.Graph) -> None:
    """A value that fits the input's dtype as torch converts it: -1 into uint8 (255), a float
    truncated into int8, anything into bool, a dtorch int8 value into int64 (not read)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    for dtype, value in ((torch.uint8, -1), (_I8, 2.5), (_I8, -128), (_B, 5),
                         (torch.float16, float("inf"))):  # fmt: skip
        full = torch.zeros(3, dtype=dtype)
        want = torch.index_fill(full, 0, torch.tensor([1]), value)
        for v in (value, torch.tensor(value)):
            got = dtorch.index_fill(place(full, mesh, [S0], graph), 0, torch.tensor([1]), v)
            assert torch.equal(got.to_torch(), want), (dtype, v)
    small = dtorch.tensor(5, dtype=_I8, device_mesh=mesh)
    got = dtorch.index_fill(place(torch.zeros(3, dtype=_I), mesh, [S0], graph), 0, _ZERO, small)
    assert got.to_torch().tolist() == [5, 0, 0]


def test_a_dtorch_value_the_input_cannot_hold_is_cast_on_the_devices(graph: dtorch.Graph) -> None:
    """A documented difference: torch reads a 0-d value tensor and refuses 300 for int8; a
    dtorch value stays on the devices (no fetch, it traces) and is cast as ``to`` casts."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = place(torch.zeros(3, dtype=_I8), mesh, [S0], graph)
    got = dtorch.index_fill(x, 0, _ZERO, dtorch.tensor(300, device_mesh=mesh))
    assert got.to_torch().tolist() == [torch.tensor(300).to(_I8).item(), 0, 0]


def test_bool_tensordot_where_nothing_is_summed(graph: dtorch.Graph) -> None:
    """torch's bool tensordot computes where no product is summed (an empty operand, the
    result not 0-d); the others are refused above."""
    for sa, sb, dims in (((0, 3), (3, 2), 1), ((2, 0), (0, 2), 1), ((0,), (3,), 0),
                         ((2, 3, 0), (3, 0, 2), 2)):  # fmt: skip
        a, b = torch.ones(sa, dtype=_B), torch.ones(sb, dtype=_B)
        want = torch.tensordot(a, b, dims)
        got = dtorch.tensordot(dtorch.from_torch(a), dtorch.from_torch(b), dims)
        assert got.dtype == _B and torch.equal(got.to_torch(), want)


def test_composite_refusals_name_the_call(graph: dtorch.Graph) -> None:
    """A refusal of a composite's inner operator (take's reshape, the alpha=0 forms' expand,
    index_copy's expand) names the operator the user called."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    mesh2 = dtorch.init_device_mesh("cpu", (2, 2))
    index = place(torch.arange(6).reshape(3, 2), mesh2, [S0, S1], graph)
    with pytest.raises(PlacementError, match=r"^take: .*accepted"):
        dtorch.take(place(torch.ones(2, 3), mesh2, [R, R], graph), index)
    one = place(torch.ones(1), mesh, [S0], graph)
    row = place(torch.ones(1, 4), mesh, [S0], graph)
    ids = place(torch.tensor([0]), mesh, [S0], graph)
    ones = lambda *shape: dtorch.ones(*shape, device_mesh=mesh)  # noqa: E731
    calls = [
        ("addmv", lambda: dtorch.addmv(one, ones(4, 3), ones(3), alpha=0)),
        ("baddbmm", lambda: dtorch.baddbmm(row, ones(3, 4, 2), ones(3, 2, 4), alpha=0)),
        ("addbmm", lambda: dtorch.addbmm(row, ones(3, 4, 2), ones(3, 2, 4), alpha=0)),
        ("index_copy", lambda: dtorch.index_copy(ones(3, 2) * 0, 1, ids, ones(3, 1))),
    ]
    for name, call in calls:
        with pytest.raises(PlacementError, match=rf"^{name}: .*accepted"):
            call()


def test_placement_refusals_name_the_call(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    a, b = place(_rand(3, 2), mesh, [R], graph), place(_rand(2, 3), mesh, [S0], graph)
    with pytest.raises(PlacementError, match=r"^kron: got \(R,\) and \(S\(0\),\)"):
        dtorch.kron(a, b)
    x = place(_rand(4, 3), mesh, [S0], graph)
    with pytest.raises(PlacementError, match=r"^index_copy: "):
        x.index_copy(0, torch.tensor([1]), place(_rand(1, 3), mesh, [R], graph))


def test_aminmax_over_an_empty_dim_raises_torchs_index_error(graph: dtorch.Graph) -> None:
    """torch raises IndexError over an empty dim (a ParamError here before) and RuntimeError
    for an empty tensor without a dim."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    with pytest.raises(IndexError, match="non-zero size"):
        torch.aminmax(torch.zeros(2, 0), dim=1)
    with pytest.raises(IndexError, match="non-zero size"):
        dtorch.aminmax(dtorch.from_torch(torch.zeros(2, 0), device_mesh=mesh), dim=1)
    with pytest.raises(RuntimeError, match="no identity"):
        dtorch.aminmax(dtorch.from_torch(torch.zeros(0), device_mesh=mesh))
