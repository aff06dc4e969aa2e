"""Where the callers of one group meet before they exchange anything: a c10d store.

On one machine it is a ``FileStore`` file in the manager's rendezvous directory; across hosts
(no shared files) it is a prefix of a c10d store every host reaches, e.g. a client
of the controller's rendezvous store: ``PrefixStore(name, store)`` keeps the groups apart. What
goes through it: torch.distributed's own rendezvous (Gloo / NCCL addresses), each rank's hello
(who it is, for dead-peer detection) and, for the network TensorStore, the endpoint its rank 0
bound.

Files: a rendezvous file is created ``0600`` before torch opens it (torch creates it under the
process umask, 0644 usually, so any local user could read the ranks' addresses and pids; a
umask around the open would also change the mode of files other threads create meanwhile, since
the umask is the process's). Each rank also holds a hard link to it (``rank_link``) until its
FileStore is destroyed; the rank that takes the last link away removes the file, a killed
rank's link taken away by the survivors (``torch_peers``). In a shared store nothing is
removed: a group leaves its few small keys there (the store is the program's and goes with it).

Listeners bind ``host_address``: ``127.0.0.1`` unless the caller names the interface of its
host (Gloo otherwise binds whatever the machine's hostname resolves to).

A network-store rank 0 that cannot serve the store publishes its failure under the endpoint's
key (``FAILED_PREFIX`` and its reason), so the other ranks fail at once with its reason rather
than at the comm timeout.

A caller of a network-store group on another host that dies is seen by the others at the comm
timeout (CommTimeoutError naming the callers that never came): the store has no pids to look
at, unlike the file store.

A group is opened once per caller and rendezvous: each rank counts its opening in the store, and
a second opening of the same group (same namespace, same store) is refused, since it would meet
its predecessor's keys (addresses of process groups long gone).

Example (one rank, a rendezvous file):
    >>> import os, stat, tempfile
    >>> from datetime import timedelta
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     rendezvous = GroupRendezvous.in_directory("dtorch-doc-group", tmp)
    ...     store = rendezvous.open(1, 0, timedelta(seconds=5))
    ...     oct(stat.S_IMODE(os.stat(rendezvous.path).st_mode)), rendezvous.host_address
    ('0o600', '127.0.0.1')
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

import torch.distributed as dist

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.store import NetworkTensorStore, StoreKind, TensorStore, open_store
from dtorch.errors import CommError, CommTimeoutError

#: Where listeners bind unless the caller names its host's interface.
LOOPBACK = "127.0.0.1"

#: The key under which the network store's rank 0 publishes the endpoint it serves.
ENDPOINT_KEY = "network-store-endpoint"
#: What rank 0 publishes under ``ENDPOINT_KEY``, then its reason, when it could not serve.
FAILED_PREFIX = b"failed:"


@dataclass(frozen=True, slots=True)
class GroupRendezvous:
    """One group's meeting place: a file in ``directory``, or the prefix ``name`` of the c10d
    ``store`` shared by every host; ``host_address`` is the interface this caller binds."""

    name: str
    directory: str | None = None
    store: Any = field(default=None, compare=False)  # a torch.distributed.Store
    host_address: str = LOOPBACK

    def __post_init__(self) -> None:
        if (self.directory is None) == (self.store is None):
            raise CommError("GroupRendezvous: give a directory or a store, exactly one")

    @classmethod
    def in_directory(
        cls, name: str, directory: str, host_address: str = LOOPBACK
    ) -> GroupRendezvous:
        """Meet in the FileStore file ``directory/name`` (callers on one machine)."""
        return cls(name, directory=directory, host_address=host_address)

    @classmethod
    def in_store(cls, name: str, store: Any, host_address: str = LOOPBACK) -> GroupRendezvous:
        """Meet under the prefix ``name`` of the c10d ``store`` (callers on any host).

        Example:
            >>> import torch.distributed as dist
            >>> GroupRendezvous.in_store("g", dist.HashStore(), "127.0.0.2").path is None
            True
        """
        return cls(name, store=store, host_address=host_address)

    @property
    def path(self) -> str | None:
        """The rendezvous file (None for a shared store: it has no file to remove)."""
        return None if self.directory is None else os.path.join(self.directory, self.name)

    def open(self, world_size: int, rank: int, timeout: timedelta) -> Any:
        """The group's c10d store for participant ``rank`` (counted: see the module doc)."""
        if self.path is not None:
            store: Any = _file_store(self.path, world_size)
            store.set_timeout(timeout)
        else:
            # no set_timeout: a PrefixStore's would change the caller's shared store; waits
            # pass their timeout, plain gets follow after a wait
            store = dist.PrefixStore(self.name, self.store)
        if store.add(f"opened/{rank}", 1) != 1:
            raise CommError(
                f"group rendezvous {self.name!r}: participant {rank} opened it before; a "
                "group is created once per namespace and rendezvous store"
            )
        if self.path is not None:  # this rank's use of the file, until its store is destroyed
            _link(self.path, rank_link(self.path, rank))
        return store


def _file_store(path: str, world_size: int) -> Any:
    # created 0600 before torch opens it (see the module doc); torch keeps an existing mode
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    return dist.FileStore(path, world_size)


def rank_link(path: str, rank: int) -> str:
    """Rank ``rank``'s hard link to the rendezvous file ``path``: it stands for the rank's use
    of the file, and goes once the rank's FileStore is destroyed (or the rank died)."""
    return f"{path}.rank{rank}"


def _link(path: str, link: str) -> None:
    # a link left by an earlier group of this name (a killed caller) names another file; on a
    # file system without hard links no rank has one, and none removes the file (it stays)
    with contextlib.suppress(FileNotFoundError):
        os.remove(link)
    with contextlib.suppress(OSError):
        os.link(path, link)


def wait_for(store: Any, key: str, timeout: timedelta, what: str) -> bytes:
    """The value of ``key`` once some participant set it; CommTimeoutError naming ``what``."""
    try:
        store.wait([key], timeout)
    except RuntimeError:
        raise CommTimeoutError(
            f"{what} did not come within {timeout.total_seconds()} s (DTORCH_COMM_TIMEOUT_SECOND)"
        ) from None
    value: bytes = store.get(key)
    return value


def tcp_endpoint(host: str, port: int) -> str:
    """``tcp://HOST:PORT`` (IPv6 addresses bracketed).

    Example:
        >>> tcp_endpoint("127.0.0.2", 5), tcp_endpoint("::1", 5)
        ('tcp://127.0.0.2:5', 'tcp://[::1]:5')
    """
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


def open_network_store(
    rendezvous: GroupRendezvous,
    store_key: str,
    namespace: CommNamespace,
    world_size: int,
    rank: int,
    timeout: timedelta,
) -> TensorStore:
    """Participant ``rank`` of the network TensorStore ``store_key``: rank 0 serves it on
    ``host_address`` (any free port) and publishes the endpoint in the rendezvous; the others
    wait for it there and connect."""
    if rendezvous.store is None:
        raise CommError(
            f"the network store of {store_key!r} needs a rendezvous store shared by the hosts "
            "(ThreadGroupManager(..., rendezvous_store=...))"
        )
    store = rendezvous.open(world_size, rank, timeout)
    if rank == 0:
        return _serve(store, rendezvous.host_address, store_key, namespace, world_size)
    what = f"the endpoint of network store {store_key!r} (its rank 0 never opened it)"
    published = wait_for(store, ENDPOINT_KEY, timeout, what)
    if published.startswith(FAILED_PREFIX):
        reason = published[len(FAILED_PREFIX) :].decode(errors="replace")
        raise CommError(f"rank 0 of network store {store_key!r} could not serve it: {reason}")
    endpoint = published.decode()
    return open_store(
        StoreKind.NETWORK, store_key, world_size, rank, namespace=namespace, endpoint=endpoint
    )


def _serve(
    store: Any, host: str, store_key: str, namespace: CommNamespace, world_size: int
) -> TensorStore:
    """Rank 0's side: serve the network store on a free port of ``host`` and publish the
    endpoint bound (rank 0's open returns before the construction barrier completes), or
    its failure: the other ranks then fail at once with its reason."""
    try:
        served = open_store(
            StoreKind.NETWORK,
            store_key,
            world_size,
            0,
            namespace=namespace,
            endpoint=tcp_endpoint(host, 0),
        )
    except BaseException as error:
        with contextlib.suppress(Exception):  # the others then wait for their timeout
            store.set(ENDPOINT_KEY, FAILED_PREFIX + f"{type(error).__name__}: {error}".encode())
        raise
    try:
        store.set(ENDPOINT_KEY, cast(NetworkTensorStore, served).endpoint)
    except BaseException:
        served.close()
        raise
    return served
