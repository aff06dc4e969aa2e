"""Local kernels of Search, Isin and Histc: torch's ``searchsorted``, ``isin`` and ``histc``
of the local shard.

The rules keep the sorted sequence (the test elements) whole beside each device's values,
so each lookup is exactly the full tensor's; Histc counts the local shard into the full
tensor's bins and the rule makes the result a Partial sum where the input is sharded.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import SearchParam
    >>> from dtorch.ir.span import Span
    >>> seq = Operand(1, (3,), torch.float32, DeviceMesh("cpu"), ())
    >>> x = Operand(2, (2,), torch.float32, DeviceMesh("cpu"), ())
    >>> op = Operator(3, "searchsorted_3", SearchParam(right=True), (1, 2), (3,), Span.unknown())
    >>> shards = [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2.0, 9.0])]
    >>> search_kernel(KernelContext(op, (seq, x), (), (0,)), 0, shards)
    [tensor([2, 3])]
"""

from __future__ import annotations

import torch

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import HistcParam, IsinParam, SearchParam
from dtorch.kernels.base import KernelContext, LocalKernel, Shards


def search_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """Insertion indices of the local values in the (whole) sorted sequence."""
    param = ctx.param
    assert isinstance(param, SearchParam)
    seq, values, *sorter = inputs
    found = torch.searchsorted(
        seq,
        values,
        out_int32=param.out_int32,
        right=param.right,
        sorter=sorter[0] if sorter else None,
    )
    return [found]


def isin_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """Whether each local element is among the (whole) test elements."""
    param = ctx.param
    assert isinstance(param, IsinParam)
    elements, test = inputs
    return [torch.isin(elements, test, assume_unique=param.assume_unique, invert=param.invert)]


def histc_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The local shard's histogram over the tensor's bins (a part of the sum)."""
    param = ctx.param
    assert isinstance(param, HistcParam)
    return [torch.histc(inputs[0], param.bins, param.min, param.max)]


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.Search: search_kernel,
    OpKind.Isin: isin_kernel,
    OpKind.Histc: histc_kernel,
}
