"""The rendezvous store's server: a key-value store on a ZeroMQ ROUTER behind a PLAIN gate.

Why not torch's ``TCPStore``: it authenticates nobody. Whoever reached its port could read
every record, delete them (a join then fails) or store values until the controller ran out
of memory. This store answers only peers that hold the cluster token: its ROUTER socket is a
PLAIN server whose password (``gate_password``: an HMAC of the token, never the token) the
network stores' ZAP handler (``dtorch.comm.store.network_gate.Gate``) checks at the
handshake, before ZeroMQ buffers any frame of the peer's. A peer without it never delivers a
frame; what it can make the server hold is one handshake command of at most ``FRAME_BYTES``
for at most ``HANDSHAKE_S``. Refusals are warnings of this module, rate-limited.

PLAIN sends the password in the clear: whoever reads the traffic can pass the gate, so the
records stay signed (``dtorch.cluster.records``) and the groups' values too
(``signed_values``): such a peer can still forge nothing. A token holder is trusted, but
bounded all the same: keys of at most ``MAX_KEY_BYTES``, requests of at most ``FRAME_BYTES``,
``MAX_HELD_BYTES`` held in all, one waiting request per connection (``MAX_PARKED`` in all, each
for at most ``MAX_WAIT_S``), 16 unread replies per connection. What libzmq does not let a
listener bound is left: a multipart message is buffered whole before it is delivered (and then
dropped as malformed), so a token holder can make the server hold one such message per
connection, and connections are not counted. The token is a trust boundary.

The semantics are c10d's (``GatedStoreClient`` is a ``torch.distributed.Store``): ``SET``,
``GET`` (waits for the key), ``ADD`` (a counter kept as decimal text), ``CHECK``, ``WAIT``
(for every key), ``DELETE``, ``NUM`` (keys held) and ``CAS`` (compare-and-set). A request that
has to wait is parked and answered when its keys are set or with ``TIMEOUT`` at its deadline;
nothing polls but the loop's stop flag. Nothing a peer sends ends the thread: a malformed
request is answered with ``ERROR`` (or dropped if it is not one frame of at least a request id
and an op) and logged.

Frames: request ``[identity, body]``, the body the request id (8 bytes), the op (1 byte) and
the arguments (``pack_body``); a reply's body the request id, the status (1 byte) and the
payload. Numbers are 8-byte big-endian.

Example:
    >>> from dtorch.cluster.gated_client import GatedStoreClient
    >>> server = StoreServer("127.0.0.1", 0, bytes(32))
    >>> client = GatedStoreClient("127.0.0.1", server.port, bytes(32), timeout_s=5.0)
    >>> client.set("k", b"v"); client.add("n", 2), client.get("k")
    (2, b'v')
    >>> client.close(); server.close()
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

import zmq

from dtorch.cluster.liveness import LOST_AFTER_SECONDS
from dtorch.comm.store.network_gate import Gate, password, server_options
from dtorch.comm.store.network_protocol import FRAME_BYTES
from dtorch.errors import RendezvousError
from dtorch.runtime.daemon import DaemonThread
from dtorch.transport.handshakes import HandshakeWatch, RefusalLog
from dtorch.version import installed_version

#: ZeroMQ heartbeats on the store's connections: a peer silent this long counts as gone. Longer
#: than the liveness verdict (``liveness.LOST_AFTER_SECONDS``): a worker stalled 3-5 s (a
#: stop, a swap storm) is not lost, and a store connection dropped under it made its next
#: group's rendezvous fail unreported, its peers waiting for the comm timeout.
HEARTBEAT_IVL_MS = 1000
HEARTBEAT_TIMEOUT_MS = int(2 * LOST_AFTER_SECONDS * 1000)

_LOG = logging.getLogger(__name__)

#: Operations (the request's op byte).
SET, GET, ADD, CHECK, WAIT, DELETE, NUM, CAS, PING = range(1, 10)
#: Reply statuses.
OK, ERROR, TIMEOUT = 0, 1, 2
#: The longest key accepted (bytes of UTF-8).
MAX_KEY_BYTES = 4096
#: The most bytes of keys and values the store holds in all.
MAX_HELD_BYTES = 64 << 20
#: The most a request may be: the gate's frame limit (a larger frame drops the connection).
MAX_BODY_BYTES = FRAME_BYTES
#: The most a value may be: a SET of it with the longest key fits a request.
MAX_VALUE_BYTES = FRAME_BYTES - 8192
#: The most keys one CHECK or WAIT names.
MAX_KEYS = 1024
#: The most GET and WAIT requests parked at once, and the longest one waits (seconds).
MAX_PARKED = 65536
MAX_WAIT_S = 86400.0
#: How often the loop looks whether it should stop (milliseconds).
_TICK_MS = 200
_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_COUNTER = re.compile(rb"-?[0-9]{1,19}")
#: A body's head: the request id (8 bytes) then the op or the status (1 byte).
_HEAD = 9
_I64 = struct.Struct(">q")


class Malformed(Exception):
    """A request this server does not accept; the text says why (sent back, logged)."""


def gate_password(token: bytes, version: str | None = None) -> bytes:
    """The key whose PLAIN password (``network_gate.password``) opens the store of ``token``
    to peers of dtorch ``version`` (the installed one by default): a worker of another
    version is refused at the handshake, as one with another token is.

    Example:
        >>> gate_password(bytes(32)) != gate_password(bytes([1]) * 32)
        True
        >>> gate_password(bytes(32)) != gate_password(bytes(32), "0.0.0")
        True
    """
    label = f"dtorch-rendezvous-gate {version or installed_version()}"
    return hmac.new(token, label.encode(), hashlib.sha256).digest()


def pack_u64(value: int) -> bytes:
    return _U64.pack(value)


def pack_body(head: bytes, fields: list[bytes]) -> bytes:
    """One frame: ``head`` (request id and op, or request id and status), then each field as
    its 4-byte big-endian length and its bytes. One frame, not one per field: each frame
    sent or received waits for the GIL once more, which a busy controller makes costly.

    Example:
        >>> unpack_fields(pack_body(b"h", [b"key", b""]), 1)
        [b'key', b'']
    """
    parts = [head]
    for field in fields:
        parts += (_U32.pack(len(field)), field)
    return b"".join(parts)


def unpack_fields(body: bytes, start: int) -> list[bytes]:
    """The fields of ``body`` after ``start`` (``pack_body``); Malformed if they do not fit."""
    fields: list[bytes] = []
    at = start
    while at < len(body):
        if at + 4 > len(body) or len(fields) > MAX_KEYS + 1:
            raise Malformed(f"a request's fields do not fit its {len(body)} bytes")
        (size,) = _U32.unpack_from(body, at)
        if at + 4 + size > len(body):
            raise Malformed(f"a field of {size} bytes overruns a request of {len(body)} bytes")
        fields.append(body[at + 4 : at + 4 + size])
        at += 4 + size
    return fields


def pack_i64(value: int) -> bytes:
    return _I64.pack(value)


@dataclass(frozen=True, slots=True)
class _Parked:
    """A GET or WAIT waiting for its keys, answered by ``deadline`` at the latest."""

    identity: bytes
    request_id: bytes
    keys: tuple[str, ...]
    deadline: float
    wants_value: bool


class StoreServer:
    """The store on ``host``:``port`` (0: a free port), open to holders of ``token``."""

    def __init__(self, host: str, port: int, token: bytes) -> None:
        self._values: dict[str, bytes] = {}
        self._held = 0
        self._parked: list[_Parked] = []
        self._stop = threading.Event()
        self._refusals = RefusalLog(_LOG, f"the rendezvous store at {host}:{port}")
        # a context of its own, terminated at close: libzmq closes sockets in the background,
        # and only a context's end says that the port and every connection are closed
        self._context: zmq.Context[Any] = zmq.Context()
        self._gate = Gate(self._context)  # ZAP is per context; its thread ends with it
        self._domain = self._gate.admit(_password(token), self._refusals)
        self._socket = self._bound(host, port)
        self.port = int(self._socket.getsockopt_string(zmq.LAST_ENDPOINT).rsplit(":", 1)[1])
        self._refusals.what = f"the rendezvous store at {host}:{self.port}"
        self._thread = DaemonThread(self._run, "dtorch-rendezvous")

    def _bound(self, host: str, port: int) -> zmq.Socket[Any]:
        """The ROUTER, bound to ``host``:``port`` only; RendezvousError if it cannot be."""
        socket = self._context.socket(zmq.ROUTER)
        for option, value in server_options(self._domain).items():
            socket.setsockopt(option, value)
        # a client that does not read its replies gets no more queued than this (ROUTER drops)
        socket.setsockopt(zmq.SNDHWM, 16)
        socket.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)  # a dead client's is dropped
        socket.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
        self._watch = HandshakeWatch(socket, self._refusals)  # before bind: no peer missed
        try:
            socket.bind(f"tcp://{host}:{port or '*'}")
        except zmq.ZMQError as error:
            self._watch.close()  # before the socket: see HandshakeWatch.close
            socket.close(0)
            self._context.term()
            raise RendezvousError(
                f"cannot serve the rendezvous store at {host}:{port}: {error}"
            ) from None
        return socket

    def close(self) -> None:
        """Stop serving; the port is free when it returns (idempotent)."""
        self._stop.set()
        if self._thread.is_alive() and not self._thread.is_current():
            self._thread.join(5.0)

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        poller.register(self._watch.monitor, zmq.POLLIN)
        try:
            while not self._stop.is_set():
                ready = dict(poller.poll(self._wait_ms()))
                if self._watch.monitor in ready:
                    self._watch.drain()
                if self._socket in ready:
                    self._serve_waiting()
                self._expire(time.monotonic())
        finally:
            self._watch.close()  # before the socket: see HandshakeWatch.close
            self._socket.close(0)
            self._context.term()  # returns once the port and its connections are closed

    def _wait_ms(self) -> int:
        """How long the loop may sleep: until the nearest deadline, at most one tick."""
        if not self._parked:
            return _TICK_MS
        nearest = min(p.deadline for p in self._parked) - time.monotonic()
        return max(0, min(_TICK_MS, int(nearest * 1000) + 1))

    def _serve_waiting(self) -> None:
        """Answer one request (the poll says one is there, and says so again while more are:
        no call that finds none, each of which would wait for the GIL once more)."""
        try:
            frames = self._socket.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return
        self._serve(frames)

    def _serve(self, frames: list[bytes]) -> None:
        if len(frames) != 2 or len(frames[1]) < _HEAD:
            self._refusals.refused(f"dropped a malformed request of {len(frames)} frames")
            return
        identity, body = frames
        request_id, op = body[:8], body[8]
        try:
            reply = self._answer(identity, request_id, op, unpack_fields(body, _HEAD))
        except Malformed as error:
            self._refusals.refused(f"refused a request: {error}")
            reply = [ERROR, str(error).encode()]
        except Exception as error:  # a bug must not end the store: the peer is told
            self._refusals.refused(f"failed a request: {error!r}")  # rate-limited
            _LOG.debug("the rendezvous store failed a request", exc_info=True)
            reply = [ERROR, f"the store failed: {error!r}".encode()]
        if reply is not None:
            self._reply(identity, request_id, reply[0], reply[1:])

    def _reply(self, identity: bytes, request_id: bytes, status: int, payload: list[Any]) -> None:
        try:
            body = pack_body(request_id + bytes([status]), payload)
            self._socket.send_multipart([identity, body])
        except zmq.ZMQError as error:  # the peer is gone (ROUTER drops, but be sure)
            _LOG.debug("the rendezvous store could not answer a peer: %s", error)

    def _answer(self, identity: bytes, request_id: bytes, op: int, args: list[bytes]) -> Any:
        """The reply ``[status, payload...]`` to one request, or None if it is parked."""
        if op in (GET, WAIT):
            return self._wait_or_park(identity, request_id, op, args)
        handler = _HANDLERS.get(op)
        if handler is None:
            raise Malformed(f"unknown operation {op}; known: {sorted(_HANDLERS)} and GET, WAIT")
        return handler(self, args)

    def _wait_or_park(self, identity: bytes, request_id: bytes, op: int, args: list[bytes]) -> Any:
        if len(args) < 2 or len(args[0]) != 8 or (op == GET and len(args) != 2):
            raise Malformed(f"{'GET' if op == GET else 'WAIT'} takes a timeout and keys")
        keys = _keys(args[1:])
        if all(k in self._values for k in keys):
            return [OK, self._values[keys[0]]] if op == GET else [OK]
        # a client sends one request at a time: an earlier one of its is given up on
        self._parked = [p for p in self._parked if p.identity != identity]
        if len(self._parked) >= MAX_PARKED:
            raise Malformed(f"{MAX_PARKED} requests wait already; wait again later")
        deadline = time.monotonic() + min(_U64.unpack(args[0])[0] / 1000, MAX_WAIT_S)
        self._parked.append(_Parked(identity, request_id, keys, deadline, op == GET))
        return None

    def _settle(self) -> None:
        """Answer the parked requests whose keys are all set now."""
        waiting = []
        for parked in self._parked:
            if all(k in self._values for k in parked.keys):
                value = [self._values[parked.keys[0]]] if parked.wants_value else []
                self._reply(parked.identity, parked.request_id, OK, value)
            else:
                waiting.append(parked)
        self._parked = waiting

    def _expire(self, now: float) -> None:
        """Answer TIMEOUT to the parked requests whose deadline passed."""
        if not any(p.deadline <= now for p in self._parked):
            return
        for parked in (p for p in self._parked if p.deadline <= now):
            missing = [k for k in parked.keys if k not in self._values]
            text = f"{len(missing)} key(s), first {missing[0][:200]!r},"
            self._reply(parked.identity, parked.request_id, TIMEOUT, [text.encode()])
        self._parked = [p for p in self._parked if p.deadline > now]

    def _put(self, key: str, value: bytes) -> None:
        """Hold ``value`` under ``key`` (Malformed past ``MAX_HELD_BYTES``); wake waiters."""
        old = self._values.get(key)
        held = self._held + len(value) - (0 if old is None else len(old))
        held += 0 if old is not None else len(key)
        if held > MAX_HELD_BYTES:
            raise Malformed(f"the store holds at most {MAX_HELD_BYTES} bytes of keys and values")
        self._values[key], self._held = value, held
        self._settle()

    def _set(self, args: list[bytes]) -> list[Any]:
        if len(args) != 2:
            raise Malformed("SET takes a key and a value")
        self._put(_key(args[0]), args[1])
        return [OK]

    def _add(self, args: list[bytes]) -> list[Any]:
        if len(args) != 2 or len(args[1]) != 8:
            raise Malformed("ADD takes a key and an 8-byte amount")
        key = _key(args[0])
        current = self._values.get(key, b"0")
        if not _COUNTER.fullmatch(current):
            raise Malformed(f"ADD of {key!r}, which holds a value that is not a counter")
        total = int(current) + _I64.unpack(args[1])[0]
        if not -(1 << 63) <= total < 1 << 63:
            raise Malformed(f"ADD of {key!r} would take the counter past 64 bits")
        self._put(key, str(total).encode())
        return [OK, pack_i64(total)]

    def _check(self, args: list[bytes]) -> list[Any]:
        keys = _keys(args)
        return [OK, b"\1" if all(k in self._values for k in keys) else b"\0"]

    def _delete(self, args: list[bytes]) -> list[Any]:
        if len(args) != 1:
            raise Malformed("DELETE takes a key")
        key = _key(args[0])
        old = self._values.pop(key, None)
        if old is not None:
            self._held -= len(key) + len(old)
        return [OK, b"\0" if old is None else b"\1"]

    def _num(self, args: list[bytes]) -> list[Any]:
        return [OK, pack_u64(len(self._values))]

    def _compare_set(self, args: list[bytes]) -> list[Any]:
        """c10d's compare_set: ``desired`` is set if the key holds ``expected`` (or is
        missing and ``expected`` is empty); the answer is the value held after."""
        if len(args) != 3:
            raise Malformed("CAS takes a key, an expected and a desired value")
        key, expected, desired = _key(args[0]), args[1], args[2]
        current = self._values.get(key)
        if (current is None and expected == b"") or current == expected:
            self._put(key, desired)
            return [OK, desired]
        return [OK, expected if current is None else current]

    def _ping(self, args: list[bytes]) -> list[Any]:
        return [OK]


_HANDLERS = {
    SET: StoreServer._set,
    ADD: StoreServer._add,
    CHECK: StoreServer._check,
    DELETE: StoreServer._delete,
    NUM: StoreServer._num,
    CAS: StoreServer._compare_set,
    PING: StoreServer._ping,
}


def _password(token: bytes) -> bytes:
    return password(gate_password(token))


def _key(raw: bytes) -> str:
    """A key as text; Malformed if it is too long or not UTF-8."""
    if len(raw) > MAX_KEY_BYTES:
        raise Malformed(f"a key is at most {MAX_KEY_BYTES} bytes, got {len(raw)}")
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise Malformed("a key is UTF-8 text") from None


def _keys(raw: list[bytes]) -> tuple[str, ...]:
    if not 1 <= len(raw) <= MAX_KEYS:
        raise Malformed(f"a request names 1 to {MAX_KEYS} keys, got {len(raw)}")
    return tuple(_key(k) for k in raw)
