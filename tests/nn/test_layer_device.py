"""torch's ``device=`` on every dtorch.nn layer: the one-device mesh the creation functions
make of it (``DeviceMesh(device)``), so the parameters and buffers have the mesh and
placements ``device_mesh=DeviceMesh(device)`` gives them, draw torch's initial values, and a
torch layer's weights (``load_state_dict``) give torch's output; the tensor-parallel layers
are plain ones there (a one-device mesh has no tp dim); ``device`` with ``device_mesh`` is
refused, naming both; torch's ``device=None, dtype=None`` and positional forms; thread and
process mode."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import torch

import dtorch
from dtorch import DeviceMesh, Replicate, nn
from dtorch.errors import MeshError
from dtorch.nn.modules.parallel_linear import PARALLEL_LINEARS
from tests.nn.test_norm_layers import _randomised

pytestmark = pytest.mark.timeout(120)

R = Replicate()
#: What ``device=`` takes: a device type, a "type:index" string, a torch.device.
_DEVICES = ["cpu", torch.device("cpu", 1)]


def _floats(*shape: int) -> Callable[[torch.Generator], torch.Tensor]:
    return lambda gen: torch.randn(shape, generator=gen)


def _ids(gen: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 10, (3, 4), generator=gen)


#: name, dtorch layer (given the mesh keywords), torch layer, input.
_Case = tuple[str, Callable[..., Any], Callable[[], torch.nn.Module], Callable[..., torch.Tensor]]
_LAYERS: list[_Case] = [
    ("Linear", lambda **kw: nn.Linear(5, 3, **kw), lambda: torch.nn.Linear(5, 3), _floats(4, 5)),
    (
        "Conv2d",
        lambda **kw: nn.Conv2d(2, 4, 3, padding=1, **kw),
        lambda: torch.nn.Conv2d(2, 4, 3, padding=1),
        _floats(2, 2, 5, 5),
    ),
    (
        "BatchNorm2d",
        lambda **kw: nn.BatchNorm2d(3, **kw),
        lambda: torch.nn.BatchNorm2d(3),
        _floats(4, 3, 2, 2),
    ),
    ("LayerNorm", lambda **kw: nn.LayerNorm(6, **kw), lambda: torch.nn.LayerNorm(6), _floats(4, 6)),
    ("RMSNorm", lambda **kw: nn.RMSNorm(6, **kw), lambda: torch.nn.RMSNorm(6), _floats(4, 6)),
    (
        "GroupNorm",
        lambda **kw: nn.GroupNorm(2, 4, **kw),
        lambda: torch.nn.GroupNorm(2, 4),
        _floats(3, 4, 5),
    ),
    (
        "Embedding",
        lambda **kw: nn.Embedding(10, 4, padding_idx=1, **kw),
        lambda: torch.nn.Embedding(10, 4, padding_idx=1),
        _ids,
    ),
    (
        "EmbeddingWithReplicateOutput",
        lambda **kw: nn.EmbeddingWithReplicateOutput(10, 4, **kw),
        lambda: torch.nn.Embedding(10, 4),
        _ids,
    ),
    *[
        (
            cls.__name__,
            partial(cls, 5, 3),
            lambda: torch.nn.Linear(5, 3),
            _floats(4, 5),
        )
        for cls in PARALLEL_LINEARS
    ],
]


def _state(layer: nn.Module) -> dict[str, Any]:
    return layer.state_dict(keep_vars=True)


@pytest.mark.parametrize("device", _DEVICES, ids=str)
@pytest.mark.parametrize(
    ("name", "make", "make_torch", "make_input"), _LAYERS, ids=[case[0] for case in _LAYERS]
)
def test_device_is_a_one_device_mesh(  # type: ignore[no-untyped-def]
    name, make, make_torch, make_input, device, graph
) -> None:
    """``device=`` places everything as ``device_mesh=DeviceMesh(device)``, draws torch's
    initial values, and with a torch layer's weights computes torch's output."""
    mesh = DeviceMesh(device)
    torch.manual_seed(5)
    layer = make(device=device)
    torch.manual_seed(5)
    ref = make_torch()
    same = make(device_mesh=mesh)
    assert list(_state(layer)) == list(_state(same)) == list(ref.state_dict()), name
    for key, value in _state(layer).items():
        assert value.device_mesh == mesh == _state(same)[key].device_mesh, (name, key)
        assert value.placements == [R] == _state(same)[key].placements, (name, key)
        assert torch.equal(value.to_torch(), ref.state_dict()[key]), (name, key)  # the draw
    _randomised(ref)
    assert str(layer.load_state_dict(ref.state_dict())) == "<All keys matched successfully>"
    x = make_input(torch.Generator().manual_seed(2))
    out = layer(dtorch.from_torch(x, device=device))
    assert out.device_mesh == mesh and out.placements == [R], name
    torch.testing.assert_close(out.to_torch(), ref(x), msg=name)
    for key, value in ref.state_dict().items():  # BatchNorm2d's running buffers too
        torch.testing.assert_close(layer.state_dict()[key].to_torch(), value, msg=key)


#: The layers with weights, and those without, given the mesh keywords.
_WEIGHTED: list[Callable[..., nn.Module]] = [
    *[make for _, make, _, _ in _LAYERS],
    lambda **kw: nn.RMSNorm(2, elementwise_affine=False, **kw),
]
_UNWEIGHTED: list[Callable[..., nn.Module]] = [
    partial(nn.Dropout, 0.1),
    nn.ReLU,
    nn.GELU,
    nn.SiLU,
    nn.Sigmoid,
    nn.Tanh,
    partial(nn.Softmax, dim=0),
    nn.LeakyReLU,
    nn.ELU,
    nn.Flatten,
    partial(nn.MaxPool2d, 2),
    partial(nn.AvgPool2d, 2),
    partial(nn.AdaptiveAvgPool2d, 1),
    nn.GlobalAvgPool2d,
]


def test_device_and_device_mesh_together_are_refused(graph: dtorch.Graph) -> None:
    mesh = DeviceMesh("cpu")
    for make in _WEIGHTED + _UNWEIGHTED:
        with pytest.raises(MeshError, match=r": give device_mesh or device, not both") as error:
            make(device="cpu", device_mesh=mesh)
        assert "device_mesh=DeviceMesh(" in str(error.value)
        assert "device='cpu'" in str(error.value)
    with pytest.raises(MeshError, match=r"^Linear: give device_mesh or device, not both"):
        nn.Linear(2, 2, device=torch.device("cpu"), device_mesh=mesh)


def test_layers_without_weights_ignore_device(graph: dtorch.Graph) -> None:
    """The device of a layer without parameters changes nothing: the input's mesh stays."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.ones(2, 2, 2, 2, device_mesh=mesh)
    for make in _UNWEIGHTED:
        out = make(device="cpu:1")(x)
        out = out[0] if isinstance(out, tuple) else out
        assert out.device_mesh == mesh, make


def test_parallel_layers_need_a_mesh_for_a_tp_split(graph: dtorch.Graph) -> None:
    """``device=`` is a one-device mesh without a tp dim: nothing to split, no redistribution
    (a plain Linear); ``device_mesh=`` with a tp dim splits."""
    tp = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
    for cls in PARALLEL_LINEARS:
        plain = cls(4, 6, device="cpu")
        assert plain.weight.device_mesh == DeviceMesh("cpu")
        assert plain.weight.placements == [R] == plain.bias.placements
        y = plain(dtorch.ones(3, 4, device="cpu"))
        assert y.placements == [R] and y.device_mesh == DeviceMesh("cpu")
        split = cls(4, 6, device_mesh=tp)
        assert split.weight.placements == [split.tp_plan.weight], cls


def test_torch_factory_kwargs(graph: dtorch.Graph) -> None:
    """What torch code writes: ``device=None, dtype=None``, ``**factory_kwargs`` and the
    positional ``device, dtype``."""
    layer = nn.Linear(4, 4, device=None, dtype=None)
    assert layer.weight.device_mesh == graph.default_device_mesh
    assert layer.weight.dtype == graph.default_dtype
    factory_kwargs = {"device": torch.device("cpu", 1), "dtype": torch.float64}
    for _, make, _, _ in _LAYERS:
        weight = make(**factory_kwargs).weight
        assert weight.device_mesh == DeviceMesh("cpu:1") and weight.dtype == torch.float64
    positional = nn.Linear(4, 4, False, "cpu:1", torch.float64)
    assert positional.bias is None and positional.weight.dtype == torch.float64
    assert positional.weight.device_mesh == DeviceMesh("cpu:1")
    bn = nn.BatchNorm2d(3, 1e-5, 0.1, True, True, "cpu:1", torch.float64)
    assert bn.running_var.device_mesh == DeviceMesh("cpu:1") and bn.weight.dtype == torch.float64


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (nn.Linear, torch.nn.Linear),
        (nn.Conv2d, torch.nn.Conv2d),
        (nn.BatchNorm2d, torch.nn.BatchNorm2d),
        (nn.LayerNorm, torch.nn.LayerNorm),
        (nn.RMSNorm, torch.nn.RMSNorm),
        (nn.GroupNorm, torch.nn.GroupNorm),
        (nn.Embedding, torch.nn.Embedding),
    ],
)
def test_torch_argument_order(ours: type, theirs: type) -> None:
    """torch's positional arguments (``device``, ``dtype`` last) in torch's order; its
    keyword-only ones keyword-only here too, beside ``device_mesh``."""

    def names(cls: type, kind: Any) -> list[str]:
        params = inspect.signature(cls).parameters.values()
        return [p.name for p in params if p.kind == kind]

    assert names(ours, inspect.Parameter.POSITIONAL_OR_KEYWORD) == names(
        theirs, inspect.Parameter.POSITIONAL_OR_KEYWORD
    )
    mine = names(ours, inspect.Parameter.KEYWORD_ONLY)
    assert set(names(theirs, inspect.Parameter.KEYWORD_ONLY)) | {"device_mesh"} == set(mine)


def test_embedding_weight_moves_to_device(graph: dtorch.Graph) -> None:
    """A given weight goes to the ``device=`` mesh (without it, it stays on its own)."""
    two = dtorch.init_device_mesh("cpu", 2)
    full = torch.randn(5, 3, generator=torch.Generator().manual_seed(9))
    given = dtorch.from_torch(full, device_mesh=two)
    for layer in (
        nn.Embedding(5, 3, _weight=given, device="cpu:1"),
        nn.Embedding.from_pretrained(given, device="cpu:1"),
        nn.Embedding.from_pretrained(full, device=torch.device("cpu", 1)),
    ):
        assert layer.weight.device_mesh == DeviceMesh("cpu:1")
        assert torch.equal(layer.weight.to_torch(), full)
    assert nn.Embedding.from_pretrained(given).weight.device_mesh == two


@pytest.mark.skipif(torch.cuda.is_available(), reason="refused only where CUDA is absent")
def test_a_device_the_graph_cannot_run_is_refused(graph: dtorch.Graph) -> None:
    for make in _WEIGHTED:
        with pytest.raises(MeshError, match="cannot run on"):
            make(device="cuda:0")


#: Layers without parameters (and losses, whose weight buffer is optional), built bare.
_PARAMETER_FREE: list[Callable[..., nn.Module]] = [
    partial(nn.AdaptiveMaxPool1d, 2), partial(nn.AdaptiveMaxPool2d, 2), partial(nn.LPPool1d, 2, 2),
    partial(nn.LPPool2d, 2, 2), partial(nn.MaxUnpool1d, 2), partial(nn.MaxUnpool2d, 2),
    partial(nn.MaxUnpool3d, 2), partial(nn.LPPool3d, 2, 2),
    partial(nn.Upsample, scale_factor=2), partial(nn.UpsamplingNearest2d, scale_factor=2),
    partial(nn.UpsamplingBilinear2d, scale_factor=2), partial(nn.PixelShuffle, 2),
    partial(nn.PixelUnshuffle, 2), partial(nn.ChannelShuffle, 2), partial(nn.Unfold, 2),
    partial(nn.Fold, (4, 4), 2), partial(nn.LocalResponseNorm, 2), nn.RReLU, nn.PairwiseDistance,
    nn.MSELoss, nn.L1Loss, nn.SmoothL1Loss, nn.HuberLoss, nn.KLDivLoss, nn.SoftMarginLoss,
    nn.CosineEmbeddingLoss, nn.TripletMarginLoss, nn.TripletMarginWithDistanceLoss,
    nn.MarginRankingLoss, nn.HingeEmbeddingLoss, nn.GaussianNLLLoss, nn.PoissonNLLLoss,
    nn.MultiLabelMarginLoss, nn.BCELoss, nn.BCEWithLogitsLoss, nn.CrossEntropyLoss, nn.NLLLoss,
    nn.MultiMarginLoss, nn.MultiLabelSoftMarginLoss,
]  # fmt: skip


@pytest.mark.parametrize("make", _PARAMETER_FREE, ids=lambda m: getattr(m, "func", m).__name__)
def test_every_parameter_free_layer_takes_the_placement_keywords(
    make: Callable[..., nn.Module], graph: dtorch.Graph
) -> None:
    """docs/nn.md: layers without parameters take ``device``/``device_mesh``/``dtype`` (one of
    the first two) and ignore them (these raised a TypeError); a loss's weight buffer goes on
    the device given."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    for keywords in ({"device_mesh": mesh}, {"device": "cpu:1"}, {"dtype": torch.float64}):
        assert repr(make(**keywords)) == repr(make())
    with pytest.raises(MeshError, match=r": give device_mesh or device, not both"):
        make(device="cpu", device_mesh=mesh)
    weighted = nn.BCELoss(weight=torch.tensor([1.0, 2.0]), device="cpu:1")
    assert weighted.weight is not None and weighted.weight.device_mesh == DeviceMesh("cpu:1")
