"""PUB-SUB on the real sockets and on the twins: order and ids, fan-out, the first message,
gaps and malformed messages, timeouts, large zero-copy frames, concurrent senders, misuse."""

from __future__ import annotations

import threading
import time

import pytest

from dtorch.errors import MessageGapError, TransportError, TransportTimeoutError
from dtorch.transport import LARGE_FRAME, Message
from dtorch.transport.wire import EVERYONE, MessageReader, encode_id
from tests.interrupted_wait import assert_close_ends_the_wait
from tests.thread_runner import on_threads

pytestmark = pytest.mark.timeout(60)


def connected(kit, subscribers=1):
    """A publisher and ``subscribers`` subscribers that are known to receive message 0."""
    publisher = kit.publisher()
    subs = [kit.subscriber(publisher) for _ in range(subscribers)]
    publisher.wait_subscribers(subscribers)
    return publisher, subs


def test_ids_and_order_of_many_messages(kit):
    publisher, (subscriber,) = connected(kit)
    count = 3000
    ids = [publisher.send(b"execute", [i.to_bytes(4, "little")]) for i in range(count)]
    assert ids == list(range(count))
    received = [subscriber.recv() for _ in range(count)]
    assert [m.id for m in received] == ids
    assert [int.from_bytes(m.parts[0], "little") for m in received] == list(range(count))
    assert {m.kind for m in received} == {b"execute"}
    assert publisher.next_id == count


def test_every_subscriber_gets_every_message_of_one_send(kit):
    publisher, subscribers = connected(kit, subscribers=4)
    for i in range(100):
        publisher.send(b"batch", [b"payload %d" % i, b""])
    for subscriber in subscribers:
        messages = [subscriber.recv() for _ in range(100)]
        assert [m.id for m in messages] == list(range(100))
        assert [bytes(m.parts[0]) for m in messages] == [b"payload %d" % i for i in range(100)]
        assert all(bytes(m.parts[1]) == b"" for m in messages)
        assert subscriber.poll(0.01) is None


def test_message_without_parts(kit):
    publisher, (subscriber,) = connected(kit)
    publisher.send(b"destroy")
    assert subscriber.recv() == Message(0, b"destroy", ())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("subscribers", [1, 3])
def test_first_message_after_wait_subscribers_is_never_lost(kit, subscribers):
    """Fresh pairs each time: the subscription race is at its widest right after connecting."""
    for _ in range(50 if subscribers == 1 else 15):
        publisher = kit.publisher()
        subs = [kit.subscriber(publisher) for _ in range(subscribers)]
        publisher.wait_subscribers(subscribers)
        publisher.send(b"first", [b"x"])
        for subscriber in subs:
            assert subscriber.recv(timeout_s=5.0).kind == b"first"
            subscriber.close()
        publisher.close()


def test_gap_raises_and_stays_raised(kit):
    raw = kit.raw_publisher()
    subscriber = kit.subscriber(raw)
    raw.wait_subscribers(1)
    raw.send_raw([encode_id(0), b"a"])
    raw.send_raw([encode_id(2), b"b"])
    raw.send_raw([encode_id(1), b"c"])
    assert subscriber.recv().id == 0
    with pytest.raises(
        MessageGapError, match=r"expected message id 1, got 2 \(1 message\(s\) lost"
    ):
        subscriber.recv()
    with pytest.raises(MessageGapError, match="got 2"):  # never resynchronised on id 1
        subscriber.poll(1.0)
    with pytest.raises(MessageGapError, match=raw.address):
        subscriber.recv()


def test_skip_ids_forces_a_gap_on_the_twin(ipc):
    from dtorch.transport import InProcPublisher

    publisher = InProcPublisher()
    subscriber = publisher.subscribe()
    publisher.send(b"a")
    publisher.skip_ids(3)
    assert publisher.send(b"b") == 4
    assert subscriber.recv().id == 0
    with pytest.raises(MessageGapError, match=r"expected message id 1, got 4 \(3 message"):
        subscriber.recv()
    with pytest.raises(TransportError, match="positive"):
        publisher.skip_ids(0)


@pytest.mark.parametrize(
    ("frames", "match"),
    [
        ([b"lonely"], "a message of 1 frame"),
        ([b"\0" * 7, b"kind"], "a head frame of 7 bytes"),
        ([b"\0" * 13, b"kind", b"part"], "a head frame of 13 bytes"),
        ([b"\0" * 8, b"kind"], "a head frame of 8 bytes; a head has 12"),
        ([encode_id(1), b"kind"], r"expected message id 0, got 1 .*wait_subscribers"),
    ],
    ids=["one-frame", "short-head", "long-head", "id-without-addressee", "first-not-0"],
)
def test_malformed_messages_raise(kit, frames, match):
    raw = kit.raw_publisher()
    subscriber = kit.subscriber(raw)
    raw.wait_subscribers(1)
    raw.send_raw(frames)
    with pytest.raises(MessageGapError, match=match):
        subscriber.recv()


def test_repeated_id_raises(kit):
    raw = kit.raw_publisher()
    subscriber = kit.subscriber(raw)
    raw.wait_subscribers(1)
    raw.send_raw([encode_id(0), b"a"])
    raw.send_raw([encode_id(0), b"a"])
    subscriber.recv()
    with pytest.raises(MessageGapError, match="repeated or reordered"):
        subscriber.recv()


def test_late_joiner_fails_on_its_first_message(kit):
    publisher = kit.publisher()
    publisher.send(b"before anyone listens")
    subscriber = kit.subscriber(publisher)
    publisher.wait_subscribers(1)
    publisher.send(b"after")
    with pytest.raises(MessageGapError, match="expected message id 0, got 1"):
        subscriber.recv()


def test_poll_returns_none_and_recv_times_out_naming_the_address(kit):
    publisher, (subscriber,) = connected(kit)
    start = time.monotonic()
    assert subscriber.poll(0.2) is None
    assert time.monotonic() - start >= 0.19
    assert subscriber.poll(0) is None
    with pytest.raises(TransportTimeoutError, match=rf"{publisher.address}.* 0.3 s") as caught:
        subscriber.recv(timeout_s=0.3)
    assert isinstance(caught.value, TimeoutError)
    publisher.send(b"still fine")  # a timeout is not a gap
    assert subscriber.recv().id == 0


def test_recv_default_timeout_comes_from_global_option(kit):
    from dtorch.options import GlobalOption

    _, (subscriber,) = connected(kit)
    start = time.monotonic()
    with GlobalOption.override(zmq_timeout_second=0.25), pytest.raises(TransportTimeoutError):
        subscriber.recv()
    assert 0.24 <= time.monotonic() - start < 3.0


def test_wait_subscribers_times_out_naming_how_many_arrived(kit):
    publisher = kit.publisher()
    kit.subscriber(publisher)
    with pytest.raises(TransportTimeoutError, match=r"saw 1 of 2 subscription\(s\) within 0.2 s"):
        publisher.wait_subscribers(2, timeout_s=0.2)
    publisher.wait_subscribers(1, timeout_s=0.2)


def test_wait_subscribers_counts_subscribers_that_come_later(kit):
    publisher = kit.publisher()

    def join_late():
        time.sleep(0.2)
        return kit.subscriber(publisher)

    thread = threading.Thread(target=join_late)
    thread.start()
    publisher.wait_subscribers(1, timeout_s=5.0)
    thread.join()


def test_large_frames_arrive_intact_as_memoryviews(kit):
    publisher, subscribers = connected(kit, subscribers=2)
    big = bytes(range(256)) * (8 * 1024 * 1024 // 256)  # 8 MiB
    parts = [b"small", big, bytearray(b"y" * (LARGE_FRAME - 1)), memoryview(b"z" * LARGE_FRAME)]
    publisher.send(b"tensor", parts)
    for subscriber in subscribers:
        message = subscriber.recv()
        assert all(isinstance(part, memoryview) for part in message.parts)
        assert [part.nbytes for part in message.parts] == [
            5,
            len(big),
            LARGE_FRAME - 1,
            LARGE_FRAME,
        ]
        assert bytes(message.parts[1]) == big
        assert bytes(message.parts[2]) == b"y" * (LARGE_FRAME - 1)
        kept = message.parts[1]
        del message  # the view keeps its frame alive
        assert kept[-1] == 255 and kept.nbytes == len(big)


def test_non_byte_memoryview_parts_are_sent_whole(kit):
    publisher, (subscriber,) = connected(kit)
    words = memoryview(bytearray(LARGE_FRAME * 2)).cast("I")  # len() counts items, not bytes
    publisher.send(b"words", [words])
    assert subscriber.recv().parts[0].nbytes == LARGE_FRAME * 2


def test_bad_arguments_use_no_id(kit):
    publisher, (subscriber,) = connected(kit)
    with pytest.raises(TypeError, match="kind is bytes"):
        publisher.send("execute")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="part 1 of a message is a str"):
        publisher.send(b"k", [b"ok", "not bytes"])  # type: ignore[list-item]
    assert publisher.send(b"k", [b"ok"]) == 0
    assert subscriber.recv().id == 0


def test_concurrent_senders_get_unique_ids_in_order(kit):
    publisher, (subscriber,) = connected(kit)
    per_thread = 300

    def publish(thread: int) -> list[int]:
        return [
            publisher.send(b"t%d" % thread, [i.to_bytes(4, "little")]) for i in range(per_thread)
        ]

    ids = on_threads(range(4), publish)
    assert sorted(i for chunk in ids for i in chunk) == list(range(4 * per_thread))
    received = [subscriber.recv() for _ in range(4 * per_thread)]
    assert [m.id for m in received] == list(range(4 * per_thread))
    for thread in range(4):
        sequence = [
            int.from_bytes(m.parts[0], "little") for m in received if m.kind == b"t%d" % thread
        ]
        assert sequence == list(range(per_thread))


def test_close_is_idempotent_and_use_after_close_fails(kit):
    publisher, (subscriber,) = connected(kit)
    subscriber.close()
    subscriber.close()
    with pytest.raises(TransportError, match="closed"):
        subscriber.poll(0.0)
    publisher.close()
    publisher.close()
    with pytest.raises(TransportError, match="closed"):
        publisher.send(b"late")
    with pytest.raises(TransportError, match="closed"):
        publisher.wait_subscribers(1, timeout_s=0.1)


def test_subscriber_of_a_closed_publisher_receives_nothing(kit):
    publisher, (subscriber,) = connected(kit)
    publisher.send(b"last")
    assert subscriber.recv().kind == b"last"
    publisher.close()
    assert subscriber.poll(0.1) is None


def test_close_from_another_thread_wakes_a_waiting_poll(kit):
    _, (subscriber,) = connected(kit)
    assert_close_ends_the_wait(lambda: subscriber.poll(10.0), subscriber.close, TransportError)


def test_a_message_to_one_party_reaches_its_subscribers_and_those_of_every_party(kit):
    """Addressed messages: party k's subscriber gets everyone's and k's, in send order; a
    subscriber without a party gets all; each addressee's ids count apart."""
    publisher = kit.publisher()
    subs = [kit.subscriber(publisher, party=k) for k in range(3)]
    every = kit.subscriber(publisher)
    publisher.wait_subscribers(4)
    sent = [(publisher.send(b"m", [b"%d" % i], to=to), to) for i, to in enumerate(PLAN)]
    assert [m_id for m_id, _ in sent] == [0, 0, 1, 0, 2, 1, 3]
    for party, subscriber in enumerate(subs):
        mine = [i for i, to in enumerate(PLAN) if to in (EVERYONE, party)]
        got = [subscriber.recv() for _ in mine]
        assert [int(bytes(m.parts[0])) for m in got] == mine
        assert [m.to for m in got] == [PLAN[i] for i in mine]
        assert subscriber.poll(0.05) is None  # nothing addressed to another party arrives
    got = [every.recv() for _ in PLAN]
    assert [(m.id, m.to) for m in got] == [(m_id, to) for m_id, to in sent]
    assert publisher.next_id == 4


PLAN = [EVERYONE, 1, EVERYONE, 0, EVERYONE, 1, EVERYONE]


def test_a_gap_in_one_partys_sequence_is_fatal_for_its_subscriber_only(kit):
    raw = kit.raw_publisher()
    mine, other = kit.subscriber(raw, party=2), kit.subscriber(raw, party=1)
    raw.wait_subscribers(2)
    for frames in ([encode_id(0, to=2), b"a"], [encode_id(0), b"b"], [encode_id(2, to=2), b"c"]):
        raw.send_raw(frames)
    raw.send_raw([encode_id(1), b"d"])
    assert [mine.recv().kind for _ in range(2)] == [b"a", b"b"]
    with pytest.raises(MessageGapError, match=r"expected message id 1 \(to party 2\), got 2"):
        mine.recv()
    assert [other.recv().kind for _ in range(2)] == [b"b", b"d"]


def test_a_stray_addressee_is_refused_by_a_party_reader():
    reader = MessageReader("inproc://doc", party=0)
    with pytest.raises(MessageGapError, match="a message for party 5"):
        reader.read([encode_id(0, to=5), b"x"])


def test_a_bad_addressee_sends_nothing(kit):
    publisher, (subscriber,) = connected(kit)
    for bad in (-1, 1 << 32, "0"):
        with pytest.raises(TransportError, match="an addressee is a party number"):
            publisher.send(b"k", to=bad)  # type: ignore[arg-type]
    assert publisher.send(b"k") == 0
    assert subscriber.recv().id == 0
