"""The layers of ``dtorch.nn.modules.nn_more`` and ``nn_more_loss`` against torch.nn's:
construction (parameters drawn as torch draws them, torch's names and buffers, so a torch
layer's ``state_dict`` loads both ways), forward on a batch sharded on "dp" (even, uneven,
2-D and 3-D meshes), training and eval modes (InstanceNorm's running statistics, the
channel dropouts bit for bit), reprs, and torch's refusals at construction and call; thread
and process mode."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn as tnn

import dtorch
from dtorch import nn
from tests.nn.layer_harness import DP_MESHES, batch_on_dp

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(3)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(3)


def _on(x: torch.Tensor, mesh: dtorch.DeviceMesh, graph: Any) -> dtorch.Tensor:
    return dtorch.from_torch(x, device_mesh=mesh, placements=batch_on_dp(mesh), graph=graph)


def _pair(make: Callable[[Any], Any], mesh: dtorch.DeviceMesh) -> tuple[Any, Any]:
    """The torch layer and dtorch's, made after the same seed (the same draws), and the
    torch one's state loaded into dtorch's (a check of the names and shapes)."""
    torch.manual_seed(0)
    ref = make(tnn)
    torch.manual_seed(0)
    ours = make(nn) if mesh is None else _with_mesh(make, mesh)
    for key, value in ref.state_dict().items():  # drawn alike before any loading
        assert torch.equal(ours.state_dict()[key].to_torch(), value), key
    ours.load_state_dict(ref.state_dict())
    return ref, ours


def _with_mesh(make: Callable[[Any], Any], mesh: dtorch.DeviceMesh) -> Any:
    # the layers with parameters take device_mesh=; the others (no such keyword: refused
    # before anything is drawn) are made as torch's
    try:
        return make(_MeshNN(mesh))
    except TypeError:
        return make(nn)


class _MeshNN:
    """``dtorch.nn`` whose layers are made on ``mesh`` (``device_mesh=``)."""

    def __init__(self, mesh: dtorch.DeviceMesh) -> None:
        self.mesh = mesh

    def __getattr__(self, name: str) -> Any:
        layer = getattr(nn, name)
        return lambda *a, **k: layer(*a, **k, device_mesh=self.mesh)


_LAYERS: list[tuple[str, Callable[[Any], Any], tuple[int, ...]]] = [
    ("PixelShuffle", lambda m: m.PixelShuffle(2), (4, 8, 3, 2)),
    ("PixelUnshuffle", lambda m: m.PixelUnshuffle(2), (4, 2, 4, 6)),
    ("AdaptiveMaxPool2d", lambda m: m.AdaptiveMaxPool2d((2, None)), (5, 3, 5, 4)),
    ("AdaptiveMaxPool1d", lambda m: m.AdaptiveMaxPool1d(3), (5, 3, 7)),
    ("Unfold", lambda m: m.Unfold(2, padding=1, stride=(1, 2)), (5, 3, 4, 4)),
    ("Fold", lambda m: m.Fold((4, 5), 2), (5, 12, 12)),
    ("PReLU", lambda m: m.PReLU(), (5, 3, 4)),
    ("PReLU channels", lambda m: m.PReLU(3, init=0.1, dtype=torch.float64), (5, 3, 4)),
    ("InstanceNorm1d", lambda m: m.InstanceNorm1d(3), (5, 3, 6)),
    ("InstanceNorm2d affine", lambda m: m.InstanceNorm2d(3, affine=True), (5, 3, 4, 3)),
    ("ConvTranspose1d", lambda m: m.ConvTranspose1d(3, 4, 3, stride=2, padding=1), (5, 3, 6)),
    ("ConvTranspose2d", lambda m: m.ConvTranspose2d(4, 6, (3, 2), stride=2, groups=2,
                                                   output_padding=1, dilation=(1, 2)),
     (5, 4, 3, 3)),
    ("ConvTranspose2d no bias", lambda m: m.ConvTranspose2d(3, 2, 2, bias=False), (5, 3, 2, 2)),
]  # fmt: skip


@pytest.mark.parametrize(("label", "make", "shape"), _LAYERS, ids=[c[0] for c in _LAYERS])
@pytest.mark.parametrize(("mesh_shape", "names"), DP_MESHES)
def test_layers_match_torch(
    label: str, make: Callable[[Any], Any], shape: tuple[int, ...],
    mesh_shape: tuple[int, ...], names: tuple[str, ...], graph: Any,
) -> None:  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", mesh_shape, mesh_dim_names=names)
    ref, ours = _pair(make, mesh)
    assert repr(ours) == repr(ref)
    dtype = next(iter(ref.parameters()), torch.empty(0)).dtype
    x = torch.randn(shape, generator=_G).to(dtype)
    got = ours(_on(x, mesh, graph))
    torch.testing.assert_close(got.to_torch(), ref(x), atol=1e-5, rtol=1e-5)
    assert got.placements == batch_on_dp(mesh)
    assert set(ours.state_dict()) == set(ref.state_dict())
    ref.load_state_dict({k: v.to_torch() for k, v in ours.state_dict().items()})


def test_instance_norm_running_stats_and_unbatched(graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("dp",))
    ref = tnn.InstanceNorm1d(3, affine=True, track_running_stats=True, momentum=0.2)
    ours = nn.InstanceNorm1d(3, affine=True, track_running_stats=True, momentum=0.2,
                             device_mesh=mesh)  # fmt: skip
    assert repr(ours) == repr(ref)
    ours.load_state_dict(ref.state_dict())
    for _ in range(2):
        x = torch.randn(4, 3, 5, generator=_G)
        torch.testing.assert_close(ours(_on(x, mesh, graph)).to_torch(), ref(x))
    for key, value in ref.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[key].to_torch(), value)
    ref.eval(), ours.eval()
    x = torch.randn(3, 5, generator=_G)  # unbatched, with the running statistics
    torch.testing.assert_close(ours(dtorch.from_torch(x, device_mesh=mesh)).to_torch(), ref(x))


def test_instance_norm_feature_checks(graph: Any) -> None:
    x = dtorch.ones(2, 4, 3)
    with pytest.raises(ValueError, match="to match num_features"):
        nn.InstanceNorm1d(3, affine=True)(x)
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm1d(3)(x)
    with pytest.raises(ValueError, match="expected 3D or 4D input"):
        nn.InstanceNorm2d(3)(dtorch.ones(2, 3))


@pytest.mark.parametrize("name", ["Dropout1d", "Dropout2d", "Dropout3d"])
def test_channel_dropout_layers(name: str, graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    shape = {"Dropout1d": (4, 3, 5), "Dropout2d": (4, 3, 2, 2), "Dropout3d": (4, 3, 1, 2, 2)}
    x = torch.randn(shape[name], generator=_G)
    ref, ours = getattr(tnn, name)(0.3), getattr(nn, name)(0.3)
    assert repr(ours) == repr(ref)
    torch.manual_seed(9)
    got = ours(_on(x, mesh, graph))
    torch.manual_seed(9)
    assert torch.equal(got.to_torch(), ref(x))
    ours.eval()
    assert torch.equal(ours(_on(x, mesh, graph)).to_torch(), x)
    with pytest.raises(ValueError, match="dropout probability"):
        getattr(nn, name)(1.5)


def test_conv_transpose_output_size_and_refusals(graph: Any) -> None:
    torch.manual_seed(0)
    ref = tnn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    torch.manual_seed(0)
    ours = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    x = torch.randn(1, 2, 4, 4, generator=_G)
    for size in ([8, 8], [1, 3, 7, 8]):
        want = ref(x, output_size=size)
        torch.testing.assert_close(ours(dtorch.from_torch(x), output_size=size).to_torch(), want)
    for bad in ([9, 9], [1, 2, 3]):
        with pytest.raises(ValueError) as theirs:
            ref(x, output_size=bad)
        with pytest.raises(ValueError, match=str(theirs.value)[:20]):
            ours(dtorch.from_torch(x), output_size=bad)
    for make in (
        lambda m: m.ConvTranspose2d(3, 4, 2, groups=2),
        lambda m: m.ConvTranspose2d(2, 2, 2, padding_mode="reflect"),
        lambda m: m.ConvTranspose1d(2, 2, 2, groups=0),
    ):
        with pytest.raises((ValueError, RuntimeError)):
            make(tnn)
        with pytest.raises((ValueError, RuntimeError)):
            make(nn)


# --- losses -------------------------------------------------------------------------------------
def _x() -> torch.Tensor:
    return torch.randn(6, 4, generator=_G, dtype=torch.float64)


def _sign(*shape: int) -> torch.Tensor:
    return torch.where(torch.rand(shape, generator=_G) > 0.5, 1.0, -1.0).double()


_CLASS_WEIGHT = torch.tensor([1.0, 2.0, 0.5, 1.0], dtype=torch.float64)
#: label, make(torch.nn or dtorch.nn, [device_mesh=] for a layer with a buffer), the inputs.
_LOSSES: list[tuple[str, Callable[..., Any], Callable[[], list[torch.Tensor]]]] = [
    ("CosineEmbeddingLoss", lambda m: m.CosineEmbeddingLoss(margin=0.2),
     lambda: [_x(), _x(), _sign(6)]),
    ("MarginRankingLoss", lambda m: m.MarginRankingLoss(0.5, reduction="sum"),
     lambda: [_x(), _x(), _sign(6, 4)]),
    ("TripletMarginLoss", lambda m: m.TripletMarginLoss(p=1.0, swap=True),
     lambda: [_x(), _x(), _x()]),
    ("PoissonNLLLoss", lambda m: m.PoissonNLLLoss(log_input=False, full=True),
     lambda: [_x().abs(), 3 * _x().abs()]),
    ("GaussianNLLLoss", lambda m: m.GaussianNLLLoss(full=True, reduction="none"),
     lambda: [_x(), _x(), _x().abs()]),
    ("HingeEmbeddingLoss", lambda m: m.HingeEmbeddingLoss(margin=0.5),
     lambda: [_x(), _sign(6, 4)]),
    ("SoftMarginLoss", lambda m: m.SoftMarginLoss(), lambda: [_x(), _sign(6, 4)]),
    ("MultiLabelSoftMarginLoss",
     lambda m, **mesh: m.MultiLabelSoftMarginLoss(weight=_CLASS_WEIGHT, **mesh),
     lambda: [_x(), (_sign(6, 4) + 1) / 2]),
    ("PairwiseDistance", lambda m: m.PairwiseDistance(p=3.0, keepdim=True),
     lambda: [_x(), _x()]),
]  # fmt: skip


@pytest.mark.parametrize(("label", "make", "inputs"), _LOSSES, ids=[c[0] for c in _LOSSES])
@pytest.mark.parametrize(("mesh_shape", "names"), DP_MESHES[::3])
def test_loss_layers_match_torch(
    label: str, make: Callable[[Any], Any], inputs: Callable[[], list[torch.Tensor]],
    mesh_shape: tuple[int, ...], names: tuple[str, ...], graph: Any,
) -> None:  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", mesh_shape, mesh_dim_names=names)
    ref = make(tnn)
    ours = make(nn, device_mesh=mesh) if label.startswith("MultiLabel") else make(nn)
    assert repr(ours) == repr(ref)
    fulls = inputs()
    want = ref(*fulls)
    got = ours(*(_on(t, mesh, graph) for t in fulls))
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.to_torch(), want)


def test_loss_layer_legacy_flags_and_checks(graph: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert nn.SoftMarginLoss(size_average=False).reduction == "sum"
        assert tnn.SoftMarginLoss(size_average=False).reduction == "sum"
    with pytest.raises(ValueError, match="margin to be greater than 0"):
        tnn.TripletMarginLoss(margin=0.0)
    with pytest.raises(ValueError, match="margin to be greater than 0"):
        nn.TripletMarginLoss(margin=0.0)
    m = nn.MultiLabelSoftMarginLoss(weight=torch.ones(3))
    assert "weight" in dict(m.named_buffers())
