"""What the real sockets and their in-process twins both offer, for code typed against either.

Runtime code (the process runner, a worker loop) takes a ``PublisherLike``/``SubscriberLike``/
``PusherLike``/``PullerLike``; production passes ``Publisher``, ``Subscriber``, ``Pusher`` and
``Puller``, unit tests the ``InProc*`` twins. The semantics are those of the real classes; a
test checks that every implementation satisfies its protocol.

Example:
    >>> from dtorch.transport.inproc import InProcPuller
    >>> def drain(puller: PullerLike) -> list[int]:
    ...     senders = []
    ...     while (envelope := puller.poll(0.0)) is not None:
    ...         senders.append(envelope.sender)
    ...     return senders
    >>> puller = InProcPuller()
    >>> puller.pusher(1).send(b"ready"); puller.pusher(0).send(b"ready")
    >>> drain(puller)
    [1, 0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from dtorch.transport.wire import EVERYONE, Envelope, Message, Part


@runtime_checkable
class PublisherLike(Protocol):
    """The controller's broadcast end: ``Publisher`` or ``InProcPublisher``."""

    @property
    def address(self) -> str:
        """Where subscribers find it."""
        ...

    def send(self, kind: bytes, parts: Sequence[Part] = (), *, to: int = EVERYONE) -> int:
        """Publish ``[head, kind, *parts]`` to every subscriber, or to party ``to``'s; the id
        used in that addressee's sequence. Never blocks."""
        ...

    def wait_subscribers(self, count: int, timeout_s: float | None = None) -> None:
        """Return once ``count`` subscriptions arrived in total; TransportTimeoutError otherwise."""
        ...

    def close(self) -> None:
        """Release the publisher; idempotent."""
        ...


@runtime_checkable
class SubscriberLike(Protocol):
    """A worker's broadcast end: ``Subscriber`` or ``InProcSubscriber``."""

    @property
    def address(self) -> str:
        """The publisher's address."""
        ...

    def poll(self, timeout_s: float) -> Message | None:
        """The next message or None after ``timeout_s``; MessageGapError on a gap."""
        ...

    def recv(self, timeout_s: float | None = None) -> Message:
        """The next message; TransportTimeoutError after the timeout, MessageGapError on a gap."""
        ...

    def close(self) -> None:
        """Release the subscriber; idempotent."""
        ...


@runtime_checkable
class PusherLike(Protocol):
    """A worker's report end: ``Pusher`` or ``InProcPusher``."""

    @property
    def address(self) -> str:
        """The puller's address."""
        ...

    @property
    def sender(self) -> int:
        """The sender number every message carries."""
        ...

    def send(self, kind: bytes, parts: Sequence[Part] = ()) -> None:
        """Queue ``[sender, kind, *parts]``; TransportTimeoutError if it cannot be queued."""
        ...

    def close(self) -> None:
        """Release the pusher; idempotent."""
        ...


@runtime_checkable
class PullerLike(Protocol):
    """The controller's report end: ``Puller`` or ``InProcPuller``."""

    @property
    def address(self) -> str:
        """Where pushers find it."""
        ...

    def poll(self, timeout_s: float) -> Envelope | None:
        """The next report or None after ``timeout_s``."""
        ...

    def recv(self, timeout_s: float | None = None) -> Envelope:
        """The next report; TransportTimeoutError after the timeout."""
        ...

    def close(self) -> None:
        """Release the puller; idempotent."""
        ...
