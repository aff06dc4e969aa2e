"""Rules of Reduce, MaxMin, Softmax and Scan: operators that combine values along dims.

Per mesh dim: a shard of a dim that is not reduced stays a shard (its index shifts when
``keepdim`` is false). Reducing a sharded dim gives Partial for ``sum`` and ``mean`` (``mean``
divides by the GLOBAL size, so the partial values add up to the mean); ``Reduce``'s
``max``, ``min``, ``prod``, ``any``, ``all``, ``argmax``, ``argmin``, ``MaxMin`` and ``Softmax``
reject it. The API records those over a sharded dim as ``SplitReduce`` (a reduced dim's shards
give Replicate: the kernel combines the blocks' results along the mesh dims) and
``SplitSoftmax`` (every shard stays, the softmax dim's included); both refuse only a Partial
input. A Partial input is kept by ``sum`` and
``mean`` only (they are linear). A scan (``cumsum``/``cumprod``/``logcumsumexp``) keeps the
shards of the other dims and refuses a shard of the scanned dim, which ``SplitScan`` (the
scan the API records there) keeps; ``cumsum`` keeps a Partial
input where its dtype conversion is linear too (``dtorch.ir.rules.promotion.cast_is_linear``).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.opkind import ReduceKind
    >>> from dtorch.ir.params import ReduceParam
    >>> from dtorch.ir.placement import Shard
    >>> x = Operand(1, (4, 6), torch.int32, init_device_mesh("cpu", 2), (Shard(1),))
    >>> out = reduce_rule("sum", ReduceParam(ReduceKind.SUM, (1,)), (x,)).outputs[0]
    >>> out.shape, out.dtype, out.placements
    ((4,), torch.int64, (Partial(sum),))
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from dtorch.errors import DimError, ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind, ReduceKind, ScanKind
from dtorch.ir.params import (
    MaxMinParam,
    OpParam,
    ReduceParam,
    ScanParam,
    SoftmaxParam,
    SplitReduceParam,
    SplitScanParam,
    SplitSoftmaxParam,
)
from dtorch.ir.rules.base import (
    Inference,
    OutputMeta,
    ParamError,
    Rule,
    norm_dim,
    norm_dims,
)
from dtorch.ir.rules.promotion import cast_is_linear, reduce_dtype, scan_dtype, softmax_dtype
from dtorch.ir.rules.signature import Labels, fresh_labels, identity, one_input, signature

_FIRST = "redistribute the reduced dims to Replicate first"
_LINEAR = signature(
    "R -> R", "Si -> Si", "Sk -> P", "P -> P",
    legend="i: a dim that is not reduced; k: a reduced dim",
)  # fmt: skip
#: sum/mean converting to a dtype in which a sum of parts is not the part of a sum (float to
#: int, anything from or to bool): a Partial input would be converted part by part, so no P
_LINEAR_SHARDS = signature(
    "R -> R", "Si -> Si", "Sk -> P",
    legend="i: a dim that is not reduced; k: a reduced dim",
    hint="the conversion to the result dtype is not linear: redistribute a Partial input first",
)  # fmt: skip
_KEEP = signature("R -> R", "Si -> Si", legend="i: a dim that is not reduced", hint=_FIRST)
_SOFTMAX = signature(
    "R -> R", "Si -> Si", legend="i: a dim other than the softmax dim",
    hint="redistribute the softmax dim to Replicate first",
)  # fmt: skip
_SPLIT_SOFTMAX = signature(
    "R -> R", "Si -> Si", legend="i: any dim, the softmax dim included",
    hint="a softmax is not linear: redistribute a Partial input to Replicate first",
)  # fmt: skip
_SPLIT_REDUCE = signature(
    "R -> R", "Si -> Si", "Sk -> R", legend="i: a dim that is not reduced; k: a reduced dim",
    hint="max, min, prod, any, all, argmax and argmin are not linear: redistribute a Partial "
    "input to Replicate first",
)  # fmt: skip
#: The reductions SplitReduce combines (sum and mean of a sharded dim are Partial instead).
_SPLIT_KINDS = frozenset(ReduceKind) - {ReduceKind.SUM, ReduceKind.MEAN}
_ARG = (ReduceKind.ARGMAX, ReduceKind.ARGMIN)
_SCANNED = "i: a dim other than the scanned dim"
_SCAN_HINT = "redistribute the scanned dim to Replicate first"
_SCAN = signature("R -> R", "Si -> Si", legend=_SCANNED, hint=_SCAN_HINT)
_SCAN_LINEAR = signature("R -> R", "Si -> Si", "P -> P", legend=_SCANNED, hint=_SCAN_HINT)
_SPLIT_SCAN_HINT = "redistribute a Partial input to Replicate first"
_SPLIT_SCAN = signature(
    "R -> R", "Si -> Si", legend="i: any dim, the scanned dim included", hint=_SPLIT_SCAN_HINT
)  # fmt: skip
_SPLIT_SCAN_LINEAR = signature(
    "R -> R", "Si -> Si", "P -> P", legend="i: any dim, the scanned dim included",
    hint=_SPLIT_SCAN_HINT,
)  # fmt: skip
_REDUCE_SIGS = {ReduceKind.SUM: _LINEAR, ReduceKind.MEAN: _LINEAR}
_WITH_DTYPE = frozenset({ReduceKind.SUM, ReduceKind.MEAN, ReduceKind.PROD})
#: The reductions torch refuses over an empty dim (the others have an identity value) -> the
#: error of one over every dim of an empty tensor: torch's RuntimeError for max/min (a
#: ShapeError here, as other shape errors), its IndexError for argmax/argmin.
_NONEMPTY: dict[ReduceKind, type[ShapeError]] = {
    ReduceKind.MAX: ShapeError,
    ReduceKind.MIN: ShapeError,
    ReduceKind.ARGMAX: DimError,
    ReduceKind.ARGMIN: DimError,
}


def reduce_dims(name: str, dims: Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """The dims a Reduce reduces: all for None (or an empty list), none of a 0-d tensor.

    Example:
        >>> reduce_dims("sum", None, 3), reduce_dims("sum", (-1, 0), 3)
        ((0, 1, 2), (2, 0))
    """
    if ndim == 0:
        norm_dims(name, dims or (), 0)
        return ()
    if not dims:
        return tuple(range(ndim))
    return norm_dims(name, dims, ndim)


def reduced_shape(shape: tuple[int, ...], dims: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    """``shape`` after reducing ``dims`` (size 1 there with ``keepdim``, else dropped)."""
    if keepdim:
        return tuple(1 if d in dims else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in dims)


def reduce_plan(
    name: str, shape: tuple[int, ...], dims: tuple[int, ...] | None, keepdim: bool
) -> tuple[tuple[int, ...], tuple[int, ...], Labels]:
    """Reduced dims, output shape and output labels (cached: the same reductions repeat)."""
    try:
        return _reduce_plan(shape, None if dims is None else tuple(dims), keepdim)
    except ShapeError as error:  # raised without a name inside the cache
        raise ShapeError(f"{name}{error}") from None


@functools.lru_cache(maxsize=4096)
def _reduce_plan(
    shape: tuple[int, ...], dims: tuple[int, ...] | None, keepdim: bool
) -> tuple[tuple[int, ...], tuple[int, ...], Labels]:
    reduced = reduce_dims("", dims, len(shape))
    return (
        reduced,
        reduced_shape(shape, reduced, keepdim),
        _reduced_labels(len(shape), reduced, keepdim),
    )


def _reduced_labels(ndim: int, dims: tuple[int, ...], keepdim: bool) -> Labels:
    # a kept reduced dim is a new size-1 dim: its label differs from the input's
    if keepdim:
        return fresh_labels(ndim, dims)
    return tuple(d for d in range(ndim) if d not in dims)


def check_nonempty(
    name: str, shape: tuple[int, ...], dims: Sequence[int] | None, whole: type[ShapeError]
) -> None:
    """torch refuses ``max min argmax argmin`` over a dim of size 0 (an IndexError: here a
    DimError), and over every dim (``dims`` None) of an empty tensor (raising ``whole``).

    Example:
        >>> check_nonempty("max", (0, 3), (1,), ShapeError)
        >>> check_nonempty("max", (0, 3), (0,), ShapeError)
        Traceback (most recent call last):
        ...
        dtorch.errors.DimError: max(): Expected reduction dim 0 to have non-zero size.
    """
    if dims is None and 0 in shape:
        raise whole(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0 (shape "
            f"{list(shape)}); accepted: a dim argument naming a dim of non-zero size"
        )
    for d in dims or ():
        if shape[d] == 0:
            raise DimError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def reduce_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``sum mean max min any all prod argmax argmin`` over ``dims`` (None: every dim)."""
    assert isinstance(param, ReduceParam)
    (x,) = inputs
    labels, meta = _reduced_meta(name, param.reduce, x, param.dims, param.keepdim, param.dtype)
    sig = _REDUCE_SIGS.get(param.reduce, _KEEP)
    if sig is _LINEAR and not cast_is_linear(x.dtype, meta.dtype):
        sig = _LINEAR_SHARDS
    return one_input(name, sig, x, labels, [meta])


def _reduced_meta(
    name: str,
    kind: ReduceKind,
    x: Operand,
    dims: tuple[int, ...] | None,
    keepdim: bool,
    dtype: torch.dtype | None,
) -> tuple[Labels, OutputMeta]:
    """The output labels and meta of a reduction, after torch's checks of its arguments."""
    if kind in _ARG and dims and len(dims) > 1:
        raise ParamError(f"{name}: takes one dim or None, got dims {dims}")
    if dtype is not None and kind not in _WITH_DTYPE:
        raise ParamError(f"{name}: takes no dtype argument (sum, mean and prod do)")
    reduced, shape, labels = reduce_plan(name, x.shape, dims, keepdim)
    if kind in _NONEMPTY:
        check_nonempty(name, x.shape, reduced if dims else None, _NONEMPTY[kind])
    return labels, OutputMeta(shape, reduce_dtype(name, kind, x.dtype, dtype), ())


def split_reduce_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``max min any all prod argmax argmin`` over ``dims`` where shards of them are allowed:
    a reduced dim's shards give Replicate (the kernel combines the devices' results along
    those mesh dims); with ``indices``, ``max/min(dim)``'s values and int64 indices."""
    assert isinstance(param, SplitReduceParam)
    (x,) = inputs
    kind = param.reduce
    if kind not in _SPLIT_KINDS:
        raise ParamError(
            f"{name}: a split reduction combines max, min, prod, any, all, "
            f"argmax or argmin, got {kind.name} (sum and mean give Partial)"
        )
    if param.indices and (
        kind not in (ReduceKind.MAX, ReduceKind.MIN) or len(param.dims or ()) != 1
    ):
        raise ParamError(
            f"{name}: indices come with max or min over one dim, got "
            f"{kind.name} over dims {param.dims}"
        )
    labels, meta = _reduced_meta(name, kind, x, param.dims, param.keepdim, param.dtype)
    metas = [meta, OutputMeta(meta.shape, torch.int64, ())] if param.indices else [meta]
    return one_input(name, _SPLIT_REDUCE, x, labels, metas)


def maxmin_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``max/min(t, dim, keepdim)``: values and int64 indices, both shaped like the reduce."""
    assert isinstance(param, MaxMinParam)
    (x,) = inputs
    reduced, shape, labels = reduce_plan(name, x.shape, (param.dim,), param.keepdim)
    check_nonempty(name, x.shape, reduced, DimError)
    dtype = reduce_dtype(name, ReduceKind.MAX, x.dtype, None)
    metas = [OutputMeta(shape, dtype, ()), OutputMeta(shape, torch.int64, ())]
    return one_input(name, _KEEP, x, labels, metas)


def softmax_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``softmax``/``log_softmax`` over ``dim``: the softmax dim must not be sharded."""
    assert isinstance(param, SoftmaxParam)
    (x,) = inputs
    dim = norm_dim(name, param.dim, x.ndim)
    dtype = softmax_dtype(name, param.log, x.dtype, param.dtype)
    labels = fresh_labels(x.ndim, (dim,))  # sharding the softmax dim is then rejected
    return one_input(name, _SOFTMAX, x, labels, [OutputMeta(x.shape, dtype, ())])


def split_softmax_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``softmax``/``log_softmax`` over ``dim`` where shards of it are allowed: every shard
    stays (the kernel all-reduces each row's maximum and sum along the mesh dims sharding
    ``dim``); a Partial input is refused."""
    assert isinstance(param, SplitSoftmaxParam)
    (x,) = inputs
    norm_dim(name, param.dim, x.ndim)
    dtype = softmax_dtype(name, param.log, x.dtype, param.dtype)
    return one_input(name, _SPLIT_SOFTMAX, x, identity(x.ndim), [OutputMeta(x.shape, dtype, ())])


def scan_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``cumsum``/``cumprod``/``logcumsumexp`` along ``dim``: the input's shape, torch's dtype;
    the scanned dim must not be sharded, and only a linear ``cumsum`` keeps Partial."""
    assert isinstance(param, ScanParam)
    (x,) = inputs
    dim = norm_dim(name, param.dim, x.ndim)
    dtype = scan_dtype(name, param.scan, x.dtype, param.dtype)
    linear = param.scan is ScanKind.SUM and cast_is_linear(x.dtype, dtype)
    labels = fresh_labels(x.ndim, (dim,))  # sharding the scanned dim is then rejected
    sig = _SCAN_LINEAR if linear else _SCAN
    return one_input(name, sig, x, labels, [OutputMeta(x.shape, dtype, ())])


def split_scan_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """A scan along a dim whose shards are allowed: every shard stays (each device adds the
    totals of the blocks before its own); a linear ``cumsum`` keeps Partial, as Scan's."""
    assert isinstance(param, SplitScanParam)
    (x,) = inputs
    norm_dim(name, param.dim, x.ndim)
    dtype = scan_dtype(name, param.scan, x.dtype, param.dtype)
    linear = param.scan is ScanKind.SUM and cast_is_linear(x.dtype, dtype)
    sig = _SPLIT_SCAN_LINEAR if linear else _SPLIT_SCAN
    return one_input(name, sig, x, identity(x.ndim), [OutputMeta(x.shape, dtype, ())])


RULES: dict[OpKind, Rule] = {
    OpKind.Reduce: reduce_rule,
    OpKind.MaxMin: maxmin_rule,
    OpKind.Softmax: softmax_rule,
    OpKind.SplitSoftmax: split_softmax_rule,
    OpKind.SplitReduce: split_reduce_rule,
    OpKind.Scan: scan_rule,
    OpKind.SplitScan: split_scan_rule,
}
