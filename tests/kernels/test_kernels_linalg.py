"""Matmul, Linear and Outer simulated on 1-D, 2-D and 3-D meshes against torch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dtorch.ir.params import LinearParam, MatmulParam, OuterParam
from dtorch.ir.placement import Partial, Replicate, Shard
from tests.simulate import MESHES, run_layouts

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(11)
R, P = Replicate(), Partial()


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


_MATMUL_SHAPES = [
    ((5, 3), (3, 4)),
    ((3,), (3, 4)),
    ((5, 3), (3,)),
    ((3,), (3,)),
    ((2, 5, 3), (3, 4)),
    ((2, 5, 3), (2, 3, 4)),
    ((2, 1, 5, 3), (3, 3, 4)),
]


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize(("sa", "sb"), _MATMUL_SHAPES)
def test_matmul_all_layouts(
    sa: tuple[int, ...], sb: tuple[int, ...], mesh_shape: tuple[int, ...]
) -> None:
    a, b = _randn(*sa), _randn(*sb)
    limit = 150 if len(mesh_shape) > 1 else 400
    accepted = run_layouts("matmul", MatmulParam(), [a, b], mesh_shape, [a @ b], limit=limit)
    assert accepted


@pytest.mark.parametrize("mesh_shape", [(2,), (3, 2)])
@pytest.mark.parametrize(("ta", "tb"), [(True, False), (False, True), (True, True)])
def test_matmul_transposed(ta: bool, tb: bool, mesh_shape: tuple[int, ...]) -> None:
    a = _randn(2, 3, 5) if ta else _randn(2, 5, 3)
    b = _randn(4, 3) if tb else _randn(3, 4)
    want = (a.transpose(-1, -2) if ta else a) @ (b.t() if tb else b)
    param = MatmulParam(trans_a=ta, trans_b=tb)
    assert run_layouts("matmul", param, [a, b], mesh_shape, [want], limit=150)


def test_matmul_accepted_set_on_one_mesh_dim() -> None:
    a, b = _randn(5, 3), _randn(3, 4)
    got = {(pa[0], pb[0]) for pa, pb in run_layouts("mm", MatmulParam(), [a, b], (2,), [a @ b])}
    assert got == {
        (R, R), (Shard(0), R), (R, Shard(1)), (Shard(1), Shard(0)), (Shard(1), R), (R, Shard(0)),
        (P, R), (R, P),
    }  # fmt: skip


def test_batched_matmul_chunks_the_replicated_batch() -> None:
    a, b = _randn(3, 5, 2), _randn(3, 2, 4)
    got = {(pa[0], pb[0]) for pa, pb in run_layouts("bmm", MatmulParam(), [a, b], (2,), [a @ b])}
    assert {(Shard(0), R), (R, Shard(0)), (Shard(0), Shard(0)), (Shard(1), R)} <= got
    assert (Shard(1), Shard(0)) not in got  # rows of a with the batch of b


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("x_shape", [(2, 5, 3), (3,)])
def test_linear_all_layouts(
    x_shape: tuple[int, ...], bias: bool, mesh_shape: tuple[int, ...]
) -> None:
    x, w, b = _randn(*x_shape), _randn(4, 3), _randn(4)
    tensors = [x, w, b] if bias else [x, w]
    want = F.linear(x, w, b if bias else None)
    limit = 150 if len(mesh_shape) > 1 else 500
    assert run_layouts("linear", LinearParam(), tensors, mesh_shape, [want], limit=limit)


def test_linear_accepted_set_with_bias() -> None:
    """Column-parallel (w S(0), bias chunked), row-parallel (x S(-1), w S(1) -> P, bias added
    once), batch shards, and Partial x or w (with a Replicate or a Partial bias)."""
    x, w, b = _randn(2, 5, 3), _randn(4, 3), _randn(4)
    accepted = run_layouts("linear", LinearParam(), [x, w, b], (2,), [F.linear(x, w, b)])
    got = {(px[0], pw[0], pb[0]) for px, pw, pb in accepted}
    s0, s1, s2 = Shard(0), Shard(1), Shard(2)
    assert got == {
        (R, R, R), (s0, R, R), (s1, R, R), (R, s0, R), (R, s0, s0), (R, R, s0),
        (s2, s1, R), (s2, R, R), (R, s1, R), (P, R, R), (R, P, R), (s2, s1, P), (s2, R, P),
        (R, s1, P), (P, R, P), (R, P, P),
    }  # fmt: skip


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_outer_all_layouts(mesh_shape: tuple[int, ...]) -> None:
    a, b = _randn(5), _randn(3)
    accepted = run_layouts("outer", OuterParam(), [a, b], mesh_shape, [torch.outer(a, b)])
    if mesh_shape == (2,):
        got = {(pa[0], pb[0]) for pa, pb in accepted}
        assert got == {(R, R), (Shard(0), R), (R, Shard(0)), (P, R), (R, P)}


def test_matmul_int_and_half() -> None:
    a, b = torch.randint(-3, 4, (4, 3), generator=_G), torch.randint(-3, 4, (3, 2), generator=_G)
    assert run_layouts("matmul", MatmulParam(), [a, b], (2,), [a @ b])
    h, g = _randn(4, 3).half(), _randn(3, 2).half()
    assert run_layouts("matmul", MatmulParam(), [h, g], (2,), [h @ g])
