"""The IndexSelect and IndexPut rules: output shapes and placements, and their refusals."""

from __future__ import annotations

import pytest
import torch

from dtorch.errors import DtypeError, PlacementError, ShapeError
from dtorch.ir.params import IndexPutParam, IndexSelectParam
from dtorch.ir.placement import Partial, Placement, Replicate, Shard
from dtorch.ir.rules.registry import infer
from dtorch.ir.scalar import Scalar
from tests.ir.rules.helpers_rules import MESH22, op

R, P = Replicate(), Partial()

#: (x placements, index placements, output placements) of x (6, 5, 4) indexed along dim 1
#: by an index (3, 2): the output is (6, 3, 2, 4).
_OK: list[tuple[tuple[Placement, ...], tuple[Placement, ...], tuple[Placement, ...]]] = [
    ((R, R), (R, R), (R, R)),
    ((Shard(0), Shard(2)), (R, R), (Shard(0), Shard(3))),
    ((P, Shard(2)), (R, R), (P, Shard(3))),
    ((R, Shard(0)), (Shard(1), R), (Shard(2), Shard(0))),
    ((R, R), (Shard(0), Shard(0)), (Shard(1), Shard(1))),
]


@pytest.mark.parametrize(("xp", "ip", "want"), _OK)
def test_index_select_placements(
    xp: tuple[Placement, ...], ip: tuple[Placement, ...], want: tuple[Placement, ...]
) -> None:
    x = op((6, 5, 4), *xp, mesh=MESH22)
    index = op((3, 2), *ip, dtype=torch.int64, mesh=MESH22, i=2)
    out = infer("getitem", IndexSelectParam(1), (x, index)).outputs[0]
    assert out.shape == (6, 3, 2, 4) and out.dtype == torch.float32 and out.placements == want


_REFUSED: list[tuple[tuple[Placement, ...], tuple[Placement, ...], str]] = [
    ((Shard(1), R), (R, R), "the indexed dim 1 is sharded"),
    ((Shard(0), R), (Shard(0), R), "accepted: index Replicate"),
    ((P, R), (Shard(0), R), "accepted: index Replicate"),
    ((R, R), (P, R), "accepted: index Replicate"),
]


@pytest.mark.parametrize(("xp", "ip", "message"), _REFUSED)
def test_index_select_refusals(
    xp: tuple[Placement, ...], ip: tuple[Placement, ...], message: str
) -> None:
    x = op((6, 5, 4), *xp, mesh=MESH22)
    index = op((3,), *ip, dtype=torch.int64, mesh=MESH22, i=2)
    with pytest.raises(PlacementError, match=f"getitem: .*{message}"):
        infer("getitem", IndexSelectParam(1), (x, index))


def test_index_select_bad_operands() -> None:
    with pytest.raises(DtypeError, match="getitem: the index must be int64 or int32; got"):
        infer("getitem", IndexSelectParam(0), (op((3,)), op((2,), dtype=torch.bool, i=2)))
    with pytest.raises(ShapeError, match="getitem: cannot index a 0-d tensor"):
        infer("getitem", IndexSelectParam(0), (op(()), op((2,), dtype=torch.int64, i=2)))
    with pytest.raises(ShapeError, match="getitem: dimension 2 is out of range"):
        infer("getitem", IndexSelectParam(2), (op((3, 2)), op((2,), dtype=torch.int32, i=2)))


def test_index_put_accepts_the_slot_layout_only() -> None:
    x = op((6, 5, 4), Shard(0), Shard(2), mesh=MESH22)
    index = op((3,), dtype=torch.int64, mesh=MESH22, i=2)
    value = op((6, 3, 4), Shard(0), Shard(2), mesh=MESH22, i=3)
    assert infer("setitem", IndexPutParam(1), (x, index, value)).outputs == ()
    assert infer("setitem", IndexPutParam(1, Scalar.of(1.0)), (x, index)).outputs == ()
    with pytest.raises(PlacementError, match="setitem: the value must have the slot's shape"):
        infer("setitem", IndexPutParam(1), (x, index, op((6, 3, 4), mesh=MESH22, i=3)))
    with pytest.raises(PlacementError, match="setitem: the index must be Replicate"):
        sharded = op((3,), Shard(0), R, dtype=torch.int64, mesh=MESH22, i=2)
        infer("setitem", IndexPutParam(1), (x, sharded, value))
    with pytest.raises(DtypeError, match="setitem: needs a value"):
        infer("setitem", IndexPutParam(1), (x, index))
