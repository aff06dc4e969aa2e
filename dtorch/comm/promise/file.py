"""ShmCell: a promise whose value is set in another process (spec 002 section 4.4).

The creating process makes a named segment ``/dev/shm/dtorch-<instance>-promise-<token>``: a
4 KiB header (state, void flag, the waiter's wake address, the setter's process, the outcome's
metadata) followed, once set, by the tensor bytes. The ``PromiseHandle`` (FILE, segment name)
travels as data; the other process attaches by name and **unlinks the name at once** (one
promise has one setter), so after that moment a SIGKILL on either side leaves nothing behind.
Before it, the creator's cell removes the name when it is garbage collected, and
``CommNamespace.reclaim`` covers a creator that was killed.

Setting grows the segment, copies the tensor after the header, writes the metadata and flips
the state, all under ``flock``; then it sends one byte to the waiter's wake socket (registered
in the header under the same lock, so the wake-up cannot be missed). The future maps the
bytes and returns a tensor over them without copying. Errors cross as a class name from a
fixed table plus the message (``error_table``). Callbacks and ``await`` are served by one
watcher thread per cell, started on first use, that sleeps in ``select`` on the wake socket
and hands completion to the event loop with ``call_soon_threadsafe``: the loop never blocks.

The setter writes its ``ProcessIdentity`` (pid, start time) into the header when it attaches.
A waiter (``wait``, the watcher thread) looks at that process when it starts waiting and every
half second after: once it is gone without having set the promise, the future fails with a
``PeerDiedError`` naming the setter's pid, not at the timeout.

Example:
    >>> import torch
    >>> from dtorch.comm.namespace import CommNamespace
    >>> owner = ShmCell.create(CommNamespace.create(), void=False)
    >>> setter = ShmCell.attach(owner.name, void=False)  # in another process, normally
    >>> setter.settle(torch.arange(3), None)
    >>> owner.wait(1.0), owner.outcome().tolist()
    (True, [0, 1, 2])
"""

from __future__ import annotations

import asyncio
import mmap
import os
import re
import secrets
import struct
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import ormsgpack
import torch

from dtorch.comm.namespace import SHM_PREFIX, CommNamespace
from dtorch.comm.process_identity import ProcessIdentity
from dtorch.comm.promise.base import PromiseStateError
from dtorch.comm.promise.error_table import decode_error, encode_error
from dtorch.comm.promise.memory import MemoryCell, run_callback
from dtorch.comm.shm import (
    FileLock,
    WakeSocket,
    open_named,
    release_buffer,
    tensor_view,
    unlink_named,
)
from dtorch.errors import CommError, PeerDiedError, raised_anew
from dtorch.ir.dtypes import dtype_code, dtype_from_code
from dtorch.options import GlobalOption

_MAGIC = b"DTPROM02"
_PENDING, _READY = 0, 1
_VOID_FLAG = 1
# magic, state, flags, waiter address length, waiter address, metadata length,
# setter pid and start ticks (0, 0 until a process attached)
_HEADER = struct.Struct("<8sIII108sIIQ")
_SETTER = slice(6, 8)
_META_AT = 256
_DATA_AT = 4096
_NAME = re.compile(rf"{SHM_PREFIX}[A-Za-z0-9_]{{1,40}}-promise-[0-9a-f]{{20}}")
_VALUE, _ERROR, _DONE = 0, 1, 2  # the first field of the metadata

#: Longest sleep of a waiter between two looks at the setter's process.
_RECHECK_S = 0.5


class ShmCell:
    """Promise state in a shared segment; ``create`` on the waiting side, ``attach`` on the
    setting side. See the module docstring."""

    def __init__(self, name: str, fd: int, owner: bool) -> None:
        self.name = name
        self._fd = fd
        self._lock = FileLock(fd)
        self._header = mmap.mmap(fd, _DATA_AT)
        self._owner = owner
        self._guard = threading.Lock()  # this process's threads: flock is per descriptor
        self._wake: WakeSocket | None = None
        self._outcome: tuple[torch.Tensor | None, BaseException | None] | None = None
        self._local = MemoryCell(name)  # callbacks and await, fed by the watcher thread
        self._watcher: threading.Thread | None = None
        self._wakes: list[WakeSocket] = []  # shared with the finalizer, which closes them
        owner_pid = os.getpid() if owner else None
        weakref.finalize(self, _release, name, fd, self._header, owner_pid, self._wakes)

    @classmethod
    def create(cls, namespace: CommNamespace, *, void: bool) -> ShmCell:
        """A new pending promise segment in ``namespace``; this process waits on it."""
        name = namespace.shm_name("promise", secrets.token_hex(8))
        fd = open_named(name, create=True, size=_DATA_AT)
        cell = cls(name, fd, owner=True)
        flags = _VOID_FLAG if void else 0
        _HEADER.pack_into(cell._header, 0, _MAGIC, _PENDING, flags, 0, b"", 0, 0, 0)
        return cell

    @classmethod
    def attach(cls, name: str, *, void: bool) -> ShmCell:
        """Attach to the promise segment ``name`` to set it (once; the name goes away)."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise CommError(f"{name!r} is not the name of a dtorch FILE promise segment")
        try:
            fd = open_named(name, create=False)
        except FileNotFoundError:
            raise CommError(
                f"FILE promise {name!r} does not exist: it was attached already, or its future "
                "was dropped, or its process is gone"
            ) from None
        cell = cls(name, fd, owner=False)
        cell._check_attach(void)
        cell._record_setter(ProcessIdentity.of_self())  # before the name goes: none unwatched
        unlink_named(name)  # one setter per promise: nobody needs the name any more
        return cell

    def _check_attach(self, void: bool) -> None:
        magic, _, flags, *_ = _HEADER.unpack_from(self._header, 0)
        if magic != _MAGIC:
            raise CommError(f"{self.name!r} is not a dtorch promise segment")
        if bool(flags & _VOID_FLAG) != void:
            wanted, other = ("void", "tensor") if void else ("tensor", "void")
            raise CommError(f"{self.name!r} is a {other} promise, not a {wanted} promise")

    def _record_setter(self, setter: ProcessIdentity) -> None:
        """Write the setting process into the header, for waiters to watch."""
        with self._guard, self._lock.held(self._deadline(), f"promise {self.name!r}"):
            fields = list(_HEADER.unpack_from(self._header, 0))
            fields[_SETTER] = [setter.pid, setter.start_ticks]
            _HEADER.pack_into(self._header, 0, *fields)

    def _deadline(self) -> float:
        return time.monotonic() + GlobalOption.get_comm_timeout_second()

    def settle(self, value: torch.Tensor | None, error: BaseException | None) -> None:
        with self._guard, self._lock.held(self._deadline(), f"promise {self.name!r}"):
            fields = _HEADER.unpack_from(self._header, 0)
            if fields[1] != _PENDING:
                raise PromiseStateError(f"promise {self.name!r} was already set")
            meta = self._write_outcome(value, error)
            _HEADER.pack_into(
                self._header, 0, _MAGIC, _READY, *fields[2:5], len(meta), *fields[_SETTER]
            )
            waiter = fields[4][: fields[3]]
        if waiter:
            _send_wake(waiter)

    def _write_outcome(self, value: torch.Tensor | None, error: BaseException | None) -> bytes:
        if error is not None:
            meta = ormsgpack.packb([_ERROR, *encode_error(error)])
        elif value is not None:
            self._write_tensor(value)
            meta = ormsgpack.packb([_VALUE, dtype_code(value.dtype), list(value.shape)])
        else:
            meta = ormsgpack.packb([_DONE])
        self._header[_META_AT : _META_AT + len(meta)] = meta
        return meta

    def _write_tensor(self, value: torch.Tensor) -> None:
        nbytes = value.nbytes
        if nbytes == 0:
            return
        os.ftruncate(self._fd, _DATA_AT + nbytes)
        buffer = mmap.mmap(self._fd, _DATA_AT + nbytes)
        try:
            tensor_view(buffer, _DATA_AT, value.dtype, tuple(value.shape)).copy_(value)
        finally:
            release_buffer(buffer)

    def is_ready(self) -> bool:
        return self._outcome is not None or _HEADER.unpack_from(self._header, 0)[1] == _READY

    def wait(self, timeout_s: float) -> bool:
        if self.is_ready():
            return True
        wake = self._register()
        deadline = time.monotonic() + max(0.0, timeout_s)
        while not self._settled_or_orphaned():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            wake.wait(min(remaining, _RECHECK_S))  # never drained: the byte means "set" to all
        return True

    def _settled_or_orphaned(self) -> bool:
        """True once set, or once its setter died without setting it (a PeerDiedError then)."""
        if self.is_ready():
            return True
        pid, start_ticks = _HEADER.unpack_from(self._header, 0)[_SETTER]
        if pid == 0 or ProcessIdentity(pid, start_ticks).alive():
            return False
        with self._guard, self._lock.held(self._deadline(), f"promise {self.name!r}"):
            if self._outcome is None and _HEADER.unpack_from(self._header, 0)[1] != _READY:
                self._outcome = None, self._orphaned(pid)
        return True

    def _orphaned(self, pid: int) -> PeerDiedError:
        return PeerDiedError(
            f"promise {self.name!r}: its setter, process {pid}, died before it set a value "
            "or an error (the future was waiting for it)",
            ((None, pid),),
        )

    def _register(self) -> WakeSocket:
        """This process's wake socket, its address written into the header (once)."""
        with self._guard:
            if self._wake is not None:
                return self._wake
            if not self._owner:
                raise PromiseStateError(f"promise {self.name!r}: the attached side cannot wait")
            wake = WakeSocket()
            with self._lock.held(self._deadline(), f"promise {self.name!r}"):
                fields = list(_HEADER.unpack_from(self._header, 0))
                fields[3:5] = [len(wake.address), wake.address]
                _HEADER.pack_into(self._header, 0, *fields)
            self._wake = wake
            self._wakes.append(wake)
            return wake

    def outcome(self) -> torch.Tensor | None:
        if self._outcome is None:
            with self._guard, self._lock.held(self._deadline(), f"promise {self.name!r}"):
                self._outcome = self._read_outcome()
        value, error = self._outcome
        if error is not None:
            raise raised_anew(error)
        return value

    def _read_outcome(self) -> tuple[torch.Tensor | None, BaseException | None]:
        fields = _HEADER.unpack_from(self._header, 0)
        meta: list[Any] = ormsgpack.unpackb(self._header[_META_AT : _META_AT + fields[5]])
        if meta[0] == _ERROR:
            return None, decode_error(meta[1], meta[2])
        if meta[0] == _DONE:
            return None, None
        dtype, shape = dtype_from_code(meta[1]), tuple(meta[2])
        size = os.fstat(self._fd).st_size
        if size <= _DATA_AT:
            return torch.empty(shape, dtype=dtype), None
        buffer = mmap.mmap(self._fd, size)  # the tensor keeps this mapping alive
        return tensor_view(buffer, _DATA_AT, dtype, shape), None

    def abandon(self) -> None:
        """Settle with an error if the attached promise is dropped before it was set."""
        if not self.is_ready():
            error = CommError(
                f"promise {self.name!r} was dropped in process {os.getpid()} before a value was set"
            )
            try:
                self.settle(None, error)
            except (PromiseStateError, CommError):  # set meanwhile, or the segment is gone
                return

    def add_callback(self, fn: Callable[[], None]) -> None:
        if self.is_ready():
            run_callback(fn)
            return
        self._local.add_callback(fn)
        self._start_watcher()

    def loop_waiter(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        waiter = self._local.loop_waiter(loop)
        if self.is_ready():
            _settle_local(self._local)
        else:
            self._start_watcher()
        return waiter

    def _start_watcher(self) -> None:
        wake = self._register()
        with self._guard:
            if self._watcher is None:
                self._watcher = threading.Thread(
                    target=_watch, args=(weakref.ref(self), wake), name="dtorch-promise-watch"
                )
                self._watcher.daemon = True
                self._watcher.start()


def _watch(ref: weakref.ref[ShmCell], wake: WakeSocket) -> None:
    """Watcher thread: sleep on the wake socket, then settle the cell's local twin. It holds
    the cell only weakly between looks, so a dropped future is collected (and its socket
    closed, which ends this thread) at once."""
    while True:
        try:
            wake.wait(_RECHECK_S)
        except (OSError, ValueError):  # the cell was collected and its socket closed
            return
        cell = ref()
        if cell is None:
            return
        if cell._settled_or_orphaned():
            _settle_local(cell._local)
            return
        del cell


def _settle_local(local: MemoryCell) -> None:
    try:
        local.settle(None, None)
    except PromiseStateError:  # settled by another path already
        return


def _send_wake(address: bytes) -> None:
    sender = WakeSocket()
    try:
        sender.wake(address)
    finally:
        sender.close()


def _release(
    name: str, fd: int, header: mmap.mmap, owner: int | None, wakes: list[WakeSocket]
) -> None:
    """Finalizer: drop the name (the owner's, if still there: ``owner`` is the pid of the
    process that made it, not a child made by ``os.fork``), the mapping, the descriptor."""
    if owner == os.getpid():
        unlink_named(name)
    release_buffer(header)
    os.close(fd)
    for wake in wakes:
        wake.close()
