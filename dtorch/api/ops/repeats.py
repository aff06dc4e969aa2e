"""Repetition and rolling: ``repeat``, ``tile``, ``repeat_interleave`` and ``roll``.

``repeat`` and ``tile`` are one Repeat operator (a shard stays only on a dim repeated once);
``repeat_interleave`` with one count is one operator, with a tensor of counts an
``index_select`` of the repeated positions (the counts read on the client: the shape depends
on them); ``roll`` is a ``cat`` of two slices per rolled dim.

Example:
    >>> import dtorch
    >>> dtorch.tensor([1, 2]).repeat(2).tolist(), dtorch.arange(4).roll(1).tolist()
    ([1, 2, 1, 2], [3, 0, 1, 2])
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

import dtorch.api.ops.take as _take
from dtorch.api.create import beside
from dtorch.api.dims import keyword_form, normalize_dim, normalize_dims, numpy_names
from dtorch.api.handle import TensorBase
from dtorch.api.ops.basic_index import slice_along
from dtorch.api.ops.shape import flatten, reshape, sizes
from dtorch.api.record import record, tensor_arg
from dtorch.errors import DimError, ParamError, ShapeError, UnsupportedDtypeError
from dtorch.ir.params import CloneParam, ConcatParam, RepeatInterleaveParam, RepeatParam

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def repeat(t: Tensor, *repeats: Any) -> Tensor:
    tensor_arg("repeat", t)
    counts = sizes(repeats, "repeat", "repeats")
    if len(counts) < t.ndim or any(c < 0 for c in counts):
        raise ShapeError(f"repeat: {list(counts)} needs at least {t.ndim} non-negative counts")
    return record("repeat", RepeatParam(counts), (t,))[0]


@numpy_names
def repeat_interleave(
    input: Tensor,
    repeats: Any = None,
    dim: int | None = None,
    *,
    output_size: int | None = None,
) -> Tensor:
    """torch's ``repeat_interleave``: each element (of ``dim``; of the flattened tensor when
    None) ``repeats`` times. ``repeats`` is an int, or a 0-d/1-D integer tensor (torch or
    dtorch) of one count per element: the output's shape depends on its values, so a dtorch
    one is fetched first (a wait, as ``nonzero``), and the result is an ``index_select``.
    ``repeat_interleave(counts)`` (no repeats) repeats ``arange(len(counts))``.

    Example:
        >>> import torch, dtorch
        >>> x = dtorch.tensor([[1, 2], [3, 4]])
        >>> x.repeat_interleave(torch.tensor([1, 2]), dim=0).tolist()
        [[1, 2], [3, 4], [3, 4]]
        >>> dtorch.repeat_interleave(dtorch.tensor([2, 1])).tolist()
        [0, 0, 1]
    """
    tensor_arg("repeat_interleave", input)
    if repeats is None:
        counts = _counts(input)
        input = beside(input, torch.arange(len(counts)))
        return _repeat_each(input, counts, None, output_size)
    if isinstance(repeats, (torch.Tensor, TensorBase)):
        counts = _counts(repeats)
        if counts.numel() != 1:
            return _repeat_each(input, counts, dim, output_size)
        repeats = int(counts.reshape(()))
    if isinstance(repeats, np.integer):  # torch takes numpy integers
        repeats = int(repeats)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 0:
        raise TypeError("repeat_interleave: repeats must be a non-negative int or an int tensor")
    d = None if dim is None else normalize_dim(dim, input.ndim, op="repeat_interleave")
    out = record("repeat_interleave", RepeatInterleaveParam(repeats, d), (input,))[0]
    _check_output_size(out.shape[0 if d is None else d], output_size)
    return out


def _counts(repeats: Any) -> torch.Tensor:
    """The repeat counts on the client (a dtorch tensor's values are fetched): torch's
    checks of their dtype, rank and sign."""
    counts = repeats.to_torch() if isinstance(repeats, TensorBase) else repeats
    if counts.dtype not in (torch.int32, torch.int64):  # torch has no kernel for the others
        raise UnsupportedDtypeError(
            f"repeat_interleave: repeats must be an int32 or int64 tensor, got {counts.dtype}"
        )
    if counts.ndim > 1:
        raise ShapeError(
            f"repeat_interleave: repeats must be 0-dim or 1-dim tensor, got {counts.ndim}-dim"
        )
    if bool((counts < 0).any()):
        raise ParamError("repeat_interleave: repeats can not be negative")
    return counts.cpu()


def _repeat_each(
    input: Tensor, counts: torch.Tensor, dim: int | None, output_size: int | None
) -> Tensor:
    """Element ``i`` of ``dim`` ``counts[i]`` times: an index_select of the repeated
    positions (no dim: of the flattened tensor)."""
    source = flatten(input) if dim is None else input
    d = 0 if dim is None else normalize_dim(dim, input.ndim, op="repeat_interleave")
    if counts.numel() != source.shape[d]:
        raise ShapeError(
            f"repeat_interleave: repeats must have the same size as input along dim, but got "
            f"repeats.size(0) = {counts.numel()} and input.size({d}) = {source.shape[d]}"
        )
    index = torch.repeat_interleave(torch.arange(counts.numel()), counts)
    _check_output_size(len(index), output_size)
    return _take.index_select(source, d, index)


def _check_output_size(size: int, output_size: int | None) -> None:
    # torch's check of the optional ``output_size`` hint
    if output_size is not None and output_size != size:
        raise ShapeError(
            f"repeat_interleave: Invalid output_size, expected {size} but got {output_size}"
        )


def tile(input: Tensor, *dims: Any, **kw: Any) -> Tensor:
    """``torch.tile``: ``repeat`` with ``dims`` padded by leading 1s to the tensor's rank;
    torch's keyword form ``tile(dims=(2,))`` too.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([[1, 2]]).tile(2).tolist()
        [[1, 2, 1, 2]]
    """
    tensor_arg("tile", input)
    dims = keyword_form("tile", "dims", dims, kw)
    if not dims:
        raise TypeError('tile() missing 1 required positional arguments: "dims"')
    counts = sizes(dims, "tile", "dims")
    if any(c < 0 for c in counts):
        raise ShapeError(f"tile: {list(counts)} holds a negative count; accepted: counts >= 0")
    padded = (1,) * (input.ndim - len(counts)) + counts
    return record("tile", RepeatParam(padded), (input,))[0]


def roll(input: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """``torch.roll``: entries shifted along ``dims`` (each by its shift), wrapping around;
    without ``dims`` along the flattened tensor. Per dim a ``cat`` of two slices, so a rolled
    dim that is sharded is refused (a PlacementError naming ``roll``): redistribute it first.

    Example:
        >>> import dtorch
        >>> dtorch.arange(5).roll(2).tolist(), dtorch.arange(4).view(2, 2).roll(1, 1).tolist()
        ([3, 4, 0, 1, 2], [[1, 0], [3, 2]])
    """
    tensor_arg("roll", input)
    sequence = isinstance(shifts, (tuple, list))
    if isinstance(shifts, bool) or not (sequence or hasattr(shifts, "__index__")):
        raise TypeError(
            f"roll(): argument 'shifts' must be an int or a tuple of ints, not "
            f"{type(shifts).__name__}"
        )
    steps = tuple(shifts) if sequence else (shifts,)
    if not steps:
        raise ParamError("roll: `shifts` required; accepted: an int or a non-empty tuple")
    if isinstance(dims, (tuple, list)) and not dims:
        dims = None  # no dims: the flattened tensor, as None
    if dims is None:
        if len(steps) != 1:
            raise ShapeError(
                f"roll: shifts and dimensions must align. shifts: {len(steps)}, dims:0"
            )
        return reshape(roll(flatten(input), steps, 0), input.shape)
    if not input.ndim:
        raise DimError("roll: a 0-d tensor has no dims to roll along; accepted: dims=None")
    axes = normalize_dims(dims, input.ndim, op="roll")
    if len(steps) != len(axes):
        raise ShapeError(
            f"roll: shifts and dimensions must align. shifts: {len(steps)}, dims:{len(axes)}"
        )
    out = input
    for shift, d in zip(steps, axes, strict=True):
        out = _roll_dim(out, d, operator.index(shift))
    return record("roll", CloneParam(), (out,))[0] if out is input else out


def _roll_dim(t: Tensor, dim: int, shift: int) -> Tensor:
    # the last ``shift`` entries of dim, then the others
    size = t.shape[dim]
    s = shift % size if size else 0
    if not s:
        return t
    pieces = (slice_along("roll", t, dim, size - s, s), slice_along("roll", t, dim, 0, size - s))
    return record("roll", ConcatParam(dim), pieces)[0]
