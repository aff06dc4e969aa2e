"""Process mode when a worker stops answering or dies before it is ready: a fetch or a sync
that times out names the worker it waits for (index, pid, devices, process state), a worker
killed while its pool starts is reported at once, and nothing is left in ``/dev/shm`` or the
temp dir. These tests start pools of their own (they stop or kill workers on purpose)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import dtorch
from dtorch import Shard
from dtorch.errors import FutureTimeoutError, GraphError, WorkerDiedError
from dtorch.ir.mesh import DeviceMesh
from dtorch.options import GlobalOption
from dtorch.runtime.process import WorkerPool
from dtorch.runtime.process.pool import _PoolState, process_state
from tests.runners import pause_devices

pytestmark = pytest.mark.timeout(60)

#: The wait the stalled fetches get: short, yet far above a healthy fetch's milliseconds.
SHORT_S = 0.5


@dataclass(frozen=True)
class Traces:
    """Where a test's processes could leave files: a temp dir of its own (``TMPDIR`` of the
    controller and its workers), and what ``/dev/shm`` held before."""

    tmp: Path
    shm_before: frozenset[str]

    def left(self) -> list[str]:
        """What the test's pools left: anything in its temp dir, and new ``/dev/shm`` files
        of this process's namespaces (``dtorch-<pid in hex>_...``)."""
        ours = f"dtorch-{os.getpid():x}_"
        shm = {n for n in os.listdir("/dev/shm") if n.startswith(ours)} - self.shm_before
        return sorted([*os.listdir(self.tmp), *shm])


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> Iterator[Traces]:
    # not tmp_path: an ipc socket's path must fit in 107 bytes
    tmp = Path(tempfile.mkdtemp(prefix="dtorch-stalls-"))
    monkeypatch.setenv("TMPDIR", str(tmp))  # the workers' temp dir
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # this process's (cached) one
    try:
        yield Traces(tmp, frozenset(os.listdir("/dev/shm")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _continue(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # killed meanwhile: nothing to continue
            os.kill(pid, signal.SIGCONT)


def test_a_fetch_or_sync_waiting_for_a_stopped_worker_names_it(traces: Traces) -> None:
    """A stopped worker is alive, so no death is reported: the timeout itself says whom it
    waited for. Once continued, the late values arrive and the graph goes on."""
    pool = WorkerPool(2, "cpu")
    try:
        _stall_and_continue(pool)
    finally:
        pool.close()
    assert all(_gone(pid) for pid in pool.pids)
    assert traces.left() == []


def test_closing_a_pool_with_a_stopped_worker_kills_it_at_once(traces: Traces) -> None:
    """A stopped worker cannot act on STOP: the close kills it without waiting the grace."""
    pool = WorkerPool(2, "cpu")
    try:
        graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
        assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]
        graph.close()
        os.kill(pool.pids[1], signal.SIGSTOP)
    finally:
        started = time.monotonic()
        pool.close()
        took = time.monotonic() - started
    assert took < 2.0  # the 5 s STOP grace and more before
    assert all(_gone(pid) for pid in pool.pids)
    assert traces.left() == []


def test_closing_a_graph_with_a_stopped_worker_names_it_at_once(traces: Traces) -> None:
    """A graph's close waits for every worker to finish its work: not for a stopped one, which
    finishes nothing until resumed (it waited the whole 30 s close timeout, then blamed "the
    workers"). The pool, which cannot serve another graph, is closed."""
    from dtorch.errors import WorkerError

    pool = WorkerPool(2, "cpu")
    try:
        graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
        assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]
        os.kill(pool.pids[0], signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(WorkerError, match=r"cannot finish .*worker 0 .* is stopped \(SIGSTOP"):
            graph.close()
        assert time.monotonic() - started < 5.0
        assert pool.closed
    finally:
        pool.close()
    assert all(_gone(pid) for pid in pool.pids)
    assert traces.left() == []


def _stall_and_continue(pool: WorkerPool) -> None:
    """Stop worker 1, see four waits time out naming it, continue it, see the late values."""
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
    try:
        assert dtorch.ones(2, graph=graph).to_torch_async().get(timeout_s=30).tolist() == [1, 1]
        stopped = pool.pids[1]
        os.kill(stopped, signal.SIGSTOP)
        try:
            alone = dtorch.arange(3.0, device_mesh=DeviceMesh("cpu", [1]), graph=graph)
            with GlobalOption.override(comm_timeout_second=SHORT_S):  # to_torch()'s wait
                with pytest.raises(FutureTimeoutError) as owed:
                    alone.to_torch()
                with pytest.raises(FutureTimeoutError) as synced:
                    graph.sync()
                with pytest.raises(FutureTimeoutError) as counted:
                    graph.get_memory_stats()
            mesh = dtorch.init_device_mesh("cpu", 2)
            sharded = dtorch.arange(4.0, device_mesh=mesh, placements=[Shard(0)], graph=graph)
            future = sharded.to_torch_async()  # gathered on device 0: worker 0 waits for 1
            with pytest.raises(FutureTimeoutError) as gathered:
                future.get(timeout_s=SHORT_S)
        finally:
            _continue(pool.pids)
        worker_1 = f"worker 1 (pid {stopped}, devices 1, 3, 5, ..."
        stop = "is stopped (SIGSTOP or Ctrl-Z: it runs nothing until SIGCONT)"
        assert f"waiting for {worker_1}" in str(owed.value)
        assert "whose process is stopped (SIGSTOP" in str(owed.value)
        assert worker_1 in str(synced.value) and "stopped (SIGSTOP" in str(synced.value)
        assert worker_1 in str(counted.value) and "stopped (SIGSTOP" in str(counted.value)
        message = str(gathered.value)
        assert f"waiting for worker 0 (pid {pool.pids[0]}, devices 0, 2, 4, ..." in message
        assert f"{worker_1} (the ids that are 1 modulo 2)) {stop}" in message
        assert future.get(timeout_s=30).tolist() == [0.0, 1.0, 2.0, 3.0]  # late, not lost
        assert alone.to_torch_async().get(timeout_s=30).tolist() == [0.0, 1.0, 2.0]
        graph.sync_future().get(timeout_s=30)
    finally:
        graph.close()


def test_a_fetch_behind_a_blocked_stream_names_the_stream() -> None:
    """Thread mode: the same message names the kernel stream the value waits for."""
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False, num_streams=2))
    try:
        with pause_devices(graph):  # a kernel that blocks stream 0 (device 0's)
            future = dtorch.ones(2, graph=graph).to_torch_async()
            with pytest.raises(FutureTimeoutError, match=r"waiting for kernel stream 0 \("):
                future.get(timeout_s=SHORT_S)
        assert future.get(timeout_s=30).tolist() == [1.0, 1.0]
    finally:
        graph.close()


@dataclass
class _Starts:
    """The pools this test starts and their workers, as ``_PoolState._start`` makes them.
    Worker ``stop`` is stopped (SIGSTOP) as soon as it exists, so it never gets ready; with
    ``kill_after``, it is killed (SIGKILL) that many seconds later, at ``killed``."""

    stop: int
    kill_after: float | None = None
    states: list[_PoolState] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    killed: list[float] = field(default_factory=list)
    timers: list[threading.Timer] = field(default_factory=list)

    def started(self, process: subprocess.Popen[bytes], index: int) -> None:
        if index != self.stop:
            return
        os.kill(process.pid, signal.SIGSTOP)
        if self.kill_after is not None:
            self.timers.append(threading.Timer(self.kill_after, self._kill, (process,)))
            self.timers[-1].start()

    def _kill(self, process: subprocess.Popen[bytes]) -> None:
        process.kill()
        self.killed.append(time.monotonic())


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Starts]:
    seen = _Starts(stop=1)
    real = _PoolState._start

    def start(state: _PoolState, index: int, threads: int) -> subprocess.Popen[bytes]:
        process = real(state, index, threads)
        seen.started(process, index)
        if not seen.states or seen.states[-1] is not state:
            seen.states.append(state)
        seen.processes.append(process)
        return process

    monkeypatch.setattr(_PoolState, "_start", start)
    try:
        yield seen
    finally:
        for timer in seen.timers:
            timer.cancel()
        for process in seen.processes:  # whatever the test did: nothing stays
            process.kill()  # a stopped process dies of SIGKILL too
            process.wait(10)


def test_a_worker_killed_while_the_pool_starts_is_reported_at_once(
    starts: _Starts, traces: Traces
) -> None:
    """Worker 1 dies before it is ready while worker 0 still starts: the pool raises at once
    (not after the 5 s STOP grace that worker 0, not yet subscribed, could never answer),
    naming the worker and its signal, and kills worker 0 and removes every file first."""
    starts.kill_after = 0.3  # while the pool waits for READY (worker 0 imports torch)
    started = time.monotonic()
    with pytest.raises(WorkerDiedError) as info:
        WorkerPool(2, "cpu", start_timeout=20.0)
    raised = time.monotonic()
    assert starts.killed, f"the pool ended after {raised - started:.1f} s, before the kill"
    assert raised - starts.killed[0] < 2.0  # 5 s and more before
    pid = starts.processes[1].pid
    message = str(info.value)
    assert f"worker 1 (pid {pid}, devices 1, 3, 5, ..." in message
    assert "exited with signal SIGKILL while starting" in message
    _assert_cleaned_up(starts, traces)


def test_a_pool_whose_worker_never_gets_ready_names_it_and_stops_at_once(
    starts: _Starts, traces: Traces
) -> None:
    """Worker 1 is stopped from the start: the start-up timeout names it and its state, and
    the failed start kills the workers at once instead of waiting for them to stop."""
    started = time.monotonic()
    with pytest.raises(GraphError, match=r"did not start within 1\.0 s") as info:
        WorkerPool(2, "cpu", start_timeout=1.0)
    assert time.monotonic() - started < 3.0  # 6 s and more before
    pid = starts.processes[1].pid
    message = str(info.value)
    assert f"worker 1 (pid {pid}, devices 1, 3, 5, ..." in message
    assert "is stopped (SIGSTOP or Ctrl-Z" in message
    _assert_cleaned_up(starts, traces)


def _assert_cleaned_up(starts: _Starts, traces: Traces) -> None:
    """Every worker was reaped, and the pool's directory and shared memory are gone."""
    assert [p.poll() is not None for p in starts.processes] == [True, True]
    (state,) = starts.states
    assert not Path(state.directory.path).exists()
    assert state.namespace.leftovers() == []
    assert traces.left() == []


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie nobody reaped counts as exited)."""
    return process_state(pid) in (None, "Z")
