"""Local kernels of the shape operators: View, Reshape, Flatten, Squeeze, Unsqueeze,
Transpose, Permute, Expand, Contiguous, ViewPlacements.

Views that merge or split dims reshape the local shard to the output's LOCAL shape (the
rule guarantees that this is the device's chunk of the global view); squeeze drops only the
dims that are size 1 globally (a shard can be size 1 locally without being squeezable).
Kernels return views where torch does.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import SqueezeParam
    >>> from dtorch.ir.placement import Shard
    >>> from dtorch.ir.span import Span
    >>> mesh = init_device_mesh("cpu", 3)
    >>> x = Operand(1, (1, 3), torch.float32, mesh, (Shard(1),))
    >>> y = Operand(2, (3,), torch.float32, mesh, (Shard(0),))
    >>> op = Operator(3, "squeeze_3", SqueezeParam((0, 1)), (1,), (2,), Span.unknown())
    >>> squeeze_kernel(KernelContext(op, (x,), (y,), (0,)), 0, [torch.ones(1, 1)])[0].shape
    torch.Size([1])
"""

from __future__ import annotations

import torch

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import (
    ExpandParam,
    PermuteParam,
    SqueezeParam,
    TransposeParam,
    UnsqueezeParam,
)
from dtorch.kernels.base import KernelContext, LocalKernel, Shards


def reshape_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``view``/``reshape``/``flatten`` to the output's local shape: a view where torch makes
    one. dtorch values have no user-visible strides (``Tensor.is_contiguous()`` is always
    True), so ``view`` of a shard that torch could not view without a copy (e.g. after a
    transpose) copies instead of failing on the device."""
    return [inputs[0].reshape(ctx.outputs[0].local_shape(device))]


def squeeze_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """Drop the listed dims that are size 1 in the GLOBAL tensor."""
    param = ctx.param
    assert isinstance(param, SqueezeParam)
    shape = ctx.inputs[0].shape
    dims = tuple(d % len(shape) for d in param.dims if shape and shape[d] == 1)
    return [torch.squeeze(inputs[0], dims) if dims else inputs[0].view_as(inputs[0])]


def unsqueeze_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """A new size-1 dim at ``param.dim`` of the local shard."""
    param = ctx.param
    assert isinstance(param, UnsqueezeParam)
    return [inputs[0].unsqueeze(param.dim)]


def transpose_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The local shard with ``param.dim0`` and ``param.dim1`` swapped."""
    param = ctx.param
    assert isinstance(param, TransposeParam)
    return [inputs[0].transpose(param.dim0, param.dim1)]


def permute_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The local shard's dims in ``param.dims`` order."""
    param = ctx.param
    assert isinstance(param, PermuteParam)
    return [inputs[0].permute(param.dims)]


def expand_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``expand`` to the output's local shape (sharded dims keep their local sizes)."""
    assert isinstance(ctx.param, ExpandParam)
    return [inputs[0].expand(ctx.outputs[0].local_shape(device))]


def contiguous_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The local shard in contiguous memory."""
    return [inputs[0].contiguous()]


def keep_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """ViewPlacements: the local shard as it is (a view of it, like ``squeeze`` of nothing)."""
    return [inputs[0].view_as(inputs[0])]


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.View: reshape_kernel,
    OpKind.ViewPlacements: keep_kernel,
    OpKind.Reshape: reshape_kernel,
    OpKind.Flatten: reshape_kernel,
    OpKind.Squeeze: squeeze_kernel,
    OpKind.Unsqueeze: unsqueeze_kernel,
    OpKind.Transpose: transpose_kernel,
    OpKind.Permute: permute_kernel,
    OpKind.Expand: expand_kernel,
    OpKind.Contiguous: contiguous_kernel,
}
