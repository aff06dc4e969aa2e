"""Indexing and joining through the public API against torch: ``t[a:b, i, None, ...]``,
``t[...] = v``, ``cat``/``concat``/``stack``, ``chunk``, ``unbind``, ``repeat``,
``repeat_interleave``, iteration, ``len``, ``item`` and ``tolist``, on 1-D, 2-D and 3-D meshes,
even and uneven shards, every layout on 1-D meshes (a seeded sample on the larger ones).

The 1-D tables come from the chunk math: a slice of a sharded dim keeps the shard only when
every device's part of the slice is exactly its chunk of the result; an integer index, a chunk
or a tiling of a sharded dim is refused, a cat of it marks the parts' boundaries
(tests/api/test_subsplit.py); Partial stays Partial (all are linear)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import PlacementError, ShapeError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    P,
    R,
    Shard,
    Table,
    choices,
    layout_combos,
    limit_for,
    place,
    run_api,
)

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(909)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(909)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


def _chunks(size: int, parts: int) -> list[int]:
    """Per-device sizes of ``torch.chunk`` (zeros for devices past the last chunk)."""
    sizes = [len(c) for c in torch.arange(size).chunk(parts)]
    return sizes + [0] * (parts - len(sizes))


def _kept_by_slice(item: slice, size: int, devices: int) -> bool:
    """Each device's selected rows (in order) are exactly its chunk of the result."""
    picked = list(range(size))[item]
    bounds = [0]
    for n in _chunks(size, devices):
        bounds.append(bounds[-1] + n)
    counts = [sum(lo <= i < hi for i in picked) for lo, hi in itertools.pairwise(bounds)]
    return counts == _chunks(len(picked), devices)


def getitem_table(shape: Sequence[int], index: tuple[Any, ...], devices: int) -> Table:
    """One mesh dim: where each input dim goes (ints drop it, None inserts a dim)."""
    table: dict[tuple[Any, ...], Any] = {(R,): R, (P,): P}
    d, out = 0, 0
    for item in (*index, *[slice(None)] * (len(shape) - sum(i is not None for i in index))):
        if item is None:
            out += 1
            continue
        if isinstance(item, slice) and _kept_by_slice(item, shape[d], devices):
            table[(Shard(d),)] = Shard(out)
        out += isinstance(item, slice)
        d += 1
    return table


_INDICES: list[tuple[Any, ...]] = [
    (slice(2, 6),),
    (slice(0, 8, 2),),
    (slice(1, 7),),
    (slice(0, 5),),
    (slice(1, 8, 3),),
    (slice(3, 3),),
    (1,),
    (-1, slice(1, 4)),
    (None, slice(1, 3)),
    (slice(None), 2),
    (Ellipsis, slice(0, 6, 2)),
    (slice(None), None, slice(0, 6, 2)),
]


def _expanded(index: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    if Ellipsis not in index:
        return index
    at = index.index(Ellipsis)
    fill = ndim - sum(i is not None and i is not Ellipsis for i in index)
    return (*index[:at], *[slice(None)] * fill, *index[at + 1 :])


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("index", _INDICES, ids=repr)
def test_getitem_every_layout(index: tuple[Any, ...], mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _randn(8, 6)
    one_d = len(mesh_shape) == 1
    table = getitem_table(x.shape, _expanded(index, 2), mesh_shape[0]) if one_d else None
    run_api(
        graph, "getitem", lambda t: t[index], [x], mesh_shape, [x[index]], table=table,
        limit=limit_for(mesh_shape, n_d=12),
    )  # fmt: skip


def test_getitem_forms(graph: dtorch.Graph) -> None:
    """Single ints and slices, negative steps refused like torch, out-of-range ints."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = _randn(6, 4, 2)
    t = place(x, mesh, [S1, R], graph)
    for out, want in ((t[2], x[2]), (t[1:5], x[1:5]), (t[..., 1], x[..., 1]), (t[-2:], x[-2:])):
        assert torch.equal(out.to_torch(), want)
    assert t[2].placements == [S0, R]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        t[::-1]
    with pytest.raises(IndexError, match="out of bounds"):
        t[6]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0, 0]
    with pytest.raises(TypeError, match="unsupported index"):  # torch's class for a str
        t["a"]


_SLOTS: list[tuple[Any, ...]] = [
    (1,),
    (slice(2, 7),),
    (slice(0, 8, 3), 2),
    (slice(None), slice(1, 3)),
    (Ellipsis,),
    (None, 5),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("index", _SLOTS, ids=repr)
def test_setitem_number_every_layout(  # type: ignore[no-untyped-def]
    index, mesh_shape, graph
) -> None:
    """``t[index] = number`` writes in place on any layout of t (Partial too: the partial
    owner writes it) and keeps t's layout."""
    x = _randn(8, 4)
    want = x.clone()
    want[index] = 2.5
    table = {(p,): p for p in choices(2)}

    def write(t: Any) -> Any:
        t[index] = 2.5
        return t

    run_api(
        graph, "setitem", write, [x], mesh_shape, [want], table=table,
        limit=limit_for(mesh_shape, n_d=10),
    )  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("index", _SLOTS, ids=repr)
def test_setitem_tensor_every_layout(  # type: ignore[no-untyped-def]
    index, mesh_shape, graph
) -> None:
    """``t[index] = value``: a Replicate value goes into any layout of t; a value laid out as
    ``t[index]`` would be is written locally; anything else is refused."""
    x = _randn(8, 4)
    slot = x[index].shape
    value = _randn(*slot)
    want = x.clone()
    want[index] = value
    table: dict[tuple[Any, ...], Any] = {}
    if len(mesh_shape) == 1:
        sliced = getitem_table(x.shape, _expanded(index, 2), mesh_shape[0])
        table = {(p, R): p for p in choices(2)}
        table.update({(p, q): p for (p,), q in sliced.items()})

    def write(t: Any, v: Any) -> Any:
        t[index] = v
        return t

    accepted = run_api(
        graph, "setitem", write, [x, value], mesh_shape, [want], table=table or None,
        limit=limit_for(mesh_shape, 200, 10),
    )  # fmt: skip
    assert ((R,) * len(mesh_shape), (R,) * len(mesh_shape)) in accepted


def test_setitem_broadcast_values_and_dtypes(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = torch.zeros(7, 4, dtype=torch.int64)
    t = place(x, mesh, [S0], graph)
    t[:, 1:3] = place(torch.tensor([5, 6]), mesh, [R], graph)
    t[2] = 9
    t[..., 0] = 1.7  # converted to the tensor's dtype, as in torch
    x[:, 1:3] = torch.tensor([5, 6])
    x[2] = 9
    x[..., 0] = 1.7
    assert t.placements == [S0] and t.dtype == torch.int64
    assert torch.equal(t.to_torch(), x)
    with pytest.raises(TypeError, match=r"^setitem: value must be a number or a dtorch\.Tensor"):
        t[0] = "x"


def concat_table(ndim: int, dim: int, stack: bool, n: int, part: int) -> Table:
    """One mesh dim of cat/stack of ``n`` inputs (each ``part`` long in the cat dim): all R,
    all P, or the same shard (with R inputs chunked to match); stack shifts the dims after
    the new one; cat along the sharded dim marks the boundaries (sub_split_coordinates)."""
    table: dict[tuple[Any, ...], Any] = {(R,) * n: R, (P,) * n: P}
    bounds = tuple(part * i for i in range(1, n))
    for d in range(ndim):
        out = Shard(d + 1 if stack and d >= dim else d)
        if not stack and d == dim:
            out = Shard(d, sub_split_coordinates=bounds)
        for mask in range(1, 2**n):
            table[tuple(Shard(d) if mask >> i & 1 else R for i in range(n))] = out
    return table


_JOINS = [
    ("cat", False, 0, dtorch.cat),
    ("cat", False, 1, lambda ts, d: dtorch.concat(ts, dim=d)),
    ("cat", False, -1, lambda ts, d: dtorch.cat(tuple(ts), d)),
    ("stack", True, 0, dtorch.stack),
    ("stack", True, 1, lambda ts, d: dtorch.stack(ts, dim=d)),
    ("stack", True, 2, dtorch.stack),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("name", "stack", "dim", "call"), _JOINS)
def test_cat_and_stack_every_layout(  # type: ignore[no-untyped-def]
    name, stack, dim, call, mesh_shape, graph
) -> None:
    a, b = _randn(4, 3), _randn(4, 3)
    want = torch.stack([a, b], dim) if stack else torch.cat([a, b], dim)
    table = concat_table(2, dim % (3 if stack else 2), stack, 2, a.shape[dim % 2])
    combos = layout_combos(len(mesh_shape), [a, b], limit=limit_for(mesh_shape, n_d=12), seed=0)
    if not stack:  # the cat dim sharded on several mesh dims: refused, not in the 1-D table
        combos = [c for c in combos if _mesh_dims_sharding(c, dim % 2) < 2]
    run_api(
        graph, name, lambda x, y: call([x, y], dim), [a, b], mesh_shape, [want], table=table,
        combos=combos,
    )  # fmt: skip


def _mesh_dims_sharding(combo: Any, dim: int) -> int:
    # how many mesh dims shard ``dim`` of some input
    return len({m for layout in combo for m, p in enumerate(layout) if p == Shard(dim)})


def test_cat_of_three_sizes_and_dtypes(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    a, b = _randn(2, 5), _randn(5, 5).double()
    c = torch.randint(0, 5, (1, 5), generator=_G)
    want = torch.cat([a, b, c])
    ts = [place(a, mesh, [S1, R], graph), place(b, mesh, [R, R], graph)]
    out = dtorch.cat([*ts, place(c, mesh, [S1, R], graph)])
    assert out.placements == [S1, R] and out.dtype == torch.float64
    assert torch.equal(out.to_torch(), want)
    with pytest.raises(PlacementError, match=r"^cat: got \(S\(0\), R\) x .*accepted"):
        dtorch.cat([place(a, mesh, [S0, R], graph), place(b, mesh, [P, R], graph)])
    with pytest.raises(ShapeError, match=r"^cat: sizes .* must match except in dim 0"):
        dtorch.cat([ts[0], place(_randn(2, 4), mesh, [R, R], graph)])
    with pytest.raises(ShapeError, match=r"^stack: stack needs equal shapes"):
        dtorch.stack([ts[0], ts[1]])
    with pytest.raises(RuntimeError, match=r"^cat: expected a non-empty tuple or list"):
        dtorch.cat([])  # torch's RuntimeError


def test_stack_joins_zero_dim_tensors_and_cat_refuses_them(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    fulls = [torch.tensor(1.5), torch.tensor(2), torch.tensor(True)]
    for dim in (0, -1):
        out = dtorch.stack([place(t, mesh, [R], graph) for t in fulls], dim)
        want = torch.stack(fulls, dim)
        assert out.dtype == want.dtype and torch.equal(out.to_torch(), want)
    with pytest.raises(RuntimeError, match="zero-dimensional"):
        torch.cat(fulls)
    with pytest.raises(ShapeError, match=r"^cat: the tensor at position 1 is zero-dimensional"):
        dtorch.cat([place(torch.ones(2), mesh, [R], graph), place(fulls[0], mesh, [R], graph)])


def test_cat_skips_one_dim_empty_inputs_beside_others_as_torch(graph: dtorch.Graph) -> None:
    """torch's legacy rule: ``cat([tensor([]), x])`` of an x of another rank is x (an
    accumulator started empty), the empty input still taking part in the dtype; dtorch said
    'tensors differ in rank'."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x, empty = torch.arange(6).reshape(2, 3), torch.zeros(0, dtype=torch.float64)
    cases = [([x, empty], 0), ([empty, x, empty], 1), ([empty, empty], 0), ([x[0], empty], 0)]
    for fulls, dim in cases:
        want = torch.cat(fulls, dim)
        out = dtorch.cat(
            [place(t, mesh, [S0 if t.shape == (2, 3) else R], graph) for t in fulls], dim
        )
        assert (out.shape, out.dtype) == (want.shape, want.dtype), (fulls, dim)
        assert torch.equal(out.to_torch(), want)


def _keep_others(ndim: int, dim: int) -> Table:
    """One mesh dim: every placement but a shard of ``dim``."""
    return {(p,): p for p in choices(ndim) if p != Shard(dim)}


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("size", "chunks"), [(7, 3), (6, 3), (5, 4), (2, 4)])
def test_chunk_every_layout(size: int, chunks: int, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _randn(size, 4)
    for dim in (0, 1):
        want = list(torch.chunk(x, chunks, dim))
        for call in (
            lambda t, d=dim: t.chunk(chunks, d),
            lambda t, d=dim: dtorch.chunk(t, chunks, dim=d),
        ):
            run_api(
                graph, "chunk", call, [x], mesh_shape, want, table=_keep_others(2, dim),
                limit=limit_for(mesh_shape, n_d=8),
            )  # fmt: skip


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 3)])
def test_unbind_and_iteration(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    """``unbind`` (method and function) and ``for row in t`` give torch's rows, keeping the
    shards of the other dims; unbinding a sharded dim is refused, naming unbind."""
    x = _randn(3, 5)
    rest = [R] * (len(mesh_shape) - 1)
    t = place(x, dtorch.init_device_mesh("cpu", mesh_shape), [S1, *rest], graph)
    for rows in (t.unbind(0), dtorch.unbind(t), list(t), tuple(iter(t))):
        assert len(rows) == 3
        for row, want in zip(rows, x, strict=True):
            assert row.placements == [S0, *rest]
            assert torch.equal(row.to_torch(), want)
    with pytest.raises(PlacementError, match=r"^unbind: got \(S\(1\).*accepted"):
        t.unbind(1)


def test_unbind_sharded_dim_names_unbind(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = place(_randn(4, 3), mesh, [S0], graph)
    with pytest.raises(PlacementError, match=r"^unbind: got \(S\(0\),\).*accepted"):
        t.unbind(0)
    with pytest.raises(PlacementError, match=r"^iterating .* dim 0: unbind: got \(S\(0\),\)"):
        list(t)


def repeat_table(ndim: int, reps: Sequence[int]) -> Table:
    """One mesh dim of ``repeat``: shards of dims repeated once stay (shifted past the new
    leading dims); a tiled dim cannot stay sharded."""
    lead = len(reps) - ndim
    table: dict[tuple[Any, ...], Any] = {(R,): R, (P,): P}
    for d in range(ndim):
        if reps[lead + d] == 1:
            table[(Shard(d),)] = Shard(lead + d)
    return table


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("reps", [(1, 1), (2, 1), (1, 3), (2, 1, 1), (0, 2)])
def test_repeat_every_layout(reps: tuple[int, ...], mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _randn(5, 3)
    run_api(
        graph, "repeat", lambda t: t.repeat(*reps), [x], mesh_shape, [x.repeat(reps)],
        table=repeat_table(2, reps), limit=limit_for(mesh_shape, n_d=10),
    )  # fmt: skip


def interleave_table(shape: Sequence[int], repeats: int, dim: int | None, devices: int) -> Table:
    """One mesh dim of ``repeat_interleave``: other dims keep their shards; the repeated dim
    keeps its shard when each device's chunk times ``repeats`` is its chunk of the result;
    without a dim (flattened first) no shard is kept."""
    table: dict[tuple[Any, ...], Any] = {(R,): R, (P,): P}
    if dim is None and len(shape) > 1:
        return table
    d = 0 if dim is None else dim
    for k in range(len(shape)):
        ok = k != d or [n * repeats for n in _chunks(shape[k], devices)] == _chunks(
            shape[k] * repeats, devices
        )
        if ok:
            table[(Shard(k),)] = Shard(k)
    return table


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("repeats", [0, 1, 2, 3])
def test_repeat_interleave_every_layout(  # type: ignore[no-untyped-def]
    repeats, mesh_shape, graph
) -> None:
    for x in (_randn(4, 3), _randn(6)):
        for dim in (0, 1, None) if x.ndim == 2 else (0, None):
            want = torch.repeat_interleave(x, repeats, dim)
            one_d = len(mesh_shape) == 1
            table = interleave_table(x.shape, repeats, dim, mesh_shape[0]) if one_d else None
            for call in (
                lambda t, d=dim: t.repeat_interleave(repeats, d),
                lambda t, d=dim: dtorch.repeat_interleave(t, repeats, dim=d),
            ):
                run_api(
                    graph, "repeat_interleave", call, [x], mesh_shape, [want], table=table,
                    limit=limit_for(mesh_shape, n_d=6),
                )  # fmt: skip


def test_len_item_tolist_and_scalars(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.arange(12.0).reshape(4, 3)
    t = place(x, mesh, [S0, S1], graph)
    assert len(t) == 4 and t.tolist() == x.tolist() and t.sum().item() == 66.0
    whole = t.redistribute(mesh, [R, R])  # an integer index needs the dim unsharded
    assert whole[1, 2].item() == 5.0 and float(whole[3, 0]) == 9.0
    assert int(whole.long()[2, 2]) == 8 and whole.long()[1, 1].__index__() == 4
    assert bool(whole[0, 0] == 0.0)
    assert place(x, mesh, [P, R], graph).sum(1).tolist() == x.sum(1).tolist()
    with pytest.raises(ShapeError, match="item"):
        t.item()
    with pytest.raises(TypeError, match="len"):
        len(t.sum())
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(t.sum())
    for values in (torch.ones(2), t):  # torch's words, which dtorch's error repeats
        with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value"):
            bool(values)
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with no values"):
        bool(torch.zeros(0))  # torch's words, which dtorch's error repeats
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with no values"):
        bool(dtorch.zeros(0, graph=graph))


def _write(view: Any, value: float = 7.0) -> None:
    view[0] = value


#: Programs that write into a view (torch writes through it into the base) or into a copy
#: (the base keeps its values), as torch defines them.
_WRITES: list[tuple[str, Any]] = [
    ("slice", lambda t: _write(t[1:3])),
    ("step slice", lambda t: _write(t[::2])),
    ("chained index", lambda t: t[1].__setitem__(2, 7.0)),
    ("view", lambda t: _write(t.view(-1))),
    ("reshape", lambda t: _write(t.reshape(2, 12))),
    ("transpose", lambda t: _write(t.T)),
    ("permute", lambda t: _write(t.permute(1, 0))),
    ("unsqueeze", lambda t: _write(t.unsqueeze(0)[0])),
    ("squeeze", lambda t: _write(t[None].squeeze(0))),
    ("chunk", lambda t: _write(t.chunk(2, 1)[0])),
    ("unbind", lambda t: _write(t.unbind(1)[0])),
    ("detach", lambda t: _write(t.detach())),
    ("copy_ into a slice", lambda t: t[:, 0:2].copy_(t[:, 2:4] * 0 + 9)),
    ("clone", lambda t: _write(t.clone())),
    ("contiguous of a transpose", lambda t: _write(t.T.contiguous())),
    ("reshape of a transpose", lambda t: _write(t.T.reshape(-1))),
]


@pytest.mark.parametrize("placement", [R, S0, S1, P], ids=repr)
@pytest.mark.parametrize(("label", "program"), _WRITES, ids=[w[0] for w in _WRITES])
def test_writes_through_views_like_torch(label: str, program: Any, placement: Any, graph) -> None:  # type: ignore[no-untyped-def]
    """Writing into a view changes its base, writing into a copy does not, as in torch, on
    every layout that accepts the program (the others are refused at the call)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.arange(24.0).reshape(4, 6)
    t = place(x.clone(), mesh, [placement], graph)
    program(x)
    try:
        program(t)
    except PlacementError as error:
        assert placement != R, f"{label} refused on R: {error}"
        return
    assert torch.equal(t.to_torch(), x)


@pytest.mark.parametrize("placements", [[dtorch.Replicate()], [dtorch.Shard(1)]], ids=str)
def test_a_0d_integer_torch_tensor_indexes_as_an_int(placements: list[Any], graph: Any) -> None:
    # torch reads it as t[1]: a view that later writes reach (a 0-d uint8 or bool is a mask)
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(6.0).reshape(3, 2)
    t = dtorch.from_torch(full, device_mesh=mesh, placements=placements)
    row = t[torch.tensor(1, dtype=torch.int32)]
    t[torch.tensor(1)] = 4.0
    t[torch.tensor(2, dtype=torch.int8)].fill_(-1.0)
    want = full.clone()
    want_row = want[torch.tensor(1, dtype=torch.int32)]
    want[torch.tensor(1)] = 4.0
    want[torch.tensor(2, dtype=torch.int8)].fill_(-1.0)
    assert torch.equal(row.to_torch(), want_row) and torch.equal(t.to_torch(), want)
    mask = torch.tensor(1, dtype=torch.uint8)
    assert t[mask].shape == want[mask].shape
    column = dtorch.from_torch(full[:, 0], device_mesh=mesh)
    assert column[torch.tensor(1)].to_torch() == full[:, 0][torch.tensor(1)]  # a 0-d result


def test_a_0d_dtorch_index_gives_a_0d_result(graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.from_torch(torch.arange(9), device_mesh=mesh)
    index = dtorch.tensor(torch.tensor(4), device_mesh=mesh)
    assert t[index].shape == () and t[index].to_torch() == torch.tensor(4)
