"""Process-mode start-up: seconds from ``Graph(...)`` to the first result, 2, 4 and 8 workers.

Each sample creates a process-mode graph with its own pool (``GraphOption(
per_device_per_process=True, num_workers=n)``: the workers start in parallel, import torch and
dtorch, connect, report ready), fetches one small result from a tensor sharded over one device
per worker, and closes the graph (the time to close is printed apart). The baseline measured
in the same run: one bare ``python -c "import torch"`` (what every worker pays at least once),
and thread mode's Graph to first result. Target: 4 workers in under 4 s.

Every worker also imports dtorch. Without its bytecode cached (an editable install where
``PYTHONDONTWRITEBYTECODE`` is set, as on the development machine) each worker compiles
dtorch's sources, about 0.4 s of CPU more per worker; the script says which case it measured
(``python -m compileall -q dtorch`` caches it; a wheel install always has it).

Run: .venv/bin/python benchmarks/process_startup.py [--workers 2 4 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

import dtorch

TARGET_SECONDS = 4.0
TARGET_WORKERS = 4


def _import_torch_seconds() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return time.perf_counter() - start


def _first_result(option: dtorch.GraphOption, devices: int) -> tuple[float, float]:
    """(seconds from Graph(...) to the first result, seconds to close)."""
    start = time.perf_counter()
    graph = dtorch.Graph(option)
    mesh = dtorch.init_device_mesh("cpu", devices)
    value = dtorch.arange(2 * devices, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
    assert value.tolist() == list(range(2 * devices))
    first = time.perf_counter() - start
    start = time.perf_counter()
    graph.close()
    return first, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{os.cpu_count()} CPUs; load average before: "
        + "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    )
    cached = os.path.exists(importlib.util.cache_from_source(dtorch.__file__))
    print(f"dtorch's bytecode cached: {'yes' if cached else 'no (every worker compiles it)'}")
    torch_s = statistics.median(_import_torch_seconds() for _ in range(args.repeats))
    thread = dtorch.GraphOption(per_device_per_process=False)
    thread_s = statistics.median(_first_result(thread, 4)[0] for _ in range(args.repeats))
    print("| graph | Graph(...) to first result (s) | close (s) |")
    print("| --- | ---: | ---: |")
    print(f"| baseline: `python -c 'import torch'` (one process) | {torch_s:.2f} | |")
    print(f"| thread mode, 4 devices | {thread_s:.3f} | |")
    verdicts = []
    for workers in args.workers:
        option = dtorch.GraphOption(per_device_per_process=True, num_workers=workers)
        samples = [_first_result(option, workers) for _ in range(args.repeats)]
        first = statistics.median(s[0] for s in samples)
        close = statistics.median(s[1] for s in samples)
        print(f"| process mode, {workers} workers | {first:.2f} | {close:.2f} |")
        if workers == TARGET_WORKERS:
            verdicts.append("met" if first < TARGET_SECONDS else "NOT met")
    for verdict in verdicts:
        print(f"target: {TARGET_WORKERS} workers in under {TARGET_SECONDS:.0f} s -> {verdict}")
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(f"medians of {args.repeats}; command: .venv/bin/python benchmarks/process_startup.py")


if __name__ == "__main__":
    main()
