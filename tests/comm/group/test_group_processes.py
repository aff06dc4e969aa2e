"""Every collective against the torch oracle, with callers as real spawned processes.

Gloo (torch.distributed) for one rank per process, and the same-device backend over the file
store for processes holding several ranks. The session's shared pool of workers serves all
tests (``process_pool``, tests/comm/conftest.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from group_harness import layout_devices, merge
from group_reference import Case, all_reduce_case, check_outputs, standard_cases
from group_workers import CallerJob, caller_jobs

from dtorch.comm.group import BackendKind
from dtorch.comm.namespace import CommNamespace
from dtorch.errors import CommTimeoutError
from tests.process_pool import ProcessPool

pytestmark = pytest.mark.timeout(120)


def _jobs(layout: Sequence[Sequence[int]], cases: Sequence[Case], **options) -> list[CallerJob]:
    ids, callers = layout_devices(layout)
    namespace = CommNamespace.create().instance_id
    return [
        CallerJob(
            namespace,
            callers,
            ids,
            list(held),
            calls=[(c.collective, c.kwargs, {r: c.inputs[r] for r in held}) for c in cases],
            **options,
        )
        for held in layout
    ]


def _check_all(pool: ProcessPool, layout, cases, expected: BackendKind, **options) -> None:
    jobs = _jobs(layout, cases, **options)
    results = [o.result() for o in pool.run(caller_jobs(jobs))]
    assert CommNamespace(jobs[0].namespace).leftovers() == [], "shared memory left behind"
    assert {kind for kind, _ in results} == {expected.value}
    per_caller = [outputs for _, outputs in results]
    for index, case in enumerate(cases):
        check_outputs(case, merge(per_caller, index))


def _gone(directory: Path, within_s: float) -> bool:
    """True once ``directory`` is empty. torch's FileStore removes its file in the destructor
    of the last of its instances, which Gloo's teardown can run a moment after the ranks
    returned; a file that stays is a leak."""
    deadline = time.monotonic() + within_s
    while any(directory.iterdir()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("world", [2, 3, 4])
def test_gloo_every_collective_matches_torch(process_pool, world, tmp_path) -> None:
    layout = [[r] for r in range(world)]
    cases = standard_cases(world, seed=11)
    _check_all(
        process_pool, layout, cases, BackendKind.TORCH_DISTRIBUTED, rendezvous_dir=str(tmp_path)
    )
    # 10 s was exceeded under load on this 2-core VM (2 runs in ~60, not reproduced since; a
    # world-1 and a delayed-rank world-2 Gloo group leave no reference cycle and remove the
    # file at close): the last rank's teardown is slow, not absent. 30 s still catches a leak.
    assert _gone(tmp_path, within_s=30.0), "the FileStore rendezvous file was left behind"


def test_one_process_holding_every_rank_needs_no_backend(process_pool) -> None:
    cases = standard_cases(3, seed=2)
    _check_all(process_pool, [[0, 1, 2]], cases, BackendKind.STORE_MEMORY)


def test_gloo_rank_that_never_calls_is_named_within_the_timeout(process_pool, tmp_path) -> None:
    gen = torch.Generator().manual_seed(0)
    jobs = _jobs(
        [[0], [1]],
        [all_reduce_case(2, (4,), "sum", torch.float32, gen)],
        timeout_s=1.0,
        rendezvous_dir=str(tmp_path),
    )
    jobs[1].calls, jobs[1].linger_s = [], 2.5  # rank 1 joins the group, then never calls
    first, second = process_pool.run(caller_jobs(jobs))
    assert second.ok
    assert not first.ok and isinstance(first.value, CommTimeoutError), first.value
    assert "all_reduce" in str(first.value) and "never came: [1]" in str(first.value)
    assert first.elapsed_s < 1.0 + 3.0


def test_gloo_rank_that_never_creates_the_group_is_named(process_pool, tmp_path) -> None:
    jobs = _jobs([[0], [1]], [], timeout_s=1.0, rendezvous_dir=str(tmp_path))
    jobs[1].create = False
    first, second = process_pool.run(caller_jobs(jobs))
    assert second.ok
    assert not first.ok and isinstance(first.value, CommTimeoutError), first.value
    assert "ranks [1] never came" in str(first.value)
    assert first.elapsed_s < 1.0 + 3.0


_FILE_LAYOUTS = {
    "8-ranks-on-3-processes": [[0, 1, 2], [3, 4], [5, 6, 7]],
    "3-ranks-on-2-processes": [[0, 2], [1]],
    "4-ranks-one-per-process": [[0], [1], [2], [3]],
}


@pytest.mark.parametrize("name", list(_FILE_LAYOUTS))
def test_file_store_every_collective_matches_torch(process_pool, name) -> None:
    layout = _FILE_LAYOUTS[name]
    cases = standard_cases(sum(len(c) for c in layout), seed=7)
    _check_all(
        process_pool, layout, cases, BackendKind.STORE_FILE, backend=BackendKind.STORE_FILE.value
    )


def test_file_store_caller_that_never_calls_is_named(process_pool) -> None:
    gen = torch.Generator().manual_seed(0)
    jobs = _jobs(
        [[0, 1], [2]],
        [all_reduce_case(3, (4,), "sum", torch.float32, gen)],
        timeout_s=1.0,
        backend=BackendKind.STORE_FILE.value,
    )
    jobs[1].calls, jobs[1].linger_s = [], 2.5
    first, _ = process_pool.run(caller_jobs(jobs))
    assert not first.ok and isinstance(first.value, CommTimeoutError), first.value
    assert "ranks [2] (one caller) never came" in str(first.value)
    assert first.elapsed_s < 1.0 + 3.0
