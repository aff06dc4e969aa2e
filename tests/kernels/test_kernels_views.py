"""Shape operators simulated on 1-D, 2-D and 3-D meshes against torch, incl. views that merge
and split sharded dims (accepted only where every local view is its chunk)."""

from __future__ import annotations

import pytest
import torch

from dtorch.ir.params import (
    ContiguousParam,
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
from tests.simulate import MESHES, run_layouts

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(3)
R, P = Replicate(), Partial()


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


_VIEWS = [
    ((8, 3), (24,)),
    ((8, 3), (2, 4, 3)),
    ((8, 3), (4, 2, 3)),
    ((6, 4), (24,)),
    ((6, 4), (3, 8)),
    ((2, 3, 4), (6, 4)),
    ((2, 3, 4), (2, 12)),
    ((2, 3, 4), (-1, 2)),
    ((1, 6), (6, 1)),
    ((4, 1, 3), (12,)),
    ((0, 3), (3, 0)),
    ((5, 2), (5, 2)),
]


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize(("src", "dst"), _VIEWS)
def test_view_and_reshape_all_layouts(
    src: tuple[int, ...], dst: tuple[int, ...], mesh_shape: tuple[int, ...]
) -> None:
    x = _randn(*src)
    for param in (ViewParam(dst), ReshapeParam(dst)):
        accepted = run_layouts("view", param, [x], mesh_shape, [x.view(dst)], limit=60)
        assert accepted


def test_flatten_keeps_a_shard_only_when_it_divides() -> None:
    x = _randn(8, 3)
    accepted = run_layouts("flatten", FlattenParam(), [x], (4,), [x.flatten()])
    assert ((Shard(0),),) in accepted and ((Shard(1),),) not in accepted
    y = _randn(6, 3)
    accepted = run_layouts("flatten", FlattenParam(), [y], (4,), [y.flatten()])
    assert ((Shard(0),),) not in accepted and ((P,),) in accepted
    z = _randn(4, 3)
    split = run_layouts("view", ViewParam((2, 2, 3)), [z], (2,), [z.view(2, 2, 3)])
    assert ((Shard(0),),) in split


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize(("start", "end"), [(0, -1), (1, 2), (0, 1), (2, 2)])
def test_flatten_all_layouts(start: int, end: int, mesh_shape: tuple[int, ...]) -> None:
    x = _randn(4, 3, 2)
    want = x.flatten(start, end)
    assert run_layouts("flatten", FlattenParam(start, end), [x], mesh_shape, [want], limit=60)


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_dim_moves_all_layouts(mesh_shape: tuple[int, ...]) -> None:
    x = _randn(5, 1, 3)
    cases = [
        (SqueezeParam((1,)), x.squeeze(1)),
        (SqueezeParam((0, 1, -1)), torch.squeeze(x, (0, 1, -1))),
        (UnsqueezeParam(0), x.unsqueeze(0)),
        (UnsqueezeParam(-1), x.unsqueeze(-1)),
        (TransposeParam(0, 2), x.transpose(0, 2)),
        (PermuteParam((2, 0, 1)), x.permute(2, 0, 1)),
        (ExpandParam((2, 5, 4, 3)), x.expand(2, 5, 4, 3)),
        (ExpandParam((-1, 2, -1)), x.expand(-1, 2, -1)),
        (ContiguousParam(), x.transpose(0, 2).contiguous()),
    ]
    for param, want in cases:
        source = x.transpose(0, 2) if isinstance(param, ContiguousParam) else x
        accepted = run_layouts("shape", param, [source], mesh_shape, [want], limit=60)
        assert ((P,) * len(mesh_shape),) in accepted or len(mesh_shape) > 1


def test_sharded_size_one_dims_are_rejected() -> None:
    x = _randn(5, 1, 3)
    squeezed = run_layouts("squeeze", SqueezeParam((1,)), [x], (2,), [x.squeeze(1)])
    assert ((Shard(1),),) not in squeezed and ((Shard(2),),) in squeezed
    expanded = run_layouts("expand", ExpandParam((5, 4, 3)), [x], (2,), [x.expand(5, 4, 3)])
    assert ((Shard(1),),) not in expanded and ((Shard(0),),) in expanded
