"""Tensor.redistribute: dtorch (thread and process mode) vs PyTorch DTensor on Gloo, one run.

Rows: S(0)->R, P->R, P->S(0), S(0)->S(1) on 1-D meshes of world size 2
and 4, and (S(0), S(1))->(R, R) on a 2x2 mesh, each on float32 [1024, 1024] and [4096, 1024].

* baseline: ``torch.distributed.tensor`` (DeviceMesh, distribute_tensor, ``.redistribute``)
  over a Gloo process group, one spawned process per rank (torch.multiprocessing.spawn, a
  FileStore rendezvous, one torch thread per rank), kept alive while the rows of its world
  size run; each row runs on DTensor and then at once on dtorch, so both see the same load
  on the shared machine (the DTensor ranks sleep in a queue meanwhile). A sample is
  (barrier; start; redistribute; to_local + wait; barrier; stop); the max over ranks of each
  sample, then the median over repeats. The Partial source is ``DTensor.from_local`` of one
  seeded randn per rank.
* dtorch, thread mode: a Graph of this process (logical CPU devices on its KernelStreams,
  one torch thread). The source is built once with ``dtorch.from_torch`` and synced; a sample
  is (start; ``t.redistribute(mesh, dst)``; ``graph.sync()``; stop), the median over repeats
  after warm-up. Each row's result is checked once against the full torch tensor, so a wrong
  result cannot pass as a fast one.
* dtorch, process mode: the same on a graph leased from a WorkerPool of one worker process
  per rank of the row's world size (one process per rank, as DTensor's; the workers exchange
  through the file store's shared memory, the pool's default), one torch thread per worker;
  the pool sleeps while DTensor runs and the other way round.

The ratios are DTensor ms / dtorch ms; the targets: at least 3 in thread mode and
at least 2 in process mode, on every row. The machine is shared: the load average is printed
before and after.

Run:  .venv/bin/python benchmarks/redistribute.py [--quick] [--repeats 15] [--rows 1024 4096]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from queue import Empty
from typing import Any

import torch

COLS = 1024
TARGET = 3.0
PROCESS_TARGET = 2.0


@dataclass(frozen=True, slots=True)
class Case:
    """One row: a transition on a mesh shape; placements are ('S0' | 'S1' | 'R' | 'P', ...)."""

    name: str
    mesh_shape: tuple[int, ...]
    src: tuple[str, ...]
    dst: tuple[str, ...]

    @property
    def world(self) -> int:
        return int(torch.Size(self.mesh_shape).numel())


def cases(worlds: Sequence[int]) -> list[Case]:
    """Every benchmarked transition for the given world sizes (2x2 when 4 is among them)."""
    out: list[Case] = []
    for world in worlds:
        out += [
            Case("S(0)->R", (world,), ("S0",), ("R",)),
            Case("P->R", (world,), ("P",), ("R",)),
            Case("P->S(0)", (world,), ("P",), ("S0",)),
            Case("S(0)->S(1)", (world,), ("S0",), ("S1",)),
        ]
    if 4 in worlds:
        out.append(Case("(S(0),S(1))->(R,R)", (2, 2), ("S0", "S1"), ("R", "R")))
    return out


def placements(names: Sequence[str], shard: Any, replicate: Any, partial: Any) -> list[Any]:
    """The placement objects of one library (its Shard, Replicate and Partial classes)."""
    table: dict[str, Callable[[], Any]] = {
        "S0": lambda: shard(0),
        "S1": lambda: shard(1),
        "R": replicate,
        "P": partial,
    }
    return [table[n]() for n in names]


def full_tensor(rows: int) -> torch.Tensor:
    return torch.randn(rows, COLS, generator=torch.Generator().manual_seed(rows))


def partial_local(rows: int, rank: int) -> torch.Tensor:
    """Rank ``rank``'s summand of a Partial source (seeded, so every rank can rebuild all)."""
    return torch.randn(rows, COLS, generator=torch.Generator().manual_seed(rows * 100 + rank))


# --- DTensor on Gloo, one spawned process per rank --------------------------------------------


def _dtensor_source(case: Case, mesh: Any, rows: int, rank: int) -> tuple[Any, torch.Tensor]:
    """The source DTensor and the full value it stands for."""
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    src = placements(case.src, Shard, Replicate, Partial)
    if "P" in case.src:
        full = sum(partial_local(rows, r) for r in range(case.world))
        assert isinstance(full, torch.Tensor)
        return DTensor.from_local(partial_local(rows, rank), mesh, src), full
    full = full_tensor(rows)
    return distribute_tensor(full, mesh, src), full


def _wait(local: torch.Tensor) -> torch.Tensor:
    """The local tensor once its collective finished (functional collectives are lazy)."""
    wait = getattr(local, "wait", None)
    return wait() if callable(wait) else local


def _dtensor_row(case: Case, mesh: Any, rows: int, rank: int, repeats: int) -> float:
    import torch.distributed as dist
    from torch.distributed.tensor import Partial, Replicate, Shard

    source, full = _dtensor_source(case, mesh, rows, rank)
    dst = placements(case.dst, Shard, Replicate, Partial)
    check = source.redistribute(mesh, dst).full_tensor()
    torch.testing.assert_close(check, full, rtol=1e-5, atol=1e-4)
    samples = []
    for i in range(repeats + 2):
        dist.barrier()
        start = time.perf_counter()
        _wait(source.redistribute(mesh, dst).to_local())
        dist.barrier()
        if i >= 2:  # two warm-up samples
            samples.append(time.perf_counter() - start)
    worst = torch.tensor(samples, dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)  # a sample lasts until the slowest rank
    return float(worst.median())


def _dtensor_main(rank: int, world: int, commands: list[Any], results: Any, tmp: str) -> None:
    """One rank: runs the rows the parent names (index into ``cases([world])``, rows,
    repeats) until it sends None; rank 0 reports each row's seconds."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)  # "no alltoall on CPU" notices
    dist.init_process_group(
        "gloo",
        init_method=f"file://{tmp}/rendezvous",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=120),
    )
    table = cases([world])
    meshes = {c.mesh_shape: init_device_mesh("cpu", c.mesh_shape) for c in table}
    while (command := commands[rank].get()) is not None:
        index, rows, repeats = command
        case = table[index]
        seconds = _dtensor_row(case, meshes[case.mesh_shape], rows, rank, repeats)
        if rank == 0:
            results.put(seconds)
    dist.destroy_process_group()


class DTensorRanks:
    """``world`` spawned DTensor ranks kept alive between rows, so each DTensor row runs
    right before its dtorch row and both see the same load on the shared machine.

    ``main(rank, world, commands, results, tmp)`` is each rank's loop (default: this
    script's rows): it reads commands from ``commands[rank]`` until None and rank 0 puts one
    result per command (benchmarks/models.py passes its own)."""

    def __init__(self, world: int, tmp: str, main: Callable[..., None] | None = None) -> None:
        import torch.multiprocessing as mp

        context = mp.get_context("spawn")
        self._commands = [context.Queue() for _ in range(world)]
        self._results = context.Queue()
        self._ranks = mp.spawn(
            main or _dtensor_main,
            args=(world, self._commands, self._results, tmp),
            nprocs=world,
            join=False,
        )

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._ranks.processes]

    def ask(self, command: Any) -> Any:
        """Send ``command`` to every rank and return rank 0's result (a dead rank raises)."""
        for queue in self._commands:
            queue.put(command)
        while True:
            try:
                return self._results.get(timeout=5.0)
            except Empty:
                self._ranks.join(0.1)  # raises ProcessRaisedException for a failed rank

    def time_row(self, index: int, rows: int, repeats: int) -> float:
        """Median seconds of row ``index`` of ``cases([world])``."""
        return float(self.ask((index, rows, repeats)))

    def close(self) -> None:
        for queue in self._commands:
            queue.put(None)
        if not self._ranks.join(120):  # a rank stuck in a collective: do not hang the run
            for process in self._ranks.processes:
                process.terminate()


# --- dtorch, thread mode ----------------------------------------------------------------------


def dtorch_time(case: Case, rows: int, repeats: int, graph: Any) -> float:
    """Median seconds of one dtorch redistribute + sync on ``graph``, after a checked
    warm-up."""
    import dtorch

    mesh = dtorch.init_device_mesh("cpu", case.mesh_shape)
    src = placements(case.src, dtorch.Shard, dtorch.Replicate, dtorch.Partial)
    dst = placements(case.dst, dtorch.Shard, dtorch.Replicate, dtorch.Partial)
    full = full_tensor(rows)
    source = dtorch.from_torch(full, device_mesh=mesh, placements=src, graph=graph)
    graph.sync()
    result = source.redistribute(mesh, dst)
    if list(result.placements) != dst:
        raise AssertionError(f"{case.name}: got placements {result.placements}, wanted {dst}")
    torch.testing.assert_close(result.to_torch(), full, rtol=0, atol=0)
    del result
    samples = []
    for i in range(repeats + 2):
        start = time.perf_counter()
        out = source.redistribute(mesh, dst)
        graph.sync()
        if i >= 2:
            samples.append(time.perf_counter() - start)
        del out
    return statistics.median(samples)


# --- the report -------------------------------------------------------------------------------


def _load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def report(rows: Sequence[tuple[Case, int, float, float, float]]) -> None:
    """The markdown table: DTensor and dtorch milliseconds (both modes), ratios, targets."""
    print(
        "| transition | shape | world size | DTensor ms | thread ms | ratio (>= 3) "
        "| process ms | ratio (>= 2) |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for case, n, base, threads, processes in rows:
        mesh = "x".join(map(str, case.mesh_shape))
        print(
            f"| {case.name} | [{n}, {COLS}] | {mesh} | {base * 1e3:.2f} | "
            f"{threads * 1e3:.2f} | {_ratio(base, threads, TARGET)} | "
            f"{processes * 1e3:.2f} | {_ratio(base, processes, PROCESS_TARGET)} |"
        )


def _ratio(base: float, ours: float, target: float) -> str:
    ratio = base / ours
    return f"{ratio:.2f} {'met' if ratio >= target else 'missed'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (7)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--rows", type=int, nargs="+", default=[1024, 4096])
    args = parser.parse_args()
    repeats = 7 if args.quick else args.repeats
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, one torch thread per rank/process")
    print(f"load average before: {_load()} (a shared machine skews every figure)\n")
    import dtorch
    from dtorch.runtime.process import WorkerPool

    rows = []
    threads = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False))
    for world in args.worlds:
        pool = WorkerPool(world, "cpu", threads=1)
        option = dtorch.GraphOption(per_device_per_process=True, worker_pool=pool)
        processes = dtorch.Graph(option)
        with tempfile.TemporaryDirectory() as tmp:
            ranks = DTensorRanks(world, tmp)
            try:
                for index, case in enumerate(cases([world])):
                    for n in args.rows:
                        base = ranks.time_row(index, n, repeats)
                        ours = dtorch_time(case, n, repeats, threads)
                        in_processes = dtorch_time(case, n, repeats, processes)
                        rows.append((case, n, base, ours, in_processes))
            finally:
                ranks.close()
                processes.close()
                pool.close()
    threads.close()
    report(rows)
    print(f"\nload average after: {_load()}; medians of {repeats} repeats after 2 warm-up")
    print("command:", " ".join([os.path.relpath(sys.executable), *sys.argv]))


if __name__ == "__main__":
    main()
