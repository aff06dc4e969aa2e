"""Local kernels of IndexSelect and IndexPut.

The indexed dim is never sharded (the rules see to it), so every device holds it whole and
the global index values are local ones. The values are checked before torch reads them: an
out-of-range index raises IndexError here (the runner turns it into a failure of the
operator, raised where its value is read), instead of a device-side assert on CUDA; the
check costs one synchronisation per kernel on an accelerator.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import IndexSelectParam
    >>> from dtorch.ir.span import Span
    >>> x = Operand(1, (3, 2), torch.float32, DeviceMesh("cpu"), ())
    >>> i = Operand(2, (2, 2), torch.int64, DeviceMesh("cpu"), ())
    >>> op = Operator(4, "getitem_4", IndexSelectParam(0), (1, 2), (3,), Span.unknown())
    >>> ctx = KernelContext(op, (x, i), (), (0,))
    >>> index_select_kernel(ctx, 0, [torch.arange(6.0).view(3, 2), torch.tensor([[2], [-1]])])
    [tensor([[[4., 5.]],
    <BLANKLINE>
            [[4., 5.]]])]
"""

from __future__ import annotations

import torch

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import IndexPutParam, IndexSelectParam
from dtorch.ir.placement import Partial
from dtorch.kernels.base import KernelContext, LocalKernel, Shards


def checked_index(name: str, index: torch.Tensor, dim: int, size: int, wrap: bool) -> torch.Tensor:
    """``index`` flattened, negatives counted from the end when ``wrap``; IndexError when a
    value is out of range (torch's words)."""
    flat = index.reshape(-1).long()
    low = -size if wrap else 0
    bad = (flat < low) | (flat >= size)
    if bool(bad.any()):
        value, accepted = int(flat[bad][0]), f"{low} to {size - 1}" if size else "none"
        raise IndexError(
            f"{name}: index {value} is out of bounds for dimension {dim} with size {size}; "
            f"accepted: {accepted}"
        )
    return flat % size if wrap and size else flat


def neutral_zero(dtype: torch.dtype) -> float | complex | int | bool:
    """The zero a Partial piece holds where another device owns the value: -0.0 for floating
    dtypes (``x + -0.0`` is ``x`` for every ``x``, -0.0 included; ``-0.0 + 0.0`` is 0.0).

    Example:
        >>> neutral_zero(torch.float32), neutral_zero(torch.int64), neutral_zero(torch.bool)
        (-0.0, 0, False)
    """
    if dtype.is_complex:
        return complex(-0.0, -0.0)
    if dtype.is_floating_point:
        return -0.0
    return False if dtype is torch.bool else 0


def index_select_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The local shard indexed along the (whole) dim by the local index."""
    param = ctx.param
    assert isinstance(param, IndexSelectParam)
    x, index = inputs
    dim = param.dim % x.ndim
    flat = checked_index(ctx.operator.name, index, dim, x.shape[dim], param.wrap)
    out = torch.index_select(x, dim, flat)
    return [out.view((*x.shape[:dim], *index.shape, *x.shape[dim + 1 :]))]  # () for a 0-d


def index_put_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``x[(:,) * dim, index] = value`` on the local shard; on a Partial tensor the devices
    that do not own the partial sum write zeros for a number."""
    param = ctx.param
    assert isinstance(param, IndexPutParam)
    x, index, *rest = inputs
    dim = param.dim % x.ndim
    flat = checked_index(ctx.operator.name, index, dim, x.shape[dim], True)
    where: tuple[slice | torch.Tensor, ...] = (*(slice(None),) * dim, flat.view(index.shape))
    if rest:
        x[where] = rest[0]
        return []
    assert param.scalar is not None and param.scalar.value is not None
    target = ctx.inputs[0]
    partial = any(isinstance(p, Partial) for p in target.placements)
    owner = not partial or target.shard(device).partial_owner
    x[where] = param.scalar.value if owner else 0
    return []


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.IndexSelect: index_select_kernel,
    OpKind.IndexPut: index_put_kernel,
}
