"""Rules of IndexSelect and IndexPut: a tensor indexed along one dim by an integer tensor.

``IndexSelect`` (``t[index]``, ``index_select``): inputs (x, index); the index's dims replace
the indexed dim, as in torch. The indexed dim must not be sharded in x (redistribute it
first); per mesh dim:

* x Shard(d) (d another dim) x index Replicate -> the shard moves with d's output position;
* x Partial x index Replicate -> Partial (selecting is linear);
* x Replicate x index Shard(j) -> Shard(dim + j) (a sharded batch of ids, as an embedding);
* x Replicate x index Replicate -> Replicate.

Anything else (a Partial index, x and index both split on one mesh dim) is rejected.

``IndexPut`` (``t[..., index, ...] = value``): in place, t never redistributed; the index is
Replicate; the value is a number (the param's) or a tensor of the slot's shape laid out as
``t``'s IndexSelect by that index would be, so every device writes its own part.

Index values are checked by the kernels (an out-of-range index fails on the devices).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import IndexSelectParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> x = Operand(1, (8, 3), torch.float32, mesh, (Shard(1),))
    >>> i = Operand(2, (4, 5), torch.int64, mesh, (Replicate(),))
    >>> index_select_rule("getitem", IndexSelectParam(0), (x, i)).outputs[0]
    OutputMeta(shape=(4, 5, 3), dtype=torch.float32, placements=(S(2),))
"""

from __future__ import annotations

import dataclasses

import torch

from dtorch.errors import PlacementError, ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import IndexPutParam, IndexSelectParam, OpParam
from dtorch.ir.placement import Placement, Replicate, Shard
from dtorch.ir.rules.base import DtypeError, Inference, OutputMeta, Rule, norm_dim
from dtorch.ir.rules.promotion import tensors_dtype
from dtorch.ir.scalar import ScalarKind

#: Integer dtypes an index tensor may have (torch's; byte and bool are masks).
INDEX_DTYPES = (torch.int64, torch.int32)


def index_select_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``x`` indexed along ``param.dim`` by the integer tensor ``index``."""
    assert isinstance(param, IndexSelectParam)
    x, index = inputs
    dim = _check(name, x, index, param.dim)
    shape = x.shape[:dim] + index.shape + x.shape[dim + 1 :]
    placements = tuple(
        _placement(name, dim, index.ndim, px, pi)
        for px, pi in zip(x.placements, index.placements, strict=True)
    )
    return Inference((OutputMeta(shape, x.dtype, placements),))


def _check(name: str, x: Operand, index: Operand, dim: int) -> int:
    # the indexed dim, normalised; the index dtype and x's rank checked
    if index.dtype not in INDEX_DTYPES:
        raise DtypeError(f"{name}: the index must be int64 or int32; got {index.dtype}")
    if not x.shape:
        raise ShapeError(f"{name}: cannot index a 0-d tensor along a dim; got shape []")
    return norm_dim(name, dim, x.ndim)


def _placement(name: str, dim: int, ndim: int, px: Placement, pi: Placement) -> Placement:
    """The output placement on one mesh dim (see the module)."""
    if isinstance(px, Shard) and px.dim == dim:
        raise PlacementError(
            f"{name}: the indexed dim {dim} is sharded ({px!r}); accepted: a dim that is not "
            f"sharded. Redistribute that dim to Replicate first"
        )
    if isinstance(pi, Replicate):
        if isinstance(px, Shard) and px.dim > dim:
            return dataclasses.replace(px, dim=px.dim + ndim - 1)
        return px
    if isinstance(pi, Shard) and isinstance(px, Replicate):
        return dataclasses.replace(pi, dim=dim + pi.dim)
    raise PlacementError(
        f"{name}: got tensor {px!r} x index {pi!r} on one mesh dim; accepted: index "
        f"Replicate, or a Shard index of a Replicate tensor. Redistribute the index first"
    )


def index_put_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``x[(:,) * dim, index] = value`` in place (value: the param's scalar or an input)."""
    assert isinstance(param, IndexPutParam)
    x, index, *rest = inputs
    dim = _check(name, x, index, param.dim)
    if any(not isinstance(p, Replicate) for p in index.placements):
        raise PlacementError(f"{name}: the index must be Replicate; got {index.placements!r}")
    slot = index_select_rule(name, IndexSelectParam(dim), (x, index)).outputs[0]
    if not rest:
        if param.scalar is None or param.scalar.kind is ScalarKind.NONE:
            raise DtypeError(f"{name}: needs a value: a number or a tensor")
        return Inference(())
    value = rest[0]
    tensors_dtype(name, OpKind.Copy, ((x.dtype, False), (value.dtype, False)))
    if value.shape != slot.shape or value.placements != slot.placements:
        raise PlacementError(
            f"{name}: the value must have the slot's shape {list(slot.shape)} and placements "
            f"{slot.placements!r}; got {list(value.shape)} with {value.placements!r}"
        )
    return Inference(())


RULES: dict[OpKind, Rule] = {
    OpKind.IndexSelect: index_select_rule,
    OpKind.IndexPut: index_put_rule,
}
