"""Record-time strides: the strides torch would give the GLOBAL tensor, where they are known.

The devices decide view-or-copy (``contiguous``, ``reshape``, ``flatten``, ``view``) from their
shard (``dtorch.kernels.local.views``), and a shard cannot always tell: a column slice that
covers a device's whole shard, or a transpose whose dims a device holds one row each of, looks
contiguous there while torch's full tensor is not, so that device would return a view where
torch copies (writes through the result would reach the input on some devices only).

So a handle carries the global strides when they are known: a created tensor is contiguous,
the view operators (slicing, ``narrow``, ``select``, ``split``, ``chunk``, ``transpose``,
``permute``, ``unsqueeze``, ``squeeze``, ``expand``, viewable reshapes) derive theirs as torch
does, and ``contiguous``, ``clone`` and casts give torch's. Where they say torch copies, the
operator copies on every device (``ContiguousParam.copy``); where they say torch views, every
device views where torch can view its shard (``ReshapeParam.view`` and its twins). Strides of
the operators that make a new tensor elementwise, by reducing, by normalising or by
concatenating (``ROW_MAJOR_KINDS``) are row-major when every input has torch's own strides
for its shape (a contiguous tensor strided otherwise on a size-1 dim can make torch's result
another layout), as torch's are; an elementwise map of one other tensor keeps its memory
order; any other operator's result has unknown strides (None), and the devices decide as
before. ``Tensor.is_contiguous()`` stays DTorch's (always True).

Example:
    >>> view_strides((2, 3), (1, 2), (6,)) is None, view_strides((2, 3), (3, 1), (3, 2))
    (True, (2, 1))
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from dtorch.ir.opkind import ActivationKind, BinaryKind, OpKind
from dtorch.ir.params import ActivationParam, BroadcastBinaryParam, OpParam
from dtorch.ir.params_base import IndexEntry, SliceIndex
from dtorch.ir.rules.indexing import slice_length

if TYPE_CHECKING:
    from dtorch.api.handle import TensorBase

Strides = tuple[int, ...]
H = TypeVar("H", bound="TensorBase")


class RowMajor(enum.Enum):
    """The strides of a tensor known row-major, stored as this marker: an operator's result
    is marked with no loop over its dims (the per-operator hot path), and ``known`` spells
    the strides out when a view operator asks."""

    ROW_MAJOR = "row-major"


ROW_MAJOR = RowMajor.ROW_MAJOR
#: Strides of which only some are known (None: unknown): an ``expand`` of a tensor whose strides
#: are unknown knows its new stride-0 dims, all that ``overlapping`` asks.
SomeStrides = tuple[int | None, ...]
#: What a handle's ``_strides`` slot holds: strides, some strides, the row-major marker, or
#: None (unknown).
Layout = Strides | SomeStrides | RowMajor | None

#: Operators whose result torch makes row-major when every tensor input is contiguous (its
#: TensorIterator's fast setup, reductions, normalisations, ``cat``, matmul's ``mm`` and
#: ``bmm``, the pads and repeats), each a new tensor, never a view. Not here: ``einsum``
#: (torch may return a permuted view of its input) and attention (a transposed result).
ROW_MAJOR_KINDS = frozenset(
    {
        OpKind.Activation,
        OpKind.BaseMath,
        OpKind.BatchNorm,
        OpKind.BroadcastBinary,
        OpKind.Clamp,
        OpKind.Concat,
        OpKind.Dropout,
        OpKind.Embedding,
        OpKind.IndexSelect,
        OpKind.Interpolate,
        OpKind.Linear,
        OpKind.Masked,
        OpKind.Matmul,
        OpKind.MaxMin,
        OpKind.Normalization,
        OpKind.Outer,
        OpKind.Pad,
        OpKind.Pooling,
        OpKind.Reduce,
        OpKind.Repeat,
        OpKind.RepeatInterleave,
        OpKind.Scan,
        OpKind.Softmax,
        OpKind.SplitReduce,
        OpKind.SplitScan,
        OpKind.SplitSoftmax,
        OpKind.Where,
    }
)


def known(t: TensorBase) -> Strides | None:
    """``t``'s global strides where known, else None (the devices judge by their shards)."""
    strides = getattr(t, "_strides", None)  # unset on the results of most operators: unknown
    if strides is ROW_MAJOR:
        return contiguous_strides(t.shape)
    return None if strides is None or None in strides else strides


def some(t: TensorBase) -> SomeStrides:
    """``t``'s global strides, each None where not known."""
    strides = getattr(t, "_strides", None)
    if strides is ROW_MAJOR:
        return contiguous_strides(t.shape)
    return (None,) * len(t.shape) if strides is None else strides


def layout(t: TensorBase) -> Layout:
    """``t``'s ``_strides`` as stored (for a handle that stands for the same value)."""
    return getattr(t, "_strides", None)


def mark(t: H, strides: Layout) -> H:
    """``t`` with its global strides (None: unknown)."""
    t._strides = strides
    return t


def mark_some(t: H, strides: SomeStrides) -> H:
    """``t`` with what is known of its strides (``some``): None where nothing is."""
    return mark(t, None if strides and all(s is None for s in strides) else strides)


def _times(stride: int | None, factor: int) -> int | None:
    return None if stride is None else stride * factor


#: The binary kinds that raise a number to a tensor's power (not in the tensor's order).
_POWERS = frozenset({BinaryKind.POW, BinaryKind.FLOAT_POWER, BinaryKind.LDEXP})


def _same_layout(param: OpParam) -> bool:
    """Whether ``param``'s operator of one non-contiguous tensor lays its result out in that
    tensor's memory order, as torch's TensorIterator does (``t.T * 2`` is transposed); not
    ``log_sigmoid`` and a number to a tensor's power (``2 ** t``, ``float_power(2, t)``),
    whose CPU kernels return row-major results (as do the other ``ROW_MAJOR_KINDS``), nor
    ``ldexp(number, t)``, row-major or in ``t``'s order by the dtypes (torch's exact kernel
    for an integer ``t`` keeps its order, its ``pow`` path does not)."""
    if isinstance(param, ActivationParam):
        return param.activation is not ActivationKind.LOGSIGMOID
    if isinstance(param, BroadcastBinaryParam):
        return not (param.scalar_first and param.binary in _POWERS)
    return param.kind in (OpKind.BaseMath, OpKind.Clamp)


def mark_fresh(param: OpParam, outputs: Sequence[TensorBase], inputs: Sequence[TensorBase]) -> None:
    """Mark the results of a ``ROW_MAJOR_KINDS`` operator row-major when every input has
    torch's own strides for its shape (from others, as a permuted (2, 1, 1), contiguous too,
    a broadcast or a memory-format guess differs); one of a single other input with known
    strides in its memory order where torch keeps that (``_same_layout``); leave any other
    unknown."""
    for t in inputs:
        strides = layout(t)
        if strides is ROW_MAJOR or (strides is not None and strides == contiguous_strides(t.shape)):
            continue
        whole = None if strides is None else known(t)  # some strides unknown: nothing kept
        if whole is not None and len(inputs) == 1 and _same_layout(param):
            outputs[0]._strides = preserved(t.shape, whole)
        return
    for out in outputs:
        out._strides = ROW_MAJOR


def overlapping(t: TensorBase, index: Sequence[IndexEntry] | None = None) -> bool:
    """Whether elements of ``t`` - or of its basic-index region ``t[index]`` (a normalized
    index) - share memory as torch's ``has_internal_overlap`` finds them: a dim of stride 0
    and size above 1, as ``expand`` makes. Unknown strides tell nothing: False.

    Example:
        >>> import dtorch
        >>> row = dtorch.zeros(3)
        >>> overlapping(row.expand(2, 3)), overlapping(row.expand(2, 3)[0])
        (True, False)
    """
    strides = getattr(t, "_strides", None)
    if strides is None or strides is ROW_MAJOR:  # the per-write hot path: no loop
        return False
    if index is None:
        return any(s == 0 and n > 1 for n, s in zip(t.shape, strides, strict=True))
    dim = 0
    for entry in index:  # an int drops its dim, a slice keeps slice_length of it
        if entry is None:
            continue
        if isinstance(entry, SliceIndex) and strides[dim] == 0 and slice_length(entry) > 1:
            return True
        dim += 1
    return False


def contiguous_strides(shape: Sequence[int]) -> Strides:
    """Row-major strides of ``shape`` (torch's for a new tensor)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def is_contiguous(shape: Sequence[int], strides: Strides) -> bool:
    """torch's ``is_contiguous``: size-1 dims (and empty tensors) skipped."""
    if 0 in shape:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def view_strides(old: Sequence[int], strides: Strides, new: Sequence[int]) -> Strides | None:
    """The strides of ``old`` viewed as ``new`` without a copy, None where torch's ``view``
    cannot (its ``computeStride``: the old dims each new run merges or splits must follow one
    another in memory)."""
    if not old:
        return (1,) * len(new)
    if 0 in old:  # nothing to address: torch keeps the strides or makes row-major ones
        return strides if tuple(old) == tuple(new) else contiguous_strides(new)
    out = [0] * len(new)
    view_d = len(new) - 1
    base, tensor_numel, view_numel = strides[-1], 1, 1
    for d in range(len(old) - 1, -1, -1):
        tensor_numel *= old[d]
        if d == 0 or (old[d - 1] != 1 and strides[d - 1] != tensor_numel * base):
            while view_d >= 0 and (view_numel < tensor_numel or new[view_d] == 1):
                out[view_d] = view_numel * base
                view_numel *= new[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                base, tensor_numel, view_numel = strides[d - 1], 1, 1
    return tuple(out) if view_d == -1 else None


def preserved(shape: Sequence[int], strides: Strides) -> Strides:
    """The strides of a copy in torch's ``preserve_format`` (``clone``, a cast): the same
    where non-overlapping and dense, else dense with the dims in the same memory order."""
    if _dense(shape, strides):
        return strides
    order = _memory_order(shape, strides)
    out, step = [0] * len(shape), 1
    for d in order:  # fastest first
        out[d] = step
        step *= shape[d] if shape[d] > 1 else 1
    return tuple(out)


def _dense(shape: Sequence[int], strides: Strides) -> bool:
    # torch's is_non_overlapping_and_dense: dims of size < 2 aside, the others tile memory
    if len(shape) == 1:
        return shape[0] < 2 or strides[0] == 1
    dims = sorted((d for d in range(len(shape)) if shape[d] >= 2), key=lambda d: strides[d])
    expected = 1
    for d in dims:
        if strides[d] != expected:
            return False
        expected *= shape[d]
    return True


def _memory_order(shape: Sequence[int], strides: Strides) -> list[int]:
    # torch's infer_dense_strides order (fastest first): an insertion sort from the last dim
    # that moves a dim past a faster one (a tie: past a smaller one), 0 strides undecided
    order = list(range(len(shape) - 1, -1, -1))
    for i in range(1, len(order)):
        j = i
        for k in range(i - 1, -1, -1):
            swap = _compare(shape, strides, order[k], order[j])
            if swap > 0:
                order[k], order[j] = order[j], order[k]
                j = k
            elif swap < 0:
                break
    return order


def _compare(shape: Sequence[int], strides: Strides, a: int, b: int) -> int:
    # 1: dim a goes after dim b; -1: before; 0: undecided
    if strides[a] == 0 or strides[b] == 0:
        return 0
    if strides[a] != strides[b]:
        return 1 if strides[a] > strides[b] else -1
    return 1 if shape[a] > shape[b] else 0


def indexed(shape: Sequence[int], strides: SomeStrides, index: Sequence[IndexEntry]) -> SomeStrides:
    """The strides of basic indexing (a normalized index: an entry per dim, None adds one),
    applied entry by entry as torch's ``applySlicing`` does (an unknown one stays unknown)."""
    sizes, out, dim = list(shape), list(strides), 0
    for entry in index:
        if entry is None:
            out.insert(dim, _times(out[dim], sizes[dim]) if dim < len(sizes) else 1)
            sizes.insert(dim, 1)
            dim += 1
        elif isinstance(entry, SliceIndex):
            out[dim] = _times(out[dim], entry.step)
            dim += 1
        else:  # an int: the dim goes
            del sizes[dim], out[dim]
    return tuple(out)


def unsqueezed(shape: Sequence[int], strides: SomeStrides, dim: int) -> SomeStrides:
    """torch's strides for a new size-1 dim at ``dim`` (an unknown one stays unknown)."""
    new = _times(strides[dim], shape[dim]) if dim < len(shape) else 1
    return (*strides[:dim], new, *strides[dim:])


def expanded(shape: Sequence[int], strides: SomeStrides, target: Sequence[int]) -> SomeStrides:
    """``expand``'s strides: 0 for new leading dims and for size-1 dims made larger (known
    whatever ``strides`` knows; the others as given)."""
    lead = len(target) - len(shape)
    kept = [
        0 if size == 1 and want != 1 else stride
        for size, stride, want in zip(shape, strides, target[lead:], strict=True)
    ]
    return (0,) * lead + tuple(kept)
