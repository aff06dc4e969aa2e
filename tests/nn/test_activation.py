"""Activation, Softmax, Flatten and Identity layers against torch.nn's: outputs equal to
torch's on sharded inputs (1-D, 2-D and 3-D meshes, even and uneven), placements kept,
inplace forms, reprs, torch's legacy Softmax dim, rejections naming the operator."""

from __future__ import annotations

import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard, nn
from dtorch.errors import PlacementError

pytestmark = pytest.mark.timeout(120)

#: (dtorch layer, torch layer) pairs built with the same arguments.
_PAIRS = [
    (nn.ReLU(), torch.nn.ReLU()),
    (nn.GELU(), torch.nn.GELU()),
    (nn.GELU("tanh"), torch.nn.GELU("tanh")),
    (nn.SiLU(), torch.nn.SiLU()),
    (nn.Sigmoid(), torch.nn.Sigmoid()),
    (nn.Tanh(), torch.nn.Tanh()),
    (nn.Softmax(dim=-1), torch.nn.Softmax(dim=-1)),
    (nn.Softmax(dim=0), torch.nn.Softmax(dim=0)),
    (nn.LogSoftmax(dim=1), torch.nn.LogSoftmax(dim=1)),
    (nn.Hardtanh(), torch.nn.Hardtanh()),
    (nn.Hardtanh(-0.5, 2.0), torch.nn.Hardtanh(-0.5, 2.0)),
    (nn.ReLU6(), torch.nn.ReLU6()),
    (nn.Flatten(), torch.nn.Flatten()),
    (nn.Flatten(0, 1), torch.nn.Flatten(0, 1)),
    (nn.Identity(), torch.nn.Identity()),
]
_X = torch.randn(5, 4, 3)


@pytest.mark.parametrize(
    ("mesh_shape", "placements"),
    [((2,), [Shard(1)]), ((3,), [Shard(0)]), ((2, 3), [Shard(0), Shard(1)]),
     ((2, 1, 2), [Shard(1), Replicate(), Shard(0)])],
)  # fmt: skip
def test_layers_match_torch(mesh_shape: tuple, placements: list, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x = dtorch.from_torch(_X, device_mesh=mesh, placements=placements)
    for ours, ref in _PAIRS:
        refused = _refused(ours, mesh_shape, placements)
        if refused:
            with pytest.raises(PlacementError, match=refused):
                ours(x)
            continue
        y = ours(x)
        assert torch.allclose(y.to_torch(), ref(_X), atol=1e-6), ours
        assert repr(ours) == repr(ref)
        if not isinstance(ours, nn.Flatten):
            assert y.placements == x.placements, ours


def _refused(layer: nn.Module, mesh_shape: tuple, placements: list) -> str | None:
    """The operator that refuses ``placements`` of ``_X``: flatten of a range with a sharded
    dim inside it (not its outermost), or with its outermost dim sharded unevenly (a softmax
    along a sharded dim all-reduces its rows' maxima and sums)."""
    sharded = {p.dim for p in placements if isinstance(p, Shard)}
    uneven = {
        p.dim
        for p, n in zip(placements, mesh_shape, strict=True)
        if isinstance(p, Shard) and _X.shape[p.dim] % n
    }
    if isinstance(layer, nn.Flatten):
        start, end = layer.start_dim % 3, layer.end_dim % 3
        if sharded & set(range(start + 1, end + 1)) or (start < end and start in uneven):
            return "flatten"
    return None


def test_inplace_forms(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    for ours, ref in (
        (nn.ReLU(True), torch.nn.ReLU(True)),
        (nn.SiLU(True), torch.nn.SiLU(True)),
        (nn.Hardtanh(-0.5, 0.5, True), torch.nn.Hardtanh(-0.5, 0.5, True)),
        (nn.ReLU6(True), torch.nn.ReLU6(True)),
    ):
        x = dtorch.from_torch(_X, device_mesh=mesh, placements=[Shard(0)])
        xt = _X.clone()
        assert ours(x) is x and torch.allclose(x.to_torch(), ref(xt), atol=1e-6)
        assert repr(ours) == repr(ref)


def test_softmax_legacy_dim_and_arguments(graph: dtorch.Graph) -> None:
    for shape in ((3,), (2, 3), (2, 3, 4), (2, 3, 4, 5)):
        t = torch.randn(shape)
        with pytest.warns(UserWarning, match="Implicit dimension choice"):
            ours = nn.Softmax()(dtorch.from_torch(t)).to_torch()
        with pytest.warns(UserWarning, match="Implicit dimension choice"):
            assert torch.allclose(ours, torch.nn.Softmax()(t), atol=1e-6)
    assert repr(nn.Softmax()) == repr(torch.nn.Softmax())
    mesh = dtorch.init_device_mesh("cpu", 2)
    assert nn.ReLU(device_mesh=mesh, dtype=torch.float64).forward(dtorch.ones(1)).tolist() == [1.0]
    with pytest.raises(ValueError, match="GELU: approximate='fast'; accepted: 'none', 'tanh'"):
        nn.GELU("fast")
    for layer in (nn.Tanh, nn.Sigmoid):  # torch's message, naming the layer
        with pytest.raises(TypeError, match=rf"^{layer.__name__}\.__init__\(\) takes 1 posi"):
            layer(1)  # type: ignore[call-arg]


def test_partial_input_is_refused_by_nonlinear_layers(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.from_torch(_X, device_mesh=mesh, placements=[Partial()])
    for layer in (nn.GELU(), nn.Sigmoid(), nn.Tanh()):
        with pytest.raises(PlacementError, match="Partial"):
            layer(x)
    for layer, name in ((nn.Hardtanh(), "hardtanh"), (nn.ReLU6(), "relu6")):
        with pytest.raises(PlacementError, match=rf"^{name}: clamp: got \(P,\).*accepted"):
            layer(x)
    with pytest.raises(PlacementError, match=r"^log_softmax: got \(P,\)"):
        nn.LogSoftmax(1)(x)
    assert torch.allclose(nn.Flatten()(x).to_torch(), _X.flatten(1))


def test_hardtanh_relu6_and_log_softmax_arguments(graph: dtorch.Graph) -> None:
    """torch's reprs, attributes, deprecated keywords, implicit dim and refusals."""
    for ours, ref in (
        (nn.Hardtanh(-2.0, 3.0), torch.nn.Hardtanh(-2.0, 3.0)),
        (nn.ReLU6(), torch.nn.ReLU6()),
        (nn.LogSoftmax(), torch.nn.LogSoftmax()),
        (nn.LogSoftmax(0), torch.nn.LogSoftmax(0)),
    ):
        assert repr(ours) == repr(ref)
    relu6 = nn.ReLU6()
    assert (relu6.min_val, relu6.max_val, relu6.inplace) == (0.0, 6.0, False)
    with pytest.warns(FutureWarning, match="`min_value` is deprecated and renamed to `min_val`"):
        layer = nn.Hardtanh(min_value=-3.0)
    assert layer.min_val == -3.0
    with pytest.raises(ValueError, match=r"max_val \(1.0\) must be greater than min_val \(2.0\)"):
        nn.Hardtanh(2.0, 1.0)
    t = torch.randn(2, 3, 4)
    with pytest.warns(UserWarning, match="Implicit dimension choice"):
        ours = nn.LogSoftmax()(dtorch.from_torch(t)).to_torch()
    assert torch.allclose(ours, torch.log_softmax(t, 0), atol=1e-6)  # torch's implicit dim
    ints = dtorch.tensor([-9, 0, 3, 9])
    assert nn.ReLU6()(ints).tolist() == [0, 0, 3, 6]
    assert nn.Hardtanh(-1.5, 2.5)(ints).tolist() == [-1, 0, 2, 2]
