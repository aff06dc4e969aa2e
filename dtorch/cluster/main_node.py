"""MainNode: DTorch's cluster API on the controller, around its rendezvous store.

``MainNode.set_address("HOST:PORT")`` serves the rendezvous store there (127.0.0.1 unless
another interface is named), makes this program's secret and publishes where the controller's
sockets listen. Workers started on any host (``torchrun ... -m dtorch.worker --main
HOST:PORT``, or ``python -m dtorch.worker`` by hand) join it and register.
``MainNode.wait_cluster_ready(timeout)`` waits until every rank of the workers' world
registered, connected and beat once; ``MainNode.num_node_in_cluster()`` counts their hosts;
``MainNode.worker_pool()`` is the pool process-mode graphs run on: once the cluster is ready,
``Graph(GraphOption(per_device_per_process=True))`` (or ``DTORCH_PER_DEVICE_PER_PROCESS=1``)
runs there unless the option names ``num_workers`` or another ``worker_pool``.

The cluster token authenticates everything: the controller and every worker must hold the
same one (``token=`` here, ``DTORCH_CLUSTER_TOKEN``, or the worker's ``--token-file``); without
one the controller makes one (``MainNode.token()`` gives it, hex, to pass to the workers).

A cluster refused before it starts (worker records that disagree) is refused for good: the
workers read the reason in an abort record and exit, and ``close()`` then ``set_address``
starts over; a wait that times out refuses nothing. Addresses are IPv4 (see ``rendezvous``).

One cluster per process (like torch.distributed's default group): the node is class state
that ``close()`` ends; a closed node can be set again.

Example (workers elsewhere; see tests/cluster for a runnable two-host setup):
    >>> MainNode.set_address("127.0.0.1:0", token=bytes(32))    # doctest: +SKIP
    >>> MainNode.wait_cluster_ready(timeout=60)                 # doctest: +SKIP
    >>> MainNode.num_node_in_cluster()                          # doctest: +SKIP
    2
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from dtorch.cluster.gated_client import GatedStoreClient
from dtorch.cluster.pool import ClusterPool
from dtorch.cluster.records import (
    AbortRecord,
    ProgramRecord,
    StartRecord,
    WorkerRecord,
    check_cpu_collectives,
    program_secret,
    record_key,
)
from dtorch.cluster.rendezvous import (
    ABORT_KEY,
    MIN_TOKEN_BYTES,
    PROGRAM_KEY,
    START_KEY,
    SignedStore,
    connect_store,
    parse_address,
    serve_store,
    store_address,
    worker_key,
)
from dtorch.comm.namespace import CommNamespace
from dtorch.comm.promise.base import resolve_timeout
from dtorch.errors import RendezvousError
from dtorch.options import GlobalOption, Launch
from dtorch.runtime.process.protocol import READY, unpack_u64
from dtorch.runtime.process.runner import ClusterDefault
from dtorch.transport import Publisher, Puller
from dtorch.transport.security import SECRET_BYTES, CurveKeys
from dtorch.transport.sockets import SMALL_MESSAGE


def cluster_token(token: bytes | str | None) -> bytes:
    """The token as bytes: given (bytes, or hex text), DTORCH_CLUSTER_TOKEN, or a fresh one.

    Example:
        >>> cluster_token("00" * 32) == bytes(32), len(cluster_token(None)) >= 32
        (True, True)
    """
    if token is None:
        token = Launch.from_environ().cluster_token
    if token is None:
        return secrets.token_bytes(SECRET_BYTES)
    if isinstance(token, str):
        try:
            token = bytes.fromhex(token.strip())
        except ValueError:
            raise RendezvousError("a cluster token in text is hex (e.g. 64 hex digits)") from None
    if not isinstance(token, bytes) or len(token) < MIN_TOKEN_BYTES:
        raise RendezvousError(
            f"a cluster token is at least {MIN_TOKEN_BYTES} bytes (32 recommended)"
        )
    return token


def _environ_cpu_collectives() -> str:
    """DTORCH_CLUSTER_CPU_COLLECTIVES, else "store"; a bad value is refused, naming it."""
    chosen = Launch.from_environ().cluster_cpu_collectives
    if chosen is None:
        return "store"
    try:
        return check_cpu_collectives(chosen)
    except RendezvousError as error:
        raise RendezvousError(f"DTORCH_CLUSTER_CPU_COLLECTIVES: {error}") from None


class ClusterNode:
    """The controller's side of one cluster: the store, the sockets, the registered workers.

    A ``wait_ready`` that finds worker records that disagree refuses the cluster: it writes
    an abort record with the reason, so the workers waiting for the start exit at once with
    it, and later calls raise it again (one that times out waiting for a rank to register
    refuses nothing: it may be called again). Once the start record is written, the pool's
    heartbeats watch the workers: a registered worker gone before it connected fails
    ``wait_ready`` within seconds, refuses the cluster (it cannot start twice) and stops the
    others; a timeout after the start refuses nothing either (the next call goes on with the
    started workers). ``close`` frees the store's port at once."""

    def __init__(self, host: str, port: int, token: bytes, cpu_collectives: str = "store") -> None:
        self.token = token
        self.host = host
        self.cpu_collectives = check_cpu_collectives(cpu_collectives)
        self.pool: ClusterPool | None = None
        self.refused: str | None = None  # the reason the cluster was refused
        self.started = False  # the start record is written
        self._starting: ClusterPool | None = None  # started, not yet ready
        self._ready: set[int] = set()  # the workers that reported READY
        self.server = serve_store(host, port, token)
        self.port: int = self.server.port
        self.client: GatedStoreClient | None = None
        try:
            self.client = connect_store(
                host, self.port, token, timeout_s=GlobalOption.get_zmq_timeout_second()
            )
            self.store = SignedStore(self.client, record_key(token))
            nonce = secrets.token_hex(16)
            secret = program_secret(token, nonce)
            # the workers' and the start records are signed with this program's own key: one
            # of an earlier program on the same token (a token holder may read them) is refused
            self.records = SignedStore(self.client, record_key(secret))
            self._publish(nonce, secret)
        except BaseException:
            self._release()  # a traceback kept by the caller must not keep the port
            raise

    def _publish(self, nonce: str, secret: bytes) -> None:
        """Open the controller's sockets and publish the program record."""
        self.namespace = CommNamespace.create()
        self.keys = CurveKeys.from_secret(secret)
        self.channels = _open_channels(f"tcp://{self.host}:0", self.keys)
        publisher, puller, beats_out, beats_in = (c.address for c in self.channels)
        # the record names this store: a copy put in another controller's store is refused
        where = store_address(self.host, self.port)
        program = ProgramRecord(
            nonce,
            where,
            self.namespace.instance_id,
            publisher,
            puller,
            beats_out,
            beats_in,
            cpu_collectives=self.cpu_collectives,
        )
        self.store.put(PROGRAM_KEY, program)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def wait_ready(self, timeout_s: float) -> ClusterPool:
        """Every worker registered, subscribed, reported READY and beat once."""
        if self.refused is not None:
            raise RendezvousError(f"this cluster was refused ({self.refused}); close it")
        if self.pool is not None:
            return self.pool
        deadline = time.monotonic() + timeout_s
        pool = self._starting or self._start(deadline)
        try:
            self._started(pool, deadline)
        except RendezvousError:
            if pool.broken is not None:  # a worker is gone: this cluster cannot start
                self._starting = None
                self.refused = f"a registered worker is gone: {pool.broken}"
                pool.close()  # STOP to the others
            raise  # a timeout refuses nothing: the next wait_ready goes on from here
        self.pool, self._starting = pool, None
        return pool

    def _start(self, deadline: float) -> ClusterPool:
        """Write the start record once every rank registered. The pool's heartbeats watch the
        workers from then on: one that died after it registered is named within seconds,
        not at the deadline."""
        records = self._registered(deadline)  # a timeout is no refusal: wait_ready again
        self.records.put(START_KEY, StartRecord(tuple(r.host for r in records)))
        self.started = True
        self._starting = ClusterPool(records, self.keys, self.channels)
        return self._starting

    def _started(self, pool: ClusterPool, deadline: float) -> None:
        """Every started worker reported READY (those seen by an earlier call count),
        subscribed and beat once."""
        publisher, puller = self.channels[0], self.channels[1]
        _wait_ready(puller, pool, deadline, self._ready)
        publisher.wait_subscribers(pool.workers, max(0.1, deadline - time.monotonic()))
        pool.wait_first_beats(max(0.1, deadline - time.monotonic()))

    def _abort(self, reason: str) -> None:
        """Refuse the cluster: the workers read ``reason`` in the abort record and exit."""
        self.refused = reason
        with contextlib.suppress(Exception):  # the workers then wait for their own timeout
            self.records.put(ABORT_KEY, AbortRecord(reason))

    def _registered(self, deadline: float) -> tuple[WorkerRecord, ...]:
        """Every worker's record, each checked against rank 0's as it comes (a disagreement
        is refused at once, not at the deadline of a rank that will never come)."""
        first = self._record_of(0, deadline)
        self._agreeing(first, 0, first)
        records = [first]
        for rank in range(1, first.world_size):
            record = self._record_of(rank, deadline)
            self._agreeing(record, rank, first)
            records.append(record)
        return tuple(records)

    def _record_of(self, rank: int, deadline: float) -> WorkerRecord:
        """Rank ``rank``'s registration; RendezvousError naming the rank at ``deadline``."""
        key = worker_key(rank)
        missing = (
            f"rank {rank} did not register in time: no worker joined as rank {rank} (no "
            f"record under {key!r} in the store at {self.address}); start it (--rank {rank}) "
            "or wait longer"
        )
        return self.records.wait(key, WorkerRecord, _left(deadline, f"rank {rank}"), missing)

    def _agreeing(self, record: WorkerRecord, rank: int, first: WorkerRecord) -> None:
        """``_check_record``; a disagreement refuses the cluster for good (the workers are
        told to exit), where a timeout leaves them waiting for a later ``wait_ready``."""
        try:
            _check_record(record, rank, first)
        except RendezvousError as error:
            self._abort(str(error))
            raise

    def close(self) -> None:
        """Stop the workers, close the sockets, free the store's port."""
        pool = self.pool or self._starting
        if pool is not None:
            pool.close()
        else:
            for channel in self.channels:
                channel.close()
            if not self.started and self.refused is None:
                self._abort("the controller closed the cluster before it started")
        self._release()

    def _release(self) -> None:
        """Close the store's client and server: its port closes now."""
        if self.client is not None:
            self.client.close()
        self.server.close()


def _open_channels(where: str, keys: CurveKeys) -> tuple[Publisher, Puller, Publisher, Puller]:
    """The controller's batches, reports and beats sockets (none left open on failure)."""
    opened: list[Publisher | Puller] = []
    makers: tuple[Callable[[], Publisher | Puller], ...] = (
        lambda: Publisher(where, keys=keys),
        lambda: Puller(where, keys=keys),  # reports: larger values come in 1 MiB pieces
        lambda: Publisher(where, keys=keys),
        lambda: Puller(where, keys=keys, max_message=SMALL_MESSAGE),  # beats: a few bytes
    )
    try:
        for make in makers:
            opened.append(make())
    except BaseException:
        for channel in opened:
            channel.close()
        raise
    publisher, puller, beats_out, beats_in = opened
    return publisher, puller, beats_out, beats_in  # type: ignore[return-value]


def _check_record(record: WorkerRecord, rank: int, first: WorkerRecord) -> None:
    """RendezvousError unless ``record`` (under ``rank``) agrees with rank 0's ``first``."""
    if record.rank != rank or record.world_size != first.world_size:
        raise RendezvousError(
            f"worker records disagree: rank {rank} registered {record} while rank 0 "
            f"says world_size={first.world_size}"
        )
    if record.device_type != first.device_type:
        raise RendezvousError(
            f"the workers of one cluster run one device kind: rank 0 runs "
            f"{first.device_type}, rank {rank} {record.device_type}"
        )


def _left(deadline: float, waiting_for: Any) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise RendezvousError(f"the cluster was not ready in time (waiting for {waiting_for})")
    return left


def _wait_ready(puller: Puller, pool: ClusterPool, deadline: float, ready: set[int]) -> None:
    """Every worker of ``pool`` reported READY (``ready``: those that did, updated), each
    from the pid it registered; RendezvousError as soon as the heartbeats found one gone."""
    records = pool.records
    while len(ready) < len(records):
        pool.check_starting()
        envelope = puller.poll(min(0.2, max(0.0, deadline - time.monotonic())))
        if envelope is not None and envelope.kind == READY:
            if len(envelope.parts) == 1 and len(envelope.parts[0]) == 8:  # READY: its pid
                _check_pid(records, envelope.sender, unpack_u64(envelope.parts[0]))
            ready.add(envelope.sender)
        elif time.monotonic() > deadline:
            missing = sorted(set(range(len(records))) - ready)
            raise RendezvousError(f"workers {missing} registered but never connected")


def _check_pid(records: tuple[WorkerRecord, ...], rank: int, pid: int) -> None:
    """RendezvousError if ``pid`` is not the process that registered ``rank``."""
    if 0 <= rank < len(records) and records[rank].pid != pid:
        raise RendezvousError(
            f"rank {rank} reported READY from pid {pid}, but pid {records[rank].pid} "
            f"registered it: two processes claim rank {rank}"
        )


class MainNode:
    """DTorch's cluster API on the controller (class methods; see the module docstring)."""

    _node: ClusterNode | None = None
    _lock = threading.Lock()

    @classmethod
    def set_address(
        cls,
        address: str,
        port: int | None = None,
        *,
        token: bytes | str | None = None,
        cpu_collectives: str | None = None,
    ) -> None:
        """Serve the rendezvous store at ``address`` (``"HOST:PORT"``, or a host and ``port``).

        ``cpu_collectives``: how the workers' CPU groups exchange tensors. ``"store"`` (the
        default) authenticates every peer: shared memory between the workers of one host, the
        network store (a password at the handshake, HMAC on every message) across hosts.
        ``"gloo"`` runs groups of one rank per worker on Gloo, whose listeners accept anyone
        who reaches the workers' ``--host`` interfaces: for private networks only (faster
        across hosts: see docs/multi_host.md). None takes DTORCH_CLUSTER_CPU_COLLECTIVES,
        else ``"store"``.
        """
        host, number = parse_address(address if port is None else f"{address}:{port}")
        # refused before a store is served
        chosen = _environ_cpu_collectives() if cpu_collectives is None else cpu_collectives
        check_cpu_collectives(chosen)
        with cls._lock:
            if cls._node is not None:
                raise RendezvousError(
                    f"MainNode already serves {cls._node.address}; MainNode.close() first"
                )
            cls._node = ClusterNode(host, number, cluster_token(token), chosen)

    @classmethod
    def _current(cls) -> ClusterNode:
        node = cls._node
        if node is None:
            raise RendezvousError("no cluster: call MainNode.set_address('HOST:PORT') first")
        return node

    @classmethod
    def address(cls) -> str:
        """``HOST:PORT`` the store listens on (the port chosen when 0 was asked)."""
        return cls._current().address

    @classmethod
    def token(cls) -> str:
        """The cluster token, hex: what every worker must be given."""
        return cls._current().token.hex()

    @classmethod
    def wait_cluster_ready(cls, timeout: float = 300.0) -> None:
        """Wait until every worker of the cluster is registered and connected (``timeout``: a
        number of seconds; ``inf`` waits as long as dtorch waits at all)."""
        seconds = resolve_timeout(timeout)  # nan and negatives refused; inf clamped
        node = cls._current()
        if node.pool is None:
            ClusterDefault.pool = node.wait_ready(seconds)

    @classmethod
    def num_node_in_cluster(cls) -> int:
        """The number of hosts the cluster's workers run on."""
        return len(set(cls.worker_pool().hosts))

    @classmethod
    def worker_pool(cls) -> ClusterPool:
        """The pool of the cluster's workers (after ``wait_cluster_ready``)."""
        node = cls._current()
        if node.refused is not None:
            raise RendezvousError(
                f"this cluster was refused ({node.refused}); MainNode.close() and set it up again"
            )
        if node.pool is None:
            raise RendezvousError("the cluster is not ready: call MainNode.wait_cluster_ready()")
        return node.pool

    @classmethod
    def close(cls) -> None:
        """Stop the workers and the store (idempotent)."""
        with cls._lock:
            node, cls._node = cls._node, None
            ClusterDefault.pool = None
        if node is not None:
            node.close()
