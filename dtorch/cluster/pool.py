"""ClusterPool: the workers of a cluster, leased to one graph at a time like a WorkerPool.

A ``WorkerPool`` starts its workers on this machine; a ``ClusterPool`` finds them started
already (by torchrun or by hand, ``python -m dtorch.worker``) and joined through the
rendezvous store (``dtorch.cluster.main_node``). To the process runner both are the same:
a publisher every worker subscribes to, a puller every worker reports to, ``lease`` /
``give_back`` around each graph, ``broken`` once a worker is lost. Its sockets are TCP with
CURVE (``dtorch.transport.security``).

Worker ``i`` (its rank) hosts the devices ``d`` with ``d % workers == i``; on CUDA, rank
``i`` is device ``cuda:i`` of the cluster (its own GPU, ``LOCAL_RANK`` on its host). So the
global device list is ordered by rank: torchrun's ranks put a host's workers together, in
host order (``--node-rank``).

Liveness: heartbeats both ways (``dtorch.cluster.liveness``); a worker silent for 5 s breaks
the pool: the leasing graph's pending futures fail with ``WorkerDiedError`` naming the worker,
its host and its devices, and the other workers are told to stop.

Example:
    >>> from dtorch.cluster import MainNode                     # doctest: +SKIP
    >>> pool = MainNode.worker_pool()                           # doctest: +SKIP
    >>> pool.workers, pool.hosts                                # doctest: +SKIP
    (4, ('127.0.0.2', '127.0.0.2', '127.0.0.3', '127.0.0.3'))
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass

from dtorch.cluster.liveness import BEAT_SECONDS, LOST_AFTER_SECONDS, BeatMonitor
from dtorch.cluster.records import WorkerRecord
from dtorch.errors import GraphError, RendezvousError, WorkerDiedError
from dtorch.runtime.host import PartyLayout
from dtorch.runtime.process.pool import STOP_GRACE_SECONDS  # the grace of one host's pool
from dtorch.runtime.process.protocol import STOP
from dtorch.transport import Publisher, Puller, Pusher
from dtorch.transport.security import CurveKeys

DeathCallback = Callable[[WorkerDiedError, int], None]


@dataclass(frozen=True, slots=True)
class ClusterLayout:
    """Which worker hosts which devices, and on which host."""

    records: tuple[WorkerRecord, ...]

    @property
    def parties(self) -> int:
        return len(self.records)

    def party_of(self, device: int) -> int:
        return device % self.parties

    def describe(self, party: int) -> str:
        """Worker ``party``'s devices and host, in words."""
        record = self.records[party]
        devices = PartyLayout(self.parties).describe(party)
        return f"{devices} on host {record.host} (pid {record.pid})"


class ClusterState:
    """The sockets a process runner uses (the same names as a WorkerPool's state)."""

    def __init__(self, keys: CurveKeys, publisher: Publisher, puller: Puller, workers: int):
        self.publisher = publisher
        self.puller = puller
        self.own_pusher = Pusher(puller.address, workers, keys=keys)  # the controller's sender


class ClusterPool:
    """The workers of a cluster (see the module docstring); made by ``MainNode``."""

    _sessions = itertools.count(1)

    def __init__(
        self,
        records: tuple[WorkerRecord, ...],
        keys: CurveKeys,
        channels: tuple[Publisher, Puller, Publisher, Puller],
    ) -> None:
        publisher, puller, beats_out, beats_in = channels
        self._layout = ClusterLayout(records)
        self._state = ClusterState(keys, publisher, puller, len(records))
        self._beats = (beats_out, beats_in)
        self._lock = threading.Lock()
        self._failure: WorkerDiedError | None = None
        self._on_death: DeathCallback | None = None
        self._leased = False
        self._closed = False
        self._why = ""  # why the pool was closed, where not by its owner (see close)
        self._monitor = BeatMonitor(
            beats_out,
            beats_in,
            len(records),
            self._lost,
            pids=tuple(r.pid for r in records),
            on_replaced=self._replaced,
        )

    def wait_first_beats(self, timeout_s: float) -> None:
        """Every worker beat once: RendezvousError naming the silent ones after ``timeout_s``,
        or as soon as one is lost (``check_starting``)."""
        self._monitor.wait_first_beats(timeout_s, self.check_starting)

    def check_starting(self) -> None:
        """RendezvousError if a worker was lost while the cluster started."""
        if self._failure is not None:
            raise RendezvousError(f"a registered worker is gone: {self._failure}")

    @property
    def records(self) -> tuple[WorkerRecord, ...]:
        """Every worker's registration, by rank."""
        return self._layout.records

    @property
    def workers(self) -> int:
        return self._layout.parties

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every worker's host, by rank."""
        return tuple(r.host for r in self._layout.records)

    @property
    def device_type(self) -> str:
        return self._layout.records[0].device_type

    @property
    def shares_memory(self) -> bool:
        """False: workers on other hosts get large values inside the messages."""
        return False

    @property
    def pids(self) -> list[int]:
        """Each worker's process id, on its own host."""
        return [r.pid for r in self._layout.records]

    @property
    def death_verdict_s(self) -> float:
        """How long after a worker's death its heartbeats' silence breaks the pool, at most."""
        return LOST_AFTER_SECONDS + BEAT_SECONDS

    @property
    def layout(self) -> ClusterLayout:
        return self._layout

    @property
    def broken(self) -> WorkerDiedError | None:
        return self._failure

    def reap(self) -> WorkerDiedError | None:
        """``broken``: remote workers are seen only through their heartbeats."""
        return self._failure

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def leased(self) -> bool:
        return self._leased

    @property
    def state(self) -> ClusterState:
        return self._state

    def _lost(self, worker: int, silent: float) -> None:
        """The monitor heard nothing from ``worker`` for ``silent`` seconds."""
        self._break(
            worker,
            f"worker {worker} ({self._layout.describe(worker)}) sent no heartbeat for "
            f"{silent:.1f} s: its process or its host is gone",
        )

    def _replaced(self, worker: int, pid: int) -> None:
        """A process other than ``worker``'s registered one beat as ``worker``."""
        self._break(
            worker,
            f"worker {worker} ({self._layout.describe(worker)}) is gone: another process "
            f"(pid {pid}) beats as rank {worker}, e.g. a restarted worker",
        )

    def _break(self, worker: int, message: str) -> None:
        """The pool serves no more: fail the leasing graph, stop the other workers."""
        with self._lock:
            if self._closed or self._failure is not None:
                return
            self._failure = WorkerDiedError(message)
            callback = self._on_death
        if callback is not None:
            callback(self._failure, worker)
        with contextlib.suppress(Exception):
            self._state.publisher.send(STOP)  # the others go too: the pool serves no more

    def waiting_on(self, parties: Collection[int]) -> str:
        """The workers of ``parties`` in words (index, devices, host, pid), for the message
        of a wait that timed out; a remote worker's process state is not known here (one
        that stops also stops its heartbeats, and is lost after 5 s)."""
        named = [f"worker {p} ({self._layout.describe(p)})" for p in sorted(set(parties))]
        return f"waiting for {'; '.join(named)}" if named else ""

    def lease(self, on_death: DeathCallback) -> int:
        """Take the pool for one graph; the session id (see ``WorkerPool.lease``)."""
        with self._lock:
            if self._failure is not None:  # closed once broken: the cause says more
                raise GraphError(
                    f"this cluster is broken ({self._failure}); form a new one (MainNode) to "
                    "run graphs again"
                )
            if self._closed:
                raise GraphError(
                    f"this cluster's pool is closed{self._why}; form a new cluster (MainNode)"
                )
            if self._leased:
                raise GraphError("the cluster serves another graph; close that graph first")
            self._leased = True
            self._on_death = on_death
        return next(ClusterPool._sessions)

    def give_back(self) -> None:
        with self._lock:
            self._leased = False
            self._on_death = None

    def close(self, grace: float = STOP_GRACE_SECONDS, why: str = "") -> None:
        """STOP every worker and close the sockets (idempotent); the workers exit (waited for
        at most ``grace`` seconds). ``why``: the reason a later lease is told."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._why = f" ({why})" if why else ""
        with contextlib.suppress(Exception):
            self._state.publisher.send(STOP)
        if self._failure is None:  # STOP is delivered before the publisher goes (LINGER 0)
            self._monitor.wait_gone(grace)
        self._monitor.stop()
        for channel in (self._state.own_pusher, self._state.puller, *self._beats):
            with contextlib.suppress(Exception):
                channel.close()
        self._state.publisher.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "broken" if self._failure else "ready"
        return f"ClusterPool(workers={self.workers}, hosts={sorted(set(self.hosts))}, {state})"
