"""PUSH-PULL on the real sockets and on the twins: envelopes, several pushers, timeouts,
malformed messages, large frames, sender numbers, misuse."""

from __future__ import annotations

import time

import pytest

from dtorch.errors import TransportError, TransportTimeoutError
from dtorch.transport import Envelope
from dtorch.transport.wire import MAX_FRAME
from tests.interrupted_wait import assert_close_ends_the_wait
from tests.thread_runner import on_threads
from tests.transport.conftest import _KITS

pytestmark = pytest.mark.timeout(60)


def test_envelope_carries_sender_kind_and_parts(kit):
    puller = kit.puller()
    pusher = kit.pusher(puller, 7)
    assert pusher.sender == 7 and pusher.address == puller.address
    pusher.send(b"ready", [b"cpu:0", bytearray(b"cpu:1")])
    pusher.send(b"empty")
    envelope = puller.recv()
    assert (envelope.sender, envelope.kind) == (7, b"ready")
    assert [bytes(part) for part in envelope.parts] == [b"cpu:0", b"cpu:1"]
    assert all(isinstance(part, memoryview) for part in envelope.parts)
    assert puller.recv() == Envelope(7, b"empty", ())


def test_several_pushers_into_one_puller(kit):
    puller = kit.puller()
    pushers = [kit.pusher(puller, sender) for sender in range(4)]
    count = 200

    def report(sender: int) -> None:
        for i in range(count):
            pushers[sender].send(b"done", [i.to_bytes(4, "little")])

    on_threads(range(4), report)
    envelopes = [puller.recv() for _ in range(4 * count)]
    for sender in range(4):
        numbers = [int.from_bytes(e.parts[0], "little") for e in envelopes if e.sender == sender]
        assert numbers == list(range(count))  # each pusher's messages in its order
    assert puller.poll(0.01) is None


def test_one_pusher_from_several_threads(kit):
    puller = kit.puller()
    pusher = kit.pusher(puller, 1)
    on_threads(range(4), lambda t: [pusher.send(b"t%d" % t, [b"x" * 100]) for _ in range(100)])
    envelopes = [puller.recv() for _ in range(400)]
    assert sorted({e.kind for e in envelopes}) == [b"t0", b"t1", b"t2", b"t3"]
    assert all(bytes(e.parts[0]) == b"x" * 100 for e in envelopes)


def test_pusher_without_a_puller_times_out_clearly(kit, ipc):
    if kit.name == "zmq":
        from dtorch.transport import Pusher

        pusher = Pusher(ipc.address("nobody"), 3, timeout_s=0.3)
    else:
        puller = kit.puller()
        pusher = kit.pusher(puller, 3, timeout_s=0.3)
        puller.close()
    start = time.monotonic()
    with pytest.raises(TransportTimeoutError, match=r"pusher 3 could not queue a b'ready' message"):
        pusher.send(b"ready")
    assert 0.29 <= time.monotonic() - start < 3.0
    pusher.close()


def test_poll_returns_none_and_recv_times_out_naming_the_address(kit):
    puller = kit.puller()
    assert puller.poll(0.1) is None
    with pytest.raises(TransportTimeoutError, match=rf"puller at {puller.address} .* 0.2 s"):
        puller.recv(timeout_s=0.2)


@pytest.mark.parametrize(
    ("frames", "match"),
    [
        ([b"lonely"], "a message of 1 frame"),
        ([b"abc", b"ready"], "a sender frame of 3 bytes"),
        ([b"\x01\0\0\x80", b"value"], "a message in pieces with no layout"),
        ([b"\x01\0\0\x80", b"value", b"\x02\0\0\0", b"x"], r"layout \[2\] does not match"),
        ([b"\x01\0\0\x80", b"value", b"\0\0\0\0"], r"layout \[0\] does not match"),
        ([b"\x01\0\0\x80", b"value", b"\x01\0\0", b"x"], r"layout \[1\] does not match"),
        ([b"\x01\0\0\x80", b"value", b""], r"layout \[\] does not match its 0"),
        (
            [b"\x01\0\0\x80", b"value", b"\x01\0\0\0" * 20, b"x"],
            r"\[1, 1, 1, 1, 1, 1, 1, 1\] \(\+12\)",
        ),
    ],
    ids=[
        "one-frame",
        "short-sender",
        "no-layout",
        "too-few",
        "zero",
        "ragged-layout",
        "empty",
        "long",
    ],
)
def test_malformed_messages_raise_and_the_puller_goes_on(kit, frames, match):
    puller = kit.puller()
    raw = kit.raw_pusher(puller)
    raw.send_raw(frames)
    raw.send_raw([b"\x05\0\0\0", b"fine"])
    with pytest.raises(TransportError, match=match):
        puller.recv()
    assert puller.recv().sender == 5


def test_large_frames(kit):
    puller = kit.puller()
    big = bytes(range(256)) * (8 * 1024 * 1024 // 256)
    kit.pusher(puller, 0).send(b"value", [big, b"tail"])
    envelope = puller.recv()
    assert bytes(envelope.parts[0]) == big and bytes(envelope.parts[1]) == b"tail"


@pytest.mark.parametrize(
    "sizes",
    [(0,), (MAX_FRAME,), (MAX_FRAME + 1, 0), (3, 2 * MAX_FRAME, 5), (3 * MAX_FRAME + 7,)],
    ids=["empty", "one-frame", "just-over", "between-small-ones", "uneven"],
)
def test_parts_larger_than_a_frame_travel_in_pieces_and_arrive_whole(kit, sizes):
    """A puller takes frames of at most MAX_FRAME (so an unauthenticated peer's handshake
    is bounded too): a pusher sends larger parts in pieces, the puller joins them."""
    puller = kit.puller()
    parts = [bytes([index + 1]) * size for index, size in enumerate(sizes)]
    parts = [bytearray(p) if index % 2 else p for index, p in enumerate(parts)]
    kit.pusher(puller, 7).send(b"value", parts)
    envelope = puller.recv()
    assert envelope.sender == 7 and envelope.kind == b"value"
    assert [bytes(part) for part in envelope.parts] == [bytes(p) for p in parts]


@pytest.mark.parametrize("kind", sorted(_KITS))
def test_a_pusher_of_a_larger_frame_than_the_puller_takes_is_dropped(ipc, kind):
    """On the real sockets only: the twin has no socket limit to check."""
    kit = _KITS[kind](ipc)
    try:
        puller = kit.puller()
        raw = kit.raw_pusher(puller)
        raw.send_raw([b"\x05\0\0\0", b"big", bytes(MAX_FRAME + 1024)])
        assert puller.poll(1.0) is None  # libzmq drops the connection with the frame
    finally:
        kit.close()


@pytest.mark.parametrize("sender", [-1, 1 << 31, 1.5])
def test_sender_must_fit_31_bits(kit, sender):
    """The sender frame's top bit says the message travels in pieces."""
    puller = kit.puller()
    with pytest.raises(TransportError, match=r"a sender is an integer in 0..2147483647"):
        kit.pusher(puller, sender)


def test_largest_sender(kit):
    puller = kit.puller()
    kit.pusher(puller, (1 << 31) - 1).send(b"k", [bytes(MAX_FRAME + 1)])
    assert puller.recv().sender == (1 << 31) - 1


def test_close_is_idempotent_and_use_after_close_fails(kit):
    puller = kit.puller()
    pusher = kit.pusher(puller, 0)
    pusher.close()
    pusher.close()
    with pytest.raises(TransportError, match="closed"):
        pusher.send(b"late")
    puller.close()
    puller.close()
    with pytest.raises(TransportError, match="closed"):
        puller.poll(0.0)


def test_close_from_another_thread_wakes_a_waiting_poll(kit):
    puller = kit.puller()
    assert_close_ends_the_wait(lambda: puller.poll(10.0), puller.close, TransportError)
