"""Clone, Cast and Copy simulated on 1-D, 2-D and 3-D meshes against torch."""

from __future__ import annotations

import pytest
import torch

from dtorch.ir.params import CastParam, CloneParam, CopyParam
from dtorch.ir.placement import Partial, Replicate, Shard
from tests.simulate import MESHES, run_layouts

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(9)
R, P = Replicate(), Partial()


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_clone_all_layouts(mesh_shape: tuple[int, ...]) -> None:
    x = torch.randn((5, 3), generator=_G)
    accepted = run_layouts("clone", CloneParam(), [x], mesh_shape, [x.clone()])
    assert len(accepted) == 4 ** len(mesh_shape)


_CASTS = [
    (torch.float32, torch.float64, True),
    (torch.float32, torch.int32, False),
    (torch.int16, torch.float32, False),  # int16 parts wrap at 16 bits, float ones do not
    (torch.int32, torch.int16, True),  # narrowing wraps alike: the Partial is kept
    (torch.int64, torch.float32, False),  # parts rounded each: refused
    (torch.int32, torch.int8, True),
    (torch.float32, torch.bool, False),
    (torch.bool, torch.float32, False),
]


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize(("src", "dst", "linear"), _CASTS)
def test_cast_all_layouts(
    src: torch.dtype, dst: torch.dtype, linear: bool, mesh_shape: tuple[int, ...]
) -> None:
    x = (torch.randn((5, 3), generator=_G) * 4).to(src)
    accepted = run_layouts("to", CastParam(dst), [x], mesh_shape, [x.to(dst)], limit=100)
    partial = any(P in pl for (pl,) in accepted)
    assert partial == (linear and src != torch.bool)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize(
    ("dst_shape", "src_shape", "src_dtype"),
    [((5, 3), (5, 3), torch.float32), ((5, 3), (3,), torch.float64), ((5, 3), (5, 1), torch.int64)],
)
def test_copy_all_layouts(
    dst_shape: tuple[int, ...],
    src_shape: tuple[int, ...],
    src_dtype: torch.dtype,
    mesh_shape: tuple[int, ...],
) -> None:
    dst = torch.randn(dst_shape, generator=_G)
    src = (torch.randn(src_shape, generator=_G) * 3).to(src_dtype)
    want = dst.clone().copy_(src)
    accepted = run_layouts(
        "copy_", CopyParam(), [dst, src], mesh_shape, [], after=[(0, want)], limit=120
    )
    assert accepted
    for pd, ps in accepted:  # dst is never redistributed: src follows dst
        assert all(not (a == R and b != R) for a, b in zip(pd, ps, strict=True))


def test_copy_accepted_set_on_one_mesh_dim() -> None:
    dst, src = torch.randn((4, 3), generator=_G), torch.randn((4, 3), generator=_G)
    want = src.clone()
    accepted = run_layouts("copy_", CopyParam(), [dst, src], (2,), [], after=[(0, want)])
    got = {(a[0], b[0]) for a, b in accepted}
    s0, s1 = Shard(0), Shard(1)
    assert got == {(R, R), (s0, s0), (s1, s1), (s0, R), (s1, R), (P, P)}
