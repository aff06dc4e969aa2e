"""``dtorch.nn.functional.conv2d`` against ``torch.nn.functional.conv2d`` on the full tensors:
stride, padding (numbers, ``same``, ``valid``), dilation, groups (grouped, depthwise), bias,
NCHW and NHWC, 3-D and 4-D inputs; every layout on 1-D meshes (a seeded sample on 2-D and 3-D
ones), even and uneven batch and channel sizes, the output placements from the one-mesh-dim
tables of ``dtorch.ir.rules.conv``; linearity in the input and the weight checked on Partial
tensors whose devices hold different summands; the rejections; thread and process mode."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import DtypeError, ParamError, PlacementError, ShapeError
from dtorch.type import OperatorFormat, PaddingType
from tests.api.image_harness import split_partial, table_combos
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    S2,
    P,
    R,
    Table,
    check_rejection,
    place,
    run_api,
)

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths"),
]

S3 = dtorch.Shard(3)

_G = torch.Generator().manual_seed(7)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    _G.manual_seed(7)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


_PLAIN: Table = {(R, R): R, (S0, R): S0, (R, S0): S1, (S1, S1): P, (P, R): P, (R, P): P}
_PLAIN_BIAS: Table = {
    (R, R, R): R, (S0, R, R): S0, (R, S0, R): S1, (R, S0, S0): S1, (R, R, S0): S1,
    (S1, S1, R): P, (P, R, R): P, (R, P, R): P, (S1, S1, P): P, (P, R, P): P, (R, P, P): P,
}  # fmt: skip
_NHWC_BIAS: Table = {
    (R, R, R): R, (S0, R, R): S0, (R, S0, R): S3, (R, S0, S0): S3, (R, R, S0): S3,
    (S3, S1, R): P, (P, R, R): P, (R, P, R): P, (S3, S1, P): P, (P, R, P): P, (R, P, P): P,
}  # fmt: skip
#: Depthwise (groups == channels): the channels of x and the out-channels of w are one dim.
_DEPTHWISE_BIAS: Table = {
    (R, R, R): R, (S0, R, R): S0, (S1, R, R): S1, (R, S0, R): S1, (R, R, S0): S1,
    (S1, S0, R): S1, (S1, R, S0): S1, (R, S0, S0): S1, (S1, S0, S0): S1,
    (P, R, R): P, (R, P, R): P, (P, R, P): P, (R, P, P): P,
}  # fmt: skip

#: (x shape, w shape, bias?, conv2d keyword arguments, the one-mesh-dim table).
_CASES: list[tuple[tuple[int, ...], tuple[int, ...], bool, dict[str, Any], Table]] = [
    ((3, 5, 6, 5), (4, 5, 3, 3), False, {"padding": 1}, _PLAIN),
    # W 5: no mesh of ALL_MESHES holds whole windows of 2 at stride 2 (those shards stay)
    ((4, 3, 7, 5), (5, 3, 3, 2), True, {"stride": 2, "dilation": (2, 1)}, _PLAIN_BIAS),
    ((3, 5, 5, 6), (5, 1, 3, 3), True, {"groups": 5, "padding": "same"}, _DEPTHWISE_BIAS),
    ((3, 6, 5, 5), (4, 5, 2, 3), True, {"padding": "valid", "format": "nhwc"}, _NHWC_BIAS),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("sx", "sw", "bias", "kwargs", "table"), _CASES)
def test_conv2d_every_layout(  # type: ignore[no-untyped-def]
    sx, sw, bias, kwargs, table, mesh_shape, graph
) -> None:
    x, w = _randn(*sx), _randn(*sw)
    fulls = [x, w, _randn(sw[0])] if bias else [x, w]
    want = _torch_conv(*fulls, **kwargs)
    combos = None if len(mesh_shape) == 1 else table_combos(table, len(mesh_shape), fulls, 8, 3)
    accepted = run_api(
        graph, "conv2d", lambda *t: DF.conv2d(*t, **kwargs), fulls, mesh_shape, [want],
        table=table, exact=False, seed=len(sx), combos=combos,
    )  # fmt: skip
    assert len(accepted) == len(table) if combos is None else len(accepted) > 4


def _torch_conv(x: torch.Tensor, w: torch.Tensor, b: Any = None, **kwargs: Any) -> torch.Tensor:
    """torch's conv2d; NHWC through channels-first and back."""
    nhwc = kwargs.pop("format", "nchw") == "nhwc"
    x = x.movedim(-1, -3) if nhwc else x
    out = F.conv2d(x, w, b, **kwargs)
    return out.movedim(-3, -1) if nhwc else out


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2), (2, 1, 2)])
def test_grouped_channels_shard_in_whole_groups(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """groups=2, 2 in- and 3 out-channels per group: two devices hold one group each."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x, w, b = _randn(3, 4, 5, 5), _randn(6, 2, 3, 3), _randn(6)
    want = F.conv2d(x, w, b, groups=2)
    rest = [R] * (len(mesh_shape) - 1)
    for px, pw in (([S1], [S0]), ([R], [S0]), ([S1], [R])):  # a Replicate side is chunked
        tx, tw = place(x, mesh, px + rest, graph), place(w, mesh, pw + rest, graph)
        out = DF.conv2d(tx, tw, place(b, mesh, [R] * mesh.ndim, graph), groups=2)
        assert out.placements == [S1, *rest]
        torch.testing.assert_close(out.to_torch(), want)


@pytest.mark.parametrize("mesh_shape", [(3,), (4,), (2, 2)])
def test_grouped_channels_that_split_a_group_are_refused(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """2 groups over 3 or 4 devices (or nested 2 x 2) cannot give every device whole groups."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x, w = _randn(2, 4, 5, 5), _randn(6, 2, 3, 3)
    placements = [S1] * mesh.ndim
    tx, tw = place(x, mesh, placements, graph), place(w, mesh, [R] * mesh.ndim, graph)
    with pytest.raises(PlacementError, match="groups=2 every device must hold whole groups") as e:
        DF.conv2d(tx, tw, groups=2)
    check_rejection("conv2d", e.value, [tx, tw])


@pytest.mark.parametrize(("mesh_shape", "mesh_dim"), [((2,), 0), ((3,), 0), ((2, 3), 1)])
def test_partial_input_and_weight_stay_partial(
    mesh_shape: tuple[int, ...], mesh_dim: int, graph: dtorch.Graph
) -> None:
    """conv is linear in x and in w: the sum of the devices' convolutions of their summands is
    the convolution of the sum (the owner adds the bias once)."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x, w, b = _randn(2, 3, 6, 6), _randn(4, 3, 3, 3), _randn(4)
    want = [P if m == mesh_dim else R for m in range(mesh.ndim)]
    rep = [R] * mesh.ndim
    px, parts = split_partial(x, mesh, mesh_dim, graph, seed=1)
    out = DF.conv2d(px, place(w, mesh, rep, graph), place(b, mesh, rep, graph), padding=1)
    assert out.placements == want
    torch.testing.assert_close(out.to_torch(), F.conv2d(x, w, b, padding=1))
    pieces = [F.conv2d(part, w, padding=1) for part in parts]  # what the devices computed
    assert not torch.allclose(pieces[0], F.conv2d(x, w, padding=1))  # the summands differ
    pw, _ = split_partial(w, mesh, mesh_dim, graph, seed=2)
    out = DF.conv2d(place(x, mesh, rep, graph), pw, stride=2)
    assert out.placements == want
    torch.testing.assert_close(out.to_torch(), F.conv2d(x, w, stride=2))


def test_a_partial_bias_of_spread_pieces_counts_once_per_mesh_dim(graph: dtorch.Graph) -> None:
    """A bias Partial on mesh dim 0 (pieces that differ) beside an output Partial on both
    dims: every device adds its piece on dim 0, only coordinate 0 of dim 1 adds it."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x, w, b = _randn(2, 6, 5, 5), _randn(4, 6, 3, 3), _randn(4)
    tx = split_partial(x, mesh, 1, graph, seed=1)[0].redistribute(mesh, [S1, P])
    tb, pieces = split_partial(b, mesh, 0, graph, seed=2)
    assert not torch.allclose(pieces[0], b)
    out = DF.conv2d(tx, place(w, mesh, [S1, R], graph), tb, padding=1)
    assert out.placements == [P, P]
    torch.testing.assert_close(out.to_torch(), F.conv2d(x, w, b, padding=1))


def test_a_partial_bias_is_added_by_a_device_holding_no_in_channels(graph: dtorch.Graph) -> None:
    """2 in-channels over 3 devices (1, 1, 0): the third device's output is zeros plus its
    piece of the bias (its piece was dropped)."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    x, w, b = _randn(1, 2, 3, 3), _randn(4, 2, 1, 1), _randn(4)
    tb, pieces = split_partial(b, mesh, 0, graph, seed=3)
    assert pieces[2].abs().sum() > 0
    out = DF.conv2d(place(x, mesh, [S1], graph), place(w, mesh, [S1], graph), tb)
    assert out.placements == [P]
    torch.testing.assert_close(out.to_torch(), F.conv2d(x, w, b))


def test_in_channels_sharded_on_both_give_partial(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x, w, b = _randn(4, 6, 5, 5), _randn(3, 6, 3, 3), _randn(3)
    tx, tw = place(x, mesh, [S0, S1], graph), place(w, mesh, [R, S1], graph)
    out = DF.conv2d(tx, tw, place(b, mesh, [R, R], graph))
    assert out.placements == [S0, P]
    torch.testing.assert_close(out.to_torch(), F.conv2d(x, w, b))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"padding": "same", "dilation": 2},
        {"padding": PaddingType.same},
        {"padding": PaddingType.valid, "stride": (1, 2)},
        {"padding": (2, 0), "stride": 3},
        {"format": OperatorFormat.nhwc, "padding": 1},
    ],
    ids=str,
)
def test_conv2d_arguments(kwargs: dict[str, Any], graph: dtorch.Graph) -> None:
    """Even kernels with ``same`` (torch pads the extra row on one side), strides, dilation,
    unbatched inputs and the dtorch.type spellings of padding and format."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    w = _randn(4, 3, 2, 4)
    torch_kwargs = {
        k: (v.value if isinstance(v, (PaddingType, OperatorFormat)) else v)
        for k, v in kwargs.items()
    }
    for shape in ((2, 3, 7, 8), (3, 7, 8)):
        x = _randn(*shape)
        if "format" in kwargs:
            x = x.movedim(-3, -1).contiguous()
        want = _torch_conv(x, w, **dict(torch_kwargs))
        out = DF.conv2d(place(x, mesh, [R], graph), place(w, mesh, [S0], graph), **kwargs)
        channels = out.ndim - 1 if "format" in kwargs else out.ndim - 3
        assert out.placements == [dtorch.Shard(channels)]
        torch.testing.assert_close(out.to_torch(), want)


def test_spatial_shards_are_refused(graph: dtorch.Graph) -> None:
    """Windows cross the boundary of a sharded H or W (or kH, kW of the weight)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, w = _randn(2, 3, 6, 6), _randn(4, 3, 3, 3)
    for px, pw, dim in (([S2], [R], "dim 2 (a spatial dim of the input)"),
                        ([S3], [R], "dim 3 (a spatial dim of the input)"),
                        ([R], [S2], "dim 2 (a kernel dim of the weight)")):  # fmt: skip
        tx, tw = place(x, mesh, px, graph), place(w, mesh, pw, graph)
        with pytest.raises(PlacementError, match=rf"{re.escape(dim)} is sharded on mesh dim 0"):
            DF.conv2d(tx, tw)
    nhwc = place(x.movedim(1, -1), mesh, [S1], graph)  # H of an NHWC input
    with pytest.raises(PlacementError, match="dim 1 \\(a spatial dim of the input\\)") as e:
        DF.conv2d(nhwc, place(w, mesh, [R], graph), format="nhwc")
    check_rejection("conv2d", e.value, [nhwc])


#: (mesh shape, x's placements, x's shape, kernel (kH, kW), conv2d keywords, kept?).
_WINDOW_SHARDS: list[tuple[tuple[int, ...], list[Any], tuple[int, ...], tuple[int, int],
                           dict[str, Any], bool]] = [
    ((2,), [S2], (2, 3, 8, 6), (1, 1), {}, True),  # a 1x1 convolution
    ((3,), [S2], (2, 3, 7, 6), (1, 1), {}, True),  # 3 + 3 + 1
    ((2,), [S3], (2, 3, 6, 8), (1, 1), {"stride": 2}, True),  # ResNet's downsampling
    ((2,), [S2], (2, 3, 8, 6), (2, 3), {"stride": (2, 1)}, True),  # patches of whole rows
    ((2,), [S2], (2, 3, 8, 6), (1, 1), {"padding": "same"}, True),
    ((2, 3), [S2, S3], (2, 3, 8, 9), (1, 1), {"dilation": 2}, True),
    ((2,), [dtorch.Shard(1)], (2, 8, 6, 3), (1, 1), {"format": "nhwc"}, True),  # H of NHWC
    ((3,), [S2], (2, 3, 7, 6), (1, 1), {"stride": 2}, False),  # shard 1 starts at row 3
    ((2,), [S2], (2, 3, 8, 6), (3, 3), {"padding": 1}, False),
    ((2,), [S2], (2, 3, 8, 6), (3, 3), {"padding": "same"}, False),
    ((2,), [S2], (2, 3, 8, 6), (2, 1), {}, False),  # overlapping windows
]  # fmt: skip


@pytest.mark.parametrize(("mesh_shape", "layout", "shape", "kernel", "kwargs", "kept"),
                         _WINDOW_SHARDS)  # fmt: skip
def test_spatial_shards_of_whole_windows_are_kept(
    mesh_shape: tuple[int, ...],
    layout: list[Any],
    shape: tuple[int, ...],
    kernel: tuple[int, int],
    kwargs: dict[str, Any],
    kept: bool,
    graph: dtorch.Graph,
) -> None:
    """A convolution whose windows lie within every device's shard of H or W, making its chunk
    of the output (a 1x1 kernel, windows no longer than the stride over aligned shards, no
    padding), keeps the shard; a window across a shard boundary is refused."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    nhwc = kwargs.get("format") == "nhwc"
    x, w = _randn(*shape), _randn(4, shape[-1 if nhwc else 1], *kernel)
    tx, tw = place(x, mesh, layout, graph), place(w, mesh, [R] * mesh.ndim, graph)
    if not kept:
        with pytest.raises(PlacementError, match=r"\(a spatial dim of the input\) is sharded"):
            DF.conv2d(tx, tw, **kwargs)
        return
    out = DF.conv2d(tx, tw, **kwargs)
    assert out.placements == layout
    torch_kwargs = {k: v for k, v in kwargs.items() if k != "format"}
    want = F.conv2d(x.movedim(-1, 1) if nhwc else x, w, **torch_kwargs)
    torch.testing.assert_close(out.to_torch(), want.movedim(1, -1) if nhwc else want)


def test_conv1d_keeps_a_length_shard_of_a_pointwise_kernel(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, w, b = _randn(2, 3, 10), _randn(5, 3, 1), _randn(5)
    tx = place(x, mesh, [S2], graph)
    out = DF.conv1d(tx, place(w, mesh, [R], graph), place(b, mesh, [R], graph))
    assert out.placements == [S2]
    torch.testing.assert_close(out.to_torch(), F.conv1d(x, w, b))


def test_other_layout_rejections(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x, w, b = _randn(2, 4, 5, 5), _randn(4, 4, 3, 3), _randn(4)
    rejected = [
        ((S1, R), "in-channels sharded on x only"),
        ((R, S1), "in-channels sharded on w only"),
        ((P, P), "both Partial"),
        ((S0, S0), "batch and out-channels on one mesh dim"),
        ((P, S0), "Partial x with sharded out-channels"),
    ]
    for (px, pw), why in rejected:
        tx, tw = place(x, mesh, [px], graph), place(w, mesh, [pw], graph)
        with pytest.raises(PlacementError) as e:
            DF.conv2d(tx, tw)
        check_rejection("conv2d", e.value, [tx, tw])
        assert why
    tx, tw = place(x, mesh, [S1], graph), place(w, mesh, [S1], graph)
    tb = place(b, mesh, [S0], graph)  # a sharded bias cannot join a Partial sum
    with pytest.raises(PlacementError) as e:
        DF.conv2d(tx, tw, tb)
    check_rejection("conv2d", e.value, [tx, tw, tb])
    assert "adds a Replicate bias once" in str(e.value)


def test_bad_arguments_are_refused_like_torch(graph: dtorch.Graph) -> None:
    x, w = dtorch.ones(2, 4, 5, 5), dtorch.ones(3, 4, 3, 3)
    with pytest.raises(ShapeError, match=r"conv2d: torch refuses .*strided"):
        DF.conv2d(x, w, stride=2, padding="same")
    bad = r"conv2d: inputs \[2, 4, 5, 5\] x \[3, 3, 3, 3\] with groups=1 do not fit; accepted"
    with pytest.raises(ShapeError, match=bad):
        DF.conv2d(x, dtorch.ones(3, 3, 3, 3))
    with pytest.raises(ShapeError, match=r"conv2d: .* with groups=2 do not fit"):
        DF.conv2d(x, dtorch.ones(3, 2, 3, 3), groups=2)  # 3 out-channels in 2 groups
    with pytest.raises(ShapeError, match=r"conv2d: .* do not fit"):
        DF.conv2d(x, w, dtorch.ones(4))
    with pytest.raises(ShapeError, match=r"conv2d: torch refuses .*greater than actual input"):
        DF.conv2d(dtorch.ones(1, 4, 2, 2), w)  # a kernel larger than the padded input
    with pytest.raises(ShapeError, match="conv2d: needs a 3-D"):
        DF.conv2d(dtorch.ones(5, 5), w)
    with pytest.raises(DtypeError, match=r"conv2d: .* one dtype, not bool; got float32, fl"):
        DF.conv2d(x, dtorch.ones(3, 4, 3, 3, dtype=torch.float64))
    with pytest.raises(ParamError, match="conv2d: padding must be 'same', 'valid'"):
        DF.conv2d(x, w, padding="full")
    with pytest.raises(ParamError, match="conv2d: stride must be an int or a pair"):
        DF.conv2d(x, w, stride=(1, 2, 3))
    with pytest.raises(ParamError, match="conv2d: groups must be a positive int"):
        DF.conv2d(x, w, groups=0)
    with pytest.raises(ParamError, match="conv2d: format must be 'nchw' or 'nhwc'"):
        DF.conv2d(x, w, format="nwhc")


def test_conv2d_float64_and_the_default_graph(graph: dtorch.Graph) -> None:
    x, w = _randn(1, 2, 4, 4).double(), _randn(3, 2, 1, 1).double()
    out = DF.conv2d(dtorch.from_torch(x), dtorch.from_torch(w))
    assert out.dtype == torch.float64 and out.graph is graph
    torch.testing.assert_close(out.to_torch(), F.conv2d(x, w))


def test_integer_conv_is_exact_on_partial_sums(graph: dtorch.Graph) -> None:
    """torch convolves int64 on the CPU; integer sums are exact, so in-channel shards give
    Partial and match torch bit for bit. Bool has no kernel."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    x = torch.randint(-5, 5, (2, 5, 4, 4), generator=_G)
    w = torch.randint(-3, 3, (2, 5, 3, 3), generator=_G)
    out = DF.conv2d(place(x, mesh, [S1], graph), place(w, mesh, [S1], graph), padding=1)
    assert out.placements == [P] and out.dtype == torch.int64
    assert torch.equal(out.to_torch(), F.conv2d(x, w, padding=1))
    with pytest.raises(DtypeError, match=r"conv2d: .* not bool; got bool, bool"):
        DF.conv2d(
            dtorch.ones(1, 1, 2, 2, dtype=torch.bool), dtorch.ones(1, 1, 1, 1, dtype=torch.bool)
        )
