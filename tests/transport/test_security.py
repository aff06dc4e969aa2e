"""CURVE on the TCP sockets: holders of the program's secret connect, nobody else gets a frame
through or out; refusals are logged; TCP without keys is refused up front."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import pytest
import zmq

from dtorch.errors import TransportError, TransportTimeoutError
from dtorch.transport import Publisher, Puller, Pusher, Subscriber
from dtorch.transport.security import CurveKeys, check_secret

pytestmark = pytest.mark.timeout(60)

KEYS = CurveKeys.from_secret(os.urandom(32))
OTHER = CurveKeys.from_secret(os.urandom(32))
LOOPBACK = "tcp://127.0.0.1:0"


@pytest.fixture
def context():
    made: zmq.Context[Any] = zmq.Context()
    yield made
    made.destroy(0)


def test_keys_derive_alike_from_one_secret_and_differ_between_secrets():
    secret = os.urandom(32)
    assert CurveKeys.from_secret(secret) == CurveKeys.from_secret(secret)
    assert KEYS.server_public != OTHER.server_public
    assert KEYS.client_public != KEYS.server_public
    assert "secret" not in repr(KEYS).replace("server_public", "").replace("client_public", "")


@pytest.mark.parametrize("bad", [b"short", bytes(33), "x" * 32, None])
def test_a_secret_is_32_bytes(bad):
    with pytest.raises(TransportError, match="32 bytes"):
        check_secret(bad)


@pytest.mark.parametrize("make", [Publisher, Puller])
def test_a_tcp_listener_without_keys_is_refused(make):
    with pytest.raises(TransportError, match="CurveKeys"):
        make(LOOPBACK)


def test_a_tcp_port_zero_binds_a_free_port_and_reports_it():
    with Puller("tcp://127.0.0.2:0", keys=KEYS) as puller:
        host, port = puller.address.removeprefix("tcp://").rsplit(":", 1)
        assert host == "127.0.0.2" and int(port) > 0


def test_subscriber_with_other_keys_gets_nothing_and_is_not_counted():
    with Publisher(LOOPBACK, keys=KEYS) as publisher:
        with pytest.raises(TransportTimeoutError, match="refused this program's keys"):
            Subscriber(publisher.address, keys=OTHER, timeout_s=1.0)
        with pytest.raises(TransportTimeoutError):
            publisher.wait_subscribers(1, timeout_s=0.3)
        with Subscriber(publisher.address, keys=KEYS) as subscriber:
            publisher.wait_subscribers(1)
            publisher.send(b"execute", [b"batch"])
            assert bytes(subscriber.recv().parts[0]) == b"batch"


def test_a_plain_subscriber_reads_nothing_of_a_curve_publisher(context):
    with Publisher(LOOPBACK, keys=KEYS) as publisher:
        spy = context.socket(zmq.SUB)
        spy.setsockopt(zmq.SUBSCRIBE, b"")
        spy.connect(publisher.address)
        with Subscriber(publisher.address, keys=KEYS) as subscriber:
            publisher.wait_subscribers(1)
            for _ in range(5):
                publisher.send(b"execute", [b"secret tensor bytes"])
            assert [subscriber.recv().id for _ in range(5)] == list(range(5))
        assert not spy.poll(300)
        spy.close(0)


@pytest.mark.parametrize("knows_server_key", [False, True])
def test_pusher_with_other_keys_never_delivers(caplog, knows_server_key):
    """Without the secret a client cannot finish the handshake; one that learned the server's
    public key gets through the handshake and is refused (and logged) by the Guard."""
    keys = OTHER
    if knows_server_key:
        keys = CurveKeys(KEYS.server_public, b"", OTHER.client_public, OTHER.client_secret)
    with Puller(LOOPBACK, keys=KEYS) as puller:
        with (
            caplog.at_level(logging.WARNING, "dtorch.transport.security"),
            Pusher(puller.address, 9, keys=keys, timeout_s=0.5) as intruder,
            pytest.raises(TransportTimeoutError),
        ):
            intruder.send(b"report", [b"forged"])
        assert puller.poll(0.2) is None
        refused = any("refused a CURVE client" in r.message for r in caplog.records)
        assert refused == knows_server_key
        with Pusher(puller.address, 1, keys=KEYS) as pusher:
            pusher.send(b"report", [b"real"])
            envelope = puller.recv()
        assert (envelope.sender, bytes(envelope.parts[0])) == (1, b"real")


def test_a_plain_pusher_cannot_inject_into_a_curve_puller(context):
    with Puller(LOOPBACK, keys=KEYS) as puller:
        raw = context.socket(zmq.PUSH)
        raw.setsockopt(zmq.LINGER, 0)
        raw.connect(puller.address)
        raw.send_multipart([(1).to_bytes(4, "little"), b"report", b"forged"], zmq.NOBLOCK)
        assert puller.poll(0.5) is None
        raw.close(0)


def _logged(caplog, text: str, times: int, timeout_s: float = 10.0) -> int:
    """How many records contain ``text``, waiting up to ``timeout_s`` for ``times`` of them
    (the handshake watch logs from its own thread)."""
    deadline = time.monotonic() + timeout_s
    while True:
        count = sum(text in r.getMessage() for r in caplog.records)
        if count >= times or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def test_peers_that_fail_the_handshake_before_zap_are_logged(caplog, context):
    """A NULL-mechanism peer and a CURVE client with a wrong server key never reach the ZAP
    handler: the socket's monitor logs them (rate-limited), with the listener's address."""
    with (
        caplog.at_level(logging.WARNING, "dtorch.transport"),
        Puller(LOOPBACK, keys=KEYS) as puller,
    ):
        plain = context.socket(zmq.PUSH)
        wrong = context.socket(zmq.PUSH)
        for option, value in OTHER.client_options().items():
            wrong.setsockopt(option, value)
        for peer in (plain, wrong):
            peer.setsockopt(zmq.LINGER, 0)
            peer.connect(puller.address)
            peer.send_multipart([(1).to_bytes(4, "little"), b"report", b"forged"], zmq.NOBLOCK)
        assert _logged(caplog, "refused a peer at the handshake", 2) >= 2
        assert puller.poll(0.2) is None
        plain.close(0)
        wrong.close(0)
    records = [r for r in caplog.records if "at the handshake" in r.getMessage()]
    assert all(r.levelno == logging.WARNING for r in records)
    assert records[0].name == "dtorch.transport.security"
    assert puller.address in records[0].getMessage()


def _claims_a_huge_command(address: str) -> bool:
    """Whether the listener at ``address`` hangs up on a peer whose first handshake command
    declares 200 MiB (rather than waiting for, and buffering, all of it)."""
    import socket

    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        greeting = b"\xff" + bytes(8) + b"\x7f" + bytes([3, 0]) + b"CURVE".ljust(20, b"\0")
        raw.sendall(greeting + bytes(32))
        raw.recv(64)  # the listener's greeting
        raw.sendall(b"\x06" + (200 << 20).to_bytes(8, "big") + b"x" * 4096)
        raw.settimeout(3)
        try:
            return raw.recv(1) == b""  # closed by the listener
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def test_listeners_taking_small_messages_drop_a_peer_declaring_a_huge_one():
    """An unauthenticated peer could make a CURVE listener buffer whatever its handshake
    command declares: a publisher (which takes subscriptions) and a beats puller cap their
    messages at SMALL_MESSAGE, a reports puller at about MAX_FRAME (larger values travel in
    pieces), so they hang up at once; every CURVE listener gives up on an unfinished
    handshake after ``HANDSHAKE_MS``."""
    from dtorch.transport.sockets import HANDSHAKE_MS, SMALL_MESSAGE

    with (
        Publisher(LOOPBACK, keys=KEYS) as publisher,
        Puller(LOOPBACK, keys=KEYS, max_message=SMALL_MESSAGE) as beats,
        Puller(LOOPBACK, keys=KEYS) as reports,
    ):
        assert _claims_a_huge_command(publisher.address)
        assert _claims_a_huge_command(beats.address)
        assert _claims_a_huge_command(reports.address)
        for channel in (publisher, beats, reports):
            assert channel._endpoint.socket.getsockopt(zmq.HANDSHAKE_IVL) == HANDSHAKE_MS
        with Pusher(beats.address, 1, keys=KEYS) as pusher:  # a small message still arrives
            pusher.send(b"beat", [b"1"])
            assert bytes(beats.recv().parts[0]) == b"1"


def test_refusals_past_the_first_hundred_log_a_line_per_interval(caplog):
    """The first 100 refusals one line each, then at most one line per SUMMARY_SECONDS with
    the count (one line per hundred refusals was 60 lines a second under a garbage flood)."""
    from dtorch.transport.handshakes import LOGGED_REFUSALS, SUMMARY_SECONDS, RefusalLog

    now = [0.0]
    log = RefusalLog(logging.getLogger("refusals-test"), "a listener", clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="refusals-test"):
        for _ in range(LOGGED_REFUSALS + 5000):  # a flood within one interval
            log.refused("refused a peer")
        now[0] += SUMMARY_SECONDS  # the interval ends: the next refusal is logged, counted
        for _ in range(3):
            log.refused("refused a peer")
    counts = [int(r.getMessage().rsplit("(", 1)[1].split()[0]) for r in caplog.records]
    assert counts == [*range(1, LOGGED_REFUSALS + 1), LOGGED_REFUSALS + 5001]
    assert log.count == LOGGED_REFUSALS + 5003
