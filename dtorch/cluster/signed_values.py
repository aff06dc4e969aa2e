"""A c10d store whose values are signed with the program's secret: the groups' rendezvous.

The collective groups of a cluster meet under ``GROUPS_PREFIX`` of the controller's store,
which every token holder may write (and anyone who read its gate's password on the wire).
Gloo's rendezvous (each rank's address), the network TensorStore's endpoint and each rank's
hello (its pid, for dead-peer detection) pass through it; a forged address would send a rank's
collective to whoever forged it. ``SignedValues`` wraps the store for them: ``set`` stores
``HMAC-SHA256(K, name | 0 | value) | value`` and ``get`` checks it (``K`` derives from the
program's secret, so a value of another program, or of another key, is refused too), so
torch.distributed's own rendezvous - Gloo calls ``set``, ``get`` and ``wait`` from C++ - sees
only values some rank of this program wrote. Counters (``add``) are not signed: a forged count
can make an opening fail (refusal of service, which flooding the port gives anyway), never
connect a rank to anyone else.

Example:
    >>> import torch.distributed as dist
    >>> inner = dist.HashStore()
    >>> store = SignedValues(inner, group_key(bytes(32)))
    >>> store.set("addr", b"10.0.0.1:5"); store.get("addr")
    b'10.0.0.1:5'
    >>> inner.set("addr", b"forged")
    >>> store.get("addr")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dtorch.errors.RendezvousError: the rendezvous value under 'addr' is not signed ...
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from dtorch.errors import RendezvousError

_MAC_BYTES = 32


def group_key(secret: bytes) -> bytes:
    """The key that signs the group rendezvous of the program whose secret is ``secret``."""
    return hmac.new(secret, b"dtorch-group-rendezvous", hashlib.sha256).digest()


def _mac(key: bytes, name: str, value: bytes) -> bytes:
    return hmac.new(key, name.encode() + b"\0" + value, hashlib.sha256).digest()


class SignedValues(dist.Store):
    """``store`` with signed values (see the module docstring)."""

    def __init__(self, store: Any, key: bytes) -> None:
        super().__init__()
        self._store = store
        self._key = key

    def set(self, key: str, value: Any) -> None:
        data = value.encode() if isinstance(value, str) else bytes(value)
        self._store.set(key, _mac(self._key, key, data) + data)

    def get(self, key: str) -> bytes:
        raw = bytes(self._store.get(key))
        mac, data = raw[:_MAC_BYTES], raw[_MAC_BYTES:]
        if len(raw) < _MAC_BYTES or not hmac.compare_digest(mac, _mac(self._key, key, data)):
            raise RendezvousError(
                f"the rendezvous value under {key!r} is not signed with this program's secret "
                "(written by a process outside the program)"
            )
        return data

    def add(self, key: str, value: int) -> int:
        return int(self._store.add(key, value))

    def wait(self, keys: list[str], timeout: timedelta | None = None) -> None:
        if timeout is None:
            self._store.wait(keys)
        else:
            self._store.wait(keys, timeout)

    def check(self, keys: list[str]) -> bool:
        return bool(self._store.check(keys))

    def num_keys(self) -> int:
        return int(self._store.num_keys())

    def delete_key(self, key: str) -> bool:
        return bool(self._store.delete_key(key))

    def set_timeout(self, timeout: timedelta) -> None:
        self._store.set_timeout(timeout)

    def compare_set(self, key: str, expected: Any, desired: Any) -> bytes:
        raise RendezvousError(
            f"compare_set({key!r}) on a signed rendezvous store: its values are signed, so an "
            "expected value cannot be compared; use set and get"
        )
