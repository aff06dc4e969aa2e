"""The network store's gate: ZeroMQ PLAIN with a password derived from the program's secret,
checked by a ZAP handler at the handshake, before ZeroMQ buffers any frame of the peer's.

Why: the per-message HMAC (``network_auth``) can only be checked once a whole multipart
message has arrived, and ZeroMQ buffers every frame of a message until its last; a peer
without the secret could make the coordinator hold any number of frames. The gate refuses
such a peer before its first frame: a NULL-mechanism peer or one of another mechanism fails at
the greeting, a PLAIN peer with a wrong password when the ZAP handler answers. What a peer
that never passes can make a listener hold is one handshake command of at most
``FRAME_BYTES`` per connection (libzmq's ``MAXMSGSIZE`` bounds handshake commands too), for
at most ``HANDSHAKE_S``. PLAIN costs nothing per byte (CURVE would: ``network_auth`` has the
figures); the per-message HMAC stays for integrity, replay protection and the rank binding.
Measured with ``benchmarks/store_auth.py --quick`` (2 shared vCPUs, loopback), the store with
HMAC per round before the gate and after it (with the tensor in 1 MiB frames): 1.77 -> 1.39 ms
at 1 KiB, 266 -> 194 ms at 64 MiB (the raw relay: 156 and 162 ms; noise is about 10%).

* The password is ``HMAC-SHA256(K, b"dtorch-store-gate")`` in hex (``K``: the store key, itself
  ``HMAC(secret, b"dtorch-store")``): never the secret nor ``K``, and a captured password
  tells nothing about either. PLAIN sends it in the clear: someone who can read the traffic
  can pass the gate (and then make the coordinator buffer messages it will refuse), but can
  still forge nothing. Keep the workers' interfaces on a private network.
* ZAP is per zmq context: every store of a process uses ``store_context()``, whose one
  ``Gate`` (a daemon thread) answers for all its coordinators, each under a ZAP domain of its
  own, with that coordinator's password. A refusal is logged through the coordinator's
  ``RefusalLog`` (rate-limited) with the peer's address; peers refused before ZAP is asked
  are logged from the coordinator's socket monitor (``dtorch.transport.handshakes``).

Example:
    >>> context = store_context()
    >>> gate = Gate.of(context)
    >>> server = context.socket(zmq.ROUTER)
    >>> domain = gate.admit(password(bytes(32)), RefusalLog(_LOG, "a doctest store"))
    >>> for option, value in server_options(domain).items(): server.setsockopt(option, value)
    >>> port = server.bind_to_random_port("tcp://127.0.0.1")
    >>> client = context.socket(zmq.DEALER)
    >>> for option, value in client_options(bytes(32)).items(): client.setsockopt(option, value)
    >>> _ = client.connect(f"tcp://127.0.0.1:{port}"); client.send(b"hi")
    >>> server.poll(5000) and server.recv_multipart()[1]
    b'hi'
    >>> client.close(0); server.close(0); gate.release(domain)
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import threading
from dataclasses import dataclass
from typing import Any

import zmq

from dtorch.comm.store.network_protocol import FRAME_BYTES
from dtorch.transport.handshakes import RefusalLog

_LOG = logging.getLogger(__name__)

#: The PLAIN user name of every store client (the password is what counts).
USERNAME = b"dtorch-store"
#: How long a connection may take to complete the handshake before it is dropped.
HANDSHAKE_S = 10
#: The endpoint libzmq sends ZAP requests to (RFC 27).
ZAP_ENDPOINT = "inproc://zeromq.zap.01"

_LABEL = b"dtorch-store-gate"
_ACCEPT, _DENY = b"200", b"400"


def password(key: bytes) -> bytes:
    """The PLAIN password of the store key ``key`` (hex; derived, never the key itself).

    Example:
        >>> len(password(bytes(32))), password(bytes(32)) == password(bytes([1]) * 32)
        (64, False)
    """
    return hmac.digest(key, _LABEL, "sha256").hex().encode()


def client_options(key: bytes) -> dict[int, int | bytes]:
    """Socket options of a store client: PLAIN with the password, frames of at most
    ``FRAME_BYTES`` (an impostor listener cannot make it hold more either)."""
    return {
        zmq.PLAIN_USERNAME: USERNAME,
        zmq.PLAIN_PASSWORD: password(key),
        zmq.MAXMSGSIZE: FRAME_BYTES,
        zmq.LINGER: 0,
    }


def server_options(domain: bytes) -> dict[int, int | bytes]:
    """Socket options of a coordinator's ROUTER whose ZAP domain is ``domain``."""
    return {
        zmq.PLAIN_SERVER: 1,
        zmq.ZAP_DOMAIN: domain,
        zmq.MAXMSGSIZE: FRAME_BYTES,
        zmq.HANDSHAKE_IVL: HANDSHAKE_S * 1000,
        zmq.LINGER: 0,
    }


_CONTEXTS: dict[int, zmq.Context[Any]] = {}  # by process id: a forked child makes its own
_GATES: dict[int, Gate] = {}  # by id() of the context
_LOCK = threading.Lock()


def store_context() -> zmq.Context[Any]:
    """The zmq context of this process's network stores (its own: ZAP is per context, and the
    store must not take the ZAP endpoint of a context the program uses otherwise)."""
    with _LOCK:
        context = _CONTEXTS.get(os.getpid())
        if context is None:
            context = _CONTEXTS[os.getpid()] = zmq.Context()
        return context


@dataclass(frozen=True, slots=True)
class _Door:
    """What the gate checks for one coordinator, and where it logs a refusal."""

    password: bytes
    refusals: RefusalLog


class Gate:
    """The ZAP handler of one context: admits a client whose PLAIN password is the one of the
    coordinator (ZAP domain) it connects to. ``Gate.of`` starts it once per context."""

    def __init__(self, context: zmq.Context[Any]) -> None:
        self._doors: dict[bytes, _Door] = {}
        self._lock = threading.Lock()
        self._socket = context.socket(zmq.REP)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.bind(ZAP_ENDPOINT)
        thread = threading.Thread(target=self._run, name="dtorch-store-gate", daemon=True)
        thread.start()

    @classmethod
    def of(cls, context: zmq.Context[Any]) -> Gate:
        """The gate of ``context``, started by the first call (it lives as long as the process)."""
        with _LOCK:
            gate = _GATES.get(id(context))
            if gate is None:
                gate = _GATES[id(context)] = cls(context)
            return gate

    def admit(self, secret_password: bytes, refusals: RefusalLog) -> bytes:
        """A new ZAP domain whose clients must give ``secret_password``; refusals go to
        ``refusals``. Set it on the coordinator's socket before it binds."""
        domain = f"dtorch-store-{secrets.token_hex(8)}".encode()
        with self._lock:
            self._doors[domain] = _Door(secret_password, refusals)
        return domain

    def release(self, domain: bytes) -> None:
        """Forget ``domain`` (its coordinator stopped): a client of it is refused from now."""
        with self._lock:
            self._doors.pop(domain, None)

    def _run(self) -> None:
        while True:
            try:  # the context may end at either call: the socket must close for term()
                request = self._socket.recv_multipart()
                self._socket.send_multipart(self._answer(request))
            except zmq.ContextTerminated:
                self._socket.close(0)
                return

    def _answer(self, request: list[bytes]) -> list[bytes]:
        """The ZAP reply (RFC 27) to ``request``: 200 for the right password, 400 otherwise."""
        if len(request) < 6:  # no ZAP request: nothing to answer but a refusal
            return [b"1.0", request[1] if len(request) > 1 else b"", _DENY, b"", b"", b""]
        request_id, domain, address, mechanism = request[1], request[2], request[3], request[5]
        credentials = request[6:]
        with self._lock:
            door = self._doors.get(domain)
        ok = door is not None and mechanism == b"PLAIN" and self._matches(door, credentials)
        if not ok and door is not None:
            peer = address.decode(errors="replace")
            door.refusals.refused(f"refused a peer at {peer} at the handshake: wrong password")
        return [b"1.0", request_id, _ACCEPT if ok else _DENY, b"", b"", b""]

    @staticmethod
    def _matches(door: _Door, credentials: list[bytes]) -> bool:
        if len(credentials) != 2 or credentials[0] != USERNAME:
            return False
        return hmac.compare_digest(credentials[1], door.password)
