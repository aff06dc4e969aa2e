"""WorkerPool: worker processes, started once, that serve one graph at a time.

Start-up (spec 004, section 9): the pool makes a private directory (mode 0700) for its IPC
sockets, binds its publisher (PUB) and its report puller (PULL), and starts every worker at
once (torch's import costs seconds per process: in parallel they cost it once). Workers are
fresh interpreters (``python -m dtorch.runtime.process.worker``), like multiprocessing's
``spawn`` method but without its pickled bootstrap and without re-importing the user's
``__main__`` module (a script that creates a process-mode graph at top level would otherwise
create one in every worker). Each worker connects its subscriber, waits for it to be
connected, and reports ``READY``; the pool waits for every worker's report and every
subscription before anything is published, so no first message is lost. The monitor (below)
watches the workers from the start: one that exits before it is ready ends the wait at once
with ``WorkerDiedError`` (its index, devices, pid and exit code or signal), and a start that
fails for any reason kills the workers it started at once (they hold nothing to finish) and
removes the directory, the sockets and the shared memory.

A graph leases the pool (``lease``: one graph at a time, each lease a new session that the
workers start clean) and gives it back when it closes; the process groups the workers built
for their collectives survive leases (creating one costs far more than a batch). A pool that
a graph does not share (no ``worker_pool`` in its option) is the graph's own and stops with it.

Liveness: a monitor thread waits on every worker's pidfd, from the start; when one exits, the
pool is broken: the lease (if any) is told at once (its graph's pending futures fail within
moments with ``WorkerDiedError`` naming the worker, its devices and its exit code or signal),
the other workers are stopped, the directory and the shared memory are removed at once (no
worker is left to remove them should the controller die too), and the pool refuses new
leases. Workers watch the controller the same way and exit when it is gone. A worker that is
alive but answers nothing (stopped with SIGSTOP, or hung) is not a death: a fetch that times
out names it instead (``waiting_on``: each worker's pid, devices and process state).

Signals: each worker runs in a session (and process group) of its own and ignores SIGINT, so
what the terminal or a job scheduler sends the program's process group (Ctrl-C, SIGHUP,
SIGTERM) reaches the controller alone: a program that catches KeyboardInterrupt goes on with
its workers, and a controller that dies of the signal leaves its workers to clean up, as any
death of the controller does.

Stopping (``close()``, garbage collection of the pool, interpreter exit) hands the cleanup over
without a gap: STOP; every worker closes what it has and marks itself stopped
(``protocol.stop_marker``), then waits; the controller, once every worker is stopped (or killed
after ``STOP_GRACE_SECONDS``), removes the shared memory and the directory, which tells the
workers to exit. A controller killed at any point of this leaves live workers that clean up.

Example:
    >>> pool = WorkerPool(workers=2)            # doctest: +SKIP
    >>> pool.workers, pool.broken               # doctest: +SKIP
    (2, None)
    >>> pool.close()                            # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable
from math import inf
from typing import Any, TypeVar

import torch

from dtorch.comm.group import BackendKind
from dtorch.comm.namespace import CommNamespace
from dtorch.comm.shm import Segment
from dtorch.errors import (
    GraphError,
    OptionError,
    TransportError,
    TransportTimeoutError,
    WorkerDiedError,
    raised_anew,
)
from dtorch.options import GlobalOption
from dtorch.runtime.daemon import DaemonThread
from dtorch.runtime.gc_policy import collected
from dtorch.runtime.host import PartyLayout
from dtorch.runtime.process.board import board_bytes
from dtorch.runtime.process.protocol import (
    END,
    HAND_OVER_POLL_SECONDS,
    READY,
    STOP,
    WorkerArgs,
    stop_marker,
)
from dtorch.transport import IpcDirectory, Publisher, Puller, Pusher

_LOG = logging.getLogger(__name__)

#: Seconds workers get to exit after STOP before they are killed.
STOP_GRACE_SECONDS = 5.0
#: How often the wait for the workers' subscriptions looks whether a worker exited meanwhile.
SUBSCRIPTION_SLICE_SECONDS = 0.1
#: The kernel's process states (``/proc/PID/stat``), in words.
_STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "in an uninterruptible wait",
    "T": "stopped (SIGSTOP or Ctrl-Z: it runs nothing until SIGCONT)",
    "t": "stopped by a debugger",
    "Z": "exited",
    "X": "exited",
    "I": "idle",
}
#: The states in which a process runs nothing, whatever it is sent, until someone resumes
#: it (SIGSTOP, Ctrl-Z, a debugger): a close kills such a worker at once, not after the grace.
_STOPPED = frozenset("Tt")

DeathCallback = Callable[[WorkerDiedError, int], None]


def default_workers(device_type: str) -> int:
    """One worker per GPU; on the CPU one per core (each hosts a fixed share of the devices)."""
    if device_type == "cuda":
        return max(1, torch.cuda.device_count())
    return max(1, os.cpu_count() or 1)


def default_device_type() -> str:
    """``cuda`` where CUDA is present (such workers also run CPU meshes), else ``cpu``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def exit_description(code: int) -> str:
    """``exit code 3`` or ``signal SIGKILL`` for a process's return code."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit code {code}"


def process_state(pid: int) -> str | None:
    """The kernel's one-letter state of process ``pid`` (``/proc/PID/stat``: ``R`` running,
    ``S`` sleeping, ``T`` stopped, ...), or None once it cannot be read (reaped, no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # the name in parentheses may hold spaces and parentheses: the state follows the last
            return stat.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return None


#: The most worker processes (or torch threads per worker) a pool starts: each is a process
#: (or a thread) of this machine; ``GraphOption`` keeps ``num_workers`` to the same bound.
MOST = 1024


def _check_count(name: str, value: object, given: object) -> None:
    """``value`` (from the argument ``given``) must be an int from 1 to ``MOST``: OptionError
    otherwise, before any process starts (a worker would only fail on it after its seconds of
    start-up; 2**70 workers would start processes until the machine could start none)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MOST:
        raise OptionError(f"{name} must be an int from 1 to {MOST}, got {given!r}")


def _condition(state: str | None) -> str:
    """A process state letter (``process_state``) in words; None: the process is gone."""
    return "gone" if state is None else _STATES.get(state, f"in state {state}")


class _Monitor:
    """Waits on the workers' pidfds; calls ``on_exit(index, returncode)`` for each exit.

    ``poll``, not ``select``: the controller is the user's process, whose descriptors may
    number past ``select``'s limit of 1024, and a monitor that stopped would leave a dead
    worker unnoticed."""

    def __init__(
        self, processes: list[subprocess.Popen[bytes]], on_exit: Callable[[int, int], None]
    ):
        self._processes = processes
        self._on_exit = on_exit
        self._fds = {os.pidfd_open(p.pid): i for i, p in enumerate(processes)}
        self._wake_read, self._wake_write = os.pipe()
        self._thread = DaemonThread(self._main, "dtorch-pool-monitor")

    def _main(self) -> None:
        poller = select.poll()
        for fd in (*self._fds, self._wake_read):
            poller.register(fd, select.POLLIN)
        try:
            while self._fds:
                ready = [fd for fd, _ in poller.poll()]
                if self._wake_read in ready:
                    return
                for fd in ready:
                    poller.unregister(fd)
                    self._exited(fd)
        finally:
            for fd in self._fds:
                os.close(fd)

    def _exited(self, fd: int) -> None:
        index = self._fds.pop(fd)
        os.close(fd)
        try:
            self._on_exit(index, self._processes[index].wait())
        except Exception:  # the monitor must outlive a failing handler: it watches the others
            _LOG.exception("handling the exit of worker %d failed", index)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"x")
        self._thread.join(5.0)
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)


_Made = TypeVar("_Made")


def _made(made: list[Any], item: _Made) -> _Made:
    """``item``, noted in ``made`` (the pieces a failed start closes)."""
    made.append(item)
    return item


class _PoolState:
    """Everything a pool owns; what its finalizer closes (it must not reference the pool)."""

    def __init__(
        self, workers: int, device_type: str, threads: int, cpu_backend: BackendKind
    ) -> None:
        self.workers = workers
        self.cpu_backend = cpu_backend
        self.device_type = device_type
        self.layout = PartyLayout(workers, 0, workers)
        self.lock = threading.Lock()
        self.failure: WorkerDiedError | None = None
        self.on_death: DeathCallback | None = None
        self.ready = False  # every worker reported READY and subscribed
        self.closing = False
        self.processes: list[subprocess.Popen[bytes]] = []
        self.monitor: _Monitor | None = None
        self.namespace = CommNamespace.create()
        self.directory = IpcDirectory()
        made: list[Any] = []  # what to close, should a later step fail (a failed fork, Ctrl-C)
        try:
            self.board = _made(made, Segment.create(board_bytes(workers)))
            self.publisher = _made(made, Publisher(self.directory.address("execute")))
            self.puller = _made(made, Puller(self.directory.address("reports")))
            self.own_pusher = _made(made, Pusher(self.puller.address, workers))  # our own sender
            for index in range(workers):
                self.processes.append(self._start(index, threads))
        except BaseException:
            self._kill_workers(self.processes)
            self._release(reversed(made))
            raise

    def _start(self, index: int, threads: int) -> subprocess.Popen[bytes]:
        board = self.board.locator()
        args = WorkerArgs(
            index,
            self.workers,
            self.device_type,
            self.publisher.address,
            self.puller.address,
            os.getpid(),
            self.directory.path,
            self.namespace.instance_id,
            threads,
            board.fd,
            board.inode,
            board.size,
            cpu_backend=self.cpu_backend.value,
        )
        environ = dict(os.environ)
        # the controller's options, read once: a variable changed since is not the worker's
        environ.update(GlobalOption.current().environ())
        # the interpreter's own search path, so the worker imports this very dtorch
        environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if os.path.isabs(p))
        command = [sys.executable, "-m", "dtorch.runtime.process.worker", args.to_json()]
        # A session of its own: a signal to the program's process group (Ctrl-C, a hang-up,
        # ``kill -- -PGID``) reaches the controller only, which may survive it; the workers
        # follow the controller, not the terminal (they exit and clean up when it is gone).
        return subprocess.Popen(
            command, env=environ, stdin=subprocess.DEVNULL, start_new_session=True
        )

    def wait_ready(self, timeout: float) -> None:
        """Every worker reported READY and subscribed, or WorkerDiedError / GraphError.

        The monitor must be watching: a worker that exits meanwhile ends the wait at once
        (``exited`` wakes the puller), not after the timeout."""
        deadline = time.monotonic() + timeout
        ready: set[int] = set()
        while len(ready) < self.workers:
            self._raise_failure()
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(self.workers)) - ready)
                raise GraphError(
                    f"workers {missing} did not start within {timeout} s; "
                    f"{self.waiting_on(missing)}"
                )
            envelope = self.puller.poll(left)
            if envelope is not None and envelope.kind == READY:
                ready.add(envelope.sender)
        self._wait_subscribers(deadline, timeout)
        with self.lock:
            self.ready = True
        self._raise_failure()  # one that exited just before: its pool serves nothing

    def _wait_subscribers(self, deadline: float, timeout: float) -> None:
        """Every worker's subscription reached the publisher (in slices: a worker that exits
        after READY sends no subscription, and only ``failure`` says so)."""
        while True:
            self._raise_failure()
            try:
                self.publisher.wait_subscribers(self.workers, SUBSCRIPTION_SLICE_SECONDS)
                return
            except TransportTimeoutError as error:
                if time.monotonic() >= deadline:
                    raise GraphError(
                        f"the workers did not all subscribe within {timeout} s ({error})"
                    ) from error

    def _raise_failure(self) -> None:
        if self.failure is not None:
            raise raised_anew(self.failure)

    def describe(self, index: int) -> str:
        """Worker ``index`` in words: ``worker 1 (pid 4242, devices 1, 3, 5, ...)``."""
        pid = self.processes[index].pid
        return f"worker {index} (pid {pid}, {self.layout.describe(index)})"

    def waiting_on(self, parties: Collection[int]) -> str:
        """For the message of a wait that timed out: the workers of ``parties`` (those that owe
        the answer) with the state of their process, and every other worker that is stopped
        (whoever waits for it waits for ever); '' when there is nothing to say."""
        states = {i: process_state(p.pid) for i, p in enumerate(self.processes)}
        owing = sorted(set(parties) & states.keys())
        named = [f"{self.describe(i)}, whose process is {_condition(states[i])}" for i in owing]
        said = [f"waiting for {'; '.join(named)}"] if named else []
        stopped = [i for i, state in states.items() if state in _STOPPED and i not in owing]
        said += [f"{self.describe(i)} is {_condition(states[i])}" for i in stopped]
        return "; ".join(said)

    def reap(self) -> None:
        """Look at the workers now: one that exited is handled as the monitor would (which
        may not have woken yet)."""
        for index, process in enumerate(self.processes):
            code = process.poll()
            if code is not None:
                self.exited(index, code)

    def exited(self, index: int, code: int) -> None:
        """The monitor saw worker ``index`` exit with ``code``."""
        with self.lock:
            if self.closing or self.failure is not None:
                return
            starting = not self.ready
            when = " while starting (any error output of it is above)" if starting else ""
            self.failure = WorkerDiedError(
                f"{self.describe(index)} exited with {exit_description(code)}{when}"
            )
            callback = self.on_death
        if callback is not None:
            callback(self.failure, index)
        self._kill_workers(self.processes)
        self.remove_files()
        if starting:  # wake wait_ready, which waits on the puller, to raise the failure now
            with contextlib.suppress(TransportError):
                self.own_pusher.send(END)

    def _stopped(self, index: int) -> bool:
        """Worker ``index`` exited, or stopped and touches nothing any more."""
        marker = stop_marker(self.directory.path, index)
        return self.processes[index].poll() is not None or os.path.exists(marker)

    def stop_workers(self, grace: float) -> None:
        """STOP every worker and kill those not stopped within ``grace`` seconds; then remove
        the files (the stopped workers' signal to exit) and wait for them to exit."""
        with contextlib.suppress(Exception):
            self.publisher.send(STOP)
        deadline = time.monotonic() + grace
        waiting = set(range(self.workers))
        while waiting and time.monotonic() < deadline:
            frozen = [i for i in waiting if process_state(self.processes[i].pid) in _STOPPED]
            self._kill_workers([self.processes[i] for i in frozen])  # it cannot act on STOP
            waiting = {i for i in waiting if not self._stopped(i)}
            time.sleep(HAND_OVER_POLL_SECONDS if waiting else 0.0)
        self._kill_workers([self.processes[i] for i in waiting])
        self.remove_files()
        deadline = time.monotonic() + grace
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.0, deadline - time.monotonic()))
        self._kill_workers(self.processes)

    @staticmethod
    def _kill_workers(processes: list[subprocess.Popen[bytes]]) -> None:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()

    def remove_files(self) -> None:
        """Remove the shared memory, then the directory (idempotent): once no worker runs or
        every one has stopped, as nothing may make new files afterwards."""
        self.namespace.reclaim()
        self.directory.close()

    def close(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """Stop the workers (STOP, killed after ``grace`` seconds), close the sockets and the
        board, remove the files; idempotent."""
        with self.lock:
            if self.closing:
                return
            self.closing = True
        try:
            self.stop_workers(grace)
        finally:
            if self.monitor is not None:
                self.monitor.stop()
            self._release((self.own_pusher, self.publisher, self.puller, self.board))

    def _release(self, closables: Iterable[Any]) -> None:
        """Close the sockets and the board whatever fails, then remove the files."""
        for closable in closables:
            with contextlib.suppress(Exception):
                closable.close()
        self.remove_files()


class WorkerPool:
    """``workers`` worker processes for ``device_type`` devices (see the module docstring).

    ``threads``: torch's intra-op threads in each worker (default: the cores divided among
    the workers, at least one: oversubscribed threads make small kernels far slower).
    ``cpu_backend``: how workers exchange CPU tensors - ``BackendKind.STORE_FILE`` (the
    default: the file store's shared memory, since a pool's workers share one machine; it
    measured 1.5-2.5x faster than Gloo over loopback in benchmarks/redistribute.py) or
    ``BackendKind.TORCH_DISTRIBUTED`` (Gloo, one process group per group of workers).
    """

    _sessions = itertools.count(1)

    def __init__(
        self,
        workers: int | None = None,
        device_type: str | None = None,
        *,
        threads: int | None = None,
        cpu_backend: BackendKind = BackendKind.STORE_FILE,
        start_timeout: float | None = None,
    ) -> None:
        kind = device_type or default_device_type()
        if kind not in ("cpu", "cuda"):
            raise OptionError(f"a worker pool runs 'cpu' or 'cuda' devices, got {kind!r}")
        count = default_workers(kind) if workers is None else workers
        _check_count("workers", count, workers)
        if kind == "cuda" and count > torch.cuda.device_count():  # a worker per GPU
            raise OptionError(
                f"a 'cuda' worker pool of {count} workers needs {count} GPUs; this machine "
                f"has {torch.cuda.device_count()} (a 'cpu' pool runs CPU meshes)"
            )
        per_worker = max(1, (os.cpu_count() or 1) // count) if threads is None else threads
        _check_count("threads", per_worker, threads)
        if cpu_backend not in (BackendKind.STORE_FILE, BackendKind.TORCH_DISTRIBUTED):
            raise OptionError(
                "cpu_backend must be BackendKind.STORE_FILE or BackendKind.TORCH_DISTRIBUTED, "
                f"got {cpu_backend!r}"
            )
        wait_s = GlobalOption.get_zmq_timeout_second() if start_timeout is None else start_timeout
        if isinstance(wait_s, bool) or not isinstance(wait_s, (int, float)) or not 0 < wait_s < inf:
            raise OptionError(f"start_timeout must be a positive number of seconds, got {wait_s!r}")
        state = self._state = _PoolState(count, kind, per_worker, cpu_backend)
        self._finalizer = weakref.finalize(self, collected, state.close, os.getpid())
        try:
            state.monitor = _Monitor(state.processes, state.exited)  # a death ends the wait
            state.wait_ready(wait_s)
        except BaseException:
            if self._finalizer.detach() is not None:
                state.close(grace=0.0)  # workers that never served hold nothing to finish
            raise
        self._leased = False
        self._why = ""  # why the pool was closed, where not by its owner (see close)

    @property
    def workers(self) -> int:
        return self._state.workers

    @property
    def device_type(self) -> str:
        return self._state.device_type

    @property
    def shares_memory(self) -> bool:
        """True: the workers run on this machine and map the controller's segments."""
        return True

    @property
    def death_verdict_s(self) -> float:
        """0: ``reap`` sees a dead worker at once (its process is this machine's)."""
        return 0.0

    @property
    def layout(self) -> PartyLayout:
        """Which worker hosts which devices."""
        return self._state.layout

    @property
    def broken(self) -> WorkerDiedError | None:
        """Why the pool cannot serve a graph any more (a worker died), or None."""
        return self._state.failure

    def reap(self) -> WorkerDiedError | None:
        """``broken``, once the workers were looked at now (not only when the monitor wakes):
        a report of a peer's failure may arrive before the monitor saw the peer die."""
        if self._state.failure is None and not self.closed:
            self._state.reap()
        return self._state.failure

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._state.processes]

    def waiting_on(self, parties: Collection[int]) -> str:
        """Who a wait that timed out waits for, in words (see ``_PoolState.waiting_on``)."""
        return self._state.waiting_on(parties)

    @property
    def state(self) -> _PoolState:
        """The sockets and processes (for the process runner)."""
        return self._state

    def lease(self, on_death: DeathCallback) -> int:
        """Take the pool for one graph; returns the session id. ``on_death`` is called (from
        the monitor thread) if a worker dies during the lease."""
        state = self._state
        with state.lock:
            if state.failure is not None:  # first: the graph that saw it die closed the pool
                raise GraphError(f"this worker pool is broken ({state.failure}); make a new one")
            if self.closed:
                raise GraphError(f"this worker pool is closed{self._why}; make a new one")
            if self._leased:
                raise GraphError("this worker pool serves another graph; close that graph first")
            self._leased = True
            state.on_death = on_death
        return next(WorkerPool._sessions)

    def give_back(self) -> None:
        """End the lease (the runner has reset the workers)."""
        with self._state.lock:
            self._leased = False
            self._state.on_death = None

    @property
    def leased(self) -> bool:
        return self._leased

    def close(self, grace: float = STOP_GRACE_SECONDS, why: str = "") -> None:
        """Stop every worker (STOP, then kill after ``grace`` seconds), remove the sockets,
        the directory and the shared memory; idempotent. ``why``: the reason a later lease
        is told, where the pool was closed for one (not by its owner)."""
        if self._finalizer.detach() is not None:  # here and now, whatever thread this is
            self._why = f" ({why})" if why else ""
            self._state.close(grace)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "broken" if self.broken else "ready"
        return f"WorkerPool(workers={self.workers}, device_type={self.device_type!r}, {state})"
