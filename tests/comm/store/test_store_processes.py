"""Stores between real spawned processes: the file backend (shared memory), 64 MiB tensors,
odd dtypes, timeouts in children, and the SIGKILL cleanup: nothing of ours left in /dev/shm."""

from __future__ import annotations

import time

import pytest
import torch
from store_scenarios import (
    allreduce,
    broadcast_check,
    exchanges,
    expected_allreduce,
    expected_exchanges,
    gather_check,
    hold_open,
    open_for,
    wait_times_out,
    with_endpoint,
)

from dtorch.comm.namespace import CommNamespace
from dtorch.errors import PeerDiedError
from dtorch.ir.dtypes import dtype_code
from dtorch.options import GlobalOption
from tests.process_pool import Job, kill_process, start_process

pytestmark = pytest.mark.timeout(90)
PROCESS_KINDS = ["file", "network"]


@pytest.fixture(params=PROCESS_KINDS)
def kind(request) -> str:
    """The backends for processes; a network store gets a fresh loopback port."""
    return with_endpoint(request.param)


def run_ranks(pool, world, fn, *args):
    """Ranks 1.. in the pool's processes, rank 0 here; every rank's result in rank order."""
    run = pool.start([Job(fn, (*args[:3], world, rank, *args[3:])) for rank in range(1, world)])
    first = fn(*args[:3], world, 0, *args[3:])
    return [first, *run.results(timeout_s=60)]


def test_allreduce_across_processes(kind, namespace, process_pool):
    world, rounds = 3, 3
    results = run_ranks(process_pool, world, allreduce, kind, namespace.instance_id, "ar", rounds)
    expected = expected_allreduce(world, rounds)
    for per_rank in results:
        torch.testing.assert_close(torch.tensor(per_rank), torch.tensor(expected))


def test_exchanges_without_reset_across_processes(kind, namespace, process_pool):
    world, rounds = 3, 40
    results = run_ranks(process_pool, world, exchanges, kind, namespace.instance_id, "ex", rounds)
    expected = expected_exchanges(world, rounds)
    for rank, (*sums, left) in enumerate(results):
        torch.testing.assert_close(torch.tensor(sums), torch.tensor(expected))
        assert left == (None if kind.startswith("network") and rank else 0)  # rank 0 serves it


@pytest.mark.parametrize(
    ("dtype", "shape"),
    [
        (torch.float32, (16, 1 << 20)),  # 64 MiB
        (torch.bfloat16, (3, 0)),
        (torch.complex128, (5, 7)),
        (torch.bool, (1,)),
        (torch.int8, ()),
    ],
    ids=["f32-64MiB", "bf16-empty", "c128", "bool", "i8-scalar"],
)
def test_broadcast_to_processes(kind, dtype, shape, namespace, process_pool):
    args = (kind, namespace.instance_id, "bc", dtype_code(dtype), shape, 11)
    assert all(run_ranks(process_pool, 3, broadcast_check, *args))


def test_gather_from_processes(kind, namespace, process_pool):
    results = run_ranks(process_pool, 3, gather_check, kind, namespace.instance_id, "g")
    assert results[0] == [0.0, 1.0, 1.0, 2.0, 2.0, 2.0]


def test_timeout_in_a_child_process(kind, namespace, process_pool):
    """Ranks 0 and 1 run in children (rank 0 with the short timeout passed to it), rank 2 here."""
    args = (kind, namespace.instance_id, "tw", 3)
    run = process_pool.start([Job(wait_times_out, (*args, rank, 0.5)) for rank in (0, 1)])
    assert wait_times_out(*args, 2, 0.5) is None
    message, second = run.results(timeout_s=60)
    assert second is None
    assert "'k': 1 of 2 consumers finished (ranks [1])" in message


def test_namespaces_keep_processes_apart(namespace, process_pool):
    other = CommNamespace.create()
    run = process_pool.start(
        [Job(gather_check, ("file", ns.instance_id, "same", 2, 1)) for ns in (namespace, other)]
    )
    results = [gather_check("file", ns.instance_id, "same", 2, 0) for ns in (namespace, other)]
    assert results == [[0.0, 1.0, 1.0]] * 2
    assert run.results(timeout_s=60) == [None, None]
    assert other.leftovers() == []


def _wait_for(predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition never came"
        time.sleep(0.02)


@pytest.mark.timeout(120)
def test_sigkill_leaves_nothing_in_dev_shm(namespace):
    """One child is killed while it waits for the others to open the store; another after it
    set a 64 MiB tensor that this process reads. The survivors fail at once (the comm timeout
    is 60 s) with a PeerDiedError naming the dead rank, and nothing of the namespace is left in
    /dev/shm."""
    ns = namespace.instance_id
    opening = start_process(open_for, "file", ns, "opening", 2, 1)
    holding = start_process(hold_open, "file", ns, "holding", 2, 1, 64 << 20)
    _wait_for(lambda: len(namespace.leftovers()) == 2)  # both control segments exist
    kill_process(opening)
    long = GlobalOption.override(comm_timeout_second=60)
    start = time.monotonic()
    with long, pytest.raises(PeerDiedError, match=rf"rank 1 \(pid {opening.pid}\) died"):
        open_for("file", ns, "opening", 2, 0)
    assert time.monotonic() - start < 5.0
    with open_for("file", ns, "holding", 2, 0) as store:
        assert namespace.leftovers() == []  # the name went once both had opened it
        got = store.dest_get("big")
        kill_process(holding)
        assert bool((got == 1).all()) and got.numel() == 16 << 20  # the mapping outlives it
        store.dest_finish_get("big")
        long = GlobalOption.override(comm_timeout_second=60)
        start = time.monotonic()
        pattern = rf"rank 1 \(pid {holding.pid}\) died; still missing: ranks \[1\] never arrived"
        with long, pytest.raises(PeerDiedError, match=pattern):
            store.barrier()
        assert time.monotonic() - start < 5.0
    assert namespace.leftovers() == []
