"""Local kernels of Normalization (layer, RMS, group norm) and BatchNorm (eval form).

The rules leave every normalised dim whole on each device (group norm: whole groups of
channels), so each device runs torch's function on its shard, with its own number of groups:
the values are torch's for the full tensor. BatchNorm's per-channel
vectors arrive chunked like the channels of x.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.opkind import NormKind
    >>> from dtorch.ir.params import NormalizationParam
    >>> from dtorch.ir.span import Span
    >>> from dtorch.kernels.base import KernelContext
    >>> x = Operand(1, (1, 2), torch.float32, DeviceMesh("cpu"), ())
    >>> op = Operator(3, "rms_norm_3", NormalizationParam(NormKind.RMS, (2,)), (1,), (2,),
    ...               Span.unknown())
    >>> normalization_kernel(KernelContext(op, (x,), (x,), (0,)), 0, [torch.tensor([[3.0, 4.0]])])
    [tensor([[0.8485, 1.1314]])]
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dtorch.ir.opkind import NormKind, OpKind
from dtorch.ir.params import BatchNormParam, NormalizationParam
from dtorch.kernels.base import KernelContext, LocalKernel, Shards


def _optional(
    inputs: Shards, has_weight: bool, has_bias: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    # weight and bias from the inputs after x (and the statistics), as the flags say
    rest = iter(inputs)
    weight = next(rest) if has_weight else None
    bias = next(rest) if has_bias else None
    return weight, bias


def normalization_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``layer_norm``, ``rms_norm`` or ``group_norm`` of the local shard."""
    param = ctx.param
    assert isinstance(param, NormalizationParam)
    x = inputs[0]
    weight, bias = _optional(inputs[1:], param.has_weight, param.has_bias)
    shape = list(param.normalized_shape)
    if param.norm is NormKind.LAYER:
        eps = 1e-5 if param.eps is None else param.eps
        return [F.layer_norm(x, shape, weight, bias, eps)]
    if param.norm is NormKind.RMS:
        return [F.rms_norm(x, shape, weight, param.eps)]
    eps = 1e-5 if param.eps is None else param.eps
    groups = param.num_groups * x.shape[1] // ctx.inputs[0].shape[1]  # whole groups held here
    if groups == 0:  # an empty chunk of the channels
        return [torch.empty_like(x)]
    # torch.group_norm, not F.group_norm: F's check of "more than 1 value per channel" would
    # judge this shard (one sample of a sharded batch), and the API checked the full tensor
    return [torch.group_norm(x, groups, weight, bias, eps)]


def batch_norm_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` per channel (torch's eval mode)."""
    param = ctx.param
    assert isinstance(param, BatchNormParam)
    x, mean, var = inputs[:3]
    weight, bias = _optional(inputs[3:], param.has_weight, param.has_bias)
    if x.shape[1] == 0:  # an empty chunk of the channels: torch refuses empty weight and bias
        return [torch.empty_like(x)]
    return [F.batch_norm(x, mean, var, weight, bias, False, 0.0, param.eps)]


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.Normalization: normalization_kernel,
    OpKind.BatchNorm: batch_norm_kernel,
}
