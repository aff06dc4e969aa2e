"""Refusals at the ZeroMQ handshake, in the log: a socket monitor's failed handshakes, rate-limited.

A peer that fails a listener's security handshake (CURVE, or the network store's PLAIN gate)
never delivers a frame, so the application never sees it: libzmq reports it to a socket
monitor only. ``HandshakeWatch`` reads a listener's monitor and logs each failure through a
``RefusalLog``, which logs the first ``LOGGED_REFUSALS`` refusals one by one and then at most
one line per ``SUMMARY_SECONDS``, with the count so far (a flood of bad peers must not become
a flood of log lines: one line per hundred refusals was 60 lines a second under a garbage
flood of every port).

What libzmq 4.3 reports, and so what is logged:

* a peer of another mechanism (a NULL-mechanism socket against CURVE or PLAIN), a CURVE client
  with a wrong server key, a malformed greeting or command that starts with ``0xff``:
  ``EVENT_HANDSHAKE_FAILED_PROTOCOL`` (or ``_NO_DETAIL``), logged here with the listener's
  address (libzmq does not give the peer's);
* a client the ZAP handler refuses (a wrong CURVE client key, a wrong PLAIN password):
  ``EVENT_HANDSHAKE_FAILED_AUTH``, not logged here: the ZAP handler logs it itself, with the
  peer's address;
* bytes whose first is not ``0xff`` (libzmq reads them as a ZMTP 1.0 peer, which it refuses
  while ZAP is on): the connection is closed with no event, so nothing is logged.

Example:
    >>> import logging, zmq
    >>> context = zmq.Context()
    >>> server = context.socket(zmq.PULL)
    >>> watch = HandshakeWatch(server, RefusalLog(logging.getLogger("doc"), "a doctest socket"))
    >>> port = server.bind_to_random_port("tcp://127.0.0.1")
    >>> watch.drain()  # no event yet; True: the monitor still runs
    True
    >>> server.close(0); watch.monitor.poll(5000) and watch.drain()  # the monitor's end
    False
    >>> watch.close(); context.term()
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

#: Refusals logged one by one; beyond them, at most one line per ``SUMMARY_SECONDS``.
LOGGED_REFUSALS = 100
SUMMARY_SECONDS = 10.0
#: The events a watch asks for: failed handshakes that ZAP does not see, and the monitor's end.
WATCHED = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_MONITOR_STOPPED
)
#: How often a watch thread looks whether it should stop (milliseconds).
_POLL_MS = 500


class RefusalLog:
    """Warnings about refused peers of one listener (``what``), rate-limited; thread-safe.
    ``clock``: seconds, rising (``time.monotonic``; tests give their own)."""

    def __init__(
        self, logger: logging.Logger, what: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger = logger
        self.what = what
        self.count = 0
        self._clock = clock
        self._quiet_until = 0.0  # once past LOGGED_REFUSALS: when the next line may come
        self._lock = threading.Lock()

    def refused(self, text: str) -> None:
        """Log that ``what`` refused a peer because of ``text`` (if this one is logged)."""
        with self._lock:
            self.count += 1
            count = self.count
            now = self._clock()
            logged = count <= LOGGED_REFUSALS or now >= self._quiet_until
            if logged and count >= LOGGED_REFUSALS:
                self._quiet_until = now + SUMMARY_SECONDS
        if logged:
            self.logger.warning("%s %s (%d so far)", self.what, text, count)


def describe(event: Mapping[str, Any]) -> str:
    """What a failed-handshake event says, as text for the log."""
    endpoint = event["endpoint"].decode(errors="replace")
    value = int(event["value"])
    if event["event"] == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
        reason = f"a protocol error (ZMTP code {value:#x}: wrong mechanism, key or framing)"
    else:
        reason = f"an error ({zmq.strerror(value) if value else 'no detail'})"
    return f"refused a peer at the handshake on {endpoint}: {reason}"


class HandshakeWatch:
    """The monitor of one listening socket; ``drain`` logs the failed handshakes it reports.

    Create it before the socket binds (no connection is missed). The caller reads it: in its
    own poll loop (``monitor`` is the socket to poll) or on a thread (``start_thread``).
    """

    def __init__(self, socket: zmq.Socket[Any], refusals: RefusalLog) -> None:
        # an address of its own: pyzmq's default names the socket's fd, which a socket
        # closed a moment ago may still hold
        address = f"inproc://dtorch-monitor-{secrets.token_hex(8)}"
        socket.monitor(address, WATCHED)
        self.monitor: zmq.Socket[Any] = socket.context.socket(zmq.PAIR)
        self.monitor.setsockopt(zmq.LINGER, 0)
        self.monitor.connect(address)
        self._socket = socket
        self.refusals = refusals
        self._thread: threading.Thread | None = None

    def drain(self) -> bool:
        """Log every event waiting; False once the monitor stopped (the socket closed)."""
        while True:
            try:
                event = recv_monitor_message(self.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return True
            if event["event"] == zmq.EVENT_MONITOR_STOPPED:
                return False
            self.refusals.refused(describe(event))

    def start_thread(self) -> None:
        """Read the monitor on a daemon thread until the watched socket closes."""
        self._thread = threading.Thread(target=self._run, name="dtorch-handshakes", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self.monitor.poll(_POLL_MS) or self.drain():
                pass
        except zmq.ZMQError:  # the context is terminating: nothing more to watch
            pass
        finally:
            self.monitor.close(0)

    def join(self, timeout_s: float = 5.0) -> None:
        """Wait for the thread (after the watched socket closed; it closes the monitor)."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def close(self) -> None:
        """Stop watching and close the monitor (without a thread). Call it before the watched
        socket closes: libzmq never frees a socket closed while its monitor is connected and
        unread (its listener and every connection stay open, with the port)."""
        if not self._socket.closed:
            self._socket.disable_monitor()
        self.monitor.close(0)
