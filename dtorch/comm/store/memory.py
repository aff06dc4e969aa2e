"""MemoryTensorStore: the TensorStore for threads of one process (spec 002 section 3.4).

All participants that open one store key (within one ``CommNamespace``) share one ``_Shared``
state: a lock, one condition per key (so a set wakes only that key's consumers, not every
thread of a 400-device mesh), a condition for the barrier, and the slots of this round. Tensors
are handed over by reference: ``dest_get`` returns the producer's tensor itself. The registry
holds the shared states weakly, so a state is freed when its last participant closes and a
later store with the same key starts afresh (the spec's MemoryTensorStoreImpManager).
An abort (``abort(scope, message)``) is kept in the shared state and wakes every waiter; a
consumer that gives up on a key never set drops its empty slot once nobody else waits on it,
so an aborted or timed-out exchange leaves no slot behind.

``combine`` is the threads' shortcut for an exchange in which every participant needs every
other's tensors: each brings its tensors, the last to arrive computes every participant's
result from all of them, once, and hands each its own. Only the first arrivals wait, once; the
last does not wait at all, and there is no release phase (nobody reads a tensor after its
owner has its result). An exchange (keys sharing the text before their last ``/``) is either a
meeting or a handshake: a participant that finds the other kind there (participants whose
tensors differ chose differently) refuses at once instead of waiting for a peer that went the
other way. A key may serve one meeting after another.

Example:
    >>> import threading, torch
    >>> from dtorch.comm.store.memory import MemoryTensorStore
    >>> got = []
    >>> def consume():
    ...     store = MemoryTensorStore.open("mem-doc", 2, 1)
    ...     got.append(store.dest_get("k").sum().item()); store.dest_finish_get("k")
    ...     store.close()
    >>> thread = threading.Thread(target=consume); thread.start()
    >>> store = MemoryTensorStore.open("mem-doc", 2, 0)
    >>> store.src_set("k", torch.ones(4), 1); store.src_wait_until_get_finished("k")
    >>> thread.join(); store.close(); got
    [4.0]
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar, cast

import torch

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.store.base import (
    AbortLog,
    Deadline,
    MeetingTimeoutError,
    TensorStore,
    all_finished,
    check_key,
    check_participant,
    check_scope,
    check_set,
    count_finish,
    finish_detail,
    finish_open,
    missing_ranks,
    peer_failed_error,
    timeout_error,
)
from dtorch.errors import CommError

T = TypeVar("T")


class _Slot:
    """One key of one round: its tensor and producer, how many consumers it expects, who
    finished, and how many consumers wait for it to be set."""

    __slots__ = ("cond", "finished_by", "producer", "target", "tensor", "waiting")

    def __init__(self, lock: threading.Lock) -> None:
        self.cond = threading.Condition(lock)
        self.tensor: torch.Tensor | None = None
        self.producer = -1
        self.target = 0
        self.finished_by: list[int] = []
        self.waiting = 0


class _Meeting:
    """One ``combine``: the tensors brought so far (by group rank), who brought them, then
    the last arrival's result; ``present`` counts the participants still inside."""

    __slots__ = ("arrived", "cond", "done", "present", "result", "tensors")

    def __init__(self, lock: threading.Lock) -> None:
        self.cond = threading.Condition(lock)
        self.tensors: dict[int, torch.Tensor] = {}
        self.arrived: set[int] = set()
        self.present = 0
        self.done = False
        self.result: object = None


class _Shared:
    """State shared by the participants of one store key (guarded by ``lock``)."""

    __slots__ = (
        "__weakref__",
        "aborts",
        "arrived",
        "barrier_cond",
        "generation",
        "lock",
        "meetings",
        "open_ranks",
        "slots",
        "world_size",
    )

    def __init__(self, world_size: int) -> None:
        self.lock = threading.Lock()
        self.barrier_cond = threading.Condition(self.lock)
        self.world_size = world_size
        self.slots: dict[str, _Slot] = {}
        self.meetings: dict[str, _Meeting] = {}
        self.open_ranks: set[int] = set()
        self.arrived: set[int] = set()
        self.generation = 0
        self.aborts = AbortLog()

    def slot(self, key: str) -> _Slot:
        """The slot of ``key``, created on first use by either side (caller holds the lock)."""
        slot = self.slots.get(key)
        if slot is None:
            slot = self.slots[key] = _Slot(self.lock)
        return slot

    def aborted(self, key: str) -> str | None:
        """The abort message of ``key``'s scope, if it was aborted (caller holds the lock)."""
        return self.aborts.of_key(key)

    def crossed(self, key: str, meeting: bool) -> bool:
        """Whether ``key``'s exchange (its keys' text before the last ``/``) is already of the
        other kind: handshake keys where a meeting comes (``meeting``), or a meeting where a
        handshake reads. Participants that chose differently would never meet."""
        others = self.slots if meeting else self.meetings
        if not others:  # the handshake's usual case: no meeting at all
            return False
        exchange = key.rpartition("/")[0]
        return bool(exchange) and any(k.rpartition("/")[0] == exchange for k in others)

    def leave(self, key: str, meeting: _Meeting) -> None:
        """A participant is out of ``meeting``: the last one out forgets it."""
        meeting.present -= 1
        if meeting.present == 0 and self.meetings.get(key) is meeting:
            del self.meetings[key]

    def wake_all(self) -> None:
        """Every waiter looks again (an abort)."""
        for slot in self.slots.values():
            slot.cond.notify_all()
        for meeting in self.meetings.values():
            meeting.cond.notify_all()

    def drop_unset(self, key: str, slot: _Slot) -> None:
        """Forget ``slot`` if it was never set and nobody waits on it any more."""
        if slot.tensor is None and slot.waiting == 0 and self.slots.get(key) is slot:
            del self.slots[key]


class _Registry:
    """Scoped store key -> live shared state, held weakly (freed with its last participant)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: weakref.WeakValueDictionary[str, _Shared] = weakref.WeakValueDictionary()

    def join(self, scoped_key: str, world_size: int, rank: int) -> _Shared:
        """The shared state of ``scoped_key`` with ``rank`` registered as open in it."""
        with self._lock:
            state = self._states.get(scoped_key)
            if state is None:
                state = self._states[scoped_key] = _Shared(world_size)
            _admit(state, scoped_key, world_size, rank)
            return state


def _admit(state: _Shared, scoped_key: str, world_size: int, rank: int) -> None:
    if state.world_size != world_size:
        raise CommError(
            f"memory store {scoped_key!r} was opened with world_size={state.world_size}; "
            f"rank {rank} asked for world_size={world_size}"
        )
    with state.lock:
        if rank in state.open_ranks:
            raise CommError(f"memory store {scoped_key!r}: rank {rank} is already open")
        state.open_ranks.add(rank)


#: The process's registry of memory stores (spec: MemoryTensorStoreImpManager). Only live
#: stores are in it, and only weakly: it holds no state of its own between programs.
REGISTRY = _Registry()


class MemoryTensorStore(TensorStore):
    """A TensorStore participant for threads of one process; see the module docstring."""

    carries_aborts = True

    def __init__(self, store_key: str, world_size: int, rank: int, shared: _Shared) -> None:
        self.store_key = store_key
        self.world_size = world_size
        self.rank = rank
        self._shared: _Shared | None = shared

    @classmethod
    def open(
        cls,
        store_key: str,
        world_size: int,
        rank: int,
        namespace: CommNamespace | None = None,
    ) -> MemoryTensorStore:
        """Join the store (construction barrier included: all ranks must open it).

        Example:
            >>> MemoryTensorStore.open("solo-doc", 1, 0).world_size
            1
        """
        check_participant(store_key, world_size, rank)
        scoped = (namespace or CommNamespace.of_process()).scoped_key(store_key)
        shared = REGISTRY.join(scoped, world_size, rank)
        return finish_open(cls(store_key, world_size, rank, shared))

    def _state(self) -> _Shared:
        if self._shared is None:
            raise CommError(f"{self!r} is closed")
        return self._shared

    def src_set(self, key: str, tensor: torch.Tensor, get_count: int) -> None:
        check_set(key, tensor, get_count, self.world_size)
        shared = self._state()
        with shared.lock:
            message = shared.aborted(key)
            if message is not None:  # nobody would read it: the consumers failed already
                raise peer_failed_error(self, "src_set", key, message)
            slot = shared.slot(key)
            if slot.tensor is not None:
                raise CommError(
                    f"src_set({key!r}) on store {self.store_key!r}: the key is already set in "
                    "this round; call reset() between rounds"
                )
            slot.tensor, slot.target, slot.producer = tensor, get_count, self.rank
            slot.cond.notify_all()

    def src_wait_until_get_finished(self, key: str) -> None:
        check_key(key)
        shared, deadline = self._state(), Deadline()
        with shared.lock:
            slot = shared.slots.get(key)
            if slot is None or slot.tensor is None:
                raise CommError(f"src_wait_until_get_finished({key!r}): the key was never set")

            def done() -> bool:
                return all_finished(slot) or shared.aborted(key) is not None

            if not slot.cond.wait_for(done, deadline.remaining()):
                detail = finish_detail(key, slot)
                raise timeout_error(self, "src_wait_until_get_finished", deadline.seconds, detail)
            message = None if all_finished(slot) else shared.aborted(key)
            if message is not None:
                raise peer_failed_error(self, "src_wait_until_get_finished", key, message)

    def dest_get(self, key: str) -> torch.Tensor:
        check_key(key)
        shared, deadline = self._state(), Deadline()
        with shared.lock:
            if shared.crossed(key, meeting=False):
                raise _disagreement(self, "dest_get", key)
            slot = shared.slot(key)

            def ready() -> bool:
                return slot.tensor is not None or shared.aborted(key) is not None

            slot.waiting += 1
            try:
                came = slot.cond.wait_for(ready, deadline.remaining())
            finally:
                slot.waiting -= 1
            if slot.tensor is not None:
                return slot.tensor
            shared.drop_unset(key, slot)
            if not came:
                detail = f"no participant called src_set({key!r})"
                raise timeout_error(self, "dest_get", deadline.seconds, detail)
            raise peer_failed_error(self, "dest_get", key, shared.aborted(key) or "aborted")

    def dest_finish_get(self, key: str) -> None:
        check_key(key)
        shared = self._state()
        with shared.lock:
            slot = shared.slots.get(key)
            unset = slot is None or slot.tensor is None
            if unset and shared.aborted(key) is not None:
                return  # its producer failed and dropped it: nothing to finish
            slot = count_finish(key, None if unset else slot, self.rank)
            if len(slot.finished_by) == slot.target:
                slot.cond.notify_all()

    def combine(
        self,
        key: str,
        tensors: Mapping[int, torch.Tensor],
        finish: Callable[[dict[int, torch.Tensor]], T],
    ) -> T:
        """Meet every participant at ``key``, each bringing ``tensors`` (by group rank): the
        last to arrive returns ``finish`` of all of them, and every other participant returns
        that same object once it is computed (so ``finish`` makes each participant's result a
        tensor of its own). A failure of ``finish`` is the last arrival's to tell (abort the
        scope); the others then raise PeerFailedError, as they do on any abort of the key's
        scope, and CommTimeoutError past the comm timeout.

        Example:
            >>> import threading, torch
            >>> got = {}
            >>> def meet(r):
            ...     with MemoryTensorStore.open("meet-doc", 2, r) as store:
            ...         tensors = {r: torch.tensor(r + 1.0)}
            ...         got[r] = store.combine("op/all", tensors, lambda ts: sum(ts.values()))
            >>> threads = [threading.Thread(target=meet, args=(r,)) for r in range(2)]
            >>> for t in threads: t.start()
            >>> for t in threads: t.join()
            >>> got[0].item(), got[1] is got[0]
            (3.0, True)
        """
        check_key(key)
        shared, deadline = self._state(), Deadline()
        with shared.lock:
            meeting = self._arrive(shared, key, tensors)
            if len(meeting.arrived) < self.world_size:
                return cast(T, self._await(shared, key, meeting, deadline))
            everything, meeting.tensors = meeting.tensors, {}
        try:
            result = finish(everything)
        except BaseException:  # the caller aborts the scope, which wakes the others
            with shared.lock:
                shared.leave(key, meeting)
            raise
        with shared.lock:
            meeting.result, meeting.done = result, True
            meeting.cond.notify_all()
            shared.leave(key, meeting)
        return result

    def _arrive(self, shared: _Shared, key: str, tensors: Mapping[int, torch.Tensor]) -> _Meeting:
        """Bring ``tensors`` to ``key``'s meeting (lock held)."""
        message = shared.aborted(key)
        if message is not None:
            raise peer_failed_error(self, "combine", key, message)
        meeting = shared.meetings.get(key)
        if meeting is None and shared.crossed(key, meeting=True):
            raise _disagreement(self, "combine", key)
        if meeting is None or meeting.done:  # a done one's leavers hold it still: a new one
            meeting = shared.meetings[key] = _Meeting(shared.lock)
        if self.rank in meeting.arrived:
            raise CommError(f"combine({key!r}): rank {self.rank} arrived twice")
        meeting.tensors.update(tensors)
        meeting.arrived.add(self.rank)
        meeting.present += 1
        return meeting

    def _await(self, shared: _Shared, key: str, meeting: _Meeting, deadline: Deadline) -> object:
        """Wait (lock held) for the last arrival's result, or an abort, or the timeout."""

        def ready() -> bool:
            return meeting.done or shared.aborted(key) is not None

        try:
            came = meeting.cond.wait_for(ready, deadline.remaining())
        finally:
            shared.leave(key, meeting)
        if meeting.done:
            return meeting.result
        if not came:
            missing = missing_ranks(self.world_size, meeting.arrived)
            detail = (
                f"participants {missing} never came"
                if missing
                else "the last to arrive did not finish computing the results"
            )
            error = timeout_error(self, "combine", deadline.seconds, detail)
            raise MeetingTimeoutError(str(error), missing)
        raise peer_failed_error(self, "combine", key, shared.aborted(key) or "aborted")

    def _forget_exchange(self, published: Sequence[str]) -> None:
        """Forget ``published``, finished by every consumer (or aborted): no barrier."""
        shared = self._state()
        with shared.lock:
            for key in published:
                shared.slots.pop(key, None)

    def abort(self, scope: str, message: str) -> bool:
        check_scope(scope)
        shared = self._state()
        with shared.lock:
            if shared.aborts.add(scope, message):
                shared.wake_all()
        return True

    def aborted(self, scope: str) -> str | None:
        shared = self._state()
        with shared.lock:
            return shared.aborts.get(scope)

    def discard(self) -> None:
        shared = self._state()
        with shared.lock:
            for key, slot in list(shared.slots.items()):
                if slot.producer == self.rank:
                    del shared.slots[key]
                else:
                    shared.drop_unset(key, slot)
            for key, meeting in list(shared.meetings.items()):
                if self.rank in meeting.arrived:
                    del shared.meetings[key]

    def barrier(self) -> None:
        shared, deadline = self._state(), Deadline()
        with shared.lock:
            if self.rank in shared.arrived:
                raise CommError(f"barrier(): rank {self.rank} entered the barrier twice")
            generation = shared.generation
            shared.arrived.add(self.rank)
            if len(shared.arrived) == self.world_size:
                shared.arrived.clear()
                shared.generation += 1
                shared.barrier_cond.notify_all()
                return
            if not shared.barrier_cond.wait_for(
                lambda: shared.generation != generation, deadline.remaining()
            ):
                missing = missing_ranks(self.world_size, shared.arrived)
                shared.arrived.discard(self.rank)
                detail = f"ranks {missing} never arrived"
                raise timeout_error(self, "barrier", deadline.seconds, detail)

    def _clear_round(self) -> None:
        shared = self._state()
        with shared.lock:
            shared.slots.clear()
            shared.meetings.clear()

    def close(self) -> None:
        shared, self._shared = self._shared, None
        if shared is not None:
            with shared.lock:
                shared.open_ranks.discard(self.rank)


def _disagreement(store: MemoryTensorStore, call: str, key: str) -> CommError:
    """The refusal of a participant that finds the other kind of exchange under ``key``'s
    (a meeting where it reads a handshake's key, or the other way round)."""
    return CommError(
        f"{call}({key!r}) on store {store.store_key!r} (rank {store.rank} of "
        f"{store.world_size}): another participant took this exchange as a "
        f"{'handshake' if call == 'combine' else 'combine'}: the participants' tensors differ "
        "in size or dtype, so they chose differently"
    )
