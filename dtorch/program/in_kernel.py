"""The collectives an operator issues inside its kernel, from metadata, for a program's summary.

Most communication is a Convert (a redistribute), whose plan ``dtorch.program.summary``
shows. A few operators communicate inside their own kernels instead (the group kernels of
``dtorch.kernels.table.GROUP_KERNELS``): a reduction, sort, scan, top-k, order statistic or
softmax over a dim that some mesh dims shard gathers (or all-reduces) its blocks' partial
results along those mesh dims, and ring attention broadcasts every key/value block around its
ring. ``in_kernel(op, operands)`` says which collectives, as the kernels issue them:

* per mesh dim sharding one of the op's dims (its lines): ``SplitReduce`` one all-gather (two
  where it has indices: ``argmax``, ``max(dim)``), ``SplitTopK``/``SplitSort``/
  ``SplitOrderStat`` two (values and indices), ``SplitSoftmax`` two all-reduces (maxima, sums);
* over the plane of every mesh dim sharding the dim, once: ``SplitScan`` one all-gather (the
  blocks' totals), ``SplitCumExtreme`` two;
* ``Sdpa`` with a ring dim: one broadcast per device of the ring; without one, nothing.

It reads metadata only, as the summary does.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.opkind import ReduceKind
    >>> from dtorch.ir.params import SplitReduceParam
    >>> from dtorch.ir.placement import Shard
    >>> from dtorch.ir.span import Span
    >>> mesh = init_device_mesh("cpu", (2, 2))
    >>> x = Operand(1, (4, 6), torch.float32, mesh, (Shard(0), Shard(1)))
    >>> amax = SplitReduceParam(ReduceKind.MAX, (1,))
    >>> op = Operator(2, "amax_2", amax, (1,), (3,), Span.unknown())
    >>> in_kernel(op, {1: x})
    (('all_gather', 1, 'mesh dim 1'),)
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import OpKind, ReduceKind
from dtorch.ir.params import (
    SdpaParam,
    SplitCumExtremeParam,
    SplitOrderStatParam,
    SplitReduceParam,
    SplitScanParam,
    SplitSoftmaxParam,
    SplitSortParam,
    SplitTopKParam,
)
from dtorch.ir.sharding import sharding_mesh_dims

#: One collective kind issued ``count`` times along the mesh dims ``where`` names.
Issued = tuple[str, int, str]

#: ``(operator param, its first input) -> the collectives`` of one kind of group kernel.
Rule = Callable[[object, Operand], tuple[Issued, ...]]


def _sharding(x: Operand, dims: Collection[int]) -> tuple[int, ...]:
    # the mesh dims the kernels gather along: the same helper the kernels ask
    return sharding_mesh_dims(x.placements, x.ndim, dims)


def _per_line(collective: str, count: int, x: Operand, dims: Collection[int]) -> tuple[Issued, ...]:
    # the kernels gather along each sharding mesh dim in turn
    return tuple((collective, count, f"mesh dim {m}") for m in _sharding(x, dims))


def _per_plane(collective: str, count: int, x: Operand, dim: int) -> tuple[Issued, ...]:
    # one group over the plane of every mesh dim that splits ``dim``
    splitting = _sharding(x, (dim % x.ndim,))
    if not splitting:
        return ()
    where = ", ".join(map(str, splitting))
    return ((collective, count, f"mesh dim{'s' if len(splitting) > 1 else ''} {where}"),)


def _all_dims(x: Operand, dims: Collection[int] | None) -> tuple[int, ...]:
    return tuple(range(x.ndim)) if dims is None else tuple(d % x.ndim for d in dims)


def _reduce(param: object, x: Operand) -> tuple[Issued, ...]:
    assert isinstance(param, SplitReduceParam)
    indexed = param.indices or param.reduce in (ReduceKind.ARGMAX, ReduceKind.ARGMIN)
    return _per_line("all_gather", 2 if indexed else 1, x, _all_dims(x, param.dims))


def _top_k(param: object, x: Operand) -> tuple[Issued, ...]:
    assert isinstance(param, SplitTopKParam)
    return _per_line("all_gather", 2, x, (param.dim % x.ndim,) if param.k else ())


def _sort(param: object, x: Operand) -> tuple[Issued, ...]:
    assert isinstance(param, SplitSortParam)
    return _per_line("all_gather", 2, x, (param.dim % x.ndim,))


def _order_stat(param: object, x: Operand) -> tuple[Issued, ...]:
    assert isinstance(param, SplitOrderStatParam)
    dims = None if param.dim is None else (param.dim,)
    return _per_line("all_gather", 2, x, _all_dims(x, dims))


def _softmax(param: object, x: Operand) -> tuple[Issued, ...]:
    assert isinstance(param, SplitSoftmaxParam)
    return _per_line("all_reduce", 2, x, (param.dim % x.ndim,))


def _scan(param: object, x: Operand) -> tuple[Issued, ...]:
    assert isinstance(param, SplitScanParam)
    return _per_plane("all_gather", 1, x, param.dim)


def _cum_extreme(param: object, x: Operand) -> tuple[Issued, ...]:
    assert isinstance(param, SplitCumExtremeParam)
    return _per_plane("all_gather", 2, x, param.dim)


def _attention(param: object, x: Operand) -> tuple[Issued, ...]:
    assert isinstance(param, SdpaParam)
    if param.ring_dim < 0:
        return ()
    return (("broadcast", x.mesh.shape[param.ring_dim], f"mesh dim {param.ring_dim}"),)


#: The group kernels' collectives, by kind (a test keeps it equal to ``GROUP_KERNELS``).
IN_KERNEL: dict[OpKind, Rule] = {
    OpKind.SplitReduce: _reduce,
    OpKind.SplitTopK: _top_k,
    OpKind.SplitSort: _sort,
    OpKind.SplitOrderStat: _order_stat,
    OpKind.SplitSoftmax: _softmax,
    OpKind.SplitScan: _scan,
    OpKind.SplitCumExtreme: _cum_extreme,
    OpKind.Sdpa: _attention,
}


def in_kernel(op: Operator, operands: dict[int, Operand]) -> tuple[Issued, ...] | None:
    """The collectives ``op`` issues inside its kernel (None: ``op`` has no group kernel)."""
    rule = IN_KERNEL.get(op.kind)
    if rule is None:
        return None
    return rule(op.param, operands[op.inputs[0]])


def issued_text(issued: Issued) -> str:
    """``all_gather(mesh dim 0) x2 in kernel``."""
    collective, count, where = issued
    return f"{collective}({where}){f' x{count}' if count > 1 else ''} in kernel"
