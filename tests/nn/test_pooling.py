"""MaxPool2d, AvgPool2d, AdaptiveAvgPool2d and GlobalAvgPool2d against torch.nn's layers (and
``AdaptiveAvgPool2d(1)`` for the global pool): outputs, attributes and repr; batch and channel
shards kept on 1-D, 2-D and 3-D meshes (even and uneven), thread and process mode; a Partial
input kept by the average pools and refused by max pooling."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard, nn
from dtorch.errors import PlacementError

pytestmark = pytest.mark.timeout(120)

R, P = Replicate(), Partial()

#: (dtorch layer, torch layer, constructor arguments).
_LAYERS: list[tuple[type, type, tuple[Any, ...], dict[str, Any]]] = [
    (nn.MaxPool2d, torch.nn.MaxPool2d, (3,), {"stride": 2, "padding": 1, "ceil_mode": True}),
    (nn.MaxPool2d, torch.nn.MaxPool2d, ((2, 3),), {"dilation": (2, 1), "return_indices": True}),
    (nn.AvgPool2d, torch.nn.AvgPool2d, (3, 2, 1), {"count_include_pad": False}),
    (nn.AvgPool2d, torch.nn.AvgPool2d, (2,), {"ceil_mode": True, "divisor_override": 3}),
    (nn.AdaptiveAvgPool2d, torch.nn.AdaptiveAvgPool2d, ((None, 3),), {}),
    (nn.AdaptiveAvgPool2d, torch.nn.AdaptiveAvgPool2d, (2,), {}),
]
_MESHES = [(2,), (3,), (2, 3), (2, 1, 2)]


@pytest.mark.parametrize("shape", _MESHES)
def test_pooling_layers_match_torch(shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", shape)
    placements = [Shard(0), Shard(1), R][: mesh.ndim]
    x = torch.randn(5, 3, 7, 8)
    xd = dtorch.from_torch(x, device_mesh=mesh, placements=placements)
    want = [p if n > 1 else R for p, n in zip(placements, shape, strict=True)]
    for ours, theirs, args, kwargs in _LAYERS:
        layer, ref = (
            ours(*args, **kwargs, device_mesh=mesh, dtype=torch.float32),
            theirs(*args, **kwargs),
        )
        assert repr(layer) == repr(ref)
        got, expected = layer(xd), ref(x)
        got = list(got) if isinstance(got, tuple) else [got]
        expected = list(expected) if isinstance(expected, tuple) else [expected]
        for g, e in zip(got, expected, strict=True):
            assert g.placements == want, repr(layer)
            torch.testing.assert_close(g.to_torch(), e)


def test_global_avg_pool(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.randn(3, 4, 5, 6)
    xd = dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(1), Shard(0)])
    layer = nn.GlobalAvgPool2d(device_mesh=mesh)
    out = layer(xd)
    assert out.shape == (3, 4, 1, 1) and out.placements == [Shard(1), Shard(0)]
    torch.testing.assert_close(out.to_torch(), torch.nn.AdaptiveAvgPool2d(1)(x))
    assert repr(layer) == "GlobalAvgPool2d()"
    unbatched = layer(dtorch.from_torch(x[0]))
    torch.testing.assert_close(unbatched.to_torch(), x[0].mean((1, 2), keepdim=True))


def test_partial_inputs(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn(2, 3, 6, 6)
    xd = dtorch.from_torch(x, device_mesh=mesh, placements=[P])
    for layer, ref in ((nn.AvgPool2d(2), torch.nn.AvgPool2d(2)),
                       (nn.AdaptiveAvgPool2d(3), torch.nn.AdaptiveAvgPool2d(3)),
                       (nn.GlobalAvgPool2d(), torch.nn.AdaptiveAvgPool2d(1))):  # fmt: skip
        out = layer(xd)
        assert out.placements == [P]
        torch.testing.assert_close(out.to_torch(), ref(x))
    with pytest.raises(PlacementError, match="max_pool2d: got \\(P,\\)"):
        nn.MaxPool2d(2)(xd)
