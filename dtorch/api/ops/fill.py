"""Tensors of one value, built from creation operators: ``fill_``/``zero_`` in place, torch's
``new_zeros``/``new_ones``/``new_full``/``new_empty``/``new_tensor`` on the input's mesh, and
``tril``/``triu`` (zeros outside a triangle, by a mask of two ``arange``s).

Example:
    >>> import dtorch
    >>> t = dtorch.ones(2, 3)
    >>> t.new_full((2,), 7).tolist(), t.fill_(2).tril().tolist()
    ([7.0, 7.0], [[2.0, 0.0, 0.0], [2.0, 2.0, 0.0]])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import torch

from dtorch.api.create import (
    create,
    distribute,
    from_data,
    mesh_for,
    placement_keywords,
    shape_of,
)
from dtorch.api.dims import as_flag, as_int
from dtorch.api.handle import TensorBase
from dtorch.api.ops import convert as _cv
from dtorch.api.ops.elementwise import sub
from dtorch.api.ops.masked import masked_fill
from dtorch.api.ops.random_fill import creatable_placements
from dtorch.api.ops.scalars import converted_number, is_scalar, not_a_number, python_number
from dtorch.api.ops.shape import expand, unsqueeze
from dtorch.api.record import tensor_arg
from dtorch.api.redistribute import redistribute
from dtorch.errors import ShapeError
from dtorch.ir.opkind import CreateKind
from dtorch.ir.placement import Replicate

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


@_cv.writer
def copy_(dst: Tensor, src: Any, non_blocking: bool = False) -> Tensor:
    """torch's ``copy_``: ``src``'s values into ``dst`` in place (``convert.copy_``); a
    number, which torch takes as a 0-d tensor, fills ``dst`` (``fill_``); a torch tensor
    (``module.weight.data.copy_(pretrained)``) is broadcast to ``dst``'s shape and sent to
    the devices in ``dst``'s dtype and placements, each device getting its own shard.
    Returns ``dst``. ``non_blocking`` is torch's flag: every dtorch copy is asynchronous
    (recorded; the devices run it in order), so either value gives the same copy.

    Example:
        >>> import dtorch, torch
        >>> t = dtorch.zeros(3)
        >>> t.copy_(2.5).tolist(), t.copy_(dtorch.arange(3.0)).tolist()
        ([2.5, 2.5, 2.5], [0.0, 1.0, 2.0])
        >>> t.copy_(torch.tensor([7.0, 8.0, 9.0], dtype=torch.float64)).tolist()
        [7.0, 8.0, 9.0]
    """
    as_flag(non_blocking, "copy_", "non_blocking")
    if is_scalar(src):
        return fill_(dst, converted_number(src, dst.dtype))
    if isinstance(src, torch.Tensor):
        return _cv.copy_(dst, _distributed_like(dst, src))
    return _cv.copy_(dst, src)


def _distributed_like(dst: Tensor, src: torch.Tensor) -> Tensor:
    """A torch ``src`` broadcast to ``dst``'s shape, in ``dst``'s dtype and placements (as
    creation can make them): the copy is then local on every device."""
    tensor_arg("copy_", dst)
    full = torch.broadcast_to(src.detach(), tuple(dst.shape))
    where = {"device_mesh": dst.device_mesh, "placements": creatable_placements(dst)}
    return distribute(type(dst), full, dtype=dst.dtype, graph=dst.graph, **where)


def fill(input: Tensor, value: Any) -> Tensor:
    """``torch.fill``: a new tensor of ``input``'s shape, dtype and placements holding
    ``value`` (a number or a 0-d tensor), as ``fill_`` of a copy; ``input`` is unchanged.

    Example:
        >>> import dtorch
        >>> t = dtorch.arange(3)
        >>> dtorch.fill(t, 2.7).tolist(), t.tolist()
        ([2, 2, 2], [0, 1, 2])
    """
    tensor_arg("fill", input)
    return fill_(_cv.clone(input), value)


@_cv.writer
def fill_(t: Tensor, value: Any) -> Tensor:
    """torch's ``fill_``: every element of ``t`` set to ``value`` (a number, or a 0-d torch or
    dtorch tensor) in place, in ``t``'s dtype; every alias and view of ``t`` sees it (a
    replicated ``full`` copied in as ``t``'s placements, a Partial one included); returns ``t``.

    Example:
        >>> import dtorch
        >>> t = dtorch.zeros(2, 2)
        >>> row = t[0]
        >>> _ = t.fill_(3)
        >>> row.tolist()
        [3.0, 3.0]
    """
    if isinstance(value, (TensorBase, torch.Tensor)) and value.ndim != 0:
        raise ShapeError(
            "fill_ only supports 0-dimension value tensor but got tensor with "
            f"{value.ndim} dimensions."
        )
    if isinstance(value, TensorBase):  # stays on the devices: broadcast, then cast
        spread = expand(cast("Tensor", value), t.shape)
        return _cv.assign("fill_", t, _cv.cast(spread, t.dtype), overlapping=True)
    if not is_scalar(value):
        raise not_a_number("fill_: value", value, "a number or a 0-d tensor")
    return _cv.assign("fill_", t, new_full(t, t.shape, value), overlapping=True)


@_cv.writer
def zero_(t: Tensor) -> Tensor:
    """torch's ``zero_``: ``fill_(0)``, so every alias and view of ``t`` sees it, in ``t``'s
    placements; returns ``t``.

    Example:
        >>> import dtorch
        >>> t = dtorch.ones(2)
        >>> t.zero_() is t, t.tolist()
        (True, [0.0, 0.0])
    """
    return fill_(t, 0)


def new(
    t: Tensor,
    kind: CreateKind,
    size: Any,
    dtype: torch.dtype | None = None,
    kw: Mapping[str, Any] | None = None,
) -> Tensor:
    """torch's ``new_zeros``/``new_ones``/``new_empty`` (``size``: ints or one sequence of
    them): ``t``'s dtype unless ``dtype``; on ``t``'s mesh with every mesh dim Replicate, or
    on torch's ``device=`` (``_on_mesh``: torch's keywords).

    Example:
        >>> import torch, dtorch
        >>> z = dtorch.zeros(4, dtype=torch.int32).new_ones(2, 3)
        >>> z.dtype, z.placements, z.tolist()
        (torch.int32, [Replicate()], [[1, 1, 1], [1, 1, 1]])
    """
    kw = dict(kw or {})
    if "size" in kw:  # torch's keyword form, new_zeros(size=(2, 3))
        if size:
            raise TypeError("new_*: the size was given both positionally and as size=")
        size = (kw.pop("size"),)
    shape = shape_of(size)
    return create(type(t), kind, shape, dtype or t.dtype, **_on_mesh(t, kw))


def new_full(
    t: Tensor,
    size: Any,
    fill_value: Any,
    dtype: torch.dtype | None = None,
    kw: Mapping[str, Any] | None = None,
) -> Tensor:
    """torch's ``new_full``: ``size`` (a sequence) of ``fill_value`` in ``t``'s dtype unless
    ``dtype``; on ``t``'s mesh with every mesh dim Replicate.

    Example:
        >>> import dtorch
        >>> dtorch.zeros(1).new_full([2], 5).tolist()
        [5.0, 5.0]
    """
    if not is_scalar(fill_value):
        raise not_a_number("new_full: fill_value", fill_value)
    shape, fill = shape_of((size,)), python_number(fill_value)
    on = _on_mesh(t, kw)
    return create(type(t), CreateKind.FULL, shape, dtype or t.dtype, args=(fill,), **on)


def new_tensor(
    t: Tensor, data: Any, dtype: torch.dtype | None = None, kw: Mapping[str, Any] | None = None
) -> Tensor:
    """torch's ``new_tensor``: a copy of ``data`` (numbers, nested lists, a torch or dtorch
    tensor) in ``t``'s dtype unless ``dtype``; on ``t``'s mesh with every mesh dim Replicate.

    Example:
        >>> import torch, dtorch
        >>> dtorch.zeros(1, dtype=torch.int64).new_tensor([1.7, -2.0]).tolist()
        [1, -2]
    """
    dtype, on = dtype or t.dtype, _on_mesh(t, kw)
    if not isinstance(data, TensorBase):
        return from_data(type(t), data, dtype=dtype, **on)
    mesh = mesh_for(t.graph, on["device_mesh"], on["device"])  # t's, or torch's device=
    everywhere = [Replicate()] * mesh.ndim  # summed before the cast: a Partial source too
    copied = _cv.cast(redistribute(cast("Tensor", data), mesh, everywhere), dtype)
    return _cv.clone(copied) if copied.id == data.id else copied  # an alias is no copy


#: torch's keywords of its ``new_*`` methods beside ``dtype``.
_NEW_KEYWORDS = frozenset({"device", "requires_grad", "layout", "pin_memory"})


def _on_mesh(t: Tensor, kw: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The creation keywords of a new tensor: ``t``'s graph and mesh, Replicate; torch's
    ``device=`` puts it on that device instead, and ``requires_grad``/``layout``/
    ``pin_memory`` are checked as every creation function checks them."""
    kw = kw or {}
    unknown = sorted(set(kw) - _NEW_KEYWORDS)
    if unknown:
        raise TypeError(
            f"unexpected keyword(s) {unknown}; accepted: dtype, device, requires_grad=False, "
            "layout=torch.strided, pin_memory=False"
        )
    device = placement_keywords(dict(kw))["device"]
    mesh = t.device_mesh if device is None else None
    return {"graph": t.graph, "device_mesh": mesh, "device": device, "placements": None}


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """torch's ``tril``: zeros above ``diagonal`` of the last two dims (a ``masked_fill`` by a
    replicated mask of column minus row indices), whatever their placements.

    Example:
        >>> import dtorch
        >>> dtorch.ones(2, 3).tril(1).tolist()
        [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    """
    return masked_fill(input, _offsets("tril", input, diagonal) > diagonal, 0)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """torch's ``triu``: zeros below ``diagonal`` of the last two dims (see ``tril``).

    Example:
        >>> import dtorch
        >>> dtorch.ones(2, 3).triu(1).tolist()
        [[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]
    """
    return masked_fill(input, _offsets("triu", input, diagonal) < diagonal, 0)


def _offsets(name: str, t: Tensor, diagonal: int) -> Tensor:
    """Column minus row index of each element of the last two dims, replicated on t's mesh."""
    tensor_arg(name, t)
    if t.ndim < 2:
        raise ShapeError(f"{name}: input tensor must have at least 2 dimensions")
    diagonal = as_int(name, "diagonal", diagonal)  # a numpy integer too, within int64
    rows, cols = (_arange(t, n) for n in t.shape[-2:])
    return sub(unsqueeze(cols, 0), unsqueeze(rows, 1))


def _arange(t: Tensor, n: int) -> Tensor:
    return create(type(t), CreateKind.ARANGE, (n,), torch.int64, args=(0, n, 1), **_on_mesh(t))
