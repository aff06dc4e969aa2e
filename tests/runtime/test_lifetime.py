"""Who closes a Graph that is dropped, and where: the process that made it (a child made by
``os.fork`` inherits the graph's finalizer, and running it there stopped the parent's workers
and removed its socket directory, or hung the child for ever), and never one of the graph's
own threads (the last reference may go there, and a thread cannot join itself: the graph was
left open, its threads and workers running until exit)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from pathlib import Path

import pytest

import dtorch
from dtorch.runtime.daemon import DaemonThread
from dtorch.runtime.gc_policy import collected
from tests.runners import PoolKeeper

pytestmark = pytest.mark.timeout(120)
REPO = Path(__file__).resolve().parents[2]


def test_collected_closes_in_the_owner_only_and_never_on_a_thread_it_joins() -> None:
    ran: list[threading.Thread] = []
    done = threading.Event()

    def close() -> None:
        ran.append(threading.current_thread())
        done.set()

    collected(close, os.getpid() + 1)  # another process's: nothing
    assert not ran
    collected(close, os.getpid(), lambda: True)  # this thread would be joined: another one
    assert done.wait(10) and ran[0] is not threading.current_thread()
    collected(close, os.getpid(), lambda: False)  # anywhere else: here and now
    assert ran[-1] is threading.current_thread()
    done.clear()  # on any of dtorch's own threads (a stream of another graph): elsewhere
    on_stream = DaemonThread(lambda: collected(close, os.getpid(), lambda: False), "stream")
    assert on_stream.join(10) and done.wait(10)
    assert ran[-1].name == "dtorch-collected", ran[-1].name


@pytest.mark.parametrize("process", [False, True])
def test_the_exit_waits_for_a_close_begun_on_a_thread_of_its_own(process: bool) -> None:
    """A graph the collector finds on one of its own threads closes on a new thread, which
    nothing waited for: the interpreter tore down while its streams still ran kernels, and
    the process aborted (SIGABRT, 2 of 3 runs of a review's repro). The close is begun as
    the collector would (``collected`` with its finalizer detached), then the script ends."""
    script = textwrap.dedent(
        f"""
        import functools, os, dtorch
        from dtorch.runtime.gc_policy import collected
        g = dtorch.Graph(dtorch.GraphOption(per_device_per_process={process}))
        x = dtorch.randn(64, 64, graph=g)
        for _ in range(3000):
            x = (x @ x).tanh()
        g._finalizer.detach()  # the collector calls it once
        collected(functools.partial(g.executor.close, 30.0), os.getpid(), lambda: True)
        print("ended", flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0 and "ended" in done.stdout, done.stderr[-2000:]


def test_a_close_begun_on_a_dtorch_thread_drops_dispatched_work_at_exit() -> None:
    """The collector on a dtorch thread (a stand-in stream) finds a graph with a long queue
    of kernels already handed to its stream; the program ends. The close drops that work
    once the exit begins: it had run it all, past the exit's 30 s, and then aborted."""
    script = textwrap.dedent(
        """
        import gc, time, dtorch
        from dtorch.runtime.daemon import DaemonThread
        g = dtorch.Graph(dtorch.GraphOption(num_streams=1))
        with g.as_default():
            a = dtorch.randn(600, 600); a.to_torch()
            for _ in range(8000):  # about 40 s of kernels on this machine
                a = (a @ a) / 600.0
        time.sleep(0.5)  # the batches reach the stream
        g._cycle = g
        del g, a
        DaemonThread(gc.collect, "a-stream").join(10)
        print("ended", flush=True)
        """
    )
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, cwd=REPO, capture_output=True, text=True,
        timeout=100,
    )  # fmt: skip
    assert done.returncode == 0 and "ended" in done.stdout, done.stderr[-2000:]
    assert time.monotonic() - start < 25, "the exit waited for the queued kernels"


def test_a_thread_s_default_graph_leaves_no_ghost_thread_behind() -> None:
    """A thread's default graph is closed as the thread ends; asking ``current_thread()``
    there registered a ``Dummy-N`` thread that stayed in ``threading.enumerate()``."""
    before = {t.ident for t in threading.enumerate()}
    for _ in range(3):
        worker = threading.Thread(target=lambda: dtorch.ones(2).to_torch())
        worker.start()
        worker.join(60)
    gc.collect()
    ghosts = [t.name for t in threading.enumerate() if t.ident not in before]
    assert not [name for name in ghosts if name.startswith("Dummy")], ghosts


def test_a_thread_s_default_graph_leaves_no_state_behind() -> None:
    """The finalizer of a thread's default graph runs as the thread is torn down; reading a
    ``threading.local`` there (is this a dtorch thread?) left one weakref per thread for ever.
    Thread mode: each thread's own default graph is what is collected there."""

    def weakrefs() -> int:
        gc.collect()
        return sum(type(o) is weakref.ReferenceType for o in gc.get_objects())

    def run(threads: int) -> None:
        for _ in range(threads):
            worker = threading.Thread(target=lambda: dtorch.ones(2).to_torch())
            worker.start()
            worker.join(60)

    run(5)  # warm: caches of the first graphs
    before = weakrefs()
    run(60)
    assert weakrefs() - before < 10  # was one per thread


def _threads_of(graph_id: int) -> list[str]:
    prefix = f"dtorch-g{graph_id}-"
    return [t.name for t in threading.enumerate() if t.name.startswith(prefix)]


def test_a_graph_dropped_on_its_own_report_thread_is_closed(
    runner: str, worker_pools: PoolKeeper
) -> None:
    graph = worker_pools.graph(runner)
    graph_id = graph.id
    x = dtorch.ones(1024, 1024, graph=graph)
    for _ in range(6):  # a second or so of work: the fetch settles after the callback is set
        x = x @ x / 1024
    holder = [graph]
    dropped_on: list[threading.Thread] = []

    def drop(_: object) -> None:  # runs where the fetch settles: the graph's report thread
        dropped_on.append(threading.current_thread())
        holder.clear()  # the graph's last reference

    inner = x.to_torch_async()._future  # the user's future holds the tensor, and so the graph
    del graph, x
    inner.add_done_callback(drop)
    inner.wait(60)
    assert dropped_on and dropped_on[0].name == f"dtorch-g{graph_id}-reports"
    deadline = time.monotonic() + 30
    while _threads_of(graph_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _threads_of(graph_id)


def test_a_forked_child_leaves_the_parents_graphs_alone(tmp_path: Path) -> None:
    """A process-mode and a thread-mode graph, both alive when the program forks."""
    script = textwrap.dedent(
        """
        import os, sys, time, torch, dtorch
        g = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, num_workers=2))
        directory = g.runner.pool.state.directory.path
        threads = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False))
        mesh = dtorch.init_device_mesh("cpu", 2)
        x = dtorch.from_torch(torch.arange(4.0), device_mesh=mesh, graph=g)
        t = dtorch.from_torch(torch.arange(4.0), device_mesh=mesh, graph=threads)
        assert x.tolist() == t.tolist() == [0.0, 1.0, 2.0, 3.0]
        child = os.fork()
        if child == 0:
            sys.exit(0)  # a plain exit: atexit runs every finalizer the child inherited
        for _ in range(300):
            if os.waitpid(child, os.WNOHANG) != (0, 0):
                break
            time.sleep(0.05)
        else:
            os.kill(child, 9)
            sys.exit("the child hung at exit")
        assert os.path.isdir(directory), "the child removed the parent's socket directory"
        assert (x * 2).tolist() == (t * 2).tolist() == [0.0, 2.0, 4.0, 6.0]
        g.close()
        threads.close()
        print("ok")
        """
    )
    done = _python(script, timeout_s=100)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def _python(script: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``script`` run by a fresh interpreter on this checkout."""
    return subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.mark.timeout(150)
@pytest.mark.parametrize("per_process", [False, True], ids=["thread", "process"])
def test_exiting_with_queued_work_drops_it_and_exits_promptly(per_process: bool) -> None:
    """A script that ends (or is Ctrl-C'd) with a minute of kernels queued: nothing can read
    their results, so the graph's close at exit drops them. It waited 30 s per graph, and the
    kernels still running as the interpreter tore down aborted it (SIGABRT) in most runs. A
    thread still waiting on a future then learns that the graph was closed (it got "promise
    dropped before a value was set", from the future's finalizer, which ran first)."""
    script = textwrap.dedent(
        f"""
        import threading, time, dtorch
        g = dtorch.Graph(dtorch.GraphOption(per_device_per_process={per_process}))
        mesh = dtorch.init_device_mesh("cpu", 2)
        x = dtorch.randn(512, 512, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=g)
        assert x.sum().item() == x.sum().item()  # the devices run
        for _ in range(3000):
            x = (x @ x.redistribute(mesh, [dtorch.Replicate()])).tanh()
        future = x.to_torch_async()

        def wait():
            try:
                future.get(timeout_s=60)
            except Exception as error:  # one write: the exit may end the thread between two
                print(f"{{type(error).__name__}} {{error}}", flush=True)

        threading.Thread(target=wait, daemon=True).start()
        print(time.monotonic(), flush=True)
        """
    )
    done = _python(script, timeout_s=120)
    ended = time.monotonic()
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert ended - float(lines[0]) < 15.0  # 30 s and more before (thread mode)
    assert "Error" not in done.stderr, done.stderr[-2000:]
    for line in lines[1:]:  # the waiter may not get to print before the interpreter ends
        assert line.startswith("GraphError the graph was closed"), line


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_pool_serving_graph_after_graph_over_new_device_sets_keeps_its_descriptors(
    worker_pools: PoolKeeper,
) -> None:
    """Each collective group on shared memory holds descriptors in its workers; a pool's
    groups outlived every graph, so graphs over new device sets piled them up until the
    workers ran out (EMFILE at ~3,000 groups). A graph's close now closes them: the workers'
    descriptors are where they were after each graph, and a graph over the same devices
    opens its groups again and computes."""
    pool = worker_pools.pool()
    counts = []
    for round_ in range(6):
        graph = worker_pools.graph("process")
        for i in range(12):
            first = 2 * (12 * round_ + i)
            mesh = dtorch.DeviceMesh("cpu", [first, first + 1])
            x = dtorch.arange(4.0, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
            assert x.redistribute(placements=[dtorch.Replicate()]).tolist() == [0, 1, 2, 3]
        graph.close()
        counts.append([_descriptors(pid) for pid in pool.pids])
    assert counts[0] == counts[-1], counts  # each graph kept ~4 more per group: +48 a round
    graph = worker_pools.graph("process")
    try:
        mesh = dtorch.DeviceMesh("cpu", [0, 1])
        x = dtorch.arange(4.0, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
        assert x.redistribute(placements=[dtorch.Replicate()]).tolist() == [0, 1, 2, 3]
    finally:
        graph.close()
