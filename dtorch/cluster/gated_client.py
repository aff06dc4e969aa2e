"""A client of the rendezvous store (``gated_store``): a ``torch.distributed.Store``.

It passes the store's gate with the PLAIN password derived from the cluster token, so a
``PrefixStore`` over it, Gloo's rendezvous and ``SignedStore`` use it as they used a
``TCPStore`` client. One DEALER socket, one request at a time (as a ``TCPStore`` client: a
waiting ``get`` holds the connection), each with an id so that a late answer to a request
given up on is dropped.

Failures are ``DistStoreError`` (what a ``TCPStore`` raises, so callers catch the same
thing), and they come at once when the cause is known, not at the end of a timeout:

* the store refused the token at the handshake (the controller was given another one);
* the connection was lost (the controller closed the store or died: a closed socket is seen
  at once, a silent host within ``HEARTBEAT_TIMEOUT_MS`` through ZeroMQ's heartbeats);
* a request the store refused (the message says why), or a wait whose keys did not come.

Like any Python ``torch.distributed.Store``, the client must stay referenced while C++ uses it
(``dist.PrefixStore("p", GatedStoreClient(...))`` written inline loses it to the collector).

Example:
    >>> from dtorch.cluster.gated_store import StoreServer
    >>> server = StoreServer("127.0.0.1", 0, bytes(32))
    >>> client = GatedStoreClient("127.0.0.1", server.port, bytes(32), timeout_s=5.0)
    >>> client.check(["k"]), client.compare_set("k", b"", b"first"), client.get("k")
    (False, b'first', b'first')
    >>> client.close(); server.close()
"""

from __future__ import annotations

import secrets
import threading
import time
from datetime import timedelta
from typing import Any

import torch.distributed as dist
import zmq
from zmq.utils.monitor import recv_monitor_message

from dtorch.cluster.gated_store import (
    ADD,
    CAS,
    CHECK,
    DELETE,
    ERROR,
    GET,
    HEARTBEAT_IVL_MS,
    HEARTBEAT_TIMEOUT_MS,
    MAX_BODY_BYTES,
    MAX_KEY_BYTES,
    MAX_KEYS,
    MAX_VALUE_BYTES,
    NUM,
    OK,
    PING,
    SET,
    TIMEOUT,
    WAIT,
    Malformed,
    gate_password,
    pack_body,
    pack_i64,
    pack_u64,
    unpack_fields,
)
from dtorch.comm.store.network_gate import client_options, store_context
from dtorch.version import installed_version

#: How long an answer may come after the store's own deadline for a waiting request.
_GRACE_S = 2.0
#: How often a waiting request looks at the connection's events.
_SLICE_S = 0.25
#: How long a connection may take to pass the gate (ZeroMQ's default: 30 s); a store's
#: takes milliseconds, a listener that is no store never finishes.
_HANDSHAKE_MS = 10_000
#: Connections closed by the peer before any handshake after which it is no dtorch store.
_DROPS_BEFORE_HANDSHAKE = 3
_HINT = " (torchrun's --rdzv-endpoint is not it: give --main the address set_address serves)"
_NOT_A_STORE = f"something listens there but completes no ZeroMQ handshake: no dtorch store{_HINT}"
_EVENTS = (
    zmq.EVENT_CONNECTED
    | zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_DISCONNECTED
)


class GatedStoreClient(dist.Store):
    """A connection to the rendezvous store at ``host``:``port`` for holders of ``token``;
    requests wait up to ``timeout_s`` (``set_timeout`` changes it)."""

    def __init__(self, host: str, port: int, token: bytes, *, timeout_s: float) -> None:
        super().__init__()
        self.address = f"{host}:{port}"
        self._timeout = timedelta(seconds=timeout_s)
        self._lock = threading.Lock()
        self._closing = False  # set by close() without the lock, read by a waiting call
        self._next_id = 0
        self._handshaken = False
        self._connected = False  # a TCP connection was made (perhaps to no store)
        self._dropped = 0  # connections the peer closed before a handshake
        self._gone: str | None = None
        self._socket = store_context().socket(zmq.DEALER)
        for option, value in _options(token).items():
            self._socket.setsockopt(option, value)
        monitor = f"inproc://dtorch-rendezvous-client-{secrets.token_hex(8)}"
        self._socket.monitor(monitor, _EVENTS)
        self._monitor = store_context().socket(zmq.PAIR)
        self._monitor.setsockopt(zmq.LINGER, 0)
        self._monitor.connect(monitor)
        self._socket.connect(f"tcp://{host}:{port}")

    @property
    def gone(self) -> str | None:
        """Why this client serves no more (refused, its connection lost, closed); None while
        it may still reach the store."""
        return self._gone

    @property
    def timeout(self) -> timedelta:
        """How long a request waits unless it names its own timeout."""
        return self._timeout

    def set_timeout(self, timeout: timedelta) -> None:
        self._timeout = timeout

    def ping(self, timeout_s: float) -> None:
        """Wait until the store answers (DistStoreError after ``timeout_s`` or if it refuses)."""
        self._call(PING, [], timeout_s)

    def set(self, key: str, value: Any) -> None:
        self._call(SET, [_key(key), _bytes(value)])

    def get(self, key: str) -> bytes:
        return self._call(GET, [self._timeout_ms(None), _key(key)], self._wait_s(None))[0]

    def add(self, key: str, value: int) -> int:
        return int.from_bytes(self._call(ADD, [_key(key), pack_i64(value)])[0], signed=True)

    def check(self, keys: list[str]) -> bool:
        # in batches a request holds (no keys: True, as c10d)
        batches = _batches([_key(k) for k in keys])
        return all(self._call(CHECK, batch)[0] == b"\1" for batch in batches)

    def wait(self, keys: list[str], timeout: timedelta | None = None) -> None:
        seconds = self._seconds(timeout)
        deadline = time.monotonic() + seconds
        for batch in _batches([_key(k) for k in keys]):  # one deadline for all of them
            left = max(0.0, min(seconds, deadline - time.monotonic()))
            self._call(WAIT, [pack_u64(int(left * 1000)), *batch], left + _GRACE_S)

    def delete_key(self, key: str) -> bool:
        return self._call(DELETE, [_key(key)])[0] == b"\1"

    def num_keys(self) -> int:
        return int.from_bytes(self._call(NUM, [])[0])

    def compare_set(self, key: str, expected: Any, desired: Any) -> bytes:
        return self._call(CAS, [_key(key), _bytes(expected), _bytes(desired)])[0]

    def close(self) -> None:
        """Close the connection (idempotent); later requests raise DistStoreError, and one
        waiting in another thread within ``_SLICE_S`` (close does not wait it out)."""
        self._closing = True
        with self._lock:
            if self._gone is None:
                self._gone = "this client was closed"
            if not self._socket.closed:
                # the monitor first: libzmq never frees a socket closed with a monitor
                # connected and unread (see dtorch.transport.handshakes.HandshakeWatch.close)
                self._socket.disable_monitor()
                self._socket.close(0)
                self._monitor.close(0)

    def _seconds(self, timeout: timedelta | None) -> float:
        """A wait's seconds: ``timeout`` (0 or less: none), else the client's timeout."""
        chosen = self.timeout if timeout is None else timeout
        return max(0.0, chosen.total_seconds())

    def _timeout_ms(self, timeout: timedelta | None) -> bytes:
        return pack_u64(int(self._seconds(timeout) * 1000))

    def _wait_s(self, timeout: timedelta | None) -> float:
        return self._seconds(timeout) + _GRACE_S

    def _call(self, op: int, args: list[bytes], wait_s: float | None = None) -> list[bytes]:
        """Send one request and wait for its answer: the payload after an OK."""
        with self._lock:
            self._check_events()
            request_id = pack_u64(self._next_id)
            self._next_id += 1
            body = pack_body(request_id + bytes([op]), args)
            if len(body) > MAX_BODY_BYTES:
                raise dist.DistStoreError(
                    f"a request is at most {MAX_BODY_BYTES} bytes, got {len(body)}"
                )
            wait_s = self.timeout.total_seconds() if wait_s is None else wait_s
            deadline = time.monotonic() + wait_s
            self._send(body, deadline)
            return _payload(self._answer(request_id, deadline), self.address)

    def _send(self, body: bytes, deadline: float) -> None:
        """Queue ``body`` (DEALER queues while it connects); DistStoreError by ``deadline``."""
        while True:
            try:
                self._socket.send(body)
                return
            except zmq.Again:
                self._check_events()
                if time.monotonic() > deadline:
                    raise self._silent() from None

    def _answer(self, request_id: bytes, deadline: float) -> bytes:
        """The reply to ``request_id`` (after its id), looking at the connection's events
        while it waits."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._silent()
            if self._closing:  # close() from another thread: it waits for this lock
                raise dist.DistStoreError(f"the rendezvous store at {self.address}: closed")
            if self._socket.poll(int(min(remaining, _SLICE_S) * 1000) + 1):
                body = self._socket.recv()
                if body[:8] == request_id and len(body) > 8:
                    return body[8:]
                continue  # the answer to a request given up on
            self._check_events()

    def _check_events(self) -> None:
        """DistStoreError if the store refused this client or the connection was lost."""
        # EVENTS is read holding the GIL: an empty monitor costs no wait for it
        while self._gone is None and self._monitor.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            try:
                event = recv_monitor_message(self._monitor, zmq.NOBLOCK)
            except zmq.Again:
                break
            self._note(int(event["event"]))
        if self._gone is not None:
            raise dist.DistStoreError(f"the rendezvous store at {self.address}: {self._gone}")

    def _note(self, event: int) -> None:
        if event == zmq.EVENT_CONNECTED:
            self._connected = True
        elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self._handshaken = True
        elif event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            self._gone = (
                "refused this process's cluster token or dtorch version: the controller has "
                f"another token, or runs another dtorch than this one ({installed_version()}; "
                "the controller and every worker run the same version)"
            )
        elif event in (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
            self._gone = f"the handshake failed: no dtorch store of this version{_HINT}"
        elif event == zmq.EVENT_DISCONNECTED and self._handshaken:
            self._gone = "the connection was lost (the controller closed the store or died)"
        elif event == zmq.EVENT_DISCONNECTED:  # a TCP peer that drops ZeroMQ's greeting
            self._dropped += 1
            if self._dropped >= _DROPS_BEFORE_HANDSHAKE:
                self._gone = _NOT_A_STORE

    def _silent(self) -> dist.DistStoreError:
        if self._connected and not self._handshaken:  # a TCP peer that speaks no ZeroMQ
            return dist.DistStoreError(f"the rendezvous store at {self.address}: {_NOT_A_STORE}")
        what = "answered" if self._handshaken else "was reached"
        return dist.DistStoreError(
            f"the rendezvous store at {self.address} never {what} within the timeout "
            f"({self.timeout.total_seconds():g} s)"
        )


def _options(token: bytes) -> dict[int, int | bytes]:
    return {
        **client_options(gate_password(token)),
        zmq.HEARTBEAT_IVL: HEARTBEAT_IVL_MS,
        zmq.HANDSHAKE_IVL: _HANDSHAKE_MS,  # a peer that speaks no ZeroMQ: failed in 10 s
        zmq.HEARTBEAT_TIMEOUT: HEARTBEAT_TIMEOUT_MS,
        zmq.SNDTIMEO: int(_SLICE_S * 1000),  # a send that cannot queue looks at the events
    }


def _bytes(value: Any) -> bytes:
    """A value as bytes; DistStoreError past ``MAX_VALUE_BYTES`` (a larger frame would make
    the server drop the connection, which would read as a lost store)."""
    data = value.encode() if isinstance(value, str) else bytes(value)
    if len(data) > MAX_VALUE_BYTES:
        raise dist.DistStoreError(f"a value is at most {MAX_VALUE_BYTES} bytes, got {len(data)}")
    return data


def _batches(keys: list[bytes]) -> list[list[bytes]]:
    """``keys`` in batches of at most ``MAX_KEYS`` (a request's limit)."""
    return [keys[at : at + MAX_KEYS] for at in range(0, len(keys), MAX_KEYS)]


def _key(key: str) -> bytes:
    """A key as UTF-8; DistStoreError past ``MAX_KEY_BYTES``."""
    data = key.encode()
    if len(data) > MAX_KEY_BYTES:
        raise dist.DistStoreError(f"a key is at most {MAX_KEY_BYTES} bytes, got {len(data)}")
    return data


def _payload(reply: bytes, address: str) -> list[bytes]:
    """The payload of an OK reply (its status, then its fields); DistStoreError with the
    store's reason otherwise."""
    status = reply[:1]
    try:
        payload = unpack_fields(reply, 1)
    except Malformed as error:
        raise dist.DistStoreError(f"the rendezvous store at {address} answered: {error}") from None
    if status == bytes([OK]):
        return payload
    text = b"".join(payload).decode(errors="replace")
    if status == bytes([TIMEOUT]):
        raise dist.DistStoreError(f"wait timed out: {text} never set")
    reason = text if status == bytes([ERROR]) else f"an unknown status {status!r}"
    raise dist.DistStoreError(f"the rendezvous store at {address} refused a request: {reason}")
