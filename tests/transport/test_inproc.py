"""What is particular to the twins (copies, late subscribers, a closed puller), and that the real
classes and the twins all satisfy the protocols the runtime is typed against."""

from __future__ import annotations

import threading
import time

import pytest

from dtorch.errors import MessageGapError, TransportError, TransportTimeoutError
from dtorch.transport import (
    InProcPublisher,
    InProcPuller,
    Publisher,
    PublisherLike,
    Puller,
    PullerLike,
    Pusher,
    PusherLike,
    Subscriber,
    SubscriberLike,
)

pytestmark = pytest.mark.timeout(30)


def test_sending_copies_the_parts():
    publisher = InProcPublisher()
    subscriber = publisher.subscribe()
    buffer = bytearray(b"before")
    publisher.send(b"k", [buffer])
    buffer[:] = b"after!"
    assert bytes(subscriber.recv().parts[0]) == b"before"
    puller = InProcPuller()
    puller.pusher(0).send(b"k", [buffer])
    buffer[:] = b"later!"
    assert bytes(puller.recv().parts[0]) == b"after!"


def test_a_subscriber_sees_only_later_messages():
    publisher = InProcPublisher()
    early = publisher.subscribe()
    publisher.send(b"one")
    late = publisher.subscribe()
    publisher.send(b"two")
    assert [early.recv().kind, early.recv().kind] == [b"one", b"two"]
    assert early.poll(0.0) is None
    with pytest.raises(MessageGapError, match="expected message id 0, got 1"):
        late.poll(0.0)  # it got "two" only, and like a real late joiner it fails on it


def test_a_closed_subscriber_is_dropped_by_its_publisher():
    publisher = InProcPublisher()
    subscriber = publisher.subscribe()
    subscriber.close()
    publisher.send(b"nobody listens")
    with pytest.raises(TransportError, match="closed"):
        subscriber.poll(0.0)
    publisher.wait_subscribers(1)  # a subscription counts once made


def test_wait_subscribers_wakes_when_the_publisher_closes():
    publisher = InProcPublisher()
    threading.Timer(0.1, publisher.close).start()
    start = time.monotonic()
    with pytest.raises(TransportError, match="closed"):
        publisher.wait_subscribers(1, timeout_s=5.0)
    assert time.monotonic() - start < 2.0


def test_a_waiting_poll_wakes_on_a_message():
    publisher = InProcPublisher()
    subscriber = publisher.subscribe()
    threading.Timer(0.1, lambda: publisher.send(b"wake")).start()
    start = time.monotonic()
    assert subscriber.recv(timeout_s=5.0).kind == b"wake"
    assert time.monotonic() - start < 2.0


def test_send_raw_on_a_twin_pusher_and_closed_twins():
    puller = InProcPuller()
    pusher = puller.pusher(1, timeout_s=0.1)
    pusher.send_raw([b"\x09\0\0\0", b"raw"])
    assert puller.recv().sender == 9
    puller.close()
    with pytest.raises(TransportTimeoutError, match="the puller is closed"):
        pusher.send(b"x")


def test_every_implementation_satisfies_its_protocol(ipc):
    publisher, puller = InProcPublisher(), InProcPuller()
    assert isinstance(publisher, PublisherLike)
    assert isinstance(publisher.subscribe(), SubscriberLike)
    assert isinstance(puller, PullerLike)
    assert isinstance(puller.pusher(0), PusherLike)
    with (
        Publisher(ipc.address("pub")) as real_publisher,
        Puller(ipc.address("pull")) as real,
        Subscriber(real_publisher.address) as sub,
        Pusher(real.address, 0) as push,
    ):
        assert isinstance(real_publisher, PublisherLike) and isinstance(sub, SubscriberLike)
        assert isinstance(real, PullerLike) and isinstance(push, PusherLike)
