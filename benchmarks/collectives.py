"""ThreadGroup collectives vs raw torch.distributed Gloo, on the same sizes, in the same run.

For world sizes 2 and 4 and float32 tensors of [1024, 1024] and [4096, 1024] (the full tensor;
shards are its torch.chunk pieces along dim 0), times each collective:

* baseline: raw ``torch.distributed`` Gloo (``init_process_group``), one process per rank;
* ``group/gloo``: ThreadGroup over its torch.distributed backend in the same processes;
* ``group/threads``: ThreadGroup's same-device backend, one thread per rank (memory store);
* ``group/1-caller``: ThreadGroup with one caller holding every rank (no store at all);
* ``group/file``: the same-device backend over the file store, one process per rank.

all_to_all is S(0) -> S(1): raw Gloo has no dim-aware all-to-all, so its baseline packs the
dim-1 chunks, runs ``all_to_all_single`` and concatenates (what a caller would write).
Each figure is the median of ``--repeats`` timed calls after warm-up; the ratio is
baseline / ours (above 1: ours is faster).

Run:  .venv/bin/python benchmarks/collectives.py [--worlds 2 4] [--rows 1024 4096] [--repeats 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from dtorch.comm.group import BackendKind, CommTopology, ThreadGroup, ThreadGroupManager
from dtorch.comm.namespace import CommNamespace

COLS = 1024
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


def _shard(full_rows: int, world: int, rank: int) -> torch.Tensor:
    return torch.chunk(torch.ones(full_rows, COLS), world, 0)[rank].contiguous()


def _raw_calls(world: int, rank: int, rows: int) -> dict[str, Callable[[], Any]]:
    full = torch.ones(rows, COLS)
    shard = _shard(rows, world, rank)
    gathered = torch.empty(rows, COLS)
    scattered = torch.empty(rows // world, COLS)

    def all_to_all() -> torch.Tensor:
        send = torch.stack(torch.chunk(shard, world, 1)).contiguous()
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send)
        return torch.cat(list(recv), 0)

    return {
        "all_reduce": lambda: dist.all_reduce(full.clone()),
        "all_gather": lambda: dist.all_gather_into_tensor(gathered, shard),
        "reduce_scatter": lambda: dist.reduce_scatter_tensor(scattered, full),
        "all_to_all": all_to_all,
        "broadcast": lambda: dist.broadcast(full.clone(), 0),
    }


def _group_calls(group: ThreadGroup, rows: int) -> dict[str, Callable[[], Any]]:
    world = group.world_size
    full = {r: torch.ones(rows, COLS) for r in group.ranks}
    shard = {r: _shard(rows, world, r) for r in group.ranks}
    return {
        "all_reduce": lambda: group.all_reduce(full),
        "all_gather": lambda: group.all_gather(shard, 0, rows),
        "reduce_scatter": lambda: group.reduce_scatter(full, 0),
        "all_to_all": lambda: group.all_to_all(shard, 0, 1, rows),
        "broadcast": lambda: group.broadcast(full, 0),
    }


def _time(call: Callable[[], Any], sync: Callable[[], None], repeats: int) -> float:
    for _ in range(3):  # warm-up: connections, allocator pools
        call()
    samples = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _process_main(rank: int, world: int, args: argparse.Namespace, path: str, out: Any) -> None:
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", FutureWarning)  # *_tensor names are deprecated aliases
    dist.init_process_group(
        "gloo",
        init_method=f"file://{path}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=120),
    )
    results: dict[tuple[str, str, int], float] = {}
    namespace = CommNamespace(args.namespace)
    for label, backend in (("group/gloo", None), ("group/file", BackendKind.STORE_FILE)):
        topology = CommTopology.one_device_per_process(range(world))
        with ThreadGroupManager(topology, namespace=namespace, backend=backend) as manager:
            group = manager.get_group("cpu", list(range(world)), [rank])
            for rows in args.rows:
                raw, ours = _raw_calls(world, rank, rows), _group_calls(group, rows)
                for name in COLLECTIVES:
                    if label == "group/gloo":
                        results[("raw gloo", name, rows)] = _time(
                            raw[name], dist.barrier, args.repeats
                        )
                    results[(label, name, rows)] = _time(ours[name], group.barrier, args.repeats)
    if rank == 0:
        out.put(results)
    dist.destroy_process_group()


def _processes(world: int, args: argparse.Namespace) -> dict[tuple[str, str, int], float]:
    context = mp.get_context("spawn")
    out = context.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [
            context.Process(target=_process_main, args=(r, world, args, f"{tmp}/rdv", out))
            for r in range(world)
        ]
        for proc in procs:
            proc.start()
        results = out.get(timeout=600)
        for proc in procs:
            proc.join(60)
    return results


def _threads(world: int, args: argparse.Namespace) -> dict[tuple[str, str, int], float]:
    results: dict[tuple[str, str, int], float] = {}
    layouts = {"group/threads": [[r] for r in range(world)], "group/1-caller": [list(range(world))]}
    for label, layout in layouts.items():
        topology = CommTopology.threads(layout)
        with ThreadGroupManager(topology, namespace=CommNamespace.create()) as manager:
            timings: list[dict[tuple[str, str, int], float]] = [{} for _ in layout]

            def caller(
                index: int, held: list[int], timings=timings, manager=manager, label=label
            ) -> None:
                group = manager.get_group("cpu", list(range(world)), held)
                for rows in args.rows:
                    calls = _group_calls(group, rows)
                    for name in COLLECTIVES:
                        timings[index][(label, name, rows)] = _time(
                            calls[name], group.barrier, args.repeats
                        )

            threads = [threading.Thread(target=caller, args=(i, h)) for i, h in enumerate(layout)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            results.update(timings[0])
    return results


def _report(world: int, rows_list: list[int], results: dict[tuple[str, str, int], float]) -> None:
    labels = ["group/gloo", "group/threads", "group/1-caller", "group/file"]
    header = f"{'collective':<15}{'shape':>12}{'raw gloo ms':>13}" + "".join(
        f"{label + ' ms':>18}{'ratio':>7}" for label in labels
    )
    print(f"\nworld size {world} (ratio = raw gloo / ours; > 1 means ours is faster)")
    print(header)
    for rows in rows_list:
        for name in COLLECTIVES:
            base = results[("raw gloo", name, rows)]
            line = f"{name:<15}{f'[{rows},{COLS}]':>12}{base * 1e3:>13.2f}"
            for label in labels:
                ours = results[(label, name, rows)]
                line += f"{ours * 1e3:>18.2f}{base / ours:>7.2f}"
            print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--rows", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    args.namespace = CommNamespace.create().instance_id
    torch.set_num_threads(1)
    print("command:", " ".join([os.path.relpath(sys.executable), *sys.argv]))
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, torch threads per rank: 1")
    print(
        "load average before: {:.2f} {:.2f} {:.2f} (a shared machine skews every figure)".format(
            *os.getloadavg()
        )
    )
    for world in args.worlds:
        results = _processes(world, args)
        results.update(_threads(world, args))
        _report(world, args.rows, results)
    print("\nload average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
