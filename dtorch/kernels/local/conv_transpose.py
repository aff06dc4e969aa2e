"""Local kernels of ConvTranspose and Fold: torch's ``conv_transpose{n}d`` and ``fold`` of
each device's shards (the rules keep every window whole on its device).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import ConvTransposeParam
    >>> from dtorch.ir.span import Span
    >>> mesh = DeviceMesh("cpu")
    >>> x = Operand(1, (1, 1, 2), torch.float32, mesh, ())
    >>> w = Operand(2, (1, 1, 2), torch.float32, mesh, ())
    >>> y = Operand(3, (1, 1, 3), torch.float32, mesh, ())
    >>> param = ConvTransposeParam(strides=(1,), pads=(0,), output_pads=(0,), dilations=(1,))
    >>> op = Operator(3, "conv_transpose1d_3", param, (1, 2), (3,), Span.unknown())
    >>> ctx = KernelContext(op, (x, w), (y,), (0,))
    >>> conv_transpose_kernel(ctx, 0, [torch.ones(1, 1, 2), torch.ones(1, 1, 2)])[0].tolist()
    [[[1.0, 2.0, 1.0]]]
"""

from __future__ import annotations

import torch

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import ConvTransposeParam, FoldParam
from dtorch.ir.rules.conv_transpose import run_conv_transpose, run_fold
from dtorch.kernels.base import KernelContext, LocalKernel, Shards, adds_bias


def conv_transpose_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The transposed convolution of the local shards; the bias added by its owner alone."""
    param = ctx.param
    assert isinstance(param, ConvTransposeParam)
    x, w, *bias = inputs
    b = bias[0] if bias and adds_bias(ctx, device, 2) else None
    if x.numel() == 0 or w.numel() == 0 or 0 in ctx.outputs[0].shape:  # zeros and a bias
        # (no in-channels or images here; or an empty output, which torch's kernel refuses
        # on one thread and makes on several)
        out = torch.zeros(ctx.outputs[0].local_shape(device), dtype=ctx.outputs[0].dtype)
        channel = 1 if x.ndim == len(param.strides) + 2 else 0
        if b is not None and out.numel():
            out += b.reshape(-1, *(1,) * (out.ndim - 1 - channel))
        return [out]
    return [run_conv_transpose(param, x, w, b)]


def fold_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``fold`` of the local blocks (an empty batch shard folds to an empty output)."""
    param = ctx.param
    assert isinstance(param, FoldParam)
    if inputs[0].numel() == 0:
        return [torch.zeros(ctx.outputs[0].local_shape(device), dtype=ctx.outputs[0].dtype)]
    return [run_fold(param, inputs[0])]


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.ConvTranspose: conv_transpose_kernel,
    OpKind.Fold: fold_kernel,
}
