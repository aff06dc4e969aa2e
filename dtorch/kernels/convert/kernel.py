"""``convert_kernel``: the GroupKernel of OpKind.Convert (redistribute, spec 002 section 2.5).

It plans with ``dtorch.ir.redistribute.plan_redistribute`` (cached: one plan per layout pair)
and runs the steps in order for every device this caller holds: collectives through the
caller's ThreadGroupManager, transfers between meshes through two-device groups. The input
operand is the source layout, ``ConvertParam(mesh, placements)`` the destination.

Example (one caller holding every device):
    >>> import torch
    >>> from dtorch.comm.group import CommTopology, ThreadGroupManager
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import ConvertParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> from dtorch.ir.span import Span
    >>> mesh = init_device_mesh("cpu", 2)
    >>> a = Operand(1, (4,), torch.int64, mesh, (Shard(0),))
    >>> b = Operand(2, (4,), torch.int64, mesh, (Replicate(),))
    >>> op = Operator(3, "redistribute_3", ConvertParam(mesh, b.placements), (1,), (2,),
    ...               Span.unknown())
    >>> with ThreadGroupManager(CommTopology.threads([[0, 1]])) as groups:
    ...     ctx = KernelContext(op, (a,), (b,), (0, 1), groups)
    ...     out = convert_kernel(ctx, {0: [torch.tensor([0, 1])], 1: [torch.tensor([2, 3])]})
    >>> out[1]
    [tensor([0, 1, 2, 3])]
"""

from __future__ import annotations

import torch

from dtorch.errors import KernelError
from dtorch.ir.params import ConvertParam
from dtorch.ir.redistribute import RedistributePlan, plan_redistribute
from dtorch.kernels.base import KernelContext
from dtorch.kernels.convert.execution import Execution, Shards
from dtorch.kernels.convert.steps import run_step, step_groups


def _param(ctx: KernelContext) -> ConvertParam:
    param = ctx.param
    if not isinstance(param, ConvertParam):
        raise KernelError(f"convert_kernel runs Convert operators, got {ctx.operator.describe()}")
    return param


def _sources(ex: Execution, inputs: dict[int, list[torch.Tensor]]) -> Shards:
    """The held source shards, checked against the source layout before anything waits."""
    shards: Shards = {}
    for d in ex.held(ex.plan.src_mesh):
        if len(inputs.get(d, ())) != 1:
            raise KernelError(f"Convert: device {d} of the source mesh needs one input shard")
        tensor, expected = inputs[d][0], ex.spec(0, d).shape
        if tuple(tensor.shape) != expected or tensor.dtype != ex.dtype:
            raise KernelError(
                f"Convert: device {d} holds {tensor.dtype} {list(tensor.shape)}, the source "
                f"layout {ex.plan.describe().splitlines()[0]} needs {ex.dtype} {list(expected)}"
            )
        shards[d] = tensor
    return shards


def open_groups(ex: Execution) -> None:
    """Open every group the plan calls before anything can fail, in the order the steps call
    them (the one global order every caller follows, so no opening waits in a cycle): a
    caller that fails at any later point holds the store of every group a peer may be
    waiting in, so the runtime can tell them all (``ThreadGroupManager.fail_scope``)."""
    if ex.groups is None:
        return
    for index in range(len(ex.plan.steps)):
        for kind, ids in step_groups(ex, index):
            ex.group(kind, ids)


def run_plan(ex: Execution, shards: Shards) -> Shards:
    """Every step of the plan in order; the held destination shards, never aliasing inputs."""
    if not ex.plan.steps:
        return {d: ex.empty(tuple(t.shape), t.device).copy_(t) for d, t in shards.items()}
    for index in range(len(ex.plan.steps)):
        shards = run_step(ex, index, shards)
    return shards


def convert_kernel(
    ctx: KernelContext, inputs: dict[int, list[torch.Tensor]]
) -> dict[int, list[torch.Tensor]]:
    """Redistribute the input's shards on this caller's devices to ``ConvertParam``'s layout.

    Returns one output shard for every held device of the destination mesh and an empty
    list for the other held devices (those only in the source mesh).
    """
    param, source = _param(ctx), ctx.inputs[0]
    plan: RedistributePlan = plan_redistribute(
        source.shape, source.mesh, source.placements, param.mesh, param.placements
    )
    ex = Execution(plan, ctx.devices, ctx.groups, source.dtype)
    open_groups(ex)
    result = run_plan(ex, _sources(ex, inputs))
    return {d: [result[d]] if d in param.mesh else [] for d in ctx.devices}
