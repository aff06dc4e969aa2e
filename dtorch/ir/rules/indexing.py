"""Rules of GetItem, Concat (cat/stack), Chunk and RepeatInterleave.

* ``t[a:b:s, i, None]``: a slice keeps a shard of its dim only when every device's part of the
  slice is exactly its ``torch.chunk`` part of the result (checked per device); an integer
  index on a sharded dim is rejected (redistribute that dim first); ``None`` adds a dim.
* ``cat`` on a sharded dim is ``dtorch.ir.rules.marked``'s (a sub-split Shard); ``stack``
  shifts shard dims after the new one. All inputs Partial gives Partial (both are linear).
* ``chunk`` keeps the placements when the chunked dim is not sharded.
* ``repeat`` (tiling) keeps the shards of dims it repeats once.
* ``repeat_interleave`` keeps a shard of the repeated dim when repeating each device's chunk
  lands on the output's chunk (e.g. sizes that divide the mesh).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import GetItemParam, SliceIndex
    >>> from dtorch.ir.placement import Shard
    >>> x = Operand(1, (8, 3), torch.float32, init_device_mesh("cpu", 2), (Shard(0),))
    >>> getitem_rule("getitem", GetItemParam((SliceIndex(2, 6), 1)), (x,)).outputs[0]
    OutputMeta(shape=(4,), dtype=torch.float32, placements=(Shard(dim=0),))
"""

from __future__ import annotations

import functools
import math

import torch

from dtorch.errors import PlacementError, ShapeError
from dtorch.ir import sharding
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import (
    ChunkParam,
    ConcatParam,
    GetItemParam,
    IndexEntry,
    OpParam,
    RepeatInterleaveParam,
    RepeatParam,
    SliceIndex,
)
from dtorch.ir.placement import Placement, Shard
from dtorch.ir.rules.base import (
    Inference,
    OutputMeta,
    ParamError,
    Rule,
    all_replicate,
    describe_inputs,
    norm_dim,
    replicated,
)
from dtorch.ir.rules.layout import check_dim_map
from dtorch.ir.rules.promotion import tensors_dtype
from dtorch.ir.rules.signature import (
    Labels,
    expand,
    fresh_labels,
    identity,
    one_input,
    one_output,
    signature,
    variadic,
)

_INDEX = signature(
    "R -> R", "Si -> Si", "P -> P", legend="i: a dim kept by a slice",
    hint="an integer index on a sharded dim needs that dim Replicate first",
)  # fmt: skip
_CAT = variadic(
    "R -> R", "R Si -> Si", "Si -> Si", "P -> P", legend="i: a dim other than the cat dim",
    hint="redistribute the cat dim to Replicate first",
)  # fmt: skip
_CHUNK = signature(
    "R -> R", "Si -> Si", "P -> P", legend="i: a dim other than the chunked dim",
    hint="redistribute the chunked dim to Replicate first",
)  # fmt: skip
_REPEAT = signature("R -> R", "Si -> Si", "P -> P", legend="i: any dim")
_TILE = signature(
    "R -> R", "Si -> Si", "P -> P", legend="i: a dim repeated once",
    hint="redistribute the repeated dims to Replicate first (repeat_interleave keeps shards)",
)  # fmt: skip


def slice_length(entry: SliceIndex) -> int:
    """Elements ``start:stop:step`` selects."""
    return max(0, -(-(entry.stop - entry.start) // entry.step))


def sliced_range(entry: SliceIndex, length: int, offset: int) -> tuple[int, int]:
    """(count, first output index) of the slice's elements inside input range
    ``[offset, offset + length)``.

    Example:
        >>> sliced_range(SliceIndex(1, 8, 2), 4, 4)  # elements 5 and 7 of 1, 3, 5, 7
        (2, 2)
    """
    n = slice_length(entry)

    def first_at_or_after(position: int) -> int:
        return min(max(-(-(position - entry.start) // entry.step), 0), n)

    lo, hi = first_at_or_after(offset), first_at_or_after(offset + length)
    return hi - lo, lo


def _check_entry(entry: IndexEntry, size: int) -> IndexEntry:
    # messages start with ": ": plan_index puts the operator's name in front
    if isinstance(entry, SliceIndex):
        if entry.step < 1 or not 0 <= entry.start <= size or not 0 <= entry.stop <= size:
            raise ShapeError(
                f": slice {entry.start}:{entry.stop}:{entry.step} is not a clipped slice "
                f"of a dim of size {size} (0 <= start, stop <= size, step >= 1)"
            )
        return entry
    if entry is not None and not -size <= entry < size:
        raise ShapeError(f": index {entry} is out of bounds for a dim of size {size}")
    return entry if entry is None or entry >= 0 else entry + size


IndexPlan = tuple[tuple[IndexEntry, ...], tuple[int, ...], tuple[int, ...]]


def plan_index(name: str, shape: tuple[int, ...], index: tuple[IndexEntry, ...]) -> IndexPlan:
    """The index with every input dim covered (ints made non-negative), the output shape and
    the output labels (the input dim each output dim comes from, -1 - k for new ones).

    Cached by shape and index only: kernels pass per-operator names (``getitem_17``).

    Example:
        >>> plan_index("getitem", (8, 3), (-1,))
        ((7, SliceIndex(start=0, stop=3, step=1)), (3,), (1,))
    """
    try:
        return _plan_index(shape, index)
    except ShapeError as error:  # raised without a name inside the cache
        raise ShapeError(f"{name}{error}") from None


@functools.lru_cache(maxsize=4096)
def _plan_index(shape: tuple[int, ...], index: tuple[IndexEntry, ...]) -> IndexPlan:
    consumed = sum(1 for e in index if e is not None)
    if consumed > len(shape):
        raise ShapeError(f": too many indices ({consumed}) for a {len(shape)}-D tensor")
    full = (*index, *(SliceIndex(0, s) for s in shape[consumed:]))
    entries: list[IndexEntry] = []
    out: list[int] = []
    labels: list[int] = []
    d = 0
    for k, entry in enumerate(full):
        if entry is None:
            entries.append(None)
            out.append(1)
            labels.append(-1 - k)
            continue
        checked = _check_entry(entry, shape[d])
        entries.append(checked)
        if isinstance(checked, SliceIndex):
            out.append(slice_length(checked))
            labels.append(d)
        d += 1
    return tuple(entries), tuple(out), tuple(labels)


def getitem_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """Basic indexing ``t[...]`` with ints, slices and None (Ellipsis already expanded)."""
    assert isinstance(param, GetItemParam)
    (x,) = inputs
    entries, shape, labels = plan_index(name, x.shape, param.index)
    if all_replicate(inputs):
        return replicated(shape, x.dtype, len(x.placements))
    placements = expand(name, _INDEX, inputs, (identity(x.ndim),), (labels,)).outputs[0]
    dims = [e for e in entries if e is not None]
    for j, d in enumerate(labels):
        if d >= 0 and _sharded(x.placements, d):
            entry = dims[d]
            assert isinstance(entry, SliceIndex)
            _check_slice(name, x, (shape, placements), (d, j), entry)
    return Inference((OutputMeta(shape, x.dtype, placements),))


def _sharded(placements: tuple[Placement, ...], dim: int) -> bool:
    return any(isinstance(p, Shard) and p.dim == dim for p in placements)


def _check_slice(
    name: str,
    x: Operand,
    out: tuple[tuple[int, ...], tuple[Placement, ...]],
    dims: tuple[int, int],
    entry: SliceIndex,
) -> None:
    layouts = (x.placements, out[1])
    bad = check_dim_map(x.shape, out[0], x.mesh.shape, layouts, dims, sliced_range, entry)
    if bad is not None:
        raise PlacementError(
            f"{name}: got {describe_inputs((x,))} on mesh {x.mesh.shape}; slicing "
            f"{entry.start}:{entry.stop}:{entry.step} of sharded dim {dims[0]} would leave "
            f"device {bad} a part that is not its chunk of the result; accepted: a slice whose "
            f"result is still chunked over the same devices. Redistribute dim {dims[0]} first"
        )


def concat_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``torch.cat`` (or ``torch.stack`` with ``param.stack``) along ``param.dim``."""
    assert isinstance(param, ConcatParam)
    if not inputs:
        raise ShapeError(f"{name}: needs at least one tensor")
    first = inputs[0]
    zero_d = next((i for i, o in enumerate(inputs) if not o.shape), None)
    if not param.stack and zero_d is not None:
        raise ShapeError(
            f"{name}: the tensor at position {zero_d} is zero-dimensional and cannot be "
            "concatenated; accepted: tensors of at least one dim (stack joins 0-d tensors)"
        )
    if any(o.ndim != first.ndim for o in inputs):
        raise ShapeError(f"{name}: tensors {[list(o.shape) for o in inputs]} differ in rank")
    # promoted as tensors with dims: cat has none of 0 dims, stack joins them unsqueezed
    dtype = tensors_dtype(name, OpKind.Concat, tuple((o.dtype, False) for o in inputs))
    if param.stack:
        return _stack(name, param.dim, inputs, dtype)
    dim = norm_dim(name, param.dim, first.ndim)
    for o in inputs:
        if o.shape[:dim] + o.shape[dim + 1 :] != first.shape[:dim] + first.shape[dim + 1 :]:
            raise ShapeError(
                f"{name}: sizes {[list(o.shape) for o in inputs]} must match except in dim {dim}"
            )
    shape = (*first.shape[:dim], sum(o.shape[dim] for o in inputs), *first.shape[dim + 1 :])
    out_labels = tuple(-1 if d == dim else d for d in range(first.ndim))
    in_labels = tuple(
        tuple(-2 - i if d == dim else d for d in range(first.ndim)) for i in range(len(inputs))
    )
    return _concatenated(name, inputs, in_labels, out_labels, shape, dtype)


def _stack(name: str, dim: int, inputs: tuple[Operand, ...], dtype: torch.dtype) -> Inference:
    first = inputs[0]
    if any(o.shape != first.shape for o in inputs):
        raise ShapeError(f"{name}: stack needs equal shapes, got {[list(o.shape) for o in inputs]}")
    d = norm_dim(name, dim, first.ndim + 1)
    shape = (*first.shape[:d], len(inputs), *first.shape[d:])
    out_labels = (*range(d), -1, *range(d, first.ndim))
    in_labels = (identity(first.ndim),) * len(inputs)
    return _concatenated(name, inputs, in_labels, out_labels, shape, dtype)


def _concatenated(
    name: str,
    inputs: tuple[Operand, ...],
    in_labels: tuple[Labels, ...],
    out_labels: Labels,
    shape: tuple[int, ...],
    dtype: torch.dtype,
) -> Inference:
    if all_replicate(inputs):
        return replicated(shape, dtype, len(inputs[0].placements))
    return one_output(name, _CAT, inputs, in_labels, out_labels, shape, dtype)


def chunk_sizes(size: int, chunks: int) -> tuple[int, ...]:
    """Sizes of the tensors ``torch.chunk`` returns (fewer than ``chunks`` when it must).

    Example:
        >>> chunk_sizes(5, 4), chunk_sizes(0, 2)
        ((2, 2, 1), (0, 0))
    """
    if size == 0:  # torch.chunk makes ``chunks`` empty parts of an empty dim
        return (0,) * chunks
    return sharding.filled_chunk_sizes(size, chunks)  # and drops the empty trailing ones


def chunk_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``torch.chunk(t, chunks, dim)``: several outputs; the chunked dim must be whole."""
    assert isinstance(param, ChunkParam)
    (x,) = inputs
    if param.chunks < 1:
        raise ParamError(f"{name}: chunks must be at least 1, got {param.chunks}")
    if x.ndim == 0:
        raise ShapeError(f"{name}: a 0-d tensor cannot be chunked")
    dim = norm_dim(name, param.dim, x.ndim)
    metas = [
        OutputMeta((*x.shape[:dim], n, *x.shape[dim + 1 :]), x.dtype, ())
        for n in chunk_sizes(x.shape[dim], param.chunks)
    ]
    labels = fresh_labels(x.ndim, (dim,))
    return one_input(name, _CHUNK, x, labels, metas)


def repeat_interleave_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``repeat_interleave(repeats, dim)`` with an int ``repeats`` (dim None: flattened)."""
    assert isinstance(param, RepeatInterleaveParam)
    (x,) = inputs
    if param.repeats < 0:
        raise ParamError(f"{name}: repeats must be >= 0, got {param.repeats}")
    if param.dim is None and x.ndim != 1:
        return _repeat_flat(name, x, param.repeats)
    dim = norm_dim(name, 0 if param.dim is None else param.dim, x.ndim)
    shape = tuple(s * param.repeats if d == dim else s for d, s in enumerate(x.shape))
    inference = one_input(name, _REPEAT, x, identity(x.ndim), [OutputMeta(shape, x.dtype, ())])
    if x.ndim and _sharded(x.placements, dim):
        _check_repeat(name, x, (shape, inference.outputs[0].placements), dim, param.repeats)
    return inference


def _repeat_flat(name: str, x: Operand, repeats: int) -> Inference:
    """``repeat_interleave`` without a dim flattens first: the input must not be sharded."""
    if any(isinstance(p, Shard) for p in x.placements):
        raise PlacementError(
            f"{name}: got {describe_inputs((x,))} on mesh {x.mesh.shape}; without a dim the "
            f"tensor is flattened first, which needs it unsharded (accepted: R, P); pass a dim "
            f"or redistribute first"
        )
    flat = OutputMeta((math.prod(x.shape) * repeats,), x.dtype, ())
    return one_input(name, _REPEAT, x, (-1,), [flat])


def _repeated(repeats: int, length: int, offset: int) -> tuple[int, int]:
    # repeating every element stretches a device's input range by the same factor
    return length * repeats, offset * repeats


def _check_repeat(
    name: str, x: Operand, out: tuple[tuple[int, ...], tuple[Placement, ...]], dim: int, r: int
) -> None:
    layouts = (x.placements, out[1])
    bad = check_dim_map(x.shape, out[0], x.mesh.shape, layouts, (dim, dim), _repeated, r)
    if bad is not None:
        raise PlacementError(
            f"{name}: got {describe_inputs((x,))} on mesh {x.mesh.shape}; repeating the chunks "
            f"of sharded dim {dim} {r} times would not give device {bad} its chunk of the "
            f"result; accepted: sizes whose chunks line up. Redistribute dim {dim} first"
        )


def repeat_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``t.repeat(*repeats)``: tiles the tensor; a dim repeated more than once is whole."""
    assert isinstance(param, RepeatParam)
    (x,) = inputs
    reps = tuple(param.repeats)
    lead = len(reps) - x.ndim
    if lead < 0 or any(r < 0 for r in reps):
        raise ShapeError(
            f"{name}: repeats {list(reps)} need one non-negative count per dim of {list(x.shape)}"
        )
    shape = (*reps[:lead], *(s * r for s, r in zip(x.shape, reps[lead:], strict=True)))
    # a tiled dim gets a new label: its shard would hold pieces of every copy
    labels = tuple(-1 - j if j < lead or reps[j] != 1 else j - lead for j in range(len(reps)))
    return one_input(name, _TILE, x, labels, [OutputMeta(shape, x.dtype, ())])


RULES: dict[OpKind, Rule] = {
    OpKind.Repeat: repeat_rule,
    OpKind.GetItem: getitem_rule,
    OpKind.Concat: concat_rule,
    OpKind.Chunk: chunk_rule,
    OpKind.RepeatInterleave: repeat_interleave_rule,
}
