"""ParameterList and ParameterDict against torch.nn's (registered parameters, ``state_dict``
keys, loading a torch container's state, indexing, slicing, the dict methods, reprs, errors),
and the layers on existing operators: the padding layers (``pad``), ``Unflatten``, ``GLU``,
``Identity``: values, attributes and reprs as torch's, float32 and float64, the batch sharded on
dp (even and uneven) on 1-D, 2-D and 3-D meshes and unsharded, thread and process mode; a padded
dim that is sharded is refused naming ``pad``."""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard, nn
from dtorch.errors import PlacementError
from tests.nn.layer_harness import DP_MESHES, batch_on_dp

pytestmark = pytest.mark.timeout(180)

R, P = Replicate(), Partial()
DTYPES = [torch.float32, torch.float64]
MESHES = [*DP_MESHES, None]


def _mesh(spec: tuple[tuple[int, ...], tuple[str, ...]] | None, graph: dtorch.Graph) -> Any:
    # (mesh, batch placements): a dp mesh with the batch on dp, or the default mesh unsharded
    if spec is None:
        mesh = graph.default_device_mesh
        return mesh, [R] * mesh.ndim
    mesh = dtorch.init_device_mesh("cpu", spec[0], mesh_dim_names=spec[1])
    return mesh, batch_on_dp(mesh)


def _mesh_id(value: Any) -> str:
    return "default" if value is None else "x".join(map(str, value))


def _torch_params(*shapes: tuple[int, ...], dtype: torch.dtype = torch.float32) -> list[Any]:
    gen = torch.Generator().manual_seed(sum(map(sum, shapes)))
    return [torch.nn.Parameter(torch.randn(s, generator=gen, dtype=dtype)) for s in shapes]


@pytest.mark.parametrize("dtype", DTYPES)
def test_parameter_list_matches_torch(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    ref = torch.nn.ParameterList(_torch_params((2, 3), (4,), (1,), dtype=dtype))
    shards = [[Shard(1), R], [R, Shard(0)], [R, R]]
    ours = nn.ParameterList(
        dtorch.zeros(p.shape, dtype=dtype, device_mesh=mesh, placements=s)
        for p, s in zip(ref, shards, strict=True)
    )
    assert all(isinstance(p, nn.Parameter) for p in ours)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["0", "1", "2"]
    assert str(ours.load_state_dict(ref.state_dict())) == "<All keys matched successfully>"
    for got, want, placements in zip(ours, ref, shards, strict=True):
        assert got.placements == placements and got.dtype == dtype
        assert torch.equal(got.to_torch(), want.detach())
    assert repr(ours) == repr(ref)
    assert len(ours) == 3 and ours[-1] is ours[2] and ours[1:][0] is ours[1]
    assert isinstance(ours[::2], nn.ParameterList) and len(ours[::2]) == 2
    with pytest.raises(IndexError, match="index 3 is out of range"):
        ours[3]
    ours[0] = dtorch.ones(2, 3, dtype=dtype, device_mesh=mesh)  # a tensor becomes a Parameter
    assert isinstance(ours[0], nn.Parameter) and ours.state_dict()["0"].tolist()[0] == [1.0] * 3
    ours.append("not a tensor")
    ref.append("not a tensor")
    assert len(ours) == 4 and list(ours.state_dict()) == ["0", "1", "2"]
    assert repr(ours).splitlines()[-2] == repr(ref).splitlines()[-2]
    ours += [torch.ones(2, dtype=dtype)]  # a torch tensor: distributed, a Parameter
    assert isinstance(ours[4], nn.Parameter) and list(ours.state_dict())[-1] == "4"
    assert "0" not in dir(ours) and "append" in dir(ours)
    with pytest.raises(TypeError, match=r"ParameterList\.extend should be called with an iterable"):
        ours.extend(dtorch.ones(2))
    with pytest.raises(RuntimeError, match="ParameterList should not be called"):
        ours(1)
    assert repr(nn.ParameterList()) == repr(torch.nn.ParameterList()) == "ParameterList()"


@pytest.mark.parametrize("dtype", DTYPES)
def test_parameter_dict_matches_torch(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (3,), mesh_dim_names=("dp",))
    a, b, c = _torch_params((3, 2), (5,), (2, 2), dtype=dtype)
    ref = torch.nn.ParameterDict({"scale": a, "bias": b, "extra": c})  # a dict: sorted keys
    ours = nn.ParameterDict(
        {k: dtorch.zeros(v.shape, dtype=dtype, device_mesh=mesh) for k, v in ref.items()}
    )
    assert list(ours) == list(ref) == ["bias", "extra", "scale"]
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert str(ours.load_state_dict(ref.state_dict())) == "<All keys matched successfully>"
    for key, want in ref.items():
        assert ours[key].placements == [R] and torch.equal(ours[key].to_torch(), want.detach())
    assert repr(ours) == repr(ref)
    ordered = nn.ParameterDict(OrderedDict([("z", dtorch.ones(1)), ("a", dtorch.ones(1))]))
    assert list(ordered) == ["z", "a"]  # an OrderedDict keeps its order, as torch
    ordered.update([("m", dtorch.ones(2))])
    assert list(ordered.state_dict()) == ["z", "a", "m"] and next(reversed(ordered)) == "m"
    assert ordered.popitem()[0] == "m" and ordered.pop("z").tolist() == [1.0]
    assert list(ordered.keys()) == ["a"] and ordered.get("q", 7) == 7 and "a" in ordered
    assert ordered.setdefault("n", dtorch.zeros(1)).tolist() == [0.0]
    merged = ordered | nn.ParameterDict({"b": dtorch.ones(3)})
    assert list(merged) == ["a", "n", "b"] and merged["a"] is ordered["a"]
    copied = ordered.copy()
    assert list(copied) == ["a", "n"] and copied["n"] is ordered["n"]
    del ordered["a"]
    assert list(ordered.state_dict()) == ["n"] and not hasattr(ordered, "a")
    ordered.clear()
    assert len(ordered) == 0 and list(ordered.parameters()) == []
    fresh = nn.ParameterDict().fromkeys(["x", "y"])
    assert list(fresh) == ["x", "y"] and fresh["x"] is None
    with pytest.raises(TypeError, match="Index given to ParameterDict cannot be used as a key"):
        ours[3] = dtorch.ones(1)  # type: ignore[index]
    with pytest.raises(KeyError, match="attribute 'update' already exists"):
        ours["update"] = dtorch.ones(1)
    assert "update" not in ours  # a refused key is not listed
    with pytest.raises(ValueError, match="element #0 has length 1; 2 is required"):
        ours.update([("k",)])
    with pytest.raises(RuntimeError, match="ParameterDict should not be called"):
        ours(1)


def test_parameter_containers_in_a_model(graph: dtorch.Graph) -> None:
    """Nested in a module, the keys are prefixed as torch's; a torch model's state loads."""

    class TorchModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scales = torch.nn.ParameterList(_torch_params((3,), (3,)))
            self.table = torch.nn.ParameterDict({"w": _torch_params((3, 2))[0]})

    class Model(nn.Module):
        def __init__(self, mesh: dtorch.DeviceMesh) -> None:
            super().__init__()
            self.scales = nn.ParameterList([dtorch.ones(3, device_mesh=mesh) for _ in range(2)])
            self.table = nn.ParameterDict({"w": dtorch.ones(3, 2, device_mesh=mesh)})

    mesh = dtorch.init_device_mesh("cpu", 2)
    ref, model = TorchModel(), Model(mesh)
    assert list(model.state_dict()) == list(ref.state_dict()) == [
        "scales.0", "scales.1", "table.w",
    ]  # fmt: skip
    model.load_state_dict(ref.state_dict())
    for key, value in ref.state_dict().items():
        assert torch.equal(model.state_dict()[key].to_torch(), value)


#: (dtorch layer, torch layer, arguments, input rank).
_PADS: list[tuple[type, type, tuple[Any, ...], int]] = [
    (nn.ZeroPad1d, torch.nn.ZeroPad1d, (2,), 3),
    (nn.ZeroPad2d, torch.nn.ZeroPad2d, ((1, 2, 0, 3),), 4),
    (nn.ConstantPad1d, torch.nn.ConstantPad1d, ((1, 0), 3.5), 3),
    (nn.ConstantPad2d, torch.nn.ConstantPad2d, (1, -2.0), 4),
    (nn.ReflectionPad1d, torch.nn.ReflectionPad1d, ((2, 1),), 3),
    (nn.ReflectionPad2d, torch.nn.ReflectionPad2d, (2,), 4),
    (nn.ReplicationPad1d, torch.nn.ReplicationPad1d, (3,), 3),
    (nn.ReplicationPad2d, torch.nn.ReplicationPad2d, ((0, 1, 2, 0),), 4),
    (nn.CircularPad1d, torch.nn.CircularPad1d, ((1, 2),), 3),
    (nn.CircularPad2d, torch.nn.CircularPad2d, (1,), 4),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mesh_spec", MESHES, ids=_mesh_id)
def test_pad_layers_match_torch(mesh_spec: Any, dtype: torch.dtype, graph: dtorch.Graph) -> None:
    mesh, batch = _mesh(mesh_spec, graph)
    gen = torch.Generator().manual_seed(4)
    for ours, theirs, args, rank in _PADS:
        layer, ref = ours(*args, device_mesh=mesh, dtype=dtype), theirs(*args)
        assert repr(layer) == repr(ref) and layer.padding == ref.padding
        assert getattr(layer, "value", None) == getattr(ref, "value", None)
        x = torch.randn((5, 3, 4, 5)[-rank:], generator=gen, dtype=dtype)
        out = layer(dtorch.from_torch(x, device_mesh=mesh, placements=batch))
        assert out.placements == batch and out.dtype == dtype
        assert torch.equal(out.to_torch(), ref(x)), repr(layer)
        unbatched = layer(dtorch.from_torch(x[0], device_mesh=mesh))
        assert torch.equal(unbatched.to_torch(), ref(x[0])), repr(layer)


def test_pad_layers_placements(graph: dtorch.Graph) -> None:
    """A channel shard stays, a padded dim may not be sharded (pad's refusal); Partial is
    kept by the copying modes and a zero fill, refused under a nonzero constant fill."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.randn(2, 4, 5, 6)
    xd = dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(1), Shard(0)])
    out = nn.ReflectionPad2d(1)(xd)
    assert out.placements == [Shard(1), Shard(0)]
    assert torch.equal(out.to_torch(), torch.nn.ReflectionPad2d(1)(x))
    split = dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(3), R])
    with pytest.raises(PlacementError, match=r"^pad: got \(S\(3\), R\) .*dim 3 .*is sharded"):
        nn.ZeroPad2d(1)(split)
    partial = dtorch.from_torch(x, device_mesh=mesh, placements=[P, R])
    for layer in (nn.ZeroPad2d(1), nn.ReplicationPad2d(2), nn.CircularPad2d(1)):
        assert layer(partial).placements == [P, R]
    with pytest.raises(PlacementError, match=r"^pad: got \(P, R\).*nonzero constant fill"):
        nn.ConstantPad1d(1, 2.0)(partial)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mesh_spec", MESHES, ids=_mesh_id)
def test_unflatten_glu_identity_match_torch(
    mesh_spec: Any, dtype: torch.dtype, graph: dtorch.Graph
) -> None:
    mesh, batch = _mesh(mesh_spec, graph)
    x = torch.randn(5, 12, 4, generator=torch.Generator().manual_seed(6), dtype=dtype)
    xd = dtorch.from_torch(x, device_mesh=mesh, placements=batch)
    pairs = [
        (nn.Unflatten(1, (3, 4), device_mesh=mesh), torch.nn.Unflatten(1, (3, 4))),
        (nn.Unflatten(-1, [2, -1]), torch.nn.Unflatten(-1, [2, -1])),
        (nn.GLU(dtype=dtype), torch.nn.GLU()),
        (nn.GLU(1), torch.nn.GLU(1)),
        (nn.Identity(3, unused=True), torch.nn.Identity(3, unused=True)),
    ]
    for layer, ref in pairs:
        assert repr(layer) == repr(ref)
        out = layer(xd)
        assert out.placements == batch and out.dtype == dtype
        torch.testing.assert_close(out.to_torch(), ref(x), msg=repr(layer))


def test_unflatten_glu_arguments(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))
    x = torch.randn(3, 8)
    xd = dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(1)])
    out = nn.Unflatten(1, (2, 4))(xd)  # a shard of the split dim: of its first part
    assert out.placements == [Shard(1)]
    assert torch.equal(out.to_torch(), x.unflatten(1, (2, 4)))
    for args in ((1, 4), (1, (2.0, 4))):
        with pytest.raises(TypeError) as theirs:
            torch.nn.Unflatten(*args)
        with pytest.raises(TypeError, match=f"^{re.escape(str(theirs.value))}$"):
            nn.Unflatten(*args)
    with pytest.raises(TypeError, match=r"^Unflatten: a named dim"):
        nn.Unflatten("features", (("a", 2), ("b", 4)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Halving dimension must be even"):
        nn.GLU(0)(xd)
    with pytest.raises(TypeError, match=r"GLU\.__init__"):
        nn.GLU(1, 2)  # type: ignore[call-arg]
    with pytest.raises(dtorch.MeshError, match="ZeroPad2d: give device_mesh or device"):
        nn.ZeroPad2d(1, device="cpu", device_mesh=mesh)
