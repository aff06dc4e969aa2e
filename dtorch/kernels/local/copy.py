"""Local kernels of Clone, Cast and Copy.

Copy writes src into dst's local shard in place (the rule has already laid src out like
dst) and produces no outputs.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import CopyParam
    >>> from dtorch.ir.span import Span
    >>> a = Operand(1, (2,), torch.float32, DeviceMesh("cpu"), ())
    >>> dst = torch.zeros(2)
    >>> copy_kernel(KernelContext(Operator(3, "copy_3", CopyParam(), (1, 2), (), Span.unknown()),
    ...                           (a, a), (), (0,)), 0, [dst, torch.ones(2)]), dst
    ([], tensor([1., 1.]))
"""

from __future__ import annotations

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import CastParam
from dtorch.kernels.base import KernelContext, LocalKernel, Shards


def clone_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """A fresh copy of the local shard."""
    return [inputs[0].clone()]


def cast_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The local shard converted to ``param.dtype``."""
    param = ctx.param
    assert isinstance(param, CastParam)
    return [inputs[0].to(param.dtype)]


def copy_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``dst.copy_(src)`` on the local shards; dst changes in place."""
    inputs[0].copy_(inputs[1])
    return []


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.Clone: clone_kernel,
    OpKind.Cast: cast_kernel,
    OpKind.Copy: copy_kernel,
}
