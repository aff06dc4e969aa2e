"""Rules of Repeat, Einsum and SetItem: shapes and dtypes against torch, placements, messages."""

from __future__ import annotations

import pytest
import torch
from helpers_rules import MESH22, op

from dtorch.errors import PlacementError, ShapeError
from dtorch.ir.params import EinsumParam, RepeatParam, SetItemParam, SliceIndex
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.rules import DtypeError, infer
from dtorch.ir.scalar import Scalar

pytestmark = pytest.mark.timeout(60)
R, P = Replicate(), Partial()


def test_repeat() -> None:
    out = infer("repeat", RepeatParam((2, 1, 3)), (op((4, 3), Shard(0)),)).outputs[0]
    assert out.shape == tuple(torch.ones(4, 3).repeat(2, 1, 3).shape)
    assert out.placements == (Shard(1),)
    with pytest.raises(PlacementError, match=r"repeat: got \(S\(1\),\).*repeated dims"):
        infer("repeat", RepeatParam((1, 2)), (op((4, 3), Shard(1)),))
    with pytest.raises(ShapeError, match="one non-negative count per dim"):
        infer("repeat", RepeatParam((2,)), (op((4, 3)),))


_EQUATIONS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk", [(5, 2, 3), (5, 3, 4)]),
    ("...i,i", [(2, 3), (3,)]),
    ("ii", [(3, 3)]),
    ("ij,kj->ik", [(2, 1), (4, 3)]),
]


@pytest.mark.parametrize(("equation", "shapes"), _EQUATIONS)
def test_einsum_shapes_match_torch(equation: str, shapes: list[tuple[int, ...]]) -> None:
    want = torch.einsum(equation, *[torch.ones(s) for s in shapes])
    operands = tuple(op(s, i=k) for k, s in enumerate(shapes))
    out = infer("einsum", EinsumParam(equation), operands).outputs[0]
    assert (out.shape, out.dtype) == (tuple(want.shape), want.dtype)


def test_einsum_placements_and_errors() -> None:
    a, b = op((4, 6), Shard(0), Shard(1), mesh=MESH22), op((6, 5), R, Shard(0), mesh=MESH22, i=2)
    out = infer("einsum", EinsumParam("ij,jk->ik"), (a, b)).outputs[0]
    assert out.placements == (Shard(0), P)
    summed = infer("einsum", EinsumParam("ij->i"), (op((4, 6), Shard(1)),)).outputs[0]
    assert summed.placements == (P,)
    with pytest.raises(PlacementError, match="diagonally"):
        infer("einsum", EinsumParam("ii->i"), (op((4, 4), Shard(0)),))
    with pytest.raises(PlacementError, match="broadcasts"):
        infer("einsum", EinsumParam("ij,kj->ik"), (op((2, 1), Shard(1)), op((4, 3), i=2)))
    with pytest.raises(PlacementError, match=r"einsum: got \(S\(0\),\) x \(S\(1\),\)"):
        infer("einsum", EinsumParam("ij,jk->ik"), (op((4, 6), Shard(0)), op((6, 5), Shard(1), i=2)))
    with pytest.raises(ShapeError, match="einsum: torch rejects"):
        infer("einsum", EinsumParam("ij,jk->ik"), (op((4, 6)), op((5, 5), i=2)))
    with pytest.raises(DtypeError, match="einsum"):
        infer("einsum", EinsumParam("i,i"), (op((4,)), op((4,), dtype=torch.float64, i=2)))


def test_setitem_rules() -> None:
    t = op((8, 4), Shard(0), P, mesh=MESH22)
    assert infer("setitem", SetItemParam((3,), Scalar.of(1.0)), (t,)).outputs == ()
    value = op((4,), mesh=MESH22, i=2)
    assert infer("setitem", SetItemParam((3,)), (t, value)).outputs == ()
    slot_like = op((8,), Shard(0), P, mesh=MESH22, i=2)
    index = (SliceIndex(0, 8), 1)
    assert infer("setitem", SetItemParam(index), (t, slot_like)).outputs == ()
    with pytest.raises(PlacementError, match=r"setitem: got .*laid out like tensor\[index\]"):
        infer("setitem", SetItemParam(index), (op((8, 4), mesh=MESH22), slot_like))
    with pytest.raises(ShapeError, match="does not broadcast to the slot"):
        infer("setitem", SetItemParam((3,)), (t, op((5,), mesh=MESH22, i=2)))
    with pytest.raises(DtypeError, match="needs a value"):
        infer("setitem", SetItemParam((3,)), (t,))
    with pytest.raises(ShapeError, match="out of bounds"):
        infer("setitem", SetItemParam((9,), Scalar.of(1)), (t,))
