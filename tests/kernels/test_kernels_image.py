"""Conv, Pooling, Interpolate and Pad simulated on 1-D, 2-D and 3-D meshes against torch.

The simulator splits a Partial input into random summands, one per device, so every accepted
Partial layout here is a numerical check that the operator is linear in that input; the
accepted sets on one mesh dim are the tables of ``dtorch.ir.rules.conv`` and ``spatial``.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dtorch.ir.opkind import OperatorFormat, PaddingType, PoolKind
from dtorch.ir.params import ConvParam, InterpolateParam, OpParam, PadParam, PoolingParam
from dtorch.ir.placement import Partial, Replicate, Shard
from tests.simulate import MESHES, run_layouts

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(17)
R, P = Replicate(), Partial()
S0, S1, S2, S3 = Shard(0), Shard(1), Shard(2), Shard(3)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


def _one_dim(
    name: str, param: OpParam, tensors: list[torch.Tensor], want: list[torch.Tensor], parts: int
) -> set[tuple[object, ...]]:
    accepted = run_layouts(name, param, tensors, (parts,), want)
    return {tuple(p[0] for p in combo) for combo in accepted}


@pytest.mark.parametrize("parts", [2, 3])
def test_conv_accepted_sets(parts: int) -> None:
    x, w, b = _randn(3, 5, 6, 6), _randn(4, 5, 3, 3), _randn(4)
    param = ConvParam(pads=(1, 1), strides=(2, 1))
    want = [F.conv2d(x, w, b, stride=(2, 1), padding=1)]
    got = _one_dim("conv2d", param, [x, w, b], want, parts)
    assert got == {
        (R, R, R), (S0, R, R), (R, S0, R), (R, S0, S0), (R, R, S0), (S1, S1, R), (P, R, R),
        (R, P, R), (S1, S1, P), (P, R, P), (R, P, P),
    }  # fmt: skip


def test_depthwise_conv_accepted_set() -> None:
    x, w = _randn(2, 5, 5, 5), _randn(5, 1, 3, 3)
    param = ConvParam(group=5, padding_type=PaddingType.SAME)
    got = _one_dim("conv2d", param, [x, w], [F.conv2d(x, w, padding="same", groups=5)], 3)
    assert got == {(R, R), (S0, R), (S1, R), (R, S0), (S1, S0), (P, R), (R, P)}


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("fmt", list(OperatorFormat), ids=lambda f: f.name)
def test_conv_all_layouts(mesh_shape: tuple[int, ...], fmt: OperatorFormat) -> None:
    x, w, b = _randn(3, 4, 5, 5), _randn(6, 2, 2, 3), _randn(6)
    want = F.conv2d(x, w, b, dilation=(1, 2), groups=2)
    nhwc = fmt is OperatorFormat.NHWC
    if nhwc:
        x, want = x.movedim(1, -1).contiguous(), want.movedim(1, -1)
    param = ConvParam(dilations=(1, 2), group=2, format=fmt)
    assert run_layouts("conv2d", param, [x, w, b], mesh_shape, [want], limit=120)


_POOLS = [
    (PoolingParam(PoolKind.MAX, (3, 2), (2, 2), (1, 1), ceil_mode=True),
     lambda t: F.max_pool2d(t, (3, 2), 2, 1, ceil_mode=True), False),
    (PoolingParam(PoolKind.AVG, (2, 2), (1, 2), (1, 0), count_include_pad=False),
     lambda t: F.avg_pool2d(t, 2, (1, 2), (1, 0), count_include_pad=False), True),
    (PoolingParam(PoolKind.ADAPTIVE_AVG, output_size=(2, 3)),
     lambda t: F.adaptive_avg_pool2d(t, (2, 3)), True),
]  # fmt: skip


@pytest.mark.parametrize(("param", "fn", "linear"), _POOLS)
def test_pooling_accepted_sets(param: PoolingParam, fn: object, linear: bool) -> None:
    x = _randn(3, 5, 6, 5)  # W 3 + 2 over two: no whole windows of the stride-2 dims
    got = _one_dim("pooling", param, [x], [fn(x)], 2)  # type: ignore[operator]
    assert got == {(R,), (S0,), (S1,)} | ({(P,)} if linear else set())


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_spatial_all_layouts(mesh_shape: tuple[int, ...]) -> None:
    x = _randn(3, 5, 6, 5)
    cases: list[tuple[OpParam, torch.Tensor]] = [
        (InterpolateParam((4, 7), mode="bilinear", align_corners=True),
         F.interpolate(x, (4, 7), mode="bilinear", align_corners=True)),
        (InterpolateParam(scale_factor=(1.5, 2.0)), F.interpolate(x, scale_factor=(1.5, 2.0))),
        (PadParam((1, 2, 0, 0), "reflect"), F.pad(x, (1, 2, 0, 0), "reflect")),
        (PadParam((1, 0, 2, 1), "constant", 0.0), F.pad(x, (1, 0, 2, 1))),
        (PoolingParam(PoolKind.AVG, (2, 2), (2, 2)), F.avg_pool2d(x, 2)),
    ]  # fmt: skip
    for param, want in cases:
        assert run_layouts("op", param, [x], mesh_shape, [want], limit=40)


def test_pad_accepted_sets() -> None:
    x = _randn(3, 4, 5)
    got = _one_dim(
        "pad", PadParam((0, 0, 1, 1), "circular"), [x], [F.pad(x, (0, 0, 1, 1), "circular")], 2
    )
    assert got == {(R,), (S0,), (S2,), (P,)}
    filled = _one_dim("pad", PadParam((2, 1), value=1.5), [x], [F.pad(x, (2, 1), value=1.5)], 2)
    assert filled == {(R,), (S0,), (S1,)}
