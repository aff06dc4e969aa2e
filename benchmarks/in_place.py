"""In-place arithmetic: ``t += o`` (one operator writing ``t``'s shards) against the
two-operator form every in-place write had before (``t.copy_(t + o)``: the sum into a fresh
tensor, then a Copy back) and against torch's ``t += o``, per call, recorded and run.

``t`` and ``o`` are float32, sharded on dim 0 over 2 devices (dtorch; torch: the full tensor
with 2 threads), a small [64] and a 4 MiB [1024, 1024] shape; thread mode and process mode (2
worker processes). The contenders take turns, sample by sample, so they see the same load;
a sample is ``--calls`` calls then ``sync()`` (torch: the calls). Prints the median over
``--repeats`` samples, in µs per call, and the ratio of the two-operator form's time to
``t += o``'s.

Run: PYTHONPATH=. .venv/bin/python benchmarks/in_place.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import dtorch
from dtorch import Shard

SHAPES = ((64,), (1024, 1024))


def _torch_sample(shape: tuple[int, ...], calls: int) -> Callable[[], float]:
    t, o = torch.zeros(shape), torch.ones(shape)

    def sample() -> float:
        nonlocal t
        start = time.perf_counter()
        for _ in range(calls):
            t += o
        return (time.perf_counter() - start) / calls

    return sample


def _dtorch_sample(
    graph: dtorch.Graph, shape: tuple[int, ...], calls: int, old_form: bool
) -> Callable[[], float]:
    mesh = dtorch.init_device_mesh("cpu", (2,))
    place = {"device_mesh": mesh, "placements": [Shard(0)], "graph": graph}
    t = dtorch.from_torch(torch.zeros(shape), **place)
    o = dtorch.from_torch(torch.ones(shape), **place)

    def sample() -> float:
        nonlocal t
        graph.sync()
        start = time.perf_counter()
        for _ in range(calls):
            if old_form:
                t.copy_(t + o)
            else:
                t += o
        graph.sync()
        return (time.perf_counter() - start) / calls

    return sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(2)
    graphs = {
        "thread": dtorch.Graph(dtorch.GraphOption(per_device_per_process=False)),
        "process": dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, num_workers=2)),
    }
    print("| shape | contender | µs per call | two operators / one |")
    print("| --- | --- | ---: | ---: |")
    for shape in SHAPES:
        calls = 1000 if len(shape) == 1 else 100
        contenders = {"torch, 2 threads": _torch_sample(shape, calls)}
        for mode, graph in graphs.items():
            contenders[f"{mode} mode, t += o"] = _dtorch_sample(graph, shape, calls, False)
            contenders[f"{mode} mode, t.copy_(t + o)"] = _dtorch_sample(graph, shape, calls, True)
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(args.repeats + 1):  # the first round warms up
            for name, sample in contenders.items():
                times[name].append(sample())
        medians = {name: statistics.median(ts[1:]) * 1e6 for name, ts in times.items()}
        for name, us in medians.items():
            ratio = ""
            if name.endswith("t += o"):
                ratio = f"{medians[name.replace('t += o', 't.copy_(t + o)')] / us:.2f}"
            print(f"| {list(shape)} | {name} | {us:.1f} | {ratio} |")
    for graph in graphs.values():
        graph.close()
    print("\ncommand: PYTHONPATH=. .venv/bin/python benchmarks/in_place.py")


if __name__ == "__main__":
    main()
