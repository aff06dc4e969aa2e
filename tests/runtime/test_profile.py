"""dtorch.profile(): every kernel of the block on every device, nothing outside it, a valid
Chrome trace; on both runners (process mode: the events come back from the workers)."""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from pathlib import Path

import pytest
import torch

import dtorch
from dtorch import Replicate, Shard
from dtorch.errors import GraphError, KernelError
from dtorch.ir.opkind import OpKind

DEVICES = 4  # process mode's shared pool has 3 workers: one of them hosts two devices


def _mesh() -> dtorch.DeviceMesh:
    return dtorch.init_device_mesh("cpu", DEVICES)


def _block(graph: dtorch.Graph) -> tuple[dtorch.Profile, torch.Tensor]:
    """A local kernel, a redistribution (a group kernel) and another local kernel."""
    a = dtorch.ones(8, device_mesh=_mesh(), placements=[Shard(0)], graph=graph)
    with dtorch.profile(graph) as prof:
        b = a + a
        c = b.redistribute(_mesh(), [Replicate()])
        d = c * 3
    return prof, d.to_torch()


def test_every_kernel_of_the_block_on_every_device(graph: dtorch.Graph) -> None:
    prof, value = _block(graph)
    assert torch.equal(value, (torch.ones(8) + torch.ones(8)) * 3)
    per_op = Counter(e.name.split("_")[0] for e in prof.events)
    assert per_op == {"add": DEVICES, "redistribute": DEVICES, "mul": DEVICES}
    for name in ("add", "redistribute", "mul"):
        devices = sorted(e.device for e in prof.events if e.name.startswith(name))
        assert devices == list(range(DEVICES))
    assert {e.group for e in prof.events if e.kind is OpKind.Convert} == {True}
    assert not any(e.group for e in prof.events if e.kind is OpKind.BroadcastBinary)
    assert all(0 <= e.start_ns <= e.end_ns for e in prof.events)
    assert prof.dropped == 0


def test_events_come_from_the_processes_that_ran_them(graph: dtorch.Graph) -> None:
    prof, _ = _block(graph)
    pids = {e.pid for e in prof.events}
    if graph.option.resolved_per_device_per_process():
        assert os.getpid() not in pids and len(pids) == min(DEVICES, graph.runner.parties)
    else:
        assert pids == {os.getpid()}


def test_order_on_each_device_follows_the_program(graph: dtorch.Graph) -> None:
    prof, _ = _block(graph)
    for device in range(DEVICES):
        mine = [e for e in prof.events if e.device == device]
        assert [e.name.split("_")[0] for e in mine] == ["add", "redistribute", "mul"]
        assert all(x.end_ns <= y.start_ns for x, y in itertools.pairwise(mine))


def test_nothing_outside_the_block_is_recorded(graph: dtorch.Graph) -> None:
    a = dtorch.ones(8, device_mesh=_mesh(), graph=graph)
    before = a - a
    with dtorch.profile(graph) as prof:
        inside = a * a
    after = a / a
    assert {e.name.split("_")[0] for e in prof.events} == {"mul"}
    assert before.to_torch().sum() == 0 and inside.to_torch().sum() == after.to_torch().sum()
    with dtorch.profile(graph) as empty:
        pass
    assert empty.events == ()


def test_chrome_trace_file(graph: dtorch.Graph, tmp_path: Path) -> None:
    prof, _ = _block(graph)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path)
    with path.open() as file:
        trace = json.load(file)
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(prof.events) == 3 * DEVICES
    for event in complete:
        assert {"name", "pid", "tid", "ts", "dur", "args", "cat"} <= set(event)
        assert event["dur"] >= 0 and event["ts"] >= 0
        assert event["cat"] == ("collective" if event["args"]["group"] else "kernel")
    names = [e for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert sorted(e["tid"] for e in names) == list(range(DEVICES))


def test_profiles_do_not_nest_and_enter_once(graph: dtorch.Graph) -> None:
    outer = dtorch.profile(graph)
    with outer as prof, pytest.raises(GraphError, match="do not nest"), dtorch.profile(graph):
        pass
    with pytest.raises(GraphError, match="entered already"), prof:
        pass
    with dtorch.profile(graph):  # the refusals left the graph free to profile again
        pass


def test_a_profile_refused_inside_a_trace_leaves_the_graph_free(graph: dtorch.Graph) -> None:
    """A profile block inside a traced function is refused (TraceError); the refusal came
    after the graph was claimed, and every later profile of the graph said "do not nest"."""

    def profiled(t: dtorch.Tensor) -> dtorch.Tensor:
        with dtorch.profile(graph):
            return t + 1

    with pytest.raises(dtorch.TraceError):
        dtorch.trace(profiled, dtorch.ones(2, device_mesh=_mesh(), graph=graph))
    with dtorch.profile(graph) as prof:
        assert (dtorch.ones(2, device_mesh=_mesh(), graph=graph) * 2).tolist() == [2.0, 2.0]
    assert Counter(e.name.split("_")[0] for e in prof.events)["mul"] == DEVICES


def test_export_before_the_end_is_refused(graph: dtorch.Graph, tmp_path: Path) -> None:
    with dtorch.profile(graph) as prof, pytest.raises(GraphError, match="has not ended"):
        prof.export_chrome_trace(tmp_path / "early.json")
    assert not (tmp_path / "early.json").exists()


def test_a_closed_graph_is_refused(make_graph) -> None:  # type: ignore[no-untyped-def]
    graph = make_graph()
    graph.close()
    with pytest.raises(GraphError, match="closed"), dtorch.profile(graph):
        pass


def test_a_graph_closed_inside_the_block_warns_and_holds_no_events(make_graph) -> None:  # type: ignore[no-untyped-def]
    """The devices stopped with their recordings: the block's exit does not raise over the
    block's own work, it warns (naming the user's block) and the profile holds no events."""
    graph = make_graph()
    warned = pytest.warns(UserWarning, match="closed inside the profile's block")
    with warned as caught, dtorch.profile(graph) as prof:
        (dtorch.ones(3, graph=graph) * 2).to_torch()
        graph.close()
    assert caught[0].filename == __file__
    assert prof.events == () and prof.dropped == 0


def test_default_graph_is_profiled(graph: dtorch.Graph) -> None:
    with dtorch.profile() as prof:  # the graph fixture is the thread's default graph
        value = (dtorch.ones(2, device_mesh=_mesh()) * 2).to_torch()
    assert value.tolist() == [2.0, 2.0]
    assert Counter(e.name.split("_")[0] for e in prof.events)["mul"] == DEVICES


def test_a_kernel_failure_keeps_the_events_before_it(graph: dtorch.Graph) -> None:
    mesh = _mesh()
    a = dtorch.ones(8, device_mesh=mesh, placements=[Shard(0)], graph=graph)
    with pytest.raises(KernelError, match="Create"), dtorch.profile(graph) as prof:
        b = a + 1
        huge = dtorch.empty(1 << 40, device_mesh=mesh, placements=[Shard(0)], graph=graph)
        huge.to_torch_async().get(timeout_s=30)
    names = Counter(e.name.split("_")[0] for e in prof.events)
    assert names["add"] == DEVICES and names["empty"] == DEVICES
    assert torch.equal(b.to_torch(), torch.ones(8) + 1)
    graph.sync()  # the fetch raised the failure: sync does not raise it again
