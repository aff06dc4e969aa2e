"""Fetching values: a GetTensor operator whose promise the devices settle.

``to_torch_async`` first redistributes a distributed tensor onto its mesh's first device (a
Convert: the same collectives as any redistribution, run by the devices - Shard gathered,
Replicate one copy, Partial summed), then registers a promise under a fresh name, records a
GetTensor operator naming it, and returns a future at once. The device sets a copy of its
value when its stream reaches the operator; a wait for it that times out names the party of
that device (``Runner.waiting_on``: in process mode, the worker's index, pid and devices).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from dtorch.api.future import TensorFuture, tensor_future
from dtorch.api.record import _OWN_FRAMES, redistribute_to
from dtorch.ir.params import GetTensorParam
from dtorch.ir.placement import Replicate
from dtorch.ir.span import caller_span

if TYPE_CHECKING:
    from dtorch.api.handle import TensorBase


def to_torch_async(tensor: TensorBase) -> TensorFuture:
    """A future of ``tensor``'s full value as a torch tensor on the CPU (see the module
    docstring); ``Tensor.to_torch_async``.

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> t = dtorch.arange(4, device_mesh=mesh, placements=[dtorch.Shard(0)])
        >>> to_torch_async(t).get().tolist()
        [0, 1, 2, 3]
    """
    if tensor._operand.mesh.is_distributed:
        first = tensor._operand.mesh.first_device_mesh()
        tensor = redistribute_to(tensor, first, (Replicate(),))
    graph, operand = tensor._graph, tensor._operand
    with graph.promise_name() as name:
        handle, future = tensor_future(graph, name)
        span = caller_span(_OWN_FRAMES)  # a with block adds no frame
        graph.record_system("get_tensor", GetTensorParam(handle), span, (operand.id,))
    runner = graph.runner
    owner = operand.mesh.device_ids[0] % runner.parties  # device d runs on party d % parties
    waiting = functools.partial(runner.waiting_on, (owner,))
    return TensorFuture(future, tensor, graph.executor.settlements.raised, waiting)
