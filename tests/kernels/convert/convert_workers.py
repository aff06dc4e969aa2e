"""Spawned worker processes that each run convert_kernel as one caller (process mode).

Jobs carry plain data (ids, shapes, placement codes, tensors), rebuilt into meshes and
operands in the worker, so nothing but tensors and builtins crosses the queue.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from dataclasses import dataclass
from typing import Any

import torch

_STOP = "stop"

#: A mesh as plain data: (device kind, shape, row-major ids).
MeshData = tuple[str, tuple[int, ...], tuple[int, ...]]
#: A placement as plain data: ("R",), ("P",) or ("S", dim, sub_split).
PlacementData = tuple[Any, ...]


@dataclass
class ConvertJob:
    """One process's share of a Convert: its devices, the layouts, its input shards."""

    namespace: str
    callers: list[list[int]]
    held: list[int]
    shape: tuple[int, ...]
    src: tuple[MeshData, tuple[PlacementData, ...]]
    dst: tuple[MeshData, tuple[PlacementData, ...]]
    inputs: dict[int, torch.Tensor]
    rendezvous_dir: str
    timeout_s: float = 20.0


def mesh_data(mesh: Any) -> MeshData:
    return (mesh.device_type, tuple(mesh.shape), tuple(mesh.device_ids))


def placement_data(placements: Any) -> tuple[PlacementData, ...]:
    out: list[PlacementData] = []
    for p in placements:
        if p.is_shard():
            out.append(("S", p.dim, p.sub_split))
        else:
            out.append(("P",) if p.is_partial() else ("R",))
    return tuple(out)


def _layout(data: tuple[MeshData, tuple[PlacementData, ...]]) -> tuple[Any, tuple[Any, ...]]:
    from dtorch.ir.mesh import DeviceMesh
    from dtorch.ir.placement import Partial, Replicate, Shard

    kind, shape, ids = data[0]
    codes: dict[str, type[Replicate] | type[Partial]] = {"R": Replicate, "P": Partial}
    placements = tuple(Shard(p[1], p[2]) if p[0] == "S" else codes[p[0]]() for p in data[1])
    return DeviceMesh.from_ids(kind, shape, ids), placements


def run_job(job: ConvertJob) -> dict[int, list[torch.Tensor]]:
    """convert_kernel for this process's devices, with a process-mode group manager."""
    from dtorch.comm.group import CommTopology, ThreadGroupManager
    from dtorch.comm.namespace import CommNamespace
    from dtorch.kernels.base import KernelContext
    from dtorch.kernels.convert import convert_kernel
    from dtorch.options import GlobalOption
    from tests.kernels.convert.convert_harness import convert_context

    op, a, b = convert_context(job.shape, torch.int64, _layout(job.src), _layout(job.dst))
    with (
        GlobalOption.override(comm_timeout_second=job.timeout_s),
        ThreadGroupManager(
            CommTopology.processes_holding(job.callers),
            namespace=CommNamespace(job.namespace),
            rendezvous_dir=job.rendezvous_dir,
        ) as manager,
    ):
        ctx = KernelContext(op, (a,), (b,), tuple(job.held), manager)
        inputs = {d: [job.inputs[d]] if d in job.inputs else [] for d in job.held}
        return convert_kernel(ctx, inputs)


def _worker_main(tasks: Any, results: Any, index: int) -> None:
    torch.set_num_threads(1)  # 2 cores shared by several workers: no oversubscription
    while True:
        task = tasks.get()
        if task == _STOP:
            return
        run_id, job = task
        try:
            outcome: tuple[bool, Any] = (True, run_job(job))
        except BaseException as error:
            outcome = (False, repr(error))
        results.put((run_id, index, *outcome))


class ConvertPool:
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

    def run(self, jobs: list[ConvertJob], timeout_s: float = 60.0) -> list[Any]:
        """Each job's result in job order; a failed job raises with the worker's error."""
        self._run_id += 1
        for task_queue, job in zip(self._tasks, jobs, strict=False):
            task_queue.put((self._run_id, job))
        got: dict[int, Any] = {}
        deadline = time.monotonic() + timeout_s
        while len(got) < len(jobs):
            try:
                run_id, index, ok, value = self._results.get(
                    timeout=max(0.1, deadline - time.monotonic())
                )
            except queue.Empty:
                raise AssertionError(f"workers did not answer in {timeout_s} s") from None
            if run_id != self._run_id:
                continue
            if not ok:
                raise AssertionError(f"worker {index} failed: {value}")
            got[index] = value
        return [got[i] for i in range(len(jobs))]

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
