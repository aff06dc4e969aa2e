"""The 1-D and 3-D layers against torch.nn: Conv1d (strides, padding numbers/same/valid, every
padding_mode, dilation, groups, no bias), MaxPool1d, AvgPool1d, AdaptiveAvgPool1d (and their
functional forms), BatchNorm1d on (N, C) and (N, C, L) and BatchNorm3d (train twice, then eval;
running statistics and ``num_batches_tracked`` compared; ``momentum=None``, untracked, not
affine). Same weights (a torch layer's ``state_dict`` loaded), float32 and float64, the batch
sharded on dp (even and uneven) on 1-D, 2-D and 3-D meshes and unsharded, thread and process
mode; channel shards as conv2d takes them; the refusals (a sharded length, a Partial into max
pooling, bad ranks and arguments) name the operator, what it got and what it accepts."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dtorch
import dtorch.nn.functional as F
from dtorch import Partial, Replicate, Shard, nn
from dtorch.errors import PlacementError
from tests.nn.layer_harness import DP_MESHES, batch_on_dp

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths"),
]

R, P = Replicate(), Partial()
DTYPES = [torch.float32, torch.float64]
#: Every mesh of the layer tests, and None: unsharded on the default mesh.
MESHES = [*DP_MESHES, None]

_CONV_CONFIGS: list[dict[str, Any]] = [
    {"in_channels": 3, "out_channels": 4, "kernel_size": 3},
    {"in_channels": 4, "out_channels": 6, "kernel_size": (3,), "stride": 2, "padding": (1,),
     "dilation": 2, "groups": 2},
    {"in_channels": 3, "out_channels": 5, "kernel_size": 2, "padding": "same", "bias": False,
     "padding_mode": "reflect"},
    {"in_channels": 4, "out_channels": 4, "kernel_size": 3, "padding": 1, "groups": 4,
     "padding_mode": "circular"},
    {"in_channels": 2, "out_channels": 3, "kernel_size": 3, "padding": "valid",
     "padding_mode": "replicate"},
    {"in_channels": 2, "out_channels": 3, "kernel_size": 3, "padding": 2, "dilation": 2,
     "padding_mode": "replicate"},
    {"in_channels": 2, "out_channels": 2, "kernel_size": 4, "padding": "same", "dilation": 3},
]  # fmt: skip


def _mesh(spec: tuple[tuple[int, ...], tuple[str, ...]] | None, graph: dtorch.Graph) -> Any:
    # (mesh, batch placements): a dp mesh with the batch on dp, or the default mesh unsharded
    if spec is None:
        mesh = graph.default_device_mesh
        return mesh, [R] * mesh.ndim
    mesh = dtorch.init_device_mesh("cpu", spec[0], mesh_dim_names=spec[1])
    return mesh, batch_on_dp(mesh)


def _mesh_id(value: Any) -> str:
    return "default" if value is None else "x".join(map(str, value))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mesh_spec", MESHES, ids=_mesh_id)
def test_conv1d_matches_torch(mesh_spec: Any, dtype: torch.dtype, graph: dtorch.Graph) -> None:
    mesh, batch = _mesh(mesh_spec, graph)
    for config in _CONV_CONFIGS:
        ref = torch.nn.Conv1d(**config, dtype=dtype)
        layer = nn.Conv1d(**config, device_mesh=mesh, dtype=dtype)
        assert layer.load_state_dict(ref.state_dict()) == ([], [])
        assert repr(layer) == repr(ref) and layer.weight.dtype == dtype
        assert layer.weight.placements == [R] * mesh.ndim
        x = torch.randn(5, config["in_channels"], 9, dtype=dtype)
        y = layer(dtorch.from_torch(x, device_mesh=mesh, placements=batch))
        assert y.placements == batch and y.dtype == dtype
        torch.testing.assert_close(
            y.to_torch(), ref(x).detach(), msg=lambda m, c=config: f"{c}: {m}"
        )


def test_conv1d_attributes_and_unbatched_input(graph: dtorch.Graph) -> None:
    """torch's attributes (one-element tuples, ``output_padding``, the reversed padding), an
    unbatched (C, L) input, ``device=`` and the default mesh."""
    for config in _CONV_CONFIGS:
        ref, layer = torch.nn.Conv1d(**config), nn.Conv1d(**config)
        for name in ("transposed", "output_padding", "kernel_size", "stride", "padding",
                     "dilation", "groups", "padding_mode"):  # fmt: skip
            ours, theirs = getattr(layer, name), getattr(ref, name)
            assert (type(ours), ours) == (type(theirs), theirs), (config, name)
        if config.get("padding_mode", "zeros") != "zeros":
            assert list(layer._reversed_padding_repeated_twice) == list(
                ref._reversed_padding_repeated_twice
            )
        assert layer.weight.device_mesh == graph.default_device_mesh
        layer.load_state_dict(ref.state_dict())
        x = torch.randn(config["in_channels"], 8)
        torch.testing.assert_close(layer(dtorch.from_torch(x)).to_torch(), ref(x).detach())
    assert nn.Conv1d(1, 2, 3, device="cpu:1").weight.device_mesh == dtorch.DeviceMesh("cpu", [1])


def test_conv1d_initialisation_is_torchs(graph: dtorch.Graph) -> None:
    for args in ((3, 8, 3), (4, 8, 5, 1, 0, 1, 2)):
        torch.manual_seed(5)
        ref = torch.nn.Conv1d(*args)
        torch.manual_seed(5)
        layer = nn.Conv1d(*args, device_mesh=dtorch.init_device_mesh("cpu", 2))
        torch.testing.assert_close(layer.weight.to_torch(), ref.weight.detach())
        torch.testing.assert_close(layer.bias.to_torch(), ref.bias.detach())


def test_conv1d_channel_shards(graph: dtorch.Graph) -> None:
    """conv2d's channel layouts: in-channels with the weight's give Partial, the weight's
    out-channels give output channels, a depthwise conv keeps channel shards; a Partial
    input gives Partial."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    gen = torch.Generator().manual_seed(3)
    x, w, b = torch.randn(4, 6, 7, generator=gen), torch.randn(5, 6, 3, generator=gen), None
    cases = [  # x placements, weight placements, groups, output placements
        ([Shard(0), Shard(1)], [R, Shard(1)], 1, [Shard(0), P]),
        ([Shard(0), R], [R, Shard(0)], 1, [Shard(0), Shard(1)]),
        ([P, R], [R, R], 1, [P, R]),
    ]
    for xp, wp, groups, want in cases:
        xd = dtorch.from_torch(x, device_mesh=mesh, placements=xp)
        out = F.conv1d(xd, dtorch.from_torch(w, device_mesh=mesh, placements=wp), b, 1, 1,
                       groups=groups)  # fmt: skip
        assert out.placements == want
        torch.testing.assert_close(out.to_torch(), torch.nn.functional.conv1d(x, w, b, 1, 1))
    depthwise = torch.randn(6, 1, 3, generator=gen)
    xd = dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(0), Shard(1)])
    wd = dtorch.from_torch(depthwise, device_mesh=mesh, placements=[R, Shard(0)])
    out = F.conv1d(xd, wd, stride=2, groups=6)
    assert out.placements == [Shard(0), Shard(1)]
    want_out = torch.nn.functional.conv1d(x, depthwise, stride=2, groups=6)
    torch.testing.assert_close(out.to_torch(), want_out)


def test_conv1d_refusals(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,), mesh_dim_names=("dp",))
    x = dtorch.from_torch(torch.randn(2, 3, 8), device_mesh=mesh, placements=[Shard(2)])
    w = dtorch.ones(4, 3, 3, device_mesh=mesh)
    with pytest.raises(
        PlacementError,
        match=r"^conv1d: got \(S\(2\),\) x \(R,\) on mesh \(2,\); dim 2 \(the length of the "
        r"input\) is sharded on mesh dim 0, .*accepted per mesh dimension: Replicate, Partial",
    ):
        F.conv1d(x, w)
    kernel_split = dtorch.from_torch(torch.ones(4, 3, 4), device_mesh=mesh, placements=[Shard(2)])
    with pytest.raises(PlacementError, match=r"^conv1d: .*\(the length of the kernel\)"):
        F.conv1d(dtorch.ones(2, 3, 8, device_mesh=mesh), kernel_split)
    with pytest.raises(ValueError, match=r"^conv1d: needs a \(C, L\) or \(N, C, L\) input"):
        F.conv1d(dtorch.ones(1, 3, 4, 4, device_mesh=mesh), w)
    with pytest.raises(ValueError, match=r"^conv1d: needs an \(out_channels, in_channels"):
        F.conv1d(dtorch.ones(1, 3, 4, device_mesh=mesh), dtorch.ones(4, 3, 3, 3, device_mesh=mesh))
    with pytest.raises(ValueError, match=r"^conv1d: padding must be 'same', 'valid' or an int"):
        F.conv1d(dtorch.ones(1, 3, 4, device_mesh=mesh), w, padding="full")
    with pytest.raises(ValueError, match=r"^conv1d: stride must be an int or a sequence of one"):
        F.conv1d(dtorch.ones(1, 3, 4, device_mesh=mesh), w, stride=(1, 1))
    with pytest.raises(ValueError, match=r"^conv1d: .*not supported for strided convolutions"):
        F.conv1d(dtorch.ones(1, 3, 4, device_mesh=mesh), w, stride=2, padding="same")
    with pytest.raises(ValueError, match="Conv1d: groups must be a positive integer"):
        nn.Conv1d(2, 2, 3, groups=0)
    with pytest.raises(ValueError, match=r"Conv1d: in_channels \(3\) and out_channels \(4\)"):
        nn.Conv1d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="Conv1d: padding='same' is not supported for strided"):
        nn.Conv1d(2, 2, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="Conv1d: padding_mode must be one of"):
        nn.Conv1d(2, 2, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="Conv1d: kernel_size must be an int or a sequence"):
        nn.Conv1d(2, 2, (3, 3))
    with pytest.raises(TypeError, match="Conv1d: dtype must be a floating-point"):
        nn.Conv1d(2, 2, 3, dtype=torch.int64)


#: (dtorch layer, torch layer, constructor arguments).
_POOLS: list[tuple[type, type, tuple[Any, ...], dict[str, Any]]] = [
    (nn.MaxPool1d, torch.nn.MaxPool1d, (3,), {"stride": 2, "padding": 1, "ceil_mode": True}),
    (nn.MaxPool1d, torch.nn.MaxPool1d, (2,), {"dilation": 2, "return_indices": True}),
    (nn.AvgPool1d, torch.nn.AvgPool1d, (3, 2, 1), {"count_include_pad": False}),
    (nn.AvgPool1d, torch.nn.AvgPool1d, ((2,),), {"ceil_mode": True}),
    (nn.AdaptiveAvgPool1d, torch.nn.AdaptiveAvgPool1d, (3,), {}),
    (nn.AdaptiveAvgPool1d, torch.nn.AdaptiveAvgPool1d, ((4,),), {}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mesh_spec", MESHES, ids=_mesh_id)
def test_pool1d_layers_match_torch(mesh_spec: Any, dtype: torch.dtype, graph: dtorch.Graph) -> None:
    mesh, batch = _mesh(mesh_spec, graph)
    x = torch.randn(5, 3, 11, dtype=dtype)
    xd = dtorch.from_torch(x, device_mesh=mesh, placements=batch)
    for ours, theirs, args, kwargs in _POOLS:
        layer, ref = ours(*args, **kwargs, device_mesh=mesh, dtype=dtype), theirs(*args, **kwargs)
        assert repr(layer) == repr(ref)
        for name in ("kernel_size", "stride", "padding", "output_size"):
            assert getattr(layer, name, None) == getattr(ref, name, None), (repr(ref), name)
        got, expected = layer(xd), ref(x)
        got = list(got) if isinstance(got, tuple) else [got]
        expected = list(expected) if isinstance(expected, tuple) else [expected]
        for g, e in zip(got, expected, strict=True):
            assert g.placements == batch, repr(layer)
            assert torch.equal(g.to_torch(), e), repr(layer)
        unbatched = layer(dtorch.from_torch(x[0], device_mesh=mesh))
        first = unbatched[0] if isinstance(unbatched, tuple) else unbatched
        want = ref(x[0])
        assert torch.equal(first.to_torch(), want[0] if isinstance(want, tuple) else want)


def test_pool1d_channel_shards_and_partial(graph: dtorch.Graph) -> None:
    """Channel shards stay; the average pools keep a Partial input, max pooling refuses it
    naming max_pool1d; a sharded length is refused by every one of them."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = torch.randn(4, 5, 9, dtype=torch.float64)
    xd = dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(1), Shard(0)])
    out, idx = F.max_pool1d(xd, 3, 2, 1, return_indices=True)
    ref_out, ref_idx = torch.nn.functional.max_pool1d(x, 3, 2, 1, return_indices=True)
    assert out.placements == idx.placements == [Shard(1), Shard(0)]
    assert torch.equal(out.to_torch(), ref_out) and torch.equal(idx.to_torch(), ref_idx)
    partial = dtorch.from_torch(x, device_mesh=mesh, placements=[P, R])
    for got, want in (
        (F.avg_pool1d(partial, 2), torch.nn.functional.avg_pool1d(x, 2)),
        (F.adaptive_avg_pool1d(partial, 4), torch.nn.functional.adaptive_avg_pool1d(x, 4)),
    ):
        assert got.placements == [P, R]
        torch.testing.assert_close(got.to_torch(), want)
    with pytest.raises(PlacementError, match=r"^max_pool1d: got \(P, R\) .*not linear"):
        nn.MaxPool1d(2)(partial)
    split = dtorch.from_torch(x, device_mesh=mesh, placements=[R, Shard(2)])
    for call in (F.max_pool1d, F.avg_pool1d, F.adaptive_avg_pool1d):
        with pytest.raises(
            PlacementError,
            match=rf"^{call.__name__}: got \(R, S\(2\)\) on mesh \(2, 3\); dim 2 \(the length "
            r"of the input\) is sharded on mesh dim 1.*; accepted per mesh dimension: Replicate",
        ):
            call(split, 2)
    with pytest.raises(ValueError, match=r"^avg_pool1d: needs a \(C, L\) or \(N, C, L\) input"):
        F.avg_pool1d(dtorch.ones(2, 2, 2, 2), 2)
    with pytest.raises(ValueError, match=r"^max_pool1d: kernel_size must be an int or a seq"):
        F.max_pool1d(dtorch.ones(2, 2, 2), (2, 2))


def test_max_pool1d_of_integers_as_torch(graph: dtorch.Graph) -> None:
    """torch's max_pool1d takes floating-point inputs only (its indices form, and avg_pool1d,
    take integers): an int64, int32 or bool input is refused at the call as torch does."""
    x = torch.arange(8).reshape(1, 2, 4)
    for dtype in (torch.int64, torch.int32, torch.bool):
        with pytest.raises(NotImplementedError, match="not implemented for"):
            torch.nn.functional.max_pool1d(x.to(dtype), 2)
        with pytest.raises(NotImplementedError, match=r"^max_pool1d: .*not implemented for"):
            F.max_pool1d(dtorch.from_torch(x.to(dtype)), 2)
        with pytest.raises(NotImplementedError, match=r"^max_pool1d: "):
            nn.MaxPool1d(2)(dtorch.from_torch(x.to(dtype)))
    out, idx = F.max_pool1d(dtorch.from_torch(x), 2, return_indices=True)
    want, want_idx = torch.nn.functional.max_pool1d(x, 2, return_indices=True)
    assert torch.equal(out.to_torch(), want) and torch.equal(idx.to_torch(), want_idx)
    assert torch.equal(F.avg_pool1d(dtorch.from_torch(x), 2).to_torch(),
                       torch.nn.functional.avg_pool1d(x, 2))  # fmt: skip


def test_1d_refusals_show_the_shapes_given(graph: dtorch.Graph) -> None:
    """A shape refusal of a 1-D operator shows the (N, C, L) shapes the user gave (not the
    height-one images computed), with torch's own 1-D words where torch refuses."""
    cases: list[tuple[str, Any, Any]] = [
        ("max_pool1d", lambda f, o: f.max_pool1d(o(1, 2, 4), 5), "[1, 2, 4]"),
        ("max_pool1d", lambda f, o: f.max_pool1d(o(2, 4), 2, padding=2), "[2, 4]"),
        ("avg_pool1d", lambda f, o: f.avg_pool1d(o(1, 2, 4), 5), "[1, 2, 4]"),
        ("conv1d", lambda f, o: f.conv1d(o(1, 2, 4), o(3, 2, 5)), "[1, 2, 4] x [3, 2, 5]"),
        ("conv1d", lambda f, o: f.conv1d(o(1, 2, 4), o(3, 3, 2)), "[1, 2, 4] x [3, 3, 2]"),
    ]
    for name, call, shapes in cases:
        with pytest.raises(RuntimeError) as theirs:
            call(torch.nn.functional, torch.ones)
        with pytest.raises(RuntimeError) as ours:
            call(F, dtorch.ones)
        text = str(ours.value)
        assert text.startswith(f"{name}: ") and shapes in text, text
        assert ", 1, " not in text, text  # no height-one shape
        if "torch refuses" in text:
            assert text.endswith(str(theirs.value)), (text, str(theirs.value))


def _randomised(layer: torch.nn.Module) -> torch.nn.Module:
    """``layer`` with random parameters and running statistics (not its initial ones)."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, t in [*layer.named_parameters(), *layer.named_buffers()]:
            if t.is_floating_point():
                noise = torch.rand(t.shape, generator=gen, dtype=t.dtype)
                t.copy_(noise + 0.5 if "var" in name else noise * 2 - 1)
    return layer


_BN_CONFIGS: list[dict[str, Any]] = [
    {},
    {"momentum": None, "bias": False},
    {"affine": False, "track_running_stats": False},
    {"eps": 1e-3, "momentum": 0.3, "affine": False},
]
_BN_CASES = [  # dtorch layer, torch layer, input shape
    (nn.BatchNorm1d, torch.nn.BatchNorm1d, (6, 4)),
    (nn.BatchNorm1d, torch.nn.BatchNorm1d, (5, 4, 3)),
    (nn.BatchNorm3d, torch.nn.BatchNorm3d, (5, 4, 2, 3, 2)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mesh_spec", MESHES, ids=_mesh_id)
@pytest.mark.parametrize(("ours", "theirs", "x_shape"), _BN_CASES,
                         ids=["bn1d-NC", "bn1d-NCL", "bn3d"])  # fmt: skip
def test_batch_norm_matches_torch(  # type: ignore[no-untyped-def]
    ours, theirs, x_shape, mesh_spec, dtype, graph
) -> None:
    """Train mode twice (running buffers updated as torch's), then eval mode."""
    mesh, batch = _mesh(mesh_spec, graph)
    for config in _BN_CONFIGS:
        ref = _randomised(theirs(4, **config, dtype=dtype))
        layer = ours(4, **config, device_mesh=mesh, dtype=dtype)
        assert repr(layer) == repr(ref)
        assert list(layer.state_dict()) == list(ref.state_dict())
        assert str(layer.load_state_dict(ref.state_dict())) == "<All keys matched successfully>"
        gen = torch.Generator().manual_seed(1)
        for mode in ("train", "train", "eval"):
            layer.train(mode == "train")
            ref.train(mode == "train")
            x = torch.randn(x_shape, generator=gen, dtype=dtype) * 2 + 1
            out = layer(dtorch.from_torch(x, device_mesh=mesh, placements=batch))
            assert out.placements == batch and out.dtype == dtype
            torch.testing.assert_close(out.to_torch(), ref(x), msg=f"{config} {mode}")
        for key, value in ref.state_dict().items():
            got = layer.state_dict()[key]
            assert got.placements == [R] * mesh.ndim
            torch.testing.assert_close(got.to_torch(), value, msg=f"{config} {key}")


def test_batch_norm_initial_state_and_ranks(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    for ours, theirs in ((nn.BatchNorm1d, torch.nn.BatchNorm1d),
                         (nn.BatchNorm3d, torch.nn.BatchNorm3d)):  # fmt: skip
        layer, ref = ours(3, device_mesh=mesh, dtype=torch.float64), theirs(3, dtype=torch.float64)
        for key, value in ref.state_dict().items():
            got = layer.state_dict()[key]
            assert got.placements == [R, R] and got.device_mesh == mesh
            assert torch.equal(got.to_torch(), value), key
        _ = layer.running_var.fill_(4.0)
        layer.reset_parameters()
        assert torch.equal(layer.running_var.to_torch(), ref.running_var)
    assert nn.BatchNorm1d(2, device="cpu:1").weight.device_mesh == dtorch.DeviceMesh("cpu", [1])
    with pytest.raises(ValueError, match=r"^BatchNorm1d: expected 2D or 3D input \(got 4D"):
        nn.BatchNorm1d(3)(dtorch.ones(2, 3, 4, 4))
    with pytest.raises(ValueError, match=r"^BatchNorm3d: expected 5D input \(got 4D input\)"):
        nn.BatchNorm3d(3)(dtorch.ones(2, 3, 4, 4))
    with pytest.raises(ValueError, match=r"^BatchNorm2d: expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(dtorch.ones(2, 3, 4))
    with pytest.raises(ValueError, match="expected more than 1 value per channel"):
        nn.BatchNorm1d(3)(dtorch.ones(1, 3))


def test_batch_norm1d_on_channel_shards(graph: dtorch.Graph) -> None:
    """(N, C, L) with the channels on tp and the batch on dp: train twice, then eval."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3), mesh_dim_names=("dp", "tp"))
    ref = _randomised(torch.nn.BatchNorm1d(5))
    layer = nn.BatchNorm1d(5, device_mesh=mesh)
    layer.load_state_dict(ref.state_dict())
    gen = torch.Generator().manual_seed(2)
    for mode in ("train", "train", "eval"):
        layer.train(mode == "train")
        ref.train(mode == "train")
        x = torch.randn((5, 5, 4), generator=gen)
        out = layer(dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(0), Shard(1)]))
        assert out.placements == [Shard(0), Shard(1)]
        torch.testing.assert_close(out.to_torch(), ref(x), msg=mode)
    for key, value in ref.state_dict().items():
        torch.testing.assert_close(layer.state_dict()[key].to_torch(), value, msg=key)


class _TorchNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv1d(3, 8, 3, padding=1), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
            torch.nn.MaxPool1d(2), torch.nn.Conv1d(8, 8, 3, padding="same", groups=8),
            torch.nn.AvgPool1d(2, ceil_mode=True), torch.nn.AdaptiveAvgPool1d(1),
            torch.nn.Flatten(), torch.nn.Linear(8, 4),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class _Net(nn.Module):
    def __init__(self, mesh: dtorch.DeviceMesh) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(3, 8, 3, padding=1, device_mesh=mesh), nn.BatchNorm1d(8, device_mesh=mesh),
            nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(8, 8, 3, padding="same", groups=8, device_mesh=mesh),
            nn.AvgPool1d(2, ceil_mode=True), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
            nn.Linear(8, 4, device_mesh=mesh),
        )  # fmt: skip

    def forward(self, x: dtorch.Tensor) -> dtorch.Tensor:
        return self.body(x)


@pytest.mark.parametrize("shape", [(2,), (3,)])
def test_small_1d_cnn_matches_torch(shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=("dp",))
    ref, net = _TorchNet(), _Net(mesh)
    assert net.load_state_dict(ref.state_dict()) == ([], [])
    for mode in (True, False):
        ref.train(mode)
        net.train(mode)
        x = torch.randn(5, 3, 16)
        y = net(dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(0)]))
        assert y.placements == [Shard(0)]
        torch.testing.assert_close(y.to_torch(), ref(x).detach())
