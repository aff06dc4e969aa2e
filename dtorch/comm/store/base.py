"""TensorStore: the keyed producer/consumer tensor exchange of spec 002 section 3.

``world_size`` participants open one store under a store key (``open_store``); the opening is
a barrier. Each exchange is a four-step handshake::

    producer                                  each of N consumers (N = get_count)
    1. src_set(key, tensor, get_count=N)      3. t = dest_get(key)      blocks until set
    2. src_wait_until_get_finished(key)       4. dest_finish_get(key)   t must not be used after

The producer must not change ``tensor`` before step 2 returns; a consumer must not use what
``dest_get`` returned after its ``dest_finish_get`` (clone it to keep it: backends hand out
the producer's memory without copying where they can). A key is set once per round;
``reset()`` (barrier, clear, barrier) starts the next round. A caller whose every exchange
has keys of its own closes each with ``end_exchange(read, published)`` instead, which the
memory and file stores serve without a barrier. Every blocking call gives up after
``GlobalOption.get_comm_timeout_second()`` with a ``CommTimeoutError`` that names the store, the
key and the peers that never came; where the backend can see its peers' processes (file), a
call waiting on a store with a dead participant fails sooner, with a ``PeerDiedError``.

A participant that fails in the middle of an exchange tells the others through the store
itself: ``abort(scope, message)`` marks every key of ``scope`` (a key's scope is its text before
the first ``/``, see ``scope_of``) failed, and every wait on such a key - a consumer's
``dest_get`` of a key never set, a producer waiting for consumers that will never finish -
raises ``PeerFailedError`` with the message at once instead of waiting out the timeout.
``end_exchange`` then drops the participant's keys of the scope, so an aborted exchange leaves
nothing behind and the next one starts clean. Every backend here carries aborts (the network
store through its coordinator); a backend that could not would return False from ``abort``,
and its peers would see the failure at the timeout.

Example:
    >>> import threading, torch
    >>> from dtorch.comm.store import StoreKind, open_store
    >>> out = {}
    >>> def consumer():
    ...     with open_store(StoreKind.MEMORY, "doc", 2, 1) as store:
    ...         out["t"] = store.dest_get("x").clone()
    ...         store.dest_finish_get("x")
    >>> thread = threading.Thread(target=consumer); thread.start()
    >>> with open_store(StoreKind.MEMORY, "doc", 2, 0) as store:
    ...     store.src_set("x", torch.arange(3), get_count=1)
    ...     store.src_wait_until_get_finished("x")
    >>> thread.join(); out["t"].tolist()
    [0, 1, 2]
"""

from __future__ import annotations

import enum
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Protocol, TypeVar

import torch

from dtorch.errors import CommError, CommTimeoutError, PeerDiedError
from dtorch.options import GlobalOption

#: Aborted scopes a store remembers (the oldest go first): a scope's abort is needed only
#: until every participant has passed that exchange, and a healthy program aborts none.
ABORTS_KEPT = 16
#: The longest abort message a store keeps (the runtime's failure board holds the full record).
ABORT_MESSAGE_LIMIT = 400


class PeerFailedError(CommError):
    """Another participant failed in this exchange (or in the operator it belongs to) and told
    the others through the store: raised at once in place of the data or the consumers' finish
    that will never come, not at the comm timeout. ``reason`` is the failing participant's
    account of its error."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.reason))


class KeysTimeoutError(CommTimeoutError):
    """``dest_get_many`` timed out; ``keys`` are the ones never set (so a caller can name the
    peers that never came)."""

    def __init__(self, message: str, keys: Sequence[str]) -> None:
        super().__init__(message)
        self.keys = tuple(keys)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.keys))


class MeetingTimeoutError(CommTimeoutError):
    """``combine`` timed out; ``missing`` are the participants that never came."""

    def __init__(self, message: str, missing: Sequence[int]) -> None:
        super().__init__(message)
        self.missing = tuple(missing)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.missing))


def scope_of(key: str) -> str:
    """The scope of ``key``: its text before the first ``/`` ("" for a key without one, which
    no abort reaches).

    Example:
        >>> scope_of("op7.0/all_gather#1/rank0"), scope_of("plain")
        ('op7.0', '')
    """
    scope, slash, _ = key.partition("/")
    return scope if slash else ""


def cut_message(message: str) -> str:
    """``message`` shortened to what a store keeps of an abort."""
    if len(message) <= ABORT_MESSAGE_LIMIT:
        return message or "failed"
    return message[: ABORT_MESSAGE_LIMIT - 6] + " [...]"


class AbortLog:
    """The aborted scopes a store keeps in one process (the memory store's shared state, the
    network store's coordinator): each scope's first message, cut, the last ABORTS_KEPT
    scopes only. Not thread-safe: its owner serialises the calls.

    Example:
        >>> log = AbortLog()
        >>> log.add("op7.0", "rank 1 failed"), log.add("op7.0", "again")
        (True, False)
        >>> log.get("op7.0"), log.of_key("op7.0/all_gather#1/rank0"), log.of_key("plain")
        ('rank 1 failed', 'rank 1 failed', None)
    """

    __slots__ = ("_messages",)

    def __init__(self) -> None:
        self._messages: OrderedDict[str, str] = OrderedDict()  # scope -> message, oldest first

    def add(self, scope: str, message: str) -> bool:
        """Record ``scope``'s abort; False if it was aborted already (the first message stays)."""
        if scope in self._messages:
            return False
        self._messages[scope] = cut_message(message)
        while len(self._messages) > ABORTS_KEPT:
            self._messages.popitem(last=False)
        return True

    def get(self, scope: str) -> str | None:
        """The message ``scope`` was aborted with, if it was (and is still kept)."""
        return self._messages.get(scope)

    def of_key(self, key: str) -> str | None:
        """The abort message of ``key``'s scope, if it was aborted."""
        if not self._messages:  # the usual case: nothing aborted, no key to split
            return None
        scope = scope_of(key)
        return self._messages.get(scope) if scope else None


class StoreKind(enum.Enum):
    """The three backends: threads of one process, processes of one machine, machines."""

    MEMORY = "memory"
    FILE = "file"
    NETWORK = "network"


class TensorStore(ABC):
    """One participant (``rank`` of ``world_size``) of the store named ``store_key``."""

    store_key: str
    world_size: int
    rank: int
    #: Whether ``abort`` reaches the other participants (memory, file and network stores do).
    carries_aborts = False
    #: Whether a read moves the value's bytes to the reader (the network store: over TCP,
    #: hashed at both ends), so that a reader should get only the part it uses; the memory
    #: and file stores hand out the producer's tensor or shared memory.
    reads_move_bytes = False

    @abstractmethod
    def src_set(self, key: str, tensor: torch.Tensor, get_count: int) -> None:
        """Publish ``tensor`` under ``key`` for ``get_count`` consumers (once per round)."""

    @abstractmethod
    def src_wait_until_get_finished(self, key: str) -> None:
        """Block until every consumer of ``key`` called ``dest_finish_get``."""

    @abstractmethod
    def dest_get(self, key: str) -> torch.Tensor:
        """Block until ``key`` is set and return its tensor (valid until ``dest_finish_get``)."""

    def dest_get_many(self, keys: Sequence[str]) -> list[torch.Tensor]:
        """``dest_get`` of every key, in order (``KeysTimeoutError`` names a key never set).
        A store with a shared state overrides it to look at every key at once.

        Example:
            >>> from dtorch.comm.store import StoreKind, open_store
            >>> with open_store(StoreKind.MEMORY, "many-doc", 1, 0) as store:
            ...     store.src_set("a", torch.zeros(1), 1); store.src_set("b", torch.ones(1), 1)
            ...     [t.item() for t in store.dest_get_many(["a", "b"])]
            [0.0, 1.0]
        """
        got = []
        for key in keys:
            try:
                got.append(self.dest_get(key))
            except CommTimeoutError as error:
                raise KeysTimeoutError(str(error), (key,)) from None
        return got

    @abstractmethod
    def dest_finish_get(self, key: str) -> None:
        """Tell the producer of ``key`` that this consumer is done with it."""

    @abstractmethod
    def barrier(self) -> None:
        """Block until all ``world_size`` participants called ``barrier``."""

    @abstractmethod
    def close(self) -> None:
        """Release this participant's resources; idempotent. The others are not waited for."""

    @abstractmethod
    def _clear_round(self) -> None:
        """Forget this round's keys; called by ``reset`` while every participant is inside it."""

    def abort(self, scope: str, message: str) -> bool:
        """Tell every participant that ``scope`` failed (``message``: why): their waits on its
        keys raise ``PeerFailedError`` from now on; the first message of a scope stays. False
        where the backend cannot carry aborts (the default, which every backend here
        overrides)."""
        return False

    def aborted(self, scope: str) -> str | None:
        """The message ``scope`` was aborted with, if it was."""
        return None

    def give_up(self) -> None:  # noqa: B027  (nothing to do where aborts reach every wait)
        """Every wait of this participant, in flight or to come, ends now: its group was
        abandoned. A store whose aborts go through a peer that may be gone (the network
        store's coordinator) stops waiting for it here; the others need nothing."""

    def discard(self) -> None:
        """Forget every key this participant produced and still holds (after a broken
        exchange, once every participant is idle: a repaired group starts clean)."""
        self._clear_round()

    def dest_get_and_to_device(self, key: str, device: torch.device) -> torch.Tensor:
        """``dest_get(key)`` moved to ``device`` (the same tensor when it is already there)."""
        return self.dest_get(key).to(device)

    def end_exchange(self, read: Sequence[str], published: Sequence[str]) -> None:
        """Close one exchange whose keys are never used again: ``dest_finish_get`` every key
        this participant read, wait until every key it ``published`` is finished, and leave
        the store ready for the next exchange. By default it ends with ``reset`` (two barriers);
        a store that can forget a finished key of its own instead (memory and network:
        ``_forget_exchange``; file: this method, in fewer transactions) needs no barrier, since
        unique keys cannot meet a later round's. If the exchange's scope was aborted, the keys
        are dropped all the same (a producer stops waiting for consumers that failed) and
        ``PeerFailedError`` is raised after."""
        for key in read:
            self.dest_finish_get(key)  # a key its aborted producer dropped already is skipped
        failed: PeerFailedError | None = None
        for key in published:
            try:
                self.src_wait_until_get_finished(key)
            except PeerFailedError as error:  # its consumers failed: drop it all the same
                failed = failed or error
        self._forget_exchange(published)
        raise_if_aborted(self, "end_exchange", (*read, *published), failed)

    def release_exchange(self, read: Sequence[str], published: Sequence[str]) -> None:
        """``end_exchange``, except that a store may return before the consumers of
        ``published`` have finished and drop those keys later (the file store: in its next
        transactions, or ``flush``); the default waits, as ``end_exchange`` does. Either way
        the keys are never used again, and a store drops each only once its consumers have
        finished or its scope was aborted."""
        self.end_exchange(read, published)

    def flush(self, seconds: float | None = None) -> None:  # noqa: B027  (a no-op by default)
        """Wait until every key this participant released with ``release_exchange`` is
        finished and dropped (nothing to do where ``release_exchange`` waits)."""

    def _forget_exchange(self, published: Sequence[str]) -> None:
        """After ``end_exchange`` waited for them: drop this participant's ``published`` keys
        (the default: ``reset``, with every participant)."""
        self.reset()

    def reset(self) -> None:
        """Barrier, forget every key of this round, barrier: all participants must call it."""
        self.barrier()
        self._clear_round()
        self.barrier()

    def __enter__(self) -> TensorStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(store_key={self.store_key!r}, rank={self.rank}, "
            f"world_size={self.world_size})"
        )


class Deadline:
    """The moment a blocking call gives up, from the comm timeout in force when it started."""

    __slots__ = ("at", "seconds")

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = GlobalOption.get_comm_timeout_second() if seconds is None else seconds
        self.at = time.monotonic() + self.seconds

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.at


def peer_failed_error(store: TensorStore, call: str, key: str, message: str) -> PeerFailedError:
    """The PeerFailedError of a call on ``key`` whose scope another participant aborted."""
    return PeerFailedError(
        f"{call}({key!r}) on store {store.store_key!r} (rank {store.rank} of "
        f"{store.world_size}): scope {scope_of(key)!r} was aborted: {message}",
        message,
    )


def raise_if_aborted(
    store: TensorStore, call: str, keys: Iterable[str], failed: PeerFailedError | None = None
) -> None:
    """Raise ``failed``, or the PeerFailedError of the first of ``keys`` whose scope was
    aborted; return if neither."""
    if failed is not None:
        raise failed
    for scope in dict.fromkeys(scope_of(key) for key in keys):
        message = store.aborted(scope) if scope else None
        if message is not None:
            raise peer_failed_error(store, call, f"{scope}/", message)


def check_participant(store_key: str, world_size: int, rank: int) -> None:
    """Reject a store key, world size or rank that cannot name a participant."""
    if not isinstance(store_key, str) or not store_key:
        raise CommError(f"store_key must be a non-empty str, got {store_key!r}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise CommError(f"world_size must be an int >= 1, got {world_size!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise CommError(f"rank must be an int in [0, {world_size}), got {rank!r}")


def check_set(key: str, tensor: torch.Tensor, get_count: int, world_size: int) -> None:
    """Reject src_set arguments that no consumer could satisfy."""
    check_key(key)
    if not isinstance(tensor, torch.Tensor):
        raise CommError(f"src_set({key!r}) needs a torch.Tensor, got {type(tensor).__name__}")
    if isinstance(get_count, bool) or not isinstance(get_count, int):
        raise CommError(f"src_set({key!r}): get_count must be an int, got {get_count!r}")
    if not 1 <= get_count <= world_size:
        raise CommError(
            f"src_set({key!r}): get_count must be in [1, world_size={world_size}], got {get_count}"
        )


def check_scope(scope: str) -> None:
    """Scopes are non-empty strings without ``/`` (the text before a key's first ``/``)."""
    if not isinstance(scope, str) or not scope or "/" in scope:
        raise CommError(f"a scope must be a non-empty str without '/', got {scope!r}")


def check_key(key: str) -> None:
    """Keys are non-empty strings."""
    if not isinstance(key, str) or not key:
        raise CommError(f"a store key must be a non-empty str, got {key!r}")


def timeout_error(store: TensorStore, call: str, seconds: float, detail: str) -> CommTimeoutError:
    """The CommTimeoutError of one blocking call, naming the store, the call and who is missing."""
    return CommTimeoutError(
        f"{call} timed out after {seconds:g}s on store {store.store_key!r} "
        f"(rank {store.rank} of {store.world_size}): {detail} "
        "(DTORCH_COMM_TIMEOUT_SECOND sets the limit)"
    )


def peer_died_error(
    store: TensorStore, call: str, dead: list[tuple[int, int]], detail: str
) -> PeerDiedError:
    """The PeerDiedError of one blocking call: the store, the call, the dead ``(rank, pid)``
    participants and what the call was waiting for."""
    who = ", ".join(f"rank {rank} (pid {pid})" for rank, pid in dead)
    return PeerDiedError(
        f"{call} failed on store {store.store_key!r} (rank {store.rank} of {store.world_size}): "
        f"participant {who} died; still missing: {detail}",
        tuple(dead),
    )


def missing_ranks(world_size: int, arrived: Iterable[int]) -> list[int]:
    """The ranks of ``range(world_size)`` that are not in ``arrived``."""
    seen = set(arrived)
    return [rank for rank in range(world_size) if rank not in seen]


S = TypeVar("S", bound=TensorStore)


def finish_open(store: S, join: Callable[[], None] | None = None) -> S:
    """``store`` after ``join()`` (if any) and the construction barrier; closed if either fails.

    Every backend's ``open`` ends here, so a participant that could not open leaves nothing.
    """
    try:
        if join is not None:
            join()
        store.barrier()
    except BaseException:
        store.close()
        raise
    return store


class Consumers(Protocol):
    """The consumer bookkeeping of one key, as every backend keeps it."""

    @property
    def target(self) -> int:
        """How many consumers the producer expects (``get_count``)."""

    @property
    def finished_by(self) -> list[int]:
        """The ranks that called ``dest_finish_get``, in order."""


C = TypeVar("C", bound=Consumers)


def count_finish(key: str, slot: C | None, rank: int) -> C:
    """Record that consumer ``rank`` is done with ``key`` (``slot`` None: the key is not set)."""
    if slot is None:
        raise CommError(f"dest_finish_get({key!r}) before the key was set")
    if all_finished(slot):
        raise CommError(
            f"dest_finish_get({key!r}): all {slot.target} expected consumers already "
            "finished (each consumer calls it once)"
        )
    slot.finished_by.append(rank)
    return slot


def all_finished(slot: Consumers) -> bool:
    """True once every expected consumer of the key called ``dest_finish_get``."""
    return len(slot.finished_by) >= slot.target


def finish_detail(key: str, slot: Consumers) -> str:
    """Why ``src_wait_until_get_finished`` timed out: who finished, how many never did."""
    done = len(slot.finished_by)
    return (
        f"key {key!r}: {done} of {slot.target} consumers finished (ranks "
        f"{sorted(slot.finished_by)}); the other {slot.target - done} never called "
        "dest_finish_get"
    )
