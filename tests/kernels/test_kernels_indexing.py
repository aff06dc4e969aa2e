"""GetItem, Concat/stack, Chunk and RepeatInterleave simulated on 1-D, 2-D and 3-D meshes
against torch, incl. slices of sharded dims (kept only where the result is still chunked)."""

from __future__ import annotations

import pytest
import torch

from dtorch.ir.params import (
    ChunkParam,
    ConcatParam,
    GetItemParam,
    IndexEntry,
    RepeatInterleaveParam,
    SliceIndex,
)
from dtorch.ir.placement import Partial, Replicate, Shard
from tests.simulate import MESHES, python_index, run_layouts

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(13)
R, P = Replicate(), Partial()


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


_INDICES: list[tuple[IndexEntry, ...]] = [
    (SliceIndex(2, 6),),
    (SliceIndex(0, 8, 2),),
    (SliceIndex(1, 7),),
    (SliceIndex(0, 5),),
    (SliceIndex(1, 8, 3),),
    (SliceIndex(3, 3),),
    (1,),
    (-1, SliceIndex(1, 4)),
    (None, SliceIndex(1, 3)),
    (SliceIndex(0, 8), 2),
    (SliceIndex(0, 8), None, SliceIndex(0, 6, 2)),
]


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("index", _INDICES)
def test_getitem_all_layouts(index: tuple[IndexEntry, ...], mesh_shape: tuple[int, ...]) -> None:
    x = _randn(8, 6)
    want = x[python_index(index)]
    accepted = run_layouts("getitem", GetItemParam(index), [x], mesh_shape, [want], limit=80)
    assert accepted


def test_getitem_keeps_shards_only_when_still_chunked() -> None:
    x = _randn(8, 6)

    def accepted(*index: IndexEntry) -> set[object]:
        got = run_layouts("getitem", GetItemParam(index), [x], (2,), [x[python_index(index)]])
        return {pl[0] for (pl,) in got}

    assert Shard(0) in accepted(SliceIndex(2, 6))  # 2:4 and 4:6 are the chunks of 4
    assert Shard(0) in accepted(SliceIndex(0, 8, 2))
    assert Shard(0) not in accepted(SliceIndex(0, 5))  # 0:4 and 4:5 are not chunks of 5
    assert Shard(0) not in accepted(1)
    assert {R, Shard(1), P} <= accepted(1)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("stack", [False, True])
def test_concat_all_layouts(stack: bool, mesh_shape: tuple[int, ...]) -> None:
    a, b = _randn(4, 3), _randn(4, 3)
    for dim in (0, 1, -1):
        want = torch.stack([a, b], dim) if stack else torch.cat([a, b], dim)
        param = ConcatParam(dim, stack)
        accepted = run_layouts("cat", param, [a, b], mesh_shape, [want], limit=80)
        if not stack:  # along a sharded dim: the local cat, marked (values checked above)
            assert any(Shard(dim % 2) in pa for pa, _ in accepted)


def test_cat_of_three_with_different_sizes_and_dtypes() -> None:
    a, b = _randn(2, 3), _randn(5, 3).double()
    c = torch.randint(0, 5, (1, 3), generator=_G)
    want = torch.cat([a, b, c], 0)
    accepted = run_layouts("cat", ConcatParam(0), [a, b, c], (2,), [want])
    assert ((Shard(1),), (R,), (Shard(1),)) in accepted  # R turned into the others' shard
    assert ((P,), (P,), (P,)) in accepted


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize(("size", "chunks"), [(7, 3), (6, 3), (5, 4), (2, 4), (0, 3)])
def test_chunk_all_layouts(size: int, chunks: int, mesh_shape: tuple[int, ...]) -> None:
    x = _randn(size, 4)
    for dim in (0, 1):
        want = list(torch.chunk(x, chunks, dim))
        param = ChunkParam(chunks, dim)
        accepted = run_layouts("chunk", param, [x], mesh_shape, want, limit=60)
        assert all(Shard(dim) not in pl for (pl,) in accepted)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("repeats", [0, 1, 2, 3])
def test_repeat_interleave_all_layouts(repeats: int, mesh_shape: tuple[int, ...]) -> None:
    x = _randn(4, 3)
    for dim in (0, 1, None):
        want = torch.repeat_interleave(x, repeats, dim)
        param = RepeatInterleaveParam(repeats, dim)
        assert run_layouts("repeat_interleave", param, [x], mesh_shape, [want], limit=60)
    v = _randn(6)
    want = torch.repeat_interleave(v, repeats)
    param = RepeatInterleaveParam(repeats)
    assert run_layouts("repeat_interleave", param, [v], mesh_shape, [want], limit=60)
