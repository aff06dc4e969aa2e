"""Fixtures for the transport tests: both implementations behind one kit, private ipc dirs.

``kit`` runs a test twice: on the real sockets (threads of this process over ipc) and on the
in-process twins. A kit makes publishers, subscribers, pullers and pushers, plus a "raw" sender
of arbitrary frames (a plain pyzmq socket for the real kind, the ``send_raw`` hook for the
twins), and closes everything it made at the end of the test. Every ipc directory a test
makes is checked to be gone afterwards; waits default to 5 s here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import zmq

from dtorch.options import GlobalOption
from dtorch.transport import (
    InProcPublisher,
    InProcPuller,
    IpcDirectory,
    Publisher,
    Puller,
    Pusher,
    Subscriber,
)
from dtorch.transport.security import CurveKeys, Guard
from dtorch.transport.wire import EVERYONE, topic

KINDS = ["zmq", "tcp", "inproc"]
#: The CURVE keys of the "tcp" kit (any 32 bytes make a program secret).
KEYS = CurveKeys.from_secret(bytes(range(32)))


@pytest.fixture(autouse=True)
def short_zmq_timeout() -> Iterator[None]:
    """A wait that goes wrong fails in seconds, not in the default minute."""
    with GlobalOption.override(zmq_timeout_second=5.0):
        yield


@pytest.fixture
def ipc() -> Iterator[IpcDirectory]:
    """A private socket directory, closed after the test and checked to be gone."""
    directory = IpcDirectory()
    yield directory
    directory.close()
    assert not os.path.exists(directory.path), f"{directory.path} left behind"


class RawZmqPublisher:
    """A plain pyzmq XPUB that sends whatever frames a test gives it (no ids of its own)."""

    def __init__(self, address: str, keys: CurveKeys | None = None) -> None:
        self._context: zmq.Context[Any] = zmq.Context()
        self._guard = None if keys is None else Guard.start(self._context, keys)
        self._socket = self._context.socket(zmq.XPUB)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.XPUB_VERBOSE, 1)
        for option, value in ({} if keys is None else keys.server_options()).items():
            self._socket.setsockopt(option, value)
        self._socket.bind(address)
        self.address = self._socket.getsockopt(zmq.LAST_ENDPOINT).decode()

    def wait_subscribers(self, count: int, timeout_s: float = 5.0) -> None:
        """As Publisher's: a subscriber's last subscription (to all, or to everyone's topic)
        counts it; a party's own topic comes first."""
        while count:
            assert self._socket.poll(int(timeout_s * 1000)), "no subscription arrived"
            frame = self._socket.recv()
            assert frame[:1] == b"\x01"
            count -= frame[1:] in (b"", topic(EVERYONE))

    def send_raw(self, frames: Sequence[bytes]) -> None:
        self._socket.send_multipart(list(frames))

    def close(self) -> None:
        self._socket.close(0)
        if self._guard is not None:
            self._guard.stop()
        self._context.term()


class RawZmqPusher:
    """A plain pyzmq PUSH that sends whatever frames a test gives it."""

    def __init__(self, address: str, keys: CurveKeys | None = None) -> None:
        self._context: zmq.Context[Any] = zmq.Context()
        self._socket = self._context.socket(zmq.PUSH)
        self._socket.setsockopt(zmq.LINGER, 1000)
        for option, value in ({} if keys is None else keys.client_options()).items():
            self._socket.setsockopt(option, value)
        self._socket.connect(address)

    def send_raw(self, frames: Sequence[bytes]) -> None:
        self._socket.send_multipart(list(frames))

    def close(self) -> None:
        self._socket.close()
        self._context.term()


class ZmqKit:
    """The real sockets, over ipc in this process's threads."""

    name = "zmq"

    def __init__(self, ipc: IpcDirectory) -> None:
        self.ipc = ipc
        self._opened: list[Any] = []

    def _keep(self, thing: Any) -> Any:
        self._opened.append(thing)
        return thing

    def publisher(self) -> Publisher:
        return self._keep(Publisher(self.ipc.address("pub")))

    def subscriber(self, publisher: Any, party: int | None = None) -> Subscriber:
        return self._keep(Subscriber(publisher.address, timeout_s=5.0, party=party))

    def raw_publisher(self) -> RawZmqPublisher:
        return self._keep(RawZmqPublisher(self.ipc.address("raw")))

    def puller(self) -> Puller:
        return self._keep(Puller(self.ipc.address("pull")))

    def pusher(self, puller: Any, sender: int, timeout_s: float | None = None) -> Pusher:
        return self._keep(Pusher(puller.address, sender, timeout_s=timeout_s))

    def raw_pusher(self, puller: Any) -> RawZmqPusher:
        return self._keep(RawZmqPusher(puller.address))

    def close(self) -> None:
        for thing in reversed(self._opened):
            thing.close()


class TcpKit(ZmqKit):
    """The real sockets over loopback TCP with CURVE (what remote workers use)."""

    name = "tcp"
    address = "tcp://127.0.0.1:0"

    def publisher(self) -> Publisher:
        return self._keep(Publisher(self.address, keys=KEYS))

    def subscriber(self, publisher: Any, party: int | None = None) -> Subscriber:
        return self._keep(Subscriber(publisher.address, timeout_s=5.0, keys=KEYS, party=party))

    def raw_publisher(self) -> RawZmqPublisher:
        return self._keep(RawZmqPublisher("tcp://127.0.0.1:*", KEYS))

    def puller(self) -> Puller:
        return self._keep(Puller(self.address, keys=KEYS))

    def pusher(self, puller: Any, sender: int, timeout_s: float | None = None) -> Pusher:
        return self._keep(Pusher(puller.address, sender, timeout_s=timeout_s, keys=KEYS))

    def raw_pusher(self, puller: Any) -> RawZmqPusher:
        return self._keep(RawZmqPusher(puller.address, KEYS))


_KITS = {"zmq": ZmqKit, "tcp": TcpKit}


class InProcKit:
    """The in-process twins."""

    name = "inproc"

    def __init__(self) -> None:
        self._opened: list[Any] = []

    def _keep(self, thing: Any) -> Any:
        self._opened.append(thing)
        return thing

    def publisher(self) -> InProcPublisher:
        return self._keep(InProcPublisher())

    def subscriber(self, publisher: Any, party: int | None = None) -> Any:
        return self._keep(publisher.subscribe(party))

    def raw_publisher(self) -> InProcPublisher:
        return self.publisher()

    def puller(self) -> InProcPuller:
        return self._keep(InProcPuller())

    def pusher(self, puller: Any, sender: int, timeout_s: float | None = None) -> Any:
        return self._keep(puller.pusher(sender, timeout_s=timeout_s))

    def raw_pusher(self, puller: Any) -> Any:
        return self.pusher(puller, 0)

    def close(self) -> None:
        for thing in reversed(self._opened):
            thing.close()


@pytest.fixture(params=KINDS)
def kit(request: pytest.FixtureRequest, ipc: IpcDirectory) -> Iterator[ZmqKit | InProcKit]:
    """Each test on the real sockets (ipc, and TCP with CURVE) and on the twins."""
    made = _KITS[request.param](ipc) if request.param in _KITS else InProcKit()
    yield made
    made.close()
