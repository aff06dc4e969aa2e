"""What one spawned process does in the group tests: one group caller (``CallerJob``).

The shared pool (``tests/process_pool.py``) runs ``run_caller_job`` once per process;
``caller_jobs`` wraps a run's caller jobs as pool jobs. ``failure_of`` runs one until it fails
(the peer-death tests).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tests.process_pool import Job


@dataclass
class CallerJob:
    """What one process does: create its handle on a group and run collectives on it."""

    namespace: str
    callers: list[list[int]]  # device ids per process
    device_ids: list[int]  # the group, in rank order
    held: list[int]  # the ranks this process holds
    calls: list[tuple[str, dict[str, Any], dict[int, torch.Tensor]]] = field(default_factory=list)
    backend: str | None = None  # a BackendKind value to force, or None to choose by topology
    timeout_s: float = 20.0
    rendezvous_dir: str | None = None
    create: bool = True  # False: never create the group (a caller that never comes)
    linger_s: float = 0.0  # sleep after creating, before closing (a caller that never calls)
    ready_file: str | None = None  # created once the group is (a caller killed on purpose)


@contextlib.contextmanager
def _caller_group(job: CallerJob) -> Iterator[Any]:
    """This process's handle on the job's group, under the job's comm timeout."""
    from dtorch.comm.group import BackendKind, CommTopology, ThreadGroupManager
    from dtorch.comm.namespace import CommNamespace
    from dtorch.options import GlobalOption

    with GlobalOption.override(comm_timeout_second=job.timeout_s):
        manager = ThreadGroupManager(
            CommTopology.processes_holding(job.callers),
            namespace=CommNamespace(job.namespace),
            backend=BackendKind(job.backend) if job.backend else None,
            rendezvous_dir=job.rendezvous_dir,
        )
        with manager:
            local = [job.device_ids[r] for r in job.held]
            group = manager.get_group("cpu", job.device_ids, local)
            if job.ready_file is not None:
                Path(job.ready_file).touch()
            yield group


def run_caller_job(job: CallerJob) -> tuple[str, list[Any]]:
    """Run ``job`` in this process; returns the backend kind and each call's outputs."""
    from group_harness import COLLECTIVES

    if not job.create:
        return "", []
    with _caller_group(job) as group:
        outputs = [COLLECTIVES[name](group, inputs, **kw) for name, kw, inputs in job.calls]
        time.sleep(job.linger_s)
    return group.backend_kind.value, outputs


def failure_of(job: CallerJob, hold_s: float) -> tuple[str, str, tuple, float]:
    """Run ``job``'s calls until one fails: the error's class name, message and ``peers``, and
    the moment it came (CLOCK_MONOTONIC, the same clock in every process of the machine). The
    group stays open ``hold_s`` after the error, so that no peer closing its group can be what
    wakes the others."""
    from group_harness import COLLECTIVES

    from dtorch.errors import CommError

    with _caller_group(job) as group:
        try:
            for name, kw, inputs in job.calls:
                COLLECTIVES[name](group, inputs, **kw)
        except CommError as error:
            at = time.monotonic()
            time.sleep(hold_s)
            return type(error).__name__, str(error), getattr(error, "peers", ()), at
    return "no error", "", (), time.monotonic()


def caller_jobs(jobs: list[CallerJob]) -> list[Job]:
    """The pool jobs that run each caller job in its own worker."""
    return [Job(run_caller_job, (job,)) for job in jobs]
