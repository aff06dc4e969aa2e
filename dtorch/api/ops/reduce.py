"""Reductions, softmax and scans: ``sum mean prod max min amax amin any all argmax argmin
softmax log_softmax cumsum cumprod``; ``max``/``min`` over a dim return (values, indices).

Over a sharded dim ``sum`` and ``mean`` give Partial; the others reduce each device's block
and combine the blocks' results along the mesh dims sharding the reduced dims (a SplitReduce,
one number per result entry and device moved, two with indices): the result is Replicate
there, and torch's (of equal extremes the smallest index, and the first NaN, win).

Example:
    >>> import dtorch
    >>> t = dtorch.tensor([[1.0, 5.0], [3.0, 2.0]])
    >>> t.sum(0).tolist(), t.max(dim=1).indices.tolist(), t.argmin().item()
    ([4.0, 7.0], [1, 0], 0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.dims import as_flag, as_int, normalize_dim, normalize_dims, numpy_names
from dtorch.api.handle import TensorBase
from dtorch.api.ops import elementwise
from dtorch.api.record import record, tensor_arg
from dtorch.ir.dtypes import as_dtype
from dtorch.ir.opkind import BinaryKind, MaxMinKind, ReduceKind, ScanKind
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
from dtorch.ir.placement import Partial, Shard

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def _dims(t: Tensor, dim: int | Sequence[int] | None, op: str) -> tuple[int, ...] | None:
    if dim is None:
        return None
    tensor_arg(op, t)  # before t.ndim (record names a bad input of a full reduction)
    return normalize_dims(dim, t.ndim, op=op)


def _dtype(name: str, dtype: Any) -> torch.dtype | None:
    # torch's dtype= of a reduction: a torch.dtype, a Python type (int: int64), or None
    return None if dtype is None else as_dtype(name, dtype)


def reduce(
    kind: ReduceKind,
    name: str,
    t: Tensor,
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    dtype: torch.dtype | None = None,
) -> Tensor:
    """One Reduce operator over ``dim`` (every dim when None), or one SplitReduce where a
    mesh dim shards a reduced dim of a reduction that is not linear (``max``, ``any``, ...)."""
    flag = as_flag(keepdim, name, "keepdim")
    dims = _dims(t, dim, name)
    if kind not in _LINEAR and splits(t, dims):
        return record(name, SplitReduceParam(kind, dims, flag, _dtype(name, dtype)), (t,))[0]
    return record(name, ReduceParam(kind, dims, flag, _dtype(name, dtype)), (t,))[0]


#: The reductions whose parts add up: a sharded reduced dim gives Partial (Reduce's rule).
_LINEAR = (ReduceKind.SUM, ReduceKind.MEAN)


def splits(t: Any, dims: tuple[int, ...] | None) -> bool:
    """Whether a mesh dim shards one of ``dims`` (None or empty: every dim) of ``t``, or
    ``t`` is Partial (which SplitReduce's rule refuses in the words that fit every layout)."""
    if not isinstance(t, TensorBase):
        return False  # record names the bad input
    ndim = t.ndim
    for placement in t._operand.placements:
        if placement.__class__ is Shard:
            if not dims or placement.dim % ndim in dims:
                return True
        elif placement.__class__ is Partial:
            return True
    return False


@numpy_names
def sum(
    input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> Tensor:
    """The sum over ``dim`` (an int or a tuple; None: every dim); ``dtype``: the result's
    dtype (integers and bools sum in int64 otherwise). Summing a sharded dim gives a Partial
    result, each device holding the sum of its shard; a Partial input stays Partial.

    Example:
        >>> import dtorch
        >>> dtorch.sum(dtorch.arange(6.0).reshape(2, 3), dim=1).tolist()
        [3.0, 12.0]
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Shard(0)]).sum(0).placements
        [Partial(sum)]
    """
    return reduce(ReduceKind.SUM, "sum", input, dim, keepdim, dtype)


@numpy_names
def mean(
    input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> Tensor:
    """The mean over ``dim`` (an int or a tuple; None: every dim) of a floating or complex
    tensor (``dtype``: of the result). As ``sum``, a sharded reduced dim gives Partial: each
    device divides its shard's sum by the global count, so the parts add up to the mean.

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> t = dtorch.arange(4.0, device_mesh=mesh, placements=[dtorch.Shard(0)])
        >>> t.mean().placements, t.mean().item()
        ([Partial(sum)], 1.5)
    """
    return reduce(ReduceKind.MEAN, "mean", input, dim, keepdim, dtype)


@numpy_names
def prod(
    input: Tensor,
    dim: int | None = None,
    keepdim: bool = False,
    *,
    dtype: torch.dtype | None = None,
) -> Tensor:
    """The product over ``dim`` (one int; None: every dim); ``dtype`` as ``sum``'s. Over a
    sharded dim the devices multiply their blocks' products (Replicate there; floats may
    round differently from torch's one product); a Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.prod(dtorch.tensor([[1, 2], [3, 4]]), 1).tolist()
        [2, 12]
    """
    return reduce(ReduceKind.PROD, "prod", input, dim, keepdim, dtype)


@numpy_names
def any(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """True where any element over ``dim`` (an int or a tuple; None: every dim) is non-zero;
    a bool tensor. A sharded reduced dim is combined across its devices (Replicate there); a
    Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.any(dtorch.tensor([[0, 1], [0, 0]]), dim=1).tolist()
        [True, False]
    """
    if _no_dims(dim):
        return _truth("any", input)
    return reduce(ReduceKind.ANY, "any", input, dim, keepdim)


@numpy_names
def all(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """True where every element over ``dim`` (an int or a tuple; None: every dim) is
    non-zero; a bool tensor (placements as ``any``).

    Example:
        >>> import dtorch
        >>> dtorch.all(dtorch.tensor([[1, 1], [0, 1]]), dim=1).tolist()
        [True, False]
    """
    if _no_dims(dim):
        return _truth("all", input)
    return reduce(ReduceKind.ALL, "all", input, dim, keepdim)


def _no_dims(dim: Any) -> bool:
    # torch's any/all over an empty list of dims reduce nothing (sum and mean reduce all)
    return isinstance(dim, (tuple, list)) and len(dim) == 0


def _truth(name: str, input: Tensor) -> Tensor:
    """Each element's truth, as torch's ``any``/``all`` over no dim: bool (uint8 stays
    uint8); the input's placements, a Partial refused as the comparison refuses it."""
    tensor_arg(name, input)
    truth = elementwise.binary(BinaryKind.NE, name, input, 0)
    return truth.to(torch.uint8) if input.dtype == torch.uint8 else truth


@numpy_names
def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The int64 index of the largest value along ``dim`` (None: of the flattened tensor),
    the first of equal ones (a NaN is the largest). Over a sharded dim each device finds its
    block's and the devices pick among them: torch's index, Replicate there (the greedy token
    of vocab-sharded logits). A Partial input is refused.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([[1.0, 5.0], [3.0, 2.0]])
        >>> dtorch.argmax(t).item(), dtorch.argmax(t, dim=0).tolist()
        (1, [1, 0])
    """
    return reduce(ReduceKind.ARGMAX, "argmax", input, _one_dim("argmax", dim), keepdim)


@numpy_names
def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The int64 index of the smallest value along ``dim`` (None: of the flattened tensor);
    placements as ``argmax``.

    Example:
        >>> import dtorch
        >>> dtorch.argmin(dtorch.tensor([[1.0, 5.0], [3.0, 0.0]]), dim=1, keepdim=True).tolist()
        [[0], [1]]
    """
    return reduce(ReduceKind.ARGMIN, "argmin", input, _one_dim("argmin", dim), keepdim)


@numpy_names
def amax(input: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    """The largest value over ``dim`` (an int or a tuple; ``()`` or None: every dim). A
    sharded reduced dim is combined across its devices (Replicate there); a Partial input is
    refused.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([[1, 5], [3, 2]]).amax(0).tolist()
        [3, 5]
    """
    return reduce(ReduceKind.MAX, "amax", input, dim, keepdim)


@numpy_names
def amin(input: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    """The smallest value over ``dim`` (an int or a tuple; ``()`` or None: every dim);
    placements as ``amax``.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([[1, 5], [3, 2]])
        >>> dtorch.amin(t, 1).tolist(), dtorch.amin(t).item()
        ([1, 2], 1)
    """
    return reduce(ReduceKind.MIN, "amin", input, dim, keepdim)


def _maxmin(kind: MaxMinKind, t: Tensor, dim: Any, keepdim: bool, other: Any = None) -> Any:
    if other is not None:  # max(other=b) is maximum
        dim = other
    if isinstance(dim, TensorBase):  # torch.max(a, b) is maximum
        binary = elementwise.maximum if kind == MaxMinKind.MAX else elementwise.minimum
        return binary(t, dim)
    name = "max" if kind == MaxMinKind.MAX else "min"
    tensor_arg(name, t)
    if dim is None:
        return reduce(ReduceKind.MAX if kind == MaxMinKind.MAX else ReduceKind.MIN, name, t)
    # torch takes no list of dims here; a numpy integer or a torch tensor is an int to it
    if isinstance(dim, (bool, tuple, list)) or not hasattr(dim, "__index__"):
        what = "a torch.Tensor" if isinstance(dim, torch.Tensor) else type(dim).__name__
        raise TypeError(
            f"{name}: dim must be an int, got {what}; accepted: {name}(), "
            f"{name}(dim, keepdim=False) or {name}(other_tensor) (a dtorch.Tensor)"
        )
    flag = as_flag(keepdim, name, "keepdim")
    dim = normalize_dim(dim, t.ndim, op=name)
    param: OpParam = MaxMinParam(kind, dim, flag)
    if splits(t, (dim,)):
        reduce_kind = ReduceKind.MAX if kind == MaxMinKind.MAX else ReduceKind.MIN
        param = SplitReduceParam(reduce_kind, (dim,), flag, indices=True)
    values, indices = record(name, param, (t,))
    result_type = torch.return_types.max if kind == MaxMinKind.MAX else torch.return_types.min
    return result_type((values, indices))  # type: ignore[arg-type]  # holds dtorch tensors


@numpy_names
def max(input: Tensor, dim: Any = None, keepdim: bool = False, *, other: Any = None) -> Any:
    """``max()`` of all, ``max(dim)`` -> ``torch.return_types.max`` (``.values``, ``.indices``
    dtorch tensors), ``max(other)`` or ``max(other=b)`` -> elementwise maximum. The other
    dims keep their shards; a sharded reduced dim is combined across its devices (values and
    indices Replicate there, torch's indices); a Partial input is refused.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([[1, 5], [3, 2]])
        >>> dtorch.max(t).item(), dtorch.max(t, 1).indices.tolist()
        (5, [1, 0])
        >>> dtorch.max(t, dtorch.tensor([[4, 4], [4, 4]])).tolist()
        [[4, 5], [4, 4]]
    """
    return _maxmin(MaxMinKind.MAX, input, dim, keepdim, other)


@numpy_names
def min(input: Tensor, dim: Any = None, keepdim: bool = False, *, other: Any = None) -> Any:
    """``min()`` of all, ``min(dim)`` -> ``torch.return_types.min``, ``min(other)`` or
    ``min(other=b)`` -> elementwise minimum (placements as ``max``).

    Example:
        >>> import dtorch
        >>> values, indices = dtorch.min(dtorch.tensor([[1, 5], [3, 2]]), dim=1)
        >>> values.tolist(), indices.tolist()
        ([1, 2], [0, 1])
    """
    return _maxmin(MaxMinKind.MIN, input, dim, keepdim, other)


def implicit_dim(input: Tensor, dim: int | None) -> int:
    """torch's legacy rule for ``softmax(dim=None)``: 0 for 0-, 1- and 3-d inputs, else 1."""
    if dim is not None:
        return dim
    return 0 if input.ndim in (0, 1, 3) else 1


@numpy_names
def softmax(input: Tensor, dim: int | None = None, dtype: torch.dtype | None = None) -> Tensor:
    """Softmax over ``dim``; ``dim=None`` follows torch's legacy implicit-dim rule (0 for 0-,
    1- and 3-d inputs, else 1; torch warns, dtorch does not). ``dtype``: cast the input
    first. Every shard stays: where mesh dims shard the softmax dim itself, the devices
    all-reduce each row's maximum and sum along them (two numbers per row, the
    vocab-parallel softmax) instead of gathering the dim. A Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.softmax(dtorch.tensor([[1.0, 1.0, 1.0, 1.0]]), dim=1).tolist()
        [[0.25, 0.25, 0.25, 0.25]]
    """
    tensor_arg("softmax", input)
    dim = normalize_dim(implicit_dim(input, dim), input.ndim, op="softmax")
    param = softmax_param(input, dim, False, _dtype("softmax", dtype))
    return record("softmax", param, (input,))[0]


def softmax_param(x: Tensor, dim: int, log: bool, dtype: torch.dtype | None) -> OpParam:
    """The operator of a (log-)softmax over ``dim`` (normalised): ``SoftmaxParam``, each
    device on its own rows, or ``SplitSoftmaxParam`` where a mesh dim shards ``dim`` (and
    for a Partial input, which its rule refuses in the words that fit every layout)."""
    ndim = x.ndim
    for placement in x._operand.placements:
        if placement.__class__ is Shard:
            if placement.dim % ndim == dim:
                return SplitSoftmaxParam(dim, log, dtype)
        elif placement.__class__ is Partial:
            return SplitSoftmaxParam(dim, log, dtype)
    return SoftmaxParam(dim, log, dtype)


@numpy_names
def log_softmax(input: Tensor, dim: int, dtype: torch.dtype | None = None) -> Tensor:
    """The log of ``softmax`` over ``dim``, computed in one operator (placements as
    ``softmax``'s: a sharded softmax dim is reduced across the devices, not gathered).

    Example:
        >>> import dtorch
        >>> dtorch.log_softmax(dtorch.tensor([0.0, 0.0]), dim=0).exp().tolist()
        [0.5, 0.5]
    """
    tensor_arg("log_softmax", input)
    dim = normalize_dim(dim, input.ndim, op="log_softmax")
    param = softmax_param(input, dim, True, _dtype("log_softmax", dtype))
    return record("log_softmax", param, (input,))[0]


def _one_dim(name: str, dim: Any) -> Any:
    # torch takes one dim (or None) here, not a list of them as sum does
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{name}(): argument 'dim' must be int, not {type(dim).__name__}")
    return dim


def _scan(kind: ScanKind, name: str, t: Tensor, dim: int, dtype: torch.dtype | None) -> Tensor:
    dim = as_int(name, "dim", dim)  # torch takes exactly one dim
    tensor_arg(name, t)
    return record(name, scan_param(kind, t, normalize_dim(dim, t.ndim, op=name), dtype), (t,))[0]


def scan_param(kind: ScanKind, t: Tensor, dim: int, dtype: Any = None) -> OpParam:
    """The operator of a scan along ``dim`` (normalised): ``ScanParam``, or ``SplitScanParam``
    where a mesh dim shards ``dim`` (each device carries on from the blocks before its own)."""
    ndim, wanted = t.ndim, _dtype("scan", dtype)
    for placement in t._operand.placements:
        if placement.__class__ is Shard and placement.dim % ndim == dim:
            return SplitScanParam(kind, dim, wanted)
    return ScanParam(kind, dim, wanted)


@numpy_names
def cumsum(input: Tensor, dim: int, *, dtype: torch.dtype | None = None) -> Tensor:
    """Running sums along ``dim``; ``dtype``: cast the input first (integers and bools
    accumulate in int64 otherwise). Along a sharded dim each device adds the totals of the
    blocks before its own (every shard stays; floats may round differently from torch's one
    pass); a Partial input stays Partial.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([[1, 2], [3, 4]]).cumsum(1).tolist()
        [[1, 3], [3, 7]]
    """
    return _scan(ScanKind.SUM, "cumsum", input, dim, dtype)


@numpy_names
def cumprod(input: Tensor, dim: int, *, dtype: torch.dtype | None = None) -> Tensor:
    """Running products along ``dim`` (placements as ``cumsum``'s; a Partial input is
    refused).

    Example:
        >>> import dtorch
        >>> dtorch.cumprod(dtorch.tensor([[1, 2, 3], [4, 5, 6]]), dim=1).tolist()
        [[1, 2, 6], [4, 20, 120]]
    """
    return _scan(ScanKind.PROD, "cumprod", input, dim, dtype)
