"""open_store: one participant of a TensorStore, by backend kind (spec: TensorStore::Create).

The backends are a table keyed by ``StoreKind``; each opener joins the store and passes the
construction barrier before it returns, so all ``world_size`` participants must open the store
at about the same time (within the comm timeout).

Example:
    >>> from dtorch.comm.store import StoreKind, open_store
    >>> with open_store(StoreKind.MEMORY, "factory-doc", 1, 0) as store:
    ...     store.barrier()
    ...     store.rank
    0
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.shm import SegmentPool
from dtorch.comm.store.base import StoreKind, TensorStore
from dtorch.comm.store.file import FileTensorStore
from dtorch.comm.store.memory import MemoryTensorStore
from dtorch.comm.store.network import NetworkTensorStore
from dtorch.errors import CommError


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """Everything that names one participant: backend, key, world size, rank, namespace, and
    for the network backend the coordinator's ``endpoint`` (``tcp://HOST:PORT``; the
    namespace's ``secret`` authenticates it), for the file backend an optional
    ``segment_pool`` shared by the stores of this process."""

    kind: StoreKind
    store_key: str
    world_size: int
    rank: int
    namespace: CommNamespace
    endpoint: str | None = None
    segment_pool: SegmentPool | None = None


def _open_memory(spec: StoreSpec) -> TensorStore:
    return MemoryTensorStore.open(spec.store_key, spec.world_size, spec.rank, spec.namespace)


def _open_file(spec: StoreSpec) -> TensorStore:
    return FileTensorStore.open(
        spec.store_key, spec.world_size, spec.rank, spec.namespace, spec.segment_pool
    )


def _open_network(spec: StoreSpec) -> TensorStore:
    if spec.endpoint is None:
        raise CommError("a NETWORK store needs endpoint='tcp://HOST:PORT' (rank 0 binds it)")
    return NetworkTensorStore.open(
        spec.store_key, spec.world_size, spec.rank, spec.namespace, spec.endpoint
    )


_OPENERS: dict[StoreKind, Callable[[StoreSpec], TensorStore]] = {
    StoreKind.MEMORY: _open_memory,
    StoreKind.FILE: _open_file,
    StoreKind.NETWORK: _open_network,
}


def open_store(
    kind: StoreKind,
    store_key: str,
    world_size: int,
    rank: int,
    *,
    namespace: CommNamespace | None = None,
    endpoint: str | None = None,
    segment_pool: SegmentPool | None = None,
) -> TensorStore:
    """Open participant ``rank`` of ``world_size`` of the store ``store_key``.

    ``namespace`` defaults to ``CommNamespace.of_process()``; processes of one program must
    pass the same namespace explicitly. ``endpoint`` (NETWORK only) is where rank 0 serves
    the store, ``tcp://HOST:PORT`` (``127.0.0.1`` unless the program spans machines; rank 0
    may bind port 0 and pass its ``store.endpoint`` to the others); a NETWORK store needs the
    program's namespace with its ``secret`` (``CommNamespace.create()``), which authenticates
    every message. ``segment_pool`` (FILE only) lets the stores of this
    process reuse each other's touched shared-memory buffers, e.g. when a store is opened per
    operator.

    Example:
        >>> store = open_store(StoreKind.MEMORY, "open-doc", 1, 0)
        >>> store.close(); store.close()  # idempotent
    """
    if not isinstance(kind, StoreKind):
        raise CommError(f"open_store: kind must be a StoreKind, got {kind!r}")
    opener = _OPENERS.get(kind)
    if opener is None:
        raise CommError(
            f"open_store: no backend for {kind}; available: {sorted(k.value for k in _OPENERS)}"
        )
    ns = namespace or CommNamespace.of_process()
    spec = StoreSpec(kind, store_key, world_size, rank, ns, endpoint, segment_pool)
    return opener(spec)
