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

import dtorch.api.tensor as _tensor
from dtorch.api.graph import mesh_of
from dtorch.api.record import record
from dtorch.api.redistribute import redistribute
from dtorch.ir.params import CastParam, CloneParam, CopyParam
from dtorch.ir.placement import Replicate

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
    """Copy ``src``'s values into ``dst`` in place (broadcasting ``src`` and converting it to
    ``dst``'s dtype, both inside the one Copy operator); returns ``dst``.

    A ``src`` on another mesh is first redistributed onto ``dst``'s mesh - with ``dst``'s
    placements when the shapes agree; when ``src`` broadcasts, Partial where ``dst`` is
    Partial and Replicate elsewhere - so the copy itself is local to every device (spec 002
    3.5.4: a cross-mesh Copy).
    """
    if isinstance(src, _tensor.Tensor) and isinstance(dst, _tensor.Tensor):
        mesh = dst.device_mesh
        if src.device_mesh != mesh:
            if src.shape == dst.shape:
                placements = dst.placements
            else:
                placements = [p if p.is_partial() else Replicate() for p in dst.placements]
            src = redistribute(src, mesh, placements)
    record("copy_", _COPY, (dst, src))
    return dst


def detach(t: Tensor) -> Tensor:
    """A new handle to the same value (dtorch records no gradients)."""
    return t._alias()


def type_as(t: Tensor, other: Tensor) -> Tensor:
    if not isinstance(other, _tensor.Tensor):
        raise TypeError(f"type_as: expected a dtorch.Tensor, got {type(other).__name__}")
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
    result = t if target is None or _already_there(t, target) else move(t, target)
    return result if dtype is None else cast(result, dtype)


def _already_there(t: Tensor, target: Any) -> bool:
    """A bare device type (``"cpu"``, ``torch.device("cuda")``) of the tensor's own mesh: as
    in torch, ``cpu()`` of a CPU tensor is the tensor itself, however it is distributed."""
    if not isinstance(target, (str, torch.device)):
        return False
    mesh = mesh_of(target)  # a clear MeshError for anything that is not a device
    return (
        not mesh.is_distributed and _bare(target) and mesh.device_kind == t.device_mesh.device_kind
    )


def _bare(target: str | torch.device) -> bool:
    """True for a device type without an index (``"cpu"``, ``torch.device("cuda")``)."""
    return (target if isinstance(target, torch.device) else torch.device(target)).index is None
