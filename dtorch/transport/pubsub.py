"""PUB-SUB: the controller broadcasts each batch once, and every worker receives it in order.

``Publisher`` binds an XPUB socket and numbers its messages 0, 1, 2, ...; each ``Subscriber``
connects a SUB socket and checks that the ids it receives are exactly 0, 1, 2, ... (a gap is
fatal: ``MessageGapError``). Neither side has a high-water mark, so a send never blocks and
nothing is dropped for a slow subscriber.

Addressing: a message goes to everyone, or ``to`` one party (``send(..., to=k)``: a batch that
only worker k runs and frees). A ``Subscriber(party=k)`` subscribes to the messages for
everyone and for k only, and ZeroMQ filters in the publisher, so the other workers are not
woken at all: with many workers on few cores a wake costs more than the skip it leads to.
Each addressee's messages are numbered apart (``dtorch.transport.wire``); a subscriber without
a party receives everything. Departure from spec 004 (every worker receives every message):
the numbering, the gap check and the order between the messages a worker receives stay as
the spec has them.

Why XPUB and ``wait_subscribers``: a PUB socket silently drops a message for a subscriber whose
subscription it has not processed yet, and a SUB socket's CONNECTED event (which the subscriber
waits for, spec 004 section 7.1) comes before its subscription has reached the publisher. With
``XPUB_VERBOSE`` the publisher receives every subscriber's subscription; once
``wait_subscribers(n)`` has seen ``n`` of them, the next message reaches all ``n`` subscribers.
The start-up sequence of a process runner is therefore: each worker constructs its
``Subscriber`` (connected), then sends ``b"ready"`` through its ``Pusher``; the controller calls
``wait_subscribers(workers)``, collects one ready ``Envelope`` per worker from its ``Puller``,
and only then publishes its first message.

Example:
    >>> from dtorch.transport.ipc import IpcDirectory
    >>> ipc = IpcDirectory()
    >>> publisher = Publisher(ipc.address("pub"))
    >>> subscriber = Subscriber(publisher.address)
    >>> publisher.wait_subscribers(1)
    >>> publisher.send(b"execute", [b"batch 0"]), publisher.send(b"release", to=3)
    (0, 0)
    >>> message = subscriber.recv()
    >>> message.id, message.kind, bytes(message.parts[0])
    (0, b'execute', b'batch 0')
    >>> subscriber.recv().to          # no party: it receives the messages for every party
    3
    >>> subscriber.close(); publisher.close(); ipc.close()
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from dtorch.errors import TransportError, TransportTimeoutError
from dtorch.transport.security import CurveKeys
from dtorch.transport.sockets import (
    SMALL_MESSAGE,
    Channel,
    Endpoint,
    check_parts,
    send_message,
    to_ms,
    wait_seconds,
)
from dtorch.transport.wire import (
    EVERYONE,
    Message,
    MessageReader,
    Part,
    encode_id,
    subscriptions,
    topic,
)

#: A publisher takes in subscriptions only: a few bytes each (``SMALL_MESSAGE`` caps them).
_PUBLISHER_OPTIONS: dict[int, int | bytes] = {
    zmq.XPUB_VERBOSE: 1, zmq.SNDHWM: 0, zmq.LINGER: 0, zmq.MAXMSGSIZE: SMALL_MESSAGE,
}  # fmt: skip
_SUBSCRIBER_OPTIONS: dict[int, int | bytes] = {zmq.RCVHWM: 0, zmq.LINGER: 0}
_SUBSCRIBE = 1  # first byte of an XPUB subscription message (0 is an unsubscription)
#: The subscriptions that stand for one subscriber (it makes exactly one of them, last).
_COUNTED = (bytes([_SUBSCRIBE]), bytes([_SUBSCRIBE]) + topic(EVERYONE))
_WAIT_SLICE_S = 0.02  # wait_subscribers holds the socket lock this long at most per poll


class Publisher(Channel):
    """The controller's end of the broadcast: binds ``address`` (see the module docstring).

    ``send`` is thread-safe (several controller threads publish; ids follow the order in which
    their sends took the lock) and never blocks. A part of ``LARGE_FRAME`` bytes or more is
    sent without a copy: zmq reads it after ``send`` returns, so the caller must not change such
    a buffer afterwards (``bytes`` cannot change). ``close`` drops messages not yet written to
    a subscriber's connection (LINGER 0): a controller that must deliver a last message waits
    for its workers' answer before closing.
    """

    __slots__ = ("_endpoint", "_next_ids", "_subscriptions")

    def __init__(
        self,
        address: str,
        *,
        context: zmq.Context[Any] | None = None,
        keys: CurveKeys | None = None,
    ) -> None:
        self._endpoint = Endpoint.opened(
            zmq.XPUB, address, context, _PUBLISHER_OPTIONS, Endpoint.bind, keys
        )
        self._next_ids: dict[int, int] = {}  # addressee -> the id of its next message
        self._subscriptions = 0

    def __repr__(self) -> str:
        return f"Publisher({self.address!r}, next_id={self.next_id})"

    @property
    def next_id(self) -> int:
        """The id the next message to everyone will carry (how many went to everyone)."""
        return self._next_ids.get(EVERYONE, 0)

    def send(self, kind: bytes, parts: Sequence[Part] = (), *, to: int = EVERYONE) -> int:
        """Publish one message ``[head, kind, *parts]`` to every subscriber, or only to those
        of party ``to``; the id it used in that addressee's sequence.

        Example:
            >>> from dtorch.transport.ipc import IpcDirectory
            >>> with IpcDirectory() as ipc, Publisher(ipc.address("p")) as publisher:
            ...     publisher.send(b"a"), publisher.send(b"b", [b"x", bytearray(3)], to=0)
            (0, 0)
        """
        check_parts(kind, parts)
        endpoint = self._endpoint
        with endpoint.lock:
            socket = endpoint.live()
            message_id = self._next_ids.get(to, 0)
            send_message(socket, encode_id(message_id, to), kind, parts)  # a bad ``to`` raises
            self._next_ids[to] = message_id + 1
        return message_id

    def wait_subscribers(self, count: int, timeout_s: float | None = None) -> None:
        """Return once ``count`` subscriptions have arrived since this publisher was created.

        TransportTimeoutError (naming how many arrived) after ``timeout_s`` seconds, by default
        ``GlobalOption.get_zmq_timeout_second()``. A subscriber that reconnects subscribes again,
        so count each subscriber once by waiting before the first message.

        Example:
            >>> from dtorch.transport.ipc import IpcDirectory
            >>> with IpcDirectory() as ipc, Publisher(ipc.address("p")) as publisher:
            ...     publisher.wait_subscribers(0)
            ...     publisher.wait_subscribers(1, timeout_s=0.05)
            Traceback (most recent call last):
            ...
            dtorch.errors.TransportTimeoutError: publisher at ipc://... saw 0 of 1 ...
        """
        seconds = wait_seconds(timeout_s)
        deadline = time.monotonic() + seconds
        endpoint = self._endpoint
        while True:
            endpoint.check_open()
            with endpoint.lock:  # held one slice at most: senders and close need it too
                socket = endpoint.live()
                self._drain_subscriptions(socket)
                if self._subscriptions >= count:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TransportTimeoutError(
                        f"publisher at {self.address} saw {self._subscriptions} of {count} "
                        f"subscription(s) within {seconds:g} s"
                    )
                socket.poll(to_ms(min(remaining, _WAIT_SLICE_S)), zmq.POLLIN)

    def _drain_subscriptions(self, socket: zmq.Socket[Any]) -> None:
        while True:
            try:
                frame = socket.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if bytes(frame) in _COUNTED:  # one per subscriber, whatever its party
                self._subscriptions += 1

    def close(self) -> None:
        """Close the socket (and the context it owns); idempotent."""
        self._endpoint.close(0)


def _connect_when_connected(endpoint: Endpoint, seconds: float, secure: bool) -> None:
    """Connect and wait for the monitor's CONNECTED event (the monitor is gone afterwards);
    a CURVE connection waits for its handshake instead, which fails fast on a wrong key."""
    socket = endpoint.socket
    done = zmq.EVENT_HANDSHAKE_SUCCEEDED if secure else zmq.EVENT_CONNECTED
    failed = zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    monitor = socket.get_monitor_socket(done | (failed if secure else 0))
    try:
        endpoint.connect()
        event = 0
        if monitor.poll(to_ms(seconds), zmq.POLLIN):
            event = recv_monitor_message(monitor)["event"]
    finally:
        socket.disable_monitor()
        monitor.close(0)
    if event & failed:
        raise TransportError(
            f"the publisher at {endpoint.address} refused this subscriber's CURVE handshake "
            "(the program secrets differ)"
        )
    if not event:
        why = "no publisher is bound there" + (", or it refused this program's keys" * secure)
        raise TransportTimeoutError(
            f"subscriber could not connect to {endpoint.address} within {seconds:g} s ({why})"
        )


class Subscriber(Channel):
    """A worker's end of the broadcast: connects to ``address``, receives every message, or
    with ``party`` those for everyone and for that party (see the module docstring).

    The constructor returns once the connection is made (the CONNECTED event), or raises
    TransportTimeoutError after ``timeout_s`` (default: the zmq timeout of GlobalOption).
    ``poll`` and ``recv`` check each id (see ``MessageReader``): a gap or a malformed message
    raises MessageGapError, then and on every later call. ``join_late``: the first message
    may have any id (a channel that ran before this subscriber joined). Meant for one
    receiving thread; a ``close`` from another thread returns within 0.1 s, and a ``poll``
    waiting then raises TransportError (closed).
    """

    __slots__ = ("_endpoint", "_reader")

    def __init__(
        self,
        address: str,
        *,
        context: zmq.Context[Any] | None = None,
        timeout_s: float | None = None,
        keys: CurveKeys | None = None,
        join_late: bool = False,
        party: int | None = None,
    ) -> None:
        seconds = wait_seconds(timeout_s)

        # the publisher counts a subscriber at its subscription to everyone's topic, so the
        # party's own must reach it first: libzmq sends a new connection's subscriptions in
        # byte order (not in the order they were set), and topic(EVERYONE) is ff ff ff ff,
        # after every party's; ``subscriptions`` lists them in that order too
        def attach(endpoint: Endpoint) -> None:
            for prefix in subscriptions(party):
                endpoint.socket.setsockopt(zmq.SUBSCRIBE, prefix)
            _connect_when_connected(endpoint, seconds, keys is not None)

        self._endpoint = Endpoint.opened(
            zmq.SUB, address, context, _SUBSCRIBER_OPTIONS, attach, keys
        )
        self._reader = MessageReader(address, join_late=join_late, party=party)

    def __repr__(self) -> str:
        return f"Subscriber({self.address!r}, expected_id={self._reader.expected})"

    def poll(self, timeout_s: float) -> Message | None:
        """The next message, or None if none arrives within ``timeout_s`` seconds.

        Example:
            >>> from dtorch.transport.ipc import IpcDirectory
            >>> with IpcDirectory() as ipc, Publisher(ipc.address("p")) as publisher:
            ...     with Subscriber(publisher.address) as subscriber:
            ...         subscriber.poll(0.01) is None
            True
        """
        self._reader.raise_if_failed()
        return self._endpoint.receive(wait_seconds(timeout_s), self._reader.read)

    def recv(self, timeout_s: float | None = None) -> Message:
        """The next message; TransportTimeoutError if none arrives within ``timeout_s`` seconds
        (by default ``GlobalOption.get_zmq_timeout_second()``)."""
        seconds = wait_seconds(timeout_s)
        message = self.poll(seconds)
        if message is None:
            raise TransportTimeoutError(
                f"subscriber of {self.address} received no message within {seconds:g} s "
                f"(waiting for id {self._reader.expected})"
            )
        return message

    def close(self) -> None:
        """Close the socket (and the context it owns); idempotent."""
        self._endpoint.close(0)
