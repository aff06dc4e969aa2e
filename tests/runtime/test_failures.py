"""Failures never hang and never leak: streams survive anything, the client is held back when
the devices fall behind, the record of failures stays bounded, exit with pending work is
clean."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

import dtorch
from dtorch import Shard
from dtorch.errors import KernelError
from dtorch.ir.report import Failure
from dtorch.runtime.board import BOARD_ENTRIES, LocalFailureBoard
from dtorch.runtime.executor import MAX_BATCH, QUEUE_LIMIT
from dtorch.runtime.window import DEFAULT_LIMIT
from tests.runners import pause_devices


def test_a_failed_allocation_then_a_fetch_leaves_every_stream_alive(graph: dtorch.Graph) -> None:
    """The zeros that stand in for a failed input of a redistribution cannot be allocated
    either: the fetch fails with the original cause, within seconds, and the graph goes on."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    huge = dtorch.empty(1 << 40, device_mesh=mesh, placements=[Shard(0)], graph=graph)
    started = time.monotonic()
    with pytest.raises(KernelError, match=r"empty_\d+ \(Create\).*can't allocate memory"):
        huge.to_torch_async().get(timeout_s=30)
    assert time.monotonic() - started < 10
    fine = dtorch.ones(4, device_mesh=mesh, placements=[Shard(0)], graph=graph) + 1
    assert fine.to_torch_async().get(timeout_s=30).tolist() == [2.0] * 4
    graph.sync()  # the fetch raised the failure already: sync does not raise it again
    again = dtorch.empty(1 << 40, device_mesh=mesh, placements=[Shard(0)], graph=graph)
    with pytest.raises(KernelError, match="Create"):  # nobody fetched this one
        graph.sync()
    del again
    graph.sync()


@pytest.mark.parametrize("failed_shard", [0, 1])
def test_a_failed_shard_fails_the_redistribution_whichever_device_holds_it(
    failed_shard: int, graph: dtorch.Graph
) -> None:
    """Integer division by zero on one device only: gathering the result (a redistribution to
    Replicate, and the fetch) fails with the division's error, whichever device held the zero;
    the failed device's zeros never pass for its values (they once did for device 1)."""
    import torch

    full = torch.ones(4, 3, dtype=torch.int64)
    full[2 * failed_shard + 1, 1] = 0
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.from_torch(full, device_mesh=mesh, placements=[Shard(0)], graph=graph)
    quotient = 2 // t
    with pytest.raises(KernelError, match="ZeroDivisionError"):
        graph.sync()  # nothing fetched it yet
    with pytest.raises(KernelError, match="ZeroDivisionError"):
        quotient.to_torch()
    with pytest.raises(KernelError, match="ZeroDivisionError"):
        quotient.redistribute(mesh, [dtorch.Replicate()]).to_torch()
    graph.sync()


def test_sync_raises_only_failures_no_fetch_raised(graph: dtorch.Graph) -> None:
    """An operator fails on every device; the user catches it from ``to_torch()``: ``sync()``
    does not raise it again (the other devices' copies included), but raises an unrelated
    failure after it, which it once hid; ``await`` and ``wait`` count as raising."""
    import asyncio

    import torch

    mesh = dtorch.init_device_mesh("cpu", 3)
    weight = dtorch.from_torch(torch.randn(5, 4), device_mesh=mesh, graph=graph)
    ids = dtorch.from_torch(torch.tensor([1, 9]), device_mesh=mesh, graph=graph)
    zeros = dtorch.zeros(3, dtype=torch.int64, device_mesh=mesh, graph=graph)
    seen = dtorch.nn.functional.embedding(ids, weight)
    with pytest.raises(KernelError, match="Embedding"):
        seen.to_torch()
    graph.sync()
    seen = dtorch.nn.functional.embedding(ids, weight)
    unseen = 1 // zeros
    with pytest.raises(KernelError, match="Embedding"):
        seen.to_torch_async().wait()
    with pytest.raises(KernelError, match=r"floor_divide.*ZeroDivisionError"):
        graph.sync()
    graph.sync()
    with pytest.raises(KernelError, match="Embedding"):
        asyncio.run(_fetch(dtorch.nn.functional.embedding(ids, weight)))
    graph.sync()
    del unseen


async def _fetch(t: dtorch.Tensor) -> object:
    return await t.to_torch_async()


def test_the_failure_board_stays_bounded() -> None:
    board = LocalFailureBoard()
    for op_id in range(1, 3 * BOARD_ENTRIES):
        board.post(op_id % 3, op_id, Failure(op_id, f"op_{op_id}", 0, "RuntimeError", "x"))
    assert len(board) == BOARD_ENTRIES
    assert board.find(1) is None and board.find(3 * BOARD_ENTRIES - 1) is not None
    board.clear(0)
    assert all(board.find(i) is None for i in range(3, 3 * BOARD_ENTRIES, 3))


def test_a_client_far_ahead_of_its_devices_waits_with_bounded_queues(graph: dtorch.Graph) -> None:
    """While the devices run nothing, recording goes on until the queues are full, then
    waits; nothing grows past the bounds, and every value is right once they go on."""
    total = 2 * (QUEUE_LIMIT + DEFAULT_LIMIT)
    recorded = [0]
    x = dtorch.ones(1, graph=graph)

    def record() -> None:
        out = x
        for _ in range(total):
            out = out + 1
            recorded[0] += 1
        recorded.append(out.item())

    client = threading.Thread(target=record, daemon=True)
    with pause_devices(graph):
        client.start()
        held, deadline = -1, time.monotonic() + 60
        while recorded[0] != held and time.monotonic() < deadline:  # until it stops
            held = recorded[0]
            time.sleep(0.5)
        assert client.is_alive() and held < total  # held back, not finished
        assert len(graph.executor._queue) <= QUEUE_LIMIT + 1
        assert held <= QUEUE_LIMIT + DEFAULT_LIMIT + MAX_BATCH + 2  # queue + window + a batch
    client.join(120)
    assert not client.is_alive() and recorded[-1] == float(total + 1)


def test_exit_with_a_pending_fetch_is_clean() -> None:
    """The interpreter exits while a value is still on its way: no stream thread dies, nothing
    is printed, the exit status is 0."""
    script = textwrap.dedent(
        """
        import dtorch
        g = dtorch.Graph()
        x = dtorch.ones(256, 256, graph=g)
        for _ in range(60):
            x = (x @ x) * 0.001
        future = x.to_torch_async()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception" not in done.stderr, done.stderr
