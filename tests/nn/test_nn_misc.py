"""The miscellaneous functional forms (``dtorch.api.ops.nn_misc``, ``nn_misc_pool``,
``nn_misc_losses``) and layers (``dtorch.nn.modules.misc_layers``, ``misc_layers_loss``)
against torch on the full tensors: a seeded sample of layouts on 1-D, 2-D and 3-D meshes,
even and uneven shards, several dtypes; the random ones (rrelu in training, the alpha
dropouts) bit for bit after the same seed; the layers' parameters drawn as torch's, their
reprs and state; torch's refusals of bad arguments, and placement refusals naming the
operator. Thread and process mode (the ``graph`` fixture)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn as tnn

import dtorch
import dtorch.nn.functional as DF
from dtorch import nn
from dtorch.errors import PlacementError
from tests.api.ops_harness import S0, S1, S2, R, place, run_api
from tests.nn.layer_harness import batch_on_dp

pytestmark = pytest.mark.timeout(120)

MESHES = ((2,), (3,), (2, 2), (2, 1, 2))
_G = torch.Generator().manual_seed(5)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(5)


def _rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=_G).to(dtype)
    return torch.randint(-5, 6, shape, generator=_G).to(dtype)


def _run(
    graph: Any, name: str, fn: Callable[..., Any], fulls: list[torch.Tensor],
    mesh_shape: tuple[int, ...], *, exact: bool = False, must: tuple[Any, ...] = (),
) -> None:  # fmt: skip
    """``fn`` of dtorch (DF) against ``fn`` of torch (F) on a seeded sample of layouts (a
    refusal must be a PlacementError naming ``name``); ``must`` (one placement per input, on
    every mesh dim) must be accepted."""
    want = fn(F, *fulls)
    wants = list(want) if isinstance(want, tuple) else [want]
    limit = 8 if len(mesh_shape) == 1 else 4
    accepted = run_api(graph, name, lambda *t: fn(DF, *t), fulls, mesh_shape, wants,
                       table=None, exact=exact, limit=limit)  # fmt: skip
    assert accepted, f"{name}: no layout accepted on {mesh_shape}"
    if must:
        combo = tuple(tuple([p] * len(mesh_shape)) for p in must)
        taken = run_api(graph, name, lambda *t: fn(DF, *t), fulls, mesh_shape, wants,
                        table=None, exact=exact, combos=[combo])  # fmt: skip
        assert taken == [combo], f"{name}: {combo} on {mesh_shape} was refused"


def _pool_pair(x: torch.Tensor, one_d: bool) -> list[torch.Tensor]:
    pool = F.max_pool1d if one_d else F.max_pool2d
    out, idx = pool(x, 2, return_indices=True)
    return [out, idx]


_X4 = (4, 3, 4, 6)
#: label, operator name (refusals name it), fn(F or DF, *tensors), the inputs, exact, must.
_CASES: list[tuple[str, str, Callable[..., Any], Callable[[], list[torch.Tensor]], bool, tuple]] = [
    ("channel_shuffle", "channel_shuffle", lambda f, t: f.channel_shuffle(t, 3),
     lambda: [_rand(4, 6, 3)], True, (S0,)),
    ("channel_shuffle long", "channel_shuffle", lambda f, t: f.channel_shuffle(t, 2),
     lambda: [_rand(3, 4, 2, 3, dtype=torch.int64)], True, (S2,)),
    ("bilinear", "bilinear", lambda f, a, b, w, c: f.bilinear(a, b, w, c),
     lambda: [_rand(5, 3), _rand(5, 4), _rand(2, 3, 4), _rand(2)], False, (S0, S0, R, R)),
    ("bilinear 3-D f64", "bilinear", lambda f, a, b, w: f.bilinear(a, b, w),
     lambda: [_rand(3, 2, 3, dtype=torch.float64), _rand(3, 2, 2, dtype=torch.float64),
              _rand(4, 3, 2, dtype=torch.float64)], False, (S1, S1, R)),
    ("pdist", "pdist", lambda f, t: f.pdist(t), lambda: [_rand(5, 3, dtype=torch.float64)],
     False, (S0,)),
    ("pdist p=1.5", "pdist", lambda f, t: f.pdist(t, 1.5), lambda: [_rand(4, 3)], False, (S1,)),
    ("lp_pool2d", "lp_pool2d", lambda f, t: f.lp_pool2d(t, 2, 2), lambda: [_rand(*_X4)],
     False, (S1,)),
    ("lp_pool2d inf", "lp_pool2d", lambda f, t: f.lp_pool2d(t, float("inf"), (2, 3), 1),
     lambda: [_rand(*_X4, dtype=torch.float64)], True, (S0,)),
    ("lp_pool1d", "lp_pool1d", lambda f, t: f.lp_pool1d(t, 3, 3, 2),
     lambda: [_rand(4, 3, 7).abs()], False, (S0,)),
    # an int norm_type keeps an integer input integral: torch's integer average truncates
    ("lp_pool2d int", "lp_pool2d", lambda f, t: f.lp_pool2d(t, 1, 2),
     lambda: [_rand(*_X4, dtype=torch.int64)], False, (S0,)),
    ("lp_pool1d int", "lp_pool1d", lambda f, t: f.lp_pool1d(t, 2, 2),
     lambda: [_rand(4, 3, 6, dtype=torch.int64)], False, (S0,)),
    ("local_response_norm", "local_response_norm", lambda f, t: f.local_response_norm(t, 3),
     lambda: [_rand(4, 5, 3, 2)], False, (S0,)),
    ("local_response_norm 3-D", "local_response_norm",
     lambda f, t: f.local_response_norm(t, 2, 0.1, 0.5, 2.0),
     lambda: [_rand(5, 4, 3, dtype=torch.float64)], False, (S0,)),
    ("max_unpool2d", "max_unpool2d", lambda f, x, i: f.max_unpool2d(x, i, 2, output_size=[5, 6]),
     lambda: _pool_pair(_rand(*_X4), False), True, (S1, S1)),
    ("lp_pool3d", "lp_pool3d", lambda f, t: f.lp_pool3d(t, 2, (2, 1, 2)),
     lambda: [_rand(2, 3, 4, 3, 4)], False, (S1,)),
    ("lp_pool3d -inf", "lp_pool3d", lambda f, t: f.lp_pool3d(t, -float("inf"), 2),
     lambda: [_rand(2, 3, 4, 4, 4, dtype=torch.float64)], True, (S0,)),
    ("max_unpool3d", "max_unpool3d", lambda f, x, i: f.max_unpool3d(x, i, 2),
     lambda: list(F.max_pool3d(_rand(2, 3, 4, 4, 6), 2, return_indices=True)), True, (S1, S1)),
    ("max_unpool1d", "max_unpool1d", lambda f, x, i: f.max_unpool1d(x, i, 2),
     lambda: _pool_pair(_rand(4, 3, 6, dtype=torch.float64), True), True, (S0, S0)),
    ("max_pool2d_with_indices", "max_pool2d_with_indices",
     lambda f, t: f.max_pool2d_with_indices(t, 2), lambda: [_rand(*_X4)], True, (S0,)),
    ("max_pool3d_with_indices", "max_pool3d_with_indices",
     lambda f, t: f.max_pool3d_with_indices(t, 2), lambda: [_rand(2, 2, 4, 4, 4)], True, (S0,)),
    ("adaptive_max_pool3d_with_indices", "adaptive_max_pool3d_with_indices",
     lambda f, t: f.adaptive_max_pool3d_with_indices(t, 2), lambda: [_rand(2, 2, 4, 4, 4)], True,
     (S0,)),
    ("adaptive_max_pool1d_with_indices", "adaptive_max_pool1d_with_indices",
     lambda f, t: f.adaptive_max_pool1d_with_indices(t, 2), lambda: [_rand(4, 3, 5)], True,
     (S1,)),
    ("rrelu eval", "rrelu", lambda f, t: f.rrelu(t, 0.1, 0.3), lambda: [_rand(4, 5)], True, ()),
    ("multi_margin_loss", "multi_margin_loss",
     lambda f, x, y, w: f.multi_margin_loss(x, y, p=2, margin=0.7, weight=w),
     lambda: [_rand(6, 4, dtype=torch.float64), torch.randint(0, 4, (6,), generator=_G),
              torch.rand(4, generator=_G, dtype=torch.float64)], False, (S0, S0, R)),
    ("multi_margin_loss none", "multi_margin_loss",
     lambda f, x, y: f.multi_margin_loss(x, y, reduction="none"),
     lambda: [_rand(5, 3), torch.randint(0, 3, (5,), generator=_G)], False, (S0, S0)),
    ("multilabel_margin_loss", "multilabel_margin_loss",
     lambda f, x, y: f.multilabel_margin_loss(x, y, reduction="sum"),
     lambda: [_rand(5, 4, dtype=torch.float64),
              torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 2, 1, 0], [2, 2, -1, 0],
                            [1, -1, 0, 0]])], False, (S0, S0)),
    # a batch-sharded input with a Replicate target, as cross_entropy takes it
    ("multi_margin_loss R target", "multi_margin_loss",
     lambda f, x, y: f.multi_margin_loss(x, y),
     lambda: [_rand(5, 3), torch.randint(0, 3, (5,), generator=_G)], False, (S0, R)),
    ("multilabel_margin_loss R target", "multilabel_margin_loss",
     lambda f, x, y: f.multilabel_margin_loss(x, y, reduction="none"),
     lambda: [_rand(5, 4), torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 2, 1, 0],
                                         [2, 2, -1, 0], [1, -1, 0, 0]])], False, (S0, R)),
    ("triplet_margin_with_distance_loss", "triplet_margin_with_distance_loss",
     lambda f, a, p, n: f.triplet_margin_with_distance_loss(a, p, n, swap=True, margin=0.5),
     lambda: [_rand(5, 4), _rand(5, 4), _rand(5, 4)], False, (S0, S0, S0)),
]  # fmt: skip


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize(("label", "name", "fn", "make", "exact", "must"), _CASES,
                         ids=[c[0] for c in _CASES])  # fmt: skip
def test_functional_matches_torch(
    label: str, name: str, fn: Callable[..., Any], make: Callable[[], list[torch.Tensor]],
    exact: bool, must: tuple, mesh_shape: tuple[int, ...], graph: Any,
) -> None:  # fmt: skip
    _run(graph, name, fn, make(), mesh_shape, exact=exact, must=must)


def test_triplet_with_a_custom_distance(graph: Any) -> None:
    a, p, n = _rand(5, 4), _rand(5, 4), _rand(5, 4)
    mesh = dtorch.init_device_mesh("cpu", 2)
    da, dp, dn = (place(t, mesh, [S0], graph) for t in (a, p, n))
    got = DF.triplet_margin_with_distance_loss(
        da, dp, dn, distance_function=lambda u, v: 1 - DF.cosine_similarity(u, v),
        reduction="none")  # fmt: skip
    want = F.triplet_margin_with_distance_loss(
        a, p, n, distance_function=lambda u, v: 1 - F.cosine_similarity(u, v), reduction="none"
    )
    torch.testing.assert_close(got.to_torch(), want)


_INPLACE: list[tuple[str, tuple[Any, ...]]] = [
    ("relu_", ()), ("elu_", (0.5,)), ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.5)),
    ("selu_", ()), ("celu_", (2.0,)), ("threshold_", (0.1, -3.0)), ("rrelu_", (0.2, 0.4)),
]  # fmt: skip


@pytest.mark.parametrize(("name", "args"), _INPLACE, ids=[c[0] for c in _INPLACE])
def test_inplace_forms_write_their_input(name: str, args: tuple, graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = _rand(5, 3, dtype=torch.float64)
    t = place(x, mesh, [S0, S1], graph)
    want = getattr(F, name)(x.clone(), *args)
    assert getattr(DF, name)(t, *args) is t
    assert torch.equal(t.to_torch(), want) and t.placements == [S0, S1]


@pytest.mark.parametrize("layout", [[S0, R], [S1, S0], [R, R]])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_random_forms_match_torch_bit_for_bit(layout: list, dtype: torch.dtype, graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = _rand(5, 4, 3, dtype=dtype)
    calls = [
        lambda f, t: f.alpha_dropout(t, 0.3, True),
        lambda f, t: f.feature_alpha_dropout(t, 0.6, True),
        lambda f, t: f.rrelu(t, 0.1, 0.5, True),
    ]
    for call in calls:  # the same values, and the generator left where torch's leaves it
        torch.manual_seed(7)
        got, after = call(DF, place(x, mesh, layout, graph)), torch.rand(3)
        torch.manual_seed(7)
        want = call(F, x)
        assert torch.equal(got.to_torch(), want) and torch.equal(after, torch.rand(3))
        assert got.placements == layout
    d = place(x, mesh, layout, graph)
    for fn in (DF.alpha_dropout, DF.feature_alpha_dropout):
        assert fn(d, 0.5) is d  # not training: the input itself, as torch's
    assert torch.equal(DF.alpha_dropout(d, 1.0, True).to_torch(), F.alpha_dropout(x, 1.0, True))


def test_upsample_forms_warn_as_torch(graph: Any) -> None:
    x = _rand(2, 3, 4, 5)
    d = dtorch.from_torch(x, device_mesh=dtorch.init_device_mesh("cpu", 2), placements=[S0])
    calls = [
        lambda f, t: f.upsample(t, scale_factor=2, mode="bilinear"),
        lambda f, t: f.upsample_nearest(t, size=(5, 7)),
        lambda f, t: f.upsample_bilinear(t, scale_factor=1.5),
    ]
    for call in calls:
        with pytest.warns(UserWarning, match="is deprecated") as ours:
            got = call(DF, d)
        with warnings.catch_warnings(record=True) as theirs:
            warnings.simplefilter("always")
            want = call(F, x)
        assert str(ours[0].message) == str(theirs[0].message)
        assert ours[0].filename == __file__
        torch.testing.assert_close(got.to_torch(), want)
        assert got.placements == [S0]


# --- layers -------------------------------------------------------------------------------------
def _layer_run(ref: Any, ours: Any, inputs: list[torch.Tensor], mesh: Any, graph: Any) -> None:
    assert repr(ours) == repr(ref)
    on = [dtorch.from_torch(x, device_mesh=mesh, placements=batch_on_dp(mesh), graph=graph)
          for x in inputs]  # fmt: skip
    got = ours(*on)
    torch.testing.assert_close(got.to_torch(), ref(*inputs), atol=1e-5, rtol=1e-5)


_LAYERS: list[tuple[str, Callable[[Any], Any], Callable[[], list[torch.Tensor]]]] = [
    ("CosineSimilarity", lambda m: m.CosineSimilarity(dim=1, eps=1e-6),
     lambda: [_rand(4, 3), _rand(4, 3)]),
    ("Upsample", lambda m: m.Upsample(scale_factor=(2, 1.5), mode="bilinear"),
     lambda: [_rand(4, 2, 3, 4)]),
    ("Upsample size", lambda m: m.Upsample(size=5), lambda: [_rand(4, 2, 3)]),
    ("UpsamplingNearest2d", lambda m: m.UpsamplingNearest2d(scale_factor=2),
     lambda: [_rand(4, 2, 3, 4)]),
    ("UpsamplingBilinear2d", lambda m: m.UpsamplingBilinear2d(size=(4, 5)),
     lambda: [_rand(4, 2, 3, 4)]),
    ("Softmax2d", lambda m: m.Softmax2d(), lambda: [_rand(4, 3, 2, 2)]),
    ("ChannelShuffle", lambda m: m.ChannelShuffle(2), lambda: [_rand(4, 4, 3)]),
    ("LocalResponseNorm", lambda m: m.LocalResponseNorm(3, k=2.0), lambda: [_rand(4, 5, 2, 3)]),
    ("LPPool1d", lambda m: m.LPPool1d(2, 3), lambda: [_rand(4, 2, 7)]),
    ("LPPool2d", lambda m: m.LPPool2d(1.5, (2, 3), 1), lambda: [_rand(4, 2, 4, 4).abs()]),
    ("RReLU eval", lambda m: m.RReLU(0.2, 0.4).eval(), lambda: [_rand(4, 5)]),
    ("AlphaDropout eval", lambda m: m.AlphaDropout(0.3).eval(), lambda: [_rand(4, 5)]),
    ("FeatureAlphaDropout", lambda m: m.FeatureAlphaDropout(0.0), lambda: [_rand(4, 5, 2)]),
    ("MultiLabelMarginLoss", lambda m: m.MultiLabelMarginLoss(reduction="none"),
     lambda: [_rand(4, 3), torch.tensor([[2, -1, 0], [0, 1, 2], [1, 0, -1], [-1, 0, 0]])]),
    ("TripletMarginWithDistanceLoss", lambda m: m.TripletMarginWithDistanceLoss(swap=True),
     lambda: [_rand(4, 3), _rand(4, 3), _rand(4, 3)]),
]  # fmt: skip


@pytest.mark.parametrize(("label", "make", "inputs"), _LAYERS, ids=[c[0] for c in _LAYERS])
@pytest.mark.parametrize("mesh_shape", [(3,), (2, 2)])
def test_layers_match_torch(
    label: str, make: Callable[[Any], Any], inputs: Callable[[], list[torch.Tensor]],
    mesh_shape: tuple[int, ...], graph: Any,
) -> None:  # fmt: skip
    names = ("dp",) if len(mesh_shape) == 1 else ("dp", "tp")
    mesh = dtorch.init_device_mesh("cpu", mesh_shape, mesh_dim_names=names)
    _layer_run(make(tnn), make(nn), inputs(), mesh, graph)


def test_unpool_and_margin_layers(graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    x = _rand(4, 3, 6)
    out, idx = F.max_pool1d(x, 2, return_indices=True)
    _layer_run(tnn.MaxUnpool1d(2), nn.MaxUnpool1d(2), [out, idx], mesh, graph)
    x2 = _rand(4, 3, 4, 4)
    out2, idx2 = F.max_pool2d(x2, 2, 1, return_indices=True)
    _layer_run(tnn.MaxUnpool2d(2, 1), nn.MaxUnpool2d(2, 1), [out2, idx2], mesh, graph)
    out3, idx3 = F.max_pool3d(_rand(2, 3, 4, 4, 4), 2, return_indices=True)
    _layer_run(tnn.MaxUnpool3d(2), nn.MaxUnpool3d(2), [out3, idx3], mesh, graph)
    _layer_run(tnn.LPPool3d(2, 2), nn.LPPool3d(2, 2), [_rand(2, 3, 4, 4, 4)], mesh, graph)
    w = torch.rand(3, generator=_G)
    ref = tnn.MultiMarginLoss(p=2, weight=w, reduction="sum")
    ours = nn.MultiMarginLoss(p=2, weight=w, reduction="sum", device_mesh=mesh)
    _layer_run(ref, ours, [_rand(4, 3), torch.randint(0, 3, (4,), generator=_G)], mesh, graph)
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["weight"]


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 1, 2)])
def test_bilinear_layer_draws_as_torch(mesh_shape: tuple[int, ...], graph: Any) -> None:
    names = ("dp",) if len(mesh_shape) == 1 else ("tp", "pp", "dp")
    mesh = dtorch.init_device_mesh("cpu", mesh_shape, mesh_dim_names=names)
    for bias, dtype in ((True, torch.float32), (False, torch.float64)):
        torch.manual_seed(1)
        ref = tnn.Bilinear(3, 2, 4, bias=bias, dtype=dtype)
        torch.manual_seed(1)
        ours = nn.Bilinear(3, 2, 4, bias=bias, dtype=dtype, device_mesh=mesh)
        for key, value in ref.state_dict().items():
            assert torch.equal(ours.state_dict()[key].to_torch(), value), key
        _layer_run(ref, ours, [_rand(5, 3).to(dtype), _rand(5, 2).to(dtype)], mesh, graph)


def test_rrelu_and_alpha_dropout_layers_in_training(graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    x = _rand(4, 3, 2)
    for ref, ours in ((tnn.RReLU(0.1, 0.6), nn.RReLU(0.1, 0.6)),
                      (tnn.AlphaDropout(0.4), nn.AlphaDropout(0.4)),
                      (tnn.FeatureAlphaDropout(0.4), nn.FeatureAlphaDropout(0.4))):  # fmt: skip
        assert repr(ours) == repr(ref)
        torch.manual_seed(2)
        got = ours(dtorch.from_torch(x, device_mesh=mesh, placements=batch_on_dp(mesh)))
        torch.manual_seed(2)
        assert torch.equal(got.to_torch(), ref(x))
    assert repr(nn.RReLU(inplace=True)) == repr(tnn.RReLU(inplace=True))


def test_sync_batch_norm(graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    ref = tnn.SyncBatchNorm(3, momentum=0.3)
    ours = nn.SyncBatchNorm(3, momentum=0.3, device_mesh=mesh)
    assert repr(ours) == repr(ref)
    for shape in ((4, 3), (4, 3, 5), (4, 3, 2, 2, 2)):
        x = _rand(*shape)
        got = ours(dtorch.from_torch(x, device_mesh=mesh, placements=batch_on_dp(mesh)))
        torch.testing.assert_close(got.to_torch(), ref(x))
    for key, value in ref.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[key].to_torch(), value)
    ref.eval(), ours.eval()
    x = _rand(4, 3, 2)
    torch.testing.assert_close(ours(dtorch.from_torch(x, device_mesh=mesh)).to_torch(), ref(x))
    with pytest.raises(ValueError, match="expected at least 2D input"):
        ours(dtorch.ones(3, device_mesh=mesh))


def test_convert_sync_batchnorm(graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    inner = nn.Sequential(nn.BatchNorm2d(2, device_mesh=mesh), nn.ReLU())
    net = nn.Sequential(nn.Linear(2, 2, device_mesh=mesh), nn.BatchNorm1d(2, affine=False,
                        device_mesh=mesh), inner).eval()  # fmt: skip
    weight, mean = inner[0].weight, net[1].running_mean
    out = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert out is net and type(net[1]) is nn.SyncBatchNorm and type(inner[0]) is nn.SyncBatchNorm
    assert inner[0].weight is weight and net[1].running_mean is mean and net[1].weight is None
    assert not inner[0].training and isinstance(inner[1], nn.ReLU)
    single = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm1d(3))
    assert type(single) is nn.SyncBatchNorm
    ref = tnn.SyncBatchNorm.convert_sync_batchnorm(tnn.BatchNorm1d(3))
    assert repr(single) == repr(ref)


# --- refusals -------------------------------------------------------------------------------------
def _x(*shape: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, dtorch.Tensor]:
    full = _rand(*shape, dtype=dtype)
    return full, dtorch.from_torch(full)


_A, _DA = _x(2, 4, 3)
_B, _DB = _x(2, 4)
_L, _DL = _x(2, 4, 3, dtype=torch.int64)
_T = torch.tensor([0, 1])
_DT = dtorch.from_torch(_T)
_W, _DW = _x(3, 4, 4)

#: (label, torch call, dtorch call): torch's refusal, refused at the call by an exception of
#: torch's class.
_REFUSALS: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
    ("shuffle groups 0", lambda: F.channel_shuffle(_A, 0), lambda: DF.channel_shuffle(_DA, 0)),
    ("shuffle groups 3", lambda: F.channel_shuffle(_A, 3), lambda: DF.channel_shuffle(_DA, 3)),
    ("shuffle 2-D", lambda: F.channel_shuffle(_B, 2), lambda: DF.channel_shuffle(_DB, 2)),
    ("bilinear weight", lambda: F.bilinear(_B, _B, _W[:, :3]),
     lambda: DF.bilinear(_DB, _DB, dtorch.from_torch(_W[:, :3]))),
    ("bilinear dims", lambda: F.bilinear(_A, _B, _W[:, :, :3]),
     lambda: DF.bilinear(_DA, _DB, dtorch.from_torch(_W[:, :, :3]))),
    ("pdist 3-D", lambda: F.pdist(_A), lambda: DF.pdist(_DA)),
    ("pdist p", lambda: F.pdist(_B, -1), lambda: DF.pdist(_DB, -1)),
    ("pdist long", lambda: F.pdist(_L[0]), lambda: DF.pdist(_DL[0])),
    ("lrn 2-D", lambda: F.local_response_norm(_B, 2), lambda: DF.local_response_norm(_DB, 2)),
    ("alpha p", lambda: F.alpha_dropout(_A, 1.5), lambda: DF.alpha_dropout(_DA, 1.5)),
    ("feature alpha 1-D", lambda: F.feature_alpha_dropout(_T.float(), 0.5, True),
     lambda: DF.feature_alpha_dropout(dtorch.from_torch(_T.float()), 0.5, True)),
    ("rrelu bounds", lambda: F.rrelu(_A, 0.5, 0.1), lambda: DF.rrelu(_DA, 0.5, 0.1)),
    ("rrelu long", lambda: F.rrelu(_L, training=True), lambda: DF.rrelu(_DL, training=True)),
    ("margin p", lambda: F.multi_margin_loss(_B, _T, p=3),
     lambda: DF.multi_margin_loss(_DB, _DT, p=3)),
    ("margin target", lambda: F.multi_margin_loss(_B, _T[:1]),
     lambda: DF.multi_margin_loss(_DB, _DT[:1])),
    ("margin weight", lambda: F.multi_margin_loss(_B, _T, weight=torch.ones(2, 2)),
     lambda: DF.multi_margin_loss(_DB, _DT, weight=dtorch.ones(2, 2))),
    ("margin reduction", lambda: F.multi_margin_loss(_B, _T, reduction="avg"),
     lambda: DF.multi_margin_loss(_DB, _DT, reduction="avg")),
    ("multilabel shape", lambda: F.multilabel_margin_loss(_B, _T),
     lambda: DF.multilabel_margin_loss(_DB, _DT)),
    ("triplet margin", lambda: F.triplet_margin_with_distance_loss(_B, _B, _B, margin=0),
     lambda: DF.triplet_margin_with_distance_loss(_DB, _DB, _DB, margin=0)),
    ("triplet dims", lambda: F.triplet_margin_with_distance_loss(_A, _B, _B),
     lambda: DF.triplet_margin_with_distance_loss(_DA, _DB, _DB)),
    ("unpool output_size", lambda: F.max_unpool2d(_A, _L, 2, output_size=[9, 9]),
     lambda: DF.max_unpool2d(_DA, _DL, 2, output_size=[9, 9])),
    ("unpool float indices", lambda: F.max_unpool1d(_A, _A, 2),
     lambda: DF.max_unpool1d(_DA, _DA, 2)),
    ("softmax2d dims", lambda: tnn.Softmax2d()(_B), lambda: nn.Softmax2d()(_DB)),
    ("MultiMarginLoss p", lambda: tnn.MultiMarginLoss(p=3), lambda: nn.MultiMarginLoss(p=3)),
    ("TripletMarginWithDistanceLoss margin", lambda: tnn.TripletMarginWithDistanceLoss(margin=0),
     lambda: nn.TripletMarginWithDistanceLoss(margin=0)),
]  # fmt: skip


@pytest.mark.parametrize(("label", "torch_call", "call"), _REFUSALS, ids=[c[0] for c in _REFUSALS])
def test_refusals_as_torch(label: str, torch_call: Any, call: Any, graph: Any) -> None:
    with pytest.raises(Exception) as theirs:
        torch_call()
    with pytest.raises(type(theirs.value)):
        call()


def test_placement_refusals_name_the_operator(graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = _rand(2, 4, 6, 4)
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    cases = [
        ("local_response_norm", lambda t: DF.local_response_norm(t, 3), [S1]),
        ("lp_pool2d", lambda t: DF.lp_pool2d(t, 2, 2, 1), [S2]),  # windows cross shards
        ("max_unpool2d", lambda t: DF.max_unpool2d(t, place(idx, mesh, [S2], graph), 2), [S2]),
    ]
    for name, fn, layout in cases:
        t = place(out if name == "max_unpool2d" else x, mesh, layout, graph)
        with pytest.raises(PlacementError) as error:
            fn(t)
        text = str(error.value)
        assert text.startswith(f"{name}: ") and "accepted" in text and "S(" in text, text


def test_review_findings_match_torch(graph: dtorch.Graph) -> None:
    """A differential review's findings: feature alpha dropout returns a 1-D input where it
    draws nothing (torch checks the rank only when it draws); half precision is refused where
    torch's CPU kernels have none; a multilabel target below -1 fails as one of C or more."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    d = lambda t: place(t, mesh, [R], graph)  # noqa: E731
    line = torch.randn(3)
    for p, training in ((0.3, False), (0.0, True)):
        got = DF.feature_alpha_dropout(d(line), p, training).to_torch()
        assert torch.equal(got, F.feature_alpha_dropout(line, p, training))
    half = torch.randn(3, 4).bfloat16()
    refusals = (
        DF.pdist,
        lambda x: DF.multi_margin_loss(x, d(torch.tensor([0, 1, 2]))),
        lambda x: DF.multilabel_margin_loss(x, d(torch.tensor([[0, -1, 1, 2]] * 3))),
        lambda x: DF.local_response_norm(x.reshape(1, 3, 2, 2), 2),
    )
    for refused in refusals:
        with pytest.raises(NotImplementedError, match="not implemented"):
            refused(d(half))
    scores, below = torch.randn(2, 3), torch.tensor([[0, -2, 1], [1, -1, 0]])
    with pytest.raises(dtorch.KernelError, match="out of bounds"):
        DF.multilabel_margin_loss(d(scores), d(below)).item()
    targets = torch.tensor([[0, 1, -1], [2, -1, 0]])
    got = DF.multilabel_margin_loss(d(scores), d(targets)).to_torch()
    torch.testing.assert_close(got, F.multilabel_margin_loss(scores, targets))


def test_torch_s_3d_max_pools_with_indices_reach_dtorch(graph: Any) -> None:
    """torch's ``max_pool3d``/``adaptive_max_pool3d`` with ``return_indices=True`` call
    their ``*_with_indices`` functions, which had no dtorch counterpart (a TypeError)."""
    x = _rand(1, 2, 4, 4, 4)
    t = place(x, dtorch.init_device_mesh("cpu", 2), [S1], graph)
    for got, want in (
        (F.max_pool3d(t, 2, return_indices=True), F.max_pool3d(x, 2, return_indices=True)),
        (F.adaptive_max_pool3d(t, 2, return_indices=True),
         F.adaptive_max_pool3d(x, 2, return_indices=True)),
    ):  # fmt: skip
        for g, w in zip(got, want, strict=True):
            assert torch.equal(g.to_torch(), w)
