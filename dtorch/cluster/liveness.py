"""Liveness across hosts: heartbeats on a channel of their own, both ways.

A pool on one machine watches its workers' pidfds; a worker on another host has no pid the
controller can watch. So the controller publishes a beat every ``BEAT_SECONDS`` on its beats
publisher, and every worker pushes one to the controller's beats puller: each side declares
the other lost after ``LOST_AFTER_SECONDS`` of silence (a killed process, a lost host, a
cut network). Beats have their own sockets and threads, so a long kernel or a busy report
thread never delays one, and a graph need not be running for them to flow.

A worker killed on a live host is noticed within ``LOST_AFTER_SECONDS`` (5 s), a lost host the
same; the issue's bound is 10 s.

Every beat carries the worker's pid: a beat for a rank from another pid than the one that
registered it (a restarted worker that got past the store's rank claim) means the rank's
registered process is gone, and ``on_replaced(worker, pid)`` says so at once.

Once the controller counts a worker lost it says so on the beats channel (``LOST`` with the
rank), and every worker's ``on_peer_lost(rank)`` runs on its beacon thread: a survivor blocked
in a collective with the lost worker learns it there, within seconds, instead of at the comm
timeout (a network store cannot see a peer on another host die).

Example:
    >>> import os
    >>> from dtorch.transport import Publisher, Puller
    >>> from dtorch.transport.security import CurveKeys
    >>> keys = CurveKeys.from_secret(os.urandom(32))
    >>> out = Publisher("tcp://127.0.0.1:0", keys=keys)
    >>> into = Puller("tcp://127.0.0.1:0", keys=keys)
    >>> lost = []
    >>> monitor = BeatMonitor(out, into, workers=1, on_lost=lambda w, s: lost.append(w))
    >>> beacon = Beacon(out.address, into.address, 0, keys, on_gone=lambda: None)
    >>> monitor.wait_first_beats(5.0)
    >>> beacon.stop(); monitor.stop(); out.close(); into.close(); lost
    []
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable

from dtorch.errors import DTorchError, RendezvousError
from dtorch.runtime.daemon import DaemonThread
from dtorch.runtime.process.protocol import pack_u64, unpack_u64
from dtorch.transport import Publisher, Puller, Pusher, Subscriber
from dtorch.transport.security import CurveKeys

#: How often each side beats.
BEAT_SECONDS = 1.0
#: Silence after which the other side counts as lost.
LOST_AFTER_SECONDS = 5.0
BEAT, BYE, LOST = b"beat", b"bye", b"lost"

_LOG = logging.getLogger(__name__)


class BeatMonitor:
    """The controller's side: beats out, and ``on_lost(worker, silent_seconds)`` once for each
    worker silent for ``lost_after_s`` (``LOST_AFTER_SECONDS``); with ``pids`` (each worker's
    registered pid), ``on_replaced(worker, pid)`` once a worker's beat comes from another
    pid (the worker is then taken for lost: no ``on_lost`` follows)."""

    def __init__(
        self,
        beats_out: Publisher,
        beats_in: Puller,
        workers: int,
        on_lost: Callable[[int, float], None],
        lost_after_s: float = LOST_AFTER_SECONDS,
        *,
        pids: tuple[int, ...] | None = None,
        on_replaced: Callable[[int, int], None] | None = None,
    ) -> None:
        self._out, self._in = beats_out, beats_in
        self._on_lost = on_lost
        self._pids, self._on_replaced = pids, on_replaced
        self._lost_after_s = lost_after_s  # this monitor's own: others keep theirs
        self._last = dict.fromkeys(range(workers), time.monotonic())
        self._heard: set[int] = set()
        self._lost: set[int] = set()
        self._gone: set[int] = set()  # said BYE: stopped on purpose
        self._all_gone = threading.Event()
        self._stop = threading.Event()
        self._first = threading.Event()
        self._thread = DaemonThread(self._main, "dtorch-beats")

    def wait_first_beats(self, timeout_s: float, check: Callable[[], None] | None = None) -> None:
        """Every worker beat once; RendezvousError naming the silent ones otherwise.
        ``check`` is called every 0.2 s meanwhile (it may raise: a worker lost already)."""
        deadline = time.monotonic() + timeout_s
        while not self._first.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
            if check is not None:
                check()
            if time.monotonic() >= deadline:
                silent = sorted(set(self._last) - self._heard)
                raise RendezvousError(f"workers {silent} sent no heartbeat within {timeout_s:g} s")

    def _main(self) -> None:
        next_beat = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            try:
                if now >= next_beat:
                    self._out.send(BEAT)
                    next_beat = now + BEAT_SECONDS
                envelope = self._in.poll(min(0.2, max(0.0, next_beat - now)))
            except DTorchError as error:  # a malformed message must not end the watch
                if self._stop.is_set():  # the sockets closed under us: we are stopping
                    return
                _LOG.warning("heartbeats: %s (ignored)", error)
                time.sleep(0.01)  # a socket failing on every call must not spin
                envelope = None
            if envelope is not None and envelope.sender in self._last:
                if self._replaced(envelope.sender, envelope.parts):
                    continue
                self._heard_from(envelope.sender)
                if envelope.kind == BYE:
                    self._said_bye(envelope.sender)
            self._check(time.monotonic())

    def _replaced(self, worker: int, parts: tuple[memoryview, ...]) -> bool:
        """Whether this beat of ``worker`` came from another pid than the registered one."""
        if self._pids is None or worker in self._lost or len(parts) != 1 or len(parts[0]) != 8:
            return False
        pid = unpack_u64(parts[0])
        if pid == self._pids[worker]:
            return False
        self._lost.add(worker)  # its registered process is gone: reported once, here
        if self._on_replaced is not None:
            self._on_replaced(worker, pid)
        self._tell_lost(worker)
        return True

    def _tell_lost(self, worker: int) -> None:
        """Tell every worker that ``worker`` is lost (from this thread: the socket's own)."""
        try:
            self._out.send(LOST, [pack_u64(worker)])
        except DTorchError as error:  # the survivors then wait for their own timeouts
            _LOG.warning("heartbeats: could not tell the workers of worker %d: %s", worker, error)

    def _said_bye(self, worker: int) -> None:
        self._gone.add(worker)
        if len(self._gone) == len(self._last):
            self._all_gone.set()

    def wait_gone(self, timeout_s: float) -> bool:
        """Whether every worker said BYE (it stopped) within ``timeout_s``."""
        return self._all_gone.wait(timeout_s)

    def _heard_from(self, worker: int) -> None:
        self._last[worker] = time.monotonic()
        self._heard.add(worker)
        if len(self._heard) == len(self._last):
            self._first.set()

    def _check(self, now: float) -> None:
        for worker, last in self._last.items():
            silent = now - last
            if silent > self._lost_after_s and worker not in self._lost | self._gone:
                self._lost.add(worker)
                self._on_lost(worker, silent)
                self._tell_lost(worker)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)


class Beacon:
    """A worker's side: beats to the controller, ``on_gone()`` once the controller has been
    silent for ``LOST_AFTER_SECONDS`` (or its sockets vanished), and ``on_peer_lost(rank)``
    when the controller says another worker is lost."""

    def __init__(
        self,
        beats_out: str,
        beats_in: str,
        rank: int,
        keys: CurveKeys,
        on_gone: Callable[[], None],
        on_peer_lost: Callable[[int], None] = lambda rank: None,
    ) -> None:
        self._subscriber = Subscriber(beats_out, keys=keys, join_late=True)
        self._pusher = Pusher(beats_in, rank, keys=keys, timeout_s=BEAT_SECONDS)
        self._on_gone = on_gone
        self._on_peer_lost = on_peer_lost
        self._pid = [pack_u64(os.getpid())]  # the controller checks it is the registered one
        self._stop = threading.Event()
        self._thread = DaemonThread(self._main, "dtorch-beacon")

    def _main(self) -> None:
        last = time.monotonic()
        next_beat = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            try:
                if now >= next_beat:
                    self._pusher.send(BEAT, self._pid)
                    next_beat = now + BEAT_SECONDS
                message = self._subscriber.poll(min(0.2, max(0.0, next_beat - now)))
                if message is not None:
                    last = time.monotonic()
                    self._heard(message.kind, message.parts)
            except DTorchError as error:  # a send that cannot queue: the controller is gone
                if self._stop.is_set():
                    return
                _LOG.debug("beacon: %s", error)
            if time.monotonic() - last > LOST_AFTER_SECONDS and not self._stop.is_set():
                self._on_gone()
                return

    def _heard(self, kind: bytes, parts: tuple[memoryview, ...]) -> None:
        """A beat, or the news that another worker is lost."""
        if kind == LOST and len(parts) == 1 and len(parts[0]) == 8:
            self._on_peer_lost(unpack_u64(parts[0]))

    def stop(self, *, bye: bool = False) -> None:
        """Stop beating; ``bye``: tell the controller this worker stopped on purpose."""
        self._stop.set()
        if not self._thread.is_current():
            self._thread.join(5.0)
        if bye:
            with contextlib.suppress(DTorchError):
                self._pusher.send(BYE, self._pid)
        self._subscriber.close()
        self._pusher.close()
