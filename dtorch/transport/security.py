"""CURVE for the ZeroMQ sockets that listen on TCP: only holders of the program's secret connect.

IPC sockets are authenticated by their directory (mode 0700, ``IpcDirectory``). A TCP socket
can be reached by anyone who can reach the address, so every TCP socket of the controller and
its workers uses ZeroMQ's CURVE mechanism, keyed from one per-program secret (32 random
bytes the controller makes; ``dtorch.cluster`` says how workers obtain it):

* both long-term key pairs are derived from the secret (``HMAC-SHA256(secret, purpose)`` as
  the curve25519 secret key), so nothing but the secret needs distributing;
* the binding side is the CURVE server; its ZAP handler (``Guard``) admits only a client
  whose long-term public key is the derived client key, i.e. a holder of the secret, and logs
  every client key it refuses (``dtorch.transport.security``);
* a peer that fails the handshake before ZAP is asked (a NULL-mechanism peer, a wrong server
  key, malformed greetings) is logged from the socket's monitor (``dtorch.transport.
  handshakes`` says exactly what libzmq reports); both are rate-limited: the first 100
  refusals of a socket one by one, then at most one line per 10 s;
* a connection that fails the handshake never delivers a frame: the application sees nothing,
  and an unauthenticated subscriber receives nothing.

Why CURVE here and not an HMAC on every message: these sockets carry the controller's batches
(which hold the user's tensors when it creates them from torch) to every subscriber, and an
HMAC would let anyone who connects a SUB socket read them; CURVE encrypts too. Measured on
this machine (loopback TCP, libzmq 4.3.5): 100-byte messages cost the same with and without
CURVE (3.0 vs 3.4 us each, noise), 64 MB frames 244 ms instead of 68 ms (275 MB/s). The
controller's messages are small; values of remote workers pay the 275 MB/s.

Example:
    >>> import zmq
    >>> keys = CurveKeys.from_secret(bytes(32))
    >>> keys == CurveKeys.from_secret(bytes(32)), keys == CurveKeys.from_secret(bytes([1]) * 32)
    (True, False)
    >>> context = zmq.Context()
    >>> guard = Guard.start(context, keys)
    >>> server = context.socket(zmq.PULL)
    >>> for option, value in keys.server_options().items(): server.setsockopt(option, value)
    >>> port = server.bind_to_random_port("tcp://127.0.0.1")
    >>> client = context.socket(zmq.PUSH)
    >>> for option, value in keys.client_options().items(): client.setsockopt(option, value)
    >>> _ = client.connect(f"tcp://127.0.0.1:{port}"); client.send(b"hello")
    >>> server.poll(5000) and server.recv()
    b'hello'
    >>> client.close(0); server.close(0); guard.stop(); context.term()
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass, field
from typing import Any

import zmq
import zmq.auth.thread
from zmq.utils import z85

from dtorch.errors import TransportError
from dtorch.transport.handshakes import HandshakeWatch, RefusalLog

#: Bytes of a program secret.
SECRET_BYTES = 32
#: The ZAP domain of dtorch's CURVE servers.
DOMAIN = "dtorch"

_LOG = logging.getLogger(__name__)


def check_secret(secret: bytes) -> bytes:
    """``secret`` if it is ``SECRET_BYTES`` bytes; TransportError otherwise.

    Example:
        >>> len(check_secret(bytes(32)))
        32
    """
    if not isinstance(secret, bytes) or len(secret) != SECRET_BYTES:
        got = f"{len(secret)} bytes" if isinstance(secret, bytes) else type(secret).__name__
        raise TransportError(f"a program secret is {SECRET_BYTES} bytes, got {got}")
    return secret


def _key_pair(secret: bytes, purpose: bytes) -> tuple[bytes, bytes]:
    """A curve25519 (public, secret) pair in z85, derived from ``secret`` for ``purpose``."""
    private = z85.encode(hmac.new(secret, purpose, hashlib.sha256).digest())
    return zmq.curve_public(private), private


@dataclass(frozen=True, slots=True)
class CurveKeys:
    """The server's and the client's CURVE key pairs of one program (z85 bytes)."""

    server_public: bytes
    server_secret: bytes = field(repr=False)
    client_public: bytes
    client_secret: bytes = field(repr=False)

    @classmethod
    def from_secret(cls, secret: bytes) -> CurveKeys:
        """The key pairs every holder of ``secret`` derives alike."""
        server = _key_pair(check_secret(secret), b"dtorch-curve-server")
        client = _key_pair(secret, b"dtorch-curve-client")
        return cls(server[0], server[1], client[0], client[1])

    def server_options(self) -> dict[int, int | bytes]:
        """Socket options of a binding (server) socket."""
        return {
            zmq.CURVE_SERVER: 1,
            zmq.CURVE_SECRETKEY: self.server_secret,
            zmq.ZAP_DOMAIN: DOMAIN.encode(),
        }

    def client_options(self) -> dict[int, int | bytes]:
        """Socket options of a connecting (client) socket."""
        return {
            zmq.CURVE_SERVERKEY: self.server_public,
            zmq.CURVE_PUBLICKEY: self.client_public,
            zmq.CURVE_SECRETKEY: self.client_secret,
        }


class _Admit:
    """The ZAP callback: admits the program's client key, logs every other (rate-limited)."""

    def __init__(self, client_public: bytes, refusals: RefusalLog) -> None:
        self._key = client_public
        self._refusals = refusals

    def callback(self, domain: str, key: bytes) -> bool:
        if hmac.compare_digest(key, self._key):
            return True
        self._refusals.refused(f"refused a CURVE client with an unknown key (domain {domain!r})")
        return False


class Guard:
    """The ZAP handler of one zmq context: its CURVE servers admit only the program's client.

    One per context (ZAP is per context), started before any server socket of the context
    binds; ``stop`` before the context terminates.
    """

    def __init__(self, authenticator: Any, refusals: RefusalLog) -> None:
        self._authenticator = authenticator
        self._refusals = refusals
        self._watch: HandshakeWatch | None = None

    @classmethod
    def start(cls, context: zmq.Context[Any], keys: CurveKeys) -> Guard:
        """Start the ZAP handler of ``context`` (before any of its server sockets binds)."""
        refusals = RefusalLog(_LOG, "a CURVE server")
        authenticator = zmq.auth.thread.ThreadAuthenticator(context, log=_LOG)
        authenticator.start()
        authenticator.configure_curve_callback(DOMAIN, _Admit(keys.client_public, refusals))
        return cls(authenticator, refusals)

    def watch(self, socket: zmq.Socket[Any]) -> None:
        """Log the failed handshakes of ``socket`` (call before it binds; one socket)."""
        self._watch = HandshakeWatch(socket, self._refusals)
        self._watch.start_thread()

    def stop(self) -> None:
        """Stop the handler thread, and the watch's once its socket closed (idempotent)."""
        if self._authenticator is not None:
            self._authenticator.stop()
            self._authenticator = None
        if self._watch is not None:
            self._watch.join()
            self._watch = None
