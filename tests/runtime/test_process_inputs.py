"""Large inputs through shared memory (process mode): ``from_torch`` values of 1 MiB or more
reach the workers in the controller's segments, not inside the messages; every layout gives
torch's values, segments come back once every worker that decoded the batch ran it, and are
reused; the worker-side checks refuse a shared input that does not fit its segment."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard
from dtorch.errors import WorkerError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch, Operator
from dtorch.ir.opkind import CreateKind
from dtorch.ir.params import CreateParam
from dtorch.ir.span import Span
from dtorch.runtime.process.addressing import readers
from dtorch.runtime.process.inputs import KEPT_SEGMENTS, SHARED_MIN, InputMaps, InputShare
from dtorch.serialization import decode_batch, encode_batch
from tests.runners import PoolKeeper

pytestmark = pytest.mark.timeout(120)


def _create(value: torch.Tensor, op_id: int = 1, devices: tuple[int, ...] = (0,)) -> Operator:
    param = CreateParam(
        CreateKind.FROM_TENSOR, tuple(value.shape), value.dtype, DeviceMesh("cpu", list(devices)),
        (Replicate(),), value=value,
    )  # fmt: skip
    return Operator(op_id, f"from_torch_{op_id}", param, (), (op_id + 100,), Span.unknown())


def test_large_values_travel_by_reference_and_come_back_when_every_reader_answered() -> None:
    """A batch with a small and two large values: the large ones leave the message (it is
    small), the worker's decoded batch sees torch's values; a segment is free once all of
    its batch's readers answered, and is then reused for the next value."""
    big = torch.randn(SHARED_MIN // 4 + 3)
    other = torch.arange(SHARED_MIN, dtype=torch.uint8)
    small = torch.ones(4)
    batch = ExecuteBatch((_create(small, 1), _create(big, 2), _create(other, 3)), ())
    share, maps = InputShare(), InputMaps()
    try:
        sent = share.share(batch, readers=2)
        payload = encode_batch(sent)
        assert len(payload) < 4096 and share.lent == 2
        received, tokens = maps.resolve(decode_batch(payload), lambda param: True)
        values = [op.param.value for op in received.operators]
        assert torch.equal(values[0], small) and torch.equal(values[1], big)
        assert torch.equal(values[2], other) and len(tokens) == 2
        share.done(tokens)
        assert share.lent == 2  # one reader of two answered
        share.done(tokens)
        share.done(tokens)  # a late or repeated answer changes nothing
        assert share.lent == 0
        again = share.share(ExecuteBatch((_create(big, 4),), ()), readers=1)
        first, second = sent.operators[1].param.shared, again.operators[0].param.shared
        assert (first.fd, first.inode) == (second.fd, second.inode)  # the freed segment
    finally:
        maps.close()
        share.close()


def test_a_worker_without_the_devices_maps_nothing_but_answers() -> None:
    value = torch.randn(SHARED_MIN // 4)
    share, maps = InputShare(), InputMaps()
    try:
        sent = share.share(ExecuteBatch((_create(value),), ()), readers=1)
        received, tokens = maps.resolve(sent, lambda param: False)
        param = received.operators[0].param
        assert param.value is None and param.shared is not None and len(tokens) == 1
    finally:
        maps.close()
        share.close()


def test_small_values_remote_workers_and_unaddressed_batches_stay_in_the_message() -> None:
    big = torch.randn(SHARED_MIN // 4)
    batch = ExecuteBatch((_create(torch.ones(3)), _create(big, 2)), ())
    for share, count in ((InputShare(enabled=False), 2), (InputShare(), 0)):
        assert share.share(batch, readers=count) is batch and share.lent == 0
        share.close()
    assert readers(b"\x05\x01") == 3 and readers(b"\x00") == 0


def test_a_shared_input_larger_than_its_segment_is_refused() -> None:
    value = torch.randn(SHARED_MIN // 4)
    share, maps = InputShare(), InputMaps()
    try:
        sent = share.share(ExecuteBatch((_create(value),), ()), readers=1)
        op = sent.operators[0]
        lying = dataclasses.replace(op.param, shape=(op.param.shared.size,))  # 4x the bytes
        with pytest.raises(WorkerError, match="within its segment"):
            maps.resolve(ExecuteBatch((dataclasses.replace(op, param=lying),), ()), lambda p: True)
    finally:
        maps.close()
        share.close()


def test_large_inputs_on_the_workers_match_torch(worker_pools: PoolKeeper) -> None:
    """Large values on meshes over every worker, over some and over one, in every kind of
    layout: torch's values; every segment is back once the graph synced; loading again
    reuses them (the controller's open descriptors do not grow by more than the few free
    segments it keeps)."""
    pool = worker_pools.pool()
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
    try:
        gen = torch.Generator().manual_seed(5)
        full = torch.randn(SHARED_MIN // (4 * 64) + 5, 64, generator=gen)  # uneven rows
        meshes = [
            dtorch.init_device_mesh("cpu", (2, 3)),
            dtorch.DeviceMesh("cpu", [1, 2]),
            dtorch.DeviceMesh("cpu", [4]),
        ]
        layouts = [[Shard(0), Shard(1)], [Replicate(), Partial()], [Partial(), Shard(0)]]

        def load() -> None:
            for mesh in meshes:
                for layout in layouts:
                    placements = layout[: mesh.ndim]
                    t = dtorch.from_torch(full, device_mesh=mesh, placements=placements)
                    assert torch.equal((t * 2).to_torch(), full * 2), (mesh, placements)
            graph.sync()
            inputs = graph.runner._inputs
            assert inputs.lent == 0 and inputs.moved >= len(meshes) * len(layouts)

        with graph.as_default():
            load()
            fds = len(os.listdir("/proc/self/fd"))
            for _ in range(3):  # the free segments kept are few, whatever was in flight
                load()
                assert len(os.listdir("/proc/self/fd")) <= fds + KEPT_SEGMENTS
            wide = dtorch.from_torch(full.to(torch.bfloat16), device_mesh=meshes[0])
            assert torch.equal(wide.to_torch(), full.to(torch.bfloat16))
    finally:
        graph.close()


def _tensor_mappings(pid: int) -> int:
    """How many of ``pid``'s mappings are anonymous tensor segments (``memfd`` named so)."""
    with open(f"/proc/{pid}/maps") as maps:
        return sum("dtorch-tensor" in line for line in maps)


def test_workers_keep_no_mapping_of_a_segment_the_controller_closed(
    worker_pools: PoolKeeper,
) -> None:
    """Six large values of one batch lend six segments at once; the controller keeps two and
    closes the others once the workers answered. A worker's mapping would hold a closed
    segment's memory: each keeps at most the mappings of the segments that may come back."""
    pool = worker_pools.pool()
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
    try:
        before = {pid: _tensor_mappings(pid) for pid in pool.pids}
        mesh = dtorch.DeviceMesh("cpu", list(range(pool.workers)))
        full = torch.arange(SHARED_MIN // 4, dtype=torch.float32)
        values = [dtorch.from_torch(full + i, device_mesh=mesh, graph=graph) for i in range(6)]
        for i, value in enumerate(values):
            assert torch.equal(value.to_torch(), full + i)
        del values
        graph.sync()
        for pid in pool.pids:
            assert _tensor_mappings(pid) <= before[pid] + KEPT_SEGMENTS, pid
    finally:
        graph.close()
