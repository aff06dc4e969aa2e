"""The three stages end to end: recording returns at once, values and syncs wait, failures
name the operator and the user's line, released operands free their shards."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Callable

import pytest
import torch

import dtorch
from dtorch.errors import FutureTimeoutError, GraphError, KernelError
from tests.runners import PoolKeeper, pause_devices


def test_values_of_every_placement_kind(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    full = torch.arange(35.0).reshape(7, 5)
    layouts = [
        [dtorch.Shard(0), dtorch.Shard(1)],
        [dtorch.Replicate(), dtorch.Shard(0)],
        [dtorch.Partial(), dtorch.Replicate()],
        [dtorch.Shard(1), dtorch.Partial()],
        [dtorch.Shard(0), dtorch.Shard(0)],
    ]
    for placements in layouts:
        t = dtorch.from_torch(full, device_mesh=mesh, placements=placements, graph=graph)
        assert torch.equal(t.to_torch(), full), placements


def test_future_api(graph: dtorch.Graph) -> None:
    t = dtorch.arange(5, graph=graph) * 2
    future = t.to_torch_async()
    assert future.wait_for(10_000)
    assert future.is_ready()
    assert future.get().tolist() == [0, 2, 4, 6, 8]
    future.wait()
    assert t.tolist() == [0, 2, 4, 6, 8] and t.numpy().tolist() == [0, 2, 4, 6, 8]
    assert (t.sum()).item() == 20 and t.equal(dtorch.arange(0, 10, 2, graph=graph))


def test_await_does_not_block_the_event_loop(graph: dtorch.Graph) -> None:
    t = dtorch.ones(3, graph=graph) + 1
    ticks: list[int] = []

    async def ticker() -> None:
        for i in range(3):
            ticks.append(i)
            await asyncio.sleep(0)

    async def main() -> torch.Tensor:
        result, _ = await asyncio.gather(t.to_torch_async(), ticker())
        await graph.sync_future()
        return result

    assert asyncio.run(main()).tolist() == [2.0, 2.0, 2.0]
    assert ticks == [0, 1, 2]


def test_recording_never_waits_for_the_devices(graph: dtorch.Graph) -> None:
    """While the devices run nothing, the client goes on recording (and the values wait)
    until they go on."""
    x = dtorch.ones(4, graph=graph)
    with pause_devices(graph):
        out = x
        for _ in range(200):
            out = out + 1  # recorded while the devices are stopped
        future = out.to_torch_async()
        assert not future.wait_for(100)  # nothing ran yet, yet every call above returned
    assert future.get().tolist() == [201.0] * 4


def test_kernel_failure_names_operator_and_line(graph: dtorch.Graph) -> None:
    a = dtorch.tensor([1, 2, 3], graph=graph)
    bad = a // dtorch.zeros_like(a)  # by a tensor of zeros: fails on the device, at fetch
    with pytest.raises(KernelError) as info:
        bad.to_torch()
    message = str(info.value)
    assert "floor_divide" in message and __file__ in message
    line = test_kernel_failure_names_operator_and_line.__code__.co_firstlineno + 2
    assert f":{line}:" in message
    # everything that depends on the failure fails too; independent work keeps going
    with pytest.raises(KernelError, match="floor_divide"):
        (bad + 1).to_torch()
    assert (a + 1).tolist() == [2, 3, 4]
    graph.sync()  # the failure was raised to the user already; the graph is healthy
    worse = a // dtorch.zeros_like(a)  # one nobody fetches reaches sync(), once
    with pytest.raises(KernelError, match="floor_divide"):
        graph.sync()
    graph.sync()
    del worse


def test_failed_syncs_leave_nothing_alive(graph: dtorch.Graph) -> None:
    """Each sync() that raised a kernel failure kept its error, promise and collector alive
    for good (the error's traceback held the collector, the promise's finalizer the error):
    about 20 KB per failed sync, even after the graph closed."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    a = dtorch.arange(8.0, device_mesh=mesh, graph=graph)
    bad = dtorch.from_torch(torch.tensor([0, 100]), device_mesh=mesh, graph=graph)
    gc.collect()
    before = sum(type(o) is KernelError for o in gc.get_objects())  # other tests' may live
    for _ in range(20):
        a[bad]  # dropped: only the sync reports its failure
        with pytest.raises(KernelError, match="out of"):
            graph.sync()
    gc.collect()
    assert sum(type(o) is KernelError for o in gc.get_objects()) <= before


def test_future_timeout_is_a_clear_error(graph: dtorch.Graph) -> None:
    from dtorch.api.future import TensorFuture
    from dtorch.comm.promise import create_promise
    from dtorch.ir.opkind import PromiseKind
    from dtorch.runtime.settle import RaisedFailures

    promise = create_promise(PromiseKind.MEMORY)  # held: an abandoned promise fails its future
    never = TensorFuture(promise.get_future(), None, RaisedFailures())
    assert not never.wait_for(10) and not never.is_ready()
    with pytest.raises(FutureTimeoutError):
        never.get(timeout_s=0.05)
    promise.set_value(torch.ones(1))
    assert never.get().tolist() == [1.0]


def test_released_operands_free_their_shards(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 4)
    baseline = graph.get_memory_stats(mesh)
    keep = dtorch.ones(1024, 256, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
    temp = [keep * i for i in range(8)]
    held = graph.get_memory_stats(mesh)
    per_device = 1024 * 256 * 4 // 4
    for device in mesh.device_ids:
        assert (
            held.find(device).memory_allocated - baseline.find(device).memory_allocated
            == 9 * per_device
        )
    del temp
    gc.collect()
    after = graph.get_memory_stats(mesh)
    for device in mesh.device_ids:
        assert (
            after.find(device).memory_allocated - baseline.find(device).memory_allocated
            == per_device
        )
        assert after.find(device).max_memory_allocated >= 9 * per_device
    graph.get_memory_stats(mesh, reset_peak=True)
    reset = graph.get_memory_stats(mesh)
    assert all(
        reset.find(d).max_memory_allocated == reset.find(d).memory_allocated
        for d in mesh.device_ids
    )
    del keep


def test_a_loop_dropping_its_results_frees_them_as_it_goes(graph: dtorch.Graph) -> None:
    """``y = a * 2`` in a loop while the devices are behind: the streams freed a batch's
    dropped results only after the whole batch ran, so up to half a batch of them (hundreds
    here) were alive at once, where torch holds one; a batch ends after 32 MiB of dropped
    results now (``RELEASED_BYTES_PER_BATCH``), 32 of these."""
    mesh = dtorch.init_device_mesh("cpu", 1)
    a = dtorch.ones(512, 512, device_mesh=mesh, graph=graph)  # 1 MiB
    graph.sync()
    graph.get_memory_stats(mesh, reset_peak=True)
    with pause_devices(graph):
        for _ in range(1500):
            y = a * 2.0
    assert y.sum().item() == 2.0 * 512 * 512
    peak = graph.get_memory_stats(mesh).find(0).max_memory_allocated
    assert peak <= 80 * 512 * 512 * 4, peak / 2**20  # MiB: a few batches' worth at most


def test_two_graphs_from_two_threads(make_graph: Callable[[], dtorch.Graph]) -> None:
    results: dict[int, list[float]] = {}
    errors: list[BaseException] = []
    graphs = [make_graph(), make_graph()]

    def work(index: int) -> None:
        try:
            g = graphs[index - 1]
            mesh = dtorch.init_device_mesh("cpu", 3)
            t = dtorch.arange(12.0, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=g)
            for _ in range(200):
                t = t + index
            results[index] = t.tolist()
            g.close()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    for index in (1, 2):
        assert results[index] == [i + 200.0 * index for i in range(12)]


def test_default_graph_is_per_thread() -> None:
    seen: list[dtorch.Graph] = []
    thread = threading.Thread(target=lambda: seen.append(dtorch.default_graph()))
    thread.start()
    thread.join(10)
    assert seen[0] is not dtorch.default_graph() and seen[0] == seen[0]
    assert dtorch.Graph.default_graph() is dtorch.default_graph()


def test_mixed_graphs_are_refused(make_graph: Callable[[], dtorch.Graph]) -> None:
    g1, g2 = make_graph(), make_graph()
    with pytest.raises(GraphError, match="different graphs"):
        dtorch.ones(2, graph=g1) + dtorch.ones(2, graph=g2)


def test_closed_graph_refuses_new_work(make_graph: Callable[[], dtorch.Graph]) -> None:
    g = make_graph()
    t = dtorch.ones(2, graph=g)
    assert t.tolist() == [1.0, 1.0]
    g.close()
    with pytest.raises(GraphError, match="closed"):
        dtorch.ones(2, graph=g)


def test_a_graph_as_a_context_manager_closes_at_the_end(
    make_graph: Callable[[], dtorch.Graph],
) -> None:
    with make_graph() as g:
        pending = (dtorch.ones(2, graph=g) * 3).to_torch_async()
        assert dtorch.Graph.default_graph() is not g  # entering does not make it the default
    assert g.closed and pending.get().tolist() == [3.0, 3.0]  # queued work ran first
    with pytest.raises(GraphError, match="closed"):
        dtorch.ones(2, graph=g)
    with pytest.raises(GraphError, match="cannot be entered again"), g:
        pass


def test_a_graph_as_a_context_manager_closes_when_the_block_raises(
    make_graph: Callable[[], dtorch.Graph],
) -> None:
    with pytest.raises(ZeroDivisionError), make_graph() as g:
        dtorch.ones(2, graph=g)
        _ = 1 / 0
    assert g.closed


@pytest.mark.timeout(60)
def test_432_device_five_dimensional_mesh(graph: dtorch.Graph, runner: str) -> None:
    mesh = dtorch.init_device_mesh("cpu", (3, 2, 4, 3, 6))
    full = torch.arange(24 * 18, dtype=torch.float32).reshape(24, 18)
    placements = [
        dtorch.Shard(0),
        dtorch.Replicate(),
        dtorch.Shard(1),
        dtorch.Partial(),
        dtorch.Shard(0),
    ]
    t = dtorch.from_torch(full, device_mesh=mesh, placements=placements, graph=graph)
    out = (t * 2 + t).to_torch()
    assert torch.equal(out, full * 3)
    if runner == "thread":
        assert len(graph.runner.streams) <= 4
    else:
        assert graph.runner.parties == graph.runner.pool.workers
    assert threading.active_count() < 50


def test_device_mesh_and_dtype_guards(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    with graph.device_mesh_guard(mesh), graph.dtype_guard(torch.float64):
        t = dtorch.zeros(4, graph=graph)
    assert (
        t.device_mesh == mesh and t.dtype == torch.float64 and t.placements == [dtorch.Replicate()]
    )
    assert (
        graph.default_device_mesh == dtorch.DeviceMesh("cpu")
        and graph.default_dtype == torch.float32
    )
    assert graph.satisfy(mesh) and graph.satisfy(dtorch.init_device_mesh("cpu", 400))
    graph.empty_cache()


def test_the_option_and_the_environment_choose_the_runner(worker_pools: PoolKeeper) -> None:
    from dtorch.runtime.process import ProcessRunner
    from dtorch.runtime.thread_runner import ThreadRunner

    pool = worker_pools.pool()
    with dtorch.GlobalOption.override(per_device_per_process=True):
        g = dtorch.Graph(dtorch.GraphOption(worker_pool=pool))
        assert isinstance(g.runner, ProcessRunner) and dtorch.ones(2, graph=g).tolist() == [1, 1]
        g.close()
        with pytest.warns(UserWarning, match="worker_pool=.* is ignored"):  # thread mode's
            g = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False, worker_pool=pool))
        assert isinstance(g.runner, ThreadRunner) and dtorch.ones(2, graph=g).tolist() == [1, 1]
        g.close()
    for bad in (0, 1025, 2**70):
        with pytest.raises(GraphError, match="num_workers must be an int from 1 to 1024"):
            dtorch.GraphOption(per_device_per_process=True, num_workers=bad)
    with pytest.raises(GraphError, match="not both"):
        dtorch.GraphOption(per_device_per_process=True, num_workers=2, worker_pool=pool)
    for bad in (0, -1, 1.5, True, "2", 257, 2**70):  # 100,000 threads broke the process
        with pytest.raises(GraphError, match="num_streams must be an int from 1 to 256 or None"):
            dtorch.GraphOption(num_streams=bad)  # type: ignore[arg-type]
    option = dtorch.GraphOption(num_streams=1)
    with pytest.raises(GraphError, match="num_streams must be an int from 1 to 256"):
        option.num_streams = 0
    assert option.num_streams == 1 and "num_streams=1" in str(option)


@pytest.mark.parametrize("streams", [1, 3])
def test_a_thread_graph_runs_its_devices_on_the_streams_it_asks_for(streams: int) -> None:
    """Every device on one stream (collectives within one caller, no store), or on three
    (a 2 x 2 mesh's groups split across streams): the same results as torch."""
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False, num_streams=streams))
    try:
        assert graph.runner.parties == streams
        mesh = dtorch.init_device_mesh("cpu", (2, 2))
        a, w = torch.randn(6, 5), torch.randn(4, 5)
        s0, r = dtorch.Shard(0), dtorch.Replicate()
        x = dtorch.from_torch(a, device_mesh=mesh, placements=[s0, r], graph=graph)
        weight = dtorch.from_torch(w, device_mesh=mesh, placements=[r, s0], graph=graph)
        y = dtorch.nn.functional.linear(x, weight).redistribute(mesh, [r, r])
        torch.testing.assert_close(y.to_torch(), a @ w.T)
        torch.testing.assert_close((y * 2).sum().to_torch(), (a @ w.T * 2).sum())
    finally:
        graph.close()


def test_cuda_meshes_are_satisfied_only_where_devices_exist(graph: dtorch.Graph) -> None:
    cuda = dtorch.DeviceMesh("cuda", [0, 1])
    assert graph.satisfy(cuda) == (torch.cuda.is_available() and torch.cuda.device_count() >= 2)
    with dtorch.GlobalOption.override(dtensor_in_same_device=True):
        # N logical devices on one GPU: any mesh up to DTORCH_NUM_GPU_WHEN_ENABLE_... devices
        assert graph.satisfy(cuda) == torch.cuda.is_available()
        assert graph.satisfy(dtorch.init_device_mesh("cpu", 64))


def test_a_runner_failure_fails_pending_values_and_refuses_new_work(
    make_graph: Callable[[], dtorch.Graph],
) -> None:
    g = make_graph()
    t = dtorch.ones(3, graph=g)
    assert t.tolist() == [1.0, 1.0, 1.0]

    def broken(batch: object) -> None:
        raise RuntimeError("runner bug")

    g.runner.execute = broken  # type: ignore[method-assign]
    future = (t + 1).to_torch_async()
    with pytest.raises(GraphError, match="runner failed to take a batch"):
        future.get(timeout_s=10)
    with pytest.raises(GraphError, match="runner failed"):
        t + 2


def test_a_release_alone_in_its_batch_reaches_the_stream_holding_the_shard(
    graph: dtorch.Graph,
) -> None:
    # Device 1 runs on stream 1; nothing before the release sends stream 1 a free or a
    # memory-stats operator, and the release is a batch of its own (memory stats wait for it).
    mesh = dtorch.DeviceMesh("cpu", [1])
    t = dtorch.ones(4096, device_mesh=mesh, graph=graph)
    assert t.to_torch().sum().item() == 4096
    del t
    gc.collect()
    stats = graph.get_memory_stats(mesh).find(1)
    assert stats.memory_allocated == 0 and stats.max_memory_allocated == 4096 * 4


def test_a_thread_graph_that_cannot_start_its_streams_leaves_no_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The third stream fails to start (as when the process can start no more threads): the
    two started stop again, and a new graph works (566 threads were left running, and every
    later graph failed with "can't start new thread")."""
    import threading

    from dtorch.runtime import host

    made = []
    real = host.KernelStream

    def failing(*args: object, **kwargs: object) -> object:
        if len(made) == 2:
            raise RuntimeError("can't start new thread")
        made.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return made[-1]

    before = threading.active_count()
    monkeypatch.setattr(host, "KernelStream", failing)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        dtorch.Graph(dtorch.GraphOption(per_device_per_process=False, num_streams=4))
    monkeypatch.undo()
    assert len(made) == 2 and threading.active_count() == before
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False, num_streams=4))
    assert dtorch.ones(2, graph=graph).tolist() == [1.0, 1.0]
    graph.close()


def test_a_worker_pool_that_is_not_one_is_refused() -> None:
    """``worker_pool=object()`` failed with an AttributeError deep in the graph's start; a
    'cuda' pool on a machine without enough GPUs started workers that crashed."""
    from dtorch.runtime.process import WorkerPool

    with pytest.raises(GraphError, match="worker_pool must be a dtorch"):
        dtorch.GraphOption(per_device_per_process=True, worker_pool=object())  # type: ignore[arg-type]
    count = torch.cuda.device_count() + 1
    needs = f"worker pool of {count} workers needs {count} GPUs"
    with pytest.raises(dtorch.OptionError, match=needs):
        WorkerPool(count, "cuda")
