"""Creating and attaching promises, by PromiseKind (spec 002 section 4.2.3).

``create_promise(kind)`` / ``create_void_promise(kind)`` make a promise in this process; its
``handle`` (a PromiseHandle: kind + name) is plain data. ``attach_promise(handle)`` /
``attach_void_promise(handle)`` rebuild the setting side of a FILE promise in another process.
A MEMORY promise lives in one process only: attaching it elsewhere is refused.

Example:
    >>> import torch
    >>> from dtorch.ir.opkind import PromiseKind
    >>> promise = create_promise(PromiseKind.MEMORY, name="doc-1")
    >>> promise.handle.name, promise.handle.kind is PromiseKind.MEMORY
    ('doc-1', True)
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.promise.base import TensorPromise, VoidPromise
from dtorch.comm.promise.futures import CellTensorPromise, CellVoidPromise
from dtorch.comm.promise.memory import MemoryCell
from dtorch.errors import CommError
from dtorch.ir.opkind import PromiseKind
from dtorch.ir.params import PromiseHandle

_Promise = TensorPromise | VoidPromise


def _memory(void: bool, name: str | None, namespace: CommNamespace | None) -> _Promise:
    cell = MemoryCell(name or uuid.uuid4().hex)
    handle = PromiseHandle(PromiseKind.MEMORY, cell.name)
    promise: _Promise = CellVoidPromise(cell, handle) if void else CellTensorPromise(cell, handle)
    weakref.finalize(promise, cell.abandon)
    return promise


_MAKERS: dict[PromiseKind, Callable[[bool, str | None, CommNamespace | None], _Promise]] = {
    PromiseKind.MEMORY: _memory,
}


def _make(
    kind: PromiseKind, void: bool, name: str | None, namespace: CommNamespace | None
) -> _Promise:
    maker = _MAKERS.get(kind) if isinstance(kind, PromiseKind) else None
    if maker is None:
        accepted = ", ".join(k.name for k in _MAKERS)
        raise CommError(f"no promise backend for {kind!r}; accepted: {accepted}")
    return maker(void, name, namespace)


def create_promise(
    kind: PromiseKind, *, name: str | None = None, namespace: CommNamespace | None = None
) -> TensorPromise:
    """A new tensor promise of ``kind`` (MEMORY or FILE).

    MEMORY takes an optional ``name`` (default: a random one); FILE names its segment itself,
    inside ``namespace`` (default ``CommNamespace.of_process()``).

    Example:
        >>> import torch
        >>> promise = create_promise(PromiseKind.MEMORY)
        >>> future = promise.get_future(); promise.set_value(torch.arange(2))
        >>> future.get().tolist()
        [0, 1]
    """
    promise = _make(kind, False, name, namespace)
    assert isinstance(promise, TensorPromise)
    return promise


def create_void_promise(
    kind: PromiseKind, *, name: str | None = None, namespace: CommNamespace | None = None
) -> VoidPromise:
    """A new void promise of ``kind`` (for ``Graph.sync_future``).

    Example:
        >>> promise = create_void_promise(PromiseKind.MEMORY)
        >>> future = promise.get_future(); promise.set_value(); future.is_ready()
        True
    """
    promise = _make(kind, True, name, namespace)
    assert isinstance(promise, VoidPromise)
    return promise


def attach_promise(handle: PromiseHandle) -> TensorPromise:
    """The setting side of the tensor promise ``handle``, in this (another) process.

    Example:
        >>> handle = create_promise(PromiseKind.MEMORY, name="m").handle
        >>> attach_promise(handle)
        Traceback (most recent call last):
        dtorch.errors.CommError: promise 'm' is a MEMORY promise: ...
    """
    raise _not_attachable(handle)


def attach_void_promise(handle: PromiseHandle) -> VoidPromise:
    """The setting side of the void promise ``handle``, in this (another) process."""
    raise _not_attachable(handle)


def _not_attachable(handle: PromiseHandle) -> CommError:
    if not isinstance(handle, PromiseHandle):
        return CommError(f"attach needs a PromiseHandle, got {type(handle).__name__}")
    if handle.kind is PromiseKind.MEMORY:
        return CommError(
            f"promise {handle.name!r} is a MEMORY promise: it lives in the process that created "
            "it and cannot be attached elsewhere (create it with PromiseKind.FILE)"
        )
    return CommError(f"cannot attach a {handle.kind!r} promise yet")
