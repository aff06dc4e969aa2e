"""Integer-array indexing along one dim on the devices: ``index_select``, and the IndexSelect
and IndexPut operators behind ``t[..., index, ...]`` and ``t[..., index] = value``.

The index is a dtorch integer tensor; a torch tensor or a list is distributed Replicate on
the input's mesh (its values are checked on the client: an out-of-range one raises
IndexError at once, as torch does). A dtorch index's values are checked on the devices: an
out-of-range one fails the operator, and reading the result raises ``KernelError`` naming it.
Layout (``dtorch.ir.rules.gather``): the indexed dim must not be sharded; reading, a
sharded one is redistributed to Replicate first (a choice: an all-gather along that dim keeps
the data on the devices, cheaper than fetching the whole tensor to the client). A Partial
index, or one split on a mesh dim that splits the tensor too, is made Replicate there.

Example:
    >>> import dtorch
    >>> t = dtorch.arange(6).view(3, 2)
    >>> dtorch.index_select(t, 0, dtorch.tensor([2, 0])).tolist()
    [[4, 5], [0, 1]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside, distribute
from dtorch.api.dims import normalize_dim, numpy_names
from dtorch.api.handle import TensorBase, is_tensor
from dtorch.api.ops.scalars import as_scalar, is_scalar
from dtorch.api.record import record, record_one
from dtorch.errors import ShapeError
from dtorch.ir.params import IndexPutParam, IndexSelectParam
from dtorch.ir.placement import Placement, Replicate, Shard
from dtorch.ir.rules.gather import INDEX_DTYPES, index_select_rule

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


@numpy_names
def index_select(input: Tensor, dim: int, index: Any) -> Tensor:
    """``torch.index_select``: the entries of ``input`` along ``dim`` at ``index`` (a 1-D or
    0-d integer tensor, dtorch or torch, or a list); placements as the module says.

    Example:
        >>> import dtorch
        >>> dtorch.arange(6).view(2, 3).index_select(1, [2, 2]).tolist()
        [[2, 2], [5, 5]]
    """
    index = torch.tensor(index, dtype=torch.int64) if isinstance(index, list) else index
    if not (isinstance(index, torch.Tensor) or is_tensor(index)) or index.ndim > 1:
        got = f"a {index.ndim}-D tensor" if hasattr(index, "ndim") else type(index).__name__
        raise IndexError(f"index_select: the index must be a 0-d or 1-D tensor; got {got}")
    dim = normalize_dim(dim, input.ndim, op="index_select")
    flat = index.reshape(-1) if index.ndim == 0 else index
    if input.ndim == 0:
        return _of_scalar(input, flat)
    return take(input, dim, flat, "index_select", wrap=False)


def _of_scalar(input: Tensor, index: Any) -> Tensor:
    """torch's ``index_select`` of a 0-d tensor: one index value (0), a 0-d result."""
    if index.numel() != 1:
        raise RuntimeError(
            "index_select: the index of a 0-d tensor must hold exactly one value (0); "
            f"got {index.numel()} values"
        )
    return take(input.reshape(1), 0, index, "index_select", wrap=False).reshape(())


def integer_array(item: Any) -> Tensor | torch.Tensor | None:
    """``item`` as an integer index tensor, or None where it is not one (a mask, a bool, a
    list with floats or bools: those go to torch on the client)."""
    if isinstance(item, torch.Tensor) or is_tensor(item):
        return item if item.dtype in INDEX_DTYPES else None
    if isinstance(item, (list, tuple)) and _ints_only(item):
        try:
            return torch.tensor(item, dtype=torch.int64)
        except (ValueError, TypeError):  # ragged: torch says why on the client
            return None
    return None


def _ints_only(items: list[Any] | tuple[Any, ...]) -> bool:
    # bools are masks to torch, even inside a list
    return all(_ints_only(i) if isinstance(i, (list, tuple)) else type(i) is int for i in items)


def take(x: Tensor, dim: int, index: Any, name: str, wrap: bool = True) -> Tensor:
    """``x`` indexed along ``dim`` (normalised) by ``index`` on the devices, one operator."""
    ids = _device_index(x, dim, index, name, wrap)
    x = _unsharded(x, dim)
    return record_one(name, IndexSelectParam(dim, wrap), (x, _compatible(ids, x)), known=2)


def _device_index(x: Tensor, dim: int, index: Any, name: str, wrap: bool) -> Tensor:
    # a dtorch index on x's mesh; torch values checked here and sent Replicate
    if is_tensor(index):
        if index.device_mesh == x.device_mesh:
            return index
        index = index.to_torch()
    _check_bounds(name, index, dim, x.shape[dim], wrap)
    return beside(x, index)


def _check_bounds(name: str, index: torch.Tensor, dim: int, size: int, wrap: bool) -> None:
    # torch raises at once for an index it holds: so do we, naming the operator
    flat = index.reshape(-1)
    bad = flat[(flat < (-size if wrap else 0)) | (flat >= size)]
    if bad.numel():
        raise IndexError(
            f"{name}: index {int(bad[0])} is out of bounds for dimension {dim} with size {size}"
        )


def _unsharded(x: Tensor, dim: int) -> Tensor:
    """``x`` with every shard of ``dim`` gathered (Replicate on those mesh dims)."""
    placements = [Replicate() if _splits(p, dim) else p for p in x.placements]
    return x if placements == list(x.placements) else x.redistribute(placements=placements)


def _splits(p: Placement, dim: int) -> bool:
    return isinstance(p, Shard) and p.dim == dim


def _compatible(index: Tensor, x: Tensor) -> Tensor:
    """``index`` Replicate on the mesh dims where the rule would refuse it (see the module)."""
    placements: list[Placement] = [
        pi if isinstance(pi, Replicate) or (isinstance(pi, Shard) and isinstance(px, Replicate))
        else Replicate()
        for px, pi in zip(x.placements, index.placements, strict=True)
    ]  # fmt: skip
    if placements == list(index.placements):
        return index
    return index.redistribute(placements=placements)


def put(t: Tensor, dim: int, index: Any, value: Any) -> bool:
    """``t[(:,) * dim, index] = value`` on the devices; False (nothing done) where ``dim`` is
    sharded (the caller writes on the client) or the value is not a number or a tensor."""
    if any(_splits(p, dim) for p in t.placements):
        return False
    ids = _device_index(t, dim, index, "setitem", True)
    if not _replicated(ids):
        ids = ids.redistribute(placements=[Replicate()] * t.device_mesh.ndim)
    if is_scalar(value) and not isinstance(value, TensorBase):
        record("setitem", IndexPutParam(dim, as_scalar(value)), (t, ids))
        return True
    if not (isinstance(value, torch.Tensor) or is_tensor(value)):
        return False
    record("setitem", IndexPutParam(dim), (t, ids, _slot_value(t, ids, dim, value)))
    return True


def _replicated(t: Tensor) -> bool:
    return all(isinstance(p, Replicate) for p in t.placements)


def _slot_value(t: Tensor, ids: Tensor, dim: int, value: Tensor | torch.Tensor) -> Tensor:
    """``value`` broadcast to the slot and laid out like it, so each device writes its part
    (a torch value is chunked on the client; a Partial slot gets it on its first rank)."""
    slot = index_select_rule("setitem", IndexSelectParam(dim), (t._operand, ids._operand))
    shape, placements = slot.outputs[0].shape, list(slot.outputs[0].placements)
    if isinstance(value, TensorBase) and value.device_mesh != t.device_mesh:
        value = value.to_torch()
    if _broadcast(tuple(value.shape), shape) != shape:
        raise ShapeError(  # torch's RuntimeError
            f"setitem: shape mismatch: value tensor of shape {list(value.shape)} cannot be "
            f"broadcast to indexing result of shape {list(shape)}"
        )
    if isinstance(value, torch.Tensor):
        mesh = t.device_mesh
        full = value.expand(shape)
        return distribute(type(t), full, graph=t.graph, device_mesh=mesh, placements=placements)
    value = value.expand(shape) if tuple(value.shape) != shape else value
    if list(value.placements) == placements:
        return value
    return value.redistribute(placements=placements)


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    # the broadcast shape, or None where the shapes do not broadcast
    try:
        return tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        return None
