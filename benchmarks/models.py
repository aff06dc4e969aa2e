"""Model forwards: dtorch on 2 devices (thread and process mode) vs one-process torch, one run.

Sections (``--sections``, all by default):

* ``mlp``: a tensor-parallel MLP, x [64, 1024] -> Linear(1024, 4096) -> Linear(4096, 1024):
  dtorch ``ColumnParallelLinear`` then ``RowParallelLinearWithReplicateOutput`` on a tp=2
  mesh (the Partial sums all-reduced to Replicate), beside PyTorch DTensor on Gloo
  (``parallelize_module`` with ``ColwiseParallel`` / ``RowwiseParallel``, two ranks spawned
  by this script, a FileStore rendezvous on loopback, one torch thread each; the ranks of
  benchmarks/redistribute.py).
* ``resnet``: ResNet-18 (examples/vision.py) forward in eval mode, batch 8 x 3 x 224 x 224,
  the batch sharded on a dp=2 mesh. The model has no tensor-parallel form (its parameters
  are Replicate on every mesh dim), so it runs dp only.
* ``llama``: a small Llama (examples/llama.py, SMALL below) forward, batch 4 x 128 tokens,
  on a tp=2 mesh and on a dp=2 mesh, logits of every token; each eagerly and as the replay of
  the forward traced once (``dtorch.trace``: one operator per forward, the devices run the
  compiled body).

The baseline is the same model in torch (torch.nn; transformers' ``LlamaForCausalLM``) in
this process with as many torch threads as the dtorch runs use in all (2: two devices of one
thread each - thread mode splits the creating thread's torch threads over its two kernel
streams; process mode has two worker processes of one thread). Every contender's output is
checked once against torch's, so a wrong result cannot pass as a fast one.

A sample is one forward until its result is complete (torch: the call; dtorch: the call and
``graph.sync()``; DTensor: barrier, the call and the collective's wait, the slowest rank's
time). The contenders of a section take turns, one sample each per round, a short pause
between samples (idle OpenMP threads stop spinning), so all of them see the same load on
the shared machine; figures are the minimum and the median over rounds, and the CPU time
per forward of every process taking part (this process by ``time.process_time``, worker
processes by their /proc ticks around each sample, DTensor ranks by their own
``process_time``), which moves far less with the machine's load than wall time does.
Ratios are baseline ms / dtorch ms of the minima (above 1: dtorch is faster).

Run:  PYTHONPATH=. .venv/bin/python benchmarks/models.py [--quick] [--sections mlp resnet llama]
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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from ceiling import LlamaTpShare, ThreadPair, batch_share, mlp_share

#: Torch threads of the one-process baseline: the dtorch runs' devices times one thread.
THREADS = 2
#: Seconds between two samples: lets the previous contender's OpenMP threads fall asleep.
PAUSE = 0.01
BATCH, DIM, HIDDEN = 64, 1024, 4096
IMAGES, IMAGE_SIDE = 8, 224
LLAMA_BATCH, LLAMA_TOKENS = 4, 128


def small_llama_config() -> Any:
    """The small Llama of the ``llama`` section (8 heads, 4 kv heads: both split over 2)."""
    import transformers

    return transformers.LlamaConfig(
        vocab_size=2048,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=LLAMA_TOKENS,
    )


# --- the contenders ---------------------------------------------------------------------------


@dataclass
class Contender:
    """One configuration: ``sample()`` runs one forward and returns (wall s, CPU s) of this
    process; ``pids``: worker processes whose CPU ticks count too."""

    name: str
    sample: Callable[[], tuple[float, float]]
    pids: list[int] = field(default_factory=list)
    #: the configuration's bound (benchmarks/ceiling.py), for the "bound / this" column
    bound: Contender | None = None
    walls: list[float] = field(default_factory=list)
    cpu: float = 0.0


def _timed(forward: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds of ``forward()`` in this process."""
    cpu, start = time.process_time(), time.perf_counter()
    forward()
    return time.perf_counter() - start, time.process_time() - cpu


def _ticks(pids: list[int]) -> float:
    """CPU seconds (user + system, every thread) of ``pids`` so far, from /proc."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue  # a thread that ended meanwhile
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def race(contenders: list[Contender], rounds: int, warmup: int = 2) -> None:
    """Every contender samples once per round, in turn; fills ``walls`` and ``cpu``."""
    for _ in range(warmup):
        for c in contenders:
            c.sample()
    for _ in range(rounds):
        for c in contenders:
            time.sleep(PAUSE)
            ticks = _ticks(c.pids)  # per sample: workers may serve several contenders
            wall, cpu = c.sample()
            c.walls.append(wall)
            c.cpu += cpu + _ticks(c.pids) - ticks
    for c in contenders:
        c.cpu /= rounds


def torch_contender(name: str, forward: Callable[[], object]) -> Contender:
    def sample() -> tuple[float, float]:
        with torch.no_grad():
            return _timed(forward)

    return Contender(name, sample)


def dtorch_contender(name: str, run: Callable[[], Any], graph: Any, pids: list[int]) -> Contender:
    """``run()`` records one forward on ``graph``; a sample waits for it with a sync."""

    def forward() -> None:
        run()
        graph.sync()

    return Contender(name, lambda: _timed(forward), pids)


def bound_contender(
    name: str,
    pair: Any,
    share: Callable[[int], Any],
    joined: Callable[[list[Any]], Any],
    expected: torch.Tensor,
) -> Contender:
    """The bound of a two-device configuration (benchmarks/ceiling.py): ``share(rank)`` on
    both threads of ``pair``, whose ``joined(results)`` must equal torch's ``expected``."""
    check(f"bound {name}", joined(pair.run(share)), expected)
    run = lambda: pair.run(share)  # noqa: E731
    return torch_contender(f"bound: {name}, 2 torch threads, no runtime", run)


def first(results: list[Any]) -> Any:
    """Rank 0's result: a replicated output."""
    return results[0]


def bounded(contenders: list[Contender], bound: Contender) -> list[Contender]:
    """``contenders``, each with ``bound`` as its bound, then ``bound``."""
    for contender in contenders:
        contender.bound = bound
    return [*contenders, bound]


def check(name: str, got: torch.Tensor, expected: torch.Tensor) -> None:
    """``got`` equals torch's result within float32 tolerance (relative to its scale)."""
    scale = float(expected.abs().max())
    torch.testing.assert_close(
        got, expected, rtol=1e-4, atol=1e-4 * max(scale, 1.0), msg=lambda m: f"{name}: {m}"
    )


# --- dtorch graphs in both modes --------------------------------------------------------------


class Graphs:
    """A thread-mode graph and a process-mode graph on a pool of 2 one-thread workers, alive
    for one section; ``building(graph)`` makes ``graph`` the default one while a dtorch.nn
    model is built (layers make their parameters on the default graph)."""

    def __init__(self, stack: ExitStack) -> None:
        import dtorch
        from dtorch.runtime.process import WorkerPool

        self.pool = stack.enter_context(closing(WorkerPool(2, "cpu", threads=1)))
        option = dtorch.GraphOption(per_device_per_process=True, worker_pool=self.pool)
        self.modes = {
            "thread": stack.enter_context(closing(dtorch.Graph())),
            "process": stack.enter_context(closing(dtorch.Graph(option))),
        }

    def pids(self, mode: str) -> list[int]:
        return self.pool.pids if mode == "process" else []

    @staticmethod
    @contextmanager
    def building(graph: Any) -> Iterator[Any]:
        with graph.as_default():
            yield graph


def thread_pair(stack: ExitStack) -> Any:
    """The bounds' two threads (benchmarks/ceiling.py), stopped when the section ends."""
    pair = ThreadPair()
    stack.callback(pair.close)
    return pair


def tp_mesh(dim: str) -> Any:
    import dtorch

    return dtorch.init_device_mesh("cpu", 2, mesh_dim_names=(dim,))


# --- section mlp ------------------------------------------------------------------------------


def mlp_reference() -> tuple[torch.nn.Module, torch.Tensor]:
    """The torch MLP and its input, seeded (every DTensor rank builds the same)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(DIM, HIDDEN), torch.nn.Linear(HIDDEN, DIM))
        return model.eval(), torch.randn(BATCH, DIM)


def _dtensor_mlp_sample(model: torch.nn.Module, x: torch.Tensor) -> tuple[float, float]:
    """One DTensor forward: (the slowest rank's wall s, the ranks' CPU s in all)."""
    import torch.distributed as dist
    from redistribute import _wait

    dist.barrier()
    wall, cpu = _timed(lambda: _wait(model(x)))
    figures = torch.tensor([wall, cpu], dtype=torch.float64)
    slowest, total = figures.clone(), figures.clone()
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    dist.all_reduce(total)
    return float(slowest[0]), float(total[1])


def _dtensor_mlp_main(rank: int, world: int, commands: list[Any], results: Any, tmp: str) -> None:
    """One DTensor rank (spawned): "out" answers the output, "sample" one timed forward."""
    import torch.distributed as dist
    from redistribute import _wait
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp}/rendezvous", rank=rank, world_size=world,
        timeout=timedelta(seconds=120),
    )  # fmt: skip
    model, x = mlp_reference()
    mesh = init_device_mesh("cpu", (world,))
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "1": RowwiseParallel()})
    with torch.no_grad():
        while (command := commands[rank].get()) is not None:
            answer = _wait(model(x)) if command == "out" else _dtensor_mlp_sample(model, x)
            if rank == 0:
                results.put(answer)
    dist.destroy_process_group()


def mlp_section(stack: ExitStack, rounds: int) -> list[Contender]:
    from redistribute import DTensorRanks

    import dtorch

    ref, x = mlp_reference()
    with torch.no_grad():
        expected = ref(x)
    contenders = [torch_contender(f"torch, one process, {THREADS} threads", lambda: ref(x))]
    ranks = stack.enter_context(
        closing(DTensorRanks(2, stack.enter_context(_tmp()), _dtensor_mlp_main))
    )
    check("DTensor", ranks.ask("out"), expected)
    contenders.append(Contender("DTensor + Gloo, tp=2 (2 processes)", lambda: ranks.ask("sample")))
    graphs = Graphs(stack)
    mesh = tp_mesh("tp")
    for mode, graph in graphs.modes.items():
        with graphs.building(graph):
            model = dtorch.nn.Sequential(
                dtorch.nn.ColumnParallelLinear(DIM, HIDDEN, device_mesh=mesh),
                dtorch.nn.RowParallelLinearWithReplicateOutput(HIDDEN, DIM, device_mesh=mesh),
            )
        model.load_state_dict(ref.state_dict())
        xd = dtorch.from_torch(x, device_mesh=mesh, graph=graph)
        check(f"dtorch {mode}", model(xd).to_torch(), expected)
        run = lambda model=model, xd=xd: model(xd)  # noqa: E731
        contenders.append(
            dtorch_contender(f"dtorch tp=2, {mode} mode", run, graph, graphs.pids(mode))
        )
    bound = bound_contender("tp=2", thread_pair(stack), mlp_share(ref, x), first, expected)
    contenders = contenders[:2] + bounded(contenders[2:], bound)
    race(contenders, rounds)
    return contenders


@contextmanager
def _tmp() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        yield tmp


# --- section resnet ---------------------------------------------------------------------------


def resnet_section(stack: ExitStack, rounds: int) -> list[Contender]:
    import dtorch
    from examples import vision
    from tests.models.reference_vision import resnet18

    with torch.random.fork_rng():
        torch.manual_seed(0)
        ref = resnet18().eval()
        x = torch.randn(IMAGES, 3, IMAGE_SIDE, IMAGE_SIDE)
    with torch.no_grad():
        expected = ref(x)
    contenders = [torch_contender(f"torch, one process, {THREADS} threads", lambda: ref(x))]
    graphs = Graphs(stack)
    mesh = tp_mesh("dp")
    for mode, graph in graphs.modes.items():
        with graphs.building(graph):
            model = vision.resnet18(device_mesh=mesh).eval()
        model.load_state_dict(ref.state_dict())
        xd = dtorch.from_torch(x, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
        check(f"dtorch {mode}", model(xd).to_torch(), expected)
        run = lambda model=model, xd=xd: model(xd)  # noqa: E731
        contenders.append(
            dtorch_contender(f"dtorch dp=2, {mode} mode", run, graph, graphs.pids(mode))
        )
    share = batch_share(ref, x)
    bound = bound_contender("dp=2", thread_pair(stack), share, torch.cat, expected)
    contenders = contenders[:1] + bounded(contenders[1:], bound)
    race(contenders, rounds)
    return contenders


# --- section llama ----------------------------------------------------------------------------


def llama_section(stack: ExitStack, rounds: int) -> list[Contender]:
    import transformers

    import dtorch
    from examples import llama

    config = small_llama_config()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        ref = transformers.LlamaForCausalLM(config).eval()
        ids = torch.randint(0, config.vocab_size, (LLAMA_BATCH, LLAMA_TOKENS))
    with torch.no_grad():
        expected = ref(ids).logits
    contenders = [
        torch_contender(f"transformers, one process, {THREADS} threads", lambda: ref(ids))
    ]
    graphs, pair = Graphs(stack), thread_pair(stack)
    shares = {
        "tp": (LlamaTpShare(ref, ids), first),
        "dp": (batch_share(lambda part: ref(part).logits, ids), torch.cat),
    }
    for dim in ("tp", "dp"):
        mesh, start = tp_mesh(dim), len(contenders)
        for mode, graph in graphs.modes.items():
            with graphs.building(graph):
                model = llama.load_hf_weights(llama.build_llama(config, mesh), ref)
            check(f"dtorch {dim} {mode}", model(model.place_ids(ids, graph)).to_torch(), expected)
            run = lambda model=model, graph=graph: model(model.place_ids(ids, graph))  # noqa: E731
            name = f"dtorch {dim}=2, {mode} mode"
            contenders.append(dtorch_contender(name, run, graph, graphs.pids(mode)))
            program = dtorch.trace(model, model.place_ids(ids, graph))  # a replay per forward
            check(f"traced {dim} {mode}", program(model.place_ids(ids, graph)).to_torch(), expected)
            replay = lambda p=program, m=model, g=graph: p(m.place_ids(ids, g))  # noqa: E731
            name = f"dtorch {dim}=2, {mode} mode, traced"
            contenders.append(dtorch_contender(name, replay, graph, graphs.pids(mode)))
        bound = bound_contender(f"{dim}=2", pair, *shares[dim], expected)
        contenders[start:] = bounded(contenders[start:], bound)
    race(contenders, rounds)
    return contenders


# --- the report -------------------------------------------------------------------------------

SECTIONS: dict[str, tuple[str, Callable[[ExitStack, int], list[Contender]]]] = {
    "mlp": (f"MLP [{BATCH}, {DIM}] -> {HIDDEN} -> {DIM}", mlp_section),
    "resnet": (f"ResNet-18, batch {IMAGES} x 3 x {IMAGE_SIDE} x {IMAGE_SIDE}", resnet_section),
    "llama": (f"Llama (small), batch {LLAMA_BATCH} x {LLAMA_TOKENS} tokens", llama_section),
}


def report_rows(model: str, contenders: list[Contender]) -> list[str]:
    """Markdown rows: ms (min, median), CPU ms per forward, ratios to torch, DTensor and the
    configuration's bound."""
    torch_ms = min(contenders[0].walls)
    dtensor = [c for c in contenders if c.name.startswith("DTensor")]
    dtensor_ms = min(dtensor[0].walls) if dtensor else None
    rows = []
    for c in contenders:
        best = min(c.walls)
        vs_dtensor = "" if dtensor_ms is None else f"{dtensor_ms / best:.2f}"
        vs_bound = "" if c.bound is None else f"{min(c.bound.walls) / best:.2f}"
        rows.append(
            f"| {model} | {c.name} | {best * 1e3:.2f} | {statistics.median(c.walls) * 1e3:.2f} "
            f"| {c.cpu * 1e3:.1f} | {torch_ms / best:.2f} | {vs_dtensor} | {vs_bound} |"
        )
    return rows


def _load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (5)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--sections", nargs="+", choices=list(SECTIONS), default=list(SECTIONS))
    args = parser.parse_args()
    rounds = 5 if args.quick else args.rounds
    torch.set_num_threads(THREADS)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; load average before: {_load()}\n")
    lines = [
        "| model | configuration | ms (min) | ms (median) | CPU ms | torch / this "
        "| DTensor / this | bound / this |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in args.sections:
        title, section = SECTIONS[name]
        with ExitStack() as stack:
            lines += report_rows(title, section(stack, rounds))
        print(f"{name} done, load average {_load()}", flush=True)
    print("\n" + "\n".join(lines))
    print(f"\nload average after: {_load()}; {rounds} rounds after 2 warm-up rounds")
    print("command:", " ".join(["PYTHONPATH=.", os.path.relpath(sys.executable), *sys.argv]))


if __name__ == "__main__":
    main()
