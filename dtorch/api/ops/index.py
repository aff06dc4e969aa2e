"""Advanced indexing as torch does it: int lists and tuples inside an index, tensor indices
(integer arrays, broadcast together) and boolean masks, for ``t[index]`` and ``t[index] = v``.

On the devices (placements known at record time): one integer array of any shape (a list, a
torch tensor, or a dtorch tensor, which is not fetched) among basic indices. ``t[index]``
applies the basic indices, then one IndexSelect along the array's dim (``dtorch.api.ops.take``:
a sharded dim is gathered on the devices first, the other placements are kept).
``t[..., array] = v`` (the array among full slices and one ``...``) is one IndexPut on a dim
that is not sharded: ``t`` keeps its placements and is never fetched. ``t[mask] = number``
with a boolean mask of ``t``'s shape is torch's ``masked_fill_`` (``_fill_by_mask``).

Otherwise (a choice, with its cost) such an index is computed on the client. The index
tensors, and the indexed tensor, are fetched (a blocking read, like ``nonzero``); torch
indexes the full tensor, so every rule of torch holds (where the advanced dims go, bool
masks, broadcasting of index shapes, ``...`` and None among them). The result's shape
can depend on values (a mask), so its placements cannot be known at record time:
``t[index]`` is Replicate on ``t``'s mesh (as ``nonzero``'s result), so it mixes with the
other tensors there (``t[mask] += v`` is ``t[mask] = t[mask] + v``).
``t[index] = v`` writes the result back into ``t`` with ``t``'s own placements; duplicate
indices follow torch's ``index_put_`` on CPU (accumulate=False: the last write wins).
Basic indices (ints, slices, None, one ``...``) never come here: they stay on the devices.

Example:
    >>> import dtorch
    >>> t = dtorch.arange(12).view(3, 4)
    >>> t[[0, 2], 1:3].tolist(), t[t > 9].tolist()
    ([[1, 2], [9, 10]], [10, 11])
    >>> t[:, [3, 0]] = -1
    >>> t.tolist()
    [[-1, 1, 2, -1], [-1, 5, 6, -1], [-1, 9, 10, -1]]
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

import dtorch.api.ops.take as _take
from dtorch.api.create import NESTING, beside
from dtorch.api.dims import as_flag
from dtorch.api.handle import TensorBase, is_tensor
from dtorch.api.ops.convert import writer
from dtorch.api.ops.scalars import converted_number, is_scalar
from dtorch.api.record import named_as
from dtorch.api.strides import overlapping
from dtorch.errors import DtypeError, PlacementError, ShapeError, TraceError
from dtorch.ir.dtypes import scalar_type_name
from dtorch.ir.placement import Shard

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_INDEX_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)


def is_advanced(index: Any) -> bool:
    """True when the index holds a list, tuple, tensor or bool (torch's advanced indexing)."""
    return any(_advanced_item(i) for i in _entries(index))


def _entries(index: Any) -> tuple[Any, ...]:
    # an index's items: a tuple's, or the index itself
    return index if isinstance(index, tuple) else (index,)


def _advanced_item(item: Any) -> bool:
    # bool before int: True is an int to Python but a mask (a new dim of size 1) to torch
    return isinstance(item, (bool, list, tuple, torch.Tensor, TensorBase))


def to_torch_index(name: str, index: Any) -> Any:
    """The index with every dtorch tensor fetched (blocking) and every tensor dtype checked."""
    if isinstance(index, tuple):
        return tuple(_torch_item(name, i) for i in index)
    return _torch_item(name, index)


def _torch_item(name: str, item: Any) -> Any:
    # lists stay lists (torch reads nested ones as one integer array); tensors are checked
    if isinstance(item, TensorBase):
        item = item.to_torch()
    if isinstance(item, torch.Tensor) and item.dtype not in _INDEX_DTYPES:
        raise IndexError(
            f"{name}: a tensor index must be long, int, byte or bool; got {item.dtype}"
        )
    if isinstance(item, (list, tuple)):
        _check_list(name, item)
    return item


def _check_list(name: str, items: list[Any] | tuple[Any, ...], depth: int = 0) -> None:
    # torch would read floats in a list as a float index and fail with its own message
    for item in items:
        if isinstance(item, (list, tuple)):
            if depth < NESTING:
                _check_list(name, item, depth + 1)
        elif isinstance(item, (TensorBase, float)):
            raise IndexError(f"{name}: a list index holds ints or bools; got {type(item).__name__}")


#: The exception classes torch's indexing raises, most specific first: an error is raised
#: again as the first it is an instance of, so ``except TypeError`` catches what it would
#: catch from torch.
_TORCH_ERRORS: tuple[type[Exception], ...] = (IndexError, TypeError, ValueError, RuntimeError)


def _torch_call(name: str, fn: Any) -> Any:
    """Run torch's indexing, its errors renamed after the operator (what it got, why), of
    the class torch raised."""
    try:
        return fn()
    except _TORCH_ERRORS as e:
        kind = next(cls for cls in _TORCH_ERRORS if isinstance(e, cls))
        raise kind(f"{name}: {e}") from None


def advanced_getitem(t: Tensor, index: Any) -> Tensor:
    """``t[index]``: one integer array on the devices (see the module), else on the client,
    the result Replicate on ``t``'s mesh."""
    kept = _on_devices(t, index)
    if kept is not None:
        return kept
    with _on_the_client("t[index]"):
        where = to_torch_index("getitem", index)
        full = t.to_torch()
    return beside(t, _torch_call("getitem", lambda: full[where]))


def _one_array(index: Any) -> tuple[list[Any], int, Any] | None:
    """(the index items, where the one integer array is, the array), or None where the index
    holds another advanced item, a mask or several ``...``."""
    if isinstance(index, list) and not all(type(i) is int for i in index):
        return None  # torch reads a list of sequences as a tuple of indices (deprecated)
    items = list(index) if isinstance(index, tuple) else [index]
    arrays = [k for k, item in enumerate(items) if _advanced_item(item)]
    if len(arrays) != 1 or sum(1 for i in items if i is Ellipsis) > 1:
        return None
    array = _take.integer_array(items[arrays[0]])
    return None if array is None else (items, arrays[0], array)


def _on_devices(t: Tensor, index: Any) -> Tensor | None:
    """``t[..., array, ...]``: the basic indices applied, then one IndexSelect along the
    array's dim; None where the index is not one integer array or the basic part is refused
    on these placements (torch does it on the client)."""
    found = _one_array(index)
    if found is None:
        return None
    items, at, array = found
    items[at] = slice(None)
    try:
        base = t[tuple(items)]
    except PlacementError:
        return None
    return _take.take(base, _kept_dim(items, at, t.ndim), array, "getitem")


def _kept_dim(items: list[Any], at: int, ndim: int) -> int:
    # the result dim of items[at]: Nones and slices before it make dims, ints remove theirs
    before = items[:at]
    if Ellipsis in before:
        named = sum(1 for i in items if i is not None and i is not Ellipsis)
        return sum(1 for i in before if not isinstance(i, int)) - 1 + ndim - named
    return sum(1 for i in before if not isinstance(i, int))


#: The numpy values torch assigns in ``t[index] = value``: integers, and the Python numbers
#: float64 and complex128 are; not numpy's other scalars nor arrays.
_ASSIGNABLE = (np.integer, float, complex)


def check_assignable(t: Tensor, value: Any) -> None:
    """torch's TypeError for a numpy value ``t[index] = value`` does not take (a
    ``numpy.float32``, a ``numpy.bool_``, an array), whatever the index.

    Example:
        >>> import dtorch, numpy
        >>> check_assignable(dtorch.zeros(2), numpy.float64(1.5))  # a Python float
        >>> try:
        ...     check_assignable(dtorch.zeros(2), numpy.float32(1.5))
        ... except TypeError as error:
        ...     print(str(error)[:60])
        setitem: can't assign a numpy.float32 to a torch.FloatTensor
    """
    if not isinstance(value, (np.generic, np.ndarray)) or isinstance(value, _ASSIGNABLE):
        return
    kind = type(value)
    raise TypeError(
        f"setitem: can't assign a {kind.__module__}.{kind.__name__} to a "
        f"{torch.empty(0, dtype=t.dtype).type()}; accepted: a tensor, a Python number or a "
        "numpy integer (numpy.float32(x).item() is a Python float)"
    )


def without_leading_ones(value: Any, ndim: int) -> Any:
    """``value`` without its leading size-1 dims beyond ``ndim`` (0: all of them, which
    broadcast alike): torch drops them before it broadcasts a value to the slot it writes
    (``t[0] = tensor([7.0])``). A dim a mesh dim shards stays: a value laid out so is
    refused with the shapes named, where dropping it is needed."""
    if not is_tensor(value) and not isinstance(value, torch.Tensor):
        return value
    placements = value.placements if is_tensor(value) else ()
    sharded = {p.dim for p in placements if isinstance(p, Shard)}
    extra = 0
    while extra < value.ndim - ndim and value.shape[extra] == 1 and extra not in sharded:
        extra += 1
    return value.reshape(value.shape[extra:]) if extra else value


def advanced_setitem(t: Tensor, index: Any, value: Any) -> None:
    """``t[index] = value``: one integer array among full slices (and a ``...``) on a dim that
    is not sharded on the devices (IndexPut); else on the client, written back with ``t``'s
    placements."""
    _check_put_dtype(t, index, value)
    value = without_leading_ones(value, 0)
    if _fill_by_mask(t, index, value):
        return
    if overlapping(t):
        raise ShapeError(
            "setitem: an advanced-index write into a tensor whose elements share memory (an "
            "expand-ed view; torch deprecates it) is not supported; accepted there: a boolean "
            "mask of the tensor's shape with a number (masked_fill_), or clone() the view first"
        )
    if _put_on_devices(t, index, value):
        return
    with _on_the_client("t[index] = value"):
        where = to_torch_index("setitem", index)
        if isinstance(value, TensorBase):
            value = value.to_torch()
        full = t.to_torch()
    _torch_call("setitem", lambda: full.__setitem__(where, value))
    back = beside(t, full)
    t[...] = back


@writer
def index_put_(input: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
    """``torch.Tensor.index_put_``: ``input[indices] = values`` for a tuple of index tensors
    (integer or bool, torch or dtorch), or with ``accumulate`` the values added there (a
    position indexed twice gets both). The write is ``setitem``'s; an accumulation runs on
    the client (the tensor fetched, torch's ``index_put_``, written back with its
    placements). Returns ``input``.

    Example:
        >>> import dtorch, torch
        >>> t = dtorch.zeros(3)
        >>> ids, ones = torch.tensor([0, 2, 0]), dtorch.ones(3)
        >>> t.index_put_((ids,), ones, accumulate=True).tolist()
        [2.0, 0.0, 1.0]
    """
    if not isinstance(indices, (tuple, list)):
        raise TypeError(
            f"index_put_(): argument 'indices' must be tuple of Tensors, not "
            f"{type(indices).__name__}"
        )
    for at, given in enumerate((*indices, values)):
        if not isinstance(given, (TensorBase, torch.Tensor)):
            what = "argument 'values'" if at == len(indices) else f"element {at} of 'indices'"
            raise TypeError(f"index_put_(): {what} must be a Tensor, not {type(given).__name__}")
    if not as_flag(accumulate, "index_put_", "accumulate"):
        input[tuple(indices)] = values
        return input
    with _on_the_client("index_put_(accumulate=True)"):
        where = tuple(i.to_torch() if isinstance(i, TensorBase) else i for i in indices)
        added = values.to_torch() if isinstance(values, TensorBase) else values
        full = input.to_torch()
    _torch_call("index_put_", lambda: full.index_put_(where, added, accumulate=True))
    input[...] = beside(input, full)
    return input


def index_put(input: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
    """``torch.index_put``: ``index_put_`` of a copy of ``input`` (``input`` unchanged).

    Example:
        >>> import dtorch, torch
        >>> t = dtorch.zeros(3)
        >>> dtorch.index_put(t, (torch.tensor([1]),), dtorch.ones(1)).tolist(), t.tolist()
        ([0.0, 1.0, 0.0], [0.0, 0.0, 0.0])
    """
    if not isinstance(input, TensorBase):
        raise TypeError(f"index_put(): input must be a dtorch.Tensor, got {type(input).__name__}")
    return index_put_(input.clone(), indices, values, accumulate)


def _fill_by_mask(t: Tensor, index: Any, value: Any) -> bool:
    """``t[mask] = number`` (or a replicated 0-d tensor) with a boolean mask of ``t``'s
    shape: torch's ``masked_fill_``, recorded as that on the devices (no fetch; into an
    ``expand``-ed view too, which torch allows) when ``t`` has no Partial placement (each
    part would get the number) and the mask is a torch tensor, or a dtorch one on ``t``'s
    mesh as ``t``'s placements or Replicate. False where it does not apply: the general
    path takes the index."""
    items = _entries(index)
    if len(items) != 1 or not _fills(t, value):
        return False
    mask = items[0]
    if not isinstance(mask, (TensorBase, torch.Tensor)) or mask.dtype != torch.bool:
        return False
    if tuple(mask.shape) != tuple(t.shape):
        return False
    if any(p.is_partial() for p in t.placements):
        return False
    if isinstance(mask, torch.Tensor):
        mask = beside(t, mask)
    elif mask.device_mesh != t.device_mesh or not _aligned(mask, t):
        return False
    if not isinstance(value, TensorBase):  # torch converts it as a copy: 7e4 is inf in float16
        value = converted_number(value, t.dtype)
    with named_as("setitem", "masked_fill_"):  # refusals name what the user wrote
        t.masked_fill_(mask, value)
    return True


def _fills(t: Tensor, value: Any) -> bool:
    # a value masked_fill_ takes as it is: a number, or a whole 0-d dtorch tensor on t's mesh
    if isinstance(value, TensorBase):
        on_mesh = value.ndim == 0 and value.device_mesh == t.device_mesh
        return on_mesh and all(p.is_replicate() for p in value.placements)
    return is_scalar(value)


def _aligned(mask: TensorBase, t: Tensor) -> bool:
    # a mask the fill takes as it is: t's own placements, or whole on every device
    return mask.placements == t.placements or all(p.is_replicate() for p in mask.placements)


def _check_put_dtype(t: Tensor, index: Any, value: Any) -> None:
    """torch's refusal, at the call, of a tensor value of another dtype (its ``index_put_``
    casts nothing), except a one-element value where a boolean mask is in the index (torch
    may fill with it, converting; ``x[mask] = tensor(5)``, ``x[:, mask]``, ``x[[True, ...]]``).
    Where torch would refuse such a value, dtorch converts it: the lenient side."""
    if not isinstance(value, (TensorBase, torch.Tensor)) or value.dtype == t.dtype:
        return
    if value.numel() == 1 and any(map(_is_mask, _entries(index))):
        return
    raise DtypeError(
        "Index put requires the source and destination dtypes match, got "
        f"{scalar_type_name(t.dtype)} for the destination and {scalar_type_name(value.dtype)} "
        "for the source."
    )


def _is_mask(entry: Any) -> bool:
    # a boolean tensor (dtorch or torch) or a list of Python bools: torch's boolean masks
    if isinstance(entry, (TensorBase, torch.Tensor)):
        return entry.dtype == torch.bool
    return isinstance(entry, list) and bool(entry) and all(isinstance(e, bool) for e in entry)


@contextlib.contextmanager
def _on_the_client(form: str) -> Iterator[None]:
    """A trace's refusal of the fetches below, saying which indexing form made them (the
    user's line does not read a value, as the generic refusal says)."""
    try:
        yield
    except TraceError as error:
        raise TraceError(
            f"{error}. Here the read is {form}'s: this index (a boolean mask, several integer "
            "arrays, or an integer array on a sharded dim) is computed on the client. In a "
            "traced function use one integer array on a dim that is not sharded (redistribute "
            "that dim to Replicate first), or where/masked_fill for a mask"
        ) from None


def _put_on_devices(t: Tensor, index: Any, value: Any) -> bool:
    # only full slices and one ``...`` beside the array: the slot is t's own dims
    found = _one_array(index)
    if found is None:
        return False
    items, at, array = found
    rest = items[:at] + items[at + 1 :]
    full = sum(1 for i in rest if i == slice(None))
    if full + sum(1 for i in rest if i is Ellipsis) != len(rest) or full >= t.ndim:
        return False
    dim = _kept_dim(items, at, t.ndim)
    return 0 <= dim < t.ndim and _take.put(t, dim, array, value)
