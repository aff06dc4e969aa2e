"""Rules of Reduce, MaxMin, SplitReduce, SplitTopK, Softmax, Scan and SplitScan: shapes and
dtypes against torch, placements, messages."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from helpers_rules import MESH22, op
from hypothesis import given, settings
from hypothesis import strategies as st

from dtorch.errors import PlacementError, ShapeError
from dtorch.ir.opkind import MaxMinKind, OrderStatKind, ReduceKind, ScanKind
from dtorch.ir.params import (
    MaxMinParam,
    OrderStatParam,
    ReduceParam,
    ScanParam,
    SoftmaxParam,
    SplitCumExtremeParam,
    SplitOrderStatParam,
    SplitReduceParam,
    SplitScanParam,
    SplitSoftmaxParam,
    SplitSortParam,
    SplitTopKParam,
    TopKParam,
)
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.rules import DtypeError, ParamError, infer

pytestmark = pytest.mark.timeout(60)
R, P = Replicate(), Partial()
DTYPES = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float16, torch.float32]

_TORCH = {
    ReduceKind.SUM: lambda x, d, k: torch.sum(x, d, keepdim=k),
    ReduceKind.MEAN: lambda x, d, k: torch.mean(x, d, keepdim=k),
    ReduceKind.MAX: lambda x, d, k: torch.amax(x, d, keepdim=k),
    ReduceKind.MIN: lambda x, d, k: torch.amin(x, d, keepdim=k),
    ReduceKind.ANY: lambda x, d, k: torch.any(x, d, keepdim=k),
    ReduceKind.ALL: lambda x, d, k: torch.all(x, d, keepdim=k),
    ReduceKind.PROD: lambda x, d, k: torch.prod(x, d[0], keepdim=k),
}


@settings(max_examples=200, deadline=None)
@given(
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple),
    kind=st.sampled_from(list(_TORCH)), dtype=st.sampled_from(DTYPES),
    dim=st.integers(-3, 2), keepdim=st.booleans(),
)  # fmt: skip
def test_reduce_shape_and_dtype_match_torch(shape, kind, dtype, dim, keepdim) -> None:
    x = torch.ones(shape, dtype=dtype)
    param = ReduceParam(kind, (dim,), keepdim)
    try:
        want = _TORCH[kind](x, (dim,), keepdim)
    except (RuntimeError, IndexError):
        with pytest.raises((DtypeError, ShapeError)):
            infer("reduce", param, (op(shape, dtype=dtype),))
        return
    out = infer("reduce", param, (op(shape, dtype=dtype),)).outputs[0]
    assert (out.shape, out.dtype) == (tuple(want.shape), want.dtype)


def test_reduce_placements() -> None:
    x = op((4, 6, 2), Shard(1), P, mesh=MESH22)
    out = infer("sum", ReduceParam(ReduceKind.SUM, (1,)), (x,)).outputs[0]
    assert (out.shape, out.placements) == ((4, 2), (P, P))
    keep = infer("mean", ReduceParam(ReduceKind.MEAN, (0,), True), (x,)).outputs[0]
    assert (keep.shape, keep.placements) == ((1, 6, 2), (Shard(1), P))
    shifted = infer("sum", ReduceParam(ReduceKind.SUM, (0,)), (op((4, 6), Shard(1)),))
    assert shifted.outputs[0].placements == (Shard(0),)


@pytest.mark.parametrize(
    "kind", [k for k in ReduceKind if k not in (ReduceKind.SUM, ReduceKind.MEAN)]
)
def test_nonlinear_reduce_rejects_sharded_dim_and_partial(kind: ReduceKind) -> None:
    with pytest.raises(PlacementError, match=r"got \(S\(0\),\).*Redistribute the reduced dims"):
        infer("red", ReduceParam(kind, (0,)), (op((4, 6), Shard(0)),))
    with pytest.raises(PlacementError, match=r"got \(P,\)"):
        infer("red", ReduceParam(kind, (1,)), (op((4, 6), P),))
    out = infer("red", ReduceParam(kind, (1,)), (op((4, 6), Shard(0)),)).outputs[0]
    assert out.placements == (Shard(0),)


def test_reduce_param_errors() -> None:
    with pytest.raises(ParamError, match="one dim"):
        infer("argmax", ReduceParam(ReduceKind.ARGMAX, (0, 1)), (op((2, 3)),))
    with pytest.raises(ParamError, match="dtype"):
        infer("amax", ReduceParam(ReduceKind.MAX, (0,), dtype=torch.float64), (op((2, 3)),))
    with pytest.raises(ShapeError, match="twice"):
        infer("sum", ReduceParam(ReduceKind.SUM, (0, -2)), (op((2, 3)),))
    with pytest.raises(ShapeError, match="out of range"):
        infer("sum", ReduceParam(ReduceKind.SUM, (2,)), (op((2, 3)),))


def test_maxmin_outputs() -> None:
    inf = infer("max", MaxMinParam(MaxMinKind.MAX, -1), (op((4, 6), Shard(0), dtype=torch.int32),))
    values, indices = inf.outputs
    assert values.shape == indices.shape == (4,)
    assert (values.dtype, indices.dtype) == (torch.int32, torch.int64)
    assert values.placements == indices.placements == (Shard(0),)
    with pytest.raises(PlacementError, match="max: got"):
        infer("max", MaxMinParam(MaxMinKind.MAX, 0), (op((4, 6), Shard(0)),))


_SPLIT = [k for k in ReduceKind if k not in (ReduceKind.SUM, ReduceKind.MEAN)]


@pytest.mark.parametrize("kind", _SPLIT)
def test_split_reduce_replicates_the_reduced_dims(kind: ReduceKind) -> None:
    """The reduction the API records where a mesh dim shards a reduced dim: that mesh dim
    gives Replicate (nested on two mesh dims too), a kept dim's shard stays at its new index,
    a Partial is refused; shapes and dtypes are Reduce's (torch's)."""
    cases = [
        ((Shard(1), Shard(0)), (1,), False, (R, Shard(0))),
        ((Shard(1), Shard(1)), (1,), True, (R, R)),
        ((Shard(0), Shard(2)), (0,), False, (R, Shard(1))),
        ((Shard(2), Shard(0)), None, False, (R, R)),
    ]
    for placements, dims, keepdim, want in cases:
        x = op((4, 6, 2), *placements, mesh=MESH22, dtype=torch.int32)
        param = SplitReduceParam(kind, dims, keepdim)
        out = infer("red", param, (x,)).outputs[0]
        plain = infer("red", ReduceParam(kind, dims, keepdim), (op((4, 6, 2), dtype=torch.int32),))
        assert out.placements == want
        assert (out.shape, out.dtype) == (plain.outputs[0].shape, plain.outputs[0].dtype)
    with pytest.raises(PlacementError, match=r"got \(P,\).*are not linear: redistribute a Partial"):
        infer("red", SplitReduceParam(kind, (0,)), (op((4, 6), P),))


def test_split_reduce_indices_and_param_errors() -> None:
    x = op((4, 6), Shard(1), Shard(0), mesh=MESH22, dtype=torch.float16)
    values, indices = infer(
        "max", SplitReduceParam(ReduceKind.MIN, (1,), True, indices=True), (x,)
    ).outputs
    assert values.shape == indices.shape == (4, 1)
    assert (values.dtype, indices.dtype) == (torch.float16, torch.int64)
    assert values.placements == indices.placements == (R, Shard(0))
    for param, match in (
        (SplitReduceParam(ReduceKind.SUM, (1,)), "sum and mean give Partial"),
        (SplitReduceParam(ReduceKind.ANY, (1,), indices=True), "indices come with max or min"),
        (SplitReduceParam(ReduceKind.MAX, (0, 1), indices=True), "indices come with max or min"),
        (SplitReduceParam(ReduceKind.ARGMAX, (0, 1)), "one dim"),
        (SplitReduceParam(ReduceKind.MAX, (1,), dtype=torch.float64), "dtype"),
    ):
        with pytest.raises(ParamError, match=match):
            infer("red", param, (x,))
    with pytest.raises(ShapeError, match="Expected reduction dim"):
        infer("max", SplitReduceParam(ReduceKind.MAX), (op((0, 6), Shard(1)),))


def test_split_topk_replicates_the_topk_dim() -> None:
    """The topk the API records where the topk dim is sharded: Replicate there (nested too),
    other shards stay, torch's shapes and dtypes, topk's argument checks, Partial refused."""
    for placements, dim, want in (
        ((Shard(1), Shard(0)), 1, (R, Shard(0))),
        ((Shard(1), Shard(1)), -1, (R, R)),
        ((Replicate(), Shard(0)), 0, (R, R)),
    ):
        x = op((4, 6), *placements, mesh=MESH22, dtype=torch.int32)
        values, indices = infer("topk", SplitTopKParam(3, dim, False), (x,)).outputs
        plain = infer("topk", TopKParam(3, dim, False), (op((4, 6), dtype=torch.int32),)).outputs
        assert values.placements == indices.placements == want
        assert (values.shape, values.dtype, indices.dtype) == (
            plain[0].shape, torch.int32, torch.int64,
        )  # fmt: skip
    with pytest.raises(ParamError, match="k out of range: k=7 for dim 1 of size 6"):
        infer("topk", SplitTopKParam(7, 1), (op((4, 6), Shard(1)),))
    with pytest.raises(DtypeError):
        infer("topk", SplitTopKParam(1, 1), (op((4, 6), Shard(1), dtype=torch.bool),))
    with pytest.raises(PlacementError, match=r"got \(P,\).*The top entries of a sum"):
        infer("topk", SplitTopKParam(1, 1), (op((4, 6), P),))


def test_split_sort_keeps_every_shard() -> None:
    """The sort the API records where the sorted dim is sharded: every shard stays (nested
    and uneven too), torch's dtypes, a dtype torch's sort refuses refused, Partial refused."""
    for placements, dim in (
        ((Shard(1), Shard(0)), 1),
        ((Shard(1), Shard(1)), -1),
        ((Replicate(), Shard(0)), 0),
    ):
        x = op((5, 7), *placements, mesh=MESH22, dtype=torch.int16)
        values, indices = infer("sort", SplitSortParam(dim, True), (x,)).outputs
        assert values.placements == indices.placements == placements
        assert (values.shape, values.dtype, indices.dtype) == ((5, 7), torch.int16, torch.int64)
    with pytest.raises(DtypeError):
        infer("sort", SplitSortParam(1), (op((4, 6), Shard(1), dtype=torch.complex64),))
    with pytest.raises(PlacementError, match=r"got \(P,\).*The order of a sum"):
        infer("sort", SplitSortParam(0), (op((4, 6), P),))


def test_split_order_stat_replicates_its_dim() -> None:
    """The median/kthvalue/mode the API records where their dim is sharded: Replicate there,
    other shards stay (shifted past a dropped dim), torch's shapes and checks, Partial
    refused."""
    for placements, dim, keep, want in (
        ((Shard(1), Shard(0)), 1, False, (R, Shard(0))),
        ((Shard(1), Shard(1)), -1, True, (R, R)),
        ((Shard(0), Shard(1)), 0, False, (R, Shard(0))),
    ):
        x = op((4, 6), *placements, mesh=MESH22)
        param = SplitOrderStatParam(OrderStatKind.KTHVALUE, dim, 2, keep)
        values, indices = infer("kthvalue", param, (x,)).outputs
        plain = OrderStatParam(OrderStatKind.KTHVALUE, dim, 2, keep)
        whole = infer("kthvalue", plain, (op((4, 6)),)).outputs
        assert values.placements == indices.placements == want
        assert (values.shape, indices.shape, indices.dtype) == (
            whole[0].shape, whole[1].shape, torch.int64,
        )  # fmt: skip
    with pytest.raises(ParamError, match="selected number k out of range"):
        param = SplitOrderStatParam(OrderStatKind.KTHVALUE, 1, 7)
        infer("kthvalue", param, (op((4, 6), Shard(1)),))
    with pytest.raises(DtypeError):
        param = SplitOrderStatParam(OrderStatKind.MEDIAN, 1)
        infer("median", param, (op((4, 6), Shard(1), dtype=torch.bool),))
    with pytest.raises(PlacementError, match=r"got \(P,\).*The order of a sum"):
        infer("mode", SplitOrderStatParam(OrderStatKind.MODE, 0), (op((4, 6), P),))
    every = SplitOrderStatParam(OrderStatKind.MEDIAN, None)  # of every element
    (value,) = infer("median", every, (op((4, 6), Shard(1), Shard(0), mesh=MESH22),)).outputs
    assert (value.shape, value.placements) == ((), (R, R))
    with pytest.raises(ParamError, match="takes a dim"):
        param = SplitOrderStatParam(OrderStatKind.MODE, None)
        infer("mode", param, (op((4, 6), Shard(1)),))


def test_softmax() -> None:
    out = infer("softmax", SoftmaxParam(-1), (op((4, 6), Shard(0)),)).outputs[0]
    assert out.placements == (Shard(0),)
    with pytest.raises(PlacementError, match="softmax dim to Replicate"):
        infer("softmax", SoftmaxParam(1), (op((4, 6), Shard(1)),))
    with pytest.raises(PlacementError):
        infer("softmax", SoftmaxParam(1), (op((4, 6), P),))
    with pytest.raises(DtypeError):
        infer("softmax", SoftmaxParam(1), (op((4, 6), dtype=torch.int64),))
    half = infer("log_softmax", SoftmaxParam(0, True, torch.float64), (op((3,)),)).outputs[0]
    assert half.dtype == F.log_softmax(torch.ones(3), 0, dtype=torch.float64).dtype


def test_split_softmax_keeps_every_shard() -> None:
    """The softmax the API records where the softmax dim is sharded: every shard stays (the
    softmax dim's nested on two mesh dims too), a Partial is refused, torch's dtypes."""
    for placements in ((Shard(1), Shard(1)), (Shard(0), Shard(1)), (Replicate(), Shard(0))):
        x = op((4, 6), *placements, mesh=MESH22)
        out = infer("softmax", SplitSoftmaxParam(1), (x,)).outputs[0]
        assert out.placements == placements and out.shape == (4, 6)
    with pytest.raises(PlacementError, match="A softmax is not linear"):
        infer("softmax", SplitSoftmaxParam(1), (op((4, 6), P),))
    with pytest.raises(DtypeError):
        infer("softmax", SplitSoftmaxParam(1), (op((4, 6), Shard(1), dtype=torch.int64),))
    wide = infer("log_softmax", SplitSoftmaxParam(0, True, torch.float64), (op((3,), Shard(0)),))
    assert wide.outputs[0].dtype == torch.float64


def _logcumsumexp(x: torch.Tensor, dim: int, dtype: torch.dtype | None) -> torch.Tensor:
    # torch's has no dtype argument: the Scan casts first, as cumsum's dtype= does
    return torch.logcumsumexp(x if dtype is None else x.to(dtype), dim)


_SCANS: dict[ScanKind, Any] = {
    ScanKind.SUM: torch.cumsum,
    ScanKind.PROD: torch.cumprod,
    ScanKind.LOGSUMEXP: _logcumsumexp,
}


@pytest.mark.parametrize("kind", list(ScanKind))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("out", [None, torch.float64, torch.int32])
def test_scan_dtype_matches_torch(
    kind: ScanKind, dtype: torch.dtype, out: torch.dtype | None
) -> None:
    try:
        want = _SCANS[kind](torch.ones((2, 3), dtype=dtype), 1, dtype=out)
    except RuntimeError:  # logcumsumexp of integers
        with pytest.raises(DtypeError, match="not implemented"):
            infer("scan", ScanParam(kind, -1, out), (op((2, 3), dtype=dtype),))
        return
    got = infer("scan", ScanParam(kind, -1, out), (op((2, 3), dtype=dtype),)).outputs[0]
    assert (got.shape, got.dtype) == (tuple(want.shape), want.dtype)


def test_scan_placements() -> None:
    x = op((4, 6, 2), Shard(0), P, mesh=MESH22)
    out = infer("cumsum", ScanParam(ScanKind.SUM, 1), (x,)).outputs[0]
    assert (out.shape, out.placements) == ((4, 6, 2), (Shard(0), P))
    longs = op((4, 6), P, dtype=torch.int64)
    assert infer("cumsum", ScanParam(ScanKind.SUM, 0), (longs,)).outputs[0].placements == (P,)
    with pytest.raises(PlacementError, match=r"^cumsum: got \(P,\)"):  # int32 -> int64 widens
        infer("cumsum", ScanParam(ScanKind.SUM, 0), (op((4, 6), P, dtype=torch.int32),))
    with pytest.raises(PlacementError, match=r"^cumsum: got \(P,\).*accepted.*R -> R"):
        infer("cumsum", ScanParam(ScanKind.SUM, 0, torch.int64), (op((4, 6), P),))
    with pytest.raises(PlacementError, match=r"^cumprod: got \(P,\)"):
        infer("cumprod", ScanParam(ScanKind.PROD, 0), (op((4, 6), P),))
    with pytest.raises(PlacementError, match="scanned dim to Replicate first"):
        infer("cumsum", ScanParam(ScanKind.SUM, -1), (op((4, 6), Shard(1)),))
    with pytest.raises(ShapeError, match="out of range"):
        infer("cumsum", ScanParam(ScanKind.SUM, 2), (op((4, 6)),))
    scalar = infer("cumprod", ScanParam(ScanKind.PROD, -1), (op(()),)).outputs[0]
    assert scalar.shape == ()


def test_split_scan_keeps_every_shard() -> None:
    """The scan the API records where the scanned dim is sharded: every shard stays (nested
    too), Scan's dtypes, Partial kept by a linear cumsum only."""
    for placements in ((Shard(1), Shard(1)), (Shard(0), Shard(1)), (P, Shard(1))):
        x = op((4, 6), *placements, mesh=MESH22, dtype=torch.int64)
        out = infer("cumsum", SplitScanParam(ScanKind.SUM, 1), (x,)).outputs[0]
        assert (out.placements, out.dtype) == (placements, torch.int64)
        floats = infer("cumsum", SplitScanParam(ScanKind.SUM, 1), (op((4, 6), Shard(1)),))
        assert floats.outputs[0].placements == (Shard(1),)
    x = op((4, 6), P, Shard(1), mesh=MESH22)
    for kind in (ScanKind.PROD, ScanKind.LOGSUMEXP):
        with pytest.raises(PlacementError, match="Redistribute a Partial input to Replicate"):
            infer("scan", SplitScanParam(kind, 1), (x,))
    with pytest.raises(PlacementError, match=r"got \(P,\)"):  # to int32: parts would wrap
        infer("cumsum", SplitScanParam(ScanKind.SUM, 1, torch.int32), (op((4, 6), P),))
    with pytest.raises(DtypeError):
        infer(
            "logcumsumexp",
            SplitScanParam(ScanKind.LOGSUMEXP, 1),
            (op((4, 6), Shard(1), dtype=torch.int64),),
        )


def test_split_cum_extreme_keeps_every_shard() -> None:
    for placements in ((Shard(1), Shard(1)), (Shard(0), Shard(1))):
        x = op((4, 6), *placements, mesh=MESH22, dtype=torch.int16)
        values, indices = infer("cummax", SplitCumExtremeParam(MaxMinKind.MAX, 1), (x,)).outputs
        assert values.placements == indices.placements == placements
        assert (values.dtype, indices.dtype, values.shape) == (torch.int16, torch.int64, (4, 6))
    with pytest.raises(PlacementError, match="running extreme of a sum"):
        infer(
            "cummin",
            SplitCumExtremeParam(MaxMinKind.MIN, 1),
            (op((4, 6), P, Shard(1), mesh=MESH22),),
        )
