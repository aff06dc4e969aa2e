"""A caller that fails in a collective never leaves the others waiting.

Whatever fails on one caller - its publish, a read, the computation after it received every
peer's tensor - is told to the others through the store: they raise PeerFailedError carrying
the failure at once (far below the comm timeout), nothing is left in the store, and the group's
next collective works. A peer that had everything it needed may finish first, with the right
outputs (checked against torch): a file store's caller does not wait for its readers once its
own outputs are complete (``release_exchange``), so it may return before the failing caller
tells anyone. In a runtime scope (``ThreadGroupManager.scope``) a caller that fails
*between* collectives tells the peers waiting for it in any group of the scope, after the
scope's failure hook ran (the runtime posts the failure there first). Threads over the memory
and the file store; processes over the file store; Gloo, which cannot be told, through its
rendezvous store, and rebuilt by ``reset``.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch
import torch.distributed as dist
from failure_workers import (
    INJECTED,
    POINTS,
    FailureJob,
    GlooScopeJob,
    call,
    expected_output,
    gather_after,
    inject,
    injected_error,
    leftovers,
    outputs,
    run_failure_job,
    run_gloo_scope_job,
)
from group_harness import device_ids, layout_devices

from dtorch.comm.group import BackendKind, CommTopology, ThreadGroupManager
from dtorch.comm.namespace import CommNamespace
from dtorch.comm.store import PeerFailedError
from dtorch.errors import CommError, CommTimeoutError
from dtorch.options import GlobalOption
from tests.process_pool import Job, ProcessPool
from tests.thread_runner import on_threads

pytestmark = pytest.mark.timeout(120)

#: The comm timeout of these tests: every wait must end far sooner.
TIMEOUT_S = 60.0
#: Far below it.
FAST_S = 5.0

COLLECTIVES = ("all_gather", "all_reduce", "broadcast_from_failing", "broadcast_to_failing")
LAYOUTS = {"one_rank_each": [[0], [1]], "two_ranks_and_one": [[0, 1], [2]]}


def _cases() -> list[tuple[str, str, str]]:
    """(layout, collective, point), without points the failing caller never reaches (a
    broadcast's destination publishes nothing, its source reads nothing)."""
    cases = []
    for layout in LAYOUTS:
        for collective in COLLECTIVES:
            for point in POINTS:
                if (collective, point) in {
                    ("broadcast_to_failing", "publish"),
                    ("broadcast_from_failing", "read"),
                }:
                    continue
                cases.append((layout, collective, point))
    return cases + [("three_callers", "all_reduce_split", p) for p in POINTS]


def _peer_may_finish(collective: str, point: str, backend: BackendKind) -> bool:
    """Whether a peer may finish, with the right outputs, before it hears of the failure:
    the failing caller had published everything the peer needs. A broadcast's source failing
    after it published (computing its own copy) on every store; on the file store, whose
    callers do not wait for their readers, any caller failing after its publish, in a
    collective of one round."""
    if (collective, point) == ("broadcast_from_failing", "compute"):
        return True
    return (
        backend is BackendKind.STORE_FILE
        and point in ("read", "compute")
        and collective != "all_reduce_split"
    )


@pytest.mark.parametrize(
    "backend", [BackendKind.STORE_MEMORY, BackendKind.STORE_FILE, BackendKind.STORE_NETWORK]
)
@pytest.mark.parametrize(("layout_name", "collective", "point"), _cases())
def test_a_caller_failing_in_a_collective_fails_the_others_at_once(
    namespace: CommNamespace, backend: BackendKind, layout_name: str, collective: str, point: str
) -> None:
    layout = {**LAYOUTS, "three_callers": [[0], [1], [2]]}[layout_name]
    world = sum(len(c) for c in layout)
    ids = device_ids(world)
    failing = layout[-1]  # holds the last rank
    topology = CommTopology.threads([[ids[r] for r in c] for c in layout])
    # the network store's rank 0 publishes its endpoint there (loopback: threads of one host)
    rendezvous = dist.HashStore() if backend is BackendKind.STORE_NETWORK else None
    with (
        GlobalOption.override(comm_timeout_second=TIMEOUT_S),
        ThreadGroupManager(
            topology, namespace=namespace, backend=backend, rendezvous_store=rendezvous
        ) as manager,
    ):

        def caller(held: list[int]):
            group = manager.get_group("cpu", ids, [ids[r] for r in held])
            undo = inject(group, point) if held is failing else lambda: None
            start = time.monotonic()
            result: dict[int, list[float]] = {}
            try:
                result = outputs(call(collective, group, held, world))
                error: Exception | None = None
            except Exception as raised:
                error = raised
            elapsed = time.monotonic() - start
            undo()
            return error, elapsed, gather_after(group, held), result

        results = on_threads(layout, caller)
        group = manager.get_group("cpu", ids, [ids[r] for r in layout[0]])
        assert group.backend_kind is backend and leftovers(group) == []
    for held, (error, elapsed, after, result) in zip(layout, results, strict=True):
        assert elapsed < FAST_S, (held, error)
        assert after == {r: [float(i) for i in range(world) for _ in range(2)] for r in held}
        if held is failing:
            assert isinstance(error, OSError) and INJECTED in str(error), error
        elif error is None and _peer_may_finish(collective, point, backend):
            assert result == dict.fromkeys(held, expected_output(collective, world))
        else:
            assert isinstance(error, PeerFailedError), error
            assert INJECTED in str(error) and "another caller failed" in str(error)


def test_a_caller_failing_between_collectives_of_a_scope_stops_every_peer(
    namespace: CommNamespace,
) -> None:
    """Callers 0 - 1 - 2, groups (0, 1), (1, 2) and all three: in scope 5 caller 1 fails after
    the first collective; callers 0 and 2, waiting for it in different groups, both stop at
    once, after its failure hook ran; scope 6 then runs normally on every group."""
    ids = device_ids(3)
    layout = [[0], [1], [2]]
    hooked: list[str] = []
    seen_after_hook: list[bool] = []
    topology = CommTopology.threads([[ids[r] for r in c] for c in layout])

    def hook(error: BaseException) -> str:
        hooked.append(str(error))
        return f"caller 1 failed: {error}"

    with (
        GlobalOption.override(comm_timeout_second=TIMEOUT_S),
        ThreadGroupManager(topology, namespace=namespace) as manager,
    ):

        def caller(held: list[int]):
            (rank,) = held
            everyone = manager.get_group("cpu", ids, [ids[rank]])
            pairs = {
                p: manager.get_group("cpu", [ids[r] for r in p], [ids[rank]])
                for p in [(0, 1), (1, 2)]
                if rank in p
            }  # opened first, as the Convert kernel does
            mine = {r: torch.full((2,), float(r)) for r in held}
            start = time.monotonic()
            try:
                with manager.scope(5, hook if rank == 1 else None):
                    everyone.all_gather(mine)
                    if rank == 1:
                        injected_error()
                    pair = pairs[(0, 1) if rank == 0 else (1, 2)]
                    pair.all_gather({pair.rank_of(ids[rank]): mine[rank]})
                error: Exception | None = None
            except Exception as raised:
                error = raised
                seen_after_hook.append(bool(hooked))
            elapsed = time.monotonic() - start
            with manager.scope(6):
                outputs = [everyone.all_reduce(mine)[rank].tolist()]
                for pair in pairs.values():
                    outputs.append(pair.all_gather({pair.rank_of(ids[rank]): mine[rank]}))
            return error, elapsed, outputs

        results = on_threads(layout, caller)
        assert all(leftovers(manager.get_group("cpu", ids, [i])) == [] for i in ids)
    for rank, (error, elapsed, got) in enumerate(results):
        assert elapsed < FAST_S, (rank, error)
        assert got[0] == [3.0, 3.0]
        if rank == 1:
            assert isinstance(error, OSError) and INJECTED in str(error)
        else:
            assert isinstance(error, PeerFailedError), error
            assert f"caller 1 failed: [Errno 12] {INJECTED}" in str(error)
    assert len(hooked) == 1 and seen_after_hook == [True, True, True]


def test_reset_repairs_a_group_a_timed_out_barrier_broke(namespace: CommNamespace) -> None:
    """A barrier one caller never enters breaks the group (its rounds no longer line up);
    once every caller is idle, ``reset`` makes it usable again."""
    layout = [[0], [1]]
    release = threading.Event()
    with (
        GlobalOption.override(comm_timeout_second=0.5),
        ThreadGroupManager(CommTopology.threads(layout), namespace=namespace) as manager,
    ):

        def caller(held: list[int]):
            group = manager.get_group("cpu", [0, 1], held)
            if held == [1]:
                release.wait(10)
                return None
            try:
                group.barrier()
            except CommTimeoutError:
                pass
            finally:
                release.set()
            with pytest.raises(CommError, match="unusable after an earlier failure"):
                group.all_reduce({0: torch.ones(1)})
            return None

        on_threads(layout, caller)
        manager.reset()
        sums = on_threads(
            layout,
            lambda held: manager.get_group("cpu", [0, 1], held).all_reduce(
                {held[0]: torch.ones(1)}
            ),
        )
    assert [s[r].item() for s, r in zip(sums, (0, 1), strict=True)] == [2.0, 2.0]


def _failure_jobs(layout: list[list[int]], collective: str, point: str) -> list[FailureJob]:
    ids, callers = layout_devices(layout)
    namespace = CommNamespace.create().instance_id
    return [
        FailureJob(
            namespace,
            callers,
            ids,
            list(held),
            collective,
            point if index == len(layout) - 1 else None,
            TIMEOUT_S,
        )
        for index, held in enumerate(layout)
    ]


@pytest.mark.parametrize(
    ("collective", "point"),
    [("all_gather", "publish"), ("all_gather", "compute"), ("broadcast_to_failing", "read")],
)
def test_a_caller_process_failing_in_a_collective_fails_the_others_at_once(
    process_pool: ProcessPool, collective: str, point: str
) -> None:
    """The same across processes, over the file store (one caller holds two ranks)."""
    layout = [[0, 1], [2]]
    jobs = _failure_jobs(layout, collective, point)
    results = [o.result() for o in process_pool.run([Job(run_failure_job, (j,)) for j in jobs])]
    assert CommNamespace(jobs[0].namespace).leftovers() == [], "shared memory left behind"
    for job, (kind, message, elapsed, after, left) in zip(jobs, results, strict=True):
        assert elapsed < FAST_S, message
        if kind == "ok" and _peer_may_finish(collective, point, BackendKind.STORE_FILE):
            assert message == str(dict.fromkeys(job.held, expected_output(collective, 3)))
        else:
            assert INJECTED in message
            assert kind == ("OSError" if job.point else "PeerFailedError"), message
        assert after == {r: [0.0, 0.0, 1.0, 1.0, 2.0, 2.0] for r in job.held}
        assert left == []


def test_a_gloo_rank_is_told_of_a_failure_in_its_scope_and_reset_rebuilds_the_group(
    process_pool: ProcessPool, tmp_path
) -> None:
    """Gloo cannot be told: the waiting rank hears of its peer's failure through the
    rendezvous store (within a second), the group then refuses collectives on both ranks
    (a process group holding an abandoned collective is not sound) until ``reset``, which
    rebuilds it on both."""
    ids = device_ids(2)
    namespace = CommNamespace.create().instance_id
    jobs = [GlooScopeJob(namespace, ids, rank, str(tmp_path), rank == 1) for rank in (0, 1)]
    waiting, failing = (
        o.result()
        for o in process_pool.run([Job(run_gloo_scope_job, (j,)) for j in jobs], timeout_s=90)
    )
    assert waiting["first"][0] == "PeerFailedError" and INJECTED in waiting["first"][1]
    assert waiting["elapsed"] < FAST_S
    assert failing["first"] == ("OSError", f"[Errno 12] {INJECTED}")
    for found in (waiting, failing):
        kind, message = found["refused"]
        assert kind == "CommError" and "unusable after an earlier failure" in message
        assert found["after"] == [2.0, 2.0]


def test_a_caller_failing_late_in_a_split_all_reduce_stops_peers_already_in_its_second_round(
    namespace: CommNamespace,
) -> None:
    """A file store's callers do not wait for their readers, so peers may finish the
    reduce-scatter round and wait in the all-gather round before the failing caller fails
    in the first: both rounds share one scope, whose abort reaches them there."""
    layout = [[0], [1], [2]]
    ids = device_ids(3)
    topology = CommTopology.threads([[ids[r] for r in c] for c in layout])
    with (
        GlobalOption.override(comm_timeout_second=TIMEOUT_S),
        ThreadGroupManager(
            topology, namespace=namespace, backend=BackendKind.STORE_FILE
        ) as manager,
    ):

        def caller(held: list[int]):
            group = manager.get_group("cpu", ids, [ids[r] for r in held])
            if held == [2]:  # fails computing its chunk, once the others have gone on
                group._backend._empty = lambda *a, **k: (time.sleep(0.5), injected_error())
            start = time.monotonic()
            try:
                call("all_reduce_split", group, held, 3)
                error: Exception | None = None
            except Exception as raised:
                error = raised
            return error, time.monotonic() - start

        results = on_threads(layout, caller)
    for held, (error, elapsed) in zip(layout, results, strict=True):
        assert elapsed < FAST_S, (held, error)
        if held == [2]:
            assert isinstance(error, OSError) and INJECTED in str(error), error
        else:
            assert isinstance(error, PeerFailedError) and INJECTED in str(error), error
