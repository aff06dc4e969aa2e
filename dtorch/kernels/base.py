"""The kernel seam: what a device runs for one operator, and the context it runs in.

A *local* kernel computes one device's output shards from that device's input shards with
torch calls. A *group* kernel (redistribution, cross-mesh copy, gathers) is called once per
caller for every device that caller holds, because its devices talk to each other: a thread
that holds several logical devices must never wait on itself. The runner looks kernels up in
``dtorch.kernels.table`` by OpKind.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import ContiguousParam
    >>> from dtorch.ir.span import Span
    >>> a = Operand(1, (2,), torch.float32, DeviceMesh("cpu"), ())
    >>> ctx = KernelContext(Operator(5, "contiguous_5", ContiguousParam(), (1,), (2,),
    ...                              Span.unknown()), (a,), (a,), (0,))
    >>> ctx.param
    ContiguousParam(copy=False, view=False)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from dtorch.ir.operator import Operand, Operator
from dtorch.ir.params import OpParam

if TYPE_CHECKING:
    from dtorch.comm.group import ThreadGroupManager


@dataclass(slots=True)
class KernelContext:
    """Everything a kernel may read besides its input shards (treat it as read-only).

    ``devices`` are the device ids this caller runs the operator for. ``memo`` is scratch
    shared by those devices for this one operator (e.g. a full random tensor generated once and
    sliced per device). ``groups`` is the caller's ThreadGroupManager (None where the operator
    needs none, e.g. in unit tests of local kernels). Not frozen: one is built per operator on
    the hot path, and a frozen dataclass costs four times as much to build.
    """

    operator: Operator
    inputs: tuple[Operand, ...]
    outputs: tuple[Operand, ...]
    devices: tuple[int, ...]
    groups: ThreadGroupManager | None = None
    memo: dict[str, Any] | None = None  # created by the kernel that wants one (rare)

    @property
    def param(self) -> OpParam:
        return self.operator.param


#: One device's shards of a kernel's inputs or outputs, in operand order.
Shards = list[torch.Tensor]

#: One device's outputs from its inputs: ``kernel(ctx, device_id, inputs) -> outputs``.
LocalKernel = Callable[[KernelContext, int, Shards], Shards]

#: Every local device at once: ``kernel(ctx, {device: inputs}) -> {device: outputs}``. A device
#: that holds no shard of an input or output gets an empty list there.
GroupKernel = Callable[
    [KernelContext, dict[int, list[torch.Tensor]]], dict[int, list[torch.Tensor]]
]
