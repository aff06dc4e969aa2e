"""A caller process killed (SIGKILL) while the others wait for it in an all-reduce: every
survivor fails within a second or so with a PeerDiedError naming the dead ranks and pid, far
below the 60 s comm timeout, and nothing is left in /dev/shm or the rendezvous directory.

The survivors keep their groups open for a while after the error, so a survivor that closes
its group cannot be what wakes another (Gloo hears of a closed connection, not of a death, on
the ranks that are not connected to the dead one in the collective).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from group_harness import layout_devices
from group_workers import CallerJob, failure_of, run_caller_job

from dtorch.comm.group import BackendKind
from dtorch.comm.namespace import CommNamespace
from tests.process_pool import Job, kill_process, start_process

pytestmark = pytest.mark.timeout(120)

#: Far below the jobs' comm timeout (60 s).
FAST_S = 5.0

#: How long survivors keep their group open after the error.
HOLD_S = FAST_S  # a survivor woken by another's close would be late by at least this


def _jobs(layout: list[list[int]], **options) -> list[CallerJob]:
    """One caller job per entry of ``layout``, each running one all-reduce (sum) of ones."""
    ids, callers = layout_devices(layout)
    namespace = CommNamespace.create().instance_id
    call = ("all_reduce", {"op": "sum"}, {})
    jobs = [
        CallerJob(namespace, callers, ids, list(held), timeout_s=60.0, **options) for held in layout
    ]
    for job in jobs:
        job.calls = [(call[0], call[1], {r: torch.ones(4) for r in job.held})]
    return jobs


def _kill_when_ready(victim_job: CallerJob, ready: Path) -> tuple[int, float]:
    """Start the victim; once its group exists (and the survivors are in the all-reduce), kill
    it. Its pid and the moment it was killed."""
    victim_job.calls, victim_job.linger_s, victim_job.ready_file = [], 600.0, str(ready)
    victim = start_process(run_caller_job, victim_job)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert time.monotonic() < deadline, "the victim never created its group"
        time.sleep(0.02)
    time.sleep(0.5)  # the survivors are waiting in the collective by now
    killed_at = time.monotonic()
    kill_process(victim)
    return victim.pid, killed_at


def _gone(directory: Path, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while any(directory.iterdir()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_file_store_collective_fails_when_a_caller_dies(process_pool, tmp_path) -> None:
    """Callers holding ranks [0, 1], [2] (killed) and [3, 4], over the same-device backend."""
    jobs = _jobs([[0, 1], [2], [3, 4]], backend=BackendKind.STORE_FILE.value)
    run = process_pool.start([Job(failure_of, (job, 0.0)) for job in (jobs[0], jobs[2])])
    pid, killed_at = _kill_when_ready(jobs[1], tmp_path / "ready")
    for kind, message, peers, at in run.results(timeout_s=60):
        assert kind == "PeerDiedError", message
        assert f"the caller of ranks [2] (pid {pid}) died" in message
        assert "all_reduce" in message and peers == ((2, pid),)
        assert at - killed_at < FAST_S
    assert CommNamespace(jobs[0].namespace).leftovers() == [], "shared memory left behind"


def test_gloo_collective_fails_when_a_rank_dies(process_pool, tmp_path) -> None:
    """Ranks 0-2 wait in an all-reduce with rank 3, which is killed. Gloo itself tells the
    ranks that exchange with rank 3 first ("connection closed"); rank 1 sees the death only
    by looking at its peers' processes."""
    rendezvous = tmp_path / "rdv"
    rendezvous.mkdir()
    jobs = _jobs([[0], [1], [2], [3]], rendezvous_dir=str(rendezvous))
    run = process_pool.start([Job(failure_of, (job, HOLD_S)) for job in jobs[:3]])
    pid, killed_at = _kill_when_ready(jobs[3], tmp_path / "ready")
    for kind, message, peers, at in run.results(timeout_s=60):
        assert kind == "PeerDiedError", message
        assert f"rank 3 (pid {pid}) died" in message and "all_reduce" in message
        assert peers == ((3, pid),)
        assert at - killed_at < FAST_S
    assert _gone(rendezvous, within_s=30.0), "the FileStore rendezvous file was left behind"
