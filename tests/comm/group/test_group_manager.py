"""ThreadGroupManager: caching, backend choice by topology, large and concurrent groups, order."""

from __future__ import annotations

import time

import pytest
import torch

from dtorch.comm.group import (
    BackendKind,
    CommTopology,
    ThreadGroup,
    ThreadGroupManager,
    choose_backend,
)
from dtorch.comm.namespace import CommNamespace
from dtorch.errors import CommError, DTorchError
from dtorch.options import GlobalOption
from tests.thread_runner import on_threads

pytestmark = pytest.mark.timeout(60)


def test_groups_are_cached_per_device_list_and_caller() -> None:
    with ThreadGroupManager(CommTopology.threads([[0, 1, 2, 3]])) as manager:
        group = manager.get_group("cpu", [1, 3], [0, 1, 2, 3])
        assert manager.get_group("cpu", (1, 3), [3, 1]) is group
        assert group.ranks == (0, 1) and group.device_ids == (1, 3)
        reversed_group = manager.get_group("cpu", [3, 1], [1, 3])
        assert reversed_group is not group and reversed_group.rank_of(1) == 1


@pytest.mark.parametrize(
    ("kind", "ids", "local", "error"),
    [
        ("tpu", [0], [0], "device type 'tpu' is not supported; accepted: cpu, cuda"),
        ("cpu", [], [0], "expected a non-empty sequence of distinct ints"),
        ("cpu", [0, 0], [0], "expected a non-empty sequence of distinct ints"),
        ("cpu", [0, -1], [0], "expected a non-empty sequence of distinct ints"),
        ("cpu", [0, 1], [5], "the caller holds none of its devices"),
        ("cpu", [0, 9], [0], "devices [9] of group [0, 9] are held by no caller"),
        ("cpu", [0, 1, 2], [0], "the topology gives the caller of rank 0 the ranks [0, 1]"),
    ],
)
def test_bad_groups_are_rejected(kind, ids, local, error) -> None:
    with ThreadGroupManager(CommTopology.threads([[0, 1], [2]])) as manager:
        with pytest.raises(DTorchError) as info:
            manager.get_group(kind, ids, local)
        assert error in str(info.value)


def test_bad_topologies_are_rejected() -> None:
    with pytest.raises(CommError, match="device 1 is held by two callers"):
        CommTopology.threads([[0, 1], [1]])
    with pytest.raises(CommError, match="every caller holds a device"):
        CommTopology.threads([[0], []])
    with pytest.raises(CommError, match="need the program's CommNamespace"):
        ThreadGroupManager(CommTopology.one_device_per_process([0, 1]))


def test_backend_is_chosen_by_topology() -> None:
    threads = CommTopology.threads([[0, 1], [2]])
    assert choose_backend(threads, "cpu", ((0, 1), (2,))) is BackendKind.STORE_MEMORY
    procs = CommTopology.one_device_per_process([0, 1, 2])
    assert choose_backend(procs, "cpu", ((0,), (1,), (2,))) is BackendKind.TORCH_DISTRIBUTED
    assert choose_backend(procs, "cpu", ((0,),)) is BackendKind.STORE_MEMORY
    assert choose_backend(procs, "cuda", ((0,), (1,))) is BackendKind.TORCH_DISTRIBUTED
    several = CommTopology.processes_holding([[0, 1], [2]])
    assert choose_backend(several, "cpu", ((0, 1), (2,))) is BackendKind.STORE_FILE
    with GlobalOption.override(dtensor_in_same_device=True):
        assert choose_backend(procs, "cuda", ((0,), (1,))) is BackendKind.STORE_FILE


def test_close_destroys_groups_in_sorted_order_and_is_final(monkeypatch) -> None:
    closed: list[tuple] = []
    original = ThreadGroup.close

    def record(self: ThreadGroup) -> None:
        closed.append((self.device_kind, self.device_ids))
        original(self)

    monkeypatch.setattr(ThreadGroup, "close", record)
    manager = ThreadGroupManager(CommTopology.threads([[0, 1, 2, 3]]))
    for ids in ([3, 2], [0, 1, 2, 3], [1], [0, 1]):
        manager.get_group("cuda", ids, ids)
        manager.get_group("cpu", ids, ids)
    manager.close()
    assert closed == sorted(closed) and len(closed) == 8
    manager.close()
    with pytest.raises(CommError, match="ThreadGroupManager is closed"):
        manager.get_group("cpu", [0], [0])


def test_large_group_on_a_bounded_number_of_threads() -> None:
    world, threads = 432, 8
    layout = [list(range(t, world, threads)) for t in range(threads)]
    topology = CommTopology.threads(layout)
    with ThreadGroupManager(topology, namespace=CommNamespace.create()) as manager:

        def caller(held):
            group = manager.get_group("cpu", list(range(world)), held)
            gathered = group.all_gather({r: torch.tensor([r]) for r in held})
            summed = group.all_reduce({r: torch.tensor([r]) for r in held})
            return gathered[held[0]], summed[held[-1]]

        results = on_threads(layout, caller)
    for gathered, summed in results:
        assert gathered.tolist() == list(range(world))
        assert summed.item() == sum(range(world))


def test_groups_run_concurrently_on_rows_and_columns_of_a_mesh() -> None:
    """A 2x4 mesh, one thread per device: row groups, then column groups, many rounds."""
    mesh = torch.arange(8).view(2, 4)
    topology = CommTopology.threads([[d] for d in range(8)])
    with ThreadGroupManager(topology, namespace=CommNamespace.create()) as manager:

        def caller(held):
            (device,) = held
            row, col = divmod(device, 4)
            out = []
            for step in range(5):
                row_group = manager.get_group("cpu", mesh[row].tolist(), held)
                col_group = manager.get_group("cpu", mesh[:, col].tolist(), held)
                value = torch.tensor([float(device + step)])
                r = row_group.all_reduce({row_group.rank_of(device): value})
                c = col_group.all_reduce({col_group.rank_of(device): value})
                out.append((next(iter(r.values())).item(), next(iter(c.values())).item()))
            return out

        results = on_threads([[d] for d in range(8)], caller)
    for device, out in enumerate(results):
        row, col = divmod(device, 4)
        for step, (r, c) in enumerate(out):
            assert r == float(mesh[row].sum() + 4 * step)
            assert c == float(mesh[:, col].sum() + 2 * step)


def test_each_thread_may_own_its_manager() -> None:
    namespace = CommNamespace.create()
    topology = CommTopology.threads([[0], [1, 2]])

    def caller(held):
        with ThreadGroupManager(topology, namespace=namespace) as manager:
            group = manager.get_group("cpu", [0, 1, 2], held)
            group.barrier()
            return group.all_gather({r: torch.tensor([r]) for r in held})

    results = on_threads([[0], [1, 2]], caller)
    assert all(t.tolist() == [0, 1, 2] for out in results for t in out.values())


def test_a_reset_right_after_a_callers_last_exchange_waits_for_its_slow_reader(
    namespace: CommNamespace,
) -> None:
    """A file store's caller does not wait for its readers (``release_exchange``): a worker's
    reset, which comes once its own work is done, must not take away a key that a slower
    peer has yet to read (the peer would wait for it until the comm timeout)."""
    topology = CommTopology.threads([[0], [1]])
    value = torch.arange(6.0)
    with (
        GlobalOption.override(comm_timeout_second=10.0),
        ThreadGroupManager(topology, namespace=namespace, backend=BackendKind.STORE_FILE) as m,
    ):

        def caller(rank: int) -> list[float]:
            group = m.get_group("cpu", [0, 1], [rank])
            if rank == 0:
                group.broadcast({0: value}, src=0)
                group.reset()  # this caller's work is done; its reader's is not
                return []
            time.sleep(0.5)
            start = time.monotonic()
            out = group.broadcast({1: torch.zeros(6)}, src=0)[1].tolist()
            assert time.monotonic() - start < 2.0
            return out

        results = on_threads([0, 1], caller)
    assert results[1] == value.tolist()
