"""Concurrency defects fixed after review: per-thread guards on a shared graph, one trace at a
time per graph, no promise left registered by an interrupted fetch or sync, no callback left
in a cell by a cancelled await, a forked child refused at once on its parent's graph, and a
close interrupted by Ctrl-C finished by the next close or the exit."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

import dtorch
from dtorch.comm.promise import create_promise
from dtorch.ir.opkind import PromiseKind
from dtorch.program.trace import Tracer

pytestmark = pytest.mark.timeout(60)

_ROOT = Path(__file__).resolve().parents[2]


def _in_thread(fn: Any) -> None:
    """Run ``fn`` on a thread of its own and re-raise what it raised."""
    errors: list[BaseException] = []

    def body() -> None:
        try:
            fn()
        except BaseException as error:  # handed to the test thread
            errors.append(error)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    if errors:
        raise errors[0]


# --- 1. dtype_guard / device_mesh_guard are per thread -------------------------------------
def test_guards_of_two_threads_interleave_without_leaking(graph: dtorch.Graph) -> None:
    mesh2 = dtorch.init_device_mesh("cpu", 2)
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def thread_a() -> None:
        with graph.dtype_guard(torch.float64), graph.device_mesh_guard(mesh2):
            a_in.set()
            assert b_in.wait(10)
            t = dtorch.ones(3, graph=graph)
            seen["a"] = (t.dtype, tuple(t.device_mesh.shape))
        a_out.set()

    def thread_b() -> None:
        assert a_in.wait(10)
        with graph.dtype_guard(torch.bfloat16):
            b_in.set()
            assert a_out.wait(10)  # A's guards ended inside B's
            t = dtorch.ones(3, graph=graph)
            seen["b"] = (t.dtype, tuple(t.device_mesh.shape))

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert seen == {"a": (torch.float64, (2,)), "b": (torch.bfloat16, (1,))}
    t = dtorch.ones(3, graph=graph)
    assert (t.dtype, tuple(t.device_mesh.shape)) == (torch.float32, (1,))
    assert graph.default_dtype == torch.float32


def test_guards_of_two_asyncio_tasks_interleave_without_leaking(graph: dtorch.Graph) -> None:
    """Guards are per task too: a guard held across an ``await`` neither shows in another
    task nor is dropped by another task's exit (they were per thread: task B, inside its
    bfloat16 guard, made float32 tensors once task A left its own)."""
    import asyncio

    mesh2 = dtorch.init_device_mesh("cpu", 2)
    seen: dict[str, Any] = {}

    async def task_a(a_in: asyncio.Event, b_in: asyncio.Event, a_out: asyncio.Event) -> None:
        with graph.dtype_guard(torch.float64), graph.device_mesh_guard(mesh2):
            a_in.set()
            await b_in.wait()
            t = dtorch.ones(3, graph=graph)
            seen["a"] = (t.dtype, tuple(t.device_mesh.shape))
        a_out.set()

    async def task_b(a_in: asyncio.Event, b_in: asyncio.Event, a_out: asyncio.Event) -> None:
        await a_in.wait()
        seen["b before"] = dtorch.ones(3, graph=graph).dtype  # A's guard is A's
        with graph.dtype_guard(torch.bfloat16):
            b_in.set()
            await a_out.wait()  # A's guards ended inside B's
            t = dtorch.ones(3, graph=graph)
            seen["b"] = (t.dtype, tuple(t.device_mesh.shape))

    async def main() -> None:
        events = (asyncio.Event(), asyncio.Event(), asyncio.Event())
        await asyncio.wait_for(asyncio.gather(task_a(*events), task_b(*events)), 30)

    asyncio.run(main())
    assert seen == {
        "a": (torch.float64, (2,)),
        "b before": torch.float32,
        "b": (torch.bfloat16, (1,)),
    }
    assert dtorch.ones(3, graph=graph).dtype == torch.float32


def test_default_dtype_set_outside_a_guard_is_graph_wide(graph: dtorch.Graph) -> None:
    graph.default_dtype = torch.float64
    _in_thread(lambda: _check_dtype(graph, torch.float64))
    with graph.dtype_guard(torch.float16):
        graph.default_dtype = torch.bfloat16  # inside a guard: that guard's dtype only
        assert dtorch.ones(1, graph=graph).dtype == torch.bfloat16
        _in_thread(lambda: _check_dtype(graph, torch.float64))
    assert graph.default_dtype == torch.float64
    graph.default_dtype = torch.float32


def _check_dtype(graph: dtorch.Graph, dtype: torch.dtype) -> None:
    assert graph.default_dtype == dtype
    assert dtorch.ones(1, graph=graph).dtype == dtype


# --- 2. one trace at a time per graph ------------------------------------------------------
def test_a_second_tracer_is_refused_when_both_were_made_first(graph: dtorch.Graph) -> None:
    x = dtorch.zeros(4, graph=graph)
    first, second = Tracer(graph, "first", [x]), Tracer(graph, "second", [x])
    with first, pytest.raises(dtorch.TraceError, match="traced already"):
        second.__enter__()
    program = dtorch.trace(lambda a: a + 1, x)  # the graph is healthy: traces again
    assert program(x).tolist() == [1.0] * 4


def test_two_threads_tracing_at_once(graph: dtorch.Graph) -> None:
    w = dtorch.ones(4, graph=graph)
    xs = [dtorch.zeros(4, graph=graph) for _ in range(8)]
    outcomes: list[str] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: the race shows within a few trials
    try:
        for _ in range(20):
            barrier = threading.Barrier(2)

            def trace(k: int, barrier: threading.Barrier = barrier) -> None:
                barrier.wait(10)
                try:
                    program = dtorch.trace(lambda *a: a[0] * (k + 2) + w, *xs)
                    outcomes.append(f"{len(program)} operators")
                except dtorch.TraceError as error:
                    outcomes.append("refused" if "traced already" in str(error) else str(error))

            threads = [threading.Thread(target=trace, args=(k,)) for k in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
    finally:
        sys.setswitchinterval(interval)
    assert set(outcomes) <= {"2 operators", "refused"}, outcomes
    assert len(outcomes) == 40
    assert graph.executor.broken is None
    assert (xs[0] + w).tolist() == [1.0] * 4


# --- 3. an interrupted fetch or sync leaves no promise registered --------------------------
def _interrupt(*args: Any) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    "call",
    [
        lambda x, g: x.to_torch_async(),
        lambda x, g: g.sync_future(),
        lambda x, g: g.get_memory_stats(),
    ],
    ids=["to_torch_async", "sync_future", "get_memory_stats"],
)
def test_an_interrupted_recording_drops_its_promise(
    graph: dtorch.Graph, monkeypatch: pytest.MonkeyPatch, call: Any
) -> None:
    x = dtorch.ones(8, graph=graph)
    graph.sync()
    with monkeypatch.context() as patch:
        patch.setattr(graph.executor, "submit", _interrupt)  # Ctrl-C as the operator is queued
        with pytest.raises(KeyboardInterrupt):
            call(x, graph)
    assert len(graph.executor.promises) == 0
    assert x.tolist() == [1.0] * 8


# --- 4. a cancelled or timed-out await leaves no callback in the cell ----------------------
def test_cancelled_awaits_leave_no_callbacks() -> None:
    promise = create_promise(PromiseKind.MEMORY, name="awaited")
    future = promise.get_future()

    async def awaiting() -> torch.Tensor:
        return await future

    async def main() -> torch.Tensor:
        for _ in range(50):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(awaiting(), 0.0001)
        task = asyncio.ensure_future(awaiting())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)  # the waiters' done callbacks run
        assert len(future._cell._callbacks) == 0  # type: ignore[attr-defined]
        task = asyncio.ensure_future(awaiting())
        await asyncio.sleep(0)
        promise.set_value(torch.ones(2))
        return await asyncio.wait_for(task, 10)

    assert asyncio.run(main()).tolist() == [1.0, 1.0]


def _run_script(script: str, argument: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a Python process of its own (at most 100 s), given ``argument``."""
    return subprocess.run(
        [sys.executable, "-c", script, argument],
        check=False,
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTHONPATH": str(_ROOT)},
        cwd=_ROOT,
    )


# --- 5. a forked child refuses its parent's graph at once ----------------------------------
_FORK_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    import dtorch
    from dtorch.api import graph as graph_module
    assert not graph_module._ForkHook.registered, "registered at import"
    process = sys.argv[1] == "process"
    option = dtorch.GraphOption(per_device_per_process=process, num_workers=1 if process else None)
    g = dtorch.Graph(option)
    x = dtorch.arange(4.0, graph=g)
    pending = (x * 3).to_torch_async()
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]
    pid = os.fork()
    if pid == 0:
        code = 0
        start = time.monotonic()
        for name, call in (("op", lambda: (x + 1).tolist()), ("fetch", x.tolist),
                           ("sync", g.sync), ("pending", lambda: pending.get(60))):
            try:
                call()
                if name != "pending":  # a value fetched before the fork may be there
                    print("child", name, "ran"); code = 1
            except dtorch.GraphError as error:
                if f"belongs to process {os.getppid()}" not in str(error):
                    print("child", name, error); code = 1
        if time.monotonic() - start > 5:
            print("child slow", time.monotonic() - start); code = 1
        if dtorch.arange(3.0).tolist() != [0.0, 1.0, 2.0]:  # its own default graph
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    assert (x * 2).tolist() == [0.0, 2.0, 4.0, 6.0]
    assert pending.get(10).tolist() == [0.0, 3.0, 6.0, 9.0]
    g.close()
    print("ok")
    """
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("runner", ["thread", "process"])
def test_a_forked_child_is_refused_its_parents_graph(runner: str) -> None:
    done = _run_script(_FORK_SCRIPT, runner)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr


# --- 6. a close interrupted by Ctrl-C is taken up again ----------------------------------
_INTERRUPTED_CLOSE = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import dtorch
    then, runner = sys.argv[1].split("-")
    process = runner == "process"
    g = dtorch.Graph(dtorch.GraphOption(per_device_per_process=process,
                                        num_workers=2 if process else None))
    mesh = dtorch.init_device_mesh("cpu", 4)
    x = dtorch.randn(512, 512, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=g)
    w = dtorch.randn(512, 512, device_mesh=mesh, graph=g)
    for i in range(300 if runner == "thread" else 1200):  # seconds of kernels to wait for
        x = (x @ w).tanh()
        if i % 3 == 0:
            x = x.redistribute(mesh, [dtorch.Replicate()]).redistribute(mesh, [dtorch.Shard(0)])
    x.to_torch_async()  # the workers have started and run the first kernels
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    try:
        g.close()
        print("not interrupted")
    except KeyboardInterrupt:  # at once, not once the devices finished their current work
        assert time.monotonic() - start < 3.0, time.monotonic() - start
    assert g.closed
    if then == "again":
        g.close()
        left = [t.name for t in threading.enumerate() if t.name.startswith("dtorch-g")]
        assert not left, left
    print("ok")
    """
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("then", ["again", "exit"])
@pytest.mark.parametrize("runner", ["thread", "process"])
def test_a_close_interrupted_by_ctrl_c_is_finished_later(runner: str, then: str) -> None:
    """Ctrl-C while ``Graph.close()`` waits for the devices: the next close, or the
    interpreter's exit, finishes it. In thread mode the streams ran on; a second close
    returned at once, and at exit a stream still running aborted the process (status 134:
    CPython 3.11's interrupted ``Thread.join`` also marks a running thread stopped, see
    runtime/daemon.py). In process mode the Ctrl-C came 5 s late, once the workers' grace
    to stop had passed: they are killed at once now."""
    done = _run_script(_INTERRUPTED_CLOSE, f"{then}-{runner}")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def test_an_operator_interrupted_while_it_waits_for_room_leaves_no_value(
    graph: dtorch.Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while recording waits for room in a full queue: the operator is queued already,
    so it runs; its output must still be freed (it had no handle, and stayed on the devices
    for the graph's life)."""
    mesh = dtorch.init_device_mesh("cpu", 1)
    x = dtorch.ones(64, 64, device_mesh=mesh, graph=graph)
    graph.sync()
    held = graph.get_memory_stats(mesh).stats[0].memory_allocated
    queue = graph.executor.submit

    def interrupted(item: Any) -> None:
        queue(item)  # queued, then the wait for room is interrupted
        raise KeyboardInterrupt

    monkeypatch.setattr(graph.executor, "submit", interrupted)
    with pytest.raises(KeyboardInterrupt):
        x + 1
    monkeypatch.undo()
    graph.sync()
    assert graph.get_memory_stats(mesh).stats[0].memory_allocated == held


def test_a_second_close_returns_once_the_first_has(graph: dtorch.Graph) -> None:
    """Two threads close one graph: the second returned at once while the first still ran
    the queued work (in process mode the shared pool was still lent to the graph, and a
    new graph on it was refused as another graph's)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.randn(512, 512, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
    w = dtorch.randn(512, 512, device_mesh=mesh, graph=graph)
    for _ in range(60):
        x = (x @ w) / 20
    threads = {t.name for t in threading.enumerate() if t.name.startswith(f"dtorch-g{graph.id}-")}
    assert threads
    first = threading.Thread(target=graph.close)
    first.start()
    try:
        graph.close()
        left = {t.name for t in threading.enumerate() if t.is_alive()} & threads
        assert not left, left  # the graph's own threads are gone once close() returns
    finally:
        first.join(60)


def test_a_close_reentered_on_its_own_thread_returns_at_once(
    graph: dtorch.Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A close() called on the thread already closing (a signal handler's cleanup, a
    callback) returns at once: with the second-close lock it waited 45 s for itself."""
    inner: list[float] = []
    close = graph.executor.close

    def reentering(timeout: float) -> None:
        started = time.monotonic()
        graph.close()
        inner.append(time.monotonic() - started)
        close(timeout)

    monkeypatch.setattr(graph.executor, "close", reentering)
    graph.close()
    assert inner and inner[0] < 1.0 and graph.closed
