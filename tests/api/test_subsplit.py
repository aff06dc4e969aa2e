"""Shard with sub_split_coordinates (DTorch's concatenation layout), through the public API and
against torch.chunk: the placement's surface, its local sizes, and its clear refusals. cat on a
sharded dim does not make it yet (it is refused, as before); see dtorch.ir.subsplit."""

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
def test_marked_placements_are_refused_where_they_enter(mesh_shape, graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    rest = [Replicate()] * (len(mesh_shape) - 1)
    full = torch.arange(20.0).reshape(10, 2)
    with pytest.raises(PlacementError, match="sub_split_coordinates"):
        dtorch.from_torch(full, device_mesh=mesh, placements=[MARKED, *rest], graph=graph)
    t = dtorch.from_torch(full, device_mesh=mesh, placements=[Shard(0), *rest], graph=graph)
    with pytest.raises(PlacementError, match="sub_split_coordinates"):
        t.redistribute(mesh, [MARKED, *rest])


def test_cat_on_the_sharded_dim_is_still_refused(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    a = dtorch.from_torch(torch.ones(4), device_mesh=mesh, placements=[Shard(0)], graph=graph)
    b = dtorch.from_torch(torch.ones(6), device_mesh=mesh, placements=[Shard(0)], graph=graph)
    with pytest.raises(PlacementError):
        dtorch.cat([a, b])
