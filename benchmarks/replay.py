"""Replay cost: a traced 1,000-operator program of small ops, per operator, vs torch and eager.

The program is a chain of ``x = x * a + b`` / ``relu`` on float32[1] tensors (1,000 operators,
one device). Measured in the same run: torch's eager loop of the same ops, dtorch eager (thread
mode), and replays of the traced program in thread mode and in process mode (a pool of
``--workers`` worker processes). Each figure is the wall time of ``--calls`` calls, the last
result fetched, divided by the operators run; median of ``--repeats``. Targets: replay <= 1.5
µs per operator in thread mode and <= 2 µs in process mode (DTorch's C++ runtime: 8.14 µs per
operator).

Run: .venv/bin/python benchmarks/replay.py [--ops 1000] [--calls 20] [--repeats 7] [--workers 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

import dtorch
from dtorch.runtime.process import WorkerPool


def body(ops: int) -> Callable[[Any, Any, Any], Any]:
    """``ops`` small operators: (mul, add, relu) repeated."""

    def run(x: Any, a: Any, b: Any) -> Any:
        for i in range(ops):
            step = i % 3
            x = x * a if step == 0 else x + b if step == 1 else x.relu()
        return x

    return run


def _torch_per_op(args: argparse.Namespace) -> float:
    run = body(args.ops)
    x, a, b = torch.ones(1), torch.full((1,), 0.5), torch.ones(1)
    run(x, a, b)
    start = time.perf_counter()
    for _ in range(args.calls):
        y = run(x, a, b)
    y.tolist()
    return (time.perf_counter() - start) / (args.calls * args.ops)


def _timed(call: Callable[[], Any], args: argparse.Namespace) -> float:
    call().to_torch()
    start = time.perf_counter()
    for _ in range(args.calls):
        y = call()
    y.to_torch()
    return (time.perf_counter() - start) / (args.calls * args.ops)


def _dtorch_per_op(graph: dtorch.Graph, args: argparse.Namespace) -> tuple[float, float]:
    """(eager, replay) seconds per operator on ``graph``, medians of ``args.repeats``."""
    run = body(args.ops)
    with graph.as_default():
        x, a, b = dtorch.ones(1), dtorch.full((1,), 0.5), dtorch.ones(1)
        program = dtorch.trace(run, x, a, b)
        eager = [_timed(lambda: run(x, a, b), args) for _ in range(args.repeats)]
        replay = [_timed(lambda: program(x, a, b), args) for _ in range(args.repeats)]
    return statistics.median(eager), statistics.median(replay)


def _process(args: argparse.Namespace) -> tuple[float, float]:
    with WorkerPool(args.workers, "cpu") as pool:
        graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
        try:
            return _dtorch_per_op(graph, args)
        finally:
            graph.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    torch_s = statistics.median(_torch_per_op(args) for _ in range(args.repeats))
    graph = dtorch.Graph()
    try:
        thread = _dtorch_per_op(graph, args)
    finally:
        graph.close()
    process = _process(args)
    rows = [
        (f"torch {torch.__version__} (eager)", torch_s),
        ("dtorch eager (thread mode)", thread[0]),
        ("dtorch replay (thread mode)", thread[1]),
        ("dtorch eager (process mode)", process[0]),
        ("dtorch replay (process mode)", process[1]),
    ]
    load = os.getloadavg()[0]
    print(
        f"{args.ops} operators per call, {args.calls} calls, median of {args.repeats};"
        f" load {load:.1f}"
    )
    print("| runtime | µs per op | ratio to torch |")
    print("| --- | ---: | ---: |")
    for label, seconds in rows:
        print(f"| {label} | {seconds * 1e6:.2f} | {seconds / torch_s:.2f} |")
    print(
        f"targets: replay thread <= 1.5 µs ({thread[1] * 1e6:.2f}),"
        f" process <= 2 µs ({process[1] * 1e6:.2f})"
    )


if __name__ == "__main__":
    main()
