"""The rendezvous store: a c10d ``TCPStore`` that the controller serves and every worker joins.

torch.distributed's own store, as torchrun users know it. Two things are added around it:

* the server listens only where it is told: ``TCPStore``'s own server listens on every
  interface, so the controller binds the listening socket itself (on the host of its address,
  127.0.0.1 unless the user names another interface) and hands it over (``master_listen_fd``);
* every record is signed (``dtorch.cluster.records``): ``SignedStore`` writes and reads
  records, and waits for one with a timeout.

Key names: ``dtorch/program`` (the controller's ``ProgramRecord``), ``dtorch/worker/<rank>``
(each worker's ``WorkerRecord``), ``dtorch/start`` (the controller's ``StartRecord``). The
collective groups and the failure board use their own prefixes of the same store.

Example:
    >>> from dtorch.cluster.records import WorkerRecord, record_key
    >>> server = serve_store("127.0.0.1", 0, timeout_s=5.0)
    >>> client = connect_store("127.0.0.1", server.port, timeout_s=5.0)
    >>> signed = SignedStore(client, record_key(bytes(32)))
    >>> signed.put("dtorch/worker/0", WorkerRecord(0, 1, "127.0.0.1", 1, "cpu", 0))
    >>> SignedStore(server, record_key(bytes(32))).wait("dtorch/worker/0", WorkerRecord, 5.0).rank
    0
"""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from dtorch.cluster.records import R, read_record, sign
from dtorch.errors import RendezvousError

PROGRAM_KEY = "dtorch/program"
START_KEY = "dtorch/start"
#: The shortest cluster token accepted, by the controller and by every worker.
MIN_TOKEN_BYTES = 16
#: Where the collective groups rendezvous, and where the failure board posts.
GROUPS_PREFIX = "dtorch/groups/"
BOARD_PREFIX = "dtorch/board/"


def worker_key(rank: int) -> str:
    return f"dtorch/worker/{rank}"


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
    return host.strip("[]") or "127.0.0.1", int(port)


def serve_store(host: str, port: int, *, timeout_s: float) -> Any:
    """The store's server, listening on ``host``:``port`` only (port 0: a free port)."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(128)
    except OSError as error:
        listener.close()
        raise RendezvousError(
            f"cannot serve the rendezvous store at {host}:{port}: {error}"
        ) from None
    bound = listener.getsockname()[1]
    try:
        store = dist.TCPStore(
            host,
            bound,
            is_master=True,
            wait_for_workers=False,
            timeout=timedelta(seconds=timeout_s),
            master_listen_fd=listener.detach(),
        )
    except (RuntimeError, ValueError) as error:
        raise RendezvousError(
            f"cannot serve the rendezvous store at {host}:{bound}: {error}"
        ) from None
    return store


def connect_store(host: str, port: int, *, timeout_s: float) -> Any:
    """A client of the store served at ``host``:``port`` (waits up to ``timeout_s``)."""
    try:
        return dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=timeout_s))
    except (RuntimeError, ValueError) as error:
        raise RendezvousError(
            f"no rendezvous store answered at {host}:{port} within {timeout_s:g} s ({error}); "
            "is the controller's MainNode.set_address() running there?"
        ) from None


class SignedStore:
    """Signed records in a c10d store (see the module docstring)."""

    def __init__(self, store: Any, key: bytes) -> None:
        self.store = store
        self._key = key

    def put(self, name: str, record: Any) -> None:
        self.store.set(name, sign(self._key, name, record))

    def has(self, name: str) -> bool:
        return bool(self.store.check([name]))

    def read(self, name: str, cls: type[R]) -> R:
        """The record under ``name`` (present); RendezvousError if it is not a valid one."""
        return read_record(self._key, name, bytes(self.store.get(name)), cls)

    def wait(self, name: str, cls: type[R], timeout_s: float) -> R:
        """The record under ``name`` once it is there; RendezvousError after ``timeout_s``."""
        try:
            self.store.wait([name], timedelta(seconds=timeout_s))
        except (RuntimeError, dist.DistError) as error:
            raise RendezvousError(
                f"no {cls.__name__} appeared under {name!r} within {timeout_s:g} s ({error})"
            ) from None
        return self.read(name, cls)
