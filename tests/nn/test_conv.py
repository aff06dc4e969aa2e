"""Conv2d against torch.nn.Conv2d: the same weights (loaded from a torch module), outputs equal
within float32 tolerance for strides, padding (numbers, same, valid), every padding_mode,
dilation, groups and no bias; a batch sharded on dp (even and uneven) on 1-D, 2-D and 3-D
meshes, thread and process mode; torch's initialisation, repr and argument checks; a small
CNN (Conv2d, ReLU, pools, Flatten, Linear) against the same network in torch.nn."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dtorch
from dtorch import Replicate, Shard, nn
from tests.nn.layer_harness import DP_MESHES, batch_on_dp

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths"),
]

R = Replicate()
_CONFIGS: list[dict[str, Any]] = [
    {"in_channels": 3, "out_channels": 4, "kernel_size": 3},
    {"in_channels": 4, "out_channels": 6, "kernel_size": (3, 2), "stride": 2, "padding": (1, 0),
     "dilation": (1, 2), "groups": 2},
    {"in_channels": 3, "out_channels": 5, "kernel_size": 2, "padding": "same", "bias": False,
     "padding_mode": "reflect"},
    {"in_channels": 4, "out_channels": 4, "kernel_size": 3, "padding": 1, "groups": 4,
     "padding_mode": "circular"},
    {"in_channels": 2, "out_channels": 3, "kernel_size": (1, 3), "padding": "valid",
     "padding_mode": "replicate"},
    {"in_channels": 2, "out_channels": 3, "kernel_size": 3, "padding": (2, 1),
     "padding_mode": "replicate"},
]  # fmt: skip


#: (mesh shape, dim names): dp alone (even and uneven batches), with tp, on a 3-D mesh.
@pytest.mark.parametrize(("shape", "names"), DP_MESHES)
def test_conv2d_matches_torch(shape: tuple, names: tuple, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)
    for config in _CONFIGS:
        ref = torch.nn.Conv2d(**config)
        layer = nn.Conv2d(**config, device_mesh=mesh)
        assert layer.load_state_dict(ref.state_dict()) == ([], [])
        x = torch.randn(5, config["in_channels"], 7, 6)
        y = layer(dtorch.from_torch(x, device_mesh=mesh, placements=batch_on_dp(mesh)))
        torch.testing.assert_close(
            y.to_torch(), ref(x).detach(), msg=lambda m, c=config: f"{c}: {m}"
        )
        assert y.placements == batch_on_dp(mesh)
        assert layer.weight.placements == [R] * mesh.ndim
        assert repr(layer) == repr(ref)


def test_unbatched_input_and_dtype(graph: dtorch.Graph) -> None:
    ref = torch.nn.Conv2d(2, 3, 3, padding=1, dtype=torch.float64)
    layer = nn.Conv2d(2, 3, 3, padding=1, dtype=torch.float64)
    assert layer.weight.dtype == torch.float64 == layer.bias.dtype
    assert layer.weight.device_mesh == graph.default_device_mesh
    layer.load_state_dict(ref.state_dict())
    x = torch.randn(2, 5, 5, dtype=torch.float64)
    torch.testing.assert_close(layer(dtorch.from_torch(x)).to_torch(), ref(x).detach())


def test_torch_attributes(graph: dtorch.Graph) -> None:
    """The attributes of torch's convolution that code reads (``transposed``,
    ``output_padding``, the geometry), with torch's values and types."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    for config in _CONFIGS:
        ref, layer = torch.nn.Conv2d(**config), nn.Conv2d(**config, device_mesh=mesh)
        for name in ("transposed", "output_padding", "kernel_size", "stride", "padding",
                     "dilation", "groups", "padding_mode"):  # fmt: skip
            ours, theirs = getattr(layer, name), getattr(ref, name)
            assert (type(ours), ours) == (type(theirs), theirs), (config, name)


def test_initialisation_is_torchs(graph: dtorch.Graph) -> None:
    """Same default generator state: the values torch.nn.Conv2d draws (to float rounding)."""
    for args in ((3, 8, 3), (4, 8, (2, 5), 1, 0, 1, 2)):
        torch.manual_seed(5)
        ref = torch.nn.Conv2d(*args)
        torch.manual_seed(5)
        layer = nn.Conv2d(*args, device_mesh=dtorch.init_device_mesh("cpu", 2))
        assert torch.allclose(layer.weight.to_torch(), ref.weight.detach(), atol=1e-7)
        assert torch.allclose(layer.bias.to_torch(), ref.bias.detach(), atol=1e-7)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="Conv2d: in_channels must be a non-negative int"):
        nn.Conv2d(-1, 2, 3)
    with pytest.raises(ValueError, match="Conv2d: groups must be a positive integer"):
        nn.Conv2d(2, 2, 3, groups=0)
    with pytest.raises(ValueError, match=r"Conv2d: in_channels \(3\) and out_channels \(4\)"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="Conv2d: padding='same' is not supported for strided"):
        nn.Conv2d(2, 2, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="Conv2d: padding must be 'same', 'valid' or numbers"):
        nn.Conv2d(2, 2, 3, padding="full")
    with pytest.raises(ValueError, match="Conv2d: padding_mode must be one of"):
        nn.Conv2d(2, 2, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="Conv2d: kernel_size must be an int or a pair"):
        nn.Conv2d(2, 2, (3, 3, 3))
    with pytest.raises(TypeError, match="Conv2d: dtype must be a floating-point"):
        nn.Conv2d(2, 2, 3, dtype=torch.int64)


class _TorchNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.ReLU(),
            torch.nn.AvgPool2d(2, ceil_mode=True), torch.nn.AdaptiveAvgPool2d(1),
        )  # fmt: skip
        self.head = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class _Net(nn.Module):
    def __init__(self, mesh: dtorch.DeviceMesh) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, device_mesh=mesh), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, padding=1, groups=8, device_mesh=mesh), nn.ReLU(),
            nn.AvgPool2d(2, ceil_mode=True), nn.GlobalAvgPool2d(),
        )  # fmt: skip
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8, 4, device_mesh=mesh))

    def forward(self, x: dtorch.Tensor) -> dtorch.Tensor:
        return self.head(self.features(x))


@pytest.mark.parametrize("shape", [(2,), (3,)])
def test_small_cnn_matches_torch(shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=("dp",))
    ref, net = _TorchNet(), _Net(mesh)
    assert net.load_state_dict(ref.state_dict()) == ([], [])
    x = torch.randn(5, 3, 9, 9)
    y = net(dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(0)]))
    assert y.placements == [Shard(0)]
    torch.testing.assert_close(y.to_torch(), ref(x).detach())
