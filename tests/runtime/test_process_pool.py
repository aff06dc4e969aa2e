"""WorkerPool on its own: its options, its leases, and the Gloo backend beside the default
shared-memory one (the suites run on the default; this runs redistributions on Gloo)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard
from dtorch.comm.group import BackendKind
from dtorch.errors import GraphError, OptionError
from dtorch.runtime.process import WorkerPool
from tests.runners import PoolKeeper

pytestmark = pytest.mark.timeout(120)


def test_bad_pool_options_are_refused_before_anything_starts() -> None:
    for workers in (0, 1025, 2**70):
        with pytest.raises(OptionError, match="workers must be an int from 1 to 1024"):
            WorkerPool(workers, "cpu")
    with pytest.raises(OptionError, match="'cpu' or 'cuda'"):
        WorkerPool(2, "tpu")
    with pytest.raises(OptionError, match="cpu_backend"):
        WorkerPool(2, "cpu", cpu_backend=BackendKind.STORE_MEMORY)
    for threads in (0, -1, 2.5, "2", True, 2**70):
        with pytest.raises(OptionError, match="threads must be an int from 1 to 1024"):
            WorkerPool(2, "cpu", threads=threads)  # type: ignore[arg-type]
    for seconds in (0, -1.0, float("nan"), float("inf"), "5", True):
        with pytest.raises(OptionError, match="start_timeout must be a positive number"):
            WorkerPool(2, "cpu", start_timeout=seconds)  # type: ignore[arg-type]


def test_one_graph_at_a_time_then_the_next(worker_pools: PoolKeeper) -> None:
    pool = worker_pools.pool()
    option = dtorch.GraphOption(per_device_per_process=True, worker_pool=pool)
    first = dtorch.Graph(option)
    try:
        with pytest.raises(GraphError, match="serves another graph"):
            dtorch.Graph(option)
        mesh = dtorch.init_device_mesh("cpu", 3)
        kept = dtorch.arange(6.0, device_mesh=mesh, placements=[Shard(0)], graph=first)
        assert kept.tolist() == list(range(6))
    finally:
        first.close()
    second = dtorch.Graph(option)  # starts clean: same operand ids, nothing of the first left
    try:
        mesh = dtorch.init_device_mesh("cpu", 3)
        fresh = dtorch.ones(6, device_mesh=mesh, placements=[Shard(0)], graph=second)
        assert fresh.tolist() == [1.0] * 6
        stats = second.get_memory_stats(mesh)
        assert all(s.memory_allocated == 8 for s in stats), stats
    finally:
        second.close()
    assert not pool.leased and pool.broken is None


def test_a_pool_handed_on_while_its_last_graph_closes_serves_the_next(
    worker_pools: PoolKeeper,
) -> None:
    """The next graph leases the pool the moment the last one gives it back, while the last
    one's close still runs in another thread: the last one's report thread must have stopped
    reading the pool's report socket by then, or it takes the next graph's reports (a fetch
    that waited for ever, two closes that failed, in a few percent of hand-overs: a race, so
    this catches it in most runs, not all)."""
    import threading

    pool = worker_pools.pool()
    option = dtorch.GraphOption(per_device_per_process=True, worker_pool=pool)
    mesh = dtorch.init_device_mesh("cpu", 2)
    for round_ in range(40):
        last = dtorch.Graph(option)
        for _ in range(30):  # reports in flight while it closes
            dtorch.ones(16, device_mesh=mesh, graph=last).sum().to_torch_async()
        closing = threading.Thread(target=last.close)
        closing.start()
        nxt = None
        while nxt is None:
            with contextlib.suppress(GraphError):  # "serves another graph" until given back
                nxt = dtorch.Graph(option)
        try:
            t = dtorch.arange(8, device_mesh=mesh, placements=[Shard(0)], graph=nxt) * round_
            got = t.redistribute(mesh, [Replicate()]).to_torch_async().get(timeout_s=20)
            assert got.tolist() == [i * round_ for i in range(8)]
        finally:
            closing.join(30)
            nxt.close()
        assert not closing.is_alive()
    assert pool.broken is None


def test_an_end_not_sent_by_the_controller_is_dropped(worker_pools: PoolKeeper) -> None:
    """Only the controller's own END, with its graph's session, ends a report thread; one from
    any other sender (a worker, or anyone who can reach the socket) left every later future
    to wait out its timeout."""
    from dtorch.runtime.process.protocol import END
    from dtorch.transport.pushpull import Pusher

    pool = worker_pools.pool()
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
    try:
        forged = Pusher(pool.state.puller.address, sender=7)
        forged.send(END)
        forged.send(END, [(0).to_bytes(8, "little")])
        forged.close()
        mesh = dtorch.init_device_mesh("cpu", 2)
        got = dtorch.ones(4, device_mesh=mesh, placements=[Shard(0)], graph=graph)
        assert got.to_torch_async().get(timeout_s=20).tolist() == [1.0] * 4
    finally:
        graph.close()
    assert pool.broken is None


def test_redistributions_over_gloo_match_torch() -> None:
    with WorkerPool(3, "cpu", cpu_backend=BackendKind.TORCH_DISTRIBUTED) as pool:
        for pid in pool.pids:  # the workers were told (the option was once dropped)
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                assert b'"cpu_backend": "torch_distributed"' in cmdline.read()
        option = dtorch.GraphOption(per_device_per_process=True, worker_pool=pool)
        graph = dtorch.Graph(option)
        try:
            mesh = dtorch.init_device_mesh("cpu", (2, 3))
            full = torch.arange(7 * 5, dtype=torch.float32).reshape(7, 5)
            layouts = [[Shard(0), Shard(1)], [Replicate(), Shard(0)], [Partial(), Shard(1)]]
            for src in layouts:
                t = dtorch.from_torch(full, device_mesh=mesh, placements=src, graph=graph)
                for dst in layouts:
                    if dst[0] == Partial():
                        continue
                    moved = t.redistribute(mesh, dst)
                    assert torch.equal(moved.to_torch(), full), (src, dst)
            ints = dtorch.arange(
                10, device_mesh=mesh, placements=[Shard(0), Replicate()], graph=graph
            ).to(torch.int16)
            assert ints.tolist() == list(range(10))
        finally:
            graph.close()


def test_workers_run_with_the_controllers_options_not_the_environment_of_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The controller reads DTORCH_* once; a variable changed after that (here to values no
    one can parse) is not what the workers it starts run with: they failed to start."""
    from dtorch.options import GlobalOption

    GlobalOption.get_zmq_timeout_second()  # read by now, as any program has
    monkeypatch.setenv("DTORCH_VALIDATE_KERNEL_INPUT_OUTPUT", "bogus")
    monkeypatch.setenv("DTORCH_ZMQ_TIMEOUT_SECOND", "-1")
    with WorkerPool(1, "cpu") as pool:
        option = dtorch.GraphOption(per_device_per_process=True, worker_pool=pool)
        with dtorch.Graph(option) as graph:
            mesh = dtorch.init_device_mesh("cpu", 2)
            t = dtorch.arange(4.0, device_mesh=mesh, placements=[Shard(0)], graph=graph)
            assert (t * 2).tolist() == [0.0, 2.0, 4.0, 6.0]


def test_large_values_come_through_reused_shared_memory(worker_pools: PoolKeeper) -> None:
    """Values of 1 MiB or more travel in the workers' shared-memory segments, which the
    controller hands back once it copied the value out: fetching many leaves no segment
    behind and every value right."""
    from dtorch.runtime.process.values import SHARED_MIN

    pool = worker_pools.pool()
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
    try:
        mesh = dtorch.init_device_mesh("cpu", 3)
        rows = SHARED_MIN // (4 * 256) + 7  # just over the threshold, uneven over 3 devices
        full = torch.randn(rows, 256, generator=torch.Generator().manual_seed(3))
        t = dtorch.from_torch(full, device_mesh=mesh, placements=[Shard(0)], graph=graph)
        for step in range(12):
            value = (t * step).to_torch()
            assert value.nbytes >= SHARED_MIN and torch.equal(value, full * step)
        fds = [len(os.listdir(f"/proc/{pid}/fd")) for pid in pool.pids]
        for step in range(12):
            assert torch.equal((t + step).to_torch(), full + step)
        assert [len(os.listdir(f"/proc/{pid}/fd")) for pid in pool.pids] == fds
    finally:
        graph.close()


def test_a_worker_that_skipped_a_batch_can_read_its_outputs_later(
    worker_pools: PoolKeeper,
) -> None:
    """A tensor made on worker 0's device alone (workers 1 and 2 skip that batch), fetched
    and then moved to devices of the other workers in later batches: they learn its metadata
    from the batch that reads it."""
    pool = worker_pools.pool()
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
    try:
        x = dtorch.arange(6.0, device_mesh=dtorch.DeviceMesh("cpu", [0]), graph=graph)
        assert x.tolist() == list(range(6))  # its batch has run; nobody else decoded it
        target = dtorch.init_device_mesh("cpu", 3)
        moved = x.redistribute(target, [Shard(0)])
        assert (moved * 2).tolist() == [2.0 * i for i in range(6)]
        graph.sync()
    finally:
        graph.close()


def test_a_batch_for_one_worker_is_sent_to_that_worker_alone(worker_pools: PoolKeeper) -> None:
    """Operators on one worker's device go to it only (the others are not woken: the message
    to everyone count stays); frees of a shared tensor and syncs go to everyone."""
    pool = worker_pools.pool()
    publisher = pool.state.publisher
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
    try:
        wide = dtorch.arange(6.0, device_mesh=dtorch.init_device_mesh("cpu", 3), graph=graph)
        graph.sync()  # x's batch must not carry wide (its readers would be every worker)
        one = dtorch.DeviceMesh("cpu", [1])
        x = dtorch.ones(4, device_mesh=one, graph=graph)
        assert x.tolist() == [1.0] * 4
        before = publisher.next_id
        for _ in range(20):
            x = x * 2 + 1
        assert x.tolist() == [2.0**21 - 1] * 4
        assert publisher.next_id == before  # every batch went to worker 1 alone
        del wide  # its shards live on every worker: that free goes to everyone
        y = dtorch.full((3,), 5.0, device_mesh=one, graph=graph)
        assert (y + x[:3]).tolist() == [2.0**21 + 4] * 3
        assert publisher.next_id > before
        graph.sync()
        assert [s.memory_allocated for s in graph.get_memory_stats(one)] == [16 + 12]
    finally:
        graph.close()


def test_a_pool_that_fails_to_start_a_worker_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failed fork (or a Ctrl-C) while the workers start: those started are stopped, the
    sockets and the shared board are closed (they stayed until the program exited)."""
    started: list[subprocess.Popen[bytes]] = []
    real = subprocess.Popen

    class Failing(real):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if len(started) == 1:
                raise OSError(11, "no second fork")
            super().__init__(*args, **kwargs)
            started.append(self)

    memfds = _memfds()
    monkeypatch.setattr(subprocess, "Popen", Failing)
    with pytest.raises(OSError, match="no second fork"):
        WorkerPool(3, "cpu")
    monkeypatch.undo()
    assert len(started) == 1 and started[0].poll() is not None
    assert _memfds() == memfds


def _memfds() -> int:
    """How many memfd segments this process has open."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += "memfd:" in os.readlink(f"/proc/self/fd/{fd}")
    return count


def test_a_graph_whose_controller_cannot_start_fails_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No report thread ever reads the pool's reports then: the runner's close must not wait
    for one to read its END (it waited the whole 30 s close timeout)."""
    import time

    import dtorch.api.graph as graph_module

    class _NoThreads(Exception):
        pass

    def cannot_start(*args: Any, **kwargs: Any) -> Any:
        raise _NoThreads("can't start new thread")

    monkeypatch.setattr(graph_module, "Executor", cannot_start)
    started = time.monotonic()
    with pytest.raises(_NoThreads):
        dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, num_workers=2))
    assert time.monotonic() - started < 15.0
