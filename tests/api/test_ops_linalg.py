"""matmul / ``@``, ``linear`` (column- and row-parallel), ``outer`` and ``einsum`` through the
public API against torch, on 1-D, 2-D and 3-D meshes, even and uneven shards: every layout on
1-D meshes (a seeded sample on the larger ones), the output placements from the one-mesh-dim
tables of the linear algebra (a shard of a kept dim stays, a shard of the contracted dim on
both sides gives Partial, Partial times Replicate stays Partial), and the rejections."""

from __future__ import annotations

import operator
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import MeshError, PlacementError, ShapeError
from tests.api.image_harness import split_partial
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    S2,
    P,
    R,
    Table,
    expect_refusal,
    limit_for,
    place,
    run_api,
)

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(101)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(101)


_LINEAR_ROWS = {(P, R): P, (R, P): P}  # matmul is linear in each operand


def _chunking(table: Table) -> Table:
    """``table`` and, for each row of two operands sharded on the contracted dim, the rows
    where one of them is Replicate (chunked like the other: Partial too)."""
    more = dict(table)
    for (a, b, *rest), out in table.items():
        if out == P and isinstance(a, dtorch.Shard) and isinstance(b, dtorch.Shard):
            more[(a, R, *rest)] = more[(R, b, *rest)] = P
    return more


def _randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(shape, generator=_G).to(dtype)


#: (shape of a, shape of b, the one-mesh-dim table of a @ b).
_MATMUL: list[tuple[tuple[int, ...], tuple[int, ...], Table]] = [
    ((5, 3), (3, 4), {(R, R): R, (S0, R): S0, (R, S1): S1, (S1, S0): P, **_LINEAR_ROWS}),
    ((3,), (3, 4), {(R, R): R, (R, S1): S0, (S0, S0): P, **_LINEAR_ROWS}),
    ((5, 3), (3,), {(R, R): R, (S0, R): S0, (S1, S0): P, **_LINEAR_ROWS}),
    ((3,), (3,), {(R, R): R, (S0, S0): P, **_LINEAR_ROWS}),
    (
        (2, 5, 3), (3, 4),
        {(R, R): R, (S0, R): S0, (S1, R): S1, (R, S1): S2, (S2, S0): P, **_LINEAR_ROWS},
    ),
    (
        (3, 5, 2), (3, 2, 4),
        {
            (R, R): R, (S0, R): S0, (R, S0): S0, (S0, S0): S0, (S1, R): S1, (R, S2): S2,
            (S2, S1): P, **_LINEAR_ROWS,
        },
    ),
]  # fmt: skip
_MATMUL = [(sa, sb, _chunking(table)) for sa, sb, table in _MATMUL]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("sa", "sb", "table"), _MATMUL)
def test_matmul_every_layout(  # type: ignore[no-untyped-def]
    sa, sb, table, mesh_shape, graph
) -> None:
    a, b = _randn(*sa), _randn(*sb)
    accepted = run_api(
        graph, "matmul", operator.matmul, [a, b], mesh_shape, [a @ b], table=table,
        exact=False, limit=limit_for(mesh_shape, n_d=14), seed=len(sa) + len(sb),
    )  # fmt: skip
    assert len(accepted) == len(table) or len(mesh_shape) > 1


def test_matmul_spellings(graph: dtorch.Graph) -> None:
    """``@``, ``matmul`` (method and function): S(1) x S(0) -> Partial, R x S(1) -> S(1)."""
    mesh = dtorch.init_device_mesh("cpu", 4)
    a, b = _randn(6, 8), _randn(8, 5)
    ta, tb = place(a, mesh, [S1], graph), place(b, mesh, [S0], graph)
    for out in (ta @ tb, ta.matmul(tb), dtorch.matmul(ta, tb)):
        assert out.placements == [P]
        torch.testing.assert_close(out.to_torch(), a @ b)
    out = place(a, mesh, [R], graph) @ place(b, mesh, [S1], graph)
    assert out.placements == [S1]
    torch.testing.assert_close(out.to_torch(), a @ b)


@pytest.mark.parametrize(
    "dtype", [torch.float64, torch.bfloat16, torch.int64, torch.float16], ids=str
)
def test_matmul_dtypes(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    a, b = (_randn(5, 6) * 3).to(dtype), (_randn(6, 3) * 3).to(dtype)
    want = a @ b
    partial = dtype != torch.float16  # see the xfail below
    ta = place(a, mesh, [S1 if partial else S0, S0], graph)
    tb = place(b, mesh, [S0 if partial else R, R], graph)
    out = ta @ tb
    assert out.dtype == want.dtype and out.placements == [P if partial else S0, S0]
    torch.testing.assert_close(out.to_torch(), want)


@pytest.mark.xfail(
    strict=True,
    reason="a float16 matmul sharded on the contracted dim rounds every partial product to "
    "float16 before the partials are summed (also in float16): several roundings where torch "
    "accumulates the whole dot product in float32 and rounds once; off by up to ~3 ulp",
)
def test_matmul_float16_partial_rounds_once(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    a, b = (_randn(5, 6) * 3).half(), (_randn(6, 3) * 3).half()
    out = place(a, mesh, [S1, S0], graph) @ place(b, mesh, [S0, R], graph)
    torch.testing.assert_close(out.to_torch(), a @ b)


def test_matmul_mixed_dtypes_refused_like_torch(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    a, b = _randn(4, 3), _randn(3, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError) as torch_error:
        a @ b
    ta, tb = place(a, mesh, [S0], graph), place(b, mesh, [R], graph)
    expect_refusal(lambda: ta @ tb, torch_error.value)


#: x (2, 5, 3), w (4, 3), b (4,): the one-mesh-dim table with and without the bias.
_LINEAR = _chunking({
    (R, R): R, (S0, R): S0, (S1, R): S1, (R, S0): S2, (S2, S1): P, (P, R): P, (R, P): P,
})  # fmt: skip
_LINEAR_BIAS = _chunking({
    (R, R, R): R, (S0, R, R): S0, (S1, R, R): S1, (R, S0, R): S2, (R, S0, S0): S2,
    (R, R, S0): S2, (S2, S1, R): P, (P, R, R): P, (R, P, R): P,
    (S2, S1, P): P, (P, R, P): P, (R, P, P): P,  # a Partial bias: each device adds its piece
})  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_linear_every_layout(bias: bool, mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    """Column-parallel (w S(0), bias S(0)), row-parallel (x S(-1), w S(1) -> Partial with the
    bias added once), batch shards and Partial operands."""
    x, w, b = _randn(2, 5, 3), _randn(4, 3), _randn(4)
    fulls, table = ([x, w, b], _LINEAR_BIAS) if bias else ([x, w], _LINEAR)
    accepted = run_api(
        graph, "linear", DF.linear, fulls, mesh_shape, [F.linear(*fulls)], table=table,
        exact=False, limit=limit_for(mesh_shape, n_d=16),
    )  # fmt: skip
    assert len(accepted) == len(table) or len(mesh_shape) > 1


def test_tensor_parallel_mlp(graph: dtorch.Graph) -> None:
    """A column-parallel then a row-parallel layer on a dp x tp mesh, as in Megatron:
    (S(0), R) -> (S(0), S(-1)) -> (S(0), P); the fetched result is torch's."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3), mesh_dim_names=("dp", "tp"))
    x, w1, b1, w2, b2 = _randn(8, 6), _randn(9, 6), _randn(9), _randn(4, 9), _randn(4)
    tx = place(x, mesh, [S0, R], graph)
    h = DF.linear(tx, place(w1, mesh, [R, S0], graph), place(b1, mesh, [R, S0], graph))
    assert h.placements == [S0, S1]
    h = DF.gelu(h)
    y = DF.linear(h, place(w2, mesh, [R, S1], graph), place(b2, mesh, [R, R], graph))
    assert y.placements == [S0, P]
    want = F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
    torch.testing.assert_close(y.to_torch(), want)
    replicated = y.redistribute(mesh, [S0, R])
    torch.testing.assert_close(replicated.to_torch(), want)


def test_a_partial_bias_of_spread_pieces_counts_once_per_mesh_dim(graph: dtorch.Graph) -> None:
    """A bias Partial on mesh dim 0 (pieces that differ) beside an output Partial on both
    dims: every device adds its piece on dim 0, only coordinate 0 of dim 1 adds it (the owner
    of dim 0 alone would add one piece; every device would add it three times)."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x, w, b = _randn(4, 6), _randn(5, 6), _randn(5)
    tx = split_partial(x, mesh, 1, graph, seed=1)[0].redistribute(mesh, [S1, P])
    tb, pieces = split_partial(b, mesh, 0, graph, seed=2)
    assert not torch.allclose(pieces[0], b)
    out = DF.linear(tx, place(w, mesh, [S1, R], graph), tb)
    assert out.placements == [P, P]
    torch.testing.assert_close(out.to_torch(), F.linear(x, w, b))


_OUTER = {(R, R): R, (S0, R): S0, (R, S0): S1, (P, R): P, (R, P): P}


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_outer_every_layout(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    a, b = _randn(5), _randn(3)
    for call in (dtorch.outer, lambda x, y: x.outer(y)):
        run_api(
            graph, "outer", call, [a, b], mesh_shape, [torch.outer(a, b)], table=_OUTER,
            limit=limit_for(mesh_shape, n_d=16),
        )  # fmt: skip


#: einsum equations, input shapes, and (on a 1-D mesh) a few layouts with their result.
_EINSUM: list[tuple[str, list[tuple[int, ...]], dict[Any, Any]]] = [
    ("ij,jk->ik", [(5, 3), (3, 4)], {(S1, S0): P, (S0, R): S0, (R, S1): S1, (P, R): P}),
    ("bij,bjk->bik", [(2, 5, 3), (2, 3, 4)], {(S0, S0): S0, (S2, S1): P}),
    ("ij->j", [(5, 3)], {(S0,): P, (S1,): S0}),
    ("ij->ji", [(5, 3)], {(S0,): S1}),
    ("i,j->ij", [(5,), (3,)], {(S0, R): S0, (R, S0): S1}),
    ("ii->i", [(3, 3)], {(R,): R}),
    ("...ij,jk", [(2, 5, 3), (3, 4)], {(S1, R): S1}),
    ("ij,ij,j->i", [(4, 3), (4, 3), (3,)], {(S1, S1, S0): P}),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("equation", "shapes", "known"), _EINSUM)
def test_einsum_every_layout(  # type: ignore[no-untyped-def]
    equation, shapes, known, mesh_shape, graph
) -> None:
    """Values on every accepted layout (a sample on 2-D/3-D meshes and for three operands);
    on 1-D meshes the listed layouts give the listed output placements."""
    tensors = [_randn(*s) for s in shapes]
    want = torch.einsum(equation, *tensors)
    accepted = run_api(
        graph, "einsum", lambda *ts: dtorch.einsum(equation, *ts), tensors, mesh_shape,
        [want], table=None, exact=False, limit=limit_for(mesh_shape, 60, 12),
    )  # fmt: skip
    assert accepted
    if len(mesh_shape) == 1:
        mesh = dtorch.init_device_mesh("cpu", mesh_shape)
        for layout, result in known.items():
            ts = [place(t, mesh, [p], graph) for t, p in zip(tensors, layout, strict=True)]
            out = dtorch.einsum(equation, ts)  # the list form
            assert out.placements == [result], (equation, layout)
            torch.testing.assert_close(out.to_torch(), want)


@pytest.mark.parametrize(
    "sublists",
    [([0, 1], [1, 2]), ([0, 1], [1, 2], [2, 0]), ([0, 27], [27, 51], [51]), ([True, 0], [0, 2])],
)
def test_einsum_sublist_form(graph: dtorch.Graph, sublists: tuple[list[int], ...]) -> None:
    """torch's ``einsum(a, [0, 1], b, [1, 2], [out])``: subscripts 0-25 are A-Z, 26-51 a-z
    (a bool is an int, as torch takes it); dtorch.einsum directly and through torch.einsum."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    a, b = _randn(4, 3), _randn(3, 5)
    args = (a, sublists[0], b, *sublists[1:])
    want = torch.einsum(*args)
    da, db = place(a, mesh, [S0], graph), place(b, mesh, [R], graph)
    dargs = (da, sublists[0], db, *sublists[1:])
    torch.testing.assert_close(dtorch.einsum(*dargs).to_torch(), want)
    torch.testing.assert_close(torch.einsum(*dargs).to_torch(), want)


def test_rejections(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    a, b = _randn(5, 3), _randn(3, 4)
    with pytest.raises(PlacementError) as info:
        place(a, mesh, [S0], graph) @ place(b, mesh, [S0], graph)
    text = str(info.value)
    assert text.startswith("matmul: got (S(0),) x (S(0),) on mesh (2,); accepted per mesh dim")
    assert "S(k) x S(k) -> P" in text and "k: the contracted dim" in text
    with pytest.raises(PlacementError, match=r"^matmul: got \(P,\) x \(P,\).*accepted"):
        place(a, mesh, [P], graph) @ place(b, mesh, [P], graph)
    with pytest.raises(PlacementError, match=r"^linear: got \(S\(0\),\) x \(S\(0\),\).*accepted"):
        DF.linear(place(a, mesh, [S0], graph), place(b.T, mesh, [S0], graph))
    x, y = place(_randn(2, 1, 5, 3), mesh, [S1], graph), place(_randn(3, 3, 4), mesh, [R], graph)
    with pytest.raises(PlacementError, match=r"a batch dim of size 1 that broadcasts is sharded"):
        x @ y  # its own label, not the contracted dim: nothing to chunk the other operand on
    with pytest.raises(PlacementError, match=r"^outer: got \(S\(0\),\) x \(S\(0\),\)"):
        dtorch.outer(place(_randn(3), mesh, [S0], graph), place(_randn(2), mesh, [S0], graph))
    with pytest.raises(PlacementError, match=r"^einsum: got .*accepted"):
        dtorch.einsum("ij,jk->ik", place(a, mesh, [S1], graph), place(b, mesh, [S1], graph))
    with pytest.raises(ShapeError, match=r"^matmul: shapes \[5, 3\] x \[4, 3\] cannot be"):
        place(a, mesh, [R], graph) @ place(b.T.contiguous(), mesh, [R], graph)
    with pytest.raises(ShapeError, match=r"^linear: x \[5, 3\] and weight \[3, 4\]"):
        DF.linear(place(a, mesh, [R], graph), place(b, mesh, [R], graph))
    other = dtorch.init_device_mesh("cpu", 3)
    with pytest.raises(MeshError, match=r"^matmul: inputs lie on different meshes"):
        place(a, mesh, [R], graph) @ place(b, other, [R], graph)


#: linear(x (2, 5, 3), w (3,)): x's batch shards stay, the contracted dim on both gives P.
_LINEAR_VECTOR = _chunking({(R, R): R, (S0, R): S0, (S1, R): S1, (S2, S0): P, **_LINEAR_ROWS})


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_linear_vector_weight_every_layout(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """A 1-D weight (in_features,) without a bias: torch's ``x @ w``, the last dim gone."""
    x, w = _randn(2, 5, 3), _randn(3)
    accepted = run_api(
        graph, "linear", DF.linear, [x, w], mesh_shape, [F.linear(x, w)], table=_LINEAR_VECTOR,
        exact=False, limit=limit_for(mesh_shape, n_d=16),
    )  # fmt: skip
    assert len(accepted) == len(_LINEAR_VECTOR) or len(mesh_shape) > 1
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    for a in (_randn(4, 3), _randn(3)):  # (3,) and () outputs
        out = DF.linear(
            place(a, mesh, [R] * mesh.ndim, graph), place(w, mesh, [R] * mesh.ndim, graph)
        )
        assert out.shape == F.linear(a, w).shape
        torch.testing.assert_close(out.to_torch(), F.linear(a, w))


def test_linear_vector_weight_with_a_bias_is_refused(graph: dtorch.Graph) -> None:
    """torch refuses a 1-D bias beside a 1-D weight; so does dtorch, saying what it accepts."""
    x, w, b = _randn(4, 3), _randn(3), _randn(4)
    with pytest.raises(RuntimeError):
        F.linear(x, w, b)
    with pytest.raises(ShapeError, match=r"^linear: x \[4, 3\] and weight \[3\] do not match; "):
        DF.linear(dtorch.tensor(x), dtorch.tensor(w), dtorch.tensor(b))
    scalar, x = torch.tensor(0.5), _randn(4, 2, 3)  # a 0-d bias it takes (torch: for 3-D x)
    mesh = dtorch.init_device_mesh("cpu", 2)
    got = DF.linear(
        place(x, mesh, [S0], graph), place(w, mesh, [R], graph), place(scalar, mesh, [R], graph)
    )
    torch.testing.assert_close(got.to_torch(), F.linear(x, w, scalar))


_VECTOR_BIAS: Table = _chunking({
    (R, R, R): R, (S0, R, R): S0, (S1, R, R): S1, (S2, S0, R): P, (P, R, R): P, (R, P, R): P,
    (S2, S0, P): P, (P, R, P): P, (R, P, P): P,
})  # fmt: skip


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2)])
def test_linear_vector_weight_with_a_scalar_bias_every_layout(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """``x @ w + b`` with a 0-d bias: a Partial result adds the bias once (it was recorded as
    a separate ``add``, which refused P + R, naming add)."""
    x, w, b = _randn(2, 5, 3), _randn(3), torch.tensor(0.25)
    run_api(
        graph, "linear", DF.linear, [x, w, b], mesh_shape, [F.linear(x, w, b)],
        table=_VECTOR_BIAS if len(mesh_shape) == 1 else None, exact=False,
        limit=limit_for(mesh_shape, n_d=16),
    )  # fmt: skip


@pytest.mark.parametrize("bias_shape", [(1,), ()], ids=["1", "0-d"])
@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2)])
def test_linear_bias_broadcast_as_torch(
    bias_shape: tuple[int, ...], mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """A bias of one element broadcasts over the out-features as in torch (it was refused);
    it cannot follow a shard of them, so it is Replicate there."""
    x, w, b = _randn(4, 6), _randn(5, 6), _randn(*bias_shape)
    table = _chunking({
        (R, R, R): R, (S0, R, R): S0, (R, S0, R): S1, (S1, S1, R): P, (P, R, R): P, (R, P, R): P,
        (S1, S1, P): P, (P, R, P): P, (R, P, P): P,
    })  # fmt: skip
    run_api(
        graph, "linear", DF.linear, [x, w, b], mesh_shape, [F.linear(x, w, b)],
        table=table if len(mesh_shape) == 1 else None, exact=False,
        limit=limit_for(mesh_shape, n_d=16),
    )  # fmt: skip


def test_a_refusal_without_a_hint_of_its_own_says_to_redistribute(graph: dtorch.Graph) -> None:
    """matmul's refusals (and every rule's without a hint of its own) ended at "which is not
    one of these", saying nothing of what to do."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    a = place(torch.ones(5, 7), mesh, [S1], graph)
    b = place(torch.ones(7, 3), mesh, [P], graph)
    with pytest.raises(PlacementError, match=r"not one of these\. Redistribute the inputs to"):
        dtorch.matmul(a, b)
