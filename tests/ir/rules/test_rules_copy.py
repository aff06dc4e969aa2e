"""Rules of Clone, Cast and Copy."""

from __future__ import annotations

import pytest
import torch
from helpers_rules import MESH22, op

from dtorch.errors import PlacementError, ShapeError
from dtorch.ir.params import CastParam, CloneParam, CopyParam
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.rules import infer
from dtorch.ir.rules.copy import cast_is_linear

pytestmark = pytest.mark.timeout(60)
R, P = Replicate(), Partial()


def test_clone_keeps_everything() -> None:
    x = op((4, 6), Shard(1), P, mesh=MESH22, dtype=torch.int8)
    out = infer("clone", CloneParam(), (x,)).outputs[0]
    assert (out.shape, out.dtype, out.placements) == ((4, 6), torch.int8, (Shard(1), P))


@pytest.mark.parametrize(
    ("src", "dst", "linear"),
    [
        (torch.float32, torch.float64, True),
        (torch.int64, torch.float16, False),
        (torch.int8, torch.float16, False),  # int8 parts wrap at 8 bits; float parts do not
        (torch.int32, torch.float64, False),
        (torch.int32, torch.float32, False),
        (torch.int64, torch.int8, True),  # narrowing keeps the wrap-around
        (torch.int8, torch.int64, False),  # widening loses it (200 + 100 as uint8 is 44)
        (torch.uint8, torch.int8, True),
        (torch.float32, torch.int64, False),
        (torch.bool, torch.int64, False),
        (torch.int32, torch.bool, False),
        (torch.bool, torch.bool, True),
        (torch.bfloat16, torch.float32, True),
        (torch.float32, torch.bfloat16, False),
        (torch.float64, torch.float32, False),
        (torch.float16, torch.bfloat16, False),
    ],
)
def test_cast_partial(src: torch.dtype, dst: torch.dtype, linear: bool) -> None:
    assert cast_is_linear(src, dst) == linear
    x = op((4,), P, dtype=src)
    if linear:
        assert infer("to", CastParam(dst), (x,)).outputs[0].placements == (P,)
    else:
        with pytest.raises(PlacementError, match=r"to: got \(P,\).*how its parts add up"):
            infer("to", CastParam(dst), (x,))
    assert infer("to", CastParam(dst), (op((4,), Shard(0), dtype=src),)).outputs[0].dtype == dst


def test_copy_rules() -> None:
    dst, src = op((4, 6), Shard(0)), op((6,), dtype=torch.float64, i=2)
    inf = infer("copy_", CopyParam(), (dst, src))
    assert inf.outputs == () and inf.input_placements in ((), (None, None))
    full = infer("copy_", CopyParam(), (dst, op((4, 6), i=2)))
    assert full.input_placements == (None, (Shard(0),))
    with pytest.raises(PlacementError, match=r"copy_: got \(R,\) x \(S\(0\),\)"):
        infer("copy_", CopyParam(), (op((4, 6)), op((4, 6), Shard(0), i=2)))
    with pytest.raises(PlacementError, match="dst x src"):
        infer("copy_", CopyParam(), (op((4, 6), P), op((4, 6), P, dtype=torch.bool, i=2)))
    with pytest.raises(ShapeError, match="does not broadcast"):
        infer("copy_", CopyParam(), (op((6,)), op((4, 6), i=2)))
