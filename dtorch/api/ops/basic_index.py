"""Basic indexing: ``t[a:b, i, None, ...]`` and ``t[...] = value`` (ints, slices, None and
``...``, recorded as one getitem/setitem operator on the devices), and the slices made from
it: ``narrow`` and ``split``. An index holding lists, tensors or bools is advanced indexing,
handed on to ``dtorch.api.ops.index``.

Example:
    >>> import dtorch
    >>> t = dtorch.arange(12).view(3, 4)
    >>> t[1:, ::2].tolist(), t[0, None].shape
    ([[4, 6], [8, 10]], torch.Size([1, 4]))
    >>> t[:, 0] = -1
    >>> t[:, :2].tolist(), [p.shape for p in t.split(3, dim=1)]
    ([[-1, 1], [-1, 5], [-1, 9]], [torch.Size([3, 3]), torch.Size([3, 1])])
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

import dtorch.api.ops.index as _index
from dtorch.api.create import beside
from dtorch.api.dims import as_size, normalize_dim, numpy_names
from dtorch.api.handle import TensorBase
from dtorch.api.ops.convert import writable, writer
from dtorch.api.ops.scalars import as_scalar, is_scalar, not_a_number
from dtorch.api.record import record, tensor_arg
from dtorch.api.strides import indexed, mark_some, some
from dtorch.errors import DimError, ParamError, ShapeError
from dtorch.ir.params import GetItemParam, IndexEntry, SetItemParam, SliceIndex
from dtorch.ir.rules.indexing import plan_index
from dtorch.ir.rules.ints import numbers_refusal

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def normalize_index(
    index: Any, shape: Sequence[int], name: str = "getitem"
) -> tuple[IndexEntry, ...]:
    """Basic indexing as data: ints bounds-checked and made non-negative, slices clipped to
    ``SliceIndex``, None kept (a new dim). Several ``...`` are read as torch reads them:
    each one moves over the dims the other indices leave (the first takes them all), an
    index left past the last dim is refused, a full slice there is a no-op."""
    items = list(index) if isinstance(index, tuple) else [index]
    _check_entries(name, items)
    specified = sum(1 for i in items if i is not None and i is not Ellipsis)
    if specified > len(shape):
        raise IndexError(f"{name}: too many indices for a tensor of dimension {len(shape)}")
    out: list[IndexEntry] = []
    dim = 0
    for item in items:
        if item is Ellipsis:
            out.extend(SliceIndex(0, s, 1) for s in shape[dim : dim + len(shape) - specified])
            dim += len(shape) - specified
        elif _past_end(name, item, dim, len(shape)):
            continue
        elif item is None:
            out.append(None)
        else:
            out.append(_entry(name, item, shape[dim], dim))
            dim += 1
    return tuple(out) + tuple(SliceIndex(0, s, 1) for s in shape[dim:])


def _past_end(name: str, item: Any, dim: int, ndim: int) -> bool:
    # torch skips a full slice anywhere, and refuses other indices a second '...' pushed out
    if item == slice(None):
        return dim >= ndim
    if dim > ndim or (dim == ndim and item is not None):
        raise IndexError(
            f"{name}: index {item!r} falls past the last of the {ndim} dims (torch moves every "
            f"'...' over the dims the other indices leave); accepted: at most one '...' before it"
        )
    return False


def _check_entries(name: str, items: list[Any]) -> None:
    for item in items:
        if isinstance(item, (TensorBase, torch.Tensor, list)) or (
            not isinstance(item, (int, slice)) and item is not None and item is not Ellipsis
        ):
            kind = TypeError if isinstance(item, (str, bytes)) else IndexError  # as torch's
            raise kind(
                f"{name}: unsupported index {type(item).__name__}: dtorch supports ints, slices, "
                "None, ..., int lists and tuples, integer and bool tensors"
            )


def _entry(name: str, item: int | slice, size: int, dim: int) -> IndexEntry:
    if isinstance(item, slice):
        start, stop, step = item.indices(size)
        if step <= 0:
            raise ValueError(f"{name}: step must be greater than zero; got {step}")
        return SliceIndex(start, max(start, stop), step)
    if not -size <= item < size:
        raise IndexError(
            f"{name}: index {item} is out of bounds for dimension {dim} with size {size}"
        )
    return int(item) % size


def _numpy_free(index: Any) -> Any:
    """The NumPy parts of an index as torch reads them: an integer or bool scalar as the
    Python number, an array as a torch tensor (an advanced index); a 0-d integer torch
    tensor as the Python int, as torch reads it (``t[torch.tensor(1)]`` is the view ``t[1]``);
    a ``range`` as the list of its ints."""
    if isinstance(index, tuple):
        return tuple(_numpy_free(item) for item in index)
    if isinstance(index, range):  # torch reads a range as the list of its ints
        return list(index)
    if isinstance(index, np.ndarray):
        index = torch.as_tensor(index)
    if isinstance(index, (np.integer, np.bool_)):
        return index.item()  # the Python int or bool
    if isinstance(index, torch.Tensor) and index.ndim == 0 and _integral(index.dtype):
        return int(index.item())
    return index


def _integral(dtype: torch.dtype) -> bool:
    # a 0-d bool or uint8 index is a mask to torch (a new dim of size 1), not a number
    return dtype in (torch.int64, torch.int32, torch.int16, torch.int8)


def getitem(t: Tensor, index: Any) -> Tensor:
    """``t[index]``: basic indices stay on the devices with known placements; lists, tuples,
    tensors and bools inside the index go through ``dtorch.api.ops.index`` (fetched to the
    client; the result, whose placements cannot be known at record time, Replicate on the mesh).
    NumPy integers and arrays index as in torch."""
    index = _numpy_free(index)
    if _index.is_advanced(index):
        return _index.advanced_getitem(t, index)
    return sliced("getitem", t, normalize_index(index, t.shape))


def sliced(name: str, t: Tensor, entries: tuple[IndexEntry, ...]) -> Tensor:
    """Record the basic-index view ``t[entries]`` (normalised), with its global strides where
    ``t``'s are known (``dtorch.api.strides``)."""
    out = record(name, GetItemParam(entries), (t,))[0]
    return mark_some(out, indexed(t.shape, some(t), entries))  # a view keeps stride-0 dims


@writer
def setitem(t: Tensor, index: Any, value: Any) -> None:
    """``t[index] = value`` in place (value: a number, a torch or dtorch tensor broadcastable
    to the slot); an advanced index is computed on the client (``dtorch.api.ops.index``)."""
    _index.check_assignable(t, value)  # torch's TypeError, whatever the index
    if is_scalar(value) and not isinstance(value, torch.Tensor):
        _check_number(t, value)  # torch's refusal of 300 for uint8, whatever the index
    index = _numpy_free(index)
    if _index.is_advanced(index):
        _index.advanced_setitem(t, index, value)
        return
    entries = normalize_index(index, t.shape, "setitem")
    writable("setitem", t, entries)
    if isinstance(value, torch.Tensor):
        value = beside(t, value)
    if is_scalar(value) and not isinstance(value, TensorBase):
        record("setitem", SetItemParam(entries, as_scalar(value)), (t,))
    elif isinstance(value, TensorBase):
        slot = plan_index("setitem", t.shape, entries)[1]
        record("setitem", SetItemParam(entries), (t, _index.without_leading_ones(value, len(slot))))
    else:
        raise not_a_number("setitem: value", value, "a number or a dtorch.Tensor")


def _check_number(t: Tensor, value: Any) -> None:
    """torch's refusal, at the call, of a number ``t[index] = value`` cannot convert to
    ``t``'s dtype (300 or NaN into an integer tensor; a float tensor takes any float, 1e6
    into float16 is inf)."""
    number = as_scalar(value)
    refusal = numbers_refusal(_setitem_probe, t.dtype, (number,), t.dtype)
    if refusal is not None:
        raise ParamError(
            f"setitem: the number {number.value!r} for a {t.dtype} tensor: {refusal} (torch's "
            f"refusal); accepted: a number {t.dtype} holds"
        )


def _setitem_probe(dtype: torch.dtype, value: bool | int | float) -> None:
    # torch converts a number it writes as valueToTensor does, whatever the index
    torch.zeros(1, dtype=dtype)[0] = value


# --- slices: a getitem of one dim ----------------------------------------------------------
def split(tensor: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """torch's ``split`` (``dtorch.split``, and ``Tensor.split``): pieces of
    ``split_size_or_sections`` along ``dim`` (the last one shorter when it does not divide),
    or one piece per size of a list; each a slice (``getitem``), so it keeps the placements a
    slice keeps (a slice of a sharded dim whose result is not chunked over the same devices
    is refused: a PlacementError that says to redistribute it).

    Example:
        >>> import dtorch
        >>> [p.tolist() for p in dtorch.arange(5).split(2)], dtorch.arange(5).split([1, 4])[1].shape
        ([[0, 1], [2, 3], [4]], torch.Size([4]))
        >>> [p.tolist() for p in dtorch.split(dtorch.arange(5), split_size_or_sections=3)]
        [[0, 1, 2], [3, 4]]
    """
    tensor_arg("split", tensor)
    if not tensor.ndim:
        raise ShapeError("split expects at least a 1-dimensional tensor")  # torch's words
    d = normalize_dim(dim, tensor.ndim, op="split")
    size = tensor.shape[d]
    given = split_size_or_sections
    if isinstance(given, (list, tuple, torch.Size)):
        sections = _check_sections(size, d, [as_size(s, "split", "split_sizes") for s in given])
    else:
        sections = _even_sections(size, as_size(given, "split", "split_size", _SPLIT_SIZE))
    ends = itertools.accumulate(sections)  # a running sum: split(1) of a long dim stays linear
    return tuple(
        slice_along("split", tensor, d, e - n, n) for e, n in zip(ends, sections, strict=True)
    )


_SPLIT_SIZE = "an int (the size of each piece) or a list of ints (the sizes of the pieces)"


def _even_sections(size: int, split_size: int) -> list[int]:
    # torch's rule: one piece of an empty dim; split_size 0 only there
    if split_size < 0:
        raise ParamError(
            f"split expects split_size be non-negative, but got split_size={split_size}"
        )
    if split_size == 0 and size != 0:
        raise ShapeError(
            f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}"
        )
    pieces = max(1, -(-size // split_size)) if split_size else 1
    return [min(split_size, size - i * split_size) for i in range(pieces)]


def _check_sections(size: int, dim: int, sections: list[int]) -> list[int]:
    if any(s < 0 for s in sections):
        raise ParamError(
            "split_with_sizes expects split_sizes have only non-negative entries, but got "
            f"split_sizes={sections}"
        )
    if sum(sections) != size:
        raise ShapeError(
            f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size "
            f"at dimension {dim}), but got split_sizes={sections}"
        )
    return sections


@numpy_names
def narrow(input: Tensor, dim: int, start: Any, length: int) -> Tensor:
    """torch's ``narrow``: ``length`` elements of ``dim`` from ``start`` (negative: from the
    end; an int or a 0-d integer tensor), a slice (``getitem``).

    Example:
        >>> import dtorch
        >>> dtorch.arange(6).reshape(2, 3).narrow(1, -2, 2).tolist()
        [[1, 2], [4, 5]]
    """
    tensor_arg("narrow", input)
    if not input.ndim:
        raise ShapeError("narrow() cannot be applied to a 0-dim tensor.")  # torch's words
    d = normalize_dim(dim, input.ndim, op="narrow")
    size, begin = input.shape[d], as_size(start, "narrow", "start", "an int or a 0-d int tensor")
    length = as_size(length, "narrow", "length", "an int")
    if not -size <= begin <= size:
        raise DimError(
            f"start out of range (expected to be in range of [{-size}, {size}], but got {begin})"
        )
    begin = begin + size if begin < 0 else begin
    if length < 0:
        raise ParamError("narrow(): length must be non-negative.")
    if begin + length > size:
        raise ShapeError(f"start ({begin}) + length ({length}) exceeds dimension size ({size}).")
    return slice_along("narrow", input, d, begin, length)


def slice_along(name: str, t: Tensor, dim: int, start: int, length: int) -> Tensor:
    # elements [start, start + length) of dim, the others whole: a getitem, recorded under the
    # name the user called, so that its errors (a sharded dim's slice) name it
    index = (slice(None),) * dim + (slice(start, start + length),)
    return sliced(name, t, normalize_index(index, t.shape, name))
