"""Loading a ~1 GB checkpoint: dtorch on a 2-device tp mesh vs torch.load + load_state_dict.

The script writes one checkpoint of an MLP (``--pairs`` pairs of 4096 -> 8192 -> 4096
Linears, float32: 4 pairs are 1.0 GiB) twice into a temporary directory, as a safetensors
file and as a ``torch.save`` file, and removes the directory at the end. Every variant runs
in a fresh spawned process, builds the model with uninitialised weights (torch: on the meta
device, then ``to_empty``; dtorch: ``reset_parameters`` replaced), filled with zeros so that
the model's memory is resident before the load, and times the load alone:

* ``torch``: ``torch.load`` + ``load_state_dict`` into the torch.nn MLP, one process (the
  baseline; it holds the whole checkpoint and the whole model at once);
* ``dtorch thread``: ``model.load_state_dict(path.safetensors)`` into the dtorch MLP
  (ColumnParallelLinear / RowParallelLinear on a ``tp`` mesh of 2 CPU devices, the devices
  threads of the same process: its RSS holds the model's shards too);
* ``dtorch process``: the same with the devices in 2 worker processes (the client process
  holds no shard: its peak is what the loader itself costs).

Peak RSS is the process's ``VmHWM``; "over model" subtracts the RSS measured just before
the load (imports, graph, the model): what loading costs on top of holding the model.
Workers' peak (process mode) is the largest ``ru_maxrss`` among the client's children after
the graph closed. Ratios are baseline / dtorch: above 1, dtorch is faster or smaller.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/load_checkpoint.py [--pairs 4]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

HIDDEN, INNER = 4096, 8192


def _rss_mib() -> float:
    """The current resident set of this process (``/proc/self/statm``)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def _peak_mib() -> float:
    """This process's peak resident set (``VmHWM``; ``ru_maxrss`` would not do: Linux keeps
    the parent's peak in it across fork and exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _children_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux


def _torch_model(pairs: int, device: str = "cpu") -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    for _ in range(pairs):
        layers += [torch.nn.Linear(HIDDEN, INNER, device=device), torch.nn.ReLU()]
        layers += [torch.nn.Linear(INNER, HIDDEN, device=device)]
    return torch.nn.Sequential(*layers)


def _dtorch_model(pairs: int, mesh: Any) -> Any:
    from dtorch import nn

    layers: list[Any] = []
    for _ in range(pairs):
        layers += [nn.ColumnParallelLinear(HIDDEN, INNER, device_mesh=mesh), nn.ReLU()]
        layers += [nn.RowParallelLinear(INNER, HIDDEN, device_mesh=mesh)]
    return nn.Sequential(*layers)


def _run_torch(pairs: int, directory: str) -> dict[str, float]:
    model = _torch_model(pairs, device="meta").to_empty(device="cpu")
    for param in model.parameters():
        param.data.zero_()  # the model's pages resident before the load, as in dtorch
    before = _rss_mib()
    start = time.perf_counter()
    model.load_state_dict(torch.load(Path(directory) / "model.pt", weights_only=True))
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak": _peak_mib(), "before": before}


def _run_dtorch(pairs: int, directory: str, processes: bool) -> dict[str, float]:
    # the default graph's runner comes from the environment, read when dtorch is imported
    os.environ["DTORCH_PER_DEVICE_PER_PROCESS"] = "1" if processes else "0"
    import dtorch
    from dtorch import nn

    def zero(self: Any) -> None:  # not torch's draw: a quick fill that makes pages resident
        for param in self.parameters():
            param.data = dtorch.zeros_like(param)

    nn.Linear.reset_parameters = zero  # type: ignore[method-assign]
    graph = dtorch.Graph.default_graph()
    mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
    model = _dtorch_model(pairs, mesh)
    graph.sync()
    before = _rss_mib()
    start = time.perf_counter()
    model.load_state_dict(Path(directory) / "model.safetensors")
    graph.sync()
    seconds = time.perf_counter() - start
    peak = _peak_mib()
    del model
    graph.close()
    return {"seconds": seconds, "peak": peak, "before": before,
            "workers": _children_peak_mib()}  # fmt: skip


def _child(variant: str, pairs: int, directory: str, out: Any) -> None:
    if variant == "write":
        out.put(_write(pairs, directory))
    elif variant == "torch":
        out.put(_run_torch(pairs, directory))
    else:
        out.put(_run_dtorch(pairs, directory, processes=variant == "dtorch process"))


def _measure(variant: str, pairs: int, directory: str) -> Any:
    """One variant in a fresh spawned process (its peak RSS is its own)."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_child, args=(variant, pairs, directory, queue))
    child.start()
    result = queue.get(timeout=600)
    child.join()
    return result


def _write(pairs: int, directory: str) -> float:
    from safetensors.torch import save_file

    torch.manual_seed(0)
    with torch.no_grad():
        state = {k: v.contiguous() for k, v in _torch_model(pairs).state_dict().items()}
    save_file(state, str(Path(directory) / "model.safetensors"))
    torch.save(state, Path(directory) / "model.pt")
    return sum(v.numel() * v.element_size() for v in state.values()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=4, help="Linear pairs (4: 1 GiB)")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="dtorch-bench-ckpt-")
    try:
        size = _measure("write", args.pairs, directory)  # a child: this process stays small
        results = {v: _measure(v, args.pairs, directory) for v in _VARIANTS}
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    _print(size, results)


_VARIANTS = ("torch", "dtorch thread", "dtorch process")


def _print(size: float, results: dict[str, dict[str, float]]) -> None:
    base = results["torch"]
    print(f"checkpoint: {size:.0f} MiB float32, tp mesh of 2 CPU devices")
    print(f"{'variant':<16}{'load s':>9}{'peak MiB':>10}{'over model':>12}{'workers':>9}"
          f"{'time x':>8}{'over x':>8}")  # fmt: skip
    for name, r in results.items():
        over = r["peak"] - r["before"]
        workers = f"{r['workers']:.0f}" if name == "dtorch process" else "-"
        print(
            f"{name:<16}{r['seconds']:>9.2f}{r['peak']:>10.0f}{over:>12.0f}{workers:>9}"
            f"{base['seconds'] / r['seconds']:>8.2f}"
            f"{(base['peak'] - base['before']) / max(over, 1.0):>8.2f}"
        )


if __name__ == "__main__":
    main()
