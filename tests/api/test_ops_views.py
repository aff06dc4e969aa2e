"""Shape operators through the public API against torch: ``view reshape flatten`` (merging and
splitting dims), ``squeeze unsqueeze transpose permute expand expand_as contiguous T``, as
methods and ``dtorch.*`` functions, on 1-D, 2-D and 3-D meshes, even and uneven shards.

On 1-D meshes the output placements follow tables derived from the layout math: a dim move
moves the shard with its dim, Partial stays Partial (every view is linear), and a view that
merges or splits dims keeps a shard of the group's outermost dim only when each device's rows
are exactly its chunk of the result (the flat ranges before and after coincide)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
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
    limit_for,
    place,
    run_api,
)

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(77)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(77)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


def moved_table(ndim: int, where: Callable[[int], int | None]) -> Table:
    """A dim move: input dim d's shard becomes a shard of output dim ``where(d)`` (None: the
    dim is dropped or broadcast, so its shards are refused); R and P stay."""
    table: dict[tuple[Any, ...], Any] = {(R,): R, (P,): P}
    for d in range(ndim):
        out = where(d)
        if out is not None:
            table[(Shard(d),)] = Shard(out)
    return table


def _chunks(size: int, parts: int) -> list[int]:
    """Per-device sizes of ``torch.chunk`` (zeros for devices past the last chunk)."""
    sizes = [len(c) for c in torch.arange(size).chunk(parts)]
    return sizes + [0] * (parts - len(sizes))


def _groups(a: Sequence[int], b: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Runs of non-1 dims of ``a`` and ``b`` whose sizes multiply to the same number."""
    ia, ib = [d for d, s in enumerate(a) if s != 1], [d for d, s in enumerate(b) if s != 1]
    groups, i, j = [], 0, 0
    while i < len(ia):
        ga, gb = [ia[i]], [ib[j]]
        pa, pb = a[ia[i]], b[ib[j]]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                ga.append(ia[i])
                pa, i = pa * a[ia[i]], i + 1
            else:
                gb.append(ib[j])
                pb, j = pb * b[ib[j]], j + 1
        groups.append((ga, gb))
    return groups


def view_table(src: Sequence[int], dst: Sequence[int], devices: int) -> Table:
    """The 1-D table of viewing ``src`` as ``dst`` on ``devices`` devices (see the module)."""
    table: dict[tuple[Any, ...], Any] = {(R,): R, (P,): P}
    if list(src) == list(dst):
        return {**table, **{(Shard(d),): Shard(d) for d in range(len(src))}}
    for ga, gb in _groups(src, dst):
        d, e = ga[0], gb[0]
        inner_a, inner_b = math.prod(src[k] for k in ga[1:]), math.prod(dst[k] for k in gb[1:])
        before = [n * inner_a for n in _chunks(src[d], devices)]
        after = [n * inner_b for n in _chunks(dst[e], devices)]
        if before == after:
            table[(Shard(d),)] = Shard(e)
    for d, e in _size_one_pairs(src, dst):  # all on the first device, nothing on the others
        table[(Shard(d),)] = Shard(e)
    return table


def _size_one_pairs(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """Size-1 dims of ``a`` and ``b`` with the same number of elements before them, the
    first of ``a`` with the first of ``b`` and so on: a view keeps such a dim's shard."""
    pairs = []
    for count in {math.prod(a[:d]) for d in range(len(a)) if a[d] == 1}:
        mine = [d for d in range(len(a)) if a[d] == 1 and math.prod(a[:d]) == count]
        theirs = [e for e in range(len(b)) if b[e] == 1 and math.prod(b[:e]) == count]
        pairs += list(zip(mine, theirs, strict=False))
    return pairs


_VIEWS = [
    ((8, 3), (24,)),
    ((8, 3), (2, 4, 3)),
    ((6, 4), (3, 8)),
    ((6, 4), (24,)),
    ((2, 3, 4), (6, 4)),
    ((2, 3, 4), (2, 12)),
    ((12,), (3, 4)),
    ((4, 1, 3), (12,)),
    ((1, 6), (6, 1)),
    ((5, 2), (5, 2)),
    ((1, 5, 8), (1, 5, 2, 4)),  # a batch of one: its size-1 dim keeps its shard
    ((1, 6), (1, 2, 3)),
    ((3, 1, 4), (3, 1, 2, 2)),
    ((2, 1, 6), (1, 2, 6)),
]

_VIEW_CALLS: list[tuple[str, Callable[..., Any]]] = [
    ("view", lambda t, s: t.view(*s)),
    ("view", lambda t, s: t.view(s)),
    ("reshape", lambda t, s: t.reshape(s)),
    ("reshape", dtorch.reshape),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("src", "dst"), _VIEWS)
def test_view_and_reshape_every_layout(  # type: ignore[no-untyped-def]
    src, dst, mesh_shape, graph
) -> None:
    """Every layout on 1-D meshes with the derived table; on 2-D/3-D meshes (nested and
    uneven shards) a sample checked against torch's values and the rejection messages."""
    x = _randn(*src)
    one_d = len(mesh_shape) == 1
    table = view_table(src, dst, mesh_shape[0]) if one_d else None
    calls = _VIEW_CALLS if one_d else _VIEW_CALLS[::3]
    for name, call in calls:
        run_api(
            graph, name, lambda t, c=call: c(t, dst), [x], mesh_shape, [x.view(dst)],
            table=table, limit=limit_for(mesh_shape, n_d=12),
        )  # fmt: skip


def test_view_with_minus_one_and_flatten(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = _randn(8, 3, 2)
    t = place(x, mesh, [S0], graph)
    for out, want, placement in (
        (t.view(-1, 6), x.view(-1, 6), S0),
        (t.reshape(4, -1), x.reshape(4, -1), S0),
        (t.flatten(), x.flatten(), S0),
        (dtorch.flatten(t, 1), torch.flatten(x, 1), S0),
        (t.flatten(0, 1), x.flatten(0, 1), S0),
        (t.flatten(-2, -1), x.flatten(-2, -1), S0),
    ):
        assert out.shape == want.shape and out.placements == [placement]
        assert torch.equal(out.to_torch(), want)


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("start", "end"), [(0, -1), (1, 2), (0, 1), (2, 2)])
def test_flatten_every_layout(start: int, end: int, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = _randn(4, 3, 2)
    want = x.flatten(start, end)
    table = view_table(x.shape, want.shape, mesh_shape[0]) if len(mesh_shape) == 1 else None
    run_api(
        graph, "flatten", lambda t: t.flatten(start, end), [x], mesh_shape, [want], table=table,
        limit=limit_for(mesh_shape, n_d=12),
    )  # fmt: skip


def _inverse(order: Sequence[int]) -> Callable[[int], int]:
    return lambda d: list(order).index(d)


#: name, dtorch call, torch call, where input dim d goes (None: refused when sharded).
_MOVES: list[tuple[str, Callable[..., Any], Callable[..., Any], Callable[[int], int | None]]] = [
    ("transpose", lambda t: t.transpose(0, 2), lambda x: x.transpose(0, 2), _inverse((2, 1, 0))),
    ("transpose", lambda t: dtorch.transpose(t, -1, 1), lambda x: x.transpose(-1, 1),
     _inverse((0, 2, 1))),
    ("permute", lambda t: t.permute(2, 0, 1), lambda x: x.permute(2, 0, 1), _inverse((2, 0, 1))),
    ("permute", lambda t: t.permute((1, 2, 0)), lambda x: x.permute(1, 2, 0), _inverse((1, 2, 0))),
    ("permute", lambda t: dtorch.permute(t, (0, 2, 1)), lambda x: x.permute(0, 2, 1),
     _inverse((0, 2, 1))),
    ("permute", lambda t: t.T, lambda x: x.permute(2, 1, 0), _inverse((2, 1, 0))),
    ("unsqueeze", lambda t: t.unsqueeze(0), lambda x: x.unsqueeze(0), lambda d: d + 1),
    ("unsqueeze", lambda t: dtorch.unsqueeze(t, -1), lambda x: x.unsqueeze(-1), lambda d: d),
    ("unsqueeze", lambda t: t.unsqueeze(2), lambda x: x.unsqueeze(2),
     lambda d: d if d < 2 else d + 1),
    ("contiguous", lambda t: t.transpose(0, 1).contiguous(), lambda x: x.transpose(0, 1),
     _inverse((1, 0, 2))),
]  # fmt: skip

#: The same on a (5, 1, 3) input, whose size-1 dim cannot keep a shard that squeezes or expands.
_SIZE_ONE: list[tuple[str, Callable[..., Any], Callable[..., Any], Callable[[int], int | None]]] = [
    ("squeeze", lambda t: t.squeeze(1), lambda x: x.squeeze(1), {0: 0, 2: 1}.get),
    ("squeeze", lambda t: t.squeeze(), lambda x: x.squeeze(), {0: 0, 2: 1}.get),
    ("squeeze", lambda t: dtorch.squeeze(t, (0, 1)), lambda x: x.squeeze((0, 1)),
     {0: 0, 2: 1}.get),
    ("squeeze", lambda t: t.squeeze(0), lambda x: x.squeeze(0), lambda d: d),
    ("expand", lambda t: t.expand(2, 5, 4, 3), lambda x: x.expand(2, 5, 4, 3),
     {0: 1, 2: 3}.get),
    ("expand", lambda t: t.expand(-1, 2, -1), lambda x: x.expand(-1, 2, -1),
     {0: 0, 2: 2}.get),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(
    ("name", "call", "ref", "where", "shape"),
    [(*m, (4, 2, 3)) for m in _MOVES] + [(*m, (5, 1, 3)) for m in _SIZE_ONE],
)
def test_dim_moves_every_layout(  # type: ignore[no-untyped-def]
    name, call, ref, where, shape, mesh_shape, graph
) -> None:
    x = _randn(*shape)
    run_api(
        graph, name, call, [x], mesh_shape, [ref(x)], table=moved_table(x.ndim, where),
        limit=limit_for(mesh_shape, n_d=12),
    )  # fmt: skip


def test_expand_as_is_contiguous_and_dtypes(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = (_randn(1, 5) * 4).to(torch.int64)
    big = place(_randn(3, 5), mesh, [R, S1], graph)
    t = place(x, mesh, [R, S1], graph)
    out = t.expand_as(big)
    assert out.placements == [R, S1] and out.dtype == torch.int64
    assert torch.equal(out.to_torch(), x.expand(3, 5))
    assert t.transpose(0, 1).is_contiguous() and t.contiguous().placements == [R, S1]
    b = place(x > 0, mesh, [S1, R], graph)
    assert torch.equal(b.view(5).to_torch(), (x > 0).view(5))
    assert b.view(5).placements == [S0, R]


def test_rejections(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    t = place(_randn(8, 3), mesh, [S0], graph)
    with pytest.raises(PlacementError) as info:
        t.view(24)
    text = str(info.value)
    assert text.startswith("view: got (S(0),) on mesh (3,); viewing [8, 3] as [24]")
    assert "accepted: R, P, or a shard of a dim kept as is" in text
    with pytest.raises(PlacementError, match=r"^reshape: got \(S\(1\),\).*accepted"):
        place(_randn(8, 3), mesh, [S1], graph).reshape(24)
    with pytest.raises(PlacementError, match=r"^flatten: got \(S\(0\),\).*accepted"):
        t.flatten()
    size_one = place(_randn(5, 1, 3), mesh, [S1], graph)
    with pytest.raises(PlacementError, match=r"^squeeze: got \(S\(1\),\).*accepted"):
        size_one.squeeze(1)
    with pytest.raises(PlacementError, match=r"^expand: got \(S\(1\),\).*accepted"):
        size_one.expand(5, 4, 3)
    with pytest.raises(ShapeError, match=r"^view: shape \[5, 5\] is invalid for input of size 24"):
        t.view(5, 5)
    with pytest.raises(ShapeError, match=r"^reshape: shape \[-1, -1\] is invalid"):
        t.reshape(-1, -1)
    with pytest.raises(ShapeError, match=r"^permute: \[0, 0\] is not a permutation"):
        t.permute(0, 0)
    with pytest.raises(ShapeError, match=r"^expand: cannot expand \[8, 3\] to \[8, 4\]"):
        t.expand(8, 4)
    with pytest.raises(IndexError, match="out of range"):
        t.transpose(0, 2)
    with pytest.raises(ShapeError, match=r"^flatten: start_dim 1 comes after end_dim 0"):
        t.flatten(1, 0)


def test_chunk_into_more_parts_than_elements_costs_only_the_parts(graph: dtorch.Graph) -> None:
    """torch.chunk makes at most the dim's size of parts, whatever ``chunks`` is (and as many
    empty parts as asked of an empty dim): recording costs the parts, not ``chunks``."""
    x = dtorch.arange(6.0, graph=graph).view(3, 2)
    started = time.monotonic()
    parts = x.chunk(10**9)
    assert time.monotonic() - started < 1.0
    expected = torch.arange(6.0).view(3, 2).chunk(10**9)
    assert [p.tolist() for p in parts] == [e.tolist() for e in expected]
    columns = [[[0.0], [2.0], [4.0]], [[1.0], [3.0], [5.0]]]
    assert [p.tolist() for p in x.chunk(10**9, dim=1)] == columns
    assert len(dtorch.ones(0, graph=graph).chunk(3)) == len(torch.ones(0).chunk(3)) == 3
