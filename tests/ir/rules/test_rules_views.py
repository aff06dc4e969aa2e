"""Rules of the shape operators: shapes against torch, shard movement, layout checks."""

from __future__ import annotations

import pytest
import torch
from helpers_rules import MESH22, op
from hypothesis import given, settings
from hypothesis import strategies as st

from dtorch.errors import PlacementError, ShapeError
from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.params import (
    ExpandParam,
    FlattenParam,
    PermuteParam,
    ReshapeParam,
    SqueezeParam,
    TransposeParam,
    UnsqueezeParam,
    ViewParam,
)
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.rules import infer

pytestmark = pytest.mark.timeout(60)
R, P = Replicate(), Partial()
sizes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@settings(max_examples=200, deadline=None)
@given(shape=sizes, target=sizes, hole=st.booleans())
def test_view_shapes_match_torch(shape, target, hole) -> None:
    wanted = (-1, *target[1:]) if hole and target else target
    x = torch.ones(shape)
    try:
        want = x.view(wanted)
    except RuntimeError:
        with pytest.raises(ShapeError):
            infer("view", ViewParam(wanted), (op(shape),))
        return
    assert infer("view", ViewParam(wanted), (op(shape),)).outputs[0].shape == tuple(want.shape)


def test_view_layouts() -> None:
    mesh4 = init_device_mesh("cpu", 4)
    x = op((8, 3), Shard(0), mesh=mesh4)
    assert infer("flatten", FlattenParam(), (x,)).outputs[0].placements == (Shard(0),)
    with pytest.raises(PlacementError, match="would give device"):
        infer("flatten", FlattenParam(), (op((6, 3), Shard(0), mesh=mesh4),))
    with pytest.raises(PlacementError, match=r"reshape: got \(S\(1\),\)"):
        infer("reshape", ReshapeParam((24,)), (op((8, 3), Shard(1), mesh=mesh4),))
    with pytest.raises(PlacementError, match="device"):  # 2 outer rows cannot cover 4 devices
        infer("view", ViewParam((2, 4, 3)), (x,))
    split = infer("view", ViewParam((4, 2, 3)), (x,)).outputs[0]
    assert split.placements == (Shard(0),)
    # a size-1 dim in front of the sharded one does not matter
    lead = infer("view", ViewParam((1, 8, 3)), (x,)).outputs[0]
    assert lead.placements == (Shard(1),)
    nested = op((8, 3), Shard(0), Shard(0), mesh=MESH22)
    assert infer("flatten", FlattenParam(), (nested,)).outputs[0].placements == (Shard(0), Shard(0))
    assert infer("view", ViewParam((24,)), (op((8, 3), P),)).outputs[0].placements == (P,)


def test_dim_moves() -> None:
    x = op((4, 1, 6), Shard(2), P, mesh=MESH22)
    cases = [
        (SqueezeParam((1,)), (4, 6), (Shard(1), P)),
        (SqueezeParam((0,)), (4, 1, 6), (Shard(2), P)),
        (UnsqueezeParam(0), (1, 4, 1, 6), (Shard(3), P)),
        (TransposeParam(0, -1), (6, 1, 4), (Shard(0), P)),
        (PermuteParam((1, 2, 0)), (1, 6, 4), (Shard(1), P)),
        (ExpandParam((3, 4, 5, 6)), (3, 4, 5, 6), (Shard(3), P)),
        (ExpandParam((-1, -1, -1)), (4, 1, 6), (Shard(2), P)),
    ]
    for param, shape, placements in cases:
        out = infer("shape", param, (x,)).outputs[0]
        assert (out.shape, out.placements) == (shape, placements), param


def test_shape_errors() -> None:
    with pytest.raises(ShapeError, match="only size-1 dims expand"):
        infer("expand", ExpandParam((4, 2, 5)), (op((4, 1, 6)),))
    with pytest.raises(ShapeError, match="sizes for a 3-D"):
        infer("expand", ExpandParam((4, 6)), (op((4, 1, 6)),))
    with pytest.raises(ShapeError, match="twice"):
        infer("permute", PermuteParam((0, 0, 1)), (op((4, 1, 6)),))
    with pytest.raises(ShapeError, match="out of range"):
        infer("transpose", TransposeParam(0, 3), (op((4, 1, 6)),))
    with pytest.raises(ShapeError, match="start_dim"):
        infer("flatten", FlattenParam(2, 1), (op((4, 1, 6)),))
    with pytest.raises(ShapeError, match="invalid for input of size 24"):
        infer("view", ViewParam((5, -1)), (op((4, 1, 6)),))
    with pytest.raises(PlacementError, match="squeeze: got"):
        infer("squeeze", SqueezeParam((1,)), (op((4, 1, 6), Shard(1)),))


@pytest.mark.parametrize(("start", "end"), [(0, -1), (1, 2), (0, 0), (-2, -1)])
def test_flatten_shapes_match_torch(start: int, end: int) -> None:
    x = torch.ones(2, 3, 4)
    out = infer("flatten", FlattenParam(start, end), (op((2, 3, 4)),)).outputs[0]
    assert out.shape == tuple(x.flatten(start, end).shape)
    scalar = infer("flatten", FlattenParam(), (op(()),)).outputs[0]
    assert scalar.shape == tuple(torch.ones(()).flatten().shape)
