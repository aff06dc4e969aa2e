"""Shard with sub_split_coordinates (DTorch's concatenation layout), through the public API and
against torch: the placement's surface and local sizes (torch.chunk), cat along a sharded dim
(values, placements, local pieces), to_torch, redistribution from and to it, elementwise ops,
slices at part boundaries, and the clear refusals of everything else (dtorch.ir.rules.marked)."""

from __future__ import annotations

import itertools

import pytest
import torch

import dtorch
from dtorch import Replicate, Shard
from dtorch.errors import PlacementError
from dtorch.ir.placement import normalize_placements
from dtorch.ir.sharding import local_shape_and_offset
from dtorch.ir.subsplit import segment_pieces

MARKED = Shard(0, sub_split_coordinates=(4,))


def test_the_placement_surface() -> None:
    assert MARKED.has_sub_split_coordinates() and MARKED.get_sub_split_coordinates() == (4,)
    assert not Shard(0).has_sub_split_coordinates() and Shard(0).get_sub_split_coordinates() == ()
    assert Shard(0) != MARKED and hash(MARKED) == hash(Shard(0, sub_split_coordinates=(4,)))
    assert MARKED.plain() == Shard(0) and MARKED.is_shard(0)
    assert "sub_split_coordinates=(4,)" in repr(MARKED)
    assert Shard(-1, sub_split_coordinates=(2,)).normalized(2) == Shard(1, -1, (2,))
    # the nesting order is a separate field with its own name
    assert Shard(0, split_order=1) != Shard(0, sub_split_coordinates=(1,))


@pytest.mark.parametrize("bad", [(0,), (3, 3), (5, 2), (-1,), (1.5,), "4"])
def test_bad_coordinates_are_refused(bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PlacementError, match="sub_split_coordinates"):
        Shard(0, sub_split_coordinates=bad)


def test_normalize_keeps_the_marks() -> None:
    got = normalize_placements((Shard(-2, sub_split_coordinates=(3,)), Replicate()), 2, 2)
    assert got == (Shard(0, sub_split_coordinates=(3,)), Replicate())


def _local_pieces(full: torch.Tensor, coords: tuple[int, ...], parts: int) -> list[torch.Tensor]:
    # the oracle: torch.chunk of every segment, a device's pieces concatenated
    bounds = (0, *coords, full.shape[0])
    segs = [full[a:b] for a, b in itertools.pairwise(bounds)]
    out = []
    for i in range(parts):
        mine = [s.chunk(parts)[i] if i < len(s.chunk(parts)) else s[:0] for s in segs]
        out.append(torch.cat(mine))
    return out


@pytest.mark.parametrize(
    ("size", "coords", "parts"), [(10, (4,), 2), (10, (4, 6), 3), (7, (1, 2), 4), (9, (3,), 4)]
)
def test_local_sizes_and_pieces_match_torch_chunk(size, coords, parts) -> None:  # type: ignore[no-untyped-def]
    full = torch.arange(size)
    oracle = _local_pieces(full, coords, parts)
    for i in range(parts):
        pieces = segment_pieces(size, coords, parts, i)
        got = torch.cat([full[s : s + n] for s, n in pieces])
        assert torch.equal(got, oracle[i])
        placement = (Shard(0, sub_split_coordinates=coords), Replicate())
        shape, _ = local_shape_and_offset((size, 3), (parts, 2), placement, (i, 1))
        assert shape == (len(oracle[i]), 3)


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2), (2, 1, 2)])
def test_marked_placements_are_made_at_creation(mesh_shape, graph) -> None:  # type: ignore[no-untyped-def]
    """Each device takes its piece of every segment (tests/api/test_creation_marked.py)."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    rest = [Replicate()] * (len(mesh_shape) - 1)
    full = torch.arange(20.0).reshape(10, 2)
    made = dtorch.from_torch(full, device_mesh=mesh, placements=[MARKED, *rest], graph=graph)
    assert made.placements == [MARKED, *rest] and torch.equal(made.to_torch(), full)


#: (mesh shape, placements of the parts, cat dim, the parts' shapes). The marked mesh dim is
#: the one that shards the cat dim; uneven and empty chunks included ((4,): local [4, 2, 1, 0]).
CASES = [
    ((2,), [Shard(0)], 0, [(4, 3), (6, 3)]),
    ((4,), [Shard(0)], 0, [(1,), (1,), (5,)]),
    ((3,), [Shard(1)], 1, [(2, 5), (2, 1), (2, 4)]),
    ((2, 2), [Shard(1), Shard(0)], 0, [(3, 4), (5, 4)]),
    ((2, 2), [Replicate(), Shard(1)], 1, [(2, 3), (2, 1)]),
    ((2, 1, 2), [Shard(1), Replicate(), Shard(0)], 0, [(3, 2), (2, 2), (4, 2)]),
]


def _parts(shapes: list[tuple[int, ...]]) -> list[torch.Tensor]:
    # distinct values in every part, so a misplaced piece shows
    out, start = [], 0
    for shape in shapes:
        n = int(torch.Size(shape).numel())
        out.append(torch.arange(start, start + n, dtype=torch.float32).reshape(shape))
        start += n
    return out


def _cat_case(case, graph):  # type: ignore[no-untyped-def]
    mesh_shape, placements, dim, shapes = case
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    fulls = _parts(shapes)
    parts = [
        dtorch.from_torch(f, device_mesh=mesh, placements=placements, graph=graph) for f in fulls
    ]
    return mesh, fulls, dtorch.cat(parts, dim), torch.cat(fulls, dim)


def _mark(placements, dim, coords):  # type: ignore[no-untyped-def]
    return [Shard(dim, sub_split_coordinates=coords) if p == Shard(dim) else p for p in placements]


def _boundaries(shapes, dim):  # type: ignore[no-untyped-def]
    return tuple(itertools.accumulate(s[dim] for s in shapes[:-1]))


@pytest.mark.parametrize("case", CASES)
def test_cat_of_sharded_parts_is_marked_and_right(case, graph) -> None:  # type: ignore[no-untyped-def]
    mesh, _, got, want = _cat_case(case, graph)
    _, placements, dim, shapes = case
    assert list(got.placements) == _mark(placements, dim, _boundaries(shapes, dim))
    assert tuple(got.shape) == tuple(want.shape)
    assert torch.equal(got.to_torch(), want)
    # repeated cat: a marked part's own boundaries shift into place, a plain part adds none
    again = dtorch.cat([got, got.redistribute(mesh, placements), got], dim)
    assert torch.equal(again.to_torch(), torch.cat([want, want, want], dim))
    n, inner = want.shape[dim], _boundaries(shapes, dim)
    coords = (*inner, n, 2 * n, *(2 * n + c for c in inner))
    assert list(again.placements) == _mark(placements, dim, coords)


def _replicate(mesh, placements):  # type: ignore[no-untyped-def]
    return [Replicate()] * len(placements)


@pytest.mark.parametrize("case", CASES)
def test_redistribute_from_and_to_the_marked_layout(case, graph) -> None:  # type: ignore[no-untyped-def]
    mesh, _, got, want = _cat_case(case, graph)
    _, placements, dim, _ = case
    targets = [_replicate(mesh, placements), placements]
    if want.ndim > 1:  # the other dim sharded instead
        targets.append([Shard(1 - dim), *placements[1:]])
    for target in targets:
        moved = got.redistribute(mesh, target)
        assert moved.placements == target and torch.equal(moved.to_torch(), want)
    full = dtorch.from_torch(want, device_mesh=mesh, placements=_replicate(mesh, placements))
    marked = full.redistribute(mesh, got.placements)
    assert marked.placements == got.placements
    assert torch.equal(marked.to_torch(), want)
    assert torch.equal((marked - got).to_torch(), torch.zeros_like(want))


@pytest.mark.parametrize(
    ("mesh_shape", "placements"),
    [((2,), None), ((3,), None), ((2, 2), [Shard(0), Shard(1)])],
    ids=str,
)
def test_redistribute_between_marks_of_different_dims(mesh_shape, placements, graph) -> None:  # type: ignore[no-untyped-def]
    """A cat along dim 0 into the layout of a cat along dim 1, and back: each part kept the
    target's other mark, which the joining cat refused (naming cat, which the user never
    called)."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    want = torch.arange(35.0).reshape(5, 7)

    def cat_of(dim: int, cut: int) -> dtorch.Tensor:
        plain = placements or [Shard(dim)]
        parts = want.split([cut, want.shape[dim] - cut], dim)
        on = [dtorch.from_torch(t, device_mesh=mesh, placements=plain, graph=graph) for t in parts]
        return dtorch.cat(on, dim)

    rows, cols = cat_of(0, 2), cat_of(1, 3)
    assert rows.placements != cols.placements
    for source, target in ((rows, cols), (cols, rows)):
        moved = source.redistribute_like(target)
        assert moved.placements == target.placements
        assert torch.equal(moved.to_torch(), want)
        assert torch.equal((moved - target).to_torch(), torch.zeros_like(want))


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3], CASES[5]])
def test_elementwise_ops_keep_the_mark(case, graph) -> None:  # type: ignore[no-untyped-def]
    mesh, _, got, want = _cat_case(case, graph)
    _, placements, _, _ = case
    other = torch.linspace(-3.0, 5.0, want.numel()).reshape(want.shape)
    r = dtorch.from_torch(other, device_mesh=mesh, placements=_replicate(mesh, placements))
    row = dtorch.from_torch(other[0], device_mesh=mesh, placements=_replicate(mesh, placements))
    results = {
        "got + r": (got + r, want + other),
        "r * got": (r * got, other * want),
        "got / row": (got / row, want / other[0]),
        "2 * got": (2 * got, 2 * want),
        "-got": (-got, -want),
        "got.exp()": (got.exp(), want.exp()),
        "got * got": (got * got, want * want),
        "got > r": (got > r, want > other),
        "got.to(float64)": (got.to(torch.float64), want.to(torch.float64)),
        "got.clone()": (got.clone(), want.clone()),
    }
    for text, (out, expected) in results.items():
        assert out.placements == got.placements, text
        assert torch.equal(out.to_torch(), expected), text


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3], CASES[5]])
def test_in_place_where_and_clamp_keep_the_mark(case, graph) -> None:  # type: ignore[no-untyped-def]
    """In-place forms write back elementwise (a Copy that keeps the layout), and where/clamp
    are elementwise too: each keeps the mark and the value is torch's."""
    mesh, _, got, want = _cat_case(case, graph)
    _, placements, _, _ = case
    other = torch.linspace(-3.0, 5.0, want.numel()).reshape(want.shape)
    r = dtorch.from_torch(other, device_mesh=mesh, placements=_replicate(mesh, placements))
    steps = [
        ("add_", lambda t, o: t.add_(o)),
        ("exp_", lambda t, o: t.exp_()),
        ("mul_ self", lambda t, o: t.mul_(t)),
        ("clamp_", lambda t, o: t.clamp_(1.0, 1e6)),
        ("copy_", lambda t, o: t.copy_(o)),
        ("where", lambda t, o: t.where(t > 0, o)),
        ("nan_to_num", lambda t, o: t.nan_to_num()),
    ]
    for text, step in steps:
        out, expected = step(got, r), step(want, other)
        assert out.placements == got.placements, text
        torch.testing.assert_close(out.to_torch(), expected, msg=text)
    assert torch.equal(got.to_torch(), want)  # the in-place steps changed both alike


@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[5]])
def test_slices_at_part_boundaries(case, graph) -> None:  # type: ignore[no-untyped-def]
    _, _, got, want = _cat_case(case, graph)
    _, placements, dim, shapes = case
    bounds = (0, *_boundaries(shapes, dim), want.shape[dim])
    lead = (slice(None),) * dim
    for a, b in itertools.pairwise(bounds):  # one part: a plain Shard tensor
        part = got[(*lead, slice(a, b))]
        assert part.placements == placements
        assert torch.equal(part.to_torch(), want[(*lead, slice(a, b))])
    if len(bounds) > 3:  # several parts: the inner boundaries, shifted
        part = got[(*lead, slice(bounds[1], bounds[3]))]
        assert part.placements == _mark(placements, dim, (bounds[2] - bounds[1],))
        assert torch.equal(part.to_torch(), want[(*lead, slice(bounds[1], bounds[3]))])
    assert torch.equal(got[(*lead, slice(None))].to_torch(), want)


def test_what_does_not_understand_the_mark_refuses(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    fulls = _parts([(4, 3), (6, 3)])
    parts = [
        dtorch.from_torch(f, device_mesh=mesh, placements=[Shard(0), Replicate()]) for f in fulls
    ]
    got = dtorch.cat(parts)
    other = dtorch.cat([parts[1], parts[0]])  # marked at 6, not 4
    plain = dtorch.from_torch(
        torch.cat(fulls), device_mesh=mesh, placements=[Shard(0), Replicate()]
    )
    # sharded on the other mesh dim: the plain rule would shard the marked dim twice
    across = dtorch.from_torch(
        torch.cat(fulls), device_mesh=mesh, placements=[Replicate(), Shard(0)]
    )
    refusals = {
        "sum": lambda: got.sum(0),
        "getitem": lambda: got[1:4],
        "getitem ": lambda: got[2],
        "getitem  ": lambda: got[0:4, 1:],
        "add": lambda: got + other,
        "add ": lambda: got + plain,
        "mul": lambda: got * across,
        "matmul": lambda: got @ torch_ones(mesh),
    }
    for name, call in refusals.items():
        with pytest.raises(
            PlacementError, match=rf"^{name.strip()}: .*sub_split_coordinates"
        ) as info:
            call()
        assert "accepted" in str(info.value), name
    # a plain Shard on another mesh dim of the cat dim: the ordinary refusal
    nested = dtorch.from_torch(fulls[0], device_mesh=mesh, placements=[Shard(0), Shard(0)])
    with pytest.raises(PlacementError, match=r"^cat: "):
        dtorch.cat([nested, parts[1]])


def torch_ones(mesh):  # type: ignore[no-untyped-def]
    return dtorch.from_torch(torch.ones(3, 2), device_mesh=mesh, placements=[Replicate()] * 2)


def test_a_mask_write_refused_on_a_mark_names_setitem(graph: dtorch.Graph) -> None:
    """``t[mask] = number`` is recorded as ``masked_fill_``; its refusal of a marked tensor
    names what the user wrote (``setitem``), not the operator recorded."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    part = dtorch.from_torch(torch.randn(5, 3), device_mesh=mesh, placements=[Shard(0)],
                             graph=graph)  # fmt: skip
    marked = dtorch.cat([part, part], 0)
    with pytest.raises(PlacementError, match=r"^setitem: an input is Shard\(dim=0, sub_split"):
        marked[marked > 0.5] = 0.0
