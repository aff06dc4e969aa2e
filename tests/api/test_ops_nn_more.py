"""The composites of ``dtorch.api.ops.nn_more``, ``nn_more_losses`` and ``conv_transpose``
(``pixel_shuffle``, ``pixel_unshuffle``, ``prelu``, ``instance_norm``, ``dropout1d/2d/3d``,
``conv_transpose1d/2d``, ``unfold``, ``fold``, ``adaptive_max_pool1d/2d``,
``pairwise_distance`` and the losses) through
``dtorch.nn.functional`` against torch on the full tensors: float32, float64 (and int64
where torch takes it), even and uneven shards, a seeded sample of layouts (Partial among
them) on 1-D, 2-D and 3-D meshes; a refused layout must name the function called, its
placements and what it accepts. The channel dropouts match torch bit for bit. torch's
refusals of bad arguments are refused at the call, as exceptions of torch's classes."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import PlacementError
from tests.api.ops_harness import S0, S1, S2, P, R, place, run_api

pytestmark = pytest.mark.timeout(120)

MESHES = ((2,), (3,), (2, 2), (2, 1, 2))
_G = torch.Generator().manual_seed(11)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(11)


def _rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=_G).to(dtype)
    return torch.randint(-5, 6, shape, generator=_G).to(dtype)


def _signs(*shape: int) -> torch.Tensor:
    return torch.where(torch.rand(shape, generator=_G) > 0.5, 1.0, -1.0)


def _run(
    graph: Any,
    name: str,
    fn: Callable[..., Any],
    fulls: list[torch.Tensor],
    mesh_shape: tuple[int, ...],
    *,
    exact: bool = False,
    limit: int = 10,
    must: tuple[Any, ...] = (),
) -> None:
    """``fn`` of dtorch (DF) against ``fn`` of torch (F) on a seeded sample of layouts; the
    all-Replicate layout and ``must`` (one placement per input, on every mesh dim) are
    always tried, and must be accepted."""
    want = fn(F, *fulls)
    wants = list(want) if isinstance(want, tuple) else [want]
    n = 2 * limit if len(mesh_shape) == 1 else limit
    accepted = run_api(graph, name, lambda *t: fn(DF, *t), fulls, mesh_shape, wants, table=None,
                       exact=exact, limit=n)  # fmt: skip
    assert accepted, f"{name}: no layout accepted on {mesh_shape}"
    if must:
        combo = tuple(tuple([p] * len(mesh_shape)) for p in must)
        run_api(graph, name, lambda *t: fn(DF, *t), fulls, mesh_shape, wants, table=None,
                exact=exact, combos=[combo])  # fmt: skip
        mesh = dtorch.init_device_mesh("cpu", mesh_shape)
        fn(DF, *(place(t, mesh, c, graph) for t, c in zip(fulls, combo, strict=True)))


# --- pixel shuffles, prelu, instance_norm -------------------------------------------------------
@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_pixel_shuffles(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph: Any) -> None:
    x = _rand(4, 8, 3, 2, dtype=dtype)
    _run(graph, "pixel_shuffle", lambda f, t: f.pixel_shuffle(t, 2), [x], mesh_shape,
         exact=True, must=(S0,))  # fmt: skip
    y = _rand(2, 3, 2, 4, 6, dtype=dtype)  # two leading dims
    _run(graph, "pixel_unshuffle", lambda f, t: f.pixel_unshuffle(t, 2), [y], mesh_shape,
         exact=True, must=(S1,))  # fmt: skip


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_prelu(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph: Any) -> None:
    x, w = _rand(5, 3, 4, dtype=dtype), torch.rand(3, generator=_G).to(dtype)
    _run(graph, "prelu", lambda f, a, b: f.prelu(a, b), [x, w], mesh_shape, exact=True,
         must=(S0, R))  # fmt: skip
    one = torch.tensor([0.3], dtype=dtype)
    _run(graph, "prelu", lambda f, a, b: f.prelu(a, b), [x[0, 0], one], mesh_shape, exact=True)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_instance_norm(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph: Any) -> None:
    x, w, b = _rand(5, 3, 4, 3, dtype=dtype), _rand(3, dtype=dtype), _rand(3, dtype=dtype)
    _run(graph, "instance_norm", lambda f, a, c, d: f.instance_norm(a, weight=c, bias=d),
         [x, w, b], mesh_shape, must=(S0, R, R))  # fmt: skip
    rm, rv = _rand(3, dtype=dtype), torch.rand(3, generator=_G).to(dtype) + 0.5
    _run(graph, "instance_norm", lambda f, a, m, v: f.instance_norm(a, m, v, use_input_stats=False),
         [x[:, :, 0], rm, rv], mesh_shape, must=(S1, R, R))  # fmt: skip


@pytest.mark.parametrize("layout", [[S0], [S2], [R]])
def test_instance_norm_updates_running_stats(layout: list[Any], graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    x, rm, rv = _rand(4, 3, 5), _rand(3), torch.rand(3, generator=_G) + 1
    m, v = place(rm, mesh, [R], graph), place(rv, mesh, [R], graph)
    got = DF.instance_norm(place(x, mesh, layout, graph), m, v, momentum=0.3)
    want = F.instance_norm(x, rm, rv, momentum=0.3)
    torch.testing.assert_close(got.to_torch(), want)
    torch.testing.assert_close(m.to_torch(), rm)
    torch.testing.assert_close(v.to_torch(), rv)
    assert got.placements == layout


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_adaptive_max_pools(dtype: torch.dtype, mesh_shape: tuple[int, ...], graph: Any) -> None:
    x = _rand(4, 3, 7, 5, dtype=dtype)
    _run(graph, "adaptive_max_pool2d",
         lambda f, t: f.adaptive_max_pool2d(t, (3, None), return_indices=True), [x], mesh_shape,
         exact=True, must=(S1,))  # fmt: skip
    _run(graph, "adaptive_max_pool2d", lambda f, t: f.adaptive_max_pool2d(t, 2), [x[0]],
         mesh_shape, exact=True)  # fmt: skip
    _run(graph, "adaptive_max_pool1d",
         lambda f, t: f.adaptive_max_pool1d(t, 3, return_indices=True), [x[:, :, 0]], mesh_shape,
         exact=True, must=(S0,))  # fmt: skip


# --- channel dropouts -----------------------------------------------------------------------------
_DROPOUTS = [
    ("dropout1d", (3, 4, 5)),
    ("dropout1d", (4, 5)),
    ("dropout2d", (3, 4, 2, 2)),
    ("dropout3d", (2, 3, 2, 1, 2)),
    ("dropout3d", (3, 2, 1, 2)),
]


@pytest.mark.parametrize(("name", "shape"), _DROPOUTS)
@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2)])
def test_channel_dropouts_match_torch_bit_for_bit(
    name: str, shape: tuple[int, ...], mesh_shape: tuple[int, ...], graph: Any
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x = _rand(*shape, dtype=torch.float64)
    for layout in ([S0] * len(mesh_shape), [S1] * len(mesh_shape), [R] * len(mesh_shape)):
        t = place(x, mesh, layout, graph)
        torch.manual_seed(5)
        got = getattr(DF, name)(t, 0.4)
        after = torch.rand(2)  # the generator advanced as torch's
        torch.manual_seed(5)
        want = getattr(F, name)(x, 0.4)
        assert torch.equal(got.to_torch(), want), (name, layout)
        assert torch.equal(after, torch.rand(2)) and got.placements == layout


def test_channel_dropout_modes(graph: Any) -> None:
    x = dtorch.from_torch(torch.ones(2, 3, 4))
    assert DF.dropout1d(x, 0.5, training=False) is x and DF.dropout1d(x, 0.0) is x
    assert DF.dropout1d(x, 1.0).to_torch().eq(0).all()
    torch.manual_seed(2)
    y = dtorch.from_torch(torch.ones(2, 3, 4))
    assert DF.dropout1d(y, 0.5, inplace=True) is y
    torch.manual_seed(2)
    assert torch.equal(y.to_torch(), F.dropout1d(torch.ones(2, 3, 4), 0.5))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        DF.dropout2d(x, 0.5)
    assert any("dropout2d: Received a 3D input" in str(w.message) for w in seen)


# --- transposed convolutions ----------------------------------------------------------------------
_CONV_T = [
    {},
    {"stride": 2},
    {"stride": (2, 3), "padding": (1, 2), "output_padding": (1, 0)},
    {"stride": 2, "padding": 3, "dilation": 2, "output_padding": 1},
    {"groups": 2, "stride": 3, "padding": 1},
]


@pytest.mark.parametrize("kw", _CONV_T, ids=[str(k) for k in _CONV_T])
@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2)])
def test_conv_transpose(kw: dict[str, Any], mesh_shape: tuple[int, ...], graph: Any) -> None:
    groups = kw.get("groups", 1)
    x, w, b = _rand(3, 4, 3, 4), _rand(4, 3, 3, 2), _rand(3 * groups)
    _run(graph, "conv_transpose2d", lambda f, *t: f.conv_transpose2d(*t, **kw), [x, w, b],
         mesh_shape, limit=4, must=(S0, R, R))  # fmt: skip
    kw1 = {k: v[1] if isinstance(v, tuple) else v for k, v in kw.items()}
    _run(graph, "conv_transpose1d", lambda f, *t: f.conv_transpose1d(*t, **kw1),
         [x[:, :, 0], w[:, :, 0]], mesh_shape, limit=4, must=(S0, R))  # fmt: skip


def test_conv_transpose_float64_unbatched(graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, w = _rand(4, 5, 5, dtype=torch.float64), _rand(4, 2, 2, 3, dtype=torch.float64)
    got = DF.conv_transpose2d(place(x, mesh, [R], graph), place(w, mesh, [R], graph), stride=2)
    torch.testing.assert_close(got.to_torch(), F.conv_transpose2d(x, w, stride=2))


_FOLDS = [
    {"kernel_size": 2},
    {"kernel_size": (2, 3), "stride": 2, "padding": 1, "dilation": (2, 1)},
    {"kernel_size": 3, "stride": (1, 2), "padding": (0, 2)},
]


@pytest.mark.parametrize("kw", _FOLDS, ids=[str(k) for k in _FOLDS])
@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 1, 2)])
def test_unfold_fold(kw: dict[str, Any], mesh_shape: tuple[int, ...], graph: Any) -> None:
    x = _rand(3, 4, 7, 6, dtype=torch.float64)
    even = all(4 % n == 0 for n in mesh_shape)  # 4 channels: shards of whole channels
    _run(graph, "unfold", lambda f, t: f.unfold(t, **kw), [x], mesh_shape, exact=True, limit=4,
         must=(S1 if even else S0,))  # fmt: skip
    cols = F.unfold(x, **kw)
    _run(graph, "fold", lambda f, t: f.fold(t, (7, 6), **kw), [cols], mesh_shape, limit=4,
         must=(S0,))  # fmt: skip
    bits = torch.rand(4, 5, 6, generator=_G) > 0.5  # unbatched, bool: exact
    _run(graph, "unfold", lambda f, t: f.unfold(t, **kw), [bits], mesh_shape, exact=True, limit=3)


# --- losses ---------------------------------------------------------------------------------------
def _inputs(*kinds: str) -> list[torch.Tensor]:
    """(5, 3) float64 operands: ``x`` normal, ``pos`` positive, ``sign`` +-1, ``bit`` 0/1;
    ``sign1`` a (5,) one of +-1."""
    make = {
        "x": lambda: _rand(5, 3, dtype=torch.float64),
        "pos": lambda: torch.rand((5, 3), generator=_G, dtype=torch.float64) + 0.1,
        "sign": lambda: _signs(5, 3).double(),
        "bit": lambda: (_signs(5, 3).double() + 1) / 2,
        "sign1": lambda: _signs(5).double(),
    }
    return [make[k]() for k in kinds]


#: name, fn(F or DF, *operands, reduction), the operands' kinds (see ``_inputs``).
_LOSSES: list[tuple[str, Callable[..., Any], tuple[str, ...]]] = [
    ("pairwise_distance", lambda f, a, b, r: f.pairwise_distance(a, b, 3.0, keepdim=True),
     ("x", "x")),
    ("cosine_embedding_loss",
     lambda f, a, b, t, r: f.cosine_embedding_loss(a, b, t, margin=0.1, reduction=r),
     ("x", "x", "sign1")),
    ("margin_ranking_loss",
     lambda f, a, b, t, r: f.margin_ranking_loss(a, b, t, margin=0.2, reduction=r),
     ("x", "x", "sign")),
    ("triplet_margin_loss",
     lambda f, a, b, c, r: f.triplet_margin_loss(a, b, c, swap=True, reduction=r),
     ("x", "x", "x")),
    ("poisson_nll_loss", lambda f, a, b, r: f.poisson_nll_loss(a, b, reduction=r),
     ("x", "pos")),
    ("poisson_nll_loss",
     lambda f, a, b, r: f.poisson_nll_loss(a, 3 * b, False, True, reduction=r),
     ("pos", "pos")),
    ("gaussian_nll_loss",
     lambda f, a, b, v, r: f.gaussian_nll_loss(a, b, v, full=True, reduction=r),
     ("x", "x", "pos")),
    ("hinge_embedding_loss", lambda f, a, t, r: f.hinge_embedding_loss(a, t, reduction=r),
     ("x", "sign")),
    ("soft_margin_loss", lambda f, a, t, r: f.soft_margin_loss(a, t, reduction=r),
     ("x", "sign")),
    ("multilabel_soft_margin_loss",
     lambda f, a, t, w, r: f.multilabel_soft_margin_loss(a, t, w, reduction=r),
     ("x", "bit", "pos")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "fn", "kinds"), _LOSSES, ids=[f"{c[0]}{i}" for i, c in enumerate(_LOSSES)]
)
@pytest.mark.parametrize("mesh_shape", MESHES)
def test_losses(
    name: str, fn: Callable[..., Any], kinds: tuple[str, ...], mesh_shape: tuple[int, ...],
    graph: Any,
) -> None:  # fmt: skip
    fulls = _inputs(*kinds)
    reduction = ("none", "mean", "sum")[len(mesh_shape) % 3]
    _run(graph, name, lambda f, *x: fn(f, *x, reduction), fulls, mesh_shape, limit=6,
         must=(S0,) * len(fulls))  # fmt: skip
    if len(mesh_shape) == 1:  # float32 and every reduction, on one layout
        mesh = dtorch.init_device_mesh("cpu", mesh_shape)
        singles = [t.float() for t in fulls]
        for r in ("none", "mean", "sum"):
            got = fn(DF, *(place(x, mesh, [S1 if x.ndim > 1 else R], graph) for x in singles), r)
            want = fn(F, *singles, r)
            assert got.dtype == want.dtype
            torch.testing.assert_close(got.to_torch(), want)


def test_losses_legacy_flags_and_1d_forms(graph: Any) -> None:
    a, b, t = _rand(4), _rand(4), _signs(4)
    da, db, dt = (dtorch.from_torch(v) for v in (a, b, t))
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        got = DF.soft_margin_loss(da, dt, size_average=False)
    torch.testing.assert_close(got.to_torch(), F.soft_margin_loss(a, t, reduction="sum"))
    got = DF.cosine_embedding_loss(da, db, dtorch.tensor(-1.0), margin=-0.5)
    torch.testing.assert_close(got.to_torch(), F.cosine_embedding_loss(a, b, torch.tensor(-1.0),
                                                                      margin=-0.5))  # fmt: skip
    got = DF.gaussian_nll_loss(da, db, 0.5)  # a float var
    torch.testing.assert_close(got.to_torch(), F.gaussian_nll_loss(a, b, 0.5))
    m, v = _rand(3, 4), torch.rand(3, generator=_G)  # a homoscedastic var, one dim short
    got = DF.gaussian_nll_loss(dtorch.from_torch(m), dtorch.from_torch(m * 2), dtorch.from_torch(v))
    torch.testing.assert_close(got.to_torch(), F.gaussian_nll_loss(m, m * 2, v))
    got = DF.margin_ranking_loss(da, b, t)  # torch operands beside the input
    torch.testing.assert_close(got.to_torch(), F.margin_ranking_loss(a, b, t))


@pytest.mark.parametrize("layout", [[S0], [R]], ids=["S0", "R"])
def test_gaussian_nll_loss_refuses_a_negative_var_tensor(layout: list[Any], graph: Any) -> None:
    """torch checks a tensor ``var``'s values at the call, before its shape and the
    reduction; so does dtorch (it waits for one bool). A var of zeros is clamped at eps."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, t, v = _rand(4, 3), _rand(4, 3), torch.rand(4, 3, generator=_G) + 0.1
    v[3, 1] = -0.5
    calls = [  # (var, keywords)
        (v, {}), (v, {"full": True, "reduction": "none"}), (v, {"eps": 0.1, "reduction": "sum"}),
        (v, {"reduction": "avg"}), (v[:, 1], {}), (torch.full((2,), -1.0), {}),
    ]  # fmt: skip
    dx, dt = place(x, mesh, layout, graph), place(t, mesh, layout, graph)
    words = r"var has negative entry/entries$"
    for var, kw in calls:
        with pytest.raises(ValueError, match=rf"^{words}"):
            F.gaussian_nll_loss(x, t, var, **kw)
        with pytest.raises(ValueError, match=rf"^gaussian_nll_loss: {words}"):
            DF.gaussian_nll_loss(dx, dt, place(var.contiguous(), mesh, layout, graph), **kw)
    zeros = torch.zeros(4, 3)
    got = DF.gaussian_nll_loss(dx, dt, place(zeros, mesh, layout, graph), eps=0.1, full=True)
    torch.testing.assert_close(got.to_torch(), F.gaussian_nll_loss(x, t, zeros, eps=0.1, full=True))


# --- refusals -------------------------------------------------------------------------------------
def _x(*shape: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, dtorch.Tensor]:
    full = _rand(*shape, dtype=dtype)
    return full, dtorch.from_torch(full)


_X4, _D4 = _x(2, 4, 3, 3)
_X2, _D2 = _x(3, 4)
_W3, _DW3 = _x(3)
_CT, _DCT = _x(4, 2, 3, 3)

#: (label, torch call, dtorch call): torch's refusal, refused at the call by an exception of
#: torch's class.
_REFUSALS: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
    ("shuffle factor 0", lambda: F.pixel_shuffle(_X4, 0), lambda: DF.pixel_shuffle(_D4, 0)),
    ("shuffle channels", lambda: F.pixel_shuffle(_X4, 3), lambda: DF.pixel_shuffle(_D4, 3)),
    ("shuffle 2-D", lambda: F.pixel_shuffle(_X2, 2), lambda: DF.pixel_shuffle(_D2, 2)),
    ("unshuffle width", lambda: F.pixel_unshuffle(_X4, 2), lambda: DF.pixel_unshuffle(_D4, 2)),
    ("prelu count", lambda: F.prelu(_X2, _W3), lambda: DF.prelu(_D2, _DW3)),
    ("prelu dtype", lambda: F.prelu(_X2, _W3.double()[:1]),
     lambda: DF.prelu(_D2, dtorch.from_torch(_W3.double()[:1]))),
    ("prelu 2-D weight", lambda: F.prelu(_X2, _X2), lambda: DF.prelu(_D2, _D2)),
    ("instance_norm single", lambda: F.instance_norm(_X2), lambda: DF.instance_norm(_D2)),
    ("instance_norm running", lambda: F.instance_norm(_X4, use_input_stats=False),
     lambda: DF.instance_norm(_D4, use_input_stats=False)),
    ("dropout p", lambda: F.dropout2d(_X4, 1.5), lambda: DF.dropout2d(_D4, 1.5)),
    ("dropout1d dims", lambda: F.dropout1d(_X4), lambda: DF.dropout1d(_D4)),
    ("conv_t output_padding", lambda: F.conv_transpose2d(_X4, _CT, output_padding=1),
     lambda: DF.conv_transpose2d(_D4, _DCT, output_padding=1)),
    ("conv_t channels", lambda: F.conv_transpose2d(_X4[:, :3], _CT),
     lambda: DF.conv_transpose2d(dtorch.from_torch(_X4[:, :3]), _DCT)),
    ("conv_t groups", lambda: F.conv_transpose2d(_X4, _CT, groups=3),
     lambda: DF.conv_transpose2d(_D4, _DCT, groups=3)),
    ("triplet margin", lambda: F.triplet_margin_loss(_X2, _X2, _X2, margin=0),
     lambda: DF.triplet_margin_loss(_D2, _D2, _D2, margin=0)),
    ("triplet dims", lambda: F.triplet_margin_loss(_X2, _X2, _W3),
     lambda: DF.triplet_margin_loss(_D2, _D2, _DW3)),
    ("cosine dims", lambda: F.cosine_embedding_loss(_X4, _X4, _W3),
     lambda: DF.cosine_embedding_loss(_D4, _D4, _DW3)),
    ("ranking dims", lambda: F.margin_ranking_loss(_X2, _X2, _W3),
     lambda: DF.margin_ranking_loss(_D2, _D2, _DW3)),
    ("gaussian var size", lambda: F.gaussian_nll_loss(_X2, _X2, torch.ones(4)),
     lambda: DF.gaussian_nll_loss(_D2, _D2, dtorch.ones(4))),
    ("gaussian negative", lambda: F.gaussian_nll_loss(_X2, _X2, -1.0),
     lambda: DF.gaussian_nll_loss(_D2, _D2, -1.0)),
    ("reduction", lambda: F.soft_margin_loss(_X2, _X2, reduction="avg"),
     lambda: DF.soft_margin_loss(_D2, _D2, reduction="avg")),
    ("adaptive_max_pool2d dims", lambda: F.adaptive_max_pool2d(_X2, 2),
     lambda: DF.adaptive_max_pool2d(_D2, 2)),
    ("adaptive_max_pool1d dims", lambda: F.adaptive_max_pool1d(_X4, 2),
     lambda: DF.adaptive_max_pool1d(_D4, 2)),
    ("adaptive_max_pool2d long", lambda: F.adaptive_max_pool2d(_X4.long(), 2),
     lambda: DF.adaptive_max_pool2d(dtorch.from_torch(_X4.long()), 2)),
    ("unfold dims", lambda: F.unfold(_X2, 2), lambda: DF.unfold(_D2, 2)),
    ("unfold long", lambda: F.unfold(_X4.long(), 2),
     lambda: DF.unfold(dtorch.from_torch(_X4.long()), 2)),
    ("unfold blocks", lambda: F.unfold(_X4, 4), lambda: DF.unfold(_D4, 4)),
    ("fold divisible", lambda: F.fold(_X4[0], 3, 3), lambda: DF.fold(_D4[0], 3, 3)),
    ("fold blocks", lambda: F.fold(_X4[0], 3, 2), lambda: DF.fold(_D4[0], 3, 2)),
    ("hinge integer", lambda: F.hinge_embedding_loss(_X2.long(), _X2),
     lambda: DF.hinge_embedding_loss(dtorch.from_torch(_X2.long()), _D2)),
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
    cases = [
        (lambda t: DF.pixel_unshuffle(t, 2), [S2]),  # a sharded spatial dim, split
        (lambda t: DF.prelu(t, dtorch.ones(1, device_mesh=mesh)), [P]),
        (lambda t: DF.conv_transpose2d(t, dtorch.ones(4, 2, 2, 2, device_mesh=mesh)), [S2]),
        (lambda t: DF.soft_margin_loss(t, dtorch.ones(2, 4, 6, 4, device_mesh=mesh)), [P]),
        (lambda t: DF.adaptive_max_pool2d(t, 2), [S2]),
    ]
    for fn, layout in cases:
        t = place(x, mesh, layout, graph)
        with pytest.raises(PlacementError) as error:
            fn(t)
        text = str(error.value)
        assert "accepted" in text and text.split(":", maxsplit=1)[0] in {
            "pixel_unshuffle", "prelu", "conv_transpose2d", "soft_margin_loss",
            "adaptive_max_pool2d",
        }, text  # fmt: skip
        assert "S(2)" in text or "P" in text


def test_review_findings_match_torch(graph: dtorch.Graph) -> None:
    """A differential review's findings: an integer hinge_embedding_loss stays an integer
    (the margin cast to its dtype) unless averaged; instance_norm refuses a running mean
    without a running var, and integer inputs, as torch does."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    d = lambda t: place(t, mesh, [R], graph)  # noqa: E731
    cases = (([1, 2], [1, -1], 1.0, "none"), ([1, 2], [1, -1], 1.0, "sum"),
             ([-3, 0], [-1, 1], -1.5, "none"))  # fmt: skip
    for x, y, margin, reduction in cases:
        tx, ty = torch.tensor(x), torch.tensor(y)
        want = F.hinge_embedding_loss(tx, ty, margin=margin, reduction=reduction)
        got = DF.hinge_embedding_loss(d(tx), d(ty), margin=margin, reduction=reduction)
        assert got.dtype == want.dtype and torch.equal(got.to_torch(), want)
    x = _rand(2, 3, 4)
    with pytest.raises(ValueError, match="both be None or neither"):
        DF.instance_norm(d(x), running_mean=d(torch.zeros(3)))
    ints = d(torch.ones(2, 3, 4, dtype=torch.int64))
    with pytest.raises(NotImplementedError, match="not implemented"):
        DF.instance_norm(ints, d(torch.zeros(3)), d(torch.ones(3)), use_input_stats=False)


def test_transposed_convolutions_and_fold_are_torch_s_own(graph: dtorch.Graph) -> None:
    """torch's kernels on each shard: an infinity in the weight or the input stays where
    torch's puts it (a convolution of a zero-stuffed input spread NaN next to it), and an
    empty output is torch's too (a differential review's findings)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    d = lambda t, p=R: place(t, mesh, [p], graph)  # noqa: E731
    w, x = torch.tensor([[[float("inf"), 1.0]]]), torch.ones(2, 1, 3)
    for stride in (1, 2):
        want = F.conv_transpose1d(x, w, stride=stride)
        got = DF.conv_transpose1d(d(x, S0), d(w), stride=stride).to_torch()
        assert torch.equal(got, want)
    blocks = torch.zeros(2, 4, 1)
    blocks[0, 0, 0] = float("inf")
    assert torch.equal(DF.fold(d(blocks, S0), (2, 2), 2).to_torch(), F.fold(blocks, (2, 2), 2))
    ones, kernel = torch.ones(2, 2, 4), torch.ones(2, 2, 1)
    got = DF.conv_transpose1d(d(ones), d(kernel), padding=2).to_torch()
    assert got.shape == F.conv_transpose1d(ones, kernel, padding=2).shape == (2, 2, 0)
    x4, w4 = _rand(2, 4, 3, 3), _rand(4, 3, 2, 2)
    for px, pw, out in ((S1, S0, P), (R, S1, S1), (S0, R, S0)):
        got = DF.conv_transpose2d(d(x4, px), d(w4, pw), stride=2)
        assert got.placements == [out]
        torch.testing.assert_close(got.to_torch(), F.conv_transpose2d(x4, w4, stride=2))
