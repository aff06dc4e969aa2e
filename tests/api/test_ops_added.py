"""Operators composed of existing ones (``mm bmm frac swapaxes swapdims select tensor_split
diff take_along_dim``, ``F.normalize glu cosine_similarity hardtanh relu6``) through the public
API against torch on the full tensor, on 1-D, 2-D and 3-D meshes, even and uneven shards:
every layout on 1-D meshes (accepted rows of the one-mesh-dim table on the larger ones, with
a seeded sample of all layouts where the refusals name one input), the output placements, and
torch's errors for bad arguments."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import DTorchError, PlacementError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    S2,
    P,
    R,
    Shard,
    Table,
    choices,
    elementwise_table,
    limit_for,
    place,
    row_combos,
    run_api,
)
from tests.simulate import layout_combos

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(7)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(7)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


def _combos(table: Table, mesh_shape: tuple[int, ...], fulls: list[torch.Tensor], sample: bool):
    """Every layout on 1-D meshes; else accepted rows of ``table`` and, where ``sample``, a
    seeded sample of all layouts."""
    if len(mesh_shape) == 1:
        return None
    rows = row_combos(table, len(mesh_shape), len(fulls), 6, seed=len(mesh_shape))
    return rows + (layout_combos(len(mesh_shape), fulls, limit=4, seed=1) if sample else [])


# --- products ------------------------------------------------------------------------------
_LINEAR = {(P, R): P, (R, P): P}
#: a shard of the contracted dim on one side chunks a Replicate other side alike: Partial
_MM: Table = {
    (R, R): R, (S0, R): S0, (R, S1): S1, (S1, S0): P, (S1, R): P, (R, S0): P, **_LINEAR,
}  # fmt: skip
_BMM: Table = {
    (R, R): R, (S0, R): S0, (R, S0): S0, (S0, S0): S0, (S1, R): S1, (R, S2): S2, (S2, S1): P,
    (S2, R): P, (R, S1): P, **_LINEAR,
}  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(
    ("name", "call", "shapes", "table"),
    [
        ("mm", dtorch.mm, ((5, 3), (3, 4)), _MM),
        ("bmm", dtorch.Tensor.bmm, ((3, 5, 2), (3, 2, 4)), _BMM),
    ],
)  # fmt: skip
def test_mm_bmm_every_layout(  # type: ignore[no-untyped-def]
    name, call, shapes, table, mesh_shape, graph
) -> None:
    a, b = (_randn(*s) for s in shapes)
    combos = _combos(table, mesh_shape, [a, b], sample=True)
    run_api(
        graph, name, call, [a, b], mesh_shape, [a @ b], table=table, exact=False,
        limit=limit_for(mesh_shape), combos=combos,
    )  # fmt: skip


def test_mm_bmm_refusals(graph: dtorch.Graph) -> None:
    m, v, b3 = dtorch.ones(2, 3), dtorch.ones(3), dtorch.ones(2, 2, 3)
    for call, text in (
        (lambda: dtorch.mm(b3, m), "mm: self must be a matrix"),
        (lambda: m.mm(v), "mm: mat2 must be a matrix"),
        (lambda: m.mm(m), r"mm: mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x3\)"),
        (lambda: dtorch.bmm(m, b3), "bmm: batch1 must be a 3D tensor"),
        (lambda: b3.bmm(m), "bmm: batch2 must be a 3D tensor"),
        (lambda: b3.bmm(dtorch.ones(3, 3, 4)), r"to be: \[2, 3\] but got: \[3, 3\]"),
    ):
        with pytest.raises(ValueError, match=text):
            call()
    with pytest.raises(TypeError, match="mm"):
        dtorch.mm(m, torch.ones(3, 2))  # type: ignore[arg-type]
    with pytest.raises(DTorchError, match="dtype"):
        m.mm(dtorch.ones(3, 2, dtype=torch.float64))
    assert m.long().mm(dtorch.ones(3, 1).long()).tolist() == [[3], [3]]


# --- elementwise ---------------------------------------------------------------------------
_X = (5, 3, 4)

#: name, dtorch call, torch reference, input (scaled so the bounds and fractions matter).
_UNARY: list[tuple[str, Callable[..., Any], Callable[..., Any], float]] = [
    ("frac", dtorch.frac, torch.frac, 3.0),
    ("frac", dtorch.Tensor.frac, torch.frac, 1e3),
    ("hardtanh", DF.hardtanh, F.hardtanh, 2.0),
    ("hardtanh", lambda t: DF.hardtanh(t, -0.5, max_val=2.0),
     lambda x: F.hardtanh(x, -0.5, 2.0), 2.0),
    ("relu6", DF.relu6, F.relu6, 8.0),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "call", "ref", "scale"), _UNARY)
def test_elementwise_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, scale, mesh_shape, graph
) -> None:
    """The shards kept, Partial refused (none of them is linear)."""
    x = _randn(*_X) * scale
    run_api(
        graph, name, call, [x], mesh_shape, [ref(x)], table=elementwise_table([_X]),
        limit=limit_for(mesh_shape, n_d=10),
    )  # fmt: skip


def test_elementwise_dtypes_and_refusals(graph: dtorch.Graph) -> None:
    """Integers keep their dtype in hardtanh/relu6 (the bounds truncated); torch's errors."""
    ints = torch.tensor([-9, -1, 0, 2, 3, 9])
    t = dtorch.from_torch(ints)
    for ours, want in (
        (DF.hardtanh(t, -1.5, 2.5), F.hardtanh(ints, -1.5, 2.5)),
        (DF.relu6(t.to(torch.int8)), F.relu6(ints.to(torch.int8))),
        (DF.hardtanh(t.to(torch.uint8), 1.0, 4.0), F.hardtanh(ints.to(torch.uint8), 1.0, 4.0)),
        (DF.hardtanh(t.half()), F.hardtanh(ints.half())),
        (dtorch.frac(t.double() / 4), torch.frac(ints.double() / 4)),
    ):
        assert ours.dtype == want.dtype and torch.equal(ours.to_torch(), want)
    special = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.5])
    assert torch.equal(
        dtorch.frac(dtorch.from_torch(special)).to_torch().isnan(), special.frac().isnan()
    )
    x = dtorch.tensor([-3.0, 0.5, 9.0])
    assert DF.relu6(x, inplace=True) is x and x.tolist() == [0.0, 0.5, 6.0]
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        DF.hardtanh(x, 2.0, 1.0)
    with pytest.raises(DTorchError, match="hardtanh: Bool inputs not supported for hardtanh"):
        DF.hardtanh(dtorch.tensor([True]))
    with pytest.raises(DTorchError, match="unsigned type with negative limits"):
        DF.hardtanh(t.to(torch.uint8))
    with pytest.raises(DTorchError, match=r'frac: "frac_cpu" not implemented for torch\.int64'):
        t.frac()


# --- views and slices ------------------------------------------------------------------------
def _kept(ndim: int, moves: dict[int, int], partial: bool = True) -> Table:
    """One mesh dim: each dim's shard moves to ``moves[d]`` (absent: refused); P kept."""
    table: dict[Any, Any] = {(R,): R}
    table.update({(Shard(d),): Shard(e) for d, e in moves.items()})
    return {**table, (P,): P} if partial else table


#: name, dtorch call, torch reference, one-mesh-dim table (of an input of shape _X).
_VIEWS: list[tuple[str, Callable[..., Any], Callable[..., Any], Table]] = [
    ("transpose", lambda t: t.swapaxes(0, 2), lambda x: x.swapaxes(0, 2),
     _kept(3, {0: 2, 1: 1, 2: 0})),
    ("transpose", lambda t: dtorch.swapdims(t, -1, 1), lambda x: torch.swapdims(x, -1, 1),
     _kept(3, {0: 0, 1: 2, 2: 1})),
    ("select", lambda t: t.select(0, 2), lambda x: x.select(0, 2), _kept(3, {1: 0, 2: 1})),
    ("select", lambda t: dtorch.select(t, -1, -4), lambda x: torch.select(x, -1, -4),
     _kept(3, {0: 0, 1: 1})),
    ("diff", lambda t: t.diff(), lambda x: x.diff(), _kept(3, {0: 0, 1: 1})),
    ("diff", lambda t: dtorch.diff(t, 2, 0), lambda x: torch.diff(x, 2, 0), _kept(3, {1: 1, 2: 2})),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "call", "ref", "table"), _VIEWS)
def test_views_and_slices_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, table, mesh_shape, graph
) -> None:
    """A shard of another dim stays (moved with its dim), Partial stays Partial (linear);
    the selected or differenced dim must not be sharded (refused as ``t[i]`` is)."""
    x = _randn(*_X)
    run_api(
        graph, name, call, [x], mesh_shape, [ref(x)], table=table,
        combos=_combos(table, mesh_shape, [x], sample=False),
    )  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(
    ("args", "dim"), [(3, 1), ([1, 3], 0), ([4, 2, 9], -1), ([-2], 1), (torch.tensor(2), 2)]
)
def test_tensor_split_every_layout(args: Any, dim: int, mesh_shape: tuple, graph: Any) -> None:
    """Pieces keep the input's placements; a shard of the split dim only where every piece
    is still chunked over the same devices (else a PlacementError naming tensor_split)."""
    x = _randn(*_X)
    want = list(torch.tensor_split(x, args, dim))
    d = dim % 3
    table = _kept(3, {e: e for e in range(3) if e != d})
    combos = _combos(table, mesh_shape, [x], sample=True)
    run_api(
        graph, "tensor_split", lambda t: t.tensor_split(args, dim), [x], mesh_shape, want,
        table=None, combos=combos, limit=limit_for(mesh_shape),
    )  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    for combo in combos or layout_combos(len(mesh_shape), [x]):
        if all(not (isinstance(p, Shard) and p.dim == d) for p in combo[0]):
            pieces = dtorch.tensor_split(place(x, mesh, combo[0], graph), args, dim=dim)
            assert all(p.placements == place(x, mesh, combo[0], graph).placements for p in pieces)


def test_slices_forms_and_refusals(graph: dtorch.Graph) -> None:
    """Keyword forms, a dtorch index tensor, prepend/append, n=0 and n past the size, and
    torch's errors."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = _randn(4, 6)
    t = place(x, mesh, [S0], graph)
    for ours, want in (
        (t.tensor_split(sections=4, dim=1), x.tensor_split(sections=4, dim=1)),
        (dtorch.tensor_split(t, indices=[2, 5], dim=1),
         torch.tensor_split(x, indices=[2, 5], dim=1)),
        (t.tensor_split(dtorch.tensor([1, 4]), 1), x.tensor_split(torch.tensor([1, 4]), 1)),
    ):  # fmt: skip
        assert len(ours) == len(want)
        assert all(torch.equal(o.to_torch(), w) for o, w in zip(ours, want, strict=True))
    before, after = _randn(4, 2), _randn(4, 1)
    for ours, ref in (
        (t.diff(prepend=place(before, mesh, [S0], graph)), x.diff(prepend=before)),
        (dtorch.diff(t, n=3, append=after), torch.diff(x, n=3, append=after)),
        (t.diff(n=0), x.diff(n=0)),
        (t.diff(n=9), x.diff(n=9)),
        (t.long().diff(prepend=place(before, mesh, [R], graph)), x.long().diff(prepend=before)),
        (t.select(1, dtorch.tensor(3)), x.select(1, 3)),
        ((t > 0).diff(dim=1), (x > 0).diff(dim=1)),
    ):
        assert ours.dtype == ref.dtype and torch.equal(ours.to_torch(), ref)
    assert t.select(1, 0).placements == [S0] and t.diff().placements == [S0]
    scalar = dtorch.tensor(1.0)
    for call, error, text in (
        (lambda: scalar.select(0, 0), IndexError, r"select\(\) cannot be applied to a 0-dim"),
        (lambda: t.select(0, 4), IndexError, r"index 4 out of range for tensor of size \[4, 6\]"),
        (lambda: t.select(1, -7), IndexError, "index -7 out of range"),
        (lambda: t.select(2, 0), IndexError, "dimension 2 is out of range"),
        (lambda: t.select(0, 1.0), TypeError, "select: index must be an int"),
        (lambda: scalar.tensor_split(1), ValueError, "at least a 1-dimensional tensor"),
        (lambda: t.tensor_split(0), ValueError, "number of sections must be larger than 0"),
        (lambda: t.tensor_split(torch.tensor([1.0])), DTorchError, "dtype of long"),
        (lambda: t.tensor_split(torch.ones(1, 1).long()), ValueError, "got a tensor with 2 dims"),
        (lambda: t.tensor_split(2, sections=2), TypeError, "exactly one of"),
        (scalar.diff, ValueError, "diff expects input to be at least one-dimensional"),
        (lambda: t.diff(n=-1), ValueError, "order must be non-negative but got -1"),
        (lambda: t.diff(prepend=torch.ones(4)), ValueError, "same dimension as input"),
        (lambda: t.diff(dim=0, append=torch.ones(1, 5)), ValueError, r"input.size\(1\) = 6"),
        (lambda: t.diff(append=1), TypeError, "argument 'append' must be Tensor, not int"),
    ):  # fmt: skip
        with pytest.raises(error, match=text):
            call()
    for call in (lambda: t.select(0, 1), lambda: t.diff(dim=0)):
        with pytest.raises(PlacementError, match=r"^(select|diff): got \(S\(0\),\).*accepted"):
            call()


# --- take_along_dim ------------------------------------------------------------------------
def _take_table(dim: int) -> Table:
    """gather's: R x R -> R, P x R -> P, S(dim) x R -> P (each device picks its own range),
    R x S(dim) -> S(dim), S(d) x S(d) -> S(d) for the other dims, and S(d) against R either
    way (the Replicate side chunked to match)."""
    table: dict[Any, Any] = {(R, R): R, (P, R): P, (Shard(dim), R): P, (R, Shard(dim)): Shard(dim)}
    for d in range(3):
        if d != dim:
            table.update(
                {(Shard(d), Shard(d)): Shard(d), (Shard(d), R): Shard(d), (R, Shard(d)): Shard(d)}
            )
    return table


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("dim", "index_shape"), [(1, (5, 2, 4)), (-1, (5, 3, 6))])
def test_take_along_dim_every_layout(  # type: ignore[no-untyped-def]
    dim, index_shape, mesh_shape, graph
) -> None:
    x = _randn(*_X)
    size = x.shape[dim]  # torch 2.13 wraps any index modulo the dim's size, -1 the last row
    index = torch.randint(-2 * size, 2 * size, index_shape, generator=_G)
    table = _take_table(dim % 3)
    run_api(
        graph, "take_along_dim", lambda t, i: t.take_along_dim(i, dim), [x, index], mesh_shape,
        [torch.take_along_dim(x, index, dim)], table=table,
        combos=_combos(table, mesh_shape, [x, index], sample=True), limit=limit_for(mesh_shape),
    )  # fmt: skip


def test_take_along_dim_broadcast_flat_and_refusals(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = _randn(4, 1, 6)
    index = torch.randint(0, 6, (1, 3, 2), generator=_G)
    for xp, ip, out in (
        ([S0, R], [R, R], [S0, R]), ([R, P], [R, S1], None), ([S0, S2], [R, R], [S0, P]),
        ([R, R], [R, S1], [R, S1]), ([P, R], [R, R], [P, R]),
    ):  # fmt: skip
        t = place(x, mesh, xp, graph)
        try:
            got = dtorch.take_along_dim(t, place(index, mesh, ip, graph), 2)
        except PlacementError as error:
            assert out is None and str(error).startswith("take_along_dim: ")
            continue
        assert got.placements == out
        assert torch.equal(got.to_torch(), torch.take_along_dim(x, index, 2))
    flat = torch.randint(0, 24, (5,), generator=_G)
    for xp, ip, out in (
        ([R, R], [S0, R], [S0, R]),
        ([P, R], [R, R], [P, R]),
        ([S0, R], [R, R], [P, R]),  # each device picks from its block of the flattened x
    ):
        t = place(x, mesh, xp, graph)
        try:
            got = dtorch.take_along_dim(t, place(flat, mesh, ip, graph))
        except PlacementError as error:
            assert out is None and str(error).startswith("take_along_dim: ")
            continue
        assert got.placements == out and torch.equal(got.to_torch(), torch.take_along_dim(x, flat))
    t = place(x, mesh, [R, R], graph)
    assert torch.equal(t.take_along_dim(index, -1).to_torch(), x.take_along_dim(index, -1))
    for call, error, text in (
        (lambda: t.take_along_dim(index[0]), None, None),
        (lambda: t.take_along_dim(index[0], 1), ValueError, "same number of dimensions"),
        (lambda: t.take_along_dim(index.int(), 1), DTorchError,
         "should be Long but got torch.int32"),
        (lambda: t.take_along_dim(torch.zeros(3, 1, 1).long(), 1), ValueError, "take_along_dim"),
        (lambda: t.take_along_dim([0], 1), TypeError, "indices must be a dtorch.Tensor"),
    ):  # fmt: skip
        if error is None:
            call()
            continue
        with pytest.raises(error, match=text):
            call()


# --- normalize, glu, cosine_similarity --------------------------------------------------
@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(
    ("name", "call", "ref", "table"),
    [
        ("normalize", DF.normalize, F.normalize, _kept(3, {0: 0, 1: 1, 2: 2}, False)),
        ("normalize", lambda t: DF.normalize(t, p=1, dim=-1, eps=0.5),
         lambda x: F.normalize(x, p=1, dim=-1, eps=0.5), _kept(3, {0: 0, 1: 1, 2: 2}, False)),
        ("glu", DF.glu, F.glu, _kept(3, {0: 0, 1: 1}, False)),
        ("glu", lambda t: DF.glu(t, 0), lambda x: F.glu(x, 0), _kept(3, {1: 1, 2: 2}, False)),
    ],
)  # fmt: skip
def test_normalize_and_glu_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, table, mesh_shape, graph
) -> None:
    """normalize keeps every shard (the norm over a sharded dim is all-reduced); glu's
    halved dim must not be sharded; a Partial is refused by both (not linear)."""
    x = _randn(6, 3, 4)
    run_api(
        graph, name, call, [x], mesh_shape, [ref(x)], table=table, exact=False,
        combos=_combos(table, mesh_shape, [x], sample=False),
    )  # fmt: skip


def _cosine_table(dim: int) -> Table:
    """One mesh dim: shards of another dim kept (a Replicate operand chunked to match), a
    shard of ``dim`` (either or both) gives Partial (the last step is a sum over it)."""
    table: dict[Any, Any] = {(R, R): R}
    for d in range(3):
        out = P if d == dim else Shard(d if d < dim else d - 1)
        table.update({(Shard(d), Shard(d)): out, (Shard(d), R): out, (R, Shard(d)): out})
    return table


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("dim", [1, -1])
def test_cosine_similarity_every_layout(dim: int, mesh_shape: tuple, graph: Any) -> None:
    x1, x2 = _randn(*_X), _randn(*_X)
    table = _cosine_table(dim % 3)
    combos = _combos(table, mesh_shape, [x1, x2], sample=False)
    if combos is None:  # a Partial is refused by norm, naming x1 or x2 alone: tested below
        layouts = [(p,) for p in choices(3, partial=False)]
        combos = [(a, b) for a, b in itertools.product(layouts, layouts)]
    run_api(
        graph, "cosine_similarity", lambda a, b: DF.cosine_similarity(a, b, dim), [x1, x2],
        mesh_shape, [F.cosine_similarity(x1, x2, dim)], table=table, exact=False, combos=combos,
    )  # fmt: skip


def test_vector_norm_forms_and_refusals(graph: dtorch.Graph) -> None:
    """torch's clamping (tiny norms), broadcasting, dtypes; Partial and bad arguments."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    tiny = torch.tensor([[1e-10, 0.0], [3e-9, 4e-9], [1e-5, 0.0]])
    other = torch.tensor([[0.1, 0.0], [1e-9, 2e-9], [1e-5, 0.0]])
    ours = DF.cosine_similarity(place(tiny, mesh, [S0], graph), place(other, mesh, [R], graph))
    torch.testing.assert_close(ours.to_torch(), F.cosine_similarity(tiny, other))
    a, b = _randn(4, 1, 3), _randn(5, 3)
    for x1, x2, kw in (
        (a, b, {"dim": -1}), (a.double(), b, {"dim": 2}), (a.long(), b, {"dim": 0, "eps": 0.1}),
        (a.half(), b.half(), {}),
    ):  # fmt: skip
        got = DF.cosine_similarity(place(x1, mesh, [S0], graph), x2, **kw)
        want = F.cosine_similarity(x1, x2, **kw)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.to_torch(), want, atol=1e-3, rtol=1e-3)
    zeros = torch.zeros(2, 3)
    got = DF.normalize(place(zeros, mesh, [S1], graph)).to_torch()
    assert torch.equal(got, F.normalize(zeros))
    p = place(_randn(4, 3), mesh, [P], graph)
    r = place(_randn(4, 3), mesh, [R], graph)
    for name, call in (
        ("normalize", lambda: DF.normalize(p)),
        ("cosine_similarity", lambda: DF.cosine_similarity(r, p)),
        ("glu", lambda: DF.glu(place(_randn(4, 2), mesh, [P], graph))),
    ):
        with pytest.raises(PlacementError, match=rf"^{name}: .*\(P,\).*accepted"):
            call()
    ints = dtorch.tensor([[3, 4]])
    for call, error, text in (
        (lambda: DF.normalize(ints), DTorchError, "normalize: norm: expected a floating point"),
        (lambda: DF.cosine_similarity(ints, ints), DTorchError, "common dtype is torch.int64"),
        (lambda: DF.cosine_similarity(r, dtorch.ones(5, 3)), ValueError, "do not broadcast"),
        (lambda: DF.glu(dtorch.ones(3, 5)), ValueError, "dimension 1 is size 5"),
        (lambda: DF.glu(dtorch.tensor(1.0)), ValueError, "glu does not support scalars"),
        (lambda: DF.glu(dtorch.ones(2, 2).long()), DTorchError, "glu_cpu"),
    ):  # fmt: skip
        with pytest.raises(error, match=text):
            call()


def test_names_are_exported() -> None:
    for name in ("mm", "bmm", "frac", "swapaxes", "swapdims", "select", "tensor_split", "diff",
                 "take_along_dim"):  # fmt: skip
        assert name in dtorch.__all__ and hasattr(dtorch.Tensor, name)
    for name in ("normalize", "glu", "cosine_similarity", "hardtanh", "relu6"):
        assert name in DF.__all__ and name in DF._function_names
    assert operator.eq(dtorch.swapaxes, dtorch.transpose)


def test_diff_of_order_zero_is_a_copy_of_the_input(graph: dtorch.Graph) -> None:
    """torch checks prepend and append, then leaves them out, and returns a copy."""
    full = torch.tensor([1.0, 4.0, 9.0])
    t = dtorch.from_torch(full, graph=graph)
    got = dtorch.diff(t, n=0, prepend=torch.tensor([7.0]))
    assert torch.equal(got.to_torch(), torch.diff(full, n=0, prepend=torch.tensor([7.0])))
    got.add_(1)  # a copy: the input keeps its values
    assert torch.equal(t.to_torch(), full)
