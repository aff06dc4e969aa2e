"""Collective groups whose callers sit on different hosts, simulated on loopback addresses.

Four spawned processes pose as two callers on host 127.0.0.2 and two on 127.0.0.3; they meet
through a ``TCPStore`` the test serves on 127.0.0.1 (listening on a socket bound there: the
store's own server would listen on every interface). Every collective matches torch on the full
tensors; each group gets the backend its hosts call for (Gloo for one rank per caller, the
network store for several, today's choice for a group on one host); every listener a caller
opens is on its own host's address, and on 127.0.0.1 when it names none. Then the deaths: a
rank killed on another host fails the survivors fast, and a rank killed beside its peers fails
them with a PeerDiedError and leaves no rendezvous file (which was 0600 while it lived).
"""

from __future__ import annotations

import os
import socket
import stat
import time
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from group_harness import device_ids, layout_devices
from group_reference import all_reduce_case, check_outputs, standard_cases
from group_workers import CallerJob, failure_of, run_caller_job
from host_workers import Calls, HostJob, failure_of_host_job, run_host_job

from dtorch.comm.group import BackendKind, CommTopology, choose_backend
from dtorch.comm.group.rendezvous import GroupRendezvous, open_network_store
from dtorch.comm.namespace import CommNamespace
from dtorch.errors import CommError
from tests.process_pool import Job, ProcessPool, kill_process, start_process

pytestmark = pytest.mark.timeout(120)

#: The simulated hosts.
HOSTS = ("127.0.0.2", "127.0.0.3")

#: Far below the comm timeout of the death tests (60 s).
FAST_S = 5.0

#: How long survivors keep their group open after the error (so that no survivor closing its
#: group is what wakes another).
HOLD_S = FAST_S  # a survivor woken by another's close would be late by at least this


@pytest.fixture
def store_port() -> Iterator[int]:
    """A TCPStore served by the test process on 127.0.0.1 only; its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    # the store owns the socket from here on (it closes the fd when it is destroyed)
    store = dist.TCPStore(
        "127.0.0.1",
        port,
        is_master=True,
        master_listen_fd=listener.detach(),
        wait_for_workers=False,
        timeout=timedelta(seconds=30),
    )
    yield port
    del store


def _layout_jobs(
    layout: Sequence[Sequence[int]], hosts: Sequence[int], store_port: int | None, **options
) -> tuple[list[HostJob], list[int]]:
    """One job per caller of ``layout`` (ranks per caller), caller i on host ``hosts[i]``."""
    ids, callers = layout_devices(layout)
    namespace = CommNamespace.create()
    jobs = [
        HostJob(namespace, callers, list(hosts), i, HOSTS[h], store_port, **options)
        for i, h in enumerate(hosts)
    ]
    return jobs, ids


def _add_group(jobs: list[HostJob], group_ids: list[int], cases) -> None:
    """Every job creates the group of ``group_ids`` (in rank order) and runs ``cases`` on it."""
    for job in jobs:
        held = [r for r, d in enumerate(group_ids) if d in job.callers[job.caller]]
        calls: Calls = [(c.collective, c.kwargs, {r: c.inputs[r] for r in held}) for c in cases]
        job.groups.append((group_ids, calls))


def _check(results: list, group: int, cases, expected: BackendKind, callers: Sequence[int]):
    """Group ``group``'s outputs (from the jobs of ``callers``) against torch; its listeners."""
    merged: list[dict] = [{} for _ in cases]
    for caller in callers:
        kind, outputs, _ = results[caller][group]
        assert kind == expected.value, f"caller {caller}: {kind}"
        for index, output in enumerate(outputs):
            merged[index].update(output)
    for case, outputs in zip(cases, merged, strict=True):
        check_outputs(case, outputs)


def _listeners(results: list, jobs: list[HostJob], group: int) -> list[set[str]]:
    return [{address for address, _ in results[i][group][2]} for i in range(len(jobs))]


_LAYOUTS = {
    "one-rank-per-caller": ([[0], [1], [2], [3]], BackendKind.TORCH_DISTRIBUTED),
    "two-ranks-per-caller": ([[0, 1], [2, 3], [4, 5], [6, 7]], BackendKind.STORE_NETWORK),
    "one-or-two-ranks": ([[0, 1], [2], [3, 4], [5]], BackendKind.STORE_NETWORK),
}


@pytest.mark.parametrize("name", list(_LAYOUTS))
def test_every_collective_across_two_hosts_matches_torch(
    process_pool: ProcessPool, store_port: int, name: str
) -> None:
    layout, expected = _LAYOUTS[name]
    jobs, ids = _layout_jobs(layout, [0, 0, 1, 1], store_port)
    world = len(ids)
    cases = standard_cases(world, seed=5)
    _add_group(jobs, ids, cases)
    results = [o.result() for o in process_pool.run([Job(run_host_job, (j,)) for j in jobs])]
    _check(results, 0, cases, expected, range(4))
    # Gloo: every rank listens on its host; the network store: its rank 0's caller serves it
    host_of = [{HOSTS[h]} for h in jobs[0].hosts]
    if expected is BackendKind.STORE_NETWORK:
        assert _listeners(results, jobs, 0) == [host_of[0], set(), set(), set()]
    else:
        assert _listeners(results, jobs, 0) == host_of
    assert CommNamespace(jobs[0].namespace.instance_id).leftovers() == []


def test_a_group_on_one_host_keeps_the_one_machine_backend(
    process_pool: ProcessPool, store_port: int
) -> None:
    """Callers 0 and 1 (host 127.0.0.2) share a group of several ranks per caller: the file
    store of their machine, though a rendezvous store is given; 2 and 3 one of one rank each:
    Gloo, bound to 127.0.0.3."""
    jobs, ids = _layout_jobs([[0, 1], [2, 3], [4], [5]], [0, 0, 1, 1], store_port)
    first, second = ids[:4], ids[4:]
    cases_first, cases_second = standard_cases(4, seed=1)[:6], standard_cases(2, seed=2)[:6]
    _add_group(jobs, first, cases_first)
    _add_group(jobs, second, cases_second)
    results = [o.result() for o in process_pool.run([Job(run_host_job, (j,)) for j in jobs])]
    _check(results, 0, cases_first, BackendKind.STORE_FILE, [0, 1])
    _check([r[-1:] for r in results], 0, cases_second, BackendKind.TORCH_DISTRIBUTED, [2, 3])
    assert [{a for a, _ in results[i][0][2]} for i in (2, 3)] == [{HOSTS[1]}] * 2
    assert CommNamespace(jobs[0].namespace.instance_id).leftovers() == []


def test_file_rendezvous_listeners_bind_loopback(process_pool: ProcessPool, tmp_path) -> None:
    """No rendezvous store, no host address: Gloo listens on 127.0.0.1 only."""
    jobs, ids = _layout_jobs([[0], [1], [2]], [0, 0, 0], None, rendezvous_dir=str(tmp_path))
    for job in jobs:
        job.host_address = None
    cases = standard_cases(3, seed=3)[:4]
    _add_group(jobs, ids, cases)
    results = [o.result() for o in process_pool.run([Job(run_host_job, (j,)) for j in jobs])]
    _check(results, 0, cases, BackendKind.TORCH_DISTRIBUTED, range(3))
    assert _listeners(results, jobs, 0) == [{"127.0.0.1"}] * 3


def _start_victim(job: HostJob | CallerJob, run, ready: Path) -> tuple[int, float]:
    """Start the victim (it creates its group, then never calls); once the survivors wait for
    it in the collective, kill it. Its pid and the moment it was killed."""
    victim = start_process(run, job)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert time.monotonic() < deadline, "the victim never created its group"
        time.sleep(0.02)
    time.sleep(0.5)  # the survivors are waiting in the collective by now
    killed_at = time.monotonic()
    kill_process(victim)
    assert victim.pid is not None
    return victim.pid, killed_at


def test_a_rank_killed_on_another_host_fails_the_survivors_fast(
    process_pool: ProcessPool, store_port: int, tmp_path
) -> None:
    """Ranks 0-2 on 127.0.0.2 wait in an all-reduce with rank 3 on 127.0.0.3, killed: its pid
    means nothing to them. The ranks that exchange with it hear from Gloo (the connection
    closed); the other one (rank 1, measured) from the failure they published, far below the
    comm timeout."""
    jobs, ids = _layout_jobs([[0], [1], [2], [3]], [0, 0, 0, 1], store_port, timeout_s=60.0)
    case = all_reduce_case(4, (4,), "sum", torch.float32, torch.Generator().manual_seed(0))
    _add_group(jobs, ids, [case])
    victim = jobs[3]
    victim.groups = [(ids, [])]
    victim.ready_file, victim.linger_s = str(tmp_path / "ready"), 600.0
    run = process_pool.start([Job(failure_of_host_job, (job, HOLD_S)) for job in jobs[:3]])
    _, killed_at = _start_victim(victim, run_host_job, tmp_path / "ready")
    results = run.results(timeout_s=60)
    for kind, message, at, closed_at in results:
        assert kind == "CommError", message
        assert "all_reduce" in message and at - killed_at < FAST_S, message
        # nothing of the failed collective holds the group open past the close
        assert closed_at - at < HOLD_S + FAST_S
    told = [message for _, message, _, _ in results if "failed on another rank" in message]
    assert told and all("Connection closed by peer" in m for m in told), results


def test_a_killed_rank_leaves_no_rendezvous_file(process_pool: ProcessPool, tmp_path) -> None:
    """World 3 on one machine: rank 1 is killed mid all-reduce; the survivors fail with a
    PeerDiedError naming it, and the rendezvous file, 0600 while the group lived, is gone."""
    rendezvous = tmp_path / "rdv"
    rendezvous.mkdir()
    ids = device_ids(3)
    namespace = CommNamespace.create().instance_id
    callers = [[d] for d in ids]
    jobs = [
        CallerJob(namespace, callers, ids, [r], timeout_s=60.0, rendezvous_dir=str(rendezvous))
        for r in range(3)
    ]
    for job in jobs:
        job.calls = [("all_reduce", {"op": "sum"}, {job.held[0]: torch.ones(4)})]
    victim = jobs[1]
    victim.calls, victim.linger_s, victim.ready_file = [], 600.0, str(tmp_path / "ready")
    run = process_pool.start([Job(failure_of, (job, 0.0)) for job in (jobs[0], jobs[2])])
    victim_process = start_process(run_caller_job, victim)
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline, "the victim never created its group"
        time.sleep(0.02)
    # the file and each rank's link to it: one file, 0600
    (mode,) = {(os.stat(path).st_ino, stat.S_IMODE(os.stat(path).st_mode)) for path in
               rendezvous.iterdir()}  # fmt: skip
    assert mode[1] == 0o600
    time.sleep(0.5)  # the survivors wait in the all-reduce by now
    kill_process(victim_process)
    for kind, message, peers, _ in run.results(timeout_s=60):
        assert kind == "PeerDiedError", message
        assert peers == ((1, victim_process.pid),)
    deadline = time.monotonic() + 30
    while any(rendezvous.iterdir()):
        assert time.monotonic() < deadline, "the rendezvous file was left behind"
        time.sleep(0.05)


# --- the topology and the rendezvous as data --------------------------------------------------


def test_backend_choice_across_hosts() -> None:
    one_each = CommTopology.one_device_per_process([0, 1, 2], hosts=[0, 1, 1])
    ids = (0, 1, 2)
    hosts = one_each.group_hosts(ids)
    assert hosts == (0, 1, 1)
    assert choose_backend(one_each, "cpu", one_each.group_callers(ids), hosts) is (
        BackendKind.TORCH_DISTRIBUTED
    )
    assert choose_backend(one_each, "cuda", ((0,), (1,), (2,)), hosts) is (
        BackendKind.TORCH_DISTRIBUTED
    )
    several = CommTopology.striped(2, processes=True, hosts=[0, 1])
    callers = several.group_callers((0, 1, 2, 3))
    assert callers == ((0, 2), (1, 3)) and several.group_hosts((0, 1, 2, 3)) == (0, 1)
    assert choose_backend(several, "cpu", callers, (0, 1)) is BackendKind.STORE_NETWORK
    # callers of one host keep the one-machine choice
    assert choose_backend(several, "cpu", callers, (1, 1)) is BackendKind.STORE_FILE
    assert CommTopology.processes_holding([[0], [1]]).group_hosts((1, 0)) == (0, 0)


@pytest.mark.parametrize("hosts", [(0, 1, 1), (1, 1, 1)], ids=["across-hosts", "one-host"])
def test_without_gloo_cpu_groups_take_the_stores(hosts: tuple[int, ...]) -> None:
    """``cpu_gloo=False`` (a cluster's default): CPU groups never run on Gloo's
    unauthenticated listeners; CUDA groups keep NCCL, threads their memory store."""
    store = BackendKind.STORE_NETWORK if len(set(hosts)) > 1 else BackendKind.STORE_FILE
    for topology in (
        CommTopology.one_device_per_process([0, 1, 2], hosts=hosts, cpu_gloo=False),
        CommTopology.processes_holding([[0, 3], [1], [2]], hosts=hosts, cpu_gloo=False),
        CommTopology.striped(3, processes=True, hosts=hosts, cpu_gloo=False),
    ):
        ids = (0, 1, 2)
        callers, group_hosts = topology.group_callers(ids), topology.group_hosts(ids)
        assert choose_backend(topology, "cpu", callers, group_hosts) is store
        assert choose_backend(topology, "cuda", callers, group_hosts) is (
            BackendKind.TORCH_DISTRIBUTED
        )
        assert choose_backend(topology, "cpu", ((0, 1, 2),), (1,)) is BackendKind.STORE_MEMORY
    assert CommTopology.threads([[0], [1]]).cpu_gloo  # the comm layer's own default


def test_bad_hosts_are_rejected() -> None:
    with pytest.raises(CommError, match="one int >= 0 per caller"):
        CommTopology.processes_holding([[0], [1]], hosts=[0])
    with pytest.raises(CommError, match="one int >= 0 per caller"):
        CommTopology.striped(2, processes=True, hosts=[0, -1])
    with pytest.raises(CommError, match="threads of one process sit on one host"):
        CommTopology(((0,), (1,)), processes=False, hosts=(0, 1))


@pytest.mark.parametrize("layout", [[[0, 1], [2]], [[0], [1]]])
def test_a_group_spanning_hosts_needs_a_rendezvous_store(namespace, layout) -> None:
    from dtorch.comm.group import ThreadGroupManager

    topology = CommTopology.processes_holding(layout, hosts=[0, 1])
    ids = [d for caller in layout for d in caller]
    manager = ThreadGroupManager(topology, namespace=namespace)
    with manager, pytest.raises(CommError, match=r"spans hosts \[0, 1\]: .* rendezvous store"):
        manager.get_group("cpu", ids, layout[0])
    with pytest.raises(CommError, match="needs a rendezvous store shared by the hosts"):
        rendezvous = GroupRendezvous.in_directory("g", "/nonexistent")
        open_network_store(rendezvous, "g", namespace, 2, 1, timedelta(seconds=1))


def test_a_rendezvous_is_opened_once_per_participant() -> None:
    shared = dist.HashStore()
    before = shared.timeout
    rendezvous = GroupRendezvous.in_store("g", shared, "127.0.0.2")
    timeout = timedelta(seconds=1)
    rendezvous.open(2, 0, timeout).set("k", "v")
    assert shared.get("g/k") == b"v"  # the group's keys live under its prefix
    assert shared.timeout == before  # the caller's store keeps its own timeout
    with pytest.raises(CommError, match="participant 0 opened it before"):
        rendezvous.open(2, 0, timeout)
    with pytest.raises(CommError, match="exactly one"):
        GroupRendezvous("g")


def test_a_caller_killed_on_another_host_times_the_network_store_out(
    process_pool: ProcessPool, store_port: int, tmp_path
) -> None:
    """The network store has no pids to look at: the callers left waiting for a killed
    caller's tensors fail at the comm timeout (8 s here: the victim, a fresh process, must
    open the store within it), naming the ranks that never came. The first to time out
    aborts the scope, so a caller still waiting then fails with its PeerFailedError, which
    carries the same text."""
    jobs, ids = _layout_jobs([[0, 1], [2], [3, 4]], [0, 1, 1], store_port, timeout_s=8.0)
    case = all_reduce_case(5, (4,), "sum", torch.float32, torch.Generator().manual_seed(0))
    _add_group(jobs, ids, [case])
    victim = jobs[1]
    victim.groups = [(ids, [])]
    victim.ready_file, victim.linger_s = str(tmp_path / "ready"), 600.0
    run = process_pool.start([Job(failure_of_host_job, (job, 0.0)) for job in (jobs[0], jobs[2])])
    _, killed_at = _start_victim(victim, run_host_job, tmp_path / "ready")
    results = run.results(timeout_s=60)
    assert "CommTimeoutError" in [kind for kind, *_ in results], results
    for kind, message, at, _ in results:
        assert kind in ("CommTimeoutError", "PeerFailedError"), message
        assert "ranks [2] (one caller) never came" in message
        assert at - killed_at < 8.0 + FAST_S, message
