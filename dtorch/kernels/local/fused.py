"""Local kernels of the fused operators: ``dtorch.compiled_op``'s math on the local shards.

The rules keep every dim these operators mix (the rotated feature dim, the normalized dims,
the in-features) whole on each device, so a device's shards compute its output shard; a
Partial x (rotary) or Partial mul and add (layer norm) give the device's term of the sum.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import ApplyRotaryEmbParam
    >>> from dtorch.ir.span import Span
    >>> from dtorch.kernels.base import KernelContext
    >>> a = Operand(1, (2,), torch.float32, DeviceMesh("cpu"), ())
    >>> op = Operator(3, "rotary_3", ApplyRotaryEmbParam(), (1, 1, 1), (2,), Span.unknown())
    >>> ctx = KernelContext(op, (a, a, a), (a,), (0,))
    >>> rotary_kernel(ctx, 0, [torch.tensor([1.0, 2.0]), torch.zeros(2), torch.ones(2)])
    [tensor([-2.,  1.])]
"""

from __future__ import annotations

from dtorch.compiled_op import apply_rotary_emb, layer_norm_mul_add, silu_linear_chunk
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import ApplyRotaryEmbParam, LayerNormMulAddParam
from dtorch.kernels.base import KernelContext, LocalKernel, Shards


def rotary_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The rotary embedding of the local shard of x."""
    param = ctx.param
    assert isinstance(param, ApplyRotaryEmbParam)
    x, cos, sin = inputs
    return [apply_rotary_emb(x, cos, sin, param.interleaved)]


def silu_linear_chunk_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """SwiGLU of the local rows of x with the local (gate, up) rows of the weight."""
    return [silu_linear_chunk(inputs[0], inputs[1])]


def layer_norm_mul_add_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``layer_norm(x) * mul + add`` of the local shards."""
    param = ctx.param
    assert isinstance(param, LayerNormMulAddParam)
    x, mul, add = inputs
    return [layer_norm_mul_add(x, param.normalized_shape, mul, add, param.eps)]


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.ApplyRotaryEmb: rotary_kernel,
    OpKind.SiluLinearChunk: silu_linear_chunk_kernel,
    OpKind.LayerNormMulAdd: layer_norm_mul_add_kernel,
}
