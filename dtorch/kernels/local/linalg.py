"""Local kernels of Matmul, Linear, Outer and Einsum.

The rules have already made the operands' local shards line up (batch shards chunked alike,
contracted dims sharded alike), so each device multiplies its shards. Linear adds a bias
to a Partial output as ``adds_bias`` says, so the bias counts once in the sum over devices.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import EinsumParam, MatmulParam
    >>> from dtorch.ir.span import Span
    >>> from dtorch.kernels.base import KernelContext
    >>> a = Operand(1, (2, 2), torch.float32, DeviceMesh("cpu"), ())
    >>> op = Operator(3, "matmul_3", MatmulParam(trans_b=True), (1, 1), (2,), Span.unknown())
    >>> matmul_kernel(KernelContext(op, (a, a), (a,), (0,)), 0, [torch.eye(2), torch.ones(2, 2)])
    [tensor([[1., 1.],
            [1., 1.]])]
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import EinsumParam, MatmulParam
from dtorch.kernels.base import KernelContext, LocalKernel, Shards, adds_bias


def _t(x: torch.Tensor, swap: bool) -> torch.Tensor:
    return x.transpose(-1, -2) if swap and x.ndim >= 2 else x


def matmul_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``torch.matmul`` of the local shards, after the param's transposes."""
    param = ctx.param
    assert isinstance(param, MatmulParam)
    return [torch.matmul(_t(inputs[0], param.trans_a), _t(inputs[1], param.trans_b))]


def linear_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``x @ w.T + b``; a bias of a Partial output is added as ``adds_bias`` says."""
    x, w, *bias = inputs
    if bias and adds_bias(ctx, device, 2):
        return [F.linear(x, w, bias[0])]
    return [F.linear(x, w)]


def outer_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``torch.outer`` of the local shards."""
    return [torch.outer(inputs[0], inputs[1])]


def einsum_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``torch.einsum`` of the local shards (the rule lined up their letters)."""
    param = ctx.param
    assert isinstance(param, EinsumParam)
    return [torch.einsum(param.equation, *inputs)]


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.Einsum: einsum_kernel,
    OpKind.Matmul: matmul_kernel,
    OpKind.Linear: linear_kernel,
    OpKind.Outer: outer_kernel,
}
