"""Advanced indexing as torch does it: int lists and tuples inside an index, tensor indices
(integer arrays, broadcast together) and boolean masks, for ``t[index]`` and ``t[index] = v``.

Placements known at record time: one 1-D integer array (a list, a torch tensor, or a dtorch
tensor, fetched) among basic indices, on a dim that is not sharded, stays on the devices: a
slice per picked index, joined by ``cat``; ``t``'s sharding is kept (the cost: one slice
operator per pick).

Otherwise (a choice, with its cost) such an index is computed on the client. The index
tensors, and the indexed tensor, are fetched (a blocking read, like ``nonzero``); torch
indexes the full tensor, so every rule of torch holds (where the advanced dims go, bool
masks, broadcasting of index shapes, ``...`` and None among them). The result's shape
can depend on values (a mask), so its placements cannot be known at record time:
``t[index]`` is gathered to the first device (a one-device mesh of ``t``'s first device).
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

from typing import TYPE_CHECKING, Any

import torch

import dtorch.api.tensor as _tensor
from dtorch.api.creation import from_torch
from dtorch.api.record import record
from dtorch.errors import PlacementError
from dtorch.ir.params import ConcatParam
from dtorch.ir.placement import Shard

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_INDEX_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)


def is_advanced(index: Any) -> bool:
    """True when the index holds a list, tuple, tensor or bool (torch's advanced indexing)."""
    items = index if isinstance(index, tuple) else (index,)
    return any(_advanced_item(i) for i in items)


def _advanced_item(item: Any) -> bool:
    # bool before int: True is an int to Python but a mask (a new dim of size 1) to torch
    return isinstance(item, (bool, list, tuple, torch.Tensor, _tensor.Tensor))


def to_torch_index(name: str, index: Any) -> Any:
    """The index with every dtorch tensor fetched (blocking) and every tensor dtype checked."""
    if isinstance(index, tuple):
        return tuple(_torch_item(name, i) for i in index)
    return _torch_item(name, index)


def _torch_item(name: str, item: Any) -> Any:
    # lists stay lists (torch reads nested ones as one integer array); tensors are checked
    if isinstance(item, _tensor.Tensor):
        item = item.to_torch()
    if isinstance(item, torch.Tensor) and item.dtype not in _INDEX_DTYPES:
        raise IndexError(
            f"{name}: a tensor index must be long, int, byte or bool; got {item.dtype}"
        )
    if isinstance(item, (list, tuple)):
        _check_list(name, item)
    return item


def _check_list(name: str, items: list[Any] | tuple[Any, ...]) -> None:
    # torch would read floats in a list as a float index and fail with its own message
    for item in items:
        if isinstance(item, (list, tuple)):
            _check_list(name, item)
        elif isinstance(item, (_tensor.Tensor, float)):
            raise IndexError(f"{name}: a list index holds ints or bools; got {type(item).__name__}")


def _torch_call(name: str, fn: Any) -> Any:
    """Run torch's indexing, its errors renamed after the operator (what it got, why)."""
    try:
        return fn()
    except (IndexError, RuntimeError, TypeError, ValueError) as e:
        raise IndexError(f"{name}: {e}") from None


def advanced_getitem(t: Tensor, index: Any) -> Tensor:
    """``t[index]`` on the client (see the module), the result on ``t``'s first device; one
    1-D integer array on a dim that is not sharded stays on the devices, sharding kept."""
    where = to_torch_index("getitem", index)
    kept = _on_devices(t, where)
    if kept is not None:
        return kept
    full = t.to_torch()
    result = _torch_call("getitem", lambda: full[where])
    return from_torch(result, graph=t.graph, device=t.device_mesh.first_device())


def _on_devices(t: Tensor, where: Any) -> Tensor | None:
    """``t[..., [i, j, ...], ...]`` as slices of ``t`` joined by ``cat`` (placements known),
    or None where the index is not one 1-D integer array or its dim is sharded."""
    items = list(where) if isinstance(where, tuple) else [where]
    arrays = [k for k, item in enumerate(items) if _advanced_item(item)]
    if len(arrays) != 1 or items.count(Ellipsis) > 1:
        return None
    picks = _picks(items[arrays[0]])
    if picks is None:
        return None
    items[arrays[0]] = slice(None)
    try:
        base = t[tuple(items)]
    except PlacementError:  # the basic part is refused on these placements: torch does it
        return None
    dim = _kept_dim(items, arrays[0], t.ndim)
    if any(isinstance(p, Shard) and p.dim == dim for p in base.placements):
        return None
    return _gather_rows(base, dim, picks)


def _picks(item: Any) -> list[int] | None:
    # a flat list of ints or a 1-D integer tensor; masks, nesting and 0-d tensors go to torch
    value = torch.as_tensor(item) if isinstance(item, list) else item
    if not isinstance(value, torch.Tensor) or value.ndim != 1:
        return None
    if value.dtype not in _INDEX_DTYPES[:-2] or (isinstance(item, list) and not item):
        return None
    return [int(i) for i in value.tolist()]


def _kept_dim(items: list[Any], at: int, ndim: int) -> int:
    # the result dim of items[at]: Nones and slices before it make dims, ints remove theirs
    before = items[:at]
    if Ellipsis in before:
        named = sum(1 for i in items if i is not None and i is not Ellipsis)
        return sum(1 for i in before if not isinstance(i, int)) - 1 + ndim - named
    return sum(1 for i in before if not isinstance(i, int))


def _gather_rows(base: Tensor, dim: int, picks: list[int]) -> Tensor:
    """``base`` indexed along ``dim`` by ``picks``: one slice per pick, joined by ``cat``."""
    size = base.shape[dim]
    bad = [p for p in picks if not -size <= p < size]
    if bad:
        raise IndexError(
            f"getitem: index {bad[0]} is out of bounds for dimension {dim} with size {size}"
        )
    lead = (slice(None),) * dim
    rows = [base[(*lead, slice(p % size, p % size + 1))] for p in picks]
    return record("cat", ConcatParam(dim), tuple(rows))[0] if len(rows) > 1 else rows[0]


def advanced_setitem(t: Tensor, index: Any, value: Any) -> None:
    """``t[index] = value`` on the client, written back with ``t``'s placements."""
    where = to_torch_index("setitem", index)
    if isinstance(value, _tensor.Tensor):
        value = value.to_torch()
    full = t.to_torch()
    _torch_call("setitem", lambda: full.__setitem__(where, value))
    back = from_torch(full, graph=t.graph, device_mesh=t.device_mesh)
    t[...] = back
