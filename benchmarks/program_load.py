"""Loading a saved program (~1 GiB of constants) vs torch.load + load_state_dict.

The script builds a chain of ``4096 x 4096`` float32 Linear layers (16 layers are 1 GiB;
``--gib`` picks how many), traces it with dtorch (the weights and biases are the program's
constants) and saves it with ``program.save``, and ``torch.save``s the state dict of the same
weights, both into one temporary directory, removed at the end. It then times, in this one
process, alternating, ``--repeats`` times each (the files are in the page cache for both):

* ``dtorch.load_program``: ``load_program(path)`` on a thread-mode graph (one CPU device,
  its devices started before the clock starts) until the constants are on the device: one
  call of the program on a 1-row input, its result fetched. The file is mapped, each
  constant's CRC checked and copied once, by the Create kernel, into the device's memory;
* ``torch``: ``torch.load(path)`` + ``load_state_dict`` into the ``torch.nn.Linear`` chain
  (built once, its memory resident), then one forward pass on the same input.

It prints a markdown table of the medians and the ratio torch / dtorch (above 1: dtorch is
faster). Note the machine's load (``uptime``) beside the figures.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/program_load.py [--gib 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

import dtorch

WIDTH = 4096
LAYER_BYTES = (WIDTH * WIDTH + WIDTH) * 4


def chain(layers: int) -> torch.nn.Sequential:
    """``layers`` Linear layers of WIDTH, seeded."""
    torch.manual_seed(0)
    return torch.nn.Sequential(*(torch.nn.Linear(WIDTH, WIDTH) for _ in range(layers)))


def save_program(model: torch.nn.Sequential, path: Path) -> None:
    """Trace the chain on a thread-mode graph with its weights as constants; save it."""
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False))
    with graph.as_default():
        params = [
            (dtorch.from_torch(m.weight.data.T), dtorch.from_torch(m.bias.data)) for m in model
        ]

        def forward(x: dtorch.Tensor) -> dtorch.Tensor:
            for w, b in params:
                x = x @ w + b
            return x

        program = dtorch.trace(forward, dtorch.zeros(1, WIDTH))
        program.save(path)
        del program
    graph.close()


def time_dtorch(path: Path, x: torch.Tensor) -> float:
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False))
    with graph.as_default():
        dtorch.ones(1).tolist()  # the devices started, as the torch model is built: untimed
        start = time.perf_counter()
        program = dtorch.load_program(path)
        program(dtorch.from_torch(x)).to_torch()
        elapsed = time.perf_counter() - start
        del program
    graph.close()
    return elapsed


def time_torch(path: Path, model: torch.nn.Sequential, x: torch.Tensor) -> float:
    start = time.perf_counter()
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state)
    with torch.no_grad():
        model(x)
    elapsed = time.perf_counter() - start
    del state
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="constants' size in GiB")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    layers = max(1, round(args.gib * 2**30 / LAYER_BYTES))
    model = chain(layers)
    x = torch.randn(1, WIDTH)
    with tempfile.TemporaryDirectory(prefix="dtorch-program-load-") as tmp:
        program_path, torch_path = Path(tmp) / "chain.dtorch", Path(tmp) / "chain.pt"
        save_program(model, program_path)
        torch.save(model.state_dict(), torch_path)
        sizes = program_path.stat().st_size, torch_path.stat().st_size
        dt, tt = [], []
        for _ in range(args.repeats):  # alternating, so that both meet the same load
            dt.append(time_dtorch(program_path, x))
            gc.collect()
            tt.append(time_torch(torch_path, model, x))
            gc.collect()
    d, t = statistics.median(dt), statistics.median(tt)
    print(f"{layers} layers of {WIDTH}x{WIDTH} float32, median of {args.repeats}, "
          f"load average {os.getloadavg()[0]:.2f}\n")  # fmt: skip
    print("| load | file (MiB) | median (s) | GiB/s |")
    print("|---|---|---|---|")
    for name, size, value in (("dtorch.load_program + 1 call", sizes[0], d),
                              ("torch.load + load_state_dict + forward", sizes[1], t)):  # fmt: skip
        print(f"| {name} | {size / 2**20:.0f} | {value:.3f} | {size / 2**30 / value:.2f} |")
    print(f"\nratio torch / dtorch: {t / d:.2f} (above 1: load_program is faster)")


if __name__ == "__main__":
    main()
