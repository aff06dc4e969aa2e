"""StoreFailureBoard: the FailureBoard of workers on several hosts, in the rendezvous store.

The same contract as ``dtorch.runtime.board``: a party whose group-kernel input failed posts
the failure before it sends anything; every party looks after the kernel. Workers on several
hosts share no memory, so the board is the cluster's c10d store: ``post`` is one ``set`` (done
before the poster's first send, so a reader that needs it finds it), ``find`` one ``check`` (a
round trip to the controller's store after each group kernel: far less than the collective
itself across hosts). Entries are MACed with the program secret (every token holder may write
the store, and its gate's password travels in the clear) and removed by their poster's
``clear`` at the end of a graph.

Example:
    >>> from dtorch.cluster.rendezvous import connect_store, serve_store
    >>> from dtorch.ir.report import Failure
    >>> server = serve_store("127.0.0.1", 0, bytes(32))
    >>> client = connect_store("127.0.0.1", server.port, bytes(32), timeout_s=5.0)
    >>> board = StoreFailureBoard(client, bytes(32))
    >>> board.post(1, 4, Failure(4, "redistribute_4 (Convert) at m.py:1:1", 3, "KernelError", "x"))
    >>> board.find(4).device, board.find(5)
    (3, None)
    >>> board.clear(1); board.find(4) is None
    True
    >>> client.close(); server.close()
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
from typing import Any

from dtorch.cluster.rendezvous import BOARD_PREFIX
from dtorch.errors import DeserializationError
from dtorch.ir.report import Failure
from dtorch.serialization import deserialize, serialize

_MAC = 32
_LOG = logging.getLogger(__name__)


class StoreFailureBoard:
    """A FailureBoard in a c10d store (see the module docstring)."""

    def __init__(self, store: Any, secret: bytes) -> None:
        self._store = store
        self._key = hmac.new(secret, b"dtorch-failure-board", hashlib.sha256).digest()
        self._lock = threading.Lock()
        self._posted: dict[int, list[str]] = {}

    @staticmethod
    def _name(operator_id: int) -> str:
        return f"{BOARD_PREFIX}{operator_id}"

    def _mac(self, name: str, body: bytes) -> bytes:
        return hmac.new(self._key, name.encode() + b"\0" + body, hashlib.sha256).digest()

    def post(self, party: int, operator_id: int, failure: Failure) -> None:
        name = self._name(operator_id)
        body = serialize(failure)
        self._store.set(name, self._mac(name, body) + body)
        # a c10d SET is not answered: one request answered after it on this connection makes
        # sure the store holds the entry before this party sends anything
        self._store.check([name])
        with self._lock:
            self._posted.setdefault(party, []).append(name)

    def find(self, operator_id: int) -> Failure | None:
        name = self._name(operator_id)
        if not self._store.check([name]):
            return None
        data = bytes(self._store.get(name))
        mac, body = data[:_MAC], data[_MAC:]
        if not hmac.compare_digest(mac, self._mac(name, body)):
            _LOG.warning(
                "ignored a failure-board entry %r that is not signed by this program", name
            )
            return None
        try:
            failure = deserialize(body)
        except DeserializationError:
            return None
        return failure if isinstance(failure, Failure) else None

    def clear(self, party: int) -> None:
        with self._lock:
            names = self._posted.pop(party, [])
        for name in names:
            self._store.delete_key(name)
