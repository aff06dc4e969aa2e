"""Repeat, Einsum and SetItem simulated on 1-D, 2-D and 3-D meshes against torch."""

from __future__ import annotations

import pytest
import torch

from dtorch.ir.params import EinsumParam, IndexEntry, RepeatParam, SetItemParam, SliceIndex
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.scalar import Scalar
from tests.simulate import MESHES, python_index, run_layouts

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(29)
R, P = Replicate(), Partial()


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("reps", [(1, 1), (2, 1), (1, 3), (2, 1, 1), (0, 2)])
def test_repeat_all_layouts(reps: tuple[int, ...], mesh_shape: tuple[int, ...]) -> None:
    x = _randn(5, 3)
    accepted = run_layouts("repeat", RepeatParam(reps), [x], mesh_shape, [x.repeat(reps)])
    tiled = {d for d, r in enumerate(reps[len(reps) - 2 :]) if r != 1}
    assert all(Shard(d) not in pl for (pl,) in accepted for d in tiled)


_EQUATIONS = [
    ("ij,jk->ik", [(5, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 5, 3), (2, 3, 4)]),
    ("ij->j", [(5, 3)]),
    ("ij->ji", [(5, 3)]),
    ("i,j->ij", [(5,), (3,)]),
    ("ii->i", [(3, 3)]),
    ("...ij,jk", [(2, 5, 3), (3, 4)]),
    ("ij,ij,j->i", [(4, 3), (4, 3), (3,)]),
    ("ij,kj->ik", [(5, 1), (4, 3)]),
]


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize(("equation", "shapes"), _EQUATIONS)
def test_einsum_all_layouts(
    equation: str, shapes: list[tuple[int, ...]], mesh_shape: tuple[int, ...]
) -> None:
    tensors = [_randn(*s) for s in shapes]
    want = torch.einsum(equation, *tensors)
    limit = 80 if len(mesh_shape) > 1 else 300
    accepted = run_layouts(
        "einsum", EinsumParam(equation), tensors, mesh_shape, [want], limit=limit
    )
    assert accepted


def test_einsum_accepted_set_like_matmul() -> None:
    a, b = _randn(5, 3), _randn(3, 4)
    accepted = run_layouts("einsum", EinsumParam("ij,jk->ik"), [a, b], (2,), [a @ b])
    got = {(pa[0], pb[0]) for pa, pb in accepted}
    s0, s1 = Shard(0), Shard(1)
    assert got == {(R, R), (s0, R), (R, s1), (s1, s0), (s1, R), (R, s0), (P, R), (R, P)}


_SLOTS: list[tuple[IndexEntry, ...]] = [
    (1,),
    (SliceIndex(2, 7),),
    (SliceIndex(0, 8, 3), 2),
    (SliceIndex(0, 8), SliceIndex(1, 3)),
    (None, 5),
]


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("index", _SLOTS)
def test_setitem_number_all_layouts(
    index: tuple[IndexEntry, ...], mesh_shape: tuple[int, ...]
) -> None:
    t = _randn(8, 4)
    want = t.clone()
    want[python_index(index)] = 2.5
    param = SetItemParam(index, Scalar.of(2.5))
    accepted = run_layouts("setitem", param, [t], mesh_shape, [], after=[(0, want)])
    assert len(accepted) == 4 ** len(mesh_shape)  # any layout of t, Partial included


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("index", _SLOTS)
def test_setitem_tensor_all_layouts(
    index: tuple[IndexEntry, ...], mesh_shape: tuple[int, ...]
) -> None:
    t = _randn(8, 4)
    slot = t[python_index(index)].shape
    for value in (_randn(*slot), _randn(*slot[1:])):
        want = t.clone()
        want[python_index(index)] = value
        param = SetItemParam(index)
        accepted = run_layouts(
            "setitem", param, [t, value], mesh_shape, [], after=[(0, want)], limit=150
        )
        assert ((R,) * len(mesh_shape), (R,) * len(mesh_shape)) in accepted


def test_setitem_value_laid_out_like_the_slot() -> None:
    t, v = _randn(8, 4), _randn(8, 2)
    want = t.clone()
    want[:, 1:3] = v
    index = (SliceIndex(0, 8), SliceIndex(1, 3))
    accepted = run_layouts("setitem", SetItemParam(index), [t, v], (2,), [], after=[(0, want)])
    got = {(a[0], b[0]) for a, b in accepted}
    assert {(Shard(0), Shard(0)), (P, P), (Shard(0), R), (P, R), (R, R)} <= got
    assert (R, Shard(0)) not in got and (R, P) not in got
