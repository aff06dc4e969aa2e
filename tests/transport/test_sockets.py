"""What only the real sockets have: connecting (CONNECTED, late binds, nobody there), contexts
passed in or owned, bind errors, and that closing leaves no thread behind."""

from __future__ import annotations

import os
import threading
import time

import pytest
import zmq

from dtorch.errors import TransportError, TransportTimeoutError
from dtorch.transport import LARGE_FRAME, Publisher, Puller, Pusher, Subscriber

pytestmark = pytest.mark.timeout(60)


def os_threads() -> int:
    """Threads of this process, libzmq's I/O threads included (Python does not list those)."""
    return len(os.listdir("/proc/self/task"))


def one_round(ipc) -> None:
    """Every kind of socket, used once and closed."""
    with (
        Publisher(ipc.address("pub")) as publisher,
        Puller(ipc.address("pull")) as puller,
        Subscriber(publisher.address) as subscriber,
        Pusher(puller.address, 1) as pusher,
    ):
        publisher.wait_subscribers(1)
        publisher.send(b"big", [bytes(LARGE_FRAME)])  # the zero-copy path
        assert subscriber.recv().parts[0].nbytes == LARGE_FRAME
        pusher.send(b"ready", [bytes(LARGE_FRAME)])
        assert puller.recv().sender == 1


def test_closing_leaves_no_thread_behind(ipc):
    one_round(ipc)  # pyzmq starts its one zero-copy garbage-collector thread on first use
    before_os, before_py = os_threads(), threading.active_count()
    for _ in range(5):
        one_round(ipc)
    assert os_threads() <= before_os
    assert threading.active_count() <= before_py


def test_subscriber_with_nobody_bound_times_out_naming_the_address(ipc):
    address = ipc.address("nobody")
    threads = os_threads()
    start = time.monotonic()
    with pytest.raises(
        TransportTimeoutError, match=rf"could not connect to {address} within 0.3 s"
    ):
        Subscriber(address, timeout_s=0.3)
    assert 0.29 <= time.monotonic() - start < 3.0
    assert os_threads() <= threads  # its context (and the monitor) are gone


def test_subscriber_waits_for_a_publisher_that_binds_later(ipc):
    address = ipc.address("later")
    made: list[Subscriber] = []
    thread = threading.Thread(target=lambda: made.append(Subscriber(address, timeout_s=5.0)))
    thread.start()
    time.sleep(0.3)
    with Publisher(address) as publisher:
        thread.join(5.0)
        assert made, "the subscriber did not connect to a publisher bound after it started"
        publisher.wait_subscribers(1)
        publisher.send(b"hello")
        assert made[0].recv().kind == b"hello"
        made[0].close()


def test_pusher_sends_to_a_puller_that_binds_later(ipc):
    address = ipc.address("later")
    with Pusher(address, 4, timeout_s=5.0) as pusher:
        timer = threading.Timer(0.3, lambda: holder.append(Puller(address)))
        holder: list[Puller] = []
        timer.start()
        pusher.send(b"ready")  # waits until the puller is there
        timer.join()
        with holder[0] as puller:
            assert puller.recv().sender == 4


def test_a_shared_context_is_left_running(ipc):
    context: zmq.Context = zmq.Context()
    try:
        publisher = Publisher(ipc.address("pub"), context=context)
        subscriber = Subscriber(publisher.address, context=context)
        puller = Puller(ipc.address("pull"), context=context)
        pusher = Pusher(puller.address, 0, context=context)  # the controller's own pusher
        publisher.wait_subscribers(1)
        publisher.send(b"x")
        pusher.send(b"y")
        assert subscriber.recv().kind == b"x" and puller.recv().kind == b"y"
        for thing in (pusher, puller, subscriber, publisher):
            thing.close()
        assert not context.closed
        context.socket(zmq.PAIR).close()  # still usable
    finally:
        context.term()


def test_bind_errors_name_the_address(ipc):
    address = f"ipc://{ipc.path}/no-such-dir/x.sock"
    threads = os_threads()
    with pytest.raises(TransportError, match=f"cannot bind {address}: No such file"):
        Publisher(address)
    with pytest.raises(TransportError, match=f"cannot bind {address}"):
        Puller(address)
    assert os_threads() <= threads
    with pytest.raises(TransportError, match="'transport://where'"):
        Publisher("no-scheme")
    with pytest.raises(TransportError, match="cannot connect to"):
        Pusher("nonsense://x", 0)


def test_a_second_bind_of_one_ipc_path_replaces_the_first(ipc):
    """libzmq unlinks an existing socket file before binding: why every address is random."""
    address = ipc.address("twice")
    with Puller(address) as first, Puller(address) as second, Pusher(address, 0) as pusher:
        pusher.send(b"where")
        assert second.recv().kind == b"where"
        assert first.poll(0.1) is None


def test_socket_files_stay_until_the_directory_closes(ipc):
    """libzmq leaves a bound ipc socket's file behind: IpcDirectory is what removes them."""
    Puller(ipc.address("pull")).close()
    assert len(os.listdir(ipc.path)) == 1


def test_a_report_sent_just_before_close_is_delivered(ipc):
    with Puller(ipc.address("pull")) as puller:
        for i in range(20):
            pusher = Pusher(puller.address, i)
            pusher.send(b"bye", [bytes(1 << 20)])
            pusher.close()  # lingers until the message is written
        assert sorted(puller.recv().sender for _ in range(20)) == list(range(20))
