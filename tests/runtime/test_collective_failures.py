"""A group kernel (a redistribution) that fails on one party only never leaves the others
waiting: they stop within a second, mark their outputs with the failing party's failure (the
user's fetch raises a KernelError naming the operator and the original error), and the groups
serve the next collectives of the graph, and of the next graph on the same worker pool.

Real one-party failures, in both runners: torch.bits8 tensors can be copied but not filled
from 32768 elements on (``fill_cpu`` is not implemented for them), so only the party that must
zero a large enough shard fails - before the collective (the destination of a gather), or
between two steps of a plan (a non-owner zeroed for a Partial, then an all-gather). Thread
mode also injects a failure, by monkeypatching, at each point of a collective: the publish,
the read, the computation after every peer's tensor was received - for a large tensor, which
the streams exchange in the publish/read/release handshake, and a small one, for which they
meet in one ``combine`` (publish and read: the arrival fails; compute: party 1 arrives last
and fails computing everyone's outputs).

Nothing here may wait out the comm timeout (300 s by default): each fetch gives up after 30 s
and every failure must come in far less.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard
from dtorch.comm.group import compute
from dtorch.comm.store import MemoryTensorStore
from dtorch.errors import KernelError
from tests.comm.group.failure_workers import wait_to_arrive_last

pytestmark = pytest.mark.timeout(120)

#: Far below the comm timeout: a party's failure reaches the others within about a second.
FAST_S = 10.0
#: Elements from which torch's fill of a bits8 tensor fails (small fills take another path).
BITS8_FILL_FAILS = 32768


def _bits8(n: int) -> torch.Tensor:
    return torch.zeros(n, dtype=torch.uint8).view(torch.bits8)


def _fetch_fails(value: dtorch.Tensor, pattern: str) -> float:
    """Fetch ``value``, which must fail with a KernelError matching ``pattern``; seconds."""
    started = time.monotonic()
    with pytest.raises(KernelError, match=pattern):
        value.to_torch_async().get(timeout_s=30)
    return time.monotonic() - started


def _gather_works(mesh: dtorch.DeviceMesh, placements: list[Any]) -> None:
    """An all-gather of floats over the same device lines works."""
    value = dtorch.arange(8.0, device_mesh=mesh, placements=placements)
    gathered = value.redistribute(mesh, [Replicate()] * mesh.ndim)
    assert gathered.to_torch_async().get(timeout_s=30).tolist() == [float(i) for i in range(8)]


def _no_slots_left(graph: dtorch.Graph) -> None:
    """Thread mode: no store of the graph's groups holds a key any more."""
    groups = getattr(graph.runner, "_groups", None)
    if groups is None:  # process mode: the workers' stores are checked by tests/comm
        return
    for group in groups._groups.values():
        store = group._backend._store
        if isinstance(store, MemoryTensorStore):
            assert list(store._state().slots) == [], group
            assert list(store._state().meetings) == [], group


def test_a_gather_failing_on_its_destination_fails_the_fetch_at_once(
    graph: dtorch.Graph,
) -> None:
    """``to_torch`` of a bits8 tensor: device 0, the gather's destination, cannot zero its
    output before the exchange; device 1 (the source) learns of it at once."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.from_torch(_bits8(1 << 20), device_mesh=mesh, placements=[Shard(0)])
    elapsed = _fetch_fails(x, r'redistribute_\d+ \(Convert\) .*failed on device 0: .*"fill_cpu"')
    assert elapsed < FAST_S
    _gather_works(mesh, [Shard(0)])
    graph.sync()  # the fetch raised the failure: nothing else failed
    _no_slots_left(graph)


def test_a_party_failing_between_two_steps_fails_the_others_at_once(graph: dtorch.Graph) -> None:
    """(Shard(0), Replicate) -> (Replicate, Partial) on a 2 x 2 mesh zeroes the non-owners'
    copies, then all-gathers along mesh dim 0. Device 2 holds the longer piece and cannot be
    zeroed; device 3, on the same line, could, and waits for it in the all-gather."""
    mesh = dtorch.DeviceMesh("cpu", [[0, 2], [1, 3]])  # the lines (0, 1), (2, 3) span parties
    x = dtorch.from_torch(
        _bits8(2 * BITS8_FILL_FAILS - 1), device_mesh=mesh, placements=[Shard(0), Replicate()]
    )
    y = x.redistribute(mesh, [Replicate(), Partial()])
    assert _fetch_fails(y, r'redistribute_\d+ \(Convert\) .*"fill_cpu"') < FAST_S
    _gather_works(mesh, [Shard(0), Replicate()])
    graph.sync()
    _no_slots_left(graph)


def test_a_failed_input_stands_in_as_zero_bytes_whatever_its_dtype(graph: dtorch.Graph) -> None:
    """Device 0's bits8 zeros cannot be made (32768 elements), device 1's (32767) can: in the
    all-gather, device 0 takes part with zero bytes (torch's zeros of that dtype would fail
    too, leaving device 1 waiting) and device 1 marks its copy with device 0's failure."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    z = dtorch.zeros(
        2 * BITS8_FILL_FAILS - 1, dtype=torch.bits8, device_mesh=mesh, placements=[Shard(0)]
    )
    gathered = z.redistribute(mesh, [Replicate()])
    elapsed = _fetch_fails(gathered, r'zeros_\d+ \(Create\) .*failed on device 0: .*"fill_cpu"')
    assert elapsed < FAST_S
    _gather_works(mesh, [Shard(0)])
    graph.sync()  # the devices are done (a producer may forget its keys after the fetch)
    _no_slots_left(graph)


def test_a_later_graph_on_the_same_workers_runs_collectives(
    make_graph: Callable[[], dtorch.Graph],
) -> None:
    """The failed collective leaves the groups sound for the next graph (process mode: the
    same worker pool, whose groups outlive a graph's lease)."""
    first = make_graph()
    with first.as_default():
        mesh = dtorch.init_device_mesh("cpu", 2)
        x = dtorch.from_torch(_bits8(1 << 20), device_mesh=mesh, placements=[Shard(0)])
        assert _fetch_fails(x, '"fill_cpu"') < FAST_S
    first.close()
    with make_graph().as_default():
        _gather_works(dtorch.init_device_mesh("cpu", 2), [Shard(0)])


#: Elements of the tensors whose all-gather the injected failures hit (and nothing else): one
#: the streams meet for in one ``combine``, one above its 1 MiB (the handshake).
MARKED = {"small": 7777, "large": 300_001}


def _oom(*args: object, **kwargs: object) -> Any:
    raise OSError(errno.ENOMEM, "Cannot allocate memory (injected)")


def _inject(point: str, marked: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Party 1's all-gathers of ``marked`` elements fail at ``point`` (thread mode)."""
    if marked > MARKED["small"]:
        _inject_handshake(point, marked, monkeypatch)
    else:
        _inject_meeting(point, marked, monkeypatch)


def _inject_handshake(point: str, marked: int, monkeypatch: pytest.MonkeyPatch) -> None:
    if point == "publish":
        publish = MemoryTensorStore.src_set

        def src_set(store: MemoryTensorStore, key: str, tensor: torch.Tensor, count: int) -> None:
            if store.rank == 1 and tensor.numel() == marked // 2:  # device 1's piece
                _oom()
            publish(store, key, tensor, count)

        monkeypatch.setattr(MemoryTensorStore, "src_set", src_set)
    elif point == "read":
        read = MemoryTensorStore.dest_get_many
        armed = [True]

        def dest_get_many(store: MemoryTensorStore, keys: Any) -> Any:
            if store.rank == 1 and armed[0] and "all_gather" in keys[0]:
                armed[0] = False
                _oom()
            return read(store, keys)

        monkeypatch.setattr(MemoryTensorStore, "dest_get_many", dest_get_many)
    else:
        outputs = compute.all_gather_outputs

        def all_gather_outputs(tensors: Any, dim: int, ranks: Any, empty: Any) -> Any:
            if tuple(ranks) == (1,) and sum(t.numel() for t in tensors) == marked:
                _oom()
            return outputs(tensors, dim, ranks, empty)

        monkeypatch.setattr(compute, "all_gather_outputs", all_gather_outputs)


def _inject_meeting(point: str, marked: int, monkeypatch: pytest.MonkeyPatch) -> None:
    meet = MemoryTensorStore.combine

    def combine(store: MemoryTensorStore, key: str, tensors: Any, finish: Any) -> Any:
        mine = sum(t.numel() for t in tensors.values())
        if store.rank != 1 or mine != marked // 2:
            return meet(store, key, tensors, finish)
        if point != "compute":
            _oom()
        wait_to_arrive_last(store, key, FAST_S)
        return meet(store, key, tensors, _oom)

    monkeypatch.setattr(MemoryTensorStore, "combine", combine)


@pytest.mark.parametrize("size", list(MARKED))
@pytest.mark.parametrize("point", ["publish", "read", "compute"])
def test_a_collective_failing_at_any_point_on_one_party_fails_the_others_at_once(
    monkeypatch: pytest.MonkeyPatch, point: str, size: str
) -> None:
    """Party 1's all-gather fails before it publishes, while it reads, or after it received
    party 0's piece; party 0 marks its copy with party 1's failure at once. Thread mode only:
    the failure is injected by monkeypatching this process's stores (the process-mode tests
    above fail a real kernel on one worker instead)."""
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False))
    try:
        with graph.as_default():
            _fail_one_party(graph, monkeypatch, point, MARKED[size])
    finally:
        graph.close()


def _fail_one_party(
    graph: dtorch.Graph, monkeypatch: pytest.MonkeyPatch, point: str, marked: int
) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.ones(marked, device_mesh=mesh, placements=[Shard(0)])
    _inject(point, marked, monkeypatch)
    y = x.redistribute(mesh, [Replicate()])
    started = time.monotonic()
    with pytest.raises(KernelError, match=r"redistribute_\d+ \(Convert\) .*failed on device 1"):
        y.to_torch_async().get(timeout_s=30)  # device 0's copy: marked with device 1's failure
    with pytest.raises(KernelError, match=r"Cannot allocate memory \(injected\)"):
        y.sum().item()
    assert time.monotonic() - started < FAST_S
    monkeypatch.undo()
    _gather_works(mesh, [Shard(0)])
    graph.sync()
    _no_slots_left(graph)
