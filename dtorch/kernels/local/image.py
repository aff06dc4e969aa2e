"""Local kernels of Conv, Pooling, Interpolate and Pad.

The rules refuse shards of the dims these operators slide windows over, so every device holds
whole images of its batch and channel shards and runs torch's call (``dtorch.ir.rules.
image_ops``) on them. A grouped conv whose channels are sharded runs the groups its shard
holds; a bias of a Partial output is added as ``adds_bias`` says, so the sum over devices
holds it once. A device whose shard is empty (uneven batches or channels) makes
its empty output (a conv over no in-channels: zeros) without calling torch.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import PadParam
    >>> from dtorch.ir.span import Span
    >>> x = Operand(1, (1, 3), torch.float32, DeviceMesh("cpu"), ())
    >>> y = Operand(2, (1, 5), torch.float32, DeviceMesh("cpu"), ())
    >>> op = Operator(3, "pad_3", PadParam((1, 1), "reflect"), (1,), (2,), Span.unknown())
    >>> pad_kernel(KernelContext(op, (x,), (y,), (0,)), 0, [torch.tensor([[1.0, 2.0, 3.0]])])
    [tensor([[2., 1., 2., 3., 2.]])]
"""

from __future__ import annotations

import torch

from dtorch.ir.opkind import OperatorFormat, OpKind
from dtorch.ir.params import ConvParam
from dtorch.ir.rules import image_ops
from dtorch.kernels.base import KernelContext, LocalKernel, Shards, adds_bias


def _empty_outputs(ctx: KernelContext, device: int) -> Shards:
    # torch refuses some windows on empty tensors; an empty shard makes empty (zero) outputs
    return [torch.zeros(o.local_shape(device), dtype=o.dtype) for o in ctx.outputs]


def conv_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``conv2d`` of the local shards with the groups this device holds."""
    param = ctx.param
    assert isinstance(param, ConvParam)
    x, w, *bias = inputs
    b = bias[0] if bias and adds_bias(ctx, device, 2) else None
    if x.numel() == 0 or w.numel() == 0:  # no in-channels here: zeros, and its bias piece
        (out,) = _empty_outputs(ctx, device)
        if b is not None and out.numel():
            out += _along_channels(b, out.ndim, param.format)
        return [out]
    groups = x.shape[image_ops.channel_dim(x.ndim, param.format)] // w.shape[1]
    return [image_ops.conv(param, x, w, b, groups)]


def _along_channels(b: torch.Tensor, ndim: int, fmt: OperatorFormat) -> torch.Tensor:
    """The bias ``b`` shaped to broadcast over an output's channel dim."""
    after = ndim - 1 - image_ops.channel_dim(ndim, fmt)
    return b.reshape(-1, *(1,) * after)


def pooling_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """Max (with indices on request), average or adaptive average pooling of the shard."""
    if inputs[0].numel() == 0:
        return _empty_outputs(ctx, device)
    out = image_ops.pool(ctx.param, inputs[0])
    if not isinstance(out, tuple):
        return [out]
    values, indices = out
    return [values, _global_indices(ctx, device, inputs[0], indices)]


def _global_indices(
    ctx: KernelContext, device: int, x: torch.Tensor, indices: torch.Tensor
) -> torch.Tensor:
    """Max pooling's indices into the whole (H, W) plane, from the shard's (a shard of H or W
    holds whole windows: ``spatial.local_window_dims``)."""
    full = ctx.inputs[0]
    if tuple(x.shape[-2:]) == full.shape[-2:]:
        return indices
    top, left = full.shard(device).offset[-2:]
    rows, cols = indices.div(x.shape[-1], rounding_mode="floor"), indices % x.shape[-1]
    return (rows + top) * full.shape[-1] + cols + left


def interpolate_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``interpolate`` of the shard (its spatial dims are whole)."""
    if inputs[0].numel() == 0:
        return _empty_outputs(ctx, device)
    return [image_ops.interpolate(ctx.param, inputs[0])]


def pad_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``pad`` of the shard (its padded dims are whole; a constant pad fills empty ones)."""
    if 0 in ctx.outputs[0].local_shape(device):
        return _empty_outputs(ctx, device)
    return [image_ops.pad(ctx.param, inputs[0])]


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.Conv: conv_kernel,
    OpKind.Pooling: pooling_kernel,
    OpKind.Interpolate: interpolate_kernel,
    OpKind.Pad: pad_kernel,
}
