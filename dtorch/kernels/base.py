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
from dtorch.ir.placement import Partial

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


def adds_bias(ctx: KernelContext, device: int, bias: int) -> bool:
    """Whether ``device`` adds its shard of input ``bias`` (a bias) to its output: yes, unless
    the output is Partial on a mesh dim where the bias is not, and the device is not at
    coordinate 0 there (the sum over that dim must hold the bias once; the pieces of a bias
    that is Partial there sum to it).

    Example:
        >>> import torch
        >>> from dtorch.ir.mesh import init_device_mesh
        >>> from dtorch.ir.operator import Operator
        >>> from dtorch.ir.params import LinearParam
        >>> from dtorch.ir.placement import Replicate
        >>> from dtorch.ir.span import Span
        >>> mesh = init_device_mesh("cpu", (2, 2))
        >>> def operand(i, *placements):
        ...     return Operand(i, (2,), torch.float32, mesh, placements)
        >>> op = Operator(4, "linear_4", LinearParam(), (1, 2, 3), (4,), Span.unknown())
        >>> b = operand(3, Partial(), Replicate())
        >>> out = operand(4, Partial(), Partial())  # Partial on both mesh dims
        >>> ctx = KernelContext(op, (b, b, b), (out,), (0, 1, 2, 3))
        >>> [adds_bias(ctx, device, 2) for device in range(4)]  # coordinate 0 on mesh dim 1
        [True, False, True, False]
    """
    out = ctx.outputs[0]
    held = ctx.inputs[bias].placements
    coordinate: tuple[int, ...] = ()
    for dim, placement in enumerate(out.placements):
        if isinstance(placement, Partial) and not isinstance(held[dim], Partial):
            coordinate = coordinate or out.mesh.coordinate_of(device)
            if coordinate[dim]:
                return False
    return True
