"""A small pool of spawned worker processes that run one group caller each, for the tests.

The pool is started once per test module (torch's import costs seconds per process); each
``run`` hands every participating worker a ``CallerJob`` and collects its result or error.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from dataclasses import dataclass, field
from typing import Any

import torch

_STOP = "stop"


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


def _worker_main(tasks: Any, results: Any, index: int) -> None:
    torch.set_num_threads(1)  # 2 cores shared by several workers: no oversubscription
    while True:
        task = tasks.get()
        if task == _STOP:
            return
        run_id, job = task
        start = time.monotonic()
        try:
            outcome: tuple[bool, Any] = (True, run_caller_job(job))
        except BaseException as error:
            outcome = (False, error)
        results.put((run_id, index, *outcome, time.monotonic() - start))


@dataclass
class Outcome:
    """One job's end: ``ok`` with the result, or the exception; seconds the job ran."""

    ok: bool
    value: Any
    elapsed_s: float

    def result(self) -> Any:
        if not self.ok:
            raise self.value
        return self.value


class WorkerPool:
    """``size`` spawned processes; ``run(jobs)`` gives job i to worker i."""

    def __init__(self, size: int) -> None:
        context = mp.get_context("spawn")
        self._results = context.Queue()
        self._tasks = [context.Queue() for _ in range(size)]
        self._procs = [
            context.Process(target=_worker_main, args=(q, self._results, i), daemon=True)
            for i, q in enumerate(self._tasks)
        ]
        for proc in self._procs:
            proc.start()
        self._run_id = 0

    def run(self, jobs: list[CallerJob], timeout_s: float = 60.0) -> list[Outcome]:
        """Each job's outcome, in job order."""
        assert len(jobs) <= len(self._tasks), "more callers than pool workers"
        self._run_id += 1
        for task_queue, job in zip(self._tasks, jobs, strict=False):
            task_queue.put((self._run_id, job))
        outcomes: dict[int, Outcome] = {}
        deadline = time.monotonic() + timeout_s
        while len(outcomes) < len(jobs):
            try:
                run_id, index, ok, value, elapsed = self._results.get(
                    timeout=max(0.1, deadline - time.monotonic())
                )
            except queue.Empty:
                late = sorted(set(range(len(jobs))) - set(outcomes))
                raise AssertionError(f"workers {late} did not answer in {timeout_s} s") from None
            if run_id == self._run_id:  # a late answer to an earlier, failed run is dropped
                outcomes[index] = Outcome(ok, value, elapsed)
        return [outcomes[i] for i in range(len(jobs))]

    def close(self) -> None:
        for task_queue in self._tasks:
            task_queue.put(_STOP)
        for proc in self._procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for q in [*self._tasks, self._results]:
            q.close()
            q.join_thread()
