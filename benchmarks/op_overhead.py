"""Per-operator overhead: ``a + b`` on a (1,) float tensor, dtorch vs plain torch.

500 operators after 100 warm-up ones, the last result fetched; torch, thread mode and process
mode (1, 2 and 4 worker processes, each decoding every batch) measured in this run, taking
turns sample by sample (every pool is started first), so that every row sees the same load
and the ratios hold however loaded the machine is. Targets:
thread mode <= 10 µs per operator (DTorch's C++ runtime: 8.14 µs); process mode at most 2x
thread mode. Also prints the client-side time to record 10,000 operators next to the time to
execute them: recording must stay far below execution (the client never waits for the
devices).

Run: .venv/bin/python benchmarks/op_overhead.py [--ops 500] [--repeats 7] [--workers 1 2 4]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

import torch

import dtorch
from dtorch.runtime.process import WorkerPool


def _torch_per_op(ops: int, warmup: int) -> float:
    a, b = torch.ones(1), torch.ones(1)
    c = a
    for _ in range(warmup):
        c = a + b
    start = time.perf_counter()
    for _ in range(ops):
        c = a + b
    c.tolist()
    return (time.perf_counter() - start) / ops


def _dtorch_per_op(graph: dtorch.Graph, ops: int, warmup: int) -> float:
    a, b = dtorch.ones(1, graph=graph), dtorch.ones(1, graph=graph)
    c = a
    for _ in range(warmup):
        c = a + b
    c.to_torch()
    start = time.perf_counter()
    for _ in range(ops):
        c = a + b
    c.to_torch()
    return (time.perf_counter() - start) / ops


def _record_vs_execute(
    graph: dtorch.Graph, ops: int, shape: tuple[int, ...]
) -> tuple[float, float]:
    a, b = dtorch.ones(*shape, graph=graph), dtorch.ones(*shape, graph=graph)
    graph.sync()
    start = time.perf_counter()
    c = a
    for _ in range(ops):
        c = a + b
    recorded = time.perf_counter() - start
    c.to_torch()
    return recorded, time.perf_counter() - start


def _interleaved(graphs: list[dtorch.Graph], args: argparse.Namespace) -> tuple[float, list[float]]:
    """Median µs per op of torch and of each graph, the contenders taking turns."""
    samples: list[list[float]] = [[] for _ in range(len(graphs) + 1)]
    for _ in range(args.repeats):
        samples[0].append(_torch_per_op(args.ops, args.warmup))
        for graph, runs in zip(graphs, samples[1:], strict=True):
            runs.append(_dtorch_per_op(graph, args.ops, args.warmup))
    medians = [statistics.median(runs) * 1e6 for runs in samples]
    return medians[0], medians[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2, 4])
    args = parser.parse_args()
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False))
    with contextlib.ExitStack() as stack:
        graphs = [graph]
        for workers in args.workers:
            pool = stack.enter_context(WorkerPool(workers, "cpu"))
            option = dtorch.GraphOption(per_device_per_process=True, worker_pool=pool)
            graphs.append(dtorch.Graph(option))
            stack.callback(graphs[-1].close)
        torch_us, (dtorch_us, *process_us) = _interleaved(graphs, args)
    processes = list(zip(args.workers, process_us, strict=True))
    print(
        f"a + b on float32[1], {args.ops} ops after {args.warmup} warm-up, median of {args.repeats}"
    )
    print("| runtime | µs per op | ratio to torch | ratio to thread mode |")
    print("| --- | --- | --- | --- |")
    print(f"| torch {torch.__version__} (eager, one device) | {torch_us:.2f} | 1.00 | |")
    print(
        f"| dtorch (thread mode, one device) | {dtorch_us:.2f} | {dtorch_us / torch_us:.2f} "
        "| 1.00 |"
    )
    for workers, us in processes:
        print(
            f"| dtorch (process mode, {workers} worker{'s' * (workers > 1)}) | {us:.2f} | "
            f"{us / torch_us:.2f} | {us / dtorch_us:.2f} |"
        )
    verdict = "met" if dtorch_us <= 10 else "NOT met"
    print(f"target: thread mode <= 10 µs per op (DTorch C++: 8.14 µs) -> {verdict}")
    for workers, us in processes:
        verdict = "met" if us <= 2 * dtorch_us else "NOT met"
        print(f"target: process mode ({workers} workers) <= 2x thread mode -> {verdict}")
    print()
    print("10,000 ops a + b: client time to record them vs time until all have run")
    print("| tensor | recorded (ms) | all run (ms) | recording share |")
    print("| --- | --- | --- | --- |")
    for shape in [(1,), (256, 256)]:
        recorded, total = _record_vs_execute(graph, 10_000, shape)
        row = f"| float32{list(shape)} | {recorded * 1e3:.1f} | {total * 1e3:.1f} |"
        print(f"{row} {recorded / total:.0%} |")
    print()
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print("command: .venv/bin/python benchmarks/op_overhead.py")
    graph.close()


if __name__ == "__main__":
    main()
