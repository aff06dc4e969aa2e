"""Per-operator overhead: ``a + b`` on a (1,) float tensor, dtorch vs plain torch.

500 operators after 100 warm-up ones, the last result fetched; both measured in this run.
Also prints the client-side time to record 10,000 operators next to the time to execute
them: recording must stay far below execution (the client never waits for the devices).

Run: .venv/bin/python benchmarks/op_overhead.py [--ops 500] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import dtorch


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    graph = dtorch.Graph()
    torch_us = (
        statistics.median(_torch_per_op(args.ops, args.warmup) for _ in range(args.repeats)) * 1e6
    )
    dtorch_us = (
        statistics.median(_dtorch_per_op(graph, args.ops, args.warmup) for _ in range(args.repeats))
        * 1e6
    )
    print(
        f"a + b on float32[1], {args.ops} ops after {args.warmup} warm-up, median of {args.repeats}"
    )
    print("| runtime | µs per op | ratio to torch |")
    print("| --- | --- | --- |")
    print(f"| torch {torch.__version__} (eager, one device) | {torch_us:.2f} | 1.00 |")
    print(f"| dtorch (thread mode, one device) | {dtorch_us:.2f} | {dtorch_us / torch_us:.2f} |")
    verdict = "met" if dtorch_us <= 10 else "NOT met"
    print(f"target: <= 10 µs per op (DTorch C++: 8.14 µs) -> {verdict}")
    print()
    print("10,000 ops a + b: client time to record them vs time until all have run")
    print("| tensor | recorded (ms) | all run (ms) | recording share |")
    print("| --- | --- | --- | --- |")
    for shape in [(1,), (256, 256)]:
        recorded, total = _record_vs_execute(graph, 10_000, shape)
        row = f"| float32{list(shape)} | {recorded * 1e3:.1f} | {total * 1e3:.1f} |"
        print(f"{row} {recorded / total:.0%} |")
    print()
    print("command: .venv/bin/python benchmarks/op_overhead.py")
    graph.close()


if __name__ == "__main__":
    main()
