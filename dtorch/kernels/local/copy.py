"""Local kernels of Clone, Cast, ViewDtype and Copy.

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

import torch

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import CastParam, ViewDtypeParam
from dtorch.kernels.base import KernelContext, LocalKernel, Shards
from dtorch.kernels.local.views import copy_like_torch


def clone_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """A fresh copy of the local shard, laid out as torch's clone of the global tensor."""
    return [copy_like_torch(inputs[0], ctx.inputs[0].shape)]


def cast_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The local shard converted to ``param.dtype`` (itself if it has it, as torch's ``to``),
    laid out as torch's conversion of the global tensor."""
    param = ctx.param
    assert isinstance(param, CastParam)
    shard = inputs[0]
    if shard.dtype == param.dtype:
        return [shard]
    return [copy_like_torch(shard, ctx.inputs[0].shape, param.dtype)]


def view_dtype_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The local shard's bits read as ``param.dtype``: torch's ``view(dtype)``, a view of the
    shard. Where the element size differs and torch refuses the shard's memory layout (after
    a transpose), the device fails with torch's message, as torch does on the full tensor: a
    shard keeps the strides of the tensor it is cut from, and its last dim is whole."""
    param = ctx.param
    assert isinstance(param, ViewDtypeParam)
    x, dtype = inputs[0], param.dtype
    if x.numel() == 0 and x.element_size() != dtype.itemsize:
        # no bits to read: a device holding no rows answers as the others (torch's stride
        # checks refuse some empty shapes)
        return [x.new_empty(ctx.outputs[0].local_shape(device), dtype=dtype)]
    return [x.view(dtype)]


def copy_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``dst.copy_(src)`` on the local shards; dst changes in place. A dst whose elements
    share memory (an ``expand``-ed view) takes one slice of ``src`` along those dims when
    ``src`` is the same along them (``fill_``/``zero_``, which torch allows there). A ``src``
    in ``dst``'s own memory (``x[1:].copy_(x[:-1])``, which torch refuses at the call) is
    read whole before the write: the device must not fail where the base would not see it."""
    written_into(inputs[0], inputs[1])
    return []


def written_into(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """``dst.copy_(src)`` as the Copy kernel writes it (see ``copy_kernel``); returns ``dst``
    (the in-place operators' write where torch's own in-place kernel would refuse).

    Example:
        >>> base = torch.zeros(3)
        >>> written_into(base.expand(2, 3), torch.ones(2, 3)) is not None, base.tolist()
        (True, [1.0, 1.0, 1.0])
    """
    target = dst
    shared = [d for d in range(dst.ndim) if dst.stride(d) == 0 and dst.shape[d] > 1]
    if shared:
        dst, src = _one_slice(dst, src.expand_as(dst), shared)
    if src.numel() and dst.numel() and same_memory(src, dst):
        src = src.clone()
    dst.copy_(src)
    return target


def same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` are views of one storage (they may overlap)."""
    return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


def _one_slice(
    dst: torch.Tensor, src: torch.Tensor, dims: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``dst`` and ``src`` narrowed to their first slice along ``dims``, where ``src`` does
    not vary along them (else torch's refusal of a write to overlapping elements)."""
    for d in dims:
        first = src.narrow(d, 0, 1)
        if not torch.equal(first.expand_as(src), src):
            raise RuntimeError(
                "unsupported operation: more than one element of the written-to tensor "
                "refers to a single memory location. Please clone() the tensor before "
                "performing the operation."
            )
        dst, src = dst.narrow(d, 0, 1), first
    return dst, src


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.Clone: clone_kernel,
    OpKind.Cast: cast_kernel,
    OpKind.ViewDtype: view_dtype_kernel,
    OpKind.Copy: copy_kernel,
}
