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
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Protocol, TypeVar

import torch

from dtorch.errors import CommError, CommTimeoutError, PeerDiedError
from dtorch.options import GlobalOption


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

    @abstractmethod
    def src_set(self, key: str, tensor: torch.Tensor, get_count: int) -> None:
        """Publish ``tensor`` under ``key`` for ``get_count`` consumers (once per round)."""

    @abstractmethod
    def src_wait_until_get_finished(self, key: str) -> None:
        """Block until every consumer of ``key`` called ``dest_finish_get``."""

    @abstractmethod
    def dest_get(self, key: str) -> torch.Tensor:
        """Block until ``key`` is set and return its tensor (valid until ``dest_finish_get``)."""

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

    def dest_get_and_to_device(self, key: str, device: torch.device) -> torch.Tensor:
        """``dest_get(key)`` moved to ``device`` (the same tensor when it is already there)."""
        return self.dest_get(key).to(device)

    def end_exchange(self, read: Sequence[str], published: Sequence[str]) -> None:
        """Close one exchange whose keys are never used again: ``dest_finish_get`` every key
        this participant read, wait until every key it ``published`` is finished, and leave
        the store ready for the next exchange. By default it ends with ``reset`` (two barriers);
        a store that can forget a finished key of its own instead (memory: ``_forget_exchange``;
        file: this method, in fewer transactions) needs no barrier, since unique keys cannot
        meet a later round's."""
        for key in read:
            self.dest_finish_get(key)
        for key in published:
            self.src_wait_until_get_finished(key)
        self._forget_exchange(published)

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
