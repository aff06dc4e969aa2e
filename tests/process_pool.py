"""Spawned worker processes for the tests that need real processes, shared across tests.

torch's import costs 2-3 s per process, so one pool serves many tests. A job is data: a
module-level function and its arguments, pickled by reference (the ``spawn`` start method).
Job i of a run goes to worker i, so jobs that wait for each other (the ranks of one group) all
run at once. Every wait has a timeout; ``close`` (or leaving the ``with`` block) stops the
workers. ``start_process`` / ``kill_process`` are for the tests that kill a process on purpose.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

_STOP = "stop"


@dataclass(frozen=True, slots=True)
class Job:
    """``fn(*args)`` in a worker; ``fn`` must be a module-level function."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """One job's end: ``ok`` with the result, or the exception; seconds the job ran."""

    ok: bool
    value: Any
    elapsed_s: float

    def result(self) -> Any:
        """The job's result; re-raises the job's exception."""
        if not self.ok:
            raise self.value
        return self.value


class WorkerFailure(Exception):
    """A job's exception that could not cross back to the test process (its repr instead)."""


def _sendable(error: BaseException) -> BaseException:
    # An exception that does not survive pickling would be lost in the queue's feeder thread.
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return WorkerFailure(repr(error))
    return error


def _run_job(job: Job) -> tuple[bool, Any]:
    try:
        return True, job.fn(*job.args)
    except BaseException as error:
        return False, _sendable(error)


def _worker_main(tasks: Any, results: Any, index: int) -> None:
    torch.set_num_threads(1)  # 2 cores shared by several workers: no oversubscription
    while (task := tasks.get()) != _STOP:
        run_id, job = task
        start = time.monotonic()
        ok, value = _run_job(job)
        results.put((run_id, index, ok, value, time.monotonic() - start))


class Run:
    """The jobs of one ``ProcessPool.start``; collect them with ``outcomes`` or ``results``."""

    def __init__(self, pool: ProcessPool, run_id: int, count: int) -> None:
        self._pool, self._run_id, self._count = pool, run_id, count

    def outcomes(self, timeout_s: float = 60.0) -> list[Outcome]:
        """Each job's outcome, in job order; AssertionError if a worker does not answer."""
        return self._pool._collect(self._run_id, self._count, timeout_s)

    def results(self, timeout_s: float = 60.0) -> list[Any]:
        """Each job's result, in job order; re-raises the first failed job's exception."""
        return [outcome.result() for outcome in self.outcomes(timeout_s)]


class ProcessPool:
    """``size`` spawned worker processes; ``run(jobs)`` gives job i to worker i."""

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

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def size(self) -> int:
        """How many workers the pool has."""
        return len(self._tasks)

    def start(self, jobs: Sequence[Job]) -> Run:
        """Hand job i to worker i and return at once; an earlier run's answers are dropped."""
        assert len(jobs) <= self.size, f"{len(jobs)} jobs for {self.size} pool workers"
        self._run_id += 1
        for task_queue, job in zip(self._tasks, jobs, strict=False):
            task_queue.put((self._run_id, job))
        return Run(self, self._run_id, len(jobs))

    def run(self, jobs: Sequence[Job], timeout_s: float = 60.0) -> list[Outcome]:
        """Run ``jobs`` (job i on worker i) and return each outcome, in job order."""
        return self.start(jobs).outcomes(timeout_s)

    def warm(self, timeout_s: float = 60.0) -> None:
        """Wait until every worker has started and imported torch (so tests do not pay it)."""
        pids = self.run([Job(os.getpid)] * self.size, timeout_s)
        assert len({outcome.result() for outcome in pids}) == self.size

    def _collect(self, run_id: int, count: int, timeout_s: float) -> list[Outcome]:
        assert run_id == self._run_id, "a later run was started before this one was collected"
        outcomes: dict[int, Outcome] = {}
        deadline = time.monotonic() + timeout_s
        while len(outcomes) < count:
            try:
                answer = self._results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                late = sorted(set(range(count)) - set(outcomes))
                raise AssertionError(f"workers {late} did not answer in {timeout_s} s") from None
            if answer[0] == run_id:  # a late answer to an earlier, failed run is dropped
                outcomes[answer[1]] = Outcome(*answer[2:])
        return [outcomes[i] for i in range(count)]

    def close(self) -> None:
        """Stop every worker (killing one that does not stop in 10 s) and close the queues."""
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


def start_process(target: Callable[..., Any], *args: Any) -> mp.process.BaseProcess:
    """A spawned daemon process running ``target(*args)`` (for tests that kill it)."""
    process = mp.get_context("spawn").Process(target=target, args=args, daemon=True)
    process.start()
    return process


def kill_process(process: mp.process.BaseProcess) -> None:
    """SIGKILL ``process`` and check that it died of it."""
    assert process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    process.join(10)
    assert process.exitcode == -signal.SIGKILL
