"""The rendezvous store: a c10d store that the controller serves and every worker joins.

The store (``gated_store``; its client ``gated_client`` is a ``torch.distributed.Store``,
used as torchrun users use a ``TCPStore``) listens only where it is told (the host of the
controller's address, 127.0.0.1 unless the user names another interface) and answers only
holders of the cluster token, checked at the ZeroMQ handshake. Every record is signed as well
(``dtorch.cluster.records``: the gate's password travels in the clear, see ``gated_store``):
``SignedStore`` writes and reads records, and waits for one with a timeout.

Key names: ``dtorch/program`` (the controller's ``ProgramRecord``), ``dtorch/claim/<rank>``
(a counter: the first worker to add 1 holds the rank, any later one is refused),
``dtorch/worker/<rank>`` (each worker's ``WorkerRecord``), ``dtorch/start`` (the controller's
``StartRecord``) or ``dtorch/abort`` (its ``AbortRecord``: the cluster was refused, and why).
The collective groups and the failure board use their own prefixes of the same store.

Addresses are IPv4 (or host names that resolve to IPv4): Gloo refuses to pair ranks of
different address families, so IPv6 is refused where an address is first given.

Example:
    >>> from dtorch.cluster.records import WorkerRecord, record_key
    >>> server = serve_store("127.0.0.1", 0, bytes(32))
    >>> client = connect_store("127.0.0.1", server.port, bytes(32), timeout_s=5.0)
    >>> signed = SignedStore(client, record_key(bytes(32)))
    >>> signed.put("dtorch/worker/0", WorkerRecord(0, 1, "127.0.0.1", 1, "cpu", 0))
    >>> signed.wait("dtorch/worker/0", WorkerRecord, 5.0).rank
    0
    >>> client.close(); server.close()
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from dtorch.cluster.gated_client import GatedStoreClient
from dtorch.cluster.gated_store import StoreServer
from dtorch.cluster.records import AbortRecord, R, StartRecord, read_record, sign
from dtorch.errors import RendezvousError

PROGRAM_KEY = "dtorch/program"
START_KEY = "dtorch/start"
ABORT_KEY = "dtorch/abort"
#: How often a worker waiting for the start record looks for an abort record.
ABORT_POLL_SECONDS = 0.5
#: How often a worker still waiting for the controller's store says so.
WAIT_NOTICE_SECONDS = 10.0
#: The shortest cluster token accepted, by the controller and by every worker.
MIN_TOKEN_BYTES = 16
#: Where the collective groups rendezvous, and where the failure board posts.
GROUPS_PREFIX = "dtorch/groups/"
BOARD_PREFIX = "dtorch/board/"


_LOG = logging.getLogger(__name__)


def worker_key(rank: int) -> str:
    return f"dtorch/worker/{rank}"


def claim_key(rank: int) -> str:
    return f"dtorch/claim/{rank}"


def check_ipv4_host(host: str, what: str) -> str:
    """``host`` if it is not an IPv6 address nor the wildcard 0.0.0.0; RendezvousError saying
    what is accepted otherwise.

    Example:
        >>> check_ipv4_host("::1", "--host")
        Traceback (most recent call last):
        ...
        dtorch.errors.RendezvousError: --host is '::1', an IPv6 address: ...
    """
    if ":" in host:
        raise RendezvousError(
            f"{what} is {host!r}, an IPv6 address: clusters run on IPv4 only (Gloo cannot "
            "pair ranks of different address families); give an IPv4 address, e.g. 127.0.0.1"
        )
    if _every_interface(host):
        raise RendezvousError(
            f"{what} is {host!r}, every interface: a cluster node publishes the address it "
            "binds for the others to reach, and signs it; give this host's own address "
            "(127.0.0.1 on one machine, its network address across machines)"
        )
    return host


def _every_interface(host: str) -> bool:
    """Whether ``host`` names the wildcard address in any spelling (``0.0.0.0``, ``0``,
    ``0.0``, ZeroMQ's ``*``), which would bind every interface."""
    address = host.split("%", 1)[0].strip()  # ZeroMQ binds the address before a %scope
    if address == "*":
        return True
    try:
        return socket.inet_aton(address) == bytes(4)
    except OSError:  # a host name, or not an address
        return False


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``PORT``: on 127.0.0.1) as (host, port); RendezvousError otherwise.

    Example:
        >>> parse_address("127.0.0.2:29500"), parse_address("29500")
        (('127.0.0.2', 29500), ('127.0.0.1', 29500))
    """
    text = address.strip() if isinstance(address, str) else ""
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise RendezvousError(
            f"a rendezvous address is 'HOST:PORT' (e.g. '127.0.0.1:29500'), got {address!r}"
        )
    host = check_ipv4_host(host.strip("[]"), f"the host of {address!r}")
    return host or "127.0.0.1", int(port)


def store_address(host: str, port: int) -> str:
    """``HOST:PORT`` of the store, the host as an IPv4 address: what the controller signs
    into its program record and a worker compares with its ``--main`` (RendezvousError if
    ``host`` does not resolve)."""
    try:
        return f"{socket.gethostbyname(host)}:{port}"
    except (OSError, UnicodeError) as error:  # UnicodeError: an empty or too long label
        raise RendezvousError(f"cannot resolve the host {host!r}: {error}") from None


def serve_store(host: str, port: int, token: bytes) -> StoreServer:
    """The store's server on ``host``:``port`` only (port 0: a free port), open to the
    holders of ``token``; RendezvousError if it cannot listen there."""
    return StoreServer(check_ipv4_host(host, "the rendezvous store's host"), port, token)


def connect_store(
    host: str,
    port: int,
    token: bytes,
    *,
    timeout_s: float,
    on_wait: Callable[[float], None] | None = None,
) -> GatedStoreClient:
    """A client of the store served at ``host``:``port``, once the store answered (waits up
    to ``timeout_s``); RendezvousError if none answers or it refuses ``token``. ``on_wait``
    (seconds waited so far) is called every ``WAIT_NOTICE_SECONDS`` without an answer."""
    client = GatedStoreClient(host, port, token, timeout_s=timeout_s)
    try:
        _ping(client, timeout_s, on_wait)
    except dist.DistStoreError as error:
        client.close()
        raise RendezvousError(
            f"{error}; is the controller's MainNode.set_address() running there, with the "
            "same cluster token?"
        ) from None
    return client


def _ping(
    client: GatedStoreClient, timeout_s: float, on_wait: Callable[[float], None] | None
) -> None:
    """Until the store answers (``on_wait`` told every ``WAIT_NOTICE_SECONDS`` meanwhile);
    DistStoreError after ``timeout_s`` or once the store refused the client."""
    started = time.monotonic()
    deadline = started + timeout_s
    while True:
        left = max(0.0, deadline - time.monotonic())
        try:
            client.ping(left if on_wait is None else min(left, WAIT_NOTICE_SECONDS))
            return
        except dist.DistStoreError:
            # refused or lost (no use waiting on), or the time is up
            if on_wait is None or client.gone is not None or time.monotonic() >= deadline:
                raise
        on_wait(time.monotonic() - started)


class SignedStore:
    """Signed records in a c10d store (see the module docstring)."""

    def __init__(self, store: Any, key: bytes) -> None:
        self.store = store
        self._key = key

    def release(self) -> None:
        """Drop the store (its owner closes the connection)."""
        self.store = None

    def put(self, name: str, record: Any) -> None:
        self.store.set(name, sign(self._key, name, record))

    def has(self, name: str) -> bool:
        return bool(self.store.check([name]))

    def read(self, name: str, cls: type[R]) -> R:
        """The record under ``name`` (present); RendezvousError if it is not a valid one."""
        return read_record(self._key, name, bytes(self.store.get(name)), cls)

    def wait(self, name: str, cls: type[R], timeout_s: float, missing: str | None = None) -> R:
        """The record under ``name`` once it is there; RendezvousError after ``timeout_s``
        (saying ``missing``, when given)."""
        try:
            self.store.wait([name], timedelta(seconds=timeout_s))
        except (RuntimeError, dist.DistError) as error:
            raise RendezvousError(
                missing
                or f"no {cls.__name__} appeared under {name!r} within {timeout_s:g} s ({error})"
            ) from None
        return self.read(name, cls)


def wait_start(store: SignedStore, timeout_s: float) -> StartRecord:
    """The controller's start record once it is there; RendezvousError with the controller's
    reason as soon as it wrote an abort record instead, or after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    # polled with ``check``: a c10d wait that times out logs a warning each time
    while not _has(store, START_KEY):
        _raise_if_aborted(store)
        if time.monotonic() > deadline:
            raise RendezvousError(f"no StartRecord appeared within {timeout_s:g} s")
        time.sleep(ABORT_POLL_SECONDS)
    return store.read(START_KEY, StartRecord)


def _has(store: SignedStore, name: str) -> bool:
    """Whether the store holds ``name``; RendezvousError if the store is gone."""
    try:
        return store.has(name)
    except (RuntimeError, dist.DistError) as error:
        raise RendezvousError(
            f"the controller's store is gone: the controller closed or died ({error})"
        ) from None


def _raise_if_aborted(store: SignedStore) -> None:
    """RendezvousError with the controller's reason if it refused the cluster."""
    if not _has(store, ABORT_KEY):
        return
    try:
        record = store.read(ABORT_KEY, AbortRecord)
    except RendezvousError as error:  # forged by a token holder: not the controller
        _LOG.warning("ignored an abort record not written by the controller: %s", error)
        return
    raise RendezvousError(f"the controller refused the cluster: {record.reason}")
