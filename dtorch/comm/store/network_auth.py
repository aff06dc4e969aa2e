"""Authentication of the network store: an HMAC-SHA256 on every frame of every message.

Before any of this, a connection passes the store's gate (``network_gate``): ZeroMQ's PLAIN
handshake with a password derived from the secret, checked before ZeroMQ buffers a frame of
the peer's. The MACs below give what the gate does not: integrity, replay protection and the
binding of a connection to a rank.

Every participant of one program holds the program's ``secret`` (``CommNamespace.secret``,
distributed with the namespace through the rendezvous); the store's key is
``K = HMAC-SHA256(secret, b"dtorch-store")``. A connection starts with a handshake that makes
it a *session* no replay can enter::

    client -> coordinator   [b"hello", c]                 c: 16 fresh random bytes
    coordinator -> client   [b"hello", c, s, MAC(K, "hello" | c | s)]     s: 16 more

The session id is ``c | s``: the coordinator's ``s`` makes it fresh for the coordinator, the
client's ``c`` makes the answer fresh for the client (and proves that whoever answers holds K:
a process that bound the port first cannot pose as the coordinator). The coordinator keeps
nothing for a hello: ``s = HMAC(K, "cookie" | epoch | connection | c)`` (``epoch``: random per
coordinator), so a request that names ``c`` lets it recompute the session, and it creates the
session only once a request's MAC proves the key (a flood of hellos from peers without the key
costs it no memory and evicts nobody; a session id is taken once, so a captured session cannot
be replayed on a new connection). Every request is ``[c, counter, mac, header]``, or
``[c, counter, mac, header, digest, data...]`` when it carries tensor bytes (a SET: the bytes
cut into frames of at most ``FRAME_BYTES``, at least one); every reply the same without ``c``
(a GET's answer carries data), with::

    mac = HMAC-SHA256(K, direction | session | counter | len(header) | header | digest)

``direction`` is ``req`` or ``rep``; ``counter`` (8 bytes) rises by one per request of the
session and a reply carries its request's counter, so a captured message is refused in any
other session, at any other position, or in the other direction. ``digest`` is the SHA-256 of
the data, all its frames in order (``0`` without data): the producer computes it, the
coordinator keeps it with the bytes without hashing them again, and the consumer checks the
bytes against it before it uses them. So the header (who, which key, what size) is checked
hop by hop and the tensor bytes end to end, at one SHA-256 pass at each end. All MACs and
digests are compared with ``hmac.compare_digest``.

Why HMAC and not ZeroMQ CURVE, measured with ``benchmarks/store_auth.py`` (2 vCPU with SHA-NI,
shared with other work: load about 3; pyzmq 27 / libzmq 4.3.5; loopback TCP; one round is one
tensor from a remote producer through the coordinator to a remote consumer; best of three)::

    per round                       1 KiB      64 MiB
    raw zmq relay (no store)      0.14 ms      131 ms
    raw zmq relay + CURVE         0.40 ms      496 ms   CURVE alone: +365 ms
    store without MACs            1.38 ms      166 ms
    store with HMAC (this)        1.25 ms      259 ms   HMAC: +92 ms (1 KiB: in the noise)
    the MACs alone, no sockets    0.06 ms      126 ms   two SHA-256 passes of 64 MiB

CURVE encrypts and decrypts every byte on both hops (at 64 MiB its cost alone is more than the
store's whole round: a CURVE store would take about 530 ms, the HMAC store takes 259 ms), and it
authenticates connections, so binding a rank to its messages would still be ours to do. The
store moves bulk tensor bytes between the machines of one program: they need integrity and
authenticity, not secrecy from their own operator. HMAC costs one SHA-256 pass (about 1 GB/s
here under load; 1.7 GB/s idle, as measured when the network store was built) at each end and
none on the coordinator, and the 32-byte MACs of small messages are microseconds. What HMAC does
not give, and CURVE would: the bytes are readable on the wire (do not run the store across a
network you would not trust with the tensors). A peer without the key cannot make ZeroMQ receive
its frames: the PLAIN gate (``network_gate``) refuses it at the handshake, which costs nothing
per byte.

Example:
    >>> key = derive_key(b"s" * 32)
    >>> client = ClientAuth(key)
    >>> hello, nonce = client.hello()
    >>> table = SessionTable(key)
    >>> answer = table.receive(b"peer", hello)
    >>> client.accept_hello(nonce, answer.reply[1:])  # the ROUTER strips the identity
    True
    >>> request = table.receive(b"peer", client.seal(1, b"header", b"data"))
    >>> request.counter, request.header, [bytes(frame) for frame in request.data]
    (1, b'header', [b'data'])
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dtorch.comm.store.network_protocol import FRAME_BYTES, MAX_DATA_FRAMES
from dtorch.errors import CommError

#: The first frame of a handshake message.
HELLO = b"hello"
NONCE_BYTES = 16
COUNTER_BYTES = 8
MAC_BYTES = 32
#: The shortest secret a network store accepts (CommNamespace.create() makes 32 bytes).
MIN_SECRET_BYTES = 16

_REQUEST = b"req"
_REPLY = b"rep"
_NO_DATA = b"\0"


class Refused(Exception):
    """A message the coordinator or a client will not act on; the text says why (for the log)."""


def derive_key(secret: bytes) -> bytes:
    """The store key of a program's ``secret``; CommError when it has none.

    Example:
        >>> len(derive_key(b"x" * 16))
        32
    """
    if not isinstance(secret, bytes) or len(secret) < MIN_SECRET_BYTES:
        raise CommError(
            "a network store needs the program's secret (at least "
            f"{MIN_SECRET_BYTES} bytes; this namespace has {len(secret or b'')}): open it with "
            "the program's CommNamespace, which CommNamespace.create() makes with a random "
            "secret and which other processes receive through the rendezvous store"
        )
    return hmac.digest(secret, b"dtorch-store", "sha256")


def split_data(data: Any) -> list[memoryview]:
    """``data`` (bytes-like) as the frames that carry it: at most ``FRAME_BYTES`` each, and
    one (empty) for no bytes.

    Example:
        >>> [len(frame) for frame in split_data(bytes(FRAME_BYTES + 1))]
        [1048576, 1]
    """
    view = memoryview(data).cast("B")
    return [view[i : i + FRAME_BYTES] for i in range(0, len(view), FRAME_BYTES)] or [view]


def data_tag(data: Sequence[Any] | None) -> bytes:
    """What the MAC covers of the data frames: their absence, or ``1`` and the SHA-256
    digest of their bytes in order."""
    if data is None:
        return _NO_DATA
    digest = hashlib.sha256()
    for frame in data:
        digest.update(_buffer(frame))  # hashlib releases the GIL on large buffers
    return b"\1" + digest.digest()


def _with_data(frames: list[Any], data: Sequence[Any] | None, tag: bytes) -> list[Any]:
    return frames if data is None else [*frames, tag, *data]


def _frame_count_ok(count: int, head: int) -> bool:
    """``head`` frames without data, or with a digest and 1 to MAX_DATA_FRAMES data frames."""
    return count == head or head + 2 <= count <= head + 1 + MAX_DATA_FRAMES


def _mac(
    key: bytes, direction: bytes, session: bytes, counter: bytes, header: bytes, tag: bytes
) -> bytes:
    length = len(header).to_bytes(4, "little")
    return hmac.digest(key, direction + session + counter + length + header + tag, "sha256")


def _counter(frame: bytes) -> int:
    return int.from_bytes(frame, "little")


def _frames_bytes(frames: Sequence[Any], small: int = 4) -> list[Any]:
    """The first ``small`` frames as bytes (zmq.Frame or bytes in), the data frame left as
    it is."""
    head = [f if isinstance(f, bytes) else f.bytes for f in frames[:small]]
    return head + list(frames[small:])


def _split(frames: list[Any]) -> tuple[bytes, bytes, bytes, bytes, list[Any] | None]:
    """counter, mac, header, digest (``_NO_DATA`` without data), data frames of a message."""
    if len(frames) == 3:
        return frames[0], frames[1], frames[2], _NO_DATA, None
    return frames[0], frames[1], frames[2], frames[3], frames[4:]


def _buffer(frame: Any) -> Any:
    return frame if isinstance(frame, bytes | memoryview) else frame.buffer


@dataclass(frozen=True, slots=True)
class Hello:
    """A handshake the coordinator answered: the frames to send back."""

    reply: list[bytes]


@dataclass(frozen=True, slots=True)
class Request:
    """An authenticated request: its counter, raw header, data frames (None: no data) and the
    data's digest as the producer declared it (the consumer checks the bytes against it)."""

    counter: int
    header: bytes
    data: Any
    tag: bytes


@dataclass(slots=True)
class _Session:
    id: bytes
    last_counter: int = 0
    rank: int | None = None  # the rank this connection joined as


class SessionTable:
    """The coordinator's side: one session per connection (ROUTER identity), created by the
    first request that proves the key (see the module docstring)."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._epoch = secrets.token_bytes(NONCE_BYTES)
        self._sessions: dict[bytes, _Session] = {}
        self._taken: set[bytes] = set()  # every session id adopted: none is adopted twice

    def receive(self, ident: bytes, frames: Sequence[Any]) -> Hello | Request:
        """The handshake answered, or the authenticated request; Refused otherwise."""
        if len(frames) == 2 and bytes(_buffer(frames[0])) == HELLO:
            return self._hello(ident, bytes(_buffer(frames[1])))
        if not _frame_count_ok(len(frames), 4):
            raise Refused(f"{len(frames)} frames is no request of a network store")
        nonce, *rest = _frames_bytes(frames, 5)
        session = self._sessions.get(ident)
        if session is not None and session.id[:NONCE_BYTES] == nonce:
            return self._open(session, rest)
        return self._adopt(ident, nonce, rest)

    def _hello(self, ident: bytes, client_nonce: bytes) -> Hello:
        if len(client_nonce) != NONCE_BYTES:
            raise Refused("a hello without a 16-byte nonce")
        server_nonce = self._cookie(ident, client_nonce)
        mac = hmac.digest(self._key, HELLO + client_nonce + server_nonce, "sha256")
        return Hello([ident, HELLO, client_nonce, server_nonce, mac])

    def _cookie(self, ident: bytes, client_nonce: bytes) -> bytes:
        """The server nonce of a hello: recomputed, never stored."""
        text = b"cookie" + self._epoch + len(ident).to_bytes(4, "little") + ident + client_nonce
        return hmac.digest(self._key, text, "sha256")[:NONCE_BYTES]

    def _adopt(self, ident: bytes, nonce: bytes, frames: list[Any]) -> Request:
        """The first request of a session: kept once its MAC proves the key."""
        if len(nonce) != NONCE_BYTES:
            raise Refused("a request without its session's 16-byte nonce")
        old = self._sessions.get(ident)
        if old is not None and old.rank is not None:
            raise Refused(f"a second session on the connection of rank {old.rank}")
        session = _Session(nonce + self._cookie(ident, nonce))
        if session.id in self._taken:
            raise Refused("a request of a session that ended (a replay)")
        request = self._open(session, frames)
        self._taken.add(session.id)
        self._sessions[ident] = session
        return request

    def _open(self, session: _Session, frames: list[Any]) -> Request:
        counter, mac, header, tag, data = _split(frames)
        if len(counter) != COUNTER_BYTES or len(mac) != MAC_BYTES:
            raise Refused("a request whose counter or MAC frame has the wrong size")
        if data is not None and (len(tag) != 1 + MAC_BYTES or tag[0] != 1):
            raise Refused("a request whose data digest frame is malformed")
        if _counter(counter) <= session.last_counter:
            raise Refused(f"a replayed or reordered request (counter {_counter(counter)})")
        expected = _mac(self._key, _REQUEST, session.id, counter, header, tag)
        if not hmac.compare_digest(mac, expected):
            raise Refused("a request with a bad MAC (not signed with this program's secret)")
        session.last_counter = _counter(counter)
        return Request(_counter(counter), header, data, tag)

    def rank_of(self, ident: bytes) -> int | None:
        """The rank the connection ``ident`` joined as (None: not joined)."""
        session = self._sessions.get(ident)
        return None if session is None else session.rank

    def bind(self, ident: bytes, rank: int) -> None:
        """Bind the connection ``ident`` to ``rank`` (its JOIN was accepted)."""
        self._sessions[ident].rank = rank

    def forget(self, ident: bytes) -> None:
        """Drop the session of ``ident`` (it left)."""
        self._sessions.pop(ident, None)

    def seal(
        self, ident: bytes, counter: int, header: bytes, data: Any, tag: bytes
    ) -> list[Any] | None:
        """The frames of a reply to request ``counter`` of ``ident`` (None: session gone)."""
        session = self._sessions.get(ident)
        if session is None:
            return None
        count = counter.to_bytes(COUNTER_BYTES, "little")
        mac = _mac(self._key, _REPLY, session.id, count, header, tag)
        return _with_data([ident, count, mac, header], data, tag)


class ClientAuth:
    """A client's side of one session: the handshake, sealed requests, checked replies."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._session = b""

    def hello(self) -> tuple[list[bytes], bytes]:
        """The handshake frames and the nonce to check the answer against."""
        nonce = secrets.token_bytes(NONCE_BYTES)
        return [HELLO, nonce], nonce

    def accept_hello(self, nonce: bytes, frames: Sequence[Any]) -> bool:
        """True (and the session set) when ``frames`` is the coordinator's answer to ``nonce``."""
        parts = [bytes(_buffer(f)) for f in frames]
        if len(parts) != 4 or parts[0] != HELLO or parts[1] != nonce:
            return False
        if len(parts[2]) != NONCE_BYTES:
            return False
        expected = hmac.digest(self._key, HELLO + nonce + parts[2], "sha256")
        if not hmac.compare_digest(parts[3], expected):
            return False
        self._session = nonce + parts[2]
        return True

    def seal(self, counter: int, header: bytes, data: Any) -> list[Any]:
        """The frames of request ``counter`` with ``data`` (bytes-like, or None)."""
        count = counter.to_bytes(COUNTER_BYTES, "little")
        data = None if data is None else split_data(data)
        tag = data_tag(data)
        mac = _mac(self._key, _REQUEST, self._session, count, header, tag)
        return _with_data([self._session[:NONCE_BYTES], count, mac, header], data, tag)

    def open_reply(self, counter: int, frames: Sequence[Any]) -> tuple[bytes, Any] | None:
        """(header, data frames or None) of the reply to request ``counter``; None for the answer to
        another request (one given up on); Refused for a forgery or garbage; CommError for
        a genuine reply whose tensor bytes are not the ones their producer signed."""
        if not _frame_count_ok(len(frames), 3):
            raise Refused(f"{len(frames)} frames is no reply of a network store")
        count, mac, header, tag, data = _split(_frames_bytes(frames))
        if count != counter.to_bytes(COUNTER_BYTES, "little"):
            return None
        if not hmac.compare_digest(mac, _mac(self._key, _REPLY, self._session, count, header, tag)):
            raise Refused("a reply with a bad MAC (not from this program's coordinator)")
        if data is not None and not hmac.compare_digest(tag, data_tag(data)):
            raise CommError(
                "the network store delivered tensor bytes that do not match the digest their "
                "producer signed (changed on the way, or a faulty producer)"
            )
        return header, data
