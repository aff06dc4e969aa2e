"""The 3-D operators of ``dtorch.api.ops.volumetric`` (``conv3d``, ``conv_transpose3d``,
``max_pool3d``, ``avg_pool3d``, ``adaptive_avg_pool3d``, ``adaptive_max_pool3d``) and the
layers of ``dtorch.nn.modules.volumetric``, through the public API against torch on the full
tensors: float32/float64 (and int64 where torch takes it), even and uneven shards, the layouts
of one mesh dim from a table (a seeded sample on 1-D, 2-D and 3-D meshes); torch's refusals
of bad arguments at the call and of sharded spatial dims, naming the function."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import dtorch
import dtorch.nn.functional as F
from dtorch import nn
from dtorch.errors import DTorchError, PlacementError
from dtorch.ir.placement import Shard, format_placements
from tests.api.ops_harness import S0, S1, P, R, place, run_api
from tests.nn.layer_harness import DP_MESHES, batch_on_dp

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(11)
MESHES = ((2,), (3,), (2, 2), (2, 1, 2))


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(11)


def _rand(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=_G).to(dtype)
    return torch.randint(-20, 21, shape, generator=_G).to(dtype)


def _named(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, whose placement refusals must name ``name`` and what it accepts; a composite's
    names the operands of its refusing part, so the harness is shown the inputs' too."""

    def run(*inputs: dtorch.Tensor) -> Any:
        try:
            return fn(*inputs)
        except PlacementError as error:
            text = str(error)
            assert text.startswith(f"{name}: ") and "accepted" in text, text
            given = ", ".join(format_placements(t.placements) for t in inputs)
            raise PlacementError(f"{text} (inputs {given})") from error

    return run


def _run(graph: Any, name: str, fn: Callable[..., Any], fulls: list[torch.Tensor], want: Any,
         mesh_shape: tuple[int, ...], table: Any, limit: int) -> None:  # fmt: skip
    exact = not fulls[0].dtype.is_floating_point or name.startswith("max")
    wants = list(want) if isinstance(want, tuple) else [want]
    accepted = run_api(graph, name, _named(name, fn), fulls, mesh_shape, wants, table=table,
                       exact=exact, limit=limit)  # fmt: skip
    assert accepted, f"{name}: no layout accepted on {mesh_shape}"


#: One mesh dim: (x, w) -> out of conv3d (see ``dtorch.ir.rules.conv``); spatial shards refused.
_CONV = {(R, R): R, (S0, R): S0, (R, S0): S1, (S1, S1): P, (P, R): P, (R, P): P}
#: x -> out of a pool: batch and channel shards kept; Partial only through the linear ones.
_POOL = {(R,): R, (S0,): S0, (S1,): S1}
_LINEAR_POOL = {**_POOL, (P,): P}

#: Every layout of one mesh dim on 2 devices, a seeded sample on the others (the time budget).
_LIMITS = {(2,): 49, (3,): 10}
_CONV_ARGS = [
    {},
    {"stride": 2, "padding": 1},
    {"stride": (2, 1, 3), "padding": (1, 0, 2), "dilation": (2, 1, 1)},
    {"padding": "same", "dilation": (1, 2, 1)},
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # torch's, of its own conv3d
@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("kwargs", _CONV_ARGS, ids=range(len(_CONV_ARGS)))
def test_conv3d_layouts(graph: Any, mesh_shape: tuple[int, ...], kwargs: dict) -> None:
    x, w = _rand(5, 3, 5, 4, 6), _rand(4, 3, 2, 3, 2)
    want = TF.conv3d(x, w, **kwargs)
    _run(graph, "conv3d", lambda a, b: F.conv3d(a, b, **kwargs), [x, w], want, mesh_shape,
         _CONV, limit=_LIMITS.get(mesh_shape, 5))  # fmt: skip


@pytest.mark.parametrize("mesh_shape", MESHES[:3])
def test_conv_transpose3d_layouts(graph: Any, mesh_shape: tuple[int, ...]) -> None:
    x, w = _rand(5, 3, 3, 4, 2), _rand(3, 4, 2, 3, 2)
    kwargs = {"stride": (2, 1, 3), "padding": (1, 1, 0), "output_padding": (1, 0, 2)}
    want = TF.conv_transpose3d(x, w, **kwargs)
    table = {(R, R): R, (S0, R): S0, (R, S1): S1, (S1, S0): P, (P, R): P, (R, P): P}
    _run(graph, "conv_transpose3d", lambda a, b: F.conv_transpose3d(a, b, **kwargs), [x, w],
         want, mesh_shape, table, limit=_LIMITS.get(mesh_shape, 5))  # fmt: skip


_CONV_FORMS = [
    ("bias groups", (4, 4, 3, 3, 3), (6, 2, 1, 2, 3), True, {"groups": 2, "stride": (1, 2, 1)}),
    ("unbatched", (3, 3, 4, 5), (2, 3, 2, 2, 2), True, {"padding": (0, 1, 1)}),
    ("valid", (2, 2, 3, 3, 3), (2, 2, 3, 3, 3), False, {"padding": "valid"}),
    ("depthwise same", (2, 4, 4, 3, 5), (4, 1, 3, 2, 3), True, {"groups": 4, "padding": "same"}),
]  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("label", "xs", "ws", "bias", "kwargs"), _CONV_FORMS,
                         ids=[c[0] for c in _CONV_FORMS])  # fmt: skip
def test_conv3d_forms(
    graph: Any, dtype: torch.dtype, label: str, xs: tuple, ws: tuple, bias: bool, kwargs: dict
) -> None:
    x, w = _rand(*xs, dtype=dtype), _rand(*ws, dtype=dtype)
    b = _rand(ws[0], dtype=dtype) if bias else None
    mesh = dtorch.init_device_mesh("cpu", (2,))
    # the batch sharded; an unbatched input's channels need the weight's sharded alike
    lead = [S0] if len(xs) == 5 else [R]
    parts = [place(x, mesh, lead, graph), place(w, mesh, [R], graph)]
    db = None if b is None else place(b, mesh, [R], graph)
    got = F.conv3d(parts[0], parts[1], db, **kwargs)
    torch.testing.assert_close(got.to_torch(), TF.conv3d(x, w, b, **kwargs))
    tw = _rand(xs[-4], 2, 2, 1, 3, dtype=dtype)  # the transposed conv of the same input
    got_t = F.conv_transpose3d(parts[0], place(tw, mesh, [R], graph), None, 2, 0, 1)
    torch.testing.assert_close(got_t.to_torch(), TF.conv_transpose3d(x, tw, None, 2, 0, 1))


_POOL_ARGS = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": (2, 3, 1), "stride": (1, 2, 2), "padding": (1, 1, 0), "ceil_mode": True},
]


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("kwargs", _POOL_ARGS, ids=range(len(_POOL_ARGS)))
def test_pool3d_layouts(graph: Any, mesh_shape: tuple[int, ...], kwargs: dict) -> None:
    x = _rand(5, 3, 5, 4, 6)
    limit = _LIMITS.get(mesh_shape, 4)
    dilation = {"dilation": (1, 2, 1)} if kwargs.get("padding", 0) != 1 else {}
    want = TF.max_pool3d(x, **kwargs, **dilation, return_indices=True)
    _run(graph, "max_pool3d", lambda a: F.max_pool3d(a, **kwargs, **dilation,
                                                      return_indices=True),
         [x], want, mesh_shape, _POOL, limit)  # fmt: skip
    extra = {"count_include_pad": False, "divisor_override": 3} if "padding" in kwargs else {}
    _run(graph, "avg_pool3d", lambda a: F.avg_pool3d(a, **kwargs, **extra), [x],
         TF.avg_pool3d(x, **kwargs, **extra), mesh_shape, _LINEAR_POOL, limit)  # fmt: skip


@pytest.mark.parametrize("mesh_shape", MESHES[1:3])
@pytest.mark.parametrize("size", [(2, 3, 4), (None, 1, 3)], ids=["sizes", "none"])
def test_adaptive_pool3d_layouts(graph: Any, mesh_shape: tuple[int, ...], size: tuple) -> None:
    x = _rand(5, 3, 5, 4, 7)
    _run(graph, "adaptive_max_pool3d", lambda a: F.adaptive_max_pool3d(a, size, True), [x],
         TF.adaptive_max_pool3d(x, size, True), mesh_shape, _POOL, limit=6)  # fmt: skip
    _run(graph, "adaptive_avg_pool3d", lambda a: F.adaptive_avg_pool3d(a, size), [x],
         TF.adaptive_avg_pool3d(x, size), mesh_shape, _LINEAR_POOL, limit=6)  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_pool3d_dtypes_ties_and_unbatched(graph: Any, dtype: torch.dtype) -> None:
    x = torch.randint(-3, 4, (3, 4, 5, 6), generator=_G).to(dtype)  # many ties; unbatched
    mesh = dtorch.init_device_mesh("cpu", (2,))
    dx = place(x, mesh, [S0], graph)  # an unbatched input's channels
    for kwargs in _POOL_ARGS:
        got, idx = F.max_pool3d(dx, **kwargs, return_indices=True)
        ref, ref_idx = TF.max_pool3d(x, **kwargs, return_indices=True)
        assert torch.equal(got.to_torch(), ref) and torch.equal(idx.to_torch(), ref_idx), kwargs
        for extra in ({}, {"count_include_pad": False}, {"divisor_override": 4}):
            got_avg = F.avg_pool3d(dx, **kwargs, **extra).to_torch()
            ref_avg = TF.avg_pool3d(x, **kwargs, **extra)
            assert got_avg.dtype == ref_avg.dtype
            torch.testing.assert_close(got_avg, ref_avg, rtol=1e-5, atol=1e-5)
    partial = dtorch.from_torch(x, device_mesh=mesh, placements=[P], graph=graph)
    if dtype.is_floating_point:  # linear: Partial stays Partial
        torch.testing.assert_close(F.avg_pool3d(partial, 2).to_torch(), TF.avg_pool3d(x, 2))
    else:  # an integer average truncates: not linear
        with pytest.raises(PlacementError, match=r"^avg_pool3d: .*accepted"):
            F.avg_pool3d(partial, 2)
    with pytest.raises(PlacementError, match=r"^max_pool3d: .*accepted"):
        F.max_pool3d(partial, 2)
    with pytest.raises(TypeError, match="Int"):  # torch has no int32 kernel
        F.avg_pool3d(dx.to(torch.int32), 2)


def test_volume_shards_and_bad_arguments_are_refused(graph: Any) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = place(_rand(2, 3, 4, 4, 4), mesh, [R], graph)
    w = place(_rand(2, 3, 2, 2, 2), mesh, [R], graph)
    for d in (2, 3, 4):
        s = place(_rand(2, 3, 4, 4, 4), mesh, [Shard(d)], graph)
        wt = place(_rand(3, 2, 2, 2, 2), mesh, [R], graph)
        for name, call in [
            ("conv3d", lambda s=s: F.conv3d(s, w)),
            ("conv_transpose3d", lambda s=s, wt=wt: F.conv_transpose3d(s, wt)),
            ("max_pool3d", lambda s=s: F.max_pool3d(s, 2)),
            ("avg_pool3d", lambda s=s: F.avg_pool3d(s, 2)),
            ("adaptive_avg_pool3d", lambda s=s: F.adaptive_avg_pool3d(s, 2)),
            ("adaptive_max_pool3d", lambda s=s: F.adaptive_max_pool3d(s, 2)),
        ]:  # fmt: skip
            with pytest.raises(PlacementError, match=rf"^{name}: .*S\({d}\).*accepted"):
                call()
    with pytest.raises(PlacementError, match=r"^conv3d: .*kernel|^conv3d: .*weight"):
        F.conv3d(x, place(_rand(2, 3, 2, 2, 2), mesh, [Shard(3)], graph))
    bad: list[tuple[Callable[[], Any], type[Exception], str]] = [
        (lambda: F.conv3d(x, w, stride=0), ValueError, "stride"),
        (lambda: F.conv3d(x, w, padding="full"), ValueError, "padding"),
        (lambda: F.conv3d(x, w, stride=2, padding="same"), ValueError, "strided"),
        (lambda: F.conv3d(x, w, groups=2), RuntimeError, "channels"),
        (lambda: F.conv3d(x, place(_rand(2, 3, 2, 2), mesh, [R], graph)), RuntimeError, "5-D"),
        (lambda: F.conv3d(x, place(_rand(2, 3, 5, 2, 2), mesh, [R], graph)), RuntimeError,
         "smaller"),
        (lambda: F.conv3d(x[0, 0], w), RuntimeError, "(N, C, D, H, W)"),
        (lambda: F.conv3d(x, w.to(torch.float32)), RuntimeError, "dtype"),
        (lambda: F.conv_transpose3d(x, w), RuntimeError, "channels"),
        (lambda: F.conv_transpose3d(x, place(_rand(3, 2, 2, 2, 2), mesh, [R], graph),
                                    output_padding=1), ValueError, "output padding"),
        (lambda: F.max_pool3d(x, 2, padding=2), ValueError, "half of kernel"),
        (lambda: F.max_pool3d(x, (2, 2)), ValueError, "three ints"),
        (lambda: F.max_pool3d(x, 2.5), TypeError, "kernel_size"),
        (lambda: F.avg_pool3d(x, 2, divisor_override=0), ValueError, "divisor_override"),
        (lambda: F.adaptive_avg_pool3d(x, (1, 2)), ValueError, "output_size"),
        (lambda: F.adaptive_max_pool3d(x.to(torch.int64), 1), TypeError, "Long"),
    ]  # fmt: skip
    for call, kind, words in bad:
        with pytest.raises(kind, match=re.escape(words)):
            call()
        if kind is not TypeError:  # the others as dtorch's classes too
            with pytest.raises(DTorchError):
                call()


# --- layers -------------------------------------------------------------------------------------
_LAYERS: list[tuple[str, Callable[[Any], Any], tuple[int, ...]]] = [
    ("Conv3d", lambda m: m.Conv3d(3, 4, (2, 3, 2), stride=(1, 2, 1), padding=1), (5, 3, 4, 5, 4)),
    ("Conv3d circular", lambda m: m.Conv3d(4, 2, 3, groups=2, padding="same",
                                           padding_mode="circular", bias=False), (5, 4, 3, 4, 3)),
    ("ConvTranspose3d", lambda m: m.ConvTranspose3d(3, 4, 2, stride=2, output_padding=(1, 0, 1)),
     (5, 3, 2, 3, 2)),
    ("MaxPool3d", lambda m: m.MaxPool3d(2, padding=1), (5, 3, 4, 3, 5)),
    ("AvgPool3d", lambda m: m.AvgPool3d((1, 2, 3), ceil_mode=True), (5, 3, 4, 3, 5)),
    ("AdaptiveAvgPool3d", lambda m: m.AdaptiveAvgPool3d((2, None, 3)), (5, 3, 4, 3, 5)),
    ("AdaptiveMaxPool3d", lambda m: m.AdaptiveMaxPool3d(2), (5, 3, 4, 3, 5)),
    ("InstanceNorm3d", lambda m: m.InstanceNorm3d(3, affine=True), (5, 3, 2, 3, 4)),
    ("ZeroPad3d", lambda m: m.ZeroPad3d((1, 0, 2, 1, 0, 1)), (5, 3, 2, 3, 4)),
    ("ConstantPad3d", lambda m: m.ConstantPad3d(1, 2.5), (5, 3, 2, 3, 4)),
    ("ReflectionPad3d", lambda m: m.ReflectionPad3d((1, 2, 1, 0, 1, 1)), (5, 3, 2, 3, 4)),
    ("ReplicationPad3d", lambda m: m.ReplicationPad3d(2), (5, 3, 2, 3, 4)),
    ("CircularPad3d", lambda m: m.CircularPad3d((1, 0, 0, 2, 1, 1)), (5, 3, 2, 3, 4)),
]  # fmt: skip


def _layer(make: Callable[[Any], Any], mesh: dtorch.DeviceMesh) -> tuple[Any, Any]:
    """torch's layer and dtorch's, made after the same seed: the same draws."""
    torch.manual_seed(0)
    ref = make(tnn)
    torch.manual_seed(0)
    try:
        ours = make(_MeshNN(mesh))
    except TypeError:  # no device_mesh keyword
        ours = make(nn)
    for key, value in ref.state_dict().items():
        assert torch.equal(ours.state_dict()[key].to_torch(), value), key
    return ref, ours


class _MeshNN:
    """``dtorch.nn`` whose layers are made on ``mesh`` (``device_mesh=``)."""

    def __init__(self, mesh: dtorch.DeviceMesh) -> None:
        self.mesh = mesh

    def __getattr__(self, name: str) -> Any:
        layer = getattr(nn, name)
        return lambda *a, **k: layer(*a, **k, device_mesh=self.mesh)


@pytest.mark.parametrize(("label", "make", "shape"), _LAYERS, ids=[c[0] for c in _LAYERS])
@pytest.mark.parametrize(("mesh_shape", "names"), DP_MESHES[1::2])
def test_layers_match_torch(
    label: str, make: Callable[[Any], Any], shape: tuple[int, ...],
    mesh_shape: tuple[int, ...], names: tuple[str, ...], graph: Any,
) -> None:  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", mesh_shape, mesh_dim_names=names)
    ref, ours = _layer(make, mesh)
    assert repr(ours) == repr(ref)
    x = torch.randn(shape, generator=_G)
    dx = dtorch.from_torch(x, device_mesh=mesh, placements=batch_on_dp(mesh), graph=graph)
    got, want = ours(dx), ref(x)
    torch.testing.assert_close(got.to_torch(), want, atol=1e-5, rtol=1e-5)
    assert got.placements == batch_on_dp(mesh)
    assert set(ours.state_dict()) == set(ref.state_dict())


def test_layer_arguments_are_checked(graph: Any) -> None:
    for make, kind in [
        (lambda m: m.Conv3d(3, 4, 2, padding="same", stride=2), ValueError),
        (lambda m: m.Conv3d(3, 4, 2, groups=2), ValueError),
        (lambda m: m.ConvTranspose3d(3, 4, 2, padding_mode="reflect"), ValueError),
    ]:
        with pytest.raises(kind):
            make(tnn)
        with pytest.raises(kind):
            make(nn)
    with pytest.raises(ValueError, match="three ints"):  # torch: at the first call
        nn.Conv3d(3, 4, (2, 2))
    with pytest.raises(ValueError, match="4D or 5D"):
        nn.InstanceNorm3d(3)(dtorch.ones(2, 3, 4))
    m = nn.ConvTranspose3d(2, 3, 3, stride=2)
    ref = tnn.ConvTranspose3d(2, 3, 3, stride=2)
    ref.load_state_dict({k: v.to_torch() for k, v in m.state_dict().items()})
    x = torch.randn(1, 2, 2, 3, 2, generator=_G)
    size = [6, 8, 6]
    torch.testing.assert_close(m(dtorch.from_torch(x), output_size=size).to_torch(),
                               ref(x, output_size=size))  # fmt: skip


def test_avg_pool3d_refuses_a_volume_smaller_than_its_kernel(graph: dtorch.Graph) -> None:
    """torch's 3-D average pool checks the unpadded input against the kernel, even where
    padding would make an output (its 2-D pool does not): refused at the call as torch's."""
    x = torch.randn(1, 2, 4, 1, 1)
    with pytest.raises(RuntimeError, match="smaller than kernel size"):
        TF.avg_pool3d(x, 3, 1, 1)
    volume = dtorch.from_torch(x, device_mesh=dtorch.init_device_mesh("cpu", 2), graph=graph)
    with pytest.raises(DTorchError, match="smaller than kernel size"):
        F.avg_pool3d(volume, 3, 1, 1)


@pytest.mark.parametrize(
    ("shape", "kwargs"),
    [
        ((1, 1, 1, 6, 2), {"kernel_size": 2, "stride": (2, 3, 3), "padding": 1, "dilation": 2}),
        ((2, 1, 1, 4, 5), {"kernel_size": 2, "stride": 2, "padding": 1, "dilation": 2}),
    ],
)
def test_max_pool3d_indices_of_windows_in_the_padding(
    shape: tuple[int, ...], kwargs: dict, graph: Any
) -> None:
    """A window whose every tap lies in the padding (dilation beside padding) has value -inf
    and torch's index, its first taps' (past the input: it failed to gather on the devices)."""
    x = torch.randn(shape, generator=_G)
    t = place(x, dtorch.init_device_mesh("cpu", 2), [S0 if shape[0] > 1 else R], graph)
    got = F.max_pool3d(t, return_indices=True, **kwargs)
    want = TF.max_pool3d(x, return_indices=True, **kwargs)
    assert bool(torch.isinf(want[0]).any())  # the case: some window holds no tap
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g.to_torch(), w)
