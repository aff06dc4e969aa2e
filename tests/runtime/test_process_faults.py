"""Process mode under faults: a killed worker, a killed controller, a lost message, and every
way a graph ends (close, garbage collection, interpreter exit) - nothing hangs, nothing is
left behind. These tests start pools of their own (they break or stop them on purpose)."""

from __future__ import annotations

import gc
import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zmq

import dtorch
from dtorch import Shard
from dtorch.comm.namespace import CommNamespace
from dtorch.comm.shm import Segment
from dtorch.errors import GraphError, WorkerDiedError, WorkerError
from dtorch.ir.report import WorkerFailureReport
from dtorch.runtime.process import WorkerPool
from dtorch.runtime.process.board import board_bytes
from dtorch.runtime.process.pool import process_state
from dtorch.runtime.process.protocol import (
    END,
    OPEN,
    READY,
    REPORT,
    RESET_DONE,
    STOP,
    WorkerArgs,
    pack_u64,
    stop_marker,
)
from dtorch.runtime.process.worker import EXIT_FATAL, EXIT_OK, Worker
from dtorch.serialization import deserialize, serialize
from dtorch.transport import InProcPublisher, InProcPuller
from dtorch.transport.wire import CHUNKED, encode_sender
from tests.runners import PoolKeeper

pytestmark = pytest.mark.timeout(120)


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie nobody reaped counts as exited)."""
    return process_state(pid) in (None, "Z")


def _wait_for(condition: Callable[[], bool], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _wait_gone(pids: list[int], within_s: float) -> bool:
    return _wait_for(lambda: all(_gone(p) for p in pids), within_s)


def _heavy(graph: dtorch.Graph) -> dtorch.Tensor:
    """Work that keeps both workers of a 2-device mesh busy for seconds."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.randn(1024, 1024, device_mesh=mesh, placements=[Shard(0)], graph=graph)
    w = dtorch.randn(1024, 1024, device_mesh=mesh, graph=graph) * 0.01
    for _ in range(150):
        x = x @ w
    return x


def test_a_killed_worker_fails_everything_pending_within_seconds(
    worker_pools: PoolKeeper,
) -> None:
    pool = WorkerPool(2, "cpu")
    directory, namespace = Path(pool.state.directory.path), pool.state.namespace
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
    try:
        assert dtorch.ones(3, graph=graph).tolist() == [1.0] * 3
        future = _heavy(graph).to_torch_async()
        time.sleep(0.5)  # mid-batch: the workers are in their matmuls
        os.kill(pool.pids[1], signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(WorkerDiedError) as info:
            future.get(timeout_s=30)
        assert time.monotonic() - started < 5.0
        message = str(info.value)
        assert "worker 1" in message and "devices 1, 3, 5" in message
        assert "signal SIGKILL" in message
        with pytest.raises(WorkerDiedError, match="worker 1"):
            graph.sync()
        # the other worker is stopped and the files removed at once, not at the close: a
        # controller killed before it closes the graph leaves nothing either
        assert _wait_gone(pool.pids, within_s=5.0)
        assert _wait_for(lambda: not directory.exists(), within_s=5.0)
        assert namespace.leftovers() == []
        with pytest.raises(GraphError, match="worker 1") as refused:
            dtorch.ones(2, graph=graph)
        assert isinstance(refused.value.__cause__, WorkerDiedError)
    finally:
        graph.close()
    assert pool.broken is not None and pool.closed
    assert _wait_gone(pool.pids, within_s=5.0)
    assert not directory.exists() and namespace.leftovers() == []
    # the pool's next graph is refused naming the death (it said "closed" with no reason)
    again = dtorch.GraphOption(per_device_per_process=True, worker_pool=pool)
    with pytest.raises(GraphError, match=r"pool is broken \(worker 1 .*SIGKILL.*make a new one"):
        dtorch.Graph(again).sync()
    fresh = worker_pools.graph("process")  # a new graph works normally
    try:
        assert (dtorch.arange(4, graph=fresh) * 2).tolist() == [0, 2, 4, 6]
    finally:
        fresh.close()


def _depth(error: BaseException) -> int:
    count, frame = 0, error.__traceback__
    while frame is not None:
        count, frame = count + 1, frame.tb_next
    return count


def test_a_broken_graph_dropped_unclosed_is_collected() -> None:
    """The error of a broken graph is raised anew each time. It was one object, raised by
    every future and sync: its traceback grew by a frame at every raise, and held the first
    caller's frames - their tensors, and so the graph, which its live threads kept from
    the collector (two threads and ~26 descriptors per dropped graph)."""
    pool = WorkerPool(2, "cpu")
    before = set(threading.enumerate())

    def broken() -> weakref.ref[dtorch.Graph]:
        option = dtorch.GraphOption(per_device_per_process=True, worker_pool=pool)
        graph = dtorch.Graph(option)
        future = _heavy(graph).to_torch_async()
        time.sleep(0.3)
        os.kill(pool.pids[1], signal.SIGKILL)
        with pytest.raises(WorkerDiedError):
            future.get(timeout_s=30)
        depths = set()
        for _ in range(5):
            with pytest.raises(WorkerDiedError) as info:
                graph.sync()
            depths.add(_depth(info.value))
        assert len(depths) == 1, depths
        return weakref.ref(graph)

    try:
        dropped = broken()
        assert _wait_for(lambda: gc.collect() >= 0 and dropped() is None, within_s=10.0)
        assert _wait_for(lambda: set(threading.enumerate()) <= before, within_s=10.0)
    finally:
        pool.close()


def _intruded(
    frames: Callable[[dtorch.Graph, WorkerPool], list[list[bytes]]],
    check: Callable[[dtorch.Graph, WorkerPool], None],
) -> None:
    """A graph on a pool of its own gets ``frames`` on its report socket from a socket of no
    dtorch sender's; it still computes, then ``check`` looks at the graph and the pool."""
    pool = WorkerPool(2, "cpu")
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
    context = zmq.Context()
    try:
        a = dtorch.arange(8.0, graph=graph)
        assert a.sum().item() == 28.0
        intruder = context.socket(zmq.PUSH)
        intruder.connect(pool.state.puller.address)
        for message in frames(graph, pool):
            intruder.send_multipart(message)
        intruder.close(1000)
        time.sleep(0.3)
        assert (a * 2).sum().to_torch_async().get(timeout_s=10).item() == 56.0
        check(graph, pool)
    finally:
        graph.close()
        context.term()
        pool.close()


def test_a_forged_end_does_not_end_a_graph() -> None:
    """An END message with the sender index of the controller's own pusher and the graph's
    session number (both what the message says; sessions are counted 1, 2, 3...) stopped
    the graph's report thread: fetches timed out, and the close failed after 30 s and
    closed the shared pool. The graph's own END carries a random mark now."""

    def end(graph: dtorch.Graph, pool: WorkerPool) -> list[list[bytes]]:
        return [[encode_sender(pool.workers), END, pack_u64(graph.runner._session)]]

    def closes_at_once(graph: dtorch.Graph, pool: WorkerPool) -> None:
        started = time.monotonic()
        graph.close()
        assert time.monotonic() - started < 5.0 and not pool.closed

    _intruded(end, closes_at_once)


def test_repeated_reset_answers_count_once() -> None:
    """A close waits for every worker's RESET_DONE: answers were counted, so one worker's
    (or a stray peer's) repeated answer stood for the others, and a close could lend the
    pool on while a worker still ran the graph's batches. Each worker counts once now."""

    def twice(graph: dtorch.Graph, pool: WorkerPool) -> list[list[bytes]]:
        answer = [encode_sender(0), RESET_DONE, pack_u64(graph.runner._session)]
        return [answer] * pool.workers

    def not_reset(graph: dtorch.Graph, pool: WorkerPool) -> None:
        assert not graph.runner._reset_done.is_set()
        graph.close()
        assert not pool.closed and pool.broken is None

    _intruded(twice, not_reset)


def test_malformed_messages_on_the_report_socket_are_dropped() -> None:
    """Frames no sender of dtorch's writes (one frame, a short sender frame, pieces whose
    layout does not match) broke the graph ("the report channel of this graph failed");
    they are dropped now, and the graph and the pool go on."""
    chunked = (CHUNKED | 0).to_bytes(4, "little")
    malformed = [[b"x"], [b"abc", REPORT, b"x"], [chunked, REPORT, pack_u64(5), b"a"]]

    def goes_on(graph: dtorch.Graph, pool: WorkerPool) -> None:
        graph.sync()
        graph.close()
        assert not pool.closed and pool.broken is None

    _intruded(lambda graph, pool: malformed, goes_on)


def _open_past_select_limit() -> list[int]:
    """Enough descriptors held open that the next ones are numbered past 1024, ``select``'s
    limit (a user's program may hold that many: files, sockets, mappings)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2048:
        if hard != resource.RLIM_INFINITY and hard < 2048:
            pytest.skip(f"this machine allows {hard} open files; the case needs 2048")
        resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
    return [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]


def test_a_killed_worker_is_noticed_with_descriptors_past_the_select_limit() -> None:
    held = _open_past_select_limit()
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, num_workers=2))
    try:
        pool = graph.runner.pool
        assert dtorch.ones(3, graph=graph).tolist() == [1.0] * 3
        os.kill(pool.pids[1], signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(WorkerDiedError, match="worker 1"):
            graph.sync()
        assert time.monotonic() - started < 5.0
    finally:
        graph.close()
        for fd in held:
            os.close(fd)
    assert _wait_gone(pool.pids, within_s=5.0)


_CONTROLLER = textwrap.dedent(
    """
    import json, sys, time
    import dtorch
    from dtorch.runtime.process import WorkerPool
    from dtorch.runtime.process.protocol import STOP
    pool = WorkerPool(2, "cpu")
    option = dtorch.GraphOption(per_device_per_process=True, worker_pool=pool)
    graph = dtorch.Graph(option)
    assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.randn(1024, 1024, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
    w = dtorch.randn(1024, 1024, device_mesh=mesh, graph=graph) * 0.01
    for _ in range(300 if sys.argv[1] == "work" else 2):
        x = x @ w
    future = x.to_torch_async()  # work: the workers are busy for seconds
    if sys.argv[1] == "stop":  # as a close does, which the kill then interrupts
        pool.state.publisher.send(STOP)
    state = pool.state
    print(json.dumps({"pids": pool.pids, "dir": state.directory.path,
                      "namespace": state.namespace.instance_id}), flush=True)
    time.sleep(120)
    """
)


def _kill_controller(when: str) -> tuple[dict[str, Any], str]:
    """Start a controller, let it reach ``when`` (``work``: its workers are busy; ``stop``:
    it sent them STOP), SIGKILL it there; what it printed about its pool, and its stderr."""
    command = [sys.executable, "-c", _CONTROLLER, when]
    controller = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert controller.stdout is not None and controller.stderr is not None
        facts: dict[str, Any] = json.loads(controller.stdout.readline() or "{}")
        if when == "stop":
            _wait_stopped_and_waiting(facts)
        alive = controller.poll() is None
        controller.kill()
        controller.wait(10)
        errors = controller.stderr.read()
        assert alive, f"the controller ended before it was killed:\n{errors}"
        return facts, errors
    finally:
        controller.kill()
        controller.wait(10)


def _wait_stopped_and_waiting(facts: dict[str, Any]) -> None:
    """Every worker is done after STOP (its marker), yet waits for the controller's cleanup."""
    markers = [stop_marker(facts["dir"], i) for i in range(len(facts["pids"]))]

    def stopped_or_gone() -> bool:
        return all(map(os.path.exists, markers)) or any(map(_gone, facts["pids"]))

    assert _wait_for(stopped_or_gone, within_s=30.0)
    assert not any(map(_gone, facts["pids"])), "a stopped worker left before its pool's files"


@pytest.mark.parametrize("when", ["work", "stop"])
def test_workers_of_a_killed_controller_exit_and_clean_up(when: str) -> None:
    """Killed while its workers compute, or while it stops them (after STOP, before it
    removed the pool's files): the workers notice at once (a pidfd, not a poll), remove the
    directory and the shared memory, and only then exit - so both are gone with them."""
    facts, errors = _kill_controller(when)
    assert "Traceback" not in errors, errors
    assert _wait_gone(facts["pids"], within_s=5.0), "workers outlived their controller"
    assert not Path(facts["dir"]).exists()
    assert CommNamespace(facts["namespace"]).leftovers() == []


def test_a_lost_message_stops_the_worker_with_a_report(tmp_path: Path) -> None:
    """Through the transport twins: the worker runs in this process, its subscriber sees an
    id jump, reports why, and stops with the fatal status."""
    publisher, puller = InProcPublisher(), InProcPuller()
    segment = Segment.create(board_bytes(1))
    where = segment.locator()
    namespace = CommNamespace.create()
    args = WorkerArgs(
        0, 1, "cpu", "inproc:pub", "inproc:pull", os.getpid(), str(tmp_path),
        namespace.instance_id, 1, where.fd, where.inode, where.size,
    )  # fmt: skip
    worker = Worker.of_pool(args, publisher.subscribe(), puller.pusher(0))
    status: list[int] = []
    thread = threading.Thread(target=lambda: status.append(worker.run()), daemon=True)
    thread.start()
    try:
        assert puller.recv(10).kind == READY
        options = serialize({"comm_timeout_second": 5.0})
        publisher.send(OPEN, [pack_u64(1), options])
        publisher.skip_ids(1)
        publisher.send(STOP)
        envelope = puller.recv(10)
        thread.join(10)
    finally:
        segment.close()
    assert envelope.kind == REPORT
    report = deserialize(envelope.parts[0])
    assert isinstance(report, WorkerFailureReport) and report.worker == 0
    assert "MessageGapError" in report.reason and "worker 0" in report.reason
    assert status == [EXIT_FATAL] and namespace.leftovers() == []


def test_a_worker_on_twins_stops_cleanly_on_stop(tmp_path: Path) -> None:
    publisher, puller = InProcPublisher(), InProcPuller()
    segment = Segment.create(board_bytes(2))
    where = segment.locator()
    args = WorkerArgs(
        1, 2, "cpu", "inproc:pub", "inproc:pull", os.getpid(), str(tmp_path),
        CommNamespace.create().instance_id, 1, where.fd, where.inode, where.size,
    )  # fmt: skip
    worker = Worker.of_pool(args, publisher.subscribe(), puller.pusher(1))
    status: list[int] = []
    thread = threading.Thread(target=lambda: status.append(worker.run()), daemon=True)
    thread.start()
    try:
        ready = puller.recv(10)
        assert ready.kind == READY and ready.sender == 1
        publisher.send(STOP)
        thread.join(10)
    finally:
        segment.close()
    assert status == [EXIT_OK] and not thread.is_alive()


def test_closing_or_dropping_a_graph_stops_its_own_workers() -> None:
    option = dtorch.GraphOption(per_device_per_process=True, num_workers=2)
    closed = dtorch.Graph(option)
    dropped = dtorch.Graph(option)
    pools = [closed.runner.pool, dropped.runner.pool]
    pids = [pid for pool in pools for pid in pool.pids]
    dirs = [Path(pool.state.directory.path) for pool in pools]
    assert dtorch.ones(2, graph=closed).tolist() == dtorch.ones(2, graph=dropped).tolist()
    closed.close()
    del dropped, pools
    gc.collect()
    assert _wait_gone(pids, within_s=10.0)
    assert not any(d.exists() for d in dirs)


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_interpreter_exit_stops_the_workers(busy: bool) -> None:
    """Nothing left behind, and promptly: workers still running the batches they were sent
    (matmuls and redistributions the exit drops) are stopped at once, not after the 5 s grace
    of a close (the exit took 5.3 s)."""
    script = textwrap.dedent(
        """
        import json, sys
        import dtorch
        graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, num_workers=2))
        pool = graph.runner.pool
        mesh = dtorch.init_device_mesh("cpu", 2)
        x = dtorch.ones(1024, 1024, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
        w = dtorch.ones(1024, 1024, device_mesh=mesh, graph=graph)
        for _ in range(300 if sys.argv[1] == "busy" else 1):
            x = (x @ w).redistribute(mesh, [dtorch.Replicate()])
            x = x.redistribute(mesh, [dtorch.Shard(0)])
        future = x.to_torch_async()
        print(json.dumps({"pids": pool.pids, "dir": pool.state.directory.path}), flush=True)
        """
    )
    mode = "busy" if busy else "idle"
    with subprocess.Popen(
        [sys.executable, "-c", script, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    ) as child:  # fmt: skip
        try:
            assert child.stdout is not None and child.stderr is not None
            facts = json.loads(child.stdout.readline())
            ended = time.monotonic()  # the script's last line ran: the interpreter exits
            assert child.wait(timeout=60) == 0, child.stderr.read()
            took = time.monotonic() - ended
            stderr = child.stderr.read()
        finally:
            child.kill()
    assert "Traceback" not in stderr, stderr
    assert took < 4.0, f"the exit took {took:.1f} s"
    assert _wait_gone(facts["pids"], within_s=5.0)
    assert not Path(facts["dir"]).exists()


@pytest.mark.parametrize("hang", ["stopped", "busy"])
def test_closing_a_graph_whose_workers_hang_stops_them_within_bounds(hang: str) -> None:
    """Workers that do not finish cannot be reset for another graph: the close gives up, kills
    them, and says so; nothing is left behind. Stopped ones (SIGSTOP) are named at once; busy
    ones (minutes of queued matmuls) once the close's timeout ran out."""
    pool = WorkerPool(2, "cpu")
    directory = Path(pool.state.directory.path)
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
    assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]
    if hang == "stopped":
        for pid in pool.pids:
            os.kill(pid, signal.SIGSTOP)
        words = r"cannot finish this graph's work: worker 0 .* is stopped \(SIGSTOP"
    else:
        mesh = dtorch.init_device_mesh("cpu", 2)
        big = dtorch.ones(2048, 2048, device_mesh=mesh, graph=graph)  # 17 GFLOP a matmul
        for _ in range(20):
            big = big @ big
        words = r"did not finish this graph's work within 1\.0 s"
    started = time.monotonic()
    with pytest.raises(WorkerError, match=words):
        graph.executor.close(timeout=1.0)
    assert time.monotonic() - started < 15.0
    assert pool.closed and _wait_gone(pool.pids, within_s=5.0) and not directory.exists()
    graph.close()  # already closed: nothing more to do


_SIGNALLED = textwrap.dedent(
    """
    import json, os, signal, sys, time
    # as a program started from a terminal: a test run under nohup ignores SIGHUP, and that
    # disposition is inherited (the hang-up below then killed nothing)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    import dtorch
    from dtorch import Replicate, Shard
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, num_workers=2))
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.ones(4, device_mesh=mesh, placements=[Shard(0)], graph=graph)
    assert x.sum().item() == 4.0
    pool = graph.runner.pool
    facts = json.dumps({"pids": pool.pids, "dir": pool.state.directory.path,
                        "namespace": pool.state.namespace.instance_id})
    if sys.argv[1] == "busy":  # redistributions in flight through the file store
        print(facts, flush=True)
        y = dtorch.randn(512, 512, device_mesh=mesh, placements=[Shard(0)], graph=graph)
        while True:
            y = y.redistribute(mesh, [Replicate()]).redistribute(mesh, [Shard(1)])
            y = y.redistribute(mesh, [Shard(0)])
            y.sum().item()
    try:
        print(facts, flush=True)
        time.sleep(60)
    except KeyboardInterrupt:  # the program goes on after a Ctrl-C
        pass
    for pid in pool.pids:  # a SIGINT sent to a worker alone changes nothing either
        os.kill(pid, signal.SIGINT)
    time.sleep(0.5)
    print(json.dumps((x * 0 + 7).tolist()), flush=True)
    graph.close()
    """
)


_INTERRUPTED_ON_A_SHARED_POOL = textwrap.dedent(
    """
    import os, signal, threading, torch, dtorch
    from dtorch.runtime.process import WorkerPool
    pool = WorkerPool(2, "cpu")
    option = dtorch.GraphOption(per_device_per_process=True, worker_pool=pool)
    g = dtorch.Graph(option)
    mesh = dtorch.init_device_mesh("cpu", 2)
    a = dtorch.randn(1024, 1024, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=g)
    b = dtorch.randn(1024, 1024, device_mesh=mesh, graph=g)
    for _ in range(60):
        a = (a @ b) / 40
    big = [dtorch.from_torch(torch.full((512, 1024), float(i)), device_mesh=mesh,
                             placements=[dtorch.Shard(0)], graph=g) for i in range(4)]
    threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
        g.close()
        print("not interrupted")
    except KeyboardInterrupt:
        pass
    g.close()
    try:
        dtorch.Graph(option).sync()
        print("lent on")
    except dtorch.GraphError as error:
        print(error)
    pool.close()
    """
)


@pytest.mark.timeout(120)
def test_a_pool_whose_graph_close_was_interrupted_is_not_lent_on() -> None:
    """Ctrl-C while a graph on a shared pool closes: the workers may still run its queued
    batches, which read inputs the close releases. The pool was lent to the next graph all
    the same, whose own inputs then took the released descriptors' numbers: a worker
    found its input replaced, exited, and the next graph failed with WorkerDiedError.
    The pool is closed now, and says why."""
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_ON_A_SHARED_POOL],
        check=False,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stderr
    # (about a second of matmuls queued: the Ctrl-C 0.1 s into the close interrupts it)
    said = done.stdout.splitlines()
    assert "worker pool is closed (a close of the graph it served was interrupted" in said[-1]


def _signalled_controller(mode: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """A controller in a process group of its own (as a shell starts a program) with a pool
    of two workers; what it printed about its pool."""
    controller = subprocess.Popen(
        [sys.executable, "-c", _SIGNALLED, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert controller.stdout is not None
    line = controller.stdout.readline()
    if not line:
        controller.wait(10)
        raise AssertionError(f"the controller did not start:\n{controller.communicate()[1]}")
    return controller, json.loads(line)


def test_ctrl_c_reaches_the_controller_alone() -> None:
    """A terminal's Ctrl-C (SIGINT to the program's process group) that the program catches:
    its workers never see it (a session of their own; a worker ignores SIGINT anyway), so the
    graph goes on."""
    controller, facts = _signalled_controller("idle")
    try:
        time.sleep(0.5)
        os.killpg(controller.pid, signal.SIGINT)
        out, errors = controller.communicate(timeout=60)
    finally:
        controller.kill()
        controller.wait(10)
    assert controller.returncode == 0, errors
    assert json.loads(out.splitlines()[-1]) == [7.0] * 4
    assert "Traceback" not in errors and "KeyboardInterrupt" not in errors, errors
    assert _wait_gone(facts["pids"], within_s=5.0)
    assert not Path(facts["dir"]).exists()
    assert CommNamespace(facts["namespace"]).leftovers() == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_program_group_leaves_nothing_behind(sig: signal.Signals) -> None:
    """``kill -- -PGID``, a hang-up, a scheduler's stop: the signal kills the controller only;
    its workers see it gone, remove the pool's directory and shared memory, and exit."""
    controller, facts = _signalled_controller("busy")
    try:
        time.sleep(1.0)
        os.killpg(controller.pid, sig)
        controller.wait(30)
    finally:
        controller.kill()
        controller.wait(10)
    assert controller.returncode == -sig
    assert _wait_gone(facts["pids"], within_s=10.0), "workers outlived their controller"
    assert not Path(facts["dir"]).exists()
    assert CommNamespace(facts["namespace"]).leftovers() == []
