"""The network store's gate (ZeroMQ PLAIN, checked by a ZAP handler at the handshake): a peer
without the program's secret is refused before the coordinator buffers any of its frames, so
large frames with MORE set (a message never finished) cost it nothing; every refusal is
logged, a flood of them in a bounded number of lines; members are served as before, tensors
larger than one frame included."""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager

import pytest
import torch
import zmq
from network_peers import STORE_LOGGER, handover, two_ranks

from dtorch.comm.store import NetworkTensorStore
from dtorch.comm.store.base import Deadline
from dtorch.comm.store.network_gate import USERNAME
from dtorch.comm.store.network_protocol import FRAME_BYTES, Op
from dtorch.errors import CommError
from dtorch.transport.handshakes import SUMMARY_SECONDS
from tests.tcp_table import ESTABLISHED, LISTEN, tcp_sockets

pytestmark = pytest.mark.timeout(60)

#: What every refusal at the gate says (the ZAP handler's and the monitor's lines).
AT_HANDSHAKE = "at the handshake"
#: The most a raw attacker tries to make the coordinator hold, per connection.
ATTACK_MIB = 256
#: How much the process may grow meanwhile (other threads, allocator noise).
SLACK_MIB = 64


def _rss_mib() -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS"))
    return int(line.split()[1]) // 1024


@contextmanager
def _dealer(endpoint: str, password: bytes | None) -> Iterator[zmq.Socket]:
    """A zmq DEALER to ``endpoint``: NULL mechanism, or PLAIN with ``password``."""
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.setsockopt(zmq.SNDTIMEO, 2000)
    if password is not None:
        dealer.setsockopt(zmq.PLAIN_USERNAME, USERNAME)
        dealer.setsockopt(zmq.PLAIN_PASSWORD, password)
    dealer.connect(endpoint)
    try:
        yield dealer
    finally:
        dealer.close(0)


def _raw(endpoint: str, mechanism: bytes) -> socket.socket:
    """A TCP connection that sent a ZMTP 3.0 greeting for ``mechanism`` and read the
    coordinator's."""
    host, port = endpoint.removeprefix("tcp://").rsplit(":", 1)
    raw = socket.create_connection((host, int(port)), timeout=5)
    raw.sendall(b"\xff" + b"\0" * 8 + b"\x7f\x03\x00" + mechanism.ljust(20, b"\0") + b"\0" * 32)
    got = b""
    while len(got) < 64:
        part = raw.recv(64 - len(got))
        if not part:
            break
        got += part
    return raw


def _push(raw: socket.socket, chunks: int) -> int:
    """Send up to ``chunks`` MiB; how many went before the coordinator cut the connection."""
    chunk = b"\0" * (1 << 20)
    for sent in range(chunks):
        try:
            raw.sendall(chunk)
        except OSError:  # reset or closed by the coordinator (or stalled: a timeout)
            return sent
    return chunks


def _null_frames_with_more(endpoint: str) -> int:
    """A NULL-mechanism peer: READY, then 1 MiB frames with MORE set, never the last."""
    with closing(_raw(endpoint, b"NULL")) as raw:
        body = b"\x05READY\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER"
        try:
            raw.sendall(b"\x04" + bytes([len(body)]) + body)
            raw.sendall(b"\x03" + struct.pack(">Q", ATTACK_MIB << 20))  # one long frame, MORE
        except OSError:
            return 0
        return _push(raw, ATTACK_MIB)


def _plain_hello_of_a_gibibyte(endpoint: str) -> int:
    """A PLAIN peer whose HELLO command declares 1 GiB (libzmq would buffer it whole, up to
    MAXMSGSIZE, before the ZAP handler sees it)."""
    with closing(_raw(endpoint, b"PLAIN")) as raw:
        try:
            raw.sendall(b"\x06" + struct.pack(">Q", 1 << 30))
        except OSError:
            return 0
        return _push(raw, ATTACK_MIB)


def test_raw_peers_without_the_secret_make_the_coordinator_hold_nothing(namespace, watch):
    with two_ranks(namespace) as (rank0, rank1):
        before = _rss_mib()
        sent_null = _null_frames_with_more(rank0.endpoint)
        sent_plain = _plain_hello_of_a_gibibyte(rank0.endpoint)
        grown = _rss_mib() - before
        watch.wait_for(AT_HANDSHAKE)  # the NULL peer (the oversized HELLO has no event)
        got = handover(rank1, rank0, "k", torch.arange(6.0))
    assert sent_null < ATTACK_MIB and sent_plain < ATTACK_MIB  # both cut off early
    assert grown < SLACK_MIB, f"the process grew by {grown} MiB"
    assert watch.count("dropped a message") == 0  # nothing was delivered
    assert got.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize("password", [None, b"0" * 64], ids=["NULL", "wrong-password"])
def test_a_zmq_peer_without_the_secret_is_refused_at_the_handshake(namespace, watch, password):
    """Its messages (8 MiB each) never reach the coordinator: nothing is delivered, no session
    made (the memory it could pin is measured with raw peers, above: here the DEALER's own
    queue is in this process too)."""
    frames = [b"\0" * FRAME_BYTES] * 8
    with two_ranks(namespace) as (rank0, rank1):
        with _dealer(rank0.endpoint, password) as dealer:
            for _ in range(4):  # what the DEALER queues before it is refused
                if not _send(dealer, frames):
                    break
            watch.wait_for("wrong password" if password else AT_HANDSHAKE)
            assert not dealer.poll(200)  # no answer of any kind
        assert rank0._coordinator is not None
        assert len(rank0._coordinator._sessions._sessions) == 2  # the two ranks only
        got = handover(rank0, rank1, "k", torch.ones(3))
    assert watch.count("dropped a message") == 0  # nothing was delivered
    assert got.tolist() == [1.0, 1.0, 1.0]


def _send(dealer: zmq.Socket, frames: list[bytes]) -> bool:
    try:
        dealer.send_multipart(frames)
    except zmq.Again:  # no peer to queue for: the handshake was refused
        return False
    return True


def test_a_refusal_at_the_gate_is_a_warning_of_the_coordinator(namespace, watch, caplog):
    caplog.set_level(logging.WARNING, logger=STORE_LOGGER)
    with two_ranks(namespace) as (rank0, _rank1), _dealer(rank0.endpoint, b"1" * 64) as dealer:
        _send(dealer, [b"x"])
        watch.wait_for("wrong password")
    deadline = time.monotonic() + 5.0  # the gate's thread reaches caplog after the watch
    while not (records := [r for r in caplog.records if "wrong password" in r.getMessage()]):
        assert time.monotonic() < deadline, "the refusal never reached caplog"
        time.sleep(0.05)
    assert records and all(r.levelno == logging.WARNING for r in records)
    assert records[0].name == "dtorch.comm.store.network_coordinator"
    assert "127.0.0.1" in records[0].getMessage()  # the peer's address


def test_a_flood_of_refused_handshakes_is_not_a_flood_of_log_lines(namespace, watch):
    started = time.monotonic()
    with two_ranks(namespace) as (rank0, _rank1):
        for _ in range(200):
            _raw(rank0.endpoint, b"NULL").close()
        refusals = rank0._coordinator._refusals
        deadline = time.monotonic() + 30
        while refusals.count < 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        endpoint = rank0.endpoint
    took = time.monotonic() - started
    # the first 100 of this listener's refusals, then a line per SUMMARY_SECONDS at most
    lines = [m for m in list(watch.messages) if AT_HANDSHAKE in m and f"on {endpoint}:" in m]
    assert refusals.count >= 200
    assert 100 <= len(lines) <= 101 + int(took / SUMMARY_SECONDS), (len(lines), took)


def test_tensors_larger_than_a_frame_cross_both_ways(namespace):
    big = torch.randn(FRAME_BYTES // 2 + 7, dtype=torch.float64)  # 4 MiB and 56 bytes
    flags = torch.rand(3 * FRAME_BYTES + 1) < 0.5  # a bool tensor over 4 frames
    with two_ranks(namespace) as (rank0, rank1):
        there = handover(rank0, rank1, "big", big)
        back = handover(rank1, rank0, "flags", flags)
        empty = handover(rank1, rank0, "empty", torch.empty(0, 3))
    assert torch.equal(there, big) and torch.equal(back, flags)
    assert empty.shape == (0, 3)


def test_a_request_header_larger_than_a_frame_is_refused_before_it_is_sent(namespace):
    keys = [f"op1/{index:04d}" + "k" * 4000 for index in range(300)]  # 1.2 MB of keys
    with two_ranks(namespace) as (_rank0, rank1):
        start = time.monotonic()
        with pytest.raises(CommError, match="holds at most 1048576 bytes"):
            rank1._call("end_exchange", [Op.DROP, 1, keys], Deadline(5.0))
        assert time.monotonic() - start < 1.0
        assert rank1.aborted("op1") is None


def test_a_store_opened_again_in_the_same_process_gets_its_own_gate_domain(namespace):
    first = NetworkTensorStore.open("again", 1, 0, namespace, "tcp://127.0.0.1:0")
    first.close()
    with NetworkTensorStore.open("again", 1, 0, namespace, "tcp://127.0.0.1:0") as second:
        second.src_set("k", torch.ones(1), 1)
        assert second.dest_get("k").tolist() == [1.0]
        second.dest_finish_get("k")
        second.src_wait_until_get_finished("k")


def _open_on(port: int) -> list[str]:
    """The states of this machine's TCP sockets whose local port is ``port``, left open:
    listening or connected (TIME_WAIT and the like are a closed socket's)."""
    open_states = (LISTEN, ESTABLISHED)
    return [s.state for s in tcp_sockets() if s.local_port == port and s.state in open_states]


def test_a_stopped_coordinator_closes_its_port_and_connections() -> None:
    """libzmq keeps a socket closed while its monitor is connected and unread: the listener
    and every connection stayed open after ``stop``, until the process ended."""
    from dtorch.comm.store.network_auth import derive_key
    from dtorch.comm.store.network_coordinator import Coordinator
    from dtorch.comm.store.network_gate import client_options, store_context

    key = derive_key(b"s" * 32)
    for _ in range(3):  # the first close in a process went through, the next ones did not
        coordinator = Coordinator(store_context(), "tcp://127.0.0.1:0", "ns/key", 1, key)
        port = int(coordinator.endpoint.rsplit(":", 1)[1])
        peer = store_context().socket(zmq.DEALER)
        for option, value in client_options(key).items():
            peer.setsockopt(option, value)
        peer.connect(coordinator.endpoint)
        deadline = time.monotonic() + 5
        while sorted(_open_on(port)) != ["01", "0A"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(_open_on(port)) == ["01", "0A"]  # listening, and the peer connected
        coordinator.stop()
        while _open_on(port) and time.monotonic() < deadline + 5:
            time.sleep(0.05)
        peer.close(0)
        assert _open_on(port) == []
