"""PUSH-PULL: workers report to the controller, each message tagged with its sender.

``Puller`` binds a PULL socket in the controller; every worker connects a ``Pusher`` with its
own sender number (several pushers, in one process or many, may feed one puller, the
controller's own included). A worker's "devices ready" report at start-up (spec 004 section 8)
is one ``pusher.send(b"ready", [payload])`` made after its ``Subscriber`` is connected; see
``dtorch.transport.pubsub`` for the whole start-up sequence.

A pusher queues messages only on a completed connection (``IMMEDIATE``), so a send to an
address nobody bound waits for the puller to appear and raises TransportTimeoutError after
the zmq timeout instead of queueing forever. Closing a pusher waits a few seconds at most
(``LINGER``) for messages still queued, so a report sent just before a worker exits arrives.

Example:
    >>> from dtorch.transport.ipc import IpcDirectory
    >>> ipc = IpcDirectory()
    >>> puller = Puller(ipc.address("pull"))
    >>> pusher = Pusher(puller.address, sender=3)
    >>> pusher.send(b"ready", [b"cpu:0,cpu:1"])
    >>> envelope = puller.recv()
    >>> envelope.sender, envelope.kind, bytes(envelope.parts[0])
    (3, b'ready', b'cpu:0,cpu:1')
    >>> pusher.close(); puller.close(); ipc.close()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import zmq

from dtorch.errors import TransportTimeoutError
from dtorch.transport.security import CurveKeys
from dtorch.transport.sockets import (
    Channel,
    Endpoint,
    check_parts,
    send_message,
    to_ms,
    wait_seconds,
)
from dtorch.transport.wire import (
    MAX_FRAME,
    Envelope,
    Part,
    encode_sender,
    push_frames,
    read_envelope,
)

_PULLER_OPTIONS: dict[int, int | bytes] = {zmq.RCVHWM: 0, zmq.LINGER: 0}
#: What CURVE adds to a frame (its MESSAGE command: name, nonce, MAC), which MAXMSGSIZE counts.
_CURVE_FRAMING = 256
_MAX_LINGER_S = 5.0  # a pusher's close waits at most this long for queued reports


class Puller(Channel):
    """The controller's end of the reports: binds ``address`` and receives Envelopes
    (``max_message``: the largest frame taken, in bytes, about ``MAX_FRAME`` by default: pushers
    send larger parts in pieces of that size, ``wire.push_frames``; a larger frame drops the
    sender's connection, and an unauthenticated peer's handshake commands are bounded by it).

    ``poll``/``recv`` raise TransportError for a malformed message (fewer than 2 frames, a
    sender frame that is not 4 bytes). Thread-safe, but meant for one receiving thread; a
    ``close`` from another thread returns within 0.1 s (a waiting ``poll`` then raises
    TransportError).
    """

    __slots__ = ("_endpoint",)

    def __init__(
        self,
        address: str,
        *,
        context: zmq.Context[Any] | None = None,
        keys: CurveKeys | None = None,
        max_message: int = MAX_FRAME + _CURVE_FRAMING,
    ) -> None:
        options = {**_PULLER_OPTIONS, zmq.MAXMSGSIZE: max_message}
        self._endpoint = Endpoint.opened(zmq.PULL, address, context, options, Endpoint.bind, keys)

    def __repr__(self) -> str:
        return f"Puller({self.address!r})"

    def poll(self, timeout_s: float) -> Envelope | None:
        """The next report, or None if none arrives within ``timeout_s`` seconds.

        Example:
            >>> from dtorch.transport.ipc import IpcDirectory
            >>> with IpcDirectory() as ipc, Puller(ipc.address("p")) as puller:
            ...     puller.poll(0.01) is None
            True
        """
        return self._endpoint.receive(wait_seconds(timeout_s), self._read)

    def _read(self, frames: list[bytes | memoryview]) -> Envelope:
        return read_envelope(frames, self._endpoint.address)

    def recv(self, timeout_s: float | None = None) -> Envelope:
        """The next report; TransportTimeoutError if none arrives within ``timeout_s`` seconds
        (by default ``GlobalOption.get_zmq_timeout_second()``)."""
        seconds = wait_seconds(timeout_s)
        envelope = self.poll(seconds)
        if envelope is None:
            raise TransportTimeoutError(
                f"puller at {self.address} received no message within {seconds:g} s"
            )
        return envelope

    def close(self) -> None:
        """Close the socket (and the context it owns); idempotent."""
        self._endpoint.close(0)


class Pusher(Channel):
    """A worker's end of the reports: connects to ``address`` and sends as ``sender``.

    ``send`` is thread-safe (several stream threads of a worker report). It raises
    TransportTimeoutError if the message cannot be queued within ``timeout_s`` (default: the
    zmq timeout of GlobalOption when the pusher is made), e.g. because nobody bound the address
    or the puller is gone. The send waits in zmq (``SNDTIMEO``) holding the pusher's lock, so a
    ``close`` from another thread waits for such a send to end.
    """

    __slots__ = ("_endpoint", "_linger_ms", "_sender", "_sender_frame", "_timeout_s")

    def __init__(
        self,
        address: str,
        sender: int,
        *,
        context: zmq.Context[Any] | None = None,
        timeout_s: float | None = None,
        keys: CurveKeys | None = None,
    ) -> None:
        self._sender_frame = encode_sender(sender)
        self._sender = sender
        self._timeout_s = wait_seconds(timeout_s)
        self._linger_ms = to_ms(min(self._timeout_s, _MAX_LINGER_S))
        options: dict[int, int | bytes] = {
            zmq.IMMEDIATE: 1,
            zmq.SNDTIMEO: to_ms(self._timeout_s),
            zmq.LINGER: self._linger_ms,
        }
        self._endpoint = Endpoint.opened(
            zmq.PUSH, address, context, options, Endpoint.connect, keys
        )

    def __repr__(self) -> str:
        return f"Pusher({self.address!r}, sender={self._sender})"

    @property
    def sender(self) -> int:
        """The sender number every message of this pusher carries."""
        return self._sender

    def send(self, kind: bytes, parts: Sequence[Part] = ()) -> None:
        """Queue one message ``[sender, kind, *parts]`` for the puller.

        Example:
            >>> from dtorch.transport.ipc import IpcDirectory
            >>> with IpcDirectory() as ipc:
            ...     with Pusher(ipc.address("nobody"), 0, timeout_s=0.05) as pusher:
            ...         pusher.send(b"ready")
            Traceback (most recent call last):
            ...
            dtorch.errors.TransportTimeoutError: pusher 0 could not queue a b'ready' message ...
        """
        check_parts(kind, parts)
        endpoint = self._endpoint
        with endpoint.lock:
            try:
                head, frames = push_frames(self._sender_frame, parts)
                send_message(endpoint.live(), head, kind, frames)
            except zmq.Again:
                raise TransportTimeoutError(
                    f"pusher {self._sender} could not queue a {kind!r} message for "
                    f"{self.address} within {self._timeout_s:g} s (nobody bound the address, "
                    "or the puller is gone)"
                ) from None

    def close(self) -> None:
        """Close the socket, waiting a few seconds at most for queued messages; idempotent."""
        self._endpoint.close(self._linger_ms)
