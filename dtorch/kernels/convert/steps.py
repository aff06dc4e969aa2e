"""Executors of the single-mesh-dim steps, one per step type, in a table.

Collective steps call the ThreadGroup of each line along the step's mesh dim; uneven shards
pass the full extent (read from the next layout) so the group derives torch.chunk lengths.
Local steps touch no group. Every executor returns fresh tensors: the runtime may later write
any output in place, so an output never aliases an input.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> from dtorch.ir.redistribute import plan_redistribute
    >>> from dtorch.kernels.convert.execution import Execution
    >>> mesh = init_device_mesh("cpu", 2)
    >>> plan = plan_redistribute((3,), mesh, (Replicate(),), mesh, (Shard(0),))
    >>> ex = Execution(plan, (0, 1), None, torch.int64)
    >>> run_step(ex, 0, {0: torch.arange(3), 1: torch.arange(3)})
    {0: tensor([0, 1]), 1: tensor([2])}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dtorch.comm.group import ThreadGroup
from dtorch.ir.redistribute import (
    TRANSFER_TYPES,
    AllGather,
    AllReduce,
    AllToAll,
    Gather,
    LocalChunk,
    ReduceScatter,
    Scatter,
    SendRecv,
    ShardToPartial,
    Step,
    ZeroNonOwner,
)
from dtorch.ir.sharding import chunk_bounds
from dtorch.kernels.convert.execution import Execution, Shards
from dtorch.kernels.convert.transfer import run_transfer, transfer_groups

#: ``call(group, {rank: tensor}, line) -> {rank: tensor}`` for one line of a collective step.
LineCall = Callable[
    [ThreadGroup, dict[int, torch.Tensor], tuple[int, ...]], dict[int, torch.Tensor]
]

#: ``run(execution, step index, step, shards) -> shards``.
StepRunner = Callable[[Execution, int, Any, Shards], Shards]


def _along(ex: Execution, index: int, mesh_dim: int, shards: Shards, call: LineCall) -> Shards:
    """Run ``call`` on every line along ``mesh_dim`` holding a device of this caller."""
    mesh = ex.plan.mesh_before(index)
    out: Shards = {}
    for line in ex.lines(mesh, mesh_dim):
        held = {rank: shards[d] for rank, d in enumerate(line) if d in shards}
        result = call(ex.group(mesh.device_kind, line), held, line)
        out.update({line[rank]: tensor for rank, tensor in result.items()})
    return out


def _all_gather(ex: Execution, index: int, step: AllGather, shards: Shards) -> Shards:
    def call(group: ThreadGroup, held: Shards, line: tuple[int, ...]) -> Shards:
        full = ex.spec(index + 1, line[0]).shape[step.tensor_dim]
        return group.all_gather(held, dim=step.tensor_dim, full_size=full)

    return _along(ex, index, step.mesh_dim, shards, call)


def _all_to_all(ex: Execution, index: int, step: AllToAll, shards: Shards) -> Shards:
    def call(group: ThreadGroup, held: Shards, line: tuple[int, ...]) -> Shards:
        full = ex.spec(index + 1, line[0]).shape[step.src_dim]
        return group.all_to_all(held, step.src_dim, step.dst_dim, full_size=full)

    return _along(ex, index, step.mesh_dim, shards, call)


def _reduce_scatter(ex: Execution, index: int, step: ReduceScatter, shards: Shards) -> Shards:
    return _along(
        ex, index, step.mesh_dim, shards, lambda g, held, _: g.reduce_scatter(held, step.tensor_dim)
    )


def _all_reduce(ex: Execution, index: int, step: AllReduce, shards: Shards) -> Shards:
    return _along(ex, index, step.mesh_dim, shards, lambda g, held, _: g.all_reduce(held))


def _coordinate(ex: Execution, index: int, device: int, mesh_dim: int) -> int:
    return ex.plan.mesh_before(index).coordinate_of(device)[mesh_dim]


def _local_chunk(ex: Execution, index: int, step: LocalChunk, shards: Shards) -> Shards:
    parts = ex.plan.mesh_before(index).shape[step.mesh_dim]
    out: Shards = {}
    for d, t in shards.items():
        piece = _coordinate(ex, index, d, step.mesh_dim)
        start, length = chunk_bounds(t.shape[step.tensor_dim], parts, piece)
        view = t.narrow(step.tensor_dim, start, length)
        out[d] = ex.empty(tuple(view.shape), t.device).copy_(view)
    return out


def _zero_non_owner(ex: Execution, index: int, step: ZeroNonOwner, shards: Shards) -> Shards:
    out: Shards = {}
    for d, t in shards.items():
        fresh = ex.empty(tuple(t.shape), t.device)
        out[d] = fresh.copy_(t) if _coordinate(ex, index, d, step.mesh_dim) == 0 else fresh.zero_()
    return out


def _shard_to_partial(ex: Execution, index: int, step: ShardToPartial, shards: Shards) -> Shards:
    """Each shard goes to its place in a zero block of the unsplit extent."""
    out: Shards = {}
    dim = step.tensor_dim
    for d, t in shards.items():
        before, after = ex.spec(index, d), ex.spec(index + 1, d)
        block = ex.empty(after.shape, t.device).zero_()
        block.narrow(dim, before.offset[dim] - after.offset[dim], t.shape[dim]).copy_(t)
        out[d] = block
    return out


_RUNNERS: dict[type[Step], StepRunner] = {
    AllGather: _all_gather,
    AllToAll: _all_to_all,
    ReduceScatter: _reduce_scatter,
    AllReduce: _all_reduce,
    LocalChunk: _local_chunk,
    ZeroNonOwner: _zero_non_owner,
    ShardToPartial: _shard_to_partial,
    **dict.fromkeys(TRANSFER_TYPES, run_transfer),
}


#: The steps that call one group per line along their mesh dim.
_COLLECTIVES = (AllGather, AllToAll, ReduceScatter, AllReduce)


def step_groups(ex: Execution, index: int) -> list[tuple[str, tuple[int, ...]]]:
    """The groups (device kind, device ids) step ``index`` calls for this caller, in order."""
    step = ex.plan.steps[index]
    if isinstance(step, (Scatter, Gather, SendRecv)):
        return transfer_groups(ex, index, step)
    if isinstance(step, _COLLECTIVES):
        mesh = ex.plan.mesh_before(index)
        return [(mesh.device_kind, line) for line in ex.lines(mesh, step.mesh_dim)]
    return []


def run_step(ex: Execution, index: int, shards: Shards) -> Shards:
    """Execute ``ex.plan.steps[index]`` on this caller's shards."""
    step = ex.plan.steps[index]
    return _RUNNERS[type(step)](ex, index, step, shards)
