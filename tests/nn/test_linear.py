"""Linear and the tensor-parallel Linears against torch.nn.Linear: the same weights (loaded
from a torch module), outputs equal within float32 tolerance, parameters and outputs on the
documented placements; 1-D, 2-D and 3-D meshes (tp found by name, even and uneven feature
counts), batch sharded on dp, thread and process mode; torch's initialisation distribution;
bad arguments."""

from __future__ import annotations

import math

import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard, nn
from dtorch.errors import MeshError, PlacementError
from dtorch.nn.modules.parallel_linear import PARALLEL_LINEARS

pytestmark = pytest.mark.timeout(120)

R = Replicate()
#: class -> (weight, bias, output) placements on the tp mesh dim.
_PLACED = {
    nn.Linear: (R, R, None),
    nn.ColumnParallelLinear: (Shard(0), Shard(0), Shard(1)),
    nn.ColumnParallelLinearWithReplicateOutput: (Shard(0), Shard(0), R),
    nn.ColumnParallelLinearWithReplicateInputOutput: (Shard(0), Shard(0), R),
    nn.RowParallelLinear: (Shard(1), R, Partial()),
    nn.RowParallelLinearWithReplicateOutput: (Shard(1), R, R),
    nn.ReplicateParallelLinear: (R, R, R),
}
#: (mesh shape, dim names): tp alone (even and uneven), with dp, and on a 3-D mesh.
_MESHES = [
    ((2,), ("tp",)),
    ((3,), ("tp",)),
    ((2, 2), ("dp", "tp")),
    ((3, 2), ("tp", "dp")),
    ((2, 1, 2), ("dp", "pp", "tp")),
]


def _input_placements(cls: type, mesh: dtorch.DeviceMesh) -> list:
    """The batch sharded on dp; on tp what the layer expects (Replicate for column and plain
    layers; a row layer gets it sharded already, or Replicate and shards it itself)."""
    out = []
    for name in mesh.dim_names:
        if name == "dp":
            out.append(Shard(0))
        elif name == "tp" and cls is nn.RowParallelLinear:
            out.append(Shard(1))
        else:
            out.append(R)
    return out


@pytest.mark.parametrize(("shape", "names"), _MESHES)
def test_layers_match_torch(shape: tuple, names: tuple, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)
    tp = names.index("tp")
    x = torch.randn(6, 5)
    for cls, (weight, bias, output) in _PLACED.items():
        ref = torch.nn.Linear(5, 7)
        layer = cls(5, 7, device_mesh=mesh)
        assert layer.load_state_dict(ref.state_dict()) == ([], [])
        xd = dtorch.from_torch(x, device_mesh=mesh, placements=_input_placements(cls, mesh))
        y = layer(xd)
        assert torch.allclose(y.to_torch(), ref(x), atol=1e-6), cls
        assert layer.weight.placements[tp] == (R if mesh.shape[tp] == 1 else weight), cls
        assert layer.bias.placements[tp] == bias, cls
        if output is not None:
            assert y.placements[tp] == output, cls
        if "dp" in names:
            assert y.placements[names.index("dp")] == Shard(0), cls
        others = [p for i, p in enumerate(layer.weight.placements) if i != tp]
        assert others == [R] * (mesh.ndim - 1), cls


@pytest.mark.parametrize("cls", PARALLEL_LINEARS)
def test_3d_input_and_no_bias(cls: type, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    ref = torch.nn.Linear(4, 6, bias=False)
    layer = cls(4, 6, bias=False, device_mesh=mesh)
    layer.load_state_dict(ref.state_dict())
    x = torch.randn(2, 3, 4)
    xd = dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(0), R])
    assert torch.allclose(layer(xd).to_torch(), ref(x), atol=1e-6)
    assert layer.bias is None and [n for n, _ in layer.named_parameters()] == ["weight"]


@pytest.mark.parametrize(
    ("shape", "names"), [((2,), ("tp",)), ((3,), ("tp",)), ((2, 2), ("dp", "tp"))]
)
@pytest.mark.parametrize(("in_features", "out_features"), [(1, 3), (3, 1), (1, 1), (2, 1), (2, 3)])
def test_feature_dims_of_one_and_below_the_tp_size(
    shape: tuple, names: tuple, in_features: int, out_features: int, graph: dtorch.Graph
) -> None:
    """Every tp layer equals torch.nn.Linear with the same weights when a feature dim is 1
    (its Shard is then Replicate, as the input hook makes the input's) or smaller than the
    tp size (devices past the last chunk hold none); the input given as the row layers take
    it (Shard(-1) on tp, which the hook makes Replicate for a dim of size 1)."""
    mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)
    tp = names.index("tp")
    x = torch.randn(4, in_features)
    for cls in PARALLEL_LINEARS:
        ref = torch.nn.Linear(in_features, out_features)
        layer = cls(in_features, out_features, device_mesh=mesh)
        assert layer.load_state_dict(ref.state_dict()) == ([], [])
        xd = dtorch.from_torch(x, device_mesh=mesh, placements=_input_placements(cls, mesh))
        y = layer(xd)
        assert y.shape == (4, out_features), cls
        assert torch.allclose(y.to_torch(), ref(x), atol=1e-6), cls
        weight, bias, _ = _PLACED[cls]
        sharded = weight.is_shard() and layer.weight.shape[weight.dim] > 1
        assert layer.weight.placements[tp] == (weight if sharded else R), cls
        assert layer.bias.placements[tp] == (bias if out_features > 1 else R), cls
        assert torch.equal(layer.weight.to_torch(), ref.weight.detach()), cls


def test_tp_dim_by_name_and_a_mesh_without_it(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("model", "dp"))
    layer = nn.ColumnParallelLinear(4, 6, device_mesh=mesh, tp_dim="model")
    assert layer.weight.placements == [Shard(0), R]
    plain = nn.RowParallelLinearWithReplicateOutput(4, 6, device_mesh=mesh)  # no "tp" dim
    assert plain.weight.placements == [R, R]
    ref = torch.nn.Linear(4, 6)
    plain.load_state_dict(ref.state_dict())
    x = torch.randn(3, 4)
    y = plain(dtorch.from_torch(x, device_mesh=mesh))
    assert y.placements == [R, R] and torch.allclose(y.to_torch(), ref(x), atol=1e-6)
    assert "tp_dim='model'" in repr(layer)


def test_column_layer_refuses_a_sharded_input(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
    layer = nn.ColumnParallelLinear(4, 6, device_mesh=mesh)
    x = dtorch.randn(3, 4, device_mesh=mesh, placements=[Shard(1)])
    with pytest.raises(PlacementError, match="linear"):
        layer(x)
    both = nn.ColumnParallelLinearWithReplicateInputOutput(4, 6, device_mesh=mesh)
    assert both(x).placements == [R]


def test_initialisation_is_torchs(graph: dtorch.Graph) -> None:
    """Same default generator state: the values torch.nn.Linear draws (to float rounding)."""
    mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
    torch.manual_seed(3)
    ref = torch.nn.Linear(16, 8)
    torch.manual_seed(3)
    layer = nn.ColumnParallelLinear(16, 8, device_mesh=mesh)
    assert torch.allclose(layer.weight.to_torch(), ref.weight.detach(), atol=1e-7)
    assert torch.allclose(layer.bias.to_torch(), ref.bias.detach(), atol=1e-7)
    w = nn.Linear(256, 64).weight.to_torch()
    bound = 1 / math.sqrt(256)
    assert w.abs().max() <= bound and w.abs().max() > 0.9 * bound
    assert abs(w.mean().item()) < 0.01 and abs(w.std().item() - bound / math.sqrt(3)) < 0.005


def test_dtype_and_default_mesh(graph: dtorch.Graph) -> None:
    layer = nn.Linear(3, 2, dtype=torch.float64)
    assert layer.weight.dtype == torch.float64 == layer.bias.dtype
    assert layer.weight.device_mesh == graph.default_device_mesh
    assert repr(layer) == repr(torch.nn.Linear(3, 2))
    assert repr(nn.Linear(3, 2, bias=False)) == repr(torch.nn.Linear(3, 2, bias=False))


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="Linear: in_features must be a non-negative int"):
        nn.Linear(-1, 2)
    with pytest.raises(TypeError, match="ColumnParallelLinear: dtype must be a floating-point"):
        nn.ColumnParallelLinear(2, 2, dtype=torch.int64)
    with pytest.raises(MeshError, match=r"device_mesh must be a dtorch\.DeviceMesh"):
        nn.Linear(2, 2, device_mesh="cpu")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tp_dim must be a mesh dim name"):
        nn.RowParallelLinear(2, 2, tp_dim=1)  # type: ignore[arg-type]
    with pytest.raises(dtorch.errors.ShapeError, match="linear"):
        nn.Linear(3, 2)(dtorch.ones(2, 4))
