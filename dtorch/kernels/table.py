"""The kernel tables the runner reads: OpKind -> local kernel, OpKind -> group kernel.

``LOCAL_KERNELS`` merges the ``KERNELS`` fragment of every module of ``dtorch.kernels.local``:
a new operator is one entry in its module's fragment. ``GROUP_KERNELS`` (communicating
kernels: Convert, cross-mesh Copy, GetTensor, ...) is filled by the packages that implement
them, each calling :func:`register_group_kernel` (or :func:`register_local_kernel`) once per
kind when its module is imported; registering a kind twice is an error, so two packages can
never silently replace each other's kernel.

Example:
    >>> from dtorch.ir.opkind import OpKind
    >>> OpKind.BroadcastBinary in LOCAL_KERNELS, OpKind.Convert in LOCAL_KERNELS
    (True, False)
"""

from __future__ import annotations

from dtorch.errors import KernelTableError
from dtorch.ir.opkind import OpKind
from dtorch.kernels import attention, softmax, split_order, split_reduce
from dtorch.kernels.base import GroupKernel, LocalKernel
from dtorch.kernels.local import (
    conv_transpose,
    copy,
    elementwise,
    embedding,
    embedding_bag,
    fft,
    fused,
    gather,
    grid_sample,
    image,
    indexing,
    linalg,
    linalg_fn,
    norm,
    order,
    order_stats,
    reduce,
    scatter,
    search,
    select,
    setitem,
    views,
)

#: One device's kernel for every operator that needs no communication.
LOCAL_KERNELS: dict[OpKind, LocalKernel] = {
    **elementwise.KERNELS,
    **linalg.KERNELS,
    **reduce.KERNELS,
    **views.KERNELS,
    **copy.KERNELS,
    **select.KERNELS,
    **indexing.KERNELS,
    **gather.KERNELS,
    **order.KERNELS,
    **order_stats.KERNELS,
    **search.KERNELS,
    **linalg_fn.KERNELS,
    **fft.KERNELS,
    **embedding_bag.KERNELS,
    **grid_sample.KERNELS,
    **conv_transpose.KERNELS,
    **scatter.KERNELS,
    **setitem.KERNELS,
    **fused.KERNELS,
    **image.KERNELS,
    **norm.KERNELS,
    **embedding.KERNELS,
}

#: Kernels that run every local device at once because the devices communicate.
GROUP_KERNELS: dict[OpKind, GroupKernel] = {
    **attention.GROUP_KERNELS,
    **softmax.GROUP_KERNELS,
    **split_order.GROUP_KERNELS,
    **split_reduce.GROUP_KERNELS,
}


def register_local_kernel(kind: OpKind, kernel: LocalKernel) -> None:
    """Add the local kernel of ``kind`` (once per kind)."""
    _check_free(kind)
    LOCAL_KERNELS[kind] = kernel


def register_group_kernel(kind: OpKind, kernel: GroupKernel) -> None:
    """Add the group kernel of ``kind`` (once per kind).

    Example:
        >>> register_group_kernel(OpKind.Nvtx, lambda ctx, shards: shards)
        >>> del GROUP_KERNELS[OpKind.Nvtx]
    """
    _check_free(kind)
    GROUP_KERNELS[kind] = kernel


def _check_free(kind: OpKind) -> None:
    if kind in LOCAL_KERNELS or kind in GROUP_KERNELS:
        raise KernelTableError(f"operator kind {kind.name} already has a kernel")
