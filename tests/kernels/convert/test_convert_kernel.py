"""convert_kernel against torch on the full tensor: the transition tables of the planner's
tests, on one caller holding every device and on devices dealt over 2 and 3 threads."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dtorch.errors import KernelError
from dtorch.ir.mesh import DeviceMesh, init_device_mesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.params import ContiguousParam
from dtorch.ir.placement import Partial, Placement, Replicate, Shard
from dtorch.ir.span import Span
from dtorch.kernels.base import KernelContext
from dtorch.kernels.convert import convert_kernel
from tests.ir.test_redistribute_interpreter import meshes, placements_for, tensor_shapes
from tests.ir.test_redistribute_plans import CROSS, TABLE
from tests.kernels.convert.convert_harness import (
    convert_and_check,
    convert_context,
    run_convert,
)

SHAPES = [(4, 4, 4), (7, 5, 3), (3, 1, 2)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("callers", [1, 2, 3])
@pytest.mark.parametrize("shape", SHAPES, ids=["even", "uneven", "tiny"])
@pytest.mark.parametrize(("mesh", "src", "dst", "counts"), TABLE, ids=repr)
def test_same_mesh_table(
    mesh: DeviceMesh,
    src: tuple[Placement, ...],
    dst: tuple[Placement, ...],
    counts: dict[str, int],
    shape: tuple[int, ...],
    callers: int,
) -> None:
    convert_and_check(shape, (mesh, src), (mesh, dst), callers=callers)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("callers", [1, 2, 3])
@pytest.mark.parametrize("shape", [(8, 8), (5, 3)], ids=["even", "uneven"])
@pytest.mark.parametrize(("a", "src", "b", "dst", "counts"), CROSS, ids=repr)
def test_cross_mesh_table(
    a: DeviceMesh,
    src: tuple[Placement, ...],
    b: DeviceMesh,
    dst: tuple[Placement, ...],
    counts: dict[str, int],
    shape: tuple[int, ...],
    callers: int,
) -> None:
    convert_and_check(shape, (a, src), (b, dst), callers=callers)


@pytest.mark.timeout(90)
@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    mesh=meshes(min_ndim=1),
    shape=tensor_shapes,
    callers=st.integers(1, 3),
    seed=st.integers(0, 99),
)
def test_random_same_mesh_transitions(
    data: st.DataObject, mesh: DeviceMesh, shape: tuple[int, ...], callers: int, seed: int
) -> None:
    src = data.draw(placements_for(mesh.ndim, len(shape)))
    dst = data.draw(placements_for(mesh.ndim, len(shape)))
    convert_and_check(shape, (mesh, src), (mesh, dst), callers=callers, seed=seed)


@pytest.mark.timeout(90)
@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    a=meshes(),
    b=meshes(),
    shape=tensor_shapes,
    callers=st.integers(1, 3),
    seed=st.integers(0, 99),
)
def test_random_cross_mesh_transitions(
    data: st.DataObject,
    a: DeviceMesh,
    b: DeviceMesh,
    shape: tuple[int, ...],
    callers: int,
    seed: int,
) -> None:
    src = data.draw(placements_for(a.ndim, len(shape)))
    dst = data.draw(placements_for(b.ndim, len(shape)))
    convert_and_check(shape, (a, src), (b, dst), callers=callers, seed=seed)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.float64])
def test_dtypes_are_kept(dtype: torch.dtype) -> None:
    """Small integer values are exact in every dtype, so sums compare exactly."""
    mesh = init_device_mesh("cpu", (2, 2))
    convert_and_check(
        (6, 5),
        (mesh, (Partial(), Shard(0))),
        (mesh, (Shard(1), Replicate())),
        callers=2,
        dtype=dtype,
    )


MESH = init_device_mesh("cpu", 2)


def _ctx(
    src: tuple[Placement, ...], dst: tuple[Placement, ...]
) -> tuple[Operator, Operand, Operand]:
    return convert_context((4,), torch.int64, (MESH, src), (MESH, dst))


@pytest.mark.timeout(30)
def test_an_empty_plan_returns_fresh_tensors() -> None:
    op, a, b = _ctx((Shard(0),), (Shard(0),))
    inputs = {0: [torch.tensor([0, 1])], 1: [torch.tensor([2, 3])]}
    out = convert_kernel(KernelContext(op, (a,), (b,), (0, 1)), inputs)
    for d in (0, 1):
        assert torch.equal(out[d][0], inputs[d][0])
        assert out[d][0].data_ptr() != inputs[d][0].data_ptr()


@pytest.mark.timeout(30)
def test_local_plans_need_no_group_manager() -> None:
    op, a, b = _ctx((Replicate(),), (Shard(0),))
    full = torch.arange(4)
    out = convert_kernel(KernelContext(op, (a,), (b,), (0, 1)), {0: [full], 1: [full.clone()]})
    assert torch.equal(out[0][0], full[:2]) and torch.equal(out[1][0], full[2:])


@pytest.mark.timeout(30)
def test_communication_without_a_manager_is_a_clear_error() -> None:
    op, a, b = _ctx((Shard(0),), (Replicate(),))
    inputs = {0: [torch.tensor([0, 1])], 1: [torch.tensor([2, 3])]}
    with pytest.raises(KernelError, match="needs a ThreadGroupManager"):
        convert_kernel(KernelContext(op, (a,), (b,), (0, 1)), inputs)


@pytest.mark.timeout(30)
def test_a_wrong_input_shard_is_a_clear_error() -> None:
    op, a, b = _ctx((Shard(0),), (Replicate(),))
    inputs = {0: [torch.tensor([0, 1, 2])], 1: [torch.tensor([3])]}
    with pytest.raises(
        KernelError, match=r"device 0 holds torch.int64 \[3\].*needs torch.int64 \[2\]"
    ):
        convert_kernel(KernelContext(op, (a,), (b,), (0, 1)), inputs)


@pytest.mark.timeout(30)
def test_a_non_convert_operator_is_refused() -> None:
    _, a, b = _ctx((Shard(0),), (Shard(0),))
    other = Operator(9, "contiguous_9", ContiguousParam(), (1,), (2,), Span.unknown())
    with pytest.raises(KernelError, match="runs Convert operators"):
        convert_kernel(KernelContext(other, (a,), (b,), (0, 1)), {0: [], 1: []})


@pytest.mark.timeout(60)
def test_devices_spread_one_per_thread_on_a_3d_mesh() -> None:
    """Eight callers of one device each: every group has as many callers as ranks."""
    mesh = init_device_mesh("cpu", (2, 2, 2))
    gen = torch.Generator().manual_seed(3)
    full = torch.randint(-100, 100, (5, 6, 7), generator=gen)
    out = run_convert(
        full,
        (mesh, (Shard(0), Partial(), Shard(2))),
        (mesh, (Shard(2), Shard(1), Shard(1))),
        8,
        gen,
    )
    assert sorted(out) == list(range(8))
