"""MainNode: DTorch's cluster API on the controller, on a c10d TCPStore.

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

One cluster per process (like torch.distributed's default group): the node is class state
that ``close()`` ends; a closed node can be set again.

Example (workers elsewhere; see tests/cluster for a runnable two-host setup):
    >>> MainNode.set_address("127.0.0.1:0", token=bytes(32))    # doctest: +SKIP
    >>> MainNode.wait_cluster_ready(timeout=60)                 # doctest: +SKIP
    >>> MainNode.num_node_in_cluster()                          # doctest: +SKIP
    2
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any

from dtorch.cluster.pool import ClusterPool
from dtorch.cluster.records import (
    ProgramRecord,
    StartRecord,
    WorkerRecord,
    program_secret,
    record_key,
)
from dtorch.cluster.rendezvous import (
    MIN_TOKEN_BYTES,
    PROGRAM_KEY,
    START_KEY,
    SignedStore,
    parse_address,
    serve_store,
    worker_key,
)
from dtorch.comm.namespace import CommNamespace
from dtorch.errors import RendezvousError
from dtorch.options import GlobalOption, Launch
from dtorch.runtime.process.protocol import READY
from dtorch.runtime.process.runner import ClusterDefault
from dtorch.transport import Publisher, Puller
from dtorch.transport.security import SECRET_BYTES, CurveKeys


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


class ClusterNode:
    """The controller's side of one cluster: the store, the sockets, the registered workers."""

    def __init__(self, host: str, port: int, token: bytes) -> None:
        self.token = token
        timeout = GlobalOption.get_zmq_timeout_second()
        self.server = serve_store(host, port, timeout_s=timeout)
        self.host = host
        self.store = SignedStore(self.server, record_key(token))
        nonce = secrets.token_hex(16)
        self.namespace = CommNamespace.create()
        secret = program_secret(token, nonce)
        self.keys = CurveKeys.from_secret(secret)
        # the workers' and the start records are signed with this program's own key: one of
        # an earlier program on the same token (the store is readable by all) is refused here
        self.records = SignedStore(self.server, record_key(secret))
        where = f"tcp://{host}:0"
        self.channels = (
            Publisher(where, keys=self.keys),
            Puller(where, keys=self.keys),
            Publisher(where, keys=self.keys),
            Puller(where, keys=self.keys),
        )
        addresses = [c.address for c in self.channels]
        program = ProgramRecord(nonce, self.namespace.instance_id, *addresses)
        self.store.put(PROGRAM_KEY, program)
        self.pool: ClusterPool | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.server.port}"

    def wait_ready(self, timeout_s: float) -> ClusterPool:
        """Every worker registered, subscribed, reported READY and beat once."""
        deadline = time.monotonic() + timeout_s
        records = self._registered(deadline)
        self.records.put(START_KEY, StartRecord(tuple(r.host for r in records)))
        publisher, puller = self.channels[0], self.channels[1]
        _wait_ready(puller, len(records), deadline)
        publisher.wait_subscribers(len(records), max(0.1, deadline - time.monotonic()))
        pool = ClusterPool(records, self.keys, self.channels)
        try:
            pool.wait_first_beats(max(0.1, deadline - time.monotonic()))
        except BaseException:
            pool.close()
            raise
        self.pool = pool
        return pool

    def _registered(self, deadline: float) -> tuple[WorkerRecord, ...]:
        first = self.records.wait(worker_key(0), WorkerRecord, _left(deadline, "rank 0"))
        records = [first]
        for rank in range(1, first.world_size):
            record = self.records.wait(worker_key(rank), WorkerRecord, _left(deadline, rank))
            records.append(record)
        for rank, record in enumerate(records):
            if record.rank != rank or record.world_size != first.world_size:
                raise RendezvousError(
                    f"worker records disagree: rank {rank} registered {record} while rank 0 "
                    f"says world_size={first.world_size}"
                )
        kinds = {r.device_type for r in records}
        if len(kinds) != 1:
            raise RendezvousError(f"the workers of one cluster run one device kind, got {kinds}")
        return tuple(records)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        else:
            for channel in self.channels:
                channel.close()
        self.server = None


def _left(deadline: float, waiting_for: Any) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise RendezvousError(f"the cluster was not ready in time (waiting for {waiting_for})")
    return left


def _wait_ready(puller: Puller, workers: int, deadline: float) -> None:
    ready: set[int] = set()
    while len(ready) < workers:
        envelope = puller.poll(min(0.5, max(0.0, deadline - time.monotonic())))
        if envelope is not None and envelope.kind == READY:
            ready.add(envelope.sender)
        elif time.monotonic() > deadline:
            missing = sorted(set(range(workers)) - ready)
            raise RendezvousError(f"workers {missing} registered but never connected")


class MainNode:
    """DTorch's cluster API on the controller (class methods; see the module docstring)."""

    _node: ClusterNode | None = None
    _lock = threading.Lock()

    @classmethod
    def set_address(
        cls, address: str, port: int | None = None, *, token: bytes | str | None = None
    ) -> None:
        """Serve the rendezvous store at ``address`` (``"HOST:PORT"``, or a host and ``port``)."""
        host, number = parse_address(address if port is None else f"{address}:{port}")
        with cls._lock:
            if cls._node is not None:
                raise RendezvousError(
                    f"MainNode already serves {cls._node.address}; MainNode.close() first"
                )
            cls._node = ClusterNode(host, number, cluster_token(token))

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
        """Wait until every worker of the cluster is registered and connected."""
        node = cls._current()
        if node.pool is None:
            ClusterDefault.pool = node.wait_ready(timeout)

    @classmethod
    def num_node_in_cluster(cls) -> int:
        """The number of hosts the cluster's workers run on."""
        return len(set(cls.worker_pool().hosts))

    @classmethod
    def worker_pool(cls) -> ClusterPool:
        """The pool of the cluster's workers (after ``wait_cluster_ready``)."""
        pool = cls._current().pool
        if pool is None:
            raise RendezvousError("the cluster is not ready: call MainNode.wait_cluster_ready()")
        return pool

    @classmethod
    def close(cls) -> None:
        """Stop the workers and the store (idempotent)."""
        with cls._lock:
            node, cls._node = cls._node, None
            ClusterDefault.pool = None
        if node is not None:
            node.close()
