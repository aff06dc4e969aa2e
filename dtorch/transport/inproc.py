"""In-process twins of the four sockets: the same methods and semantics, no sockets, no threads.

For unit tests of code that uses the transport (a worker loop run in a thread, a controller
collecting reports). The twins carry the same frames as the wire (``dtorch.transport.wire``)
and read them with the same code, so ids are checked exactly as on the real sockets: a
subscriber made after some messages were sent sees only later ones (like a late joiner, it
then fails with MessageGapError unless it came before message 0). Sending copies every part
into fresh ``bytes``, so a caller cannot share a mutable buffer with a receiver by accident.
Everything is thread-safe, and every wait honours its timeout (default: the zmq timeout of
GlobalOption). Test hooks the real sockets lack: ``InProcPublisher.skip_ids`` (force a gap)
and ``send_raw`` on the publisher and the pusher (send arbitrary, even malformed, frames).

Example:
    >>> publisher = InProcPublisher()
    >>> subscriber = publisher.subscribe()
    >>> publisher.wait_subscribers(1)
    >>> publisher.send(b"execute", [b"batch"])
    0
    >>> message = subscriber.recv()
    >>> message.id, message.kind, bytes(message.parts[0])
    (0, b'execute', b'batch')
    >>> puller = InProcPuller()
    >>> puller.pusher(2).send(b"ready", [b"cpu:0"])
    >>> puller.recv().sender
    2
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Sequence

from dtorch.errors import TransportError, TransportTimeoutError
from dtorch.transport.sockets import wait_seconds
from dtorch.transport.wire import (
    EVERYONE,
    Envelope,
    Message,
    MessageReader,
    Part,
    as_part,
    check_kind,
    encode_id,
    encode_sender,
    push_frames,
    read_envelope,
    subscriptions,
    topic,
)

_NUMBERS = itertools.count()
Frames = tuple[bytes, ...]


def _copies(parts: Sequence[Part]) -> Frames:
    return tuple(bytes(as_part(part, i)) for i, part in enumerate(parts))


def _closed_error(what: str) -> TransportError:
    return TransportError(f"the socket at {what} is closed")


class _Inbox:
    """A thread-safe FIFO of messages (frame tuples) with timed waits; ``close`` wakes every
    waiter, which then raises TransportError (as a real socket closed by another thread)."""

    __slots__ = ("_address", "_changed", "_closed", "_items")

    def __init__(self, address: str) -> None:
        self._address = address
        self._changed = threading.Condition()
        self._items: deque[Frames] = deque()
        self._closed = False

    def put(self, frames: Frames) -> bool:
        """Queue ``frames``; False if the inbox is closed."""
        with self._changed:
            if self._closed:
                return False
            self._items.append(frames)
            self._changed.notify()
            return True

    def get(self, timeout_s: float) -> Frames | None:
        with self._changed:
            ready = self._changed.wait_for(lambda: self._items or self._closed, timeout_s)
            if self._closed:
                raise _closed_error(self._address)
            return self._items.popleft() if ready else None

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()


class InProcSubscriber:
    """The twin of ``Subscriber``, made by ``InProcPublisher.subscribe``."""

    __slots__ = ("_inbox", "_publisher", "_reader", "_topics")

    def __init__(self, publisher: InProcPublisher, party: int | None) -> None:
        self._publisher = publisher
        self._inbox = _Inbox(publisher.address)
        self._reader = MessageReader(publisher.address, party=party)
        self._topics = subscriptions(party)

    def __repr__(self) -> str:
        return f"InProcSubscriber({self.address!r}, expected_id={self._reader.expected})"

    @property
    def address(self) -> str:
        """The publisher's address."""
        return self._publisher.address

    def poll(self, timeout_s: float) -> Message | None:
        """The next message, or None if none arrives within ``timeout_s`` seconds."""
        self._reader.raise_if_failed()
        frames = self._inbox.get(wait_seconds(timeout_s))
        return None if frames is None else self._reader.read(frames)

    def recv(self, timeout_s: float | None = None) -> Message:
        """The next message; TransportTimeoutError if none arrives within ``timeout_s``."""
        seconds = wait_seconds(timeout_s)
        message = self.poll(seconds)
        if message is None:
            raise TransportTimeoutError(
                f"subscriber of {self.address} received no message within {seconds:g} s "
                f"(waiting for id {self._reader.expected})"
            )
        return message

    def close(self) -> None:
        """Stop receiving (a waiting ``poll`` raises TransportError); idempotent."""
        self._inbox.close()
        self._publisher._unsubscribe(self)

    def _deliver(self, frames: Frames) -> None:
        """Queue ``frames`` if this subscriber's topics take them (ZeroMQ's prefix match)."""
        if frames[0].startswith(self._topics):
            self._inbox.put(frames)


class InProcPublisher:
    """The twin of ``Publisher``: ``subscribe()`` makes a connected subscriber."""

    __slots__ = ("_address", "_changed", "_closed", "_next_ids", "_subscribers", "_subscriptions")

    def __init__(self) -> None:
        self._address = f"inproc://dtorch-publisher-{next(_NUMBERS)}"
        self._changed = threading.Condition()
        self._subscribers: list[InProcSubscriber] = []
        self._next_ids: dict[int, int] = {}  # addressee -> the id of its next message
        self._subscriptions = 0
        self._closed = False

    def __repr__(self) -> str:
        return f"InProcPublisher({self._address!r}, next_id={self.next_id})"

    @property
    def address(self) -> str:
        """A name for error messages (no socket is bound)."""
        return self._address

    @property
    def next_id(self) -> int:
        """The id the next message to everyone will carry."""
        return self._next_ids.get(EVERYONE, 0)

    def subscribe(self, party: int | None = None) -> InProcSubscriber:
        """A new subscriber; it receives the messages sent from now on (with ``party``: those
        for everyone and for that party)."""
        with self._changed:
            self._check_open()
            subscriber = InProcSubscriber(self, party)
            self._subscribers.append(subscriber)
            self._subscriptions += 1
            self._changed.notify_all()
        return subscriber

    def send(self, kind: bytes, parts: Sequence[Part] = (), *, to: int = EVERYONE) -> int:
        """Send ``[head, kind, *parts]`` (copied) to every subscriber, or to those of party
        ``to``; the id it used in that addressee's sequence."""
        frames = (check_kind(kind), *_copies(parts))
        topic(to)
        with self._changed:
            self._check_open()
            message_id = self._next_ids.get(to, 0)
            self._deliver((encode_id(message_id, to), *frames))
            self._next_ids[to] = message_id + 1
        return message_id

    def send_raw(self, frames: Sequence[Part]) -> None:
        """Test hook: deliver ``frames`` (copied) as they are, well-formed or not."""
        copies = _copies(frames)
        with self._changed:
            self._check_open()
            self._deliver(copies)

    def skip_ids(self, n: int = 1, *, to: int = EVERYONE) -> None:
        """Test hook: the next id of addressee ``to``'s messages jumps by ``n`` (so its
        subscribers see a gap)."""
        if not isinstance(n, int) or n < 1:
            raise TransportError(f"skip_ids takes a positive number of ids, got {n!r}")
        topic(to)
        with self._changed:
            self._next_ids[to] = self._next_ids.get(to, 0) + n

    def wait_subscribers(self, count: int, timeout_s: float | None = None) -> None:
        """Return once ``count`` subscribers have subscribed since this publisher was made."""
        seconds = wait_seconds(timeout_s)
        with self._changed:
            arrived = self._changed.wait_for(
                lambda: self._closed or self._subscriptions >= count, seconds
            )
            self._check_open()
            if not arrived:
                raise TransportTimeoutError(
                    f"publisher at {self._address} saw {self._subscriptions} of {count} "
                    f"subscription(s) within {seconds:g} s"
                )

    def close(self) -> None:
        """Stop publishing (subscribers simply receive nothing more); idempotent."""
        with self._changed:
            self._closed = True
            self._subscribers.clear()
            self._changed.notify_all()

    def _check_open(self) -> None:
        if self._closed:
            raise _closed_error(self._address)

    def _deliver(self, frames: Frames) -> None:
        for subscriber in self._subscribers:
            subscriber._deliver(frames)

    def _unsubscribe(self, subscriber: InProcSubscriber) -> None:
        with self._changed:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)


class InProcPuller:
    """The twin of ``Puller``: ``pusher(sender)`` makes a connected pusher."""

    __slots__ = ("_address", "_inbox")

    def __init__(self) -> None:
        self._address = f"inproc://dtorch-puller-{next(_NUMBERS)}"
        self._inbox = _Inbox(self._address)

    def __repr__(self) -> str:
        return f"InProcPuller({self._address!r})"

    @property
    def address(self) -> str:
        """A name for error messages (no socket is bound)."""
        return self._address

    def pusher(self, sender: int, *, timeout_s: float | None = None) -> InProcPusher:
        """A pusher that sends to this puller as ``sender``."""
        return InProcPusher(self, sender, timeout_s)

    def poll(self, timeout_s: float) -> Envelope | None:
        """The next report, or None if none arrives within ``timeout_s`` seconds."""
        frames = self._inbox.get(wait_seconds(timeout_s))
        return None if frames is None else read_envelope(frames, self._address)

    def recv(self, timeout_s: float | None = None) -> Envelope:
        """The next report; TransportTimeoutError if none arrives within ``timeout_s``."""
        seconds = wait_seconds(timeout_s)
        envelope = self.poll(seconds)
        if envelope is None:
            raise TransportTimeoutError(
                f"puller at {self._address} received no message within {seconds:g} s"
            )
        return envelope

    def close(self) -> None:
        """Stop receiving: later sends time out as on a real pusher; idempotent."""
        self._inbox.close()

    def _deliver(self, frames: Frames) -> bool:
        return self._inbox.put(frames)


class InProcPusher:
    """The twin of ``Pusher``, made by ``InProcPuller.pusher``; thread-safe."""

    __slots__ = ("_closed", "_puller", "_sender", "_sender_frame", "_timeout_s")

    def __init__(self, puller: InProcPuller, sender: int, timeout_s: float | None) -> None:
        self._sender_frame = encode_sender(sender)
        self._puller, self._sender = puller, sender
        self._timeout_s = wait_seconds(timeout_s)
        self._closed = False

    def __repr__(self) -> str:
        return f"InProcPusher({self.address!r}, sender={self._sender})"

    @property
    def address(self) -> str:
        """The puller's name."""
        return self._puller.address

    @property
    def sender(self) -> int:
        """The sender number every message of this pusher carries."""
        return self._sender

    def send(self, kind: bytes, parts: Sequence[Part] = ()) -> None:
        """Queue ``[sender, kind, *parts]`` (copied); a closed puller times out like a gone one."""
        head, frames = push_frames(self._sender_frame, parts)
        self._push((head, check_kind(kind), *_copies(frames)), kind)

    def send_raw(self, frames: Sequence[Part]) -> None:
        """Test hook: deliver ``frames`` (copied) as they are, well-formed or not."""
        self._push(_copies(frames), b"raw")

    def close(self) -> None:
        """Stop sending; idempotent."""
        self._closed = True

    def _push(self, frames: Frames, kind: bytes) -> None:
        if self._closed:
            raise _closed_error(self.address)
        if not self._puller._deliver(frames):
            time.sleep(self._timeout_s)  # a real pusher waits for a puller that never comes
            raise TransportTimeoutError(
                f"pusher {self._sender} could not queue a {kind!r} message for "
                f"{self.address} within {self._timeout_s:g} s (the puller is closed)"
            )
