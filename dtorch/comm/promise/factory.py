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
from dtorch.comm.promise.file import ShmCell
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
    # not at exit: a graph's exit-time close settles its promises with the reason (a thread
    # waiting on one got "dropped before a value was set", from the hook that runs first)
    weakref.finalize(promise, cell.abandon).atexit = False
    return promise


def _file(void: bool, name: str | None, namespace: CommNamespace | None) -> _Promise:
    if name is not None:
        raise CommError("a FILE promise names itself (its shared-memory segment); pass no name")
    cell = ShmCell.create(namespace or CommNamespace.of_process(), void=void)
    handle = PromiseHandle(PromiseKind.FILE, cell.name)
    # no broken-promise finalizer here: the creator usually drops this side once the handle
    # is on its way, and the attached side sets the value
    return CellVoidPromise(cell, handle) if void else CellTensorPromise(cell, handle)


_MAKERS: dict[PromiseKind, Callable[[bool, str | None, CommNamespace | None], _Promise]] = {
    PromiseKind.MEMORY: _memory,
    PromiseKind.FILE: _file,
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


def _attach(handle: PromiseHandle, void: bool) -> ShmCell:
    if not isinstance(handle, PromiseHandle):
        raise CommError(f"attach needs a PromiseHandle, got {type(handle).__name__}")
    if handle.kind is PromiseKind.MEMORY:
        raise CommError(
            f"promise {handle.name!r} is a MEMORY promise: it lives in the process that created "
            "it and cannot be attached elsewhere (create it with PromiseKind.FILE)"
        )
    if handle.kind is not PromiseKind.FILE:
        raise CommError(f"cannot attach a {handle.kind!r} promise; accepted: FILE")
    return ShmCell.attach(handle.name, void=void)


def attach_promise(handle: PromiseHandle) -> TensorPromise:
    """The setting side of the FILE tensor promise ``handle``, in this (another) process.

    Dropping it unset fails the future (the spec's broken promise).

    Example:
        >>> import torch
        >>> promise = create_promise(PromiseKind.FILE)
        >>> future = promise.get_future()
        >>> attach_promise(promise.handle).set_value(torch.ones(2))  # normally elsewhere
        >>> future.get().tolist()
        [1.0, 1.0]
    """
    cell = _attach(handle, void=False)
    promise = CellTensorPromise(cell, handle, has_future=False)
    weakref.finalize(promise, cell.abandon)
    return promise


def attach_void_promise(handle: PromiseHandle) -> VoidPromise:
    """The setting side of the FILE void promise ``handle``, in this (another) process.

    Example:
        >>> promise = create_void_promise(PromiseKind.FILE)
        >>> future = promise.get_future()
        >>> attach_void_promise(promise.handle).set_value(); future.wait_for(1000)
        True
    """
    cell = _attach(handle, void=True)
    promise = CellVoidPromise(cell, handle, has_future=False)
    weakref.finalize(promise, cell.abandon)
    return promise
