"""Conversions and copies: dtype casts, ``clone``, ``copy_``, ``detach``, and the moves and
redistributions of ``to``.

Example:
    >>> import torch, dtorch
    >>> t = dtorch.arange(3)
    >>> t.float().dtype, t.to(torch.int8).tolist(), t.clone().tolist()
    (torch.float32, [0, 1, 2], [0, 1, 2])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.record import record
from dtorch.ir.params import CastParam, CloneParam, CopyParam

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_CLONE = CloneParam()
_COPY = CopyParam()


def cast(t: Tensor, dtype: torch.dtype) -> Tensor:
    """``t`` converted to ``dtype`` (the same handle when it already has it, like torch)."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"expected a torch.dtype, got {dtype!r}")
    if dtype == t.dtype:
        return t
    return record("to", CastParam(dtype), (t,))[0]


def clone(t: Tensor) -> Tensor:
    return record("clone", _CLONE, (t,))[0]


def copy_(dst: Tensor, src: Tensor) -> Tensor:
    """Copy ``src``'s values into ``dst`` in place (broadcasting ``src``); returns ``dst``."""
    if src.dtype != dst.dtype:
        src = cast(src, dst.dtype)
    record("copy_", _COPY, (dst, src))
    return dst


def detach(t: Tensor) -> Tensor:
    """A new handle to the same value (dtorch records no gradients)."""
    return t._alias()


def type_as(t: Tensor, other: Tensor) -> Tensor:
    return cast(t, other.dtype)


def to(t: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``to(dtype)``, ``to(mesh)``, ``to(device)``, or ``to(device_or_mesh, dtype)``."""
    from dtorch.api.redistribute import move

    target = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("copy", None)
    if kwargs:
        raise TypeError(f"to: unexpected keyword(s) {sorted(kwargs)}")
    for arg in args:
        if isinstance(arg, torch.dtype):
            dtype = arg
        else:
            target = arg
    result = t if target is None else move(t, target)
    return result if dtype is None else cast(result, dtype)
