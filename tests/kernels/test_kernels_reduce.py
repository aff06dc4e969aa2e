"""Reduce, MaxMin, Softmax and Scan simulated on 1-D, 2-D and 3-D meshes against torch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dtorch.ir.opkind import MaxMinKind, ReduceKind, ScanKind
from dtorch.ir.params import MaxMinParam, ReduceParam, ScanParam, SoftmaxParam
from dtorch.ir.placement import Partial, Shard
from tests.simulate import MESHES, run_layouts

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(5)
_DIMS = [None, (0,), (1,), (-1,), (0, 2)]


def _input(kind: ReduceKind) -> torch.Tensor:
    if kind in (ReduceKind.ANY, ReduceKind.ALL):
        return torch.rand((5, 3, 4), generator=_G) > 0.3
    if kind is ReduceKind.PROD:
        return torch.randint(-2, 3, (5, 3, 4), generator=_G)
    return torch.randn((5, 3, 4), generator=_G)


_FNS = {
    ReduceKind.SUM: torch.sum,
    ReduceKind.MEAN: torch.mean,
    ReduceKind.MAX: torch.amax,
    ReduceKind.MIN: torch.amin,
    ReduceKind.ANY: torch.any,
    ReduceKind.ALL: torch.all,
}


def _torch_reduce(
    kind: ReduceKind, x: torch.Tensor, dims: tuple[int, ...] | None, keepdim: bool
) -> torch.Tensor:
    """Plain torch: the multi-dim functions, argmax's flat index, prod one dim at a time."""
    every = tuple(range(x.ndim))
    if kind in _FNS:
        return _FNS[kind](x, dims or every, keepdim=keepdim)
    if kind in (ReduceKind.ARGMAX, ReduceKind.ARGMIN):
        fn = torch.argmax if kind is ReduceKind.ARGMAX else torch.argmin
        return fn(x, dims[0] if dims else None, keepdim=keepdim)
    for d in sorted((d % x.ndim for d in dims or every), reverse=True):
        x = torch.prod(x, d, keepdim=keepdim)
    return x


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("kind", list(ReduceKind))
def test_reduce_all_layouts(kind: ReduceKind, mesh_shape: tuple[int, ...]) -> None:
    x = _input(kind)
    limit = 40 if len(mesh_shape) > 1 else 100
    for dims in _DIMS:
        if kind in (ReduceKind.ARGMAX, ReduceKind.ARGMIN) and dims and len(dims) > 1:
            continue
        for keepdim in (False, True):
            want = _torch_reduce(kind, x, dims, keepdim)
            param = ReduceParam(kind, dims, keepdim)
            accepted = run_layouts("reduce", param, [x], mesh_shape, [want], limit=limit)
            assert accepted
            if kind not in (ReduceKind.SUM, ReduceKind.MEAN):
                assert not any(Partial() in pl for (pl,) in accepted)


def test_argmax_over_all_dims_matches_flat_index() -> None:
    x = torch.randn((4, 3), generator=_G)
    for keepdim in (False, True):
        want = torch.argmax(x, dim=None, keepdim=keepdim)
        assert run_layouts(
            "argmax", ReduceParam(ReduceKind.ARGMAX, None, keepdim), [x], (2,), [want]
        )


def test_sum_and_mean_of_sharded_dims_are_partial() -> None:
    x = torch.randn((7, 3), generator=_G)
    for kind, fn in ((ReduceKind.SUM, torch.sum), (ReduceKind.MEAN, torch.mean)):
        accepted = run_layouts("r", ReduceParam(kind, (0,)), [x], (4,), [fn(x, 0)])
        assert ((Shard(0),),) in accepted
        assert run_layouts(
            "r", ReduceParam(kind, None, True), [x], (2, 3), [fn(x, (0, 1), keepdim=True)]
        )


def test_reduce_dtype_argument_and_int_sum() -> None:
    x = torch.randint(-5, 5, (6, 2), generator=_G, dtype=torch.int32)
    assert run_layouts("sum", ReduceParam(ReduceKind.SUM, (0,)), [x], (4,), [x.sum(0)])
    f = torch.randn((6, 2), generator=_G)
    want = torch.mean(f, 0, dtype=torch.float64)
    assert run_layouts(
        "mean", ReduceParam(ReduceKind.MEAN, (0,), dtype=torch.float64), [f], (4,), [want]
    )


def test_zero_dim_reduce() -> None:
    x = torch.tensor(2.5)
    assert run_layouts("sum", ReduceParam(ReduceKind.SUM), [x], (2,), [x.sum()])
    assert run_layouts("amax", ReduceParam(ReduceKind.MAX, (0,)), [x], (2,), [torch.amax(x, 0)])


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("kind", list(MaxMinKind))
def test_maxmin_all_layouts(kind: MaxMinKind, mesh_shape: tuple[int, ...]) -> None:
    x = torch.randn((5, 3, 4), generator=_G)
    fn = torch.max if kind is MaxMinKind.MAX else torch.min
    for dim in (0, -1):
        for keepdim in (False, True):
            values, indices = fn(x, dim, keepdim=keepdim)
            param = MaxMinParam(kind, dim, keepdim)
            accepted = run_layouts("max", param, [x], mesh_shape, [values, indices], limit=60)
            assert accepted and not any(Partial() in pl for (pl,) in accepted)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("log", [False, True])
def test_softmax_all_layouts(log: bool, mesh_shape: tuple[int, ...]) -> None:
    x = torch.randn((5, 3, 4), generator=_G)
    fn = F.log_softmax if log else F.softmax
    for dim in (0, 1, -1):
        param = SoftmaxParam(dim, log)
        accepted = run_layouts("softmax", param, [x], mesh_shape, [fn(x, dim)], limit=60)
        assert accepted
        assert all(Shard(dim % 3) not in pl for (pl,) in accepted)


def test_softmax_dtype() -> None:
    x = torch.randn((4, 3), generator=_G)
    want = F.softmax(x, 1, dtype=torch.float64)
    assert run_layouts("softmax", SoftmaxParam(1, dtype=torch.float64), [x], (2,), [want])


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("kind", list(ScanKind))
def test_scan_all_layouts(kind: ScanKind, mesh_shape: tuple[int, ...]) -> None:
    """cumsum/cumprod/logcumsumexp: shards of the other dims and (cumsum) Partial pass, on
    uneven shards."""
    x = torch.randint(-2, 3, (5, 3, 4), generator=_G)
    fn = {ScanKind.SUM: torch.cumsum, ScanKind.PROD: torch.cumprod}.get(kind, torch.logcumsumexp)
    if kind is ScanKind.LOGSUMEXP:
        x = x.double()  # torch's logcumsumexp takes floats only
    for dim in (0, -1):
        param = ScanParam(kind, dim % 3)
        accepted = run_layouts("scan", param, [x], mesh_shape, [fn(x, dim)], limit=60)
        assert accepted and all(Shard(dim % 3) not in pl for (pl,) in accepted)
        assert any(Partial() in pl for (pl,) in accepted) == (kind is ScanKind.SUM)
