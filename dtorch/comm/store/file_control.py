"""The control segment of a file store: the shared state of its participants, under a lock.

One named segment per store (``/dev/shm/dtorch-<instance>-store-<hash of the key>``) holds a
MessagePack blob behind a small header. Every operation is a transaction: take the ``flock``
of this participant's own descriptor of the segment, decode the state, change it, encode it
back, release. The state is small (members, barrier, this round's slots), so a transaction
costs tens of microseconds; tensor bytes are never in it, only where they are.

The name exists only while the store is being opened: the participant that completes the
construction barrier unlinks it (everyone has it open by then), and if the opening fails, the
last live participant to give up unlinks it. A segment left by dead processes is reclaimed by
``CommNamespace.reclaim``.

Example:
    >>> state = ControlState.fresh(2)
    >>> state.slots["k"] = SlotRecord(0, (1, 3, 4, 4096), 0, (2,), 1, [])
    >>> ControlState.decode(state.encode()).slots["k"].shape
    (2,)
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import ormsgpack

from dtorch.comm.process_identity import ProcessIdentity
from dtorch.comm.shm import FileLock, Locator, open_named, release_buffer, unlink_named
from dtorch.comm.store.base import all_finished, count_finish, scope_of
from dtorch.errors import CommError, CommTimeoutError

CONTROL_SIZE = 1 << 20  # sparse: only the pages the blob touches are ever allocated
_MAGIC = b"DTSTORE1"
_HEADER = struct.Struct("<8sI")  # magic, blob length
_BLOB_AT = 64

#: A dead member, as the errors name it: (rank, pid).
DeadMember = tuple[int, int]


@dataclass(slots=True)
class SlotRecord:
    """One key of the round: producer rank, segment locator, dtype code, shape, consumers."""

    producer: int
    locator: tuple[int, int, int, int]  # Locator fields: pid, fd, inode, size
    dtype_code: int
    shape: tuple[int, ...]
    target: int
    finished_by: list[int]

    def to_list(self) -> list[Any]:
        return [
            self.producer,
            list(self.locator),
            self.dtype_code,
            list(self.shape),
            self.target,
            self.finished_by,
        ]

    @classmethod
    def from_list(cls, row: list[Any]) -> SlotRecord:
        producer, locator, dtype_code, shape, target, finished_by = row
        pid, fd, inode, size = locator
        return cls(producer, (pid, fd, inode, size), dtype_code, tuple(shape), target, finished_by)

    def segment(self) -> Locator:
        return Locator(*self.locator)


@dataclass(slots=True)
class ControlState:
    """Members (pid, wake address, process start ticks) by rank, the barrier, the slots, who
    is waiting and for which key ("": anything else, such as the barrier), and the scopes
    aborted lately (``[scope, message]`` pairs, oldest first; empty in a healthy program).

    A transaction wakes only the waiters its change concerns: those awaiting a key it
    ``touch``-ed, or every waiter when it sets ``notify``. With four processes on two cores,
    waking every waiter on every change cost more than the exchange itself.
    """

    world_size: int
    members: list[list[Any] | None]
    generation: int
    arrived: list[int]
    slots: dict[str, SlotRecord]
    waiters: dict[int, str]
    aborts: list[list[str]] = field(default_factory=list)
    dirty: bool = False  # write the state back
    notify: bool = False  # and wake every waiter: something any of them may wait for changed
    touched: list[str] = field(default_factory=list)  # wake the waiters of these keys

    @classmethod
    def fresh(cls, world_size: int) -> ControlState:
        return cls(world_size, [None] * world_size, 0, [], {}, {}, [], True)

    def touch(self, key: str) -> None:
        """``key`` changed: write the state back and wake whoever awaits ``key``."""
        self.dirty = True
        self.touched.append(key)

    def aborted(self, scope: str) -> str | None:
        """The message ``scope`` was aborted with ("" scope: never aborted)."""
        if scope:
            for aborted, message in self.aborts:
                if aborted == scope:
                    return message
        return None

    def abort(self, scope: str, message: str, kept: int) -> None:
        """Record ``scope`` as aborted (the first message stays) and wake every waiter."""
        if self.aborted(scope) is None:
            self.aborts = [*self.aborts, [scope, message]][-kept:]
            self.dirty = self.notify = True

    def encode(self) -> bytes:
        slots = {key: slot.to_list() for key, slot in self.slots.items()}
        waiters = [[rank, key] for rank, key in self.waiters.items()]
        row = [
            self.world_size,
            self.members,
            self.generation,
            self.arrived,
            slots,
            waiters,
            self.aborts,
        ]
        return ormsgpack.packb(row)

    @classmethod
    def decode(cls, blob: bytes) -> ControlState:
        world_size, members, generation, arrived, slots, waiters, aborts = ormsgpack.unpackb(blob)
        records = {key: SlotRecord.from_list(row) for key, row in slots.items()}
        awaiting = dict(waiters)  # [rank, key] pairs
        return cls(world_size, members, generation, arrived, records, awaiting, aborts)

    def register(
        self,
        rank: int,
        waiting: str | None,
        give_up: bool,
        missing: Callable[[ControlState], str],
    ) -> str | None:
        """Keep ``rank`` in the waiters, awaiting the key ``waiting``, while it waits (None: it
        does not); what it waited for once it gives up."""
        registered = self.waiters.get(rank)
        if waiting is None:
            if registered is not None:
                del self.waiters[rank]
                self.dirty = True
            return None
        if give_up:
            self.waiters.pop(rank, None)
            self.dirty = True
            return missing(self)
        if registered != waiting:
            self.waiters[rank] = waiting
            self.dirty = True
        return None

    def finish(self, key: str, rank: int) -> None:
        """Consumer ``rank`` is done with ``key``; the last one wakes the producer. A key its
        aborted producer dropped already is skipped."""
        slot = self.slots.get(key)
        if slot is None and self.aborted(scope_of(key)) is not None:
            return
        slot = count_finish(key, slot, rank)
        self.dirty = True
        if all_finished(slot):
            self.touch(key)

    def abort_of(self, keys: Sequence[str]) -> str:
        """The abort message of the first aborted scope among ``keys``' ("": none)."""
        if self.aborts:
            for scope in dict.fromkeys(scope_of(key) for key in keys):
                message = self.aborted(scope)
                if message is not None:
                    return message
        return ""

    def dead_members(self, rank: int) -> list[DeadMember]:
        """The members other than ``rank`` whose process is gone (exited, killed, pid
        reused)."""
        return [
            (other, member[0])
            for other, member in enumerate(self.members)
            if other != rank and member is not None and not member_identity(member).alive()
        ]

    def wake_addresses(self, exclude: int) -> list[bytes]:
        """The wake addresses of the waiting participants other than ``exclude`` that this
        transaction's change concerns."""
        found = []
        touched = self.touched
        for rank, key in self.waiters.items():
            member = self.members[rank]
            if rank != exclude and member is not None and (self.notify or key in touched):
                found.append(member[1])
        return found


def member_identity(member: list[Any]) -> ProcessIdentity:
    """The process of a member row ``[pid, wake address, start ticks]``."""
    return ProcessIdentity(member[0], member[2])


class Control:
    """This participant's handle on the control segment of one store."""

    def __init__(self, name: str, fd: int) -> None:
        self.name = name
        self._fd = fd
        self._lock = FileLock(fd)
        self._what = f"store segment {name!r}"  # for a lock timeout's message; once, not per lock
        self._buffer = mmap.mmap(fd, CONTROL_SIZE)

    @classmethod
    def open(cls, name: str, world_size: int, deadline: float) -> Control:
        """Open the segment ``name``, creating it if this participant is the first."""
        try:
            fd = open_named(name, create=True, size=CONTROL_SIZE)
        except FileExistsError:
            fd = open_named(name, create=False)
            _await_size(fd, name, deadline)
        control = cls(name, fd)
        try:
            with control.transaction(deadline, fresh_size=world_size) as state:
                opened_with = state.world_size
        except BaseException:
            control.close()
            raise
        if opened_with != world_size:
            control.close()
            raise CommError(
                f"file store segment {name!r} was opened with world_size={opened_with}; "
                f"this participant asked for world_size={world_size}"
            )
        return control

    @contextlib.contextmanager
    def transaction(self, deadline: float, fresh_size: int = 0) -> Iterator[ControlState]:
        """The decoded state under the lock; written back if the caller set ``dirty``."""
        state = self.begin(deadline, fresh_size)
        try:
            yield state
            if state.dirty:
                self.write(state)
        finally:
            self.end()

    def begin(self, deadline: float, fresh_size: int = 0) -> ControlState:
        """Take the lock and read the state (``transaction`` in two calls, for a caller that
        adds steps of its own without another context manager: see ``file.Transaction``);
        ``end`` releases the lock. A read that fails releases it here, before raising."""
        self._lock.acquire(deadline, self._what)
        try:
            return self._read(fresh_size)
        except BaseException:
            self._lock.release()
            raise

    def end(self) -> None:
        self._lock.release()

    def _read(self, fresh_size: int) -> ControlState:
        magic, length = _HEADER.unpack_from(self._buffer, 0)
        if magic != _MAGIC:  # the first participant under the lock initialises the segment
            return ControlState.fresh(fresh_size)
        return ControlState.decode(self._buffer[_BLOB_AT : _BLOB_AT + length])

    def write(self, state: ControlState) -> None:
        """Write ``state`` back (under the lock: between ``begin`` and ``end``)."""
        blob = state.encode()
        if _BLOB_AT + len(blob) > CONTROL_SIZE:
            raise CommError(
                f"file store {self.name!r}: {len(state.slots)} keys in one round do not fit "
                "the control segment; call reset() between rounds (or end_exchange after each "
                "exchange)"
            )
        self._buffer[_BLOB_AT : _BLOB_AT + len(blob)] = blob
        _HEADER.pack_into(self._buffer, 0, _MAGIC, len(blob))

    def unlink(self) -> None:
        """Remove the segment's name (participants that have it open keep using it)."""
        unlink_named(self.name)

    def close(self) -> None:
        release_buffer(self._buffer)
        os.close(self._fd)


def _await_size(fd: int, name: str, deadline: float) -> None:
    """Wait until the creator sized the segment (it opens and sizes it in two steps)."""
    while os.fstat(fd).st_size < CONTROL_SIZE:
        if time.monotonic() >= deadline:
            os.close(fd)
            raise CommTimeoutError(f"store segment {name!r} was created but never sized")
        time.sleep(1e-4)
