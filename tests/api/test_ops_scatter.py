"""The scatter family (``scatter scatter_add scatter_reduce index_add`` and the in-place
forms) through the public API against torch on the full tensors, on 1-D, 2-D and 3-D meshes,
even and uneven shards: every layout on 1-D meshes (a seeded sample on the larger ones),
output placements (a shard of another dim alike in all inputs stays; the sums keep a Partial
input under a Partial or scattered-dim-sharded source) and the rejections. Overwriting
indices are distinct along the scattered dim (torch leaves the winner of a repeat
unspecified); the sums and reductions get repeats (exact for ints, within rounding for
floats)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, KernelError, ParamError, PlacementError, ShapeError
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import OpKind, ScatterReduceKind
from dtorch.ir.params import IndexAddParam, ScatterParam
from dtorch.ir.scalar import Scalar
from dtorch.ir.span import Span
from dtorch.serialization import decode_batch, encode_batch
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    P,
    R,
    Shard,
    Table,
    place,
    row_combos,
    run_api,
)
from tests.simulate import layout_combos

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(63)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(63)


def _distinct(x_shape: tuple[int, ...], index_shape: tuple[int, ...], dim: int) -> torch.Tensor:
    """An index whose entries along ``dim`` are distinct (so overwrites have one winner)."""
    keys = torch.rand((*index_shape[:dim], x_shape[dim], *index_shape[dim + 1 :]), generator=_G)
    return keys.argsort(dim).narrow(dim, 0, index_shape[dim])


def _repeating(x_shape: tuple[int, ...], index_shape: tuple[int, ...], dim: int) -> torch.Tensor:
    """An index with repeats along ``dim`` (every entry in 0..2: more writes than targets)."""
    return torch.randint(0, min(3, x_shape[dim]), index_shape, generator=_G)


def scatter_table(
    shapes: tuple[tuple[int, ...], ...], dim: int, *, partial: bool, blocks: bool
) -> Table:
    """One mesh dim: R x R x R -> R; S(k) x S(k) x S(k) -> S(k) for another dim k of one size
    in every input; ``partial``: P x R x P -> P; ``blocks``: P x S(dim) x S(dim) -> P."""
    n = len(shapes)
    table: dict[Any, Any] = {(R,) * n: R}
    for k in range(len(shapes[0])):
        if k != dim and len({s[k] for s in shapes}) == 1:
            table[(Shard(k),) * n] = Shard(k)
    if partial:
        table[(P, R, P)] = P
    if blocks and shapes[1][dim] == shapes[2][dim]:
        table[(P, Shard(dim), Shard(dim))] = P
    return table


#: name, call (t, dim, index, src), torch reference, Partial rows, block rows, exact, index.
_FORMS: list[tuple[str, Callable[..., Any], Callable[..., Any], bool, bool, bool, Any]] = [
    ("scatter", lambda t, d, i, s: t.scatter(d, i, s), torch.scatter, False, False, True,
     _distinct),
    ("scatter_add", lambda t, d, i, s: t.scatter_add(d, i, s), torch.scatter_add, True, True,
     False, _repeating),
    ("scatter_reduce", lambda t, d, i, s: t.scatter_reduce(d, i, s, "sum", include_self=False),
     lambda x, d, i, s: x.scatter_reduce(d, i, s, "sum", include_self=False), True, False,
     False, _repeating),
    ("scatter_reduce", lambda t, d, i, s: dtorch.scatter_reduce(t, d, i, s, "amax"),
     lambda x, d, i, s: x.scatter_reduce(d, i, s, "amax"), False, False, True, _repeating),
]  # fmt: skip

#: scattered dim, index shape, src shape (of the input (5, 3, 4)).
_SHAPES = [(1, (5, 2, 4), (5, 2, 4)), (0, (3, 3, 2), (4, 3, 3))]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("dim", "index_shape", "src_shape"), _SHAPES)
@pytest.mark.parametrize("form", range(len(_FORMS)))
def test_scatter_every_layout(  # type: ignore[no-untyped-def]
    form, dim, index_shape, src_shape, mesh_shape, graph
) -> None:
    """Every layout on 1-D meshes; on N-D meshes, layouts whose every mesh dim is an
    accepted row and a seeded sample of all layouts (mostly refused)."""
    name, call, reference, partial, blocks, exact, make_index = _FORMS[form]
    x = torch.randn((5, 3, 4), generator=_G)
    index, src = make_index(x.shape, index_shape, dim), torch.randn(src_shape, generator=_G)
    table = scatter_table((x.shape, index_shape, src_shape), dim, partial=partial, blocks=blocks)
    combos = None
    if len(mesh_shape) > 1:
        rows = row_combos(table, len(mesh_shape), 3, 6, seed=dim)
        combos = rows + layout_combos(len(mesh_shape), [x, index, src], limit=4, seed=dim)
    accepted = run_api(
        graph, name, lambda t, i, s: call(t, dim, i, s), [x, index, src], mesh_shape,
        [reference(x, dim, index, src)], table=table, combos=combos, seed=dim, exact=exact,
    )  # fmt: skip
    assert len(accepted) >= (len(table) if len(mesh_shape) == 1 else 3)


def index_add_table(x: tuple[int, ...], dim: int) -> Table:
    """One mesh dim: R x R x R -> R, S(k) x R x S(k) -> S(k) (k another dim), S(dim) x R x R
    -> S(dim) (each device adds its rows' slices), P x R x P -> P, P x S(0) x S(dim) -> P."""
    table: dict[Any, Any] = {(R, R, R): R, (P, R, P): P, (P, S0, Shard(dim)): P}
    table[(Shard(dim), R, R)] = Shard(dim)
    for k in range(len(x)):
        if k != dim:
            table[(Shard(k), R, Shard(k))] = Shard(k)
    return table


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("dim", [1, 0])
def test_index_add_every_layout(dim: int, mesh_shape: tuple[int, ...], graph: Any) -> None:
    """index_add (repeated indices, alpha) on every layout, as scatter's test."""
    x = torch.randn((5, 3, 4), generator=_G)
    index = torch.tensor([2, 0, 2, 1])
    source = torch.randn((*x.shape[:dim], 4, *x.shape[dim + 1 :]), generator=_G)
    table = index_add_table(x.shape, dim)
    combos = None
    if len(mesh_shape) > 1:
        rows = row_combos(table, len(mesh_shape), 3, 6, seed=dim)
        combos = rows + layout_combos(len(mesh_shape), [x, index, source], limit=4, seed=dim)
    accepted = run_api(
        graph, "index_add", lambda t, i, s: t.index_add(dim, i, s, alpha=1.5),
        [x, index, source], mesh_shape, [x.index_add(dim, index, source, alpha=1.5)],
        table=table, combos=combos, seed=dim, exact=False,
    )  # fmt: skip
    assert len(accepted) >= (len(table) if len(mesh_shape) == 1 else 3)


def test_in_place_forms_write_the_input_and_its_views(graph: dtorch.Graph) -> None:
    """scatter_, scatter_add_, scatter_reduce_, index_add_ return the input, which holds
    torch's result, as does a view taken before the write."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.randint(-5, 5, (6, 4), generator=_G)
    index = torch.randint(0, 4, (6, 3), generator=_G)
    src = torch.randint(-5, 5, (6, 3), generator=_G)
    ids = torch.tensor([3, 3, 0])
    calls: list[tuple[str, Callable[..., Any]]] = [
        ("scatter_", lambda a, i, s: a.scatter_(1, i, s)),
        ("scatter_", lambda a, i, s: a.scatter_(1, i, -7)),
        ("scatter_add_", lambda a, i, s: a.scatter_add_(1, i, s)),
        ("scatter_reduce_", lambda a, i, s: a.scatter_reduce_(1, i, s, "prod", include_self=False)),
        ("scatter_reduce_", lambda a, i, s: a.scatter_reduce_(1, i, s, "mean")),
        ("index_add_", lambda a, i, s: a.index_add_(1, ids, s, alpha=3)),
    ]  # fmt: skip
    for name, call in calls:
        want = x.clone()
        index_now = _distinct(x.shape, index.shape, 1) if name == "scatter_" else index
        call(want, index_now, src)
        t = place(x, mesh, [S0, R], graph)
        view = t[:, 1:3]
        i, s = place(index_now, mesh, [S0, R], graph), place(src, mesh, [S0, R], graph)
        out = call(t, i, s)
        assert out is t and t.placements == [S0, R], name
        assert torch.equal(t.to_torch(), want), name
        assert torch.equal(view.to_torch(), want[:, 1:3]), name


def test_number_and_legacy_forms(graph: dtorch.Graph) -> None:
    """A number (positional or value=, a 0-d torch tensor), reduce="add"/"multiply" of a
    number and of a tensor (which warns as torch does), torch tensors as index and src
    (distributed beside the input), the functions of the dtorch namespace, 0-d tensors and
    an empty index (any layout: nothing is written)."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = torch.randn((4, 5), generator=_G)
    index = _distinct(x.shape, (4, 2), 1)
    src = torch.randn((4, 2), generator=_G)
    t = place(x, mesh, [S0], graph)
    i = place(index, mesh, [S0], graph)
    twice = torch.tensor([4, 4])
    for out, want in (
        (t.scatter(1, i, 2.5), x.scatter(1, index, 2.5)),
        (dtorch.scatter(t, 1, i, value=torch.tensor(-1.0)), x.scatter(1, index, value=-1.0)),
        (t.scatter(1, i, 2, reduce="add"), x.scatter(1, index, 2, reduce="add")),
        (t.scatter(1, i, 3.0, reduce="multiply"), x.scatter(1, index, 3.0, reduce="multiply")),
        (t.scatter(1, index, src), x.scatter(1, index, src)),  # torch index and src: S(0)
        (dtorch.scatter_add(t, 1, i, src), torch.scatter_add(x, 1, index, src)),
        (dtorch.index_add(t, 1, twice, src), torch.index_add(x, 1, twice, src)),
        (t.scatter(1, place(index[:, :0], mesh, [R], graph), src), x),
        (place(x, mesh, [Shard(1)], graph).scatter_add(1, index[:0], src), x),
    ):  # fmt: skip
        assert out.placements == t.placements or out.placements == [Shard(1)]
        torch.testing.assert_close(out.to_torch(), want, rtol=0, atol=1e-6)
    with pytest.warns(UserWarning, match="reduce argument of torch.scatter with Tensor src"):
        legacy = t.scatter(1, i, place(src, mesh, [S0], graph), reduce="multiply")
    assert torch.equal(legacy.to_torch(), x.scatter_reduce(1, index, src, "prod"))
    p = place(x, mesh, [P], graph)  # a torch src beside a Partial input is Partial
    added = p.scatter_add(1, index, src)
    assert added.placements == [P]
    torch.testing.assert_close(added.to_torch(), x.scatter_add(1, index, src))
    scalar = place(torch.tensor(1.0), mesh, [R], graph)
    zero = torch.tensor(0)
    for out, want in (
        (scalar.scatter(0, place(zero, mesh, [R], graph), 5.0), torch.tensor(5.0)),
        (scalar.index_add(0, torch.tensor([0]), torch.tensor(2.0)), torch.tensor(3.0)),
    ):
        assert torch.equal(out.to_torch(), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_dtypes_repeats_and_include_self(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """Every reduction with and without include_self, on a repeating index of a sharded
    layout, exact for ints and bools; what torch refuses (mean of bools) is refused at the
    call with torch's reason."""
    mesh = dtorch.init_device_mesh("cpu", (2, 1, 2))
    full = torch.randint(-4, 5, (5, 6), generator=_G)
    x, src = full.to(dtype), torch.randint(-4, 5, (5, 6), generator=_G).to(dtype)
    index = _repeating(x.shape, (5, 6), 1)
    t, i, s = (place(a, mesh, [S0, R, R], graph) for a in (x, index, src))
    for how in ("sum", "prod", "mean", "amax", "amin"):
        for own in (True, False):
            try:
                want = x.scatter_reduce(1, index, src, how, include_self=own)
            except (RuntimeError, NotImplementedError) as error:
                with pytest.raises(DtypeError, match=re.escape(str(error)[:30])):
                    t.scatter_reduce(1, i, s, how, include_self=own)
                continue
            out = t.scatter_reduce(1, i, s, how, include_self=own)
            assert out.placements == [S0, R, R]
            got = out.to_torch()
            exact = dtype != torch.float32
            assert torch.equal(got, want) if exact else torch.allclose(got, want), (how, own)
    added = t.index_add(1, torch.tensor([5, 0, 5]), s[:, :3])
    assert torch.equal(added.to_torch(), x.index_add(1, torch.tensor([5, 0, 5]), src[:, :3]))
    assert torch.equal(t.scatter_add(1, i, s).to_torch(), x.scatter_add(1, index, src))
    first = index[:, :1]  # one write per row: one winner
    assert torch.equal(t.scatter(1, place(first, mesh, [S0, R, R], graph), s[:, :1]).to_torch(),
                       x.scatter(1, first, src[:, :1]))  # fmt: skip


def test_partial_bool_sums(graph: dtorch.Graph) -> None:
    """A bool Partial (the OR of its parts) scatter_add'ed and index_add'ed with a bool
    Partial source (an OR too) stays Partial and equals torch."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.rand((4, 5), generator=_G) > 0.7
    src = torch.rand((4, 5), generator=_G) > 0.5
    index = _repeating(x.shape, (4, 5), 1)
    t, s = place(x, mesh, [P], graph), place(src, mesh, [P], graph)
    out = t.scatter_add(1, place(index, mesh, [R], graph), s)
    assert out.placements == [P] and torch.equal(out.to_torch(), x.scatter_add(1, index, src))
    added = t.index_add(1, torch.tensor([1, 1, 0, 4, 4]), s)
    assert added.placements == [P]
    assert torch.equal(added.to_torch(), x.index_add(1, torch.tensor([1, 1, 0, 4, 4]), src))


def test_rejections(graph: dtorch.Graph) -> None:
    """Placements refused with the operator, what it got, what it accepts and what to
    redistribute; bad arguments refused at the call as torch refuses them; bad index values
    when the value is read."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((4, 3), generator=_G)
    index = torch.zeros((4, 3), dtype=torch.int64)
    for xp, ip, sp, call in (
        (S1, R, R, lambda t, i, s: t.scatter(1, i, s)),
        (S0, S0, R, lambda t, i, s: t.scatter(1, i, s)),
        (P, R, P, lambda t, i, s: t.scatter(1, i, s)),
        (R, R, P, lambda t, i, s: t.scatter_add(1, i, s)),
        (P, R, R, lambda t, i, s: t.scatter_add(1, i, s)),
        (P, P, P, lambda t, i, s: t.scatter_add(1, i, s)),
        (P, R, P, lambda t, i, s: t.scatter_reduce(1, i, s, "mean")),
        (P, S1, S1, lambda t, i, s: t.scatter_reduce(1, i, s, "sum", include_self=False)),
        (P, R, R, lambda t, i, s: t.scatter(1, i, 1.0, reduce="add")),
        (R, R, S0, lambda t, i, s: t.index_add(1, i[0], s)),
        (S1, R, S1, lambda t, i, s: t.index_add(1, i[0, :3], s)),
    ):  # fmt: skip
        t, i, s = (
            place(x, mesh, [xp], graph),
            place(index, mesh, [ip], graph),
            place(x, mesh, [sp], graph),
        )
        with pytest.raises(
            PlacementError,
            match=r"^(scatter|scatter_add|scatter_reduce|index_add): got .*accepted.*Redistribute",
        ):
            call(t, i, s)
    t = place(x, mesh, [S0], graph)
    small = place(torch.zeros(2, 3, dtype=torch.int64), mesh, [S0], graph)
    with pytest.raises(PlacementError, match=r"mesh dim 0 is S\(0\) x S\(0\) x S\(0\).*alike"):
        t.scatter_add(1, small, place(torch.zeros(2, 3), mesh, [S0], graph))  # chunks differ
    i = place(index, mesh, [S0], graph)
    row, tall = torch.zeros(3, dtype=torch.int64), torch.zeros(5, 3, dtype=torch.int64)
    for error, make, words in (
        (DtypeError, lambda: t.scatter(1, t, t), "Expected dtype int32/int64 for index"),
        (DtypeError, lambda: t.scatter(1, i, t.double()), "Expected self.dtype to be equal"),
        (ShapeError, lambda: t.scatter(1, place(row, mesh, [R], graph), 1), "dimensions as self"),
        (ShapeError, lambda: t.scatter_add(0, tall, x), "to be no larger than self"),
        (ShapeError, lambda: t.scatter_add(1, i, x[:, :2]), "no larger size than src"),
        (ParamError, lambda: t.scatter_reduce(1, i, t, "max2"), "sum, prod, mean, amax or amin"),
        (ParamError, lambda: t.scatter(1, i, t, reduce="sum"), "either add or multiply"),
        (TypeError, lambda: t.scatter(1, [[0]], t), "index must be a dtorch.Tensor"),
        (TypeError, lambda: t.scatter_add(1, i, 1.0), "src must be a dtorch.Tensor"),
        (TypeError, lambda: t.scatter(1, i), "give src"),
        (IndexError, lambda: t.scatter(2, i, 1.0), "out of range"),
        (ShapeError, lambda: t.index_add(0, index, x), "Index is supposed to be a vector"),
        (DtypeError, lambda: t.index_add(0, row.float(), x[:3]), "Expected dtype int32/int64"),
        (DtypeError, lambda: t.index_add(0, row, x[:3].double()), "must have the same scalar type"),
        (ShapeError, lambda: t.index_add(0, row, x), "Number of indices \\(3\\) should be equal"),
        (ShapeError, lambda: t.index_add(0, row, x[:3, :2]), "source tensor shape must match"),
        (DtypeError, lambda: (t > 0).scatter_reduce(1, i, t > 0, "mean"), "refuses torch.bool"),
    ):  # fmt: skip
        with pytest.raises(error, match=words):
            make()
    three, minus = place(torch.full((4, 3), 3), mesh, [S0], graph), torch.full((4, 3), -1)
    for bad, name in (
        (lambda: t.scatter(1, three, 1.0), "scatter"),
        (lambda: t.scatter_add(1, place(minus, mesh, [S0], graph), t), "scatter_add"),
        (lambda: t.index_add(1, place(torch.tensor([0, 3]), mesh, [R], graph), t[:, :2]),
         "index_add"),
    ):  # fmt: skip
        with pytest.raises(
            KernelError,
            match=rf"{name}_\d+.*index -?\d is out of bounds for dimension 1 with size 3",
        ):
            bad().to_torch()
    # a torch index's values are checked at the call, as torch's, the input left as it was
    before = t.to_torch()
    with pytest.raises(IndexError, match="index out of range in self"):
        t.index_add_(1, torch.tensor([0, 3]), t[:, :2])
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1"):
        t.scatter_add_(1, minus, t)
    assert torch.equal(t.to_torch(), before)


def test_codec_round_trips_the_params() -> None:
    """Scatter and IndexAdd operators in a batch come back equal from the wire codec."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    operand = Operand(1, (4, 3), torch.float32, mesh, (S0,))
    params = (
        ScatterParam(1),
        ScatterParam(0, ScatterReduceKind.SUM, value=Scalar.of(2.5)),
        ScatterParam(-1, ScatterReduceKind.AMIN, include_self=False),
        IndexAddParam(1, Scalar.of(3)),
        IndexAddParam(0),
    )
    ops = tuple(
        Operator(10 + n, f"op_{n}", param, (1, 2, 3), (20 + n,), Span.unknown())
        for n, param in enumerate(params)
    )
    batch = decode_batch(encode_batch(ExecuteBatch(ops, (operand,))))
    assert [op.param for op in batch.operators] == list(params)
    assert OpKind.Scatter.value == 63 and OpKind.IndexAdd.value == 64


def test_traced_program_replays_and_loads(graph: dtorch.Graph, tmp_path: Path) -> None:
    """The new operators trace, replay, save and load (their params through the file codec)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((4, 6), generator=_G)
    index = _repeating(x.shape, (4, 3), 1)
    src = torch.randn((4, 3), generator=_G)
    ids = torch.tensor([5, 0, 5])

    def fn(t: dtorch.Tensor, i: dtorch.Tensor, s: dtorch.Tensor) -> Any:
        return (t.scatter_add(1, i, s), t.scatter_reduce(1, i, s, "amin", include_self=False),
                t.scatter(1, i, 2.0), t.index_add(1, ids, s, alpha=2))  # fmt: skip

    least = x.scatter_reduce(1, index, src, "amin", include_self=False)
    want = (x.scatter_add(1, index, src), least, x.scatter(1, index, 2.0),
            x.index_add(1, ids, src, alpha=2))  # fmt: skip
    args = tuple(place(a, mesh, [S0], graph) for a in (x, index, src))
    program = dtorch.trace(fn, *args)
    program.save(tmp_path / "scatter.dtorch")
    loaded = dtorch.load_program(tmp_path / "scatter.dtorch", graph=graph)
    for run in (program, loaded):
        for out, w in zip(run(*args), want, strict=True):
            assert out.placements == [S0]
            torch.testing.assert_close(out.to_torch(), w)


def test_index_add_of_a_0d_source_into_a_tensor_is_refused_at_the_call(
    graph: dtorch.Graph,
) -> None:
    """torch refuses a 0-d source unless the input is 0-d too; dtorch failed at fetch."""
    for shape in ((3, 2), (3,)):
        with pytest.raises(RuntimeError, match="source tensor shape must match"):
            torch.zeros(shape).index_add(0, torch.tensor([0]), torch.tensor(2.0))
        x = dtorch.zeros(shape, graph=graph)
        with pytest.raises(ShapeError, match="source tensor shape must match"):
            x.index_add(0, dtorch.tensor([0], graph=graph), dtorch.tensor(2.0, graph=graph))
    zero_d = dtorch.zeros((), graph=graph).index_add(
        0, dtorch.tensor([0], graph=graph), dtorch.tensor(2.0, graph=graph)
    )
    assert torch.equal(
        zero_d.to_torch(), torch.zeros(()).index_add(0, torch.tensor([0]), torch.tensor(2.0))
    )


def test_index_add_of_an_empty_index_leaves_a_tensor_sharded_elsewhere(
    graph: dtorch.Graph,
) -> None:
    # the full source [0, 3] matches no device's [3, 2] piece of x: nothing is added at all
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(9.0).reshape(3, 3)
    x = dtorch.from_torch(full, device_mesh=mesh, placements=[dtorch.Shard(1)])
    empty = torch.zeros(0, dtype=torch.long)
    index, source = dtorch.tensor(empty, device_mesh=mesh), dtorch.zeros(0, 3, device_mesh=mesh)
    out = x.index_add(0, index, source)
    x.index_add_(0, index, source, alpha=2)
    assert out.placements == [dtorch.Shard(1)] and torch.equal(out.to_torch(), full)
    assert torch.equal(x.to_torch(), full.index_add(0, empty, torch.zeros(0, 3)))
