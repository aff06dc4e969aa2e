"""FileTensorStore: the TensorStore for processes of one machine, through shared memory.

How the pieces fit, and why:

* **Tensor bytes** go through shared memory only. ``src_set`` copies the tensor into one of the
  producer's pooled, already-touched anonymous segments (``memfd``; a copy into a touched
  buffer runs at memory speed, a fresh segment per tensor at page-fault speed). ``dest_get``
  maps that segment (once: mappings are cached) and returns a tensor *view* of it: zero-copy
  for a consumer that only reads. The view is valid until ``dest_finish_get``.
* **Control** lives in one small named segment per store (``file_control``): members, barrier,
  the slots of this round (key -> producer, segment locator, dtype, shape, consumers). Each
  operation is a short transaction under ``flock`` (the kernel drops the lock of a killed
  process, so a crash never wedges the others).
* **Waiting** never spins. A participant that must wait registers as a waiter in the state
  and sleeps in ``select`` on its own wake socket (an autobound abstract unix datagram
  socket: no file, gone with its process), noting the key it awaits; whoever changes the
  state sends one wake byte to each waiter the change concerns (a key's consumers when it is
  set, its producer when the last consumer finishes, everyone when a barrier completes). A
  lost wake-up is impossible (the waiter registers under the lock before it
  sleeps, the socket queues the byte) for a participant used by one thread at a time, and a
  half-second re-check backs that up anyway (threads sharing one participant share its one
  waiter entry, so one of them may wait for the re-check).
  Named pipes would leave files behind; a futex is not reachable from Python.
* **Exchanges without reset**: every key of an exchange is unique to it (the same-device
  backend puts the collective's sequence number in it), so no barrier is needed between
  exchanges. ``dest_get_many`` looks for every peer's key in one transaction per wake-up.
  ``release_exchange`` (the backend's close of every collective) finishes the keys read in
  one transaction and leaves the published ones to this participant's later transactions,
  each of which drops those whose consumers have finished (``MAX_RELEASED`` bounds how many
  may wait; ``flush`` waits for them all); ``end_exchange`` waits for them instead. So a
  collective costs each participant three transactions when nobody waits (publish, read,
  release) and never waits for its slowest reader - the lock is shared by every participant,
  and with more processes than cores a holder may be preempted, so each transaction saved is
  latency saved (4 processes on 2 cores, a small all-gather: 7.4 transactions a rank and
  2.5 ms with a transaction per key read and a wait for the readers, 3.8 and 1.2-1.5 ms
  now).
* **Aborts**: ``abort(scope, message)`` records the scope in the state and wakes every waiter;
  a wait on a key of an aborted scope (a ``dest_get`` of a key never set, a producer waiting
  for its consumers) raises ``PeerFailedError`` instead, and ``end_exchange`` drops the
  producer's slots all the same. A slot dropped that way closes its segment instead of
  recycling it: a consumer that mapped it before the abort may still be reading.
* **Cleanup**: the control segment's name is unlinked as soon as the construction barrier
  completes (every participant has it open), tensor segments never have a name, and wake
  sockets have no file. A killed participant therefore leaves nothing in ``/dev/shm``; if it
  dies before the store was fully opened, the last survivor to give up unlinks the name.
* **Dead peers**: each member records its ``ProcessIdentity`` (pid and start time) when it
  joins. A waiter looks at the members' processes in every half-second re-check (and once
  more before it times out); one that is gone, its pid free or reused, fails the wait with a
  ``PeerDiedError`` that names it and what was awaited: a dead participant cannot set, finish
  or arrive any more, so nobody waits out the timeout for it. Joining a store with a dead
  member fails at once, unless the dead member held the joiner's own rank (a restarted
  process takes its rank back).

Example:
    >>> import torch
    >>> from dtorch.comm.namespace import CommNamespace
    >>> store = FileTensorStore.open("file-doc", 1, 0, CommNamespace.create())
    >>> store.src_set("k", torch.arange(4), 1)
    >>> store.dest_get("k").tolist()
    [0, 1, 2, 3]
    >>> store.dest_finish_get("k"); store.src_wait_until_get_finished("k"); store.close()
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar, cast

import torch

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.process_identity import ProcessIdentity
from dtorch.comm.shm import PeerMaps, Segment, SegmentPool, WakeSocket, tensor_view
from dtorch.comm.store.base import (
    ABORTS_KEPT,
    Deadline,
    KeysTimeoutError,
    TensorStore,
    all_finished,
    check_key,
    check_participant,
    check_scope,
    check_set,
    cut_message,
    finish_detail,
    finish_open,
    missing_ranks,
    peer_died_error,
    peer_failed_error,
    scope_of,
    timeout_error,
)
from dtorch.comm.store.file_control import (
    Control,
    ControlState,
    SlotRecord,
    member_identity,
)
from dtorch.errors import CommError, CommTimeoutError
from dtorch.ir.dtypes import dtype_code, dtype_from_code

T = TypeVar("T")

#: Longest sleep between two looks at the state, should a wake-up ever go missing, and
#: between two looks at the members' processes while a wait lasts.
_RECHECK_S = 0.5

#: Keys a participant released without waiting (``release_exchange``) whose consumers have not
#: all finished, at most: the next ``src_set`` waits for the oldest first, so a producer that
#: only publishes (a broadcast's source) stays within this many exchanges of its consumers.
MAX_RELEASED = 4

#: How long ``close`` waits for the consumers of the keys released without waiting (a live one
#: finishes within milliseconds; a dead one is seen within ``_RECHECK_S``).
_CLOSE_WAIT_S = 5.0


class FileTensorStore(TensorStore):
    """A TensorStore participant for processes of one machine; see the module docstring."""

    carries_aborts = True

    def __init__(
        self,
        store_key: str,
        world_size: int,
        rank: int,
        control: Control,
        pool: SegmentPool | None = None,
    ) -> None:
        self.store_key = store_key
        self.world_size = world_size
        self.rank = rank
        self._control: Control | None = control
        self._wake = WakeSocket()
        self._joined = False  # only a member may leave: a refused duplicate must not
        self._owns_pool = pool is None
        self._pool = SegmentPool() if pool is None else pool
        self._peers = PeerMaps()
        self._in_use: dict[str, Segment] = {}
        self._released: dict[str, None] = {}  # published, released without waiting; oldest first
        self._local = threading.Lock()  # one participant, several threads: flock is per fd

    @classmethod
    def open(
        cls,
        store_key: str,
        world_size: int,
        rank: int,
        namespace: CommNamespace,
        pool: SegmentPool | None = None,
    ) -> FileTensorStore:
        """Join the store (construction barrier included: all ranks must open it).

        ``pool`` shares touched segments between the stores of this process (default: a
        pool of this participant's own, closed with it).

        Example:
            >>> FileTensorStore.open("solo", 1, 0, CommNamespace.create()).close()
        """
        check_participant(store_key, world_size, rank)
        deadline = Deadline()
        control = Control.open(namespace.shm_name("store", store_key), world_size, deadline.at)
        store = cls(store_key, world_size, rank, control, pool)
        return finish_open(store, lambda: store._join(deadline))

    def _join(self, deadline: Deadline) -> None:
        me = ProcessIdentity.of_self()
        with self._txn(deadline) as state:
            self._take_rank(state)
            state.members[self.rank] = [me.pid, self._wake.address, me.start_ticks]
            state.dirty = True
            dead = state.dead_members(self.rank)
        self._joined = True  # so that close() leaves, and the last one out unlinks the name
        if dead:
            raise peer_died_error(
                self,
                "opening the store",
                dead,
                "a complete opening (the dead participant had opened the store, so the "
                "opening can never complete)",
            )

    def _take_rank(self, state: ControlState) -> None:
        """Refuse a rank held by a live member; forget a dead one that held it (restarted)."""
        member = state.members[self.rank]
        if member is None:
            return
        if member_identity(member).alive():
            raise CommError(
                f"file store {self.store_key!r}: rank {self.rank} is already open "
                f"(by process {member[0]})"
            )
        state.arrived = [r for r in state.arrived if r != self.rank]

    def _txn(self, deadline: Deadline) -> Transaction:
        return Transaction(self, deadline)

    def _wait_until(
        self,
        call: str,
        deadline: Deadline,
        ready: Callable[[ControlState], T | None],
        missing: Callable[[ControlState], str],
        awaits: str | Callable[[ControlState], str] = "",
    ) -> T:
        """Wait (asleep) until ``ready(state)`` is not None; its result, read under the lock.
        ``awaits``: the key whose change wakes this wait ("": only a change to everyone), or
        how to find it in the state once ``ready`` said no.

        Every ``_RECHECK_S`` (and at the deadline) the members' processes are looked at too."""
        look_at_peers = time.monotonic() + _RECHECK_S
        while True:
            expired = deadline.expired()
            look = expired or time.monotonic() >= look_at_peers
            with self._txn(deadline) as state:
                result = ready(state)
                dead = state.dead_members(self.rank) if result is None and look else []
                give_up = result is None and (expired or bool(dead))
                waiting = None
                if result is None:
                    waiting = awaits if isinstance(awaits, str) else awaits(state)
                detail = state.register(self.rank, waiting, give_up, missing)
            if result is not None:
                return result
            if detail is not None:
                if dead:
                    raise peer_died_error(self, call, dead, detail)
                raise timeout_error(self, call, deadline.seconds, detail)
            if look:
                look_at_peers = time.monotonic() + _RECHECK_S
            self._wake.wait(min(deadline.remaining(), look_at_peers - time.monotonic()))
            self._wake.drain()

    def src_set(self, key: str, tensor: torch.Tensor, get_count: int) -> None:
        check_set(key, tensor, get_count, self.world_size)
        oldest = next(iter(self._released), None)  # (another thread may empty it meanwhile)
        if oldest is not None and len(self._released) >= MAX_RELEASED:  # readers far behind
            self._await_finished("src_set", oldest, True, released=True)
        segment = self._pool.acquire(tensor.nbytes)
        tensor_view(segment.buffer, 0, tensor.dtype, tuple(tensor.shape)).copy_(tensor)
        slot = SlotRecord(
            self.rank,
            _locator_tuple(segment),
            dtype_code(tensor.dtype),
            tuple(tensor.shape),
            get_count,
            [],
        )
        try:
            with self._txn(Deadline()) as state:
                message = state.aborted(scope_of(key))
                if message is not None:  # nobody would read it: the consumers failed already
                    raise peer_failed_error(self, "src_set", key, message)
                if key in state.slots:
                    raise CommError(
                        f"src_set({key!r}) on store {self.store_key!r}: the key is already set "
                        "in this round; call reset() between rounds"
                    )
                state.slots[key] = slot
                state.touch(key)  # wakes its consumers
        except BaseException:
            self._pool.release(segment)
            raise
        self._in_use[key] = segment

    def dest_get(self, key: str) -> torch.Tensor:
        check_key(key)
        deadline = Deadline()

        def ready(state: ControlState) -> torch.Tensor | str | None:
            slot = state.slots.get(key)
            if slot is not None:
                return self._view(slot)  # mapped under the lock
            return state.aborted(scope_of(key))  # a message: it will never be set

        def missing(state: ControlState) -> str:
            return f"no participant called src_set({key!r})"

        # mypy joins the two result types to object: name the union
        got = cast(
            "torch.Tensor | str", self._wait_until("dest_get", deadline, ready, missing, key)
        )
        if isinstance(got, str):
            raise peer_failed_error(self, "dest_get", key, got)
        return got

    def dest_get_many(self, keys: Sequence[str]) -> list[torch.Tensor]:
        """Every key's tensor, looked for in one transaction per wake-up rather than one per
        key (with four processes on two cores each transaction may wait for the lock)."""
        for key in keys:
            check_key(key)
        absent: list[str] = []

        def ready(state: ControlState) -> list[torch.Tensor] | str | None:
            slots = state.slots
            absent[:] = [key for key in keys if key not in slots]
            if not absent:
                return [self._view(slots[key]) for key in keys]  # mapped under the lock
            return state.abort_of(absent) or None  # a message: they will never be set

        def missing(state: ControlState) -> str:
            return "no participant called src_set(" + ", ".join(map(repr, absent)) + ")"

        try:
            got = cast(
                "list[torch.Tensor] | str",
                self._wait_until("dest_get", Deadline(), ready, missing, lambda _: absent[0]),
            )
        except CommTimeoutError as error:
            raise KeysTimeoutError(str(error), absent) from None
        if isinstance(got, str):
            raise peer_failed_error(self, "dest_get", absent[0], got)
        return got

    def _view(self, slot: SlotRecord) -> torch.Tensor:
        buffer = self._peers.get(slot.segment())
        return tensor_view(buffer, 0, dtype_from_code(slot.dtype_code), slot.shape)

    def dest_finish_get(self, key: str) -> None:
        check_key(key)
        with self._txn(Deadline()) as state:
            state.finish(key, self.rank)

    def src_wait_until_get_finished(self, key: str) -> None:
        check_key(key)
        finished, message = self._await_finished("src_wait_until_get_finished", key, drop=False)
        if not finished:
            raise peer_failed_error(self, "src_wait_until_get_finished", key, message)

    def end_exchange(self, read: Sequence[str], published: Sequence[str]) -> None:
        """Finish ``read`` in one transaction, then wait for each of ``published`` and drop
        its slot in the transaction that sees it finished: no barrier. The producer still
        waits for its consumers (a producer that ran ahead could pile up segments, and one
        that closed early would take its segments from consumers yet to read them), unless
        the exchange's scope was aborted: then it drops its slots at once and raises
        ``PeerFailedError`` once they are gone."""
        for key in (*read, *published):
            check_key(key)
        failed = ""
        if read:
            with self._txn(Deadline()) as state:
                for key in read:
                    state.finish(key, self.rank)
                failed = state.abort_of(read)
        for key in published:
            failed = self._await_finished("end_exchange", key, drop=True)[1] or failed
        if failed:
            raise peer_failed_error(self, "end_exchange", (*read, *published)[0], failed)

    def release_exchange(self, read: Sequence[str], published: Sequence[str]) -> None:
        """``end_exchange`` without waiting for the consumers of ``published``: one
        transaction finishes the keys read and hands the published ones to this participant's
        later transactions, which drop each once its consumers have finished (and recycle its
        segment) - or ``flush``, ``discard`` and ``close`` do. A participant that both
        publishes and reads in every exchange is never more than one exchange ahead of its
        consumers; one that only publishes waits in ``src_set`` once ``MAX_RELEASED`` keys
        are still being read. ``PeerFailedError`` if the exchange's scope was aborted."""
        for key in (*read, *published):
            check_key(key)
        with self._txn(Deadline()) as state:
            for key in read:
                state.finish(key, self.rank)
            self._released.update(dict.fromkeys(published))  # the drop at its end sees them
            failed = state.abort_of((*read, *published))
        if failed:
            raise peer_failed_error(self, "release_exchange", (*read, *published)[0], failed)

    def flush(self, seconds: float | None = None) -> None:
        """Wait until the consumers of every key released without waiting have finished,
        and drop those keys (an aborted scope's are dropped at once). ``seconds`` bounds each
        wait (default: the comm timeout); a consumer that died raises ``PeerDiedError``."""
        while (oldest := next(iter(self._released), None)) is not None:
            self._await_finished("flush", oldest, True, seconds=seconds, released=True)

    def _drop_released(self, state: ControlState) -> None:
        """In every transaction: drop the released keys whose consumers have all finished
        (their segments go back to the pool) or whose scope was aborted (their segments are
        closed: a consumer may still be reading)."""
        for key in list(self._released):
            slot = state.slots.get(key)
            finished = slot is not None and all_finished(slot)
            if slot is not None and not finished and state.aborted(scope_of(key)) is None:
                continue
            del self._released[key]
            if slot is not None:
                del state.slots[key]
                state.dirty = True
            segment = self._in_use.pop(key, None)
            if segment is not None:
                self._pool.release(segment) if finished else segment.close()

    def _await_finished(
        self,
        call: str,
        key: str,
        drop: bool,
        seconds: float | None = None,
        released: bool = False,
    ) -> tuple[bool, str]:
        """Wait until every consumer of this producer's ``key`` finished (``drop``: and
        forget the key, in the same transaction); its segment goes back to the pool. An
        aborted scope ends the wait at once (a dropped key's segment is then closed, not
        recycled: a consumer may still read it). Whether every consumer finished, and the
        scope's abort message ("": not aborted). ``seconds`` bounds the wait (default: the
        comm timeout); ``released``: a key of ``release_exchange``, which the drop at the end
        of a transaction may have taken."""
        deadline = Deadline(seconds)

        def ready(state: ControlState) -> tuple[bool, str] | None:
            slot = state.slots.get(key)
            if slot is None and released:  # another thread's transaction dropped it
                self._released.pop(key, None)
                return True, ""
            if slot is None or (drop and slot.producer != self.rank):
                who = " by this participant" if drop else ""
                raise CommError(f"{call}({key!r}): the key was never set{who}")
            finished, message = all_finished(slot), state.aborted(scope_of(key)) or ""
            if not finished and not message:
                return None
            if drop:
                del state.slots[key]
                state.dirty = True
                self._released.pop(key, None)  # not the sweep's any more: the caller's
            return finished, message

        def missing(state: ControlState) -> str:
            return finish_detail(key, state.slots[key])

        finished, message = self._wait_until(call, deadline, ready, missing, key)
        segment = self._in_use.pop(key, None) if drop or finished else None
        if segment is not None:
            if finished:
                self._pool.release(segment)
            else:
                segment.close()
        return finished, message

    def abort(self, scope: str, message: str) -> bool:
        check_scope(scope)
        with self._txn(Deadline()) as state:
            state.abort(scope, cut_message(message), ABORTS_KEPT)
        return True

    def aborted(self, scope: str) -> str | None:
        with self._txn(Deadline()) as state:
            return state.aborted(scope)

    def discard(self) -> None:
        with self._txn(Deadline()) as state:
            for key in [k for k, slot in state.slots.items() if slot.producer == self.rank]:
                del state.slots[key]
                state.dirty = True
        for segment in self._in_use.values():  # consumers may still read them: never recycle
            segment.close()
        self._in_use.clear()

    def barrier(self) -> None:
        deadline = Deadline()
        with self._txn(deadline) as state:
            if self.rank in state.arrived:
                raise CommError(f"barrier(): rank {self.rank} entered the barrier twice")
            generation = state.generation
            state.arrived.append(self.rank)
            state.dirty = True
            if len(state.arrived) == self.world_size:  # the waiters care about this alone
                state.notify = True
                self._complete_barrier(state)
                return

        def ready(state: ControlState) -> bool | None:
            return True if state.generation != generation else None

        def missing(state: ControlState) -> str:
            absent = missing_ranks(self.world_size, state.arrived)
            state.arrived.remove(self.rank)
            return f"ranks {absent} never arrived"

        self._wait_until("barrier", deadline, ready, missing)

    def _complete_barrier(self, state: ControlState) -> None:
        state.arrived = []
        state.generation += 1
        if state.generation == 1 and self._control is not None:
            self._control.unlink()  # all participants have the segment open: drop its name

    def _clear_round(self) -> None:
        with self._txn(Deadline()) as state:
            for key in [k for k, slot in state.slots.items() if slot.producer == self.rank]:
                del state.slots[key]
            state.dirty = state.notify = True
        for segment in self._in_use.values():
            self._pool.release(segment)
        self._in_use.clear()

    def close(self) -> None:
        control = self._control
        if control is None:
            return
        if self._joined:
            with contextlib.suppress(CommError):  # a consumer that died or hangs: close anyway
                self.flush(_CLOSE_WAIT_S)
            with contextlib.suppress(CommError):
                self._leave()
        self._control = None
        control.close()
        self._peers.close()
        for segment in self._in_use.values():  # consumers may still read them: never recycle
            segment.close()
        self._in_use.clear()
        if self._owns_pool:
            self._pool.close()
        self._wake.close()

    def _leave(self) -> None:
        with self._txn(Deadline(1.0)) as state:
            state.members[self.rank] = None
            state.waiters.pop(self.rank, None)
            state.dirty = True
            if state.generation > 0:
                return
            state.arrived = [r for r in state.arrived if r != self.rank]
            alive = [m for m in state.members if m is not None and member_identity(m).alive()]
            if not alive and self._control is not None:  # the opening failed for good
                self._control.unlink()


def _locator_tuple(segment: Segment) -> tuple[int, int, int, int]:
    """The locator of ``segment`` as a plain tuple (pid, fd, inode, size)."""
    locator = segment.locator()
    return (locator.pid, locator.fd, locator.inode, locator.size)


class Transaction:
    """One transaction of a participant, as a ``with`` block giving the ``ControlState``:
    this participant's thread lock and the segment's lock are held for the block; on a
    normal exit the keys released without waiting whose consumers have finished are dropped,
    the state is written back if changed, both locks are released, and the waiters the
    change concerns are woken. On an exception nothing is written and nobody is woken.

    A class, not nested generator context managers: those cost about a fifth of the CPU of
    a small exchange (three transactions per participant)."""

    __slots__ = ("_control", "_deadline", "_state", "_store")

    def __init__(self, store: FileTensorStore, deadline: Deadline) -> None:
        self._store = store
        self._deadline = deadline

    def __enter__(self) -> ControlState:
        store = self._store
        control = store._control
        if control is None:
            raise CommError(f"{store!r} is closed")
        store._local.acquire()
        try:
            self._state = control.begin(self._deadline.at)
        except BaseException:
            store._local.release()
            raise
        self._control = control
        return self._state

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        store, state = self._store, self._state
        try:
            if kind is None:
                if store._released:
                    store._drop_released(state)
                if state.dirty:
                    self._control.write(state)
        finally:
            self._control.end()
            store._local.release()
        if kind is None and (state.notify or state.touched):
            for address in state.wake_addresses(store.rank):
                store._wake.wake(address)
