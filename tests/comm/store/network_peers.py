"""Raw ZeroMQ peers of a network store for the security tests: an outsider without the secret
(the attacker of issue 11, a local process on 127.0.0.1), one that passed the gate (it knows
the PLAIN password, as anyone who reads the traffic may) but not the key, a member-grade peer
that holds the secret but sends whatever header it is given, a fake coordinator's socket, and
a log watch to wait for refusals."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ormsgpack
import torch
import zmq

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.store import NetworkTensorStore
from dtorch.comm.store.network_auth import ClientAuth, derive_key
from dtorch.comm.store.network_gate import (
    Gate,
    client_options,
    password,
    server_options,
    store_context,
)
from dtorch.transport.handshakes import RefusalLog

#: Where every store of these tests listens: loopback, a free port chosen by rank 0.
ANY_PORT = "tcp://127.0.0.1:0"
STORE_LOGGER = "dtorch.comm.store"


@contextmanager
def two_ranks(
    namespace: CommNamespace, key: str = "sec", **kwargs: Any
) -> Iterator[tuple[NetworkTensorStore, NetworkTensorStore]]:
    """Ranks 0 and 1 of one store, both opened on this thread: rank 0 binds port 0 and returns
    at once, rank 1 connects to ``store.endpoint`` (its construction barrier meets rank 0's,
    which rank 0 already sent)."""
    first = NetworkTensorStore.open(key, 2, 0, namespace, ANY_PORT, **kwargs)
    try:
        second = NetworkTensorStore.open(key, 2, 1, namespace, first.endpoint)
        try:
            yield first, second
        finally:
            second.close()
    finally:
        first.close()


class RawPeer:
    """A DEALER connected to ``endpoint`` that sends frames as given: with the NULL mechanism,
    or, with ``gate`` (a secret), with the PLAIN password of that secret's store key."""

    def __init__(self, endpoint: str, gate: bytes | None = None) -> None:
        self.socket = zmq.Context.instance().socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        if gate is not None:
            for option, value in client_options(derive_key(gate)).items():
                self.socket.setsockopt(option, value)
        self.socket.connect(endpoint)

    def send(self, frames: list[Any], timeout_s: float = 2.0) -> bool:
        """Send ``frames``; False when they cannot go within ``timeout_s`` (a DEALER whose
        handshake was refused has no peer to queue them for)."""
        self.socket.setsockopt(zmq.SNDTIMEO, int(timeout_s * 1000))
        try:
            self.socket.send_multipart(frames)
        except zmq.Again:
            return False
        return True

    def answer(self, timeout_s: float = 2.0) -> list[bytes] | None:
        """The next message, or None when none comes within ``timeout_s``."""
        if not self.socket.poll(int(timeout_s * 1000)):
            return None
        return self.socket.recv_multipart()

    def close(self) -> None:
        self.socket.close(0)


class SignedPeer(RawPeer):
    """A peer that completed the handshake with ``secret`` and seals any raw header."""

    def __init__(self, endpoint: str, secret: bytes) -> None:
        super().__init__(endpoint, gate=secret)
        self.auth = ClientAuth(derive_key(secret))
        self.counter = 0
        frames, nonce = self.auth.hello()
        self.send(frames)
        answer = self.answer()
        self.accepted = answer is not None and self.auth.accept_hello(nonce, answer)

    def sealed(self, header: bytes, data: Any = None) -> list[Any]:
        """The frames of the next request: ``header`` (raw bytes) and ``data``."""
        self.counter += 1
        return self.auth.seal(self.counter, header, data)

    def request(self, header: Any, data: Any = None, timeout_s: float = 2.0) -> list[Any] | None:
        """Send ``header`` (packed unless bytes); the decoded reply header, None if none."""
        raw = header if isinstance(header, bytes) else ormsgpack.packb(header)
        self.send(self.sealed(raw, data))
        answer = self.answer(timeout_s)
        if answer is None:
            return None
        opened = self.auth.open_reply(self.counter, answer)
        assert opened is not None, "an answer to another request"
        return ormsgpack.unpackb(opened[0])


@contextmanager
def gated_router(endpoint: str, key: bytes) -> Iterator[zmq.Socket]:
    """A ROUTER bound at ``endpoint`` behind the store's gate, admitting the PLAIN password
    of ``key`` (a fake coordinator: a PLAIN client tells its password to any listener)."""
    gate = Gate.of(store_context())
    domain = gate.admit(password(key), RefusalLog(logging.getLogger(STORE_LOGGER), "fake"))
    router = store_context().socket(zmq.ROUTER)
    try:
        for option, value in server_options(domain).items():
            router.setsockopt(option, value)
        router.bind(endpoint)
        yield router
    finally:
        router.close(0)
        gate.release(domain)


class LogWatch(logging.Handler):
    """Collects the store's log records; ``wait_for`` blocks until one contains a text."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []
        self._changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._changed:
            self.messages.append(record.getMessage())
            self._changed.notify_all()

    def count(self, text: str) -> int:
        with self._changed:
            return sum(text in message for message in self.messages)

    def wait_for(self, text: str, times: int = 1, timeout_s: float = 10.0) -> None:
        """Until ``times`` records contain ``text`` (AssertionError after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while sum(text in m for m in self.messages) < times:
                left = deadline - time.monotonic()
                assert left > 0, f"never logged {text!r} {times}x; logged: {self.messages[-5:]}"
                self._changed.wait(left)


def handover(producer: Any, consumer: Any, key: str, tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` from ``producer`` to ``consumer`` through one key, the whole handshake;
    what the consumer got (a copy)."""
    producer.src_set(key, tensor, 1)
    got = consumer.dest_get(key).clone()
    consumer.dest_finish_get(key)
    producer.src_wait_until_get_finished(key)
    return got
