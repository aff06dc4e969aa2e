"""What one spawned process does in the group tests: one group caller (``CallerJob``).

The shared pool (``tests/process_pool.py``) runs ``run_caller_job`` once per process;
``caller_jobs`` wraps a run's caller jobs as pool jobs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
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


def run_caller_job(job: CallerJob) -> tuple[str, list[Any]]:
    """Run ``job`` in this process; returns the backend kind and each call's outputs."""
    from group_harness import COLLECTIVES

    from dtorch.comm.group import BackendKind, CommTopology, ThreadGroupManager
    from dtorch.comm.namespace import CommNamespace
    from dtorch.options import GlobalOption

    if not job.create:
        return "", []
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
            outputs = [COLLECTIVES[name](group, inputs, **kw) for name, kw, inputs in job.calls]
            time.sleep(job.linger_s)
    return group.backend_kind.value, outputs


def caller_jobs(jobs: list[CallerJob]) -> list[Job]:
    """The pool jobs that run each caller job in its own worker."""
    return [Job(run_caller_job, (job,)) for job in jobs]
