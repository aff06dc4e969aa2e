"""Rules of Sort, TopK, Flip and Gather: operators that move or pick entries along dims,
never combining them.

Per mesh dim:

* ``sort``, ``topk``: a shard of a dim other than the sorted dim stays a shard; the sorted dim
  must be whole on every device and a Partial input is refused (the order of a sum is not the
  sum of the orders). Values keep the input's dtype; indices are int64. ``SplitTopK`` (the
  ``topk`` the API records where the topk dim is sharded) takes shards of it too: the result
  is Replicate on those mesh dims (the devices pick from the blocks' top ``k``). ``SplitSort``
  (the ``sort`` the API records where the sorted dim is sharded) keeps every shard, the sorted
  dim's included (each device keeps its block of the sorted dim).
* ``flip``: a shard of a dim that is not flipped stays; a Partial input stays Partial (flipping
  is linear); a flipped dim must not be sharded (its shards would change devices).
* ``gather`` (inputs x, index; the output is shaped like the index, torch's rule):

  - x Replicate x index Replicate -> Replicate; x Partial x index Replicate -> Partial
    (picking is linear in x);
  - x Shard(g) x index Replicate, g the gathered dim -> Partial: each device picks the
    entries in its own range of g and writes zeros for the others (DTensor's masked
    partial; the vocab-parallel pick of a loss's target log-probabilities);
  - x Replicate x index Shard(g), g the gathered dim -> Shard(g): each device picks its rows
    of the index from the whole x;
  - x Shard(i) x index Shard(i), the same placement on another dim i whose size is the same
    in both -> Shard(i): the devices hold matching blocks (a smaller index dim would chunk
    differently, so it is refused); an index Replicate there is chunked like x first (a
    local slice, the implicit redistribution of the elementwise operators);
  - anything else (a Partial index, x sharded where the index is not, an index sharded on
    another dim of a Replicate x) is refused: redistribute first.

Index values are checked by the kernels (an out-of-range index fails on the devices).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import GatherParam, SortParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> x = Operand(1, (4, 6), torch.float32, mesh, (Shard(0),))
    >>> [o.placements for o in sort_rule("sort", SortParam(1), (x,)).outputs]
    [(Shard(dim=0),), (Shard(dim=0),)]
    >>> i = Operand(2, (4, 3), torch.int64, mesh, (Shard(0),))
    >>> gather_rule("gather", GatherParam(1), (x, i)).outputs[0]
    OutputMeta(shape=(4, 3), dtype=torch.float32, placements=(Shard(dim=0),))
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from dtorch.errors import ParamError, ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import (
    FlipParam,
    GatherParam,
    OpParam,
    SortParam,
    SplitSortParam,
    SplitTopKParam,
    TopKParam,
)
from dtorch.ir.placement import Partial, Placement, Replicate, Shard, short_text
from dtorch.ir.rules.base import DtypeError, Inference, OutputMeta, Rule, norm_dim, norm_dims
from dtorch.ir.rules.gather import INDEX_DTYPES
from dtorch.ir.rules.order_stats import PARTIAL_ORDER_HINT
from dtorch.ir.rules.promotion import refusal, refused
from dtorch.ir.rules.signature import (
    Signature,
    fresh_labels,
    identity,
    one_input,
    reject,
    signature,
)


def _along(what: str) -> Signature:
    # sort and topk: the operated dim whole, no Partial
    return signature(
        "R -> R", "Si -> Si", legend=f"i: a dim other than the {what} dim",
        hint=f"redistribute the {what} dim to Replicate first",
    )  # fmt: skip


_SORT = _along("sorted")
_TOPK = _along("topk")
_SPLIT_TOPK = signature(
    "R -> R", "Si -> Si", "Sk -> R", legend="i: a dim other than the topk dim; k: the topk dim",
    hint="the top entries of a sum are not the sum of the top entries: redistribute a Partial "
    "input to Replicate first",
)  # fmt: skip
_SPLIT_SORT = signature(
    "R -> R", "Si -> Si", legend="i: any dim, the sorted dim included",
    hint=PARTIAL_ORDER_HINT,
)  # fmt: skip
_FLIP = signature(
    "R -> R", "Si -> Si", "P -> P", legend="i: a dim that is not flipped",
    hint="redistribute the flipped dims to Replicate first",
)  # fmt: skip
_GATHER = Signature(
    {},
    "R x R -> R, P x R -> P, S(g) x R -> P, R x S(g) -> S(g), S(i) x S(i) -> S(i), "
    "S(i) x R -> S(i) (the index chunked like the input)",
    legend="input x index; g: the gathered dim; i: another dim, of one size in input and index",
    hint="redistribute the input and the index first",
)

#: torch's function of each kind, run once per dtype to learn whether torch takes it.
_PROBES: dict[OpKind, Callable[[torch.Tensor], object]] = {
    OpKind.Sort: torch.sort,
    OpKind.TopK: lambda t: torch.topk(t, 1),
}


@functools.cache
def _refusal(kind: OpKind, dtype: torch.dtype) -> str:
    """torch's message when its function of ``kind`` refuses ``dtype`` ('' when it takes it)."""
    try:
        _PROBES[kind](torch.ones(1, dtype=dtype))
    except (RuntimeError, TypeError) as error:
        return refusal(error, str(error).strip().split("\n", 1)[0])
    return ""


def _check_dtype(name: str, kind: OpKind, dtype: torch.dtype) -> None:
    message = _refusal(kind, dtype)
    if message:
        refused(name, dtype, message)


def sort_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``sort(dim, descending, stable)``: values and int64 indices shaped like the input."""
    assert isinstance(param, SortParam)
    (x,) = inputs
    dim = norm_dim(name, param.dim, x.ndim)
    _check_dtype(name, OpKind.Sort, x.dtype)
    metas = [OutputMeta(x.shape, x.dtype, ()), OutputMeta(x.shape, torch.int64, ())]
    return one_input(name, _SORT, x, fresh_labels(x.ndim, (dim,)), metas)


def split_sort_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``sort`` where shards of the sorted dim are allowed: every shard stays."""
    assert isinstance(param, SplitSortParam)
    (x,) = inputs
    norm_dim(name, param.dim, x.ndim)
    _check_dtype(name, OpKind.Sort, x.dtype)
    metas = [OutputMeta(x.shape, x.dtype, ()), OutputMeta(x.shape, torch.int64, ())]
    return one_input(name, _SPLIT_SORT, x, identity(x.ndim), metas)


def topk_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``topk(k, dim, largest, sorted)``: values and int64 indices, ``k`` along ``dim``."""
    assert isinstance(param, TopKParam)
    (x,) = inputs
    dim, metas = _topk_metas(name, param.k, param.dim, x)
    return one_input(name, _TOPK, x, fresh_labels(x.ndim, (dim,)), metas)


def split_topk_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``topk`` where shards of the topk dim are allowed: Replicate on their mesh dims."""
    assert isinstance(param, SplitTopKParam)
    (x,) = inputs
    dim, metas = _topk_metas(name, param.k, param.dim, x)
    return one_input(name, _SPLIT_TOPK, x, fresh_labels(x.ndim, (dim,)), metas)


def _topk_metas(name: str, k: int, dim: int, x: Operand) -> tuple[int, list[OutputMeta]]:
    """The topk dim (normalised) and the outputs' metas, after torch's checks."""
    dim = norm_dim(name, dim, x.ndim)
    size = x.shape[dim] if x.shape else 1
    if not 0 <= k <= size:
        raise ParamError(
            f"{name}: selected index k out of range: k={k} for dim {dim} of size {size}; "
            f"accepted: 0 <= k <= {size}"
        )
    _check_dtype(name, OpKind.TopK, x.dtype)
    shape = (*x.shape[:dim], k, *x.shape[dim + 1 :]) if x.shape else ()
    return dim, [OutputMeta(shape, x.dtype, ()), OutputMeta(shape, torch.int64, ())]


def flip_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``flip(dims)``: the input's shape and dtype, each of ``dims`` reversed."""
    assert isinstance(param, FlipParam)
    (x,) = inputs
    dims = norm_dims(name, param.dims, x.ndim)
    return one_input(name, _FLIP, x, fresh_labels(x.ndim, dims), [OutputMeta(x.shape, x.dtype, ())])


def gather_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``torch.gather(x, dim, index)``: x's dtype, the index's shape (see the module)."""
    assert isinstance(param, GatherParam)
    x, index = inputs
    dim = _check_gather(name, x, index, param.dim)
    placements, chunked = [], list(index.placements)
    for m, (px, given) in enumerate(zip(x.placements, index.placements, strict=True)):
        pi = px if _chunks(dim, x, index, px, given) else given  # a local chunk, as elementwise
        chunked[m] = pi
        out = _gathered(dim, x, index, px, pi)
        if out is None:
            detail = (
                f"mesh dim {m} is {short_text(px)} x {short_text(given)}, which is not one of these"
            )
            raise reject(name, _GATHER, inputs, detail)
        placements.append(out)
    meta = OutputMeta(index.shape, x.dtype, tuple(placements))
    if tuple(chunked) == tuple(index.placements):
        return Inference((meta,))
    return Inference((meta,), (None, tuple(chunked)))


def _chunks(dim: int, x: Operand, index: Operand, px: Placement, pi: Placement) -> bool:
    """Whether a Replicate index is chunked like ``x``, sharded on another dim of one size in
    both (a local slice: each device gathers its own rows)."""
    if pi.__class__ is not Replicate or not isinstance(px, Shard) or not x.ndim:
        return False
    d = px.dim % x.ndim
    return d != dim and x.shape[d] == index.shape[d]


def _check_gather(name: str, x: Operand, index: Operand, dim: int) -> int:
    """torch's checks of gather's arguments; the gathered dim, normalised."""
    if index.dtype not in INDEX_DTYPES:
        raise DtypeError(f"{name}: the index must be int64 or int32; got {index.dtype}")
    dim = norm_dim(name, dim, x.ndim)
    if max(x.ndim, 1) != max(index.ndim, 1):
        raise ShapeError(
            f"{name}: the index must have as many dims as the input ({x.ndim}); got a "
            f"{index.ndim}-D index of shape {list(index.shape)}"
        )
    if x.ndim and index.ndim and math.prod(index.shape):
        for d, (s, i) in enumerate(zip(x.shape, index.shape, strict=True)):
            if d != dim and i > s:
                raise ShapeError(
                    f"{name}: size does not match at dimension {d}: expected index "
                    f"{list(index.shape)} to be no larger than the input {list(x.shape)} apart "
                    f"from dimension {dim}"
                )
    return dim


def _gathered(
    dim: int, x: Operand, index: Operand, px: Placement, pi: Placement
) -> Placement | None:
    """The output placement on one mesh dim (None: refused; see the module)."""
    if pi.__class__ is Replicate:
        if isinstance(px, Shard):
            return Partial() if px.dim % x.ndim == dim else None
        return px  # Replicate, or Partial: picking is linear
    if not isinstance(pi, Shard):
        return None
    if pi.dim == dim:
        return pi if px.__class__ is Replicate else None
    if px == pi and x.shape[pi.dim] == index.shape[pi.dim]:
        return pi
    return None


RULES: dict[OpKind, Rule] = {
    OpKind.Sort: sort_rule,
    OpKind.TopK: topk_rule,
    OpKind.SplitTopK: split_topk_rule,
    OpKind.SplitSort: split_sort_rule,
    OpKind.Flip: flip_rule,
    OpKind.Gather: gather_rule,
}
