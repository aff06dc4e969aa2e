"""The rendezvous store (``gated_store`` and its client): c10d's semantics, checked against
torch's own ``HashStore``; only holders of the cluster token get in (refused at the handshake,
at once); malformed requests and oversized values are refused without ending the server; a
closed or vanished server is noticed at once, not at a timeout; closing frees the port."""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
import torch.distributed as dist
import zmq

from dtorch.cluster import gated_client, gated_store
from dtorch.cluster.gated_client import GatedStoreClient
from dtorch.cluster.gated_store import (
    ERROR,
    GET,
    OK,
    SET,
    StoreServer,
    gate_password,
    pack_body,
    pack_u64,
    unpack_fields,
)
from dtorch.cluster.rendezvous import connect_store
from dtorch.comm.store.network_gate import client_options
from dtorch.errors import RendezvousError
from tests.cluster.test_cluster_faults import _listening_addresses
from tests.interrupted_wait import assert_close_ends_the_wait
from tests.tcp_table import ESTABLISHED, own_inodes, tcp_sockets

pytestmark = pytest.mark.timeout(60)

TOKEN = bytes(range(32))


@pytest.fixture
def server() -> Iterator[StoreServer]:
    served = StoreServer("127.0.0.1", 0, TOKEN)
    yield served
    served.close()


@pytest.fixture
def client(server: StoreServer) -> Iterator[GatedStoreClient]:
    connected = connect_store("127.0.0.1", server.port, TOKEN, timeout_s=5.0)
    yield connected
    connected.close()


def _both(store: dist.Store, oracle: dist.Store, call: str, *args: object) -> object:
    """``call`` on the store and on torch's HashStore; equal answers (or the same refusal)."""
    try:
        expected: object = getattr(oracle, call)(*args)
    except dist.DistError:
        with pytest.raises(dist.DistError):
            getattr(store, call)(*args)
        return None
    got = getattr(store, call)(*args)
    assert got == expected, (call, args)
    return got


def test_the_store_answers_as_torch_s_hash_store(client: GatedStoreClient) -> None:
    oracle = dist.HashStore()
    steps = [
        ("set", "a", b"1"), ("get", "a"), ("set", "a", "text"), ("get", "a"),
        ("add", "n", 5), ("add", "n", -7), ("get", "n"), ("add", "fresh", 0),
        ("check", ["a", "n"]), ("check", ["a", "missing"]), ("num_keys",),
        ("compare_set", "c", b"", b"first"), ("compare_set", "c", b"other", b"x"),
        ("compare_set", "c", b"first", b"second"), ("get", "c"),
        ("compare_set", "unset", b"expected", b"x"), ("check", ["unset"]),
        ("delete_key", "a"), ("delete_key", "a"), ("check", ["a"]), ("num_keys",),
        ("set", "empty", b""), ("get", "empty"), ("set", "bin", bytes(range(256))), ("get", "bin"),
    ]  # fmt: skip
    for call, *args in steps:
        _both(client, oracle, call, *args)


def test_a_prefix_store_and_waits_work_through_it(server: StoreServer) -> None:
    waiter = connect_store("127.0.0.1", server.port, TOKEN, timeout_s=5.0)
    setter = connect_store("127.0.0.1", server.port, TOKEN, timeout_s=5.0)
    try:
        threading.Timer(0.3, lambda: dist.PrefixStore("g", setter).set("k", b"v")).start()
        started = time.monotonic()
        assert dist.PrefixStore("g", waiter).get("k") == b"v"  # waits for the key
        assert 0.2 < time.monotonic() - started < 3.0
        waiter.wait(["g/k"], timedelta(seconds=1))  # there already
        started = time.monotonic()
        with pytest.raises(dist.DistStoreError, match=r"1 key\(s\), first 'never', never set"):
            waiter.wait(["g/k", "never"], timedelta(seconds=0.5))
        assert time.monotonic() - started < 2.0
        assert waiter.check(["g/k"])  # the connection still serves after a timeout
    finally:
        waiter.close()
        setter.close()


def test_a_peer_of_another_dtorch_version_is_refused_at_the_handshake(
    server: StoreServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate's password is derived from the version as well as the token: a worker of
    another dtorch is refused at once, told why, instead of joining a protocol it may not
    speak."""
    other = functools.partial(gate_password, version="0.0.0-another")
    monkeypatch.setattr(gated_client, "gate_password", other)
    with pytest.raises(RendezvousError, match=r"or runs another dtorch than this one"):
        connect_store("127.0.0.1", server.port, TOKEN, timeout_s=10.0)
    monkeypatch.undo()
    member = connect_store("127.0.0.1", server.port, TOKEN, timeout_s=5.0)
    assert member.num_keys() == 0
    member.close()


def test_without_the_token_a_peer_is_refused_at_the_handshake(
    server: StoreServer, caplog: pytest.LogCaptureFixture
) -> None:
    started = time.monotonic()
    with pytest.raises(RendezvousError, match="refused this process's cluster token"):
        connect_store("127.0.0.1", server.port, bytes(32), timeout_s=10.0)
    assert time.monotonic() - started < 3.0
    assert "wrong password" in caplog.text
    with pytest.raises(dist.DistError):  # a c10d client speaks another protocol
        dist.TCPStore("127.0.0.1", server.port, is_master=False, timeout=timedelta(seconds=2))
    member = connect_store("127.0.0.1", server.port, TOKEN, timeout_s=5.0)
    assert member.num_keys() == 0  # nothing was written, and the server still serves
    member.close()


def test_nobody_answering_is_said_after_the_timeout() -> None:
    free = StoreServer("127.0.0.1", 0, TOKEN)
    port = free.port
    free.close()
    started = time.monotonic()
    with pytest.raises(RendezvousError, match="never was reached within the timeout"):
        connect_store("127.0.0.1", port, TOKEN, timeout_s=1.0)
    assert time.monotonic() - started < 3.0


@pytest.mark.parametrize("peer", ["silent", "closing"])
def test_a_listener_that_is_no_store_is_named(peer: str) -> None:
    """``--main`` given torchrun's rendezvous endpoint (a TCP listener that speaks no
    ZeroMQ): the worker waited its whole join timeout and said the store "never was
    reached". It names the listener now; one that closes each connection, at once."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = listener.accept()
                if peer == "closing":
                    connection.close()
                else:
                    held.append(connection)

    threading.Thread(target=serve, daemon=True).start()
    started = time.monotonic()
    try:
        with pytest.raises(RendezvousError, match=r"no dtorch .*--rdzv-endpoint is not it"):
            connect_store("127.0.0.1", listener.getsockname()[1], TOKEN, timeout_s=3.0)
        assert time.monotonic() - started < (2.0 if peer == "closing" else 5.0)
    finally:
        listener.close()
        for connection in held:
            connection.close()


def _member_socket(port: int, options: dict[int, int] | None = None) -> zmq.Socket:
    """A raw DEALER past the gate: what a token holder could send."""
    socket = zmq.Context.instance().socket(zmq.DEALER)
    for option, value in {**client_options(gate_password(TOKEN)), **(options or {})}.items():
        socket.setsockopt(option, value)
    socket.connect(f"tcp://127.0.0.1:{port}")
    return socket


def _request(number: int, op: int, fields: list[bytes]) -> bytes:
    return pack_body(pack_u64(number) + bytes([op]), fields)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (_request(1, 99, []), "unknown operation 99"),
        (_request(2, SET, [b"k"]), "SET takes a key and a value"),
        (_request(3, SET, [b"\xff\xfe", b"v"]), "a key is UTF-8 text"),
        (_request(4, SET, [b"k" * 5000, b"v"]), "a key is at most 4096 bytes"),
        (_request(5, GET, [b"short", b"k"]), "GET takes a timeout and keys"),
        (_request(6, gated_store.ADD, [b"k", b"1"]), "ADD takes a key and an 8-byte"),
        (_request(7, gated_store.CHECK, []), "a request names 1 to 1024 keys"),
        (_request(8, SET, [b"k", b"v"])[:-1], "a field of 1 bytes overruns"),
        (_request(9, SET, [b"k"]) + b"\0\0", "fields do not fit"),
        (_request(10, gated_store.CHECK, [b"k"] * 1030), "fields do not fit"),
    ],
    ids=["op", "fields", "utf8", "long-key", "timeout", "amount", "no-keys", "cut", "ragged",
         "many"],
)  # fmt: skip
def test_a_malformed_request_is_refused_and_the_server_goes_on(
    server: StoreServer, client: GatedStoreClient, body: bytes, said: str
) -> None:
    raw = _member_socket(server.port)
    try:
        raw.send(body)
        raw.send_multipart([b"junk"])  # no request id: dropped, no answer
        raw.send_multipart([body, body])  # two frames: dropped
        assert raw.poll(5000)
        reply = raw.recv()
        assert reply[:8] == body[:8] and reply[8] == ERROR
        assert said in b"".join(unpack_fields(reply, 9)).decode()
        assert not raw.poll(300)
    finally:
        raw.close(0)
    client.set("after", b"1")
    assert client.get("after") == b"1"


def test_a_counter_is_refused_on_a_value_that_is_not_one(client: GatedStoreClient) -> None:
    client.set("text", b"abc")
    with pytest.raises(dist.DistStoreError, match="not a counter"):
        client.add("text", 1)
    assert client.get("text") == b"abc"


def test_values_are_bounded(client: GatedStoreClient, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(dist.DistStoreError, match="a value is at most 1040384 bytes"):
        client.set("big", bytes(gated_store.MAX_VALUE_BYTES + 1))
    with pytest.raises(dist.DistStoreError, match="a key is at most 4096 bytes"):
        client.set("k" * 5000, b"")
    client.set("k" * 4096, bytes(gated_store.MAX_VALUE_BYTES))  # the largest SET
    with pytest.raises(dist.DistStoreError, match="a request is at most 1048576 bytes"):
        client.compare_set("fits", bytes(600_000), bytes(600_000))
    client.set("fits", bytes(gated_store.MAX_VALUE_BYTES))
    assert len(client.get("fits")) == gated_store.MAX_VALUE_BYTES
    assert client.delete_key("fits") and client.delete_key("k" * 4096)  # counted no more
    monkeypatch.setattr(gated_store, "MAX_HELD_BYTES", 4096)
    client.set("small", bytes(10))
    with pytest.raises(dist.DistStoreError, match="holds at most 4096 bytes"):
        client.set("more", bytes(5000))
    assert not client.check(["more"]) and client.get("small") == bytes(10)


def test_a_closed_server_is_noticed_at_once_and_frees_its_port(
    server: StoreServer, client: GatedStoreClient
) -> None:
    threading.Timer(0.3, server.close).start()
    started = time.monotonic()
    with pytest.raises(dist.DistStoreError, match="the connection was lost"):
        client.get("never")  # the store's timeout is 5 s
    assert time.monotonic() - started < 2.0
    assert _listening_addresses(server.port) == set()
    with pytest.raises(dist.DistStoreError, match="the connection was lost"):
        client.check(["x"])  # and every later call, at once


def _connections_to(port: int) -> int:
    """How many TCP connections this process's sockets hold to ``port`` (another process's
    connection to a port of that number elsewhere is not the store's)."""
    mine = own_inodes()
    return sum(
        s.remote_port == port and s.state == ESTABLISHED and s.inode in mine for s in tcp_sockets()
    )


def test_a_closed_client_refuses_calls_and_leaves_no_connection(
    server: StoreServer, client: GatedStoreClient
) -> None:
    for _ in range(3):
        connect_store("127.0.0.1", server.port, TOKEN, timeout_s=5.0).close()
    deadline = time.monotonic() + 5  # libzmq closes connections in the background
    while _connections_to(server.port) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _connections_to(server.port) == 1  # the fixture's client only
    client.close()
    client.close()
    deadline = time.monotonic() + 5
    while _connections_to(server.port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _connections_to(server.port) == 0
    with pytest.raises(dist.DistStoreError, match="this client was closed"):
        client.set("k", b"v")


def test_threads_share_a_client(client: GatedStoreClient) -> None:
    def count() -> None:
        for _ in range(50):
            client.add("shared", 1)

    threads = [threading.Thread(target=count) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert client.add("shared", 0) == 200


def test_the_request_loop_logs_a_flood_of_bad_requests_in_bounded_lines(
    server: StoreServer, caplog: pytest.LogCaptureFixture
) -> None:
    raw = _member_socket(server.port)
    try:
        with caplog.at_level(logging.WARNING, logger=gated_store.__name__):
            for index in range(300):  # each reply read: 16 unread ones at most are kept
                raw.send(_request(index, 99, []))
                assert raw.poll(5000)
                assert raw.recv()[8] == ERROR
    finally:
        raw.close(0)
    lines = [r for r in caplog.records if "unknown operation" in r.getMessage()]
    assert 100 <= len(lines) <= 103


def test_a_good_request_after_a_bad_one_on_the_same_socket_is_served(server: StoreServer) -> None:
    raw = _member_socket(server.port)
    try:
        raw.send(_request(1, 99, []))
        raw.send(_request(2, SET, [b"k", b"v"]))
        replies = [raw.recv() for _ in range(2) if raw.poll(5000)]
        assert [r[8] for r in replies] == [ERROR, OK]
    finally:
        raw.close(0)


def test_waiting_requests_are_bounded(
    server: StoreServer, client: GatedStoreClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gated_store, "MAX_PARKED", 2)
    raws = [_member_socket(server.port) for _ in range(3)]
    try:
        raws[0].send(_request(0, GET, [pack_u64(1000), b"never"]))
        for number, raw in enumerate(raws):  # a day and more: each waits at most MAX_WAIT_S
            raw.send(_request(number + 1, GET, [pack_u64(2**64 - 1), b"never"]))
            time.sleep(0.1)  # in this order
        assert raws[2].poll(5000)
        reply = raws[2].recv()
        assert reply[:8] == pack_u64(3) and reply[8] == ERROR
        assert "2 requests wait already" in b"".join(unpack_fields(reply, 9)).decode()
        client.set("never", b"now")  # the parked ones are answered, one per connection
        answers = [raw.recv() for raw in raws[:2] if raw.poll(5000)]
        assert [a[:8] for a in answers] == [pack_u64(1), pack_u64(2)]  # request 0 was replaced
        assert all(a[8] == OK and unpack_fields(a, 9) == [b"now"] for a in answers)
        assert not raws[0].poll(300)
    finally:
        for raw in raws:
            raw.close(0)


def test_counters_are_64_bit_and_refuse_what_is_not_one(client: GatedStoreClient) -> None:
    client.set("top", str(2**63 - 1).encode())
    with pytest.raises(dist.DistStoreError, match="past 64 bits"):
        client.add("top", 1)
    assert client.get("top") == str(2**63 - 1).encode()  # unchanged
    assert client.add("top", -(2**63) + 1) == 0
    for bad in (b"--5", b"1" * 30, b"", b"1.5"):
        client.set("bad", bad)
        with pytest.raises(dist.DistStoreError, match="not a counter"):
            client.add("bad", 1)


def test_key_lists_of_any_length_and_zero_timeouts(client: GatedStoreClient) -> None:
    oracle = dist.HashStore()
    assert client.check([]) is True and oracle.check([]) is True
    client.wait([])  # nothing to wait for
    keys = [f"k{i}" for i in range(2500)]  # more than one request holds
    for key in keys:
        client.set(key, b"1")
    assert client.check(keys) and not client.check([*keys, "missing"])
    client.wait(keys, timedelta(seconds=5))
    started = time.monotonic()
    with pytest.raises(dist.DistStoreError, match="1 key"):
        client.wait([*keys, "missing"], timedelta(0))  # at once, as a TCPStore
    assert time.monotonic() - started < 3.0


def test_close_from_another_thread_does_not_wait_for_a_waiting_get(
    client: GatedStoreClient,
) -> None:
    assert_close_ends_the_wait(  # the store's own timeout is 5 s
        lambda: client.get("never"), client.close, dist.DistStoreError, settle_s=0.3, join_s=5
    )


def test_a_client_that_does_not_read_its_replies_makes_the_server_hold_few(
    server: StoreServer, client: GatedStoreClient
) -> None:
    client.set("big", bytes(gated_store.MAX_VALUE_BYTES))
    # a reader that takes little: what it does not take stays with the server, or is dropped
    raw = _member_socket(server.port, {zmq.RCVHWM: 1, zmq.RCVBUF: 1 << 16})
    try:
        for index in range(100):
            raw.send(_request(index, GET, [pack_u64(1000), b"big"]))
        time.sleep(1.0)
        got = 0
        while raw.poll(300):
            raw.recv()
            got += 1
        assert 16 <= got < 30  # the rest were dropped, not queued (100 MiB)
    finally:
        raw.close(0)
    assert len(client.get("big")) == gated_store.MAX_VALUE_BYTES
