"""Local kernels of Where, Clamp and Masked.

Python-number operands come from the param: ``where``'s branches become 0-d CPU tensors
(they promote like the numbers), clamp bounds and fill values are passed as numbers.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import ClampParam
    >>> from dtorch.ir.scalar import Scalar
    >>> from dtorch.ir.span import Span
    >>> x = Operand(1, (3,), torch.float32, DeviceMesh("cpu"), ())
    >>> op = Operator(3, "clamp_3", ClampParam(max=Scalar.of(1)), (1,), (2,), Span.unknown())
    >>> clamp_kernel(KernelContext(op, (x,), (x,), (0,)), 0, [torch.tensor([0.5, 2.0, 3.0])])
    [tensor([0.5000, 1.0000, 1.0000])]
"""

from __future__ import annotations

from typing import Any

import torch

from dtorch.ir.opkind import MaskedKind, OpKind
from dtorch.ir.params import ClampParam, MaskedParam, WhereParam
from dtorch.ir.scalar import Scalar
from dtorch.kernels.base import KernelContext, LocalKernel, Shards
from dtorch.kernels.local.copy import written_into
from dtorch.kernels.local.elementwise import floated, overlaps_itself


def where_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``where(cond, x, y)``; a branch the param holds goes as the Python number it is, so
    that it promotes as a number (``where(c, 0.1, float64 t)`` keeps 0.1 in float64)."""
    param = ctx.param
    assert isinstance(param, WhereParam)
    cond, *rest = inputs
    out = ctx.outputs[0].dtype
    if out.is_floating_point:  # the recorded dtype, not this process's default (``floated``)
        rest = floated(rest, out)
    tensors = iter(rest)
    x, y = (_branch(s, out) if s is not None else next(tensors) for s in (param.x, param.y))
    return [torch.where(cond, x, y)]


def _branch(scalar: Scalar, out: torch.dtype) -> Any:
    # a float number alone makes a float result of the default dtype: the recorded one here
    value = scalar.value
    if isinstance(value, float) and out.is_floating_point:
        return torch.tensor(value, dtype=out)
    return value


def clamp_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``clamp`` of the local shard with the param's number bounds; in place, the shard
    clamped itself (the rule has checked that the result keeps its dtype) and returned."""
    param = ctx.param
    assert isinstance(param, ClampParam)
    low = None if param.min is None else param.min.value
    high = None if param.max is None else param.max.value
    if param.in_place:  # a shard sharing memory: clamped whole, then copied in
        x = inputs[0]
        if overlaps_itself(x):
            return [written_into(x, torch.clamp(x, low, high))]
        return [x.clamp_(low, high)]
    out = ctx.outputs[0].dtype
    x = floated(inputs, out)[0] if out.is_floating_point else inputs[0]
    return [torch.clamp(x, low, high)]


def masked_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``masked_fill`` / ``masked_scatter``, in place on the tensor's shard for ``_`` forms."""
    param = ctx.param
    assert isinstance(param, MaskedParam)
    t, mask, *source = inputs
    if param.masked is MaskedKind.SCATTER:
        fn = t.masked_scatter_ if param.in_place else t.masked_scatter
        return [fn(mask, source[0])]
    value = param.value.value if param.value is not None else None
    assert value is not None  # the rule rejects a fill without a value
    fill = t.masked_fill_ if param.in_place else t.masked_fill
    return [fill(mask, value)]


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.Where: where_kernel,
    OpKind.Clamp: clamp_kernel,
    OpKind.Masked: masked_kernel,
}
