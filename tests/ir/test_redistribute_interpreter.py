"""Every plan is correct: a pure-torch interpreter runs it on per-device locals.

A random full tensor (int64, so sums are exact) is sharded per the source layout with
dtorch.ir.sharding; Partial mesh dims get random summands (tests/sharding_oracle.py). Each
step is applied with plain torch (cat / chunk / sum / zeros) on the list of locals, and after
every step each device must hold its shard of the same full tensor under the plan's layout for
that point (the sum over Partial mesh dims, for Partial layouts). The oracle is the full tensor
sliced by torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Partial, Placement, Replicate, Shard
from dtorch.ir.redistribute import (
    TRANSFER_TYPES,
    AllGather,
    AllReduce,
    AllToAll,
    LocalChunk,
    RedistributePlan,
    ReduceScatter,
    ShardToPartial,
    Step,
    ZeroNonOwner,
    plan_redistribute,
)
from tests.sharding_oracle import Locals, check_layout, distribute, spec

# --- the interpreter ---------------------------------------------------------------------


def chunks(t: torch.Tensor, k: int, dim: int) -> list[torch.Tensor]:
    """torch.chunk, padded with empty trailing pieces to exactly k."""
    pieces = list(torch.chunk(t, k, dim)) if t.shape[dim] else []
    return pieces + [t.narrow(dim, t.shape[dim], 0)] * (k - len(pieces))


class Interp:
    """Runs plan steps on {device: local} with plain torch."""

    def __init__(self, plan: RedistributePlan) -> None:
        self.plan = plan

    def group(self, mesh: DeviceMesh, device: int, mesh_dim: int) -> tuple[list[int], int]:
        return list(mesh.group_of(device, mesh_dim)), mesh.coordinate_of(device)[mesh_dim]

    def per_device(
        self, mesh: DeviceMesh, old: Locals, mesh_dim: int, fn: Callable[..., torch.Tensor]
    ) -> Locals:
        new = {}
        for d in mesh.device_ids:
            members, rank = self.group(mesh, d, mesh_dim)
            new[d] = fn([old[g] for g in members], rank, old[d])
        return new

    def run(self, index: int, step: Step, old: Locals) -> Locals:
        mesh = self.plan.mesh_before(index)
        if isinstance(step, TRANSFER_TYPES):
            return self.transfer(index, step, old)
        return self.per_device(mesh, old, step.mesh_dim, self.local_fn(step, mesh))  # type: ignore[attr-defined]

    def local_fn(self, step: Step, mesh: DeviceMesh) -> Callable[..., torch.Tensor]:
        k = mesh.shape[step.mesh_dim]  # type: ignore[attr-defined]
        if isinstance(step, AllGather):
            return lambda g, r, x: torch.cat(g, step.tensor_dim)
        if isinstance(step, AllToAll):
            return lambda g, r, x: torch.cat(
                [chunks(y, k, step.dst_dim)[r] for y in g], step.src_dim
            )
        if isinstance(step, ReduceScatter):
            return lambda g, r, x: torch.stack([chunks(y, k, step.tensor_dim)[r] for y in g]).sum(0)
        if isinstance(step, AllReduce):
            return lambda g, r, x: torch.stack(g).sum(0)
        if isinstance(step, LocalChunk):
            return lambda g, r, x: chunks(x, k, step.tensor_dim)[r].clone()
        if isinstance(step, ZeroNonOwner):
            return lambda g, r, x: x.clone() if r == 0 else torch.zeros_like(x)
        if isinstance(step, ShardToPartial):
            return lambda g, r, x: pad_into_block(g, r, step.tensor_dim)
        raise AssertionError(f"unknown step {step!r}")

    def transfer(self, index: int, step: Step, old: Locals) -> Locals:
        plan = self.plan
        before, after = plan.layouts[index], plan.layouts[index + 1]
        new = {}
        for d in plan.dst_mesh.device_ids:
            new[d] = torch.zeros(spec(plan.shape, plan.dst_mesh, after, d).shape, dtype=torch.int64)
        for move in step.moves:  # type: ignore[attr-defined]
            s_off = spec(plan.shape, plan.src_mesh, before, move.src_device).offset
            d_off = spec(plan.shape, plan.dst_mesh, after, move.dst_device).offset
            src = old[move.src_device][region(move.start, move.size, s_off)]
            new[move.dst_device][region(move.start, move.size, d_off)] = src
        return new


def pad_into_block(group: list[torch.Tensor], rank: int, dim: int) -> torch.Tensor:
    sizes = [g.shape[dim] for g in group]
    shape = list(group[rank].shape)
    shape[dim] = sum(sizes)
    out = torch.zeros(shape, dtype=group[rank].dtype)
    out.narrow(dim, sum(sizes[:rank]), sizes[rank]).copy_(group[rank])
    return out


def region(start: Sequence[int], size: Sequence[int], offset: Sequence[int]) -> tuple[slice, ...]:
    return tuple(slice(s - o, s - o + n) for s, n, o in zip(start, size, offset, strict=True))


def run_and_check(
    shape: tuple[int, ...],
    src_mesh: DeviceMesh,
    src: Sequence[Placement],
    dst_mesh: DeviceMesh,
    dst: Sequence[Placement],
    *,
    seed: int = 0,
) -> RedistributePlan:
    gen = torch.Generator().manual_seed(seed)
    full = torch.randint(-100, 100, shape, generator=gen, dtype=torch.int64)
    plan = plan_redistribute(shape, src_mesh, src, dst_mesh, dst)
    locals_ = distribute(full, src_mesh, plan.src, gen)
    interp = Interp(plan)
    check_layout(full, src_mesh, plan.layouts[0], locals_)
    for i, step in enumerate(plan.steps):
        locals_ = interp.run(i, step, locals_)
        check_layout(full, plan.mesh_before(i + 1), plan.layouts[i + 1], locals_)
    check_layout(full, dst_mesh, plan.dst, locals_)
    return plan


# --- hypothesis strategies ---------------------------------------------------------------


@st.composite
def meshes(draw: st.DrawFn, min_ndim: int = 0) -> DeviceMesh:
    ndim = draw(st.integers(min_ndim, 3))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    if math.prod(shape) > 12:
        shape = tuple(min(s, 2) for s in shape)
    n = math.prod(shape)
    ids = draw(st.lists(st.integers(0, 15), min_size=n, max_size=n, unique=True))
    return DeviceMesh.from_ids("cpu", shape, ids)


@st.composite
def placements_for(draw: st.DrawFn, mesh_ndim: int, tensor_ndim: int) -> tuple[Placement, ...]:
    kinds = ["R", "P"] + (
        [f"S{d}" for d in range(-tensor_ndim, tensor_ndim)] if tensor_ndim else []
    )
    chosen = draw(st.lists(st.sampled_from(kinds), min_size=mesh_ndim, max_size=mesh_ndim))
    out: list[Placement] = [
        Replicate() if k == "R" else Partial() if k == "P" else Shard(int(k[1:])) for k in chosen
    ]
    return with_random_nesting(draw, out, tensor_ndim)


def with_random_nesting(
    draw: st.DrawFn, out: list[Placement], tensor_ndim: int
) -> tuple[Placement, ...]:
    for dim in range(tensor_ndim):
        mesh_dims = [
            m for m, p in enumerate(out) if isinstance(p, Shard) and p.dim % tensor_ndim == dim
        ]
        if len(mesh_dims) > 1 and draw(st.booleans()):
            order = draw(st.permutations(range(len(mesh_dims))))
            for m, pos in zip(mesh_dims, order, strict=True):
                out[m] = Shard(out[m].dim, pos)  # type: ignore[attr-defined]
    return tuple(out)


tensor_shapes = st.lists(st.integers(0, 7), min_size=0, max_size=3).map(tuple)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.timeout(60)
@SETTINGS
@given(data=st.data(), mesh=meshes(min_ndim=1), shape=tensor_shapes, seed=st.integers(0, 99))
def test_same_mesh_plans_are_correct(
    data: st.DataObject, mesh: DeviceMesh, shape: tuple[int, ...], seed: int
) -> None:
    src = data.draw(placements_for(mesh.ndim, len(shape)))
    dst = data.draw(placements_for(mesh.ndim, len(shape)))
    run_and_check(shape, mesh, src, mesh, dst, seed=seed)


@pytest.mark.timeout(60)
@SETTINGS
@given(data=st.data(), a=meshes(), b=meshes(), shape=tensor_shapes, seed=st.integers(0, 99))
def test_cross_mesh_plans_are_correct(
    data: st.DataObject, a: DeviceMesh, b: DeviceMesh, shape: tuple[int, ...], seed: int
) -> None:
    src = data.draw(placements_for(a.ndim, len(shape)))
    dst = data.draw(placements_for(b.ndim, len(shape)))
    run_and_check(shape, a, src, b, dst, seed=seed)


@pytest.mark.timeout(60)
@settings(max_examples=60, deadline=None)
@given(data=st.data(), mesh=meshes(min_ndim=1), shape=tensor_shapes, seed=st.integers(0, 99))
def test_equal_shape_meshes_relay_partial_values(
    data: st.DataObject, mesh: DeviceMesh, shape: tuple[int, ...], seed: int
) -> None:
    other = DeviceMesh.from_ids("cpu", mesh.shape, [i + 16 for i in mesh.device_ids])
    src = data.draw(placements_for(mesh.ndim, len(shape)))
    dst = data.draw(placements_for(mesh.ndim, len(shape)))
    run_and_check(shape, mesh, src, other, dst, seed=seed)


# --- the interpreter itself can fail -----------------------------------------------------


def test_interpreter_catches_a_wrong_plan() -> None:
    """A plan with a step swapped for a wrong one must fail the check (the check has teeth)."""
    mesh = DeviceMesh.from_ids("cpu", (2,), (0, 1))
    plan = plan_redistribute((4, 2), mesh, (Shard(0),), mesh, (Replicate(),))
    wrong = RedistributePlan(
        plan.shape, mesh, plan.src, mesh, plan.dst, (AllGather(0, 1),), plan.layouts
    )
    gen = torch.Generator().manual_seed(0)
    full = torch.randint(-100, 100, (4, 2), generator=gen, dtype=torch.int64)
    got = Interp(wrong).run(0, wrong.steps[0], distribute(full, mesh, plan.src, gen))
    with pytest.raises(AssertionError):
        check_layout(full, mesh, plan.dst, got)
