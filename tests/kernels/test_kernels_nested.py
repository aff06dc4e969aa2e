"""Two mesh dims sharding one tensor dim, in mesh order and in the reverse (split_order) order:
operators keep the nesting, and the kernels still compute each device's chunk."""

from __future__ import annotations

import pytest
import torch

from dtorch.errors import PlacementError
from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.opkind import BinaryKind, ReduceKind
from dtorch.ir.params import (
    BroadcastBinaryParam,
    FlattenParam,
    GetItemParam,
    MatmulParam,
    OpParam,
    ReduceParam,
    SliceIndex,
    TransposeParam,
)
from dtorch.ir.placement import Placement, Replicate, Shard
from tests.simulate import Simulation, assert_same, simulate

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(23)
MESH = init_device_mesh("cpu", (2, 3))
IN_ORDER = (Shard(0), Shard(0))
REVERSED = (Shard(0, 1), Shard(0, 0))
R = Replicate()


def _run(
    param: OpParam, tensors: list[torch.Tensor], layouts: list[tuple[Placement, ...]]
) -> Simulation:
    return simulate("op", param, tensors, MESH, layouts)


@pytest.mark.parametrize("nesting", [IN_ORDER, REVERSED])
def test_nested_elementwise_and_implicit_redistribution(nesting: tuple[Shard, Shard]) -> None:
    a, b = torch.randn((13, 4), generator=_G), torch.randn((13, 4), generator=_G)
    add = BroadcastBinaryParam(BinaryKind.ADD)
    sim = _run(add, [a, b], [nesting, nesting])
    assert_same(sim.outputs[0], a + b)
    assert sim.results[0].placements == nesting
    mixed = _run(add, [a, b], [nesting, (R, R)])
    assert_same(mixed.outputs[0], a + b)
    assert mixed.operands[1].placements == nesting  # R chunked with the same nesting


def test_different_nestings_do_not_mix() -> None:
    a = torch.randn((13, 4), generator=_G)
    with pytest.raises(PlacementError, match="nest"):
        _run(BroadcastBinaryParam(BinaryKind.ADD), [a, a], [IN_ORDER, REVERSED])


@pytest.mark.parametrize("nesting", [IN_ORDER, REVERSED])
def test_nested_shape_ops_and_reductions(nesting: tuple[Shard, Shard]) -> None:
    x = torch.randn((12, 5), generator=_G)
    cases: list[tuple[OpParam, torch.Tensor]] = [
        (TransposeParam(0, 1), x.t()),
        (FlattenParam(), x.flatten()),
        (ReduceParam(ReduceKind.SUM, (0,)), x.sum(0)),
        (ReduceParam(ReduceKind.MAX, (1,)), x.amax(1)),
        (GetItemParam((SliceIndex(0, 12, 2),)), x[0:12:2]),
    ]
    for param, want in cases:
        assert_same(_run(param, [x], [nesting]).outputs[0], want)
    w = torch.randn((5, 3), generator=_G)
    assert_same(_run(MatmulParam(), [x, w], [nesting, (R, R)]).outputs[0], x @ w)
