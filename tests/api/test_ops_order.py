"""Selection and ordering (``sort argsort msort topk flip fliplr flipud gather``) and the shape
composites (``movedim moveaxis unflatten tile roll``) through the public API against torch on
the full tensor, on 1-D, 2-D and 3-D meshes, even and uneven shards: every layout on 1-D
meshes (a seeded sample on the larger ones), output placements (a shard of another dim stays;
along a sharded dim sort's devices gather its blocks and keep their own block of the result,
topk's pick from their blocks' top entries, Replicate there; flip's dim is refused; Partial
is refused, except flip's and gather's linear Partial rows) and the rejections.
Inputs have no ties, so sort's and topk's indices are torch's exactly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, KernelError, ParamError, PlacementError, ShapeError
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
    limit_for,
    place,
    row_combos,
    run_api,
)
from tests.simulate import layout_combos

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(58)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(58)


def along_table(
    ndim: int, dims: tuple[int, ...], partial: bool, split: bool = False, kept: bool = False
) -> Table:
    """One mesh dim: a shard of a dim that is not operated on stays; a shard of one operated
    on is refused, Replicate where the devices pick from their blocks (``split``: topk), kept
    where each device keeps its block of the result (``kept``: sort); Partial only if
    linear."""
    operated = {d % ndim for d in dims}
    table: dict[Any, Any] = {
        (p,): p
        for p in choices(ndim, partial=False)
        if not (isinstance(p, Shard) and p.dim in operated)
    }
    if split:
        table.update({(Shard(d),): R for d in operated})
    if kept:
        table.update({(Shard(d),): Shard(d) for d in operated})
    return {**table, (P,): P} if partial else table


#: name, dtorch call (t, dim), torch reference (x, dim), Partial kept, what a sharded
#: operated dim gives: "R" (picked from: topk), "S" (each device's block kept: sort), "" (refused).
_ALONG: list[tuple[str, Callable[..., Any], Callable[..., Any], bool, str]] = [
    ("sort", lambda t, d: t.sort(d), lambda x, d: x.sort(d), False, "S"),
    ("sort", lambda t, d: dtorch.sort(t, d, True), lambda x, d: torch.sort(x, d, True), False,
     "S"),
    ("argsort", lambda t, d: t.argsort(d, stable=True), lambda x, d: x.argsort(d), False, "S"),
    ("topk", lambda t, d: t.topk(2, d), lambda x, d: x.topk(2, d), False, "R"),
    ("topk", lambda t, d: dtorch.topk(t, 1, d, False), lambda x, d: torch.topk(x, 1, d, False),
     False, "R"),
    ("flip", lambda t, d: t.flip(d), lambda x, d: x.flip(d), True, ""),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "call", "ref", "linear", "split"), _ALONG)
def test_along_a_dim_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, linear, split, mesh_shape, graph
) -> None:
    x = torch.randn((5, 3, 4), generator=_G)
    for dim in (0, -1) if len(mesh_shape) == 1 else (1,):
        want = ref(x, dim)
        run_api(
            graph, name, lambda t, d=dim: call(t, d), [x], mesh_shape,
            list(want) if isinstance(want, tuple) else [want],
            table=along_table(3, (dim,), linear, split == "R", split == "S"),
            limit=limit_for(mesh_shape, n_d=8),
            seed=dim,
        )  # fmt: skip


def test_sorts_along_a_dim_sharded_twice(graph: dtorch.Graph) -> None:
    """``msort``, ``sort`` and ``argsort`` along a dim sharded on both mesh dims, unevenly
    (nested blocks of 7 over 2 x 3 devices, some empty): torch's values and indices, ties
    and NaN included, each device keeping its block (the input's placements)."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = torch.randint(0, 3, (7, 5), generator=_G).float()
    x[0, 1] = x[5, 3] = float("nan")
    for placements in ([S0, S0], [S1, S0], [S0, S1]):
        t = place(x, mesh, placements, graph)
        got = t.msort()
        assert got.placements == placements
        assert torch.equal(got.to_torch().nan_to_num(-1), x.msort().nan_to_num(-1))
        for dim in (0, 1):
            values, indices = dtorch.sort(t, dim, descending=True, stable=True)
            want = torch.sort(x, dim=dim, descending=True, stable=True)
            assert values.placements == indices.placements == placements
            assert torch.equal(values.to_torch().nan_to_num(-1), want.values.nan_to_num(-1))
            assert torch.equal(indices.to_torch(), want.indices)
            order = t.argsort(dim=dim, stable=True).to_torch()
            assert torch.equal(order, x.argsort(dim=dim, stable=True))


def test_flip_of_several_dims_and_its_forms(graph: dtorch.Graph) -> None:
    """``flip(*dims)``, ``flip(dims)``, ``flip(dims=)``, ``dtorch.flip``, ``fliplr``/``flipud``:
    the shards of the other dims and a Partial input kept."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = torch.randn((5, 7, 3), generator=_G)
    t = place(x, mesh, [S1, P], graph)
    for out, want, placements in (
        (t.flip(0, 2), x.flip(0, 2), [S1, P]),
        (t.flip((-1, 0)), x.flip((-1, 0)), [S1, P]),
        (t.flip(dims=[0]), x.flip(dims=[0]), [S1, P]),
        (dtorch.flip(t, (2,)), torch.flip(x, (2,)), [S1, P]),
        (t.flip(()), x.flip(()), [S1, P]),
        (dtorch.flipud(t), torch.flipud(x), [S1, P]),
        (place(x, mesh, [S0, S2], graph).fliplr(), x.fliplr(), [S0, S2]),
    ):
        assert out.placements == placements and out.shape == want.shape
        assert torch.equal(out.to_torch(), want)


def _gather_table(x: tuple[int, ...], index: tuple[int, ...], dim: int) -> Table:
    """One mesh dim: R x R -> R, P x R -> P, S(dim) x R -> P (each device picks its own
    range), R x S(dim) -> S(dim), and S(d) x S(d) -> S(d) and S(d) x R -> S(d) (the index
    chunked like the input) for every other dim d of one size in the input and the index."""
    table: dict[Any, Any] = {(R, R): R, (P, R): P, (Shard(dim), R): P, (R, Shard(dim)): Shard(dim)}
    for d, (a, b) in enumerate(zip(x, index, strict=True)):
        if d != dim and a == b:
            table[(Shard(d), Shard(d))] = table[(Shard(d), R)] = Shard(d)
    return table


#: gathered dim, index shape (of the input (5, 3, 4)).
_GATHERS = [(1, (5, 2, 4)), (0, (3, 3, 2))]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("dim", "index_shape"), _GATHERS)
def test_gather_every_layout(  # type: ignore[no-untyped-def]
    dim, index_shape, mesh_shape, graph
) -> None:
    """On N-D meshes: layouts whose every mesh dim is an accepted row (the nested shards of
    one dim included), and a seeded sample of all layouts (mostly refused)."""
    x = torch.randn((5, 3, 4), generator=_G)
    index = torch.randint(0, x.shape[dim], index_shape, generator=_G)
    table = _gather_table(x.shape, index_shape, dim)
    combos = None
    if len(mesh_shape) > 1:
        rows = row_combos(table, len(mesh_shape), 2, 8, seed=dim)
        combos = rows + layout_combos(len(mesh_shape), [x, index], limit=4, seed=dim)
    accepted = run_api(
        graph, "gather", lambda t, i: t.gather(dim, i), [x, index], mesh_shape,
        [x.gather(dim, index)], table=table, combos=combos, seed=dim,
    )  # fmt: skip
    assert len(accepted) >= (len(table) if len(mesh_shape) == 1 else 3)


def test_results_and_forms(graph: dtorch.Graph) -> None:
    """Named tuples like torch's; keyword forms; ``msort``; a torch index; int32 indices;
    sorted=False topk (compared as a set); 0-d tensors; stable sort of ties."""
    mesh = dtorch.init_device_mesh("cpu", (3, 2))
    x = torch.randn((4, 7), generator=_G)
    t = place(x, mesh, [S1, R], graph)
    result: Any = t.sort(dim=0, descending=True)
    assert result.values.placements == result.indices.placements == [S1, R]
    assert torch.equal(result.indices.to_torch(), x.sort(0, descending=True).indices)
    assert type(result) is torch.return_types.sort
    top: Any = dtorch.topk(t, k=3, dim=0, largest=False)
    assert torch.equal(top.values.to_torch(), x.topk(3, 0, largest=False).values)
    assert type(top) is torch.return_types.topk and top.values.shape == (3, 7)
    loose = t.topk(2, 0, sorted=False).values.to_torch()
    assert torch.equal(loose.sort(0).values, x.topk(2, 0).values.sort(0).values)
    assert torch.equal(t.msort().to_torch(), x.msort())
    assert torch.equal(dtorch.msort(t).to_torch(), torch.msort(x))
    assert torch.equal(dtorch.argsort(t, 0, True).to_torch(), torch.argsort(x, 0, True))
    index = torch.randint(0, 4, (2, 7), generator=_G)
    whole = place(x, mesh, [R, R], graph)
    for out, placements in (
        (dtorch.gather(whole, 0, index), [R, R]),  # a torch index is sent Replicate
        (dtorch.gather(t, 0, place(index.int(), mesh, [S1, R], graph)), [S1, R]),
    ):
        assert out.placements == placements
        assert torch.equal(out.to_torch(), torch.gather(x, 0, index))
    ties = place(torch.tensor([2, 1, 2, 1, 2]), mesh, [R, R], graph)
    stable = torch.tensor([2, 1, 2, 1, 2]).sort(stable=True)
    assert torch.equal(ties.sort(stable=True).indices.to_torch(), stable.indices)
    scalar = place(torch.tensor(3.0), mesh, [R, R], graph)
    for out, want in (
        (scalar.sort().values, torch.tensor(3.0).sort().values),
        (scalar.topk(1).indices, torch.tensor(3.0).topk(1).indices),
        (scalar.flip(0), torch.tensor(3.0).flip(0)),
        (scalar.gather(0, place(torch.tensor([0, 0]), mesh, [R, R], graph)), torch.full((2,), 3.0)),
    ):  # fmt: skip
        assert torch.equal(out.to_torch(), want)


def test_rejections(graph: dtorch.Graph) -> None:
    """Placements refused with the operator, what it got and what it accepts; bad arguments
    refused at the call with what was wrong; bad index values when the value is read."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((4, 3), generator=_G)
    t = place(x, mesh, [S0], graph)
    with pytest.raises(PlacementError) as info:
        t.flip(0)
    text = str(info.value)
    assert text.startswith("flip: got (S(0),) on mesh (2,); accepted per mesh dimension: R -> R")
    assert "Redistribute the flipped dims to Replicate first" in text
    p = place(x, mesh, [P], graph)
    with pytest.raises(PlacementError, match=r"^sort: got \(P,\).*order of a sum is not"):
        p.sort(0)  # along a dim nothing shards, the same words
    for name, call in (
        ("argsort", lambda: p.argsort(0)),
        ("msort", p.msort), ("flipud", t.flipud),
        ("sort", lambda: p.sort(1)), ("topk", lambda: p.topk(1)),
    ):  # fmt: skip
        with pytest.raises(PlacementError, match=rf"^{name}: got \((S\(0\)|P),\).*accepted"):
            call()
    index = place(torch.zeros(4, 2, dtype=torch.int64), mesh, [S0], graph)
    row, tall = torch.zeros(2, dtype=torch.int64), torch.zeros(8, 4, dtype=torch.int64)
    for xp, ip in ((R, S0), (P, S0), (R, P)):
        with pytest.raises(PlacementError, match=r"^gather: got .* x .*accepted.*input x index"):
            place(x, mesh, [xp], graph).gather(1, place(index.to_torch(), mesh, [ip], graph))
    chunked = place(x, mesh, [S0], graph).gather(1, place(index.to_torch(), mesh, [R], graph))
    assert chunked.placements == [S0]  # a Replicate index chunked like the input
    small = place(torch.zeros(2, 3, dtype=torch.int64), mesh, [S0], graph)
    with pytest.raises(PlacementError, match=r"^gather: .*mesh dim 0 is S\(0\) x S\(0\)"):
        t.gather(1, small)  # dim 0 of 2 and of 4 chunk differently
    assert t.gather(1, index).placements == [S0]
    for error, call, words in (
        (ParamError, lambda: t.topk(4), "k out of range: k=4 for dim 1 of size 3"),
        (ParamError, lambda: t.topk(-1, 1), "accepted: 0 <= k <= 3"),
        (DtypeError, lambda: (t > 0).topk(1), "topk does not support bool"),
        (ShapeError, lambda: t.flip(0, -2), "dim 0 appears multiple times"),
        (ShapeError, lambda: place(x[0], mesh, [R], graph).fliplr(), "Input must be >= 2-d"),
        (IndexError, lambda: t.sort(2), "dimension 2 is out of range"),
        (DtypeError, lambda: t.gather(1, t), "the index must be int64 or int32"),
        (ShapeError, lambda: t.gather(1, place(row, mesh, [R], graph)), "as many dims"),
        (ShapeError, lambda: t.gather(0, place(tall, mesh, [R], graph)), "no larger than"),
        (TypeError, lambda: t.gather(1, [[0]]), "index must be a dtorch.Tensor"),
    ):
        with pytest.raises(error, match=words):
            call()
    out_of_range = t.gather(1, place(torch.full((4, 2), 3), mesh, [S0], graph))
    with pytest.raises(KernelError, match="index 3 is out of bounds for dimension 1 with size 3"):
        out_of_range.to_torch()


def test_shape_composites(graph: dtorch.Graph) -> None:
    """movedim/moveaxis (a permute), unflatten (a reshape), tile (a repeat), roll (slices and a
    cat), against torch, keeping the shards of the dims they leave alone."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.randn((4, 6, 5), generator=_G)
    t = place(x, mesh, [S0, S2], graph)
    for out, want, placements in (
        (t.movedim(0, -1), x.movedim(0, -1), [S2, S1]),
        (dtorch.moveaxis(t, (0, 2), (1, 0)), torch.moveaxis(x, (0, 2), (1, 0)), [S1, S0]),
        (dtorch.movedim(t, 1, 1), x, [S0, S2]),
        (t.unflatten(1, (3, -1)), x.unflatten(1, (3, -1)), [S0, Shard(3)]),
        (dtorch.unflatten(t, -1, (5, 1)), x.unflatten(-1, (5, 1)), [S0, S2]),
        (t.tile(1, 2, 1), x.tile(1, 2, 1), [S0, S2]),
        (dtorch.tile(t, (2, 1, 1, 1)), x.tile((2, 1, 1, 1)), [S1, Shard(3)]),
        (t.roll(2, 1), x.roll(2, 1), [S0, S2]),
        (dtorch.roll(t, (-1, 7), (1, 1)), torch.roll(x, (-1, 7), (1, 1)), [S0, S2]),
        (t.roll(6, 1), x.roll(6, 1), [S0, S2]),
        (place(x, mesh, [R, R], graph).roll(3), x.roll(3), [R, R]),
    ):
        assert out.placements == placements and out.shape == want.shape, (out, want.shape)
        assert torch.equal(out.to_torch(), want)
    for name, call, error in (
        ("roll", lambda: t.roll(1, 0), PlacementError),
        ("tile", lambda: t.tile(2, 1, 1), PlacementError),
        ("movedim", lambda: t.movedim((0, 0), (1, 2)), ShapeError),
        ("movedim", lambda: t.movedim((0, 1), 2), ShapeError),
        ("unflatten", lambda: t.unflatten(1, (4, -1)), ShapeError),
        ("unflatten", lambda: t.unflatten(1, ()), ShapeError),
        ("roll", lambda: t.roll((1, 2), 1), ShapeError),
        ("roll", lambda: t.roll((), ()), ParamError),
    ):
        with pytest.raises(error, match=rf"^{name}: "):
            call()


def test_traced_program_replays_and_loads(graph: dtorch.Graph, tmp_path: Path) -> None:
    """The new operators trace, replay, save and load (their params through the codec)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((4, 6), generator=_G)
    index = torch.randint(0, 6, (4, 3), generator=_G)

    def fn(t: dtorch.Tensor, i: dtorch.Tensor) -> Any:
        top = t.topk(2)
        return t.sort(1).indices, top.values, t.flip(1), t.gather(1, i), t.roll(1, 1)

    want = (x.sort(1).indices, x.topk(2).values, x.flip(1), x.gather(1, index), x.roll(1, 1))
    args = (place(x, mesh, [S0], graph), place(index, mesh, [S0], graph))
    program = dtorch.trace(fn, *args)
    program.save(tmp_path / "order.dtorch")
    loaded = dtorch.load_program(tmp_path / "order.dtorch", graph=graph)
    for run in (program, loaded):
        for out, w in zip(run(*args), want, strict=True):
            assert out.placements == [S0] and torch.equal(out.to_torch(), w)


@pytest.mark.parametrize("name", ["sort", "topk"])
def test_sort_and_topk_along_a_sharded_dim_are_contiguous_as_torch(
    name: str, graph: dtorch.Graph
) -> None:
    """torch's sort and topk give contiguous tensors, so a write through ``contiguous()``,
    ``view`` or ``reshape`` of one reaches it; along a sharded dim (where each device keeps
    its block of the whole sorted dim, or picks the top ``k`` from the blocks') too."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((4, 6), generator=_G)
    call = {"sort": lambda lib, t: lib.sort(t, 1), "topk": lambda lib, t: lib.topk(t, 6, 1)}[name]
    for which in ("values", "indices"):
        aliases = (lambda v: v.contiguous(), lambda v: v.view(4, 6), lambda v: v.reshape(2, 2, 6))
        for alias in aliases:
            want = getattr(call(torch, x), which)
            alias(want).add_(100)
            got = getattr(call(dtorch, place(x, mesh, [S1], graph)), which)
            alias(got).add_(100)
            assert torch.equal(got.to_torch(), want), which


def test_sorts_along_a_sharded_dim_trace_and_load(graph: dtorch.Graph, tmp_path: Path) -> None:
    """SplitSort and SplitOrderStat (sort and median along a sharded dim) trace, replay, save
    and load (their params through the codec)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((5, 3), generator=_G)

    def fn(t: dtorch.Tensor) -> Any:
        return t.sort(0).indices, t.median(0).values, t.argsort(0, descending=True)

    want = (x.sort(0).indices, x.median(0).values, x.argsort(0, descending=True))
    t = place(x, mesh, [S0], graph)
    program = dtorch.trace(fn, t)
    program.save(tmp_path / "split_sort.dtorch")
    loaded = dtorch.load_program(tmp_path / "split_sort.dtorch", graph=graph)
    for run in (program, loaded):
        outs = run(t)
        assert [o.placements for o in outs] == [[S0], [R], [S0]]
        for out, w in zip(outs, want, strict=True):
            assert torch.equal(out.to_torch(), w)


def test_edge_forms_follow_torch(graph: dtorch.Graph) -> None:
    """0-d movedim, roll over no dims (the flattened tensor), and torch's refusals of flip
    and tile without dims and of a bool shift: each as torch does it."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, scalar = torch.arange(24.0).reshape(2, 3, 4), torch.tensor(1.5)
    t, s = place(x, mesh, [R], graph), place(scalar, mesh, [R], graph)
    for out, want in (
        (s.movedim(0, -1), scalar.movedim(0, -1)),
        (t.roll(1, dims=[]), x.roll(1, dims=[])),
        (t.roll([2]), x.roll([2])),
    ):
        assert torch.equal(out.to_torch(), want)
    for call in (lambda a: a.flip(), lambda a: a.tile(), lambda a: a.roll(True, 0)):
        with pytest.raises(TypeError) as expected:
            call(x)
        with pytest.raises(TypeError, match=str(expected.value).split("(")[0]):
            call(t)


def test_a_split_gather_and_embedding_keep_negative_zeros(graph: dtorch.Graph) -> None:
    """The devices that do not own a picked entry hold -0.0 in its place: it adds to any
    value unchanged, where a +0.0 made a picked -0.0 into +0.0 (a review's finding)."""
    x = torch.tensor([[-0.0, 1.0, 2.0, 3.0, -0.0], [0.0, -0.0, 5.0, -1.0, 0.0]])
    index = torch.tensor([[0, 4, 1], [1, 0, 4]])
    table = x.T.contiguous()  # embedding rows: the vocab
    ids = torch.tensor([0, 4, 1, 2])
    for mesh_shape in ((2,), (3,), (2, 2)):
        mesh = dtorch.init_device_mesh("cpu", mesh_shape)
        rest = [R] * (len(mesh_shape) - 1)
        got = place(x, mesh, [S1, *rest], graph).gather(1, place(index, mesh, [R, *rest], graph))
        want = x.gather(1, index)
        assert torch.equal(got.to_torch().signbit(), want.signbit()), mesh_shape
        looked = dtorch.nn.functional.embedding(
            place(ids, mesh, [R, *rest], graph), place(table, mesh, [S0, *rest], graph)
        )
        want = torch.nn.functional.embedding(ids, table)
        assert torch.equal(looked.to_torch(), want), mesh_shape
        assert torch.equal(looked.to_torch().signbit(), want.signbit()), mesh_shape
