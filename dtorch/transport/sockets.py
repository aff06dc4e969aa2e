"""What the four ZeroMQ classes share: an owned socket, timeouts, sending and receiving frames.

An ``Endpoint`` is one socket, its context (created and terminated by the endpoint unless the
caller passed one), its address and the lock that serialises every use of the socket (a zmq
socket is not thread-safe). Parts of ``LARGE_FRAME`` bytes or more go out without a copy;
received frames after the first two (id/sender and kind, always small) come back as zero-copy
views of the zmq frame.

Example:
    >>> import zmq
    >>> pull = Endpoint.create(zmq.PULL, "inproc://doc", None, {zmq.LINGER: 0})
    >>> pull.bind()
    >>> push = pull.context.socket(zmq.PUSH); _ = push.connect("inproc://doc")
    >>> send_message(push, b"head", b"kind", [b"part"])
    >>> [bytes(frame) for frame in pull.receive(1.0, list)]
    [b'head', b'kind', b'part']
    >>> push.close(0); pull.close(0)
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import zmq

from dtorch.errors import TransportError
from dtorch.options import GlobalOption
from dtorch.transport.security import CurveKeys, Guard
from dtorch.transport.wire import LARGE_FRAME, Part, as_part, check_kind

T = TypeVar("T")
_C = TypeVar("_C", bound="Channel")
_SLICE_S = 0.1  # a waiting receive lets go of the socket's lock this often (for close)


def wait_seconds(timeout_s: float | None) -> float:
    """``timeout_s``, or the zmq timeout of GlobalOption when it is None (never negative).

    Example:
        >>> wait_seconds(0.5), wait_seconds(None) == GlobalOption.get_zmq_timeout_second()
        (0.5, True)
    """
    if timeout_s is None:
        return GlobalOption.get_zmq_timeout_second()
    return max(0.0, float(timeout_s))


def to_ms(seconds: float) -> int:
    """Whole milliseconds for a zmq option or poll, rounded up so a wait never ends early.

    Example:
        >>> to_ms(0.0001), to_ms(2.0)
        (1, 2000)
    """
    return max(0, math.ceil(seconds * 1000))


#: How long a CURVE server socket waits for a connecting peer to finish its handshake: what
#: a peer that never authenticates sent is held that long at most (libzmq's default is 30 s).
HANDSHAKE_MS = 10_000
#: The largest message a socket takes where only small ones come in (subscriptions, beats):
#: libzmq applies it to handshake commands too, so an unauthenticated peer cannot make the
#: socket buffer more than this per connection.
SMALL_MESSAGE = 64 * 1024


class Endpoint:
    """One zmq socket with its context, address and lock; see the module docstring."""

    __slots__ = (
        "_closed",
        "_closing",
        "_guard",
        "_owns_context",
        "address",
        "context",
        "lock",
        "socket",
    )

    def __init__(
        self, context: zmq.Context[Any], owns: bool, socket: zmq.Socket[Any], address: str
    ) -> None:
        self.context, self._owns_context = context, owns
        self.socket, self.address = socket, address
        self.lock = threading.Lock()
        self._closed = False
        self._closing = False  # set before close waits for the lock: waiters stop re-taking it
        self._guard: Guard | None = None  # the ZAP handler of a CURVE server's own context

    @classmethod
    def create(
        cls,
        socket_type: int,
        address: str,
        context: zmq.Context[Any] | None,
        options: Mapping[int, int | bytes],
    ) -> Endpoint:
        """A new socket of ``socket_type`` with ``options`` set; its own context if None."""
        if not isinstance(address, str) or "://" not in address:
            raise TransportError(f"a zmq address is 'transport://where', got {address!r}")
        owns = context is None
        ctx: zmq.Context[Any] = zmq.Context() if context is None else context
        try:
            socket: zmq.Socket[Any] = ctx.socket(socket_type, copy_threshold=LARGE_FRAME)
        except BaseException:
            if owns:
                ctx.term()
            raise
        endpoint = cls(ctx, owns, socket, address)
        try:
            for option, value in options.items():
                socket.setsockopt(option, value)
        except BaseException:
            endpoint.close(0)
            raise
        return endpoint

    @classmethod
    def opened(
        cls,
        socket_type: int,
        address: str,
        context: zmq.Context[Any] | None,
        options: Mapping[int, int | bytes],
        attach: Callable[[Endpoint], None],
        keys: CurveKeys | None = None,
    ) -> Endpoint:
        """``create``, then ``attach(endpoint)`` (bind or connect); closed again if that
        fails, so a constructor that raises leaves no socket or context behind. With
        ``keys`` (required for a ``tcp://`` address) the socket speaks CURVE: a binding one
        as the server, behind a ``Guard`` on its own context (ZAP is per context)."""
        serves = attach is Endpoint.bind
        if keys is None and address.startswith("tcp://"):
            raise TransportError(
                f"{address}: a TCP socket needs the program's CurveKeys (IPC sockets are "
                "private to this user; TCP ones are authenticated with CURVE)"
            )
        if keys is not None and serves and context is not None:
            raise TransportError("a CURVE server socket owns its context (its ZAP handler)")
        secure = {} if keys is None else keys.server_options() if serves else keys.client_options()
        if keys is not None and serves:  # an unauthenticated peer holds what it sent this long
            secure = {zmq.HANDSHAKE_IVL: HANDSHAKE_MS, **secure}
        endpoint = cls.create(socket_type, address, context, {**options, **secure})
        try:
            if keys is not None and serves:
                endpoint._guard = Guard.start(endpoint.context, keys)
                endpoint._guard.watch(endpoint.socket)  # refusals before ZAP, in the log
            attach(endpoint)
        except BaseException:
            endpoint.close(0)
            raise
        return endpoint

    @property
    def closed(self) -> bool:
        """Whether ``close`` has run."""
        return self._closed

    def bind(self) -> None:
        """Bind the address; TransportError if zmq refuses (the caller closes the endpoint).
        A TCP address's port ``*`` or 0 takes a free port: ``address`` is then the bound one."""
        self._attach(self.socket.bind, "bind")
        if self.address.startswith("tcp://"):
            bound = self.socket.getsockopt(zmq.LAST_ENDPOINT)
            self.address = bound.decode() if isinstance(bound, bytes) else str(bound)

    def connect(self) -> None:
        """Connect to the address (zmq connects asynchronously and retries in the background)."""
        self._attach(self.socket.connect, "connect to")

    def _attach(self, how: Any, verb: str) -> None:
        try:
            how(self.address)
        except zmq.ZMQError as error:
            raise TransportError(f"cannot {verb} {self.address}: {error}") from None

    def live(self) -> zmq.Socket[Any]:
        """The socket; TransportError if the endpoint is closed (call with the lock held)."""
        if self._closed:
            raise self._closed_error()
        return self.socket

    def check_open(self) -> None:
        """TransportError if a close has begun: a loop that waits in slices calls this before
        taking the lock again, so that the close gets it."""
        if self._closing:
            raise self._closed_error()

    def _closed_error(self) -> TransportError:
        return TransportError(f"the socket at {self.address} is closed")

    def receive(self, timeout_s: float, read: Callable[[list[bytes | memoryview]], T]) -> T | None:
        """``read(frames)`` of the next message, or None if none arrives within ``timeout_s``.

        The lock is held for one slice of the wait at a time (``_SLICE_S``), so a ``close``
        from another thread waits no longer than that; the waiting call then raises
        TransportError (closed). ``read`` runs under the lock: messages are read in order.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            self.check_open()
            with self.lock:
                socket = self.live()
                try:
                    frames = recv_frames(socket, zmq.NOBLOCK)
                except zmq.Again:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    socket.poll(to_ms(min(remaining, _SLICE_S)), zmq.POLLIN)
                    continue
                return read(frames)

    def close(self, linger_ms: int) -> None:
        """Close the socket (waiting at most ``linger_ms`` for queued messages) and terminate
        the context if the endpoint owns it. Idempotent; takes the lock."""
        self._closing = True
        with self.lock:
            if self._closed:
                return
            self._closed = True
            self.socket.close(linger_ms)
            if self._guard is not None:
                self._guard.stop()
            if self._owns_context:
                self.context.term()


class Channel:
    """What the four socket classes share: their endpoint's address, and ``with`` closing."""

    __slots__ = ()
    _endpoint: Endpoint

    @property
    def address(self) -> str:
        """The address this channel is bound or connected to."""
        return self._endpoint.address

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_parts(kind: bytes, parts: Sequence[Part]) -> None:
    """TypeError unless ``kind`` is bytes and every part a contiguous buffer, checked before
    the first frame goes out (a failure half-way through would leave half a message queued)."""
    check_kind(kind)
    for index, part in enumerate(parts):
        if type(part) is not bytes:
            as_part(part, index)


def send_message(socket: zmq.Socket[Any], head: bytes, kind: bytes, parts: Sequence[Part]) -> None:
    """One multipart message ``[head, kind, *parts]`` (checked by ``check_parts``).

    The parts go with ``copy=False``, and the socket's ``copy_threshold`` (``LARGE_FRAME``, set
    by ``Endpoint.create``) makes pyzmq copy the small ones, in C: only frames of LARGE_FRAME
    bytes or more are sent without a copy.

    Example:
        >>> import zmq
        >>> context = zmq.Context(); a = context.socket(zmq.PAIR); _ = a.bind("inproc://s")
        >>> b = context.socket(zmq.PAIR); _ = b.connect("inproc://s")
        >>> send_message(a, b"h", b"k", [b"x", bytes(LARGE_FRAME)])
        >>> [len(frame) for frame in b.recv_multipart()]
        [1, 1, 1, 65536]
        >>> a.close(0); b.close(0); context.term()
    """
    send = socket.send
    if not parts:
        send(head, zmq.SNDMORE)
        send(kind)
        return
    send(head, zmq.SNDMORE)
    send(kind, zmq.SNDMORE)
    for part in parts[:-1]:
        send(part, zmq.SNDMORE, copy=False)
    send(parts[-1], 0, copy=False)


def recv_frames(socket: zmq.Socket[Any], flags: int = 0) -> list[bytes | memoryview]:
    """One multipart message: the first two frames as bytes, the rest as zero-copy views.

    zmq.Again (with NOBLOCK) if no message is waiting; the frames of a message arrive together,
    so only the first frame can be missing.
    """
    recv, more = socket.recv, socket.getsockopt
    frames: list[bytes | memoryview] = [recv(flags)]
    if more(zmq.RCVMORE):
        frames.append(recv())
        while more(zmq.RCVMORE):
            frames.append(recv(copy=False).buffer)
    return frames
