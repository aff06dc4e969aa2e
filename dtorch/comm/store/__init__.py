"""TensorStore: keyed producer/consumer tensor exchange (spec 002 section 3).

Example:
    >>> from dtorch.comm.store import StoreKind, open_store
    >>> with open_store(StoreKind.MEMORY, "pkg-doc", 1, 0) as store:
    ...     store.world_size
    1
"""

from dtorch.comm.store.base import PeerFailedError, StoreKind, TensorStore
from dtorch.comm.store.factory import StoreSpec, open_store
from dtorch.comm.store.file import FileTensorStore
from dtorch.comm.store.memory import MemoryTensorStore
from dtorch.comm.store.network import NetworkTensorStore

__all__ = [
    "FileTensorStore",
    "MemoryTensorStore",
    "NetworkTensorStore",
    "PeerFailedError",
    "StoreKind",
    "StoreSpec",
    "TensorStore",
    "open_store",
]
