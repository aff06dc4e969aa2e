"""DTorch's Graph surface: default_graph as an object, GraphOption, names, dtypes, memory stats,
nvtx, dtorch.type, timeouts (issue 9). Graph behaviours run in thread and process mode."""

from __future__ import annotations

import math
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import dtorch
from dtorch.errors import GraphError, MeshError, OptionError
from dtorch.memory_stats import MemoryStat, MemoryStats
from dtorch.options import MAX_WAIT_SECOND, GlobalOption, Options


def test_import_dtorch_imports_nn_in_a_fresh_interpreter() -> None:
    code = (
        "import dtorch, torch; print(dtorch.nn.functional.relu(dtorch.tensor([-1.0, 2.0]))"
        ".tolist(), dtorch.type.PaddingType.same.value, dtorch.memory_stats.MemoryStat.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[0.0,", "2.0]", "same", "MemoryStat"]


def test_default_graph_is_the_threads_graph_and_callable(graph: dtorch.Graph) -> None:
    assert dtorch.default_graph() is graph
    assert dtorch.default_graph.id == graph.id
    mesh = dtorch.init_device_mesh("cpu", 2)
    assert dtorch.default_graph.satisfy(mesh) is True
    dtorch.default_graph.empty_cache()
    dtorch.default_graph.sync()
    assert isinstance(dtorch.default_graph.get_memory_stats(mesh), MemoryStats)
    assert isinstance(dtorch.default_graph, dtorch.Graph)  # as DTorch's, where a Graph stands
    other: list[dtorch.Graph] = []
    worker = threading.Thread(target=lambda: other.append(dtorch.default_graph()))
    worker.start()
    worker.join()
    assert other[0] is not graph
    other[0].close()
    assert "default" in repr(dtorch.default_graph)
    # compared as the graph it stands for, both ways; never equal to another graph
    assert dtorch.default_graph == graph and graph == dtorch.default_graph
    assert dtorch.default_graph != other[0] and other[0] != dtorch.default_graph
    assert hash(dtorch.default_graph) == hash(graph) and {graph, dtorch.default_graph} == {graph}


def test_default_graph_object_stands_for_the_graph_everywhere(graph: dtorch.Graph) -> None:
    """``graph=dtorch.default_graph`` is taken wherever a Graph is (creation refused it),
    and attributes set through it are set on the graph (an AttributeError before)."""
    made = dtorch.zeros(2, graph=dtorch.default_graph)
    assert made.graph is graph and made.tolist() == [0.0, 0.0]
    assert dtorch.from_torch(torch.ones(1), graph=dtorch.default_graph).graph is graph
    with dtorch.profile(graph=dtorch.default_graph):
        dtorch.ones(1).tolist()
    dtorch.default_graph.default_dtype = torch.float64
    try:
        assert graph.default_dtype == torch.float64 and dtorch.ones(1).dtype == torch.float64
    finally:
        dtorch.default_graph.default_dtype = torch.float32


def test_a_closed_graph_satisfies_no_mesh(make_graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 2)
    closing = make_graph()
    assert closing.satisfy(mesh) is True
    closing.close()
    assert closing.satisfy(mesh) is False


def test_graph_option_is_settable_comparable_and_keyword_only() -> None:
    option = dtorch.GraphOption()
    option.per_device_per_process = True
    assert option == dtorch.GraphOption(per_device_per_process=True)
    assert option != dtorch.GraphOption()
    assert "per_device_per_process=True" in str(option)
    with pytest.raises(TypeError, match="positional"):
        dtorch.GraphOption("no")  # type: ignore[misc]
    with pytest.raises(GraphError, match="True, False or None"):
        dtorch.GraphOption(per_device_per_process="no")  # type: ignore[arg-type]
    with pytest.raises(GraphError, match="takes a GraphOption or None, got str"):
        dtorch.Graph(option="x")  # type: ignore[arg-type]
    # assignment is checked as construction is, and a refused value leaves the option as it was
    with pytest.raises(GraphError, match="True, False or None"):
        option.per_device_per_process = "no"  # type: ignore[assignment]
    with pytest.raises(GraphError, match="an int from 1 to 1024"):
        option.num_workers = 0
    assert option == dtorch.GraphOption(per_device_per_process=True)
    for given, kept in ((1, True), (0, False), (0.0, False)):  # equal to a bool: stored as one
        assert dtorch.GraphOption(per_device_per_process=given).per_device_per_process is kept
    with pytest.raises(AttributeError):
        option.per_device_per_proces = False  # type: ignore[attr-defined]


def test_graph_name_str_and_default_dtype(graph: dtorch.Graph) -> None:
    assert graph.get_name() == ""
    graph.set_name("trainer")
    assert graph.get_name() == "trainer"
    assert str(graph) == f"dtorch.Graph with id: {graph.id}"
    graph._set_default_dtype(torch.float64)
    assert dtorch.ones(2).to_torch().dtype == torch.float64
    with graph.dtype_guard(None) as dtype:
        assert dtype == torch.float32
        assert dtorch.ones(2).to_torch().dtype == torch.float32
    assert graph.default_dtype == torch.float64
    graph._set_default_dtype(torch.float32)


@pytest.mark.parametrize("shape", [(2,), (2, 2), (1, 2, 2), (3,)])
def test_memory_stats_find_per_device(graph: dtorch.Graph, shape: tuple[int, ...]) -> None:
    mesh = dtorch.init_device_mesh("cpu", shape)
    placements = [dtorch.Shard(0)] + [dtorch.Replicate()] * (len(shape) - 1)
    before = graph.get_memory_stats(mesh)
    t = dtorch.from_torch(torch.ones(6 * shape[0]), device_mesh=mesh, placements=placements)
    after = graph.get_memory_stats(mesh, reset_peak=True)
    assert [s.device_index for s in after] == list(mesh.device_ids)
    for d in mesh.device_ids:
        stat = after.find(d)
        assert isinstance(stat, MemoryStat)
        assert stat.memory_allocated - before.find(d).memory_allocated == 6 * 4
        assert stat.memory_reserved == stat.memory_allocated
        assert stat.max_memory_reserved == stat.max_memory_allocated >= stat.memory_allocated
    with pytest.raises(KeyError, match="no device 99"):
        after.find(99)
    del t


def test_memory_stats_of_a_device_string_and_a_bad_mesh(graph: dtorch.Graph) -> None:
    stats = graph.get_memory_stats(device_mesh="cpu")
    assert [s.device_index for s in stats] == [0]
    with pytest.raises(MeshError, match="get_memory_stats"):
        graph.get_memory_stats(device_mesh=3)  # type: ignore[arg-type]


def test_type_enums() -> None:
    assert {m.value for m in dtorch.type.OperatorFormat} == {"nchw", "nhwc"}
    assert {m.value for m in dtorch.type.PaddingType} == {"not_set", "same", "valid"}
    assert {m.value for m in dtorch.type.PoolingKind} == {"avg", "max"}


def test_nvtx_pairs_pushes_and_pops() -> None:
    nvtx = dtorch.cuda.nvtx
    assert nvtx.range_push("a") == 0
    assert nvtx.range_push("b") == 1
    assert nvtx.range_pop() == 1 and nvtx.range_pop() == 0
    assert nvtx.range_pop() == -1  # unpaired: torch's error value
    with nvtx.range("outer"):
        assert nvtx.open_ranges() == ["outer"]
    assert nvtx.open_ranges() == []
    assert dtorch.cuda.is_available() == torch.cuda.is_available()
    assert dtorch.cuda.device_count() == torch.cuda.device_count()


def test_grpc_timeout_option() -> None:
    assert Options.from_environ({"DTORCH_GRPC_TIMEOUT_SECOND": "5"}).grpc_timeout_second == 5.0
    with GlobalOption.override(grpc_timeout_second=2.0):
        assert GlobalOption.get_grpc_timeout_second() == 2.0
    with pytest.raises(OptionError, match="DTORCH_GRPC_TIMEOUT_SECOND"):
        Options.from_environ({"DTORCH_GRPC_TIMEOUT_SECOND": "-1"})


def test_a_timeout_above_the_maximum_is_refused_in_the_environment() -> None:
    with pytest.raises(OptionError, match="at most"):
        Options.from_environ({"DTORCH_COMM_TIMEOUT_SECOND": "1e10"})
    assert Options.from_environ({"DTORCH_COMM_TIMEOUT_SECOND": "1e9"}).comm_timeout_second == 1e9


@pytest.mark.parametrize(
    "timeout",
    [math.inf, 1e10, 10**13, 10**400, 5, 0.5],
    ids=["inf", "1e10", "1e13", "1e400", "5", "0.5"],
)
def test_huge_timeouts_wait_instead_of_overflowing(graph: dtorch.Graph, timeout: float) -> None:
    future = dtorch.arange(4).to_torch_async()
    assert future.get(timeout_s=timeout).tolist() == [0, 1, 2, 3]
    assert future.wait_for(timeout) is True
    graph.sync_future().get(timeout)


@pytest.mark.parametrize(
    ("timeout", "error"), [(math.nan, ValueError), ("1", TypeError), (None, TypeError)]
)
def test_wait_for_refuses_nan_and_non_numbers(
    graph: dtorch.Graph, timeout: object, error: type[Exception]
) -> None:
    future = dtorch.arange(2).to_torch_async()
    future.get()
    with pytest.raises(error, match="timeout_ms"):
        future.wait_for(timeout)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout_s"):
        future.get(timeout_s=math.nan)
    assert future.wait_for(-5) is True
    assert future.wait_for(np.int64(5)) is True and future.wait_for(np.float32(0.5)) is True


def test_max_wait_is_below_the_threading_limit() -> None:
    assert MAX_WAIT_SECOND < threading.TIMEOUT_MAX


def test_as_default_builds_layers_on_the_graph_and_restores(make_graph) -> None:  # type: ignore[no-untyped-def]
    """``with graph.as_default():`` makes ``graph`` the thread's default for tensors and
    dtorch.nn layers, nests, restores the previous default on exit (also after an error),
    leaves other threads alone and refuses a closed graph."""
    outer, inner = make_graph(), make_graph()
    before = dtorch.Graph.default_graph()
    with outer.as_default():
        layer = dtorch.nn.Linear(2, 3)
        with inner.as_default():
            assert dtorch.ones(2).graph is inner
            seen: list[dtorch.Graph] = []
            worker = threading.Thread(target=lambda: seen.append(dtorch.Graph.default_graph()))
            worker.start()
            worker.join()
            assert seen[0] is not inner
            seen[0].close()
        assert dtorch.Graph.default_graph() is outer
        with pytest.raises(ValueError, match="boom"), inner.as_default():
            raise ValueError("boom")
        assert dtorch.Graph.default_graph() is outer
    assert layer.weight.graph is outer and dtorch.Graph.default_graph() is before
    x = dtorch.from_torch(torch.ones(4, 2), graph=outer)
    torch.testing.assert_close(
        layer(x).to_torch(), torch.ones(4, 2) @ layer.weight.to_torch().T + layer.bias.to_torch()
    )
    closed = dtorch.Graph()
    closed.close()
    with pytest.raises(GraphError, match="closed"), closed.as_default():
        pass


def test_process_options_in_thread_mode_are_not_ignored_silently() -> None:
    """num_workers and worker_pool name process mode's workers: a graph that runs in thread
    mode warns that it ignores them (the user's line named), rather than drop them."""
    option = dtorch.GraphOption(per_device_per_process=False, num_workers=2)
    with pytest.warns(UserWarning, match=r"num_workers=2.*ignored.*thread mode") as caught:
        graph = dtorch.Graph(option)
    graph.close()
    assert caught[0].filename == __file__
