"""Rules of GetItem, Concat, Chunk, RepeatInterleave, Where, Clamp and Masked: shapes and
dtypes against torch, placements, messages."""

from __future__ import annotations

import pytest
import torch
from helpers_rules import MESH22, op
from hypothesis import given, settings
from hypothesis import strategies as st

from dtorch.errors import PlacementError, ShapeError
from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.opkind import MaskedKind
from dtorch.ir.params import (
    ChunkParam,
    ClampParam,
    ConcatParam,
    GetItemParam,
    MaskedParam,
    RepeatInterleaveParam,
    SliceIndex,
    WhereParam,
)
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.rules import DtypeError, ParamError, infer
from dtorch.ir.scalar import Scalar

pytestmark = pytest.mark.timeout(60)
R, P = Replicate(), Partial()
MESH4 = init_device_mesh("cpu", 4)


def _pieces(values: torch.Tensor, parts: int) -> list[list[int]]:
    """torch.chunk of ``values`` into ``parts`` lists, padded with empty ones."""
    pieces = [c.tolist() for c in values.chunk(parts)] if len(values) else []
    return pieces + [[]] * (parts - len(pieces))


@settings(max_examples=150, deadline=None)
@given(
    size=st.integers(0, 9), start=st.integers(0, 9), stop=st.integers(0, 9), step=st.integers(1, 4)
)
def test_getitem_slice_layouts_match_the_chunking(size, start, stop, step) -> None:
    """A slice of a dim sharded over 4 devices stays sharded iff the output positions each
    device selects are exactly its torch.chunk piece of the result."""
    start, stop = min(start, size), min(stop, size)
    selected = torch.arange(size)[start:stop:step].tolist()
    held = _pieces(torch.arange(size), 4)
    wanted = _pieces(torch.arange(len(selected)), 4)
    lined_up = all(
        [k for k, v in enumerate(selected) if v in held[d]] == wanted[d] for d in range(4)
    )
    param = GetItemParam((SliceIndex(start, stop, step),))
    try:
        out = infer("getitem", param, (op((size,), Shard(0), mesh=MESH4),)).outputs[0]
    except PlacementError:
        assert not lined_up
        return
    assert lined_up
    assert out.shape == (len(selected),) and out.placements == (Shard(0),)


def test_getitem_shapes_and_errors() -> None:
    x = op((8, 6), Shard(1), P, mesh=MESH22)
    out = infer("getitem", GetItemParam((2, None, SliceIndex(0, 6, 2))), (op((8, 6)),)).outputs[0]
    assert out.shape == tuple(torch.ones(8, 6)[2, None, 0:6:2].shape)
    kept = infer("getitem", GetItemParam((1,)), (x,)).outputs[0]
    assert (kept.shape, kept.placements) == ((6,), (Shard(0), P))
    with pytest.raises(PlacementError, match="integer index on a sharded dim"):
        infer("getitem", GetItemParam((SliceIndex(0, 8), 1)), (x,))
    with pytest.raises(ShapeError, match="out of bounds"):
        infer("getitem", GetItemParam((8,)), (op((8, 6)),))
    with pytest.raises(ShapeError, match="too many indices"):
        infer("getitem", GetItemParam((0, 0, 0)), (op((8, 6)),))
    with pytest.raises(ShapeError, match="clipped slice"):
        infer("getitem", GetItemParam((SliceIndex(0, 9),)), (op((8, 6)),))
    with pytest.raises(PlacementError, match="not its chunk"):
        infer("getitem", GetItemParam((SliceIndex(0, 5),)), (op((8, 6), Shard(0)),))


def test_concat_rules() -> None:
    a, b = op((2, 3), Shard(1)), op((4, 3), dtype=torch.float64, i=2)
    inf = infer("cat", ConcatParam(0), (a, b))
    assert inf.outputs[0].shape == (6, 3) and inf.outputs[0].dtype == torch.float64
    assert inf.outputs[0].placements == (Shard(1),)
    assert inf.input_placements == (None, (Shard(1),))
    # along the sharded dim: the Replicate part is chunked, the result marked (rules.marked)
    along = infer("cat", ConcatParam(0), (op((2, 3), Shard(0)), op((4, 3), i=2)))
    assert along.outputs[0].placements == (Shard(0, sub_split_coordinates=(2,)),)
    assert along.input_placements == (None, (Shard(0),))
    with pytest.raises(ShapeError, match="must match except in dim 0"):
        infer("cat", ConcatParam(0), (op((2, 3)), op((4, 2), i=2)))
    with pytest.raises(ShapeError, match="rank"):
        infer("cat", ConcatParam(0), (op((2, 3)), op((3,), i=2)))
    stacked = infer("stack", ConcatParam(1, True), (op((2, 3), Shard(1)), op((2, 3), i=2)))
    assert (stacked.outputs[0].shape, stacked.outputs[0].placements) == ((2, 2, 3), (Shard(2),))
    with pytest.raises(ShapeError, match="equal shapes"):
        infer("stack", ConcatParam(0, True), (op((2, 3)), op((4, 3), i=2)))
    many = tuple(op((1, 3), P, i=k) for k in range(40))
    assert infer("cat", ConcatParam(0), many).outputs[0].placements == (P,)


@settings(max_examples=80, deadline=None)
@given(size=st.integers(0, 12), chunks=st.integers(1, 6))
def test_chunk_counts_match_torch(size: int, chunks: int) -> None:
    want = [tuple(c.shape) for c in torch.ones(3, size).chunk(chunks, 1)]
    outs = infer("chunk", ChunkParam(chunks, -1), (op((3, size), Shard(0)),)).outputs
    assert [o.shape for o in outs] == want
    assert all(o.placements == (Shard(0),) for o in outs)


def test_chunk_and_repeat_errors() -> None:
    with pytest.raises(PlacementError, match="chunked dim"):
        infer("chunk", ChunkParam(2, 0), (op((4, 3), Shard(0)),))
    with pytest.raises(ParamError):
        infer("chunk", ChunkParam(0, 0), (op((4, 3)),))
    with pytest.raises(PlacementError, match="flattened"):
        infer("repeat_interleave", RepeatInterleaveParam(2), (op((4, 3), Shard(0)),))
    with pytest.raises(PlacementError, match="repeating the chunks"):
        infer("repeat_interleave", RepeatInterleaveParam(2, 0), (op((5, 3), Shard(0), mesh=MESH4),))
    ok = infer(
        "repeat_interleave", RepeatInterleaveParam(3, 0), (op((8, 3), Shard(0), mesh=MESH4),)
    )
    assert ok.outputs[0].shape == (24, 3) and ok.outputs[0].placements == (Shard(0),)


def test_where_clamp_masked_rules() -> None:
    cond = op((4, 3), dtype=torch.bool)
    inf = infer("where", WhereParam(y=Scalar.of(2.5)), (cond, op((3,), dtype=torch.int32, i=2)))
    want = torch.where(torch.ones(4, 3, dtype=torch.bool), torch.ones(3, dtype=torch.int32), 2.5)
    assert (inf.outputs[0].shape, inf.outputs[0].dtype) == ((4, 3), want.dtype)
    with pytest.raises(DtypeError):
        infer("where", WhereParam(), (op((3,)), op((3,), i=2), op((3,), i=3)))
    with pytest.raises(PlacementError, match=r"where: got \(R,\) x \(P,\) x \(R,\)"):
        infer("where", WhereParam(), (cond, op((4, 3), P, i=2), op((4, 3), i=3)))
    clamped = infer("clamp", ClampParam(Scalar.of(0.5)), (op((3,), dtype=torch.int64),))
    assert clamped.outputs[0].dtype == torch.clamp(torch.ones(3, dtype=torch.int64), 0.5).dtype
    with pytest.raises(ParamError, match="min or max"):
        infer("clamp", ClampParam(), (op((3,)),))
    fill = MaskedParam(MaskedKind.FILL, Scalar.of(1.0), in_place=True)
    with pytest.raises(ShapeError, match="does not broadcast"):
        infer("masked_fill_", fill, (op((3,)), op((4, 3), dtype=torch.bool, i=2)))
    with pytest.raises(DtypeError):
        infer("masked_fill", MaskedParam(MaskedKind.FILL, Scalar.of(1)), (op((3,)), op((3,), i=2)))
    with pytest.raises(PlacementError, match="mask order"):
        infer(
            "masked_scatter", MaskedParam(MaskedKind.SCATTER),
            (op((4,), Shard(0)), op((4,), dtype=torch.bool, i=2), op((4,), i=3)),
        )  # fmt: skip
