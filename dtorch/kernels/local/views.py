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

from itertools import pairwise

import torch

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import (
    ContiguousParam,
    ExpandParam,
    FlattenParam,
    PermuteParam,
    ReshapeParam,
    SqueezeParam,
    TransposeParam,
    UnsqueezeParam,
    ViewParam,
)
from dtorch.kernels.base import KernelContext, LocalKernel, Shards

#: One run of a reshape: the old dims and the new dims they make.
_Group = tuple[list[int], list[int]]


def reshape_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``view``/``reshape``/``flatten`` to the output's local shape: a view where torch makes
    one of the GLOBAL tensor, else a copy.

    The shard alone cannot tell: a dim the device holds one row of is size 1 locally, and
    torch's checks skip size-1 dims, so a transposed or column-sliced shard could look
    viewable on one device and not on another (writes through the result would reach the
    input on some devices only). ``_viewable`` judges by the global shapes; where the global
    strides are known at record time (``dtorch.api.strides``), a copy torch makes is made
    there first, and ``param.view`` says torch views (then the shard is viewed wherever torch
    can). A ``view`` torch would refuse copies too: ``is_contiguous()`` is always True, so a
    program that checks it before ``view`` must not fail."""
    shard = inputs[0]
    shape = ctx.outputs[0].local_shape(device)
    if shard.numel() == 0:
        return [shard.view(shape)]
    old = ctx.inputs[0].shape
    groups = _merged_groups(old, ctx.outputs[0].shape)  # by the global shapes: alike everywhere
    if _viewable(shard, old, groups):  # torch's view would re-stride the local size-1 dims
        strides = _view_strides(shard, old, groups, shape)
        return [shard.as_strided(shape, strides, shard.storage_offset())]
    if isinstance(ctx.param, (ViewParam, ReshapeParam, FlattenParam)) and ctx.param.view:
        viewed = _torch_view(shard, old, groups, shape)  # the shard's look misled _viewable
        if viewed is not None:
            return [viewed]
    return [shard.clone(memory_format=torch.contiguous_format).view(shape)]


def _torch_view(
    shard: torch.Tensor, old: tuple[int, ...], groups: list[_Group], shape: tuple[int, ...]
) -> torch.Tensor | None:
    """torch's view of the shard as ``shape`` where it can make one (None otherwise), with
    ``_view_strides`` for its size-1 dims where those agree with torch's on the others."""
    try:
        viewed = shard.view(shape)
    except RuntimeError:
        return None
    strides = _view_strides(shard, old, groups, shape)
    if any(s != v for s, v, n in zip(strides, viewed.stride(), shape, strict=True) if n > 1):
        return viewed
    return shard.as_strided(shape, strides, shard.storage_offset())


def _viewable(shard: torch.Tensor, global_shape: tuple[int, ...], groups: list[_Group]) -> bool:
    """Whether torch could view the GLOBAL tensor (``global_shape``) without a copy as the
    shape whose ``groups`` of merged dims are given, judged from the shard: the old dims that
    one new dim merges must follow each other in memory with nothing between. A dim the device
    holds one row of is judged by its stride, which still tells where it lies (a size-1 dim's
    stride ties with the next slower dim's)."""
    strides, sizes = shard.stride(), shard.shape
    for dims, _ in groups:
        real = [d for d in dims if global_shape[d] != 1]
        for slower, faster in pairwise(real):
            if strides[slower] != strides[faster] * sizes[faster]:
                return False
            if _between(slower, faster, real, strides, sizes, global_shape):
                return False
    return True


def _between(
    slower: int,
    faster: int,
    group: list[int],
    strides: tuple[int, ...],
    sizes: torch.Size,
    global_shape: tuple[int, ...],
) -> bool:
    """Whether a dim outside ``group`` (of more than one element globally) lies in memory
    between ``faster`` and ``slower``: only one the device holds one row of can, with the
    stride of ``slower``."""
    return any(
        d not in group and global_shape[d] != 1 and sizes[d] == 1 and strides[d] == strides[slower]
        for d in range(len(sizes))
    )


def _view_strides(
    shard: torch.Tensor, old: tuple[int, ...], groups: list[_Group], shape: tuple[int, ...]
) -> tuple[int, ...]:
    """The strides of the viewable reshape of ``shard`` to the local ``shape``: each run of new
    dims laid out row-major from the stride of the fastest old dim of its group that is larger
    than 1 globally, so that a dim the device holds one row of keeps telling where it lies
    (torch's own view gives such a dim any stride: a later view or ``contiguous`` would judge
    it from that)."""
    strides = [1] * len(shape)
    for old_dims, new_dims in groups:
        real = [d for d in old_dims if old[d] != 1]
        step = shard.stride(real[-1]) if real else 1
        for j in reversed(new_dims):
            strides[j] = step
            step *= shape[j]
    return tuple(strides)


def _merged_groups(old: tuple[int, ...], new: tuple[int, ...]) -> list[_Group]:
    """Reshape's grouping by products: (old dims, new dims) of each run; trailing dims of size
    1 left over on either side join the last run."""
    groups: list[_Group] = []
    i = j = 0
    while i < len(old) and j < len(new):
        dims, made, have, want = [i], [j], old[i], new[j]
        i, j = i + 1, j + 1
        while have != want:
            if have < want and i < len(old):
                dims.append(i)
                have *= old[i]
                i += 1
            elif j < len(new):
                made.append(j)
                want *= new[j]
                j += 1
            else:
                break
        groups.append((dims, made))
    if groups:
        groups[-1][0].extend(range(i, len(old)))
        groups[-1][1].extend(range(j, len(new)))
    elif new:  # a 0-d tensor viewed with dims of size 1
        groups.append(([], list(range(len(new)))))
    return groups


def copy_like_torch(
    shard: torch.Tensor, global_shape: tuple[int, ...], dtype: torch.dtype | None = None
) -> torch.Tensor:
    """A copy of ``shard`` (as ``dtype``) laid out as torch's ``preserve_format`` lays out the
    copy of the GLOBAL tensor: its strides where that is dense (a permuted layout kept), else
    contiguous. torch's check on the shard skips a dim the device holds one row of, so a
    column slice held one row per device kept its strides on some devices only."""
    dtype = shard.dtype if dtype is None else dtype
    if _dense_globally(shard, global_shape):
        out = torch.empty_strided(shard.shape, shard.stride(), dtype=dtype, device=shard.device)
    else:
        out = torch.empty(shard.shape, dtype=dtype, device=shard.device)
    return out.copy_(shard)


def _dense_globally(shard: torch.Tensor, global_shape: tuple[int, ...]) -> bool:
    """Whether the dims larger than 1 globally cover the shard's memory without gaps, in some
    order (torch's non-overlapping and dense, without skipping local size-1 dims)."""
    real = [d for d in range(shard.ndim) if global_shape[d] != 1]
    # a tie: a dim the device holds one row of is the faster one (its stride is that of the
    # next slower dim, in a contiguous shard), whatever the dims' order after a transpose
    dims = sorted(real, key=lambda d: (shard.stride(d), shard.shape[d] != 1))
    expected = 1
    for d in dims:
        if shard.stride(d) != expected:
            return False
        expected *= shard.shape[d]
    return True


def is_contiguous_globally(shard: torch.Tensor, global_shape: tuple[int, ...]) -> bool:
    """torch's ``is_contiguous`` of ``shard``, skipping only the dims of size 1 globally (a
    dim the device holds one row of is checked too, so every device answers alike)."""
    if shard.numel() == 0:
        return True
    expected = 1
    for size, stride, whole in zip(
        reversed(shard.shape), reversed(shard.stride()), reversed(global_shape), strict=True
    ):
        if whole != 1:
            if stride != expected:
                return False
            expected *= size
    return True


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
    """The local shard itself where the global tensor is contiguous, else a contiguous copy
    (as torch's ``contiguous``, decided alike on every device: by the strides known at
    record time, ``param.copy`` or ``param.view``, else ``is_contiguous_globally``)."""
    shard = inputs[0]
    param = ctx.param
    assert isinstance(param, ContiguousParam)
    if param.view or (not param.copy and is_contiguous_globally(shard, ctx.inputs[0].shape)):
        return [shard]
    return [shard.clone(memory_format=torch.contiguous_format)]


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
