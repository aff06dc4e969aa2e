"""The local kernel of SetItem: ``t[index] = value`` into the device's own shard.

The global index becomes a local one through the shard's offset: an integer index the
device does not hold means it writes nothing; a slice covers the device's elements of it.
A Replicate value is cut to the part of the slot the device writes; a value laid out like
the slot is written as it is. On a Partial tensor the non-owners write zeros.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import SetItemParam, SliceIndex
    >>> from dtorch.ir.placement import Shard
    >>> from dtorch.ir.scalar import Scalar
    >>> from dtorch.ir.span import Span
    >>> t = Operand(1, (4,), torch.float32, init_device_mesh("cpu", 2), (Shard(0),))
    >>> op = Operator(2, "setitem_2", SetItemParam((SliceIndex(1, 4),), Scalar.of(7.0)), (1,), (),
    ...               Span.unknown())
    >>> local = torch.zeros(2)
    >>> setitem_kernel(KernelContext(op, (t,), (), (0, 1)), 1, [local]), local
    ([], tensor([7., 7.]))
"""

from __future__ import annotations

import torch

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import SetItemParam, SliceIndex
from dtorch.ir.placement import Partial, Replicate
from dtorch.ir.rules.indexing import plan_index, sliced_range
from dtorch.kernels.base import KernelContext, LocalKernel, Shards
from dtorch.kernels.local.indexing import local_slice

_Index = int | slice | None


def setitem_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """Write the value (or the param's number) into this device's part of the slot."""
    param = ctx.param
    assert isinstance(param, SetItemParam)
    target = ctx.inputs[0]
    entries, _, _ = plan_index(ctx.operator.name, target.shape, param.index)
    spec = target.shard(device)
    index: list[_Index] = []
    parts: list[tuple[int, int] | None] = []  # per slot dim: (count, first) this device writes
    d = 0
    for entry in entries:
        if entry is None:
            index.append(None)
            parts.append(None)
            continue
        offset, length = spec.offset[d], spec.shape[d]
        d += 1
        if isinstance(entry, SliceIndex):
            count, first = sliced_range(entry, length, offset)
            index.append(local_slice(entry, count, first, offset))
            parts.append((count, first))
        elif offset <= entry < offset + length:
            index.append(entry - offset)
        else:
            return []  # this device holds no element of the slot
    value, whole = _value(ctx, inputs, parts)
    if whole and not spec.partial_owner and any(isinstance(p, Partial) for p in target.placements):
        value = 0.0 if isinstance(value, (int, float)) else torch.zeros_like(value)
    inputs[0][tuple(index)] = value
    return []


def _value(
    ctx: KernelContext, inputs: Shards, parts: list[tuple[int, int] | None]
) -> tuple[torch.Tensor | int | float, bool]:
    """The value this device writes, and whether it is the whole value (a number or a
    Replicate tensor: one copy per Partial group must write it) or the device's own part."""
    param = ctx.param
    assert isinstance(param, SetItemParam)
    if len(inputs) == 1:
        assert param.scalar is not None and param.scalar.value is not None
        return param.scalar.value, True
    value = inputs[1]
    if not all(isinstance(p, Replicate) for p in ctx.inputs[1].placements):
        return value, False  # laid out like the slot already
    lead = len(parts) - value.ndim
    cut = [
        slice(None) if part is None or size == 1 else slice(part[1], part[1] + part[0])
        for part, size in zip(parts[lead:], value.shape, strict=True)
    ]
    return value[tuple(cut)], True


KERNELS: dict[OpKind, LocalKernel] = {OpKind.SetItem: setitem_kernel}
