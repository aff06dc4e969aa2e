"""Multi-host dtorch: 4 workers on two simulated hosts vs the same 4 on one host, one run.

Contenders, each a process-mode graph on a pool of 4 one-thread workers:

* ``two hosts``: a cluster served by ``MainNode`` on 127.0.0.1, its workers started through
  the worker entry point (``python -m dtorch.worker --main ADDR --host H ...``, the cluster
  token in DTORCH_CLUSTER_TOKEN) posing as hosts 127.0.0.2 (ranks 0-1) and 127.0.0.3 (ranks
  2-3), so devices 0-1 and 2-3 exchange across "hosts" (TCP on loopback, CURVE-secured
  channels) - the logic of tests/cluster/cluster_setup.py, copied. Its CPU groups take the
  default, authenticated transports: shared memory within a host, the network store (HMAC)
  across hosts.
* ``two hosts, Gloo``: the same on a cluster of its own (a ``ClusterNode``) whose controller
  asks for Gloo (``cpu_collectives="gloo"``: unauthenticated listeners), the price the default
  pays for authentication.
* ``one host``: a cluster of its own whose 4 workers, started the same way, all run on
  127.0.0.2 (default transports: shared memory).
* ``local pool``: ``dtorch.runtime.process.WorkerPool(4, "cpu")`` (workers forked by this
  process, no rendezvous).

Rows: ``Tensor.redistribute`` of a float32 [rows, 1024] tensor on a 1-D mesh of 4 devices
and on a 2x2 mesh (dim 0 spans the two hosts, dim 1 stays within one), and a forward of the
tensor-parallel MLP of benchmarks/models.py (x [64, 1024] -> ColumnParallelLinear(1024,
4096) -> RowParallelLinearWithReplicateOutput(4096, 1024), tp mesh of 4). Every contender's
result is checked once against torch, so a wrong result cannot pass as a fast one. A sample
is (start; redistribute or forward; ``graph.sync()``; stop); the contenders of a row take
turns, one sample each per round, so all see the same load on the shared machine; figures
are medians over rounds after 2 warm-up rounds. The ratios are two-hosts ms over two-hosts-
Gloo ms (what authentication costs), over one-host ms (the cost of crossing hosts; 1 means
none) and over local-pool ms.

Every worker is stopped at the end (STOP, then SIGKILL after a grace period), also when a
row fails. The machine is shared: the load average is printed before and after.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/multi_host.py [--quick] [--repeats 15]
      [--rows 1024 4096]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from models import BATCH, DIM, HIDDEN, check, mlp_reference
from redistribute import COLS, Case, full_tensor, placements

import dtorch
from dtorch.cluster import MainNode
from dtorch.cluster.main_node import ClusterNode, cluster_token
from dtorch.runtime.process import WorkerPool

TWO_HOSTS = ("127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3")
ONE_HOST = ("127.0.0.2",) * 4
#: The benchmark's own cluster token (hex), given to its workers only.
TOKEN = "b3" * 32
#: Seconds a cluster may take to start: 12 worker interpreters on 2 shared cores.
READY_TIMEOUT = 120.0
#: Seconds a worker may take to exit after STOP before it is killed.
GRACE = 10.0


def cases(quick: bool) -> list[Case]:
    """The redistributions: 1-D mesh of 4 and a 2x2 mesh (one of each with ``quick``)."""
    flat = [
        Case("S(0)->R", (4,), ("S0",), ("R",)),
        Case("R->S(1)", (4,), ("R",), ("S1",)),
        Case("S(0)->S(1)", (4,), ("S0",), ("S1",)),
        Case("P->R", (4,), ("P",), ("R",)),
        Case("P->S(0)", (4,), ("P",), ("S0",)),
    ]
    square = [
        Case("(S(0),S(1))->(R,R)", (2, 2), ("S0", "S1"), ("R", "R")),
        Case("(P,P)->(R,R)", (2, 2), ("P", "P"), ("R", "R")),
        Case("(S(0),R)->(R,S(0))", (2, 2), ("S0", "R"), ("R", "S0")),
    ]
    return [flat[0], square[0]] if quick else flat + square


# --- the clusters -----------------------------------------------------------------------------


class Cluster:
    """Workers started through ``python -m dtorch.worker`` on ``hosts`` (one per rank), joined
    to ``MainNode`` (``main_node=True``, the public API, one per process) or to a
    ``ClusterNode`` of their own; ``close`` stops them (STOP, then SIGKILL after ``GRACE``)."""

    def __init__(
        self, hosts: Sequence[str], *, main_node: bool, cpu_collectives: str = "store"
    ) -> None:
        self.node: ClusterNode | None = None
        if main_node:
            MainNode.set_address("127.0.0.1:0", token=TOKEN, cpu_collectives=cpu_collectives)
            address = MainNode.address()
        else:
            self.node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN), cpu_collectives)
            address = self.node.address
        self.processes: list[subprocess.Popen[bytes]] = []
        try:
            for rank, host in enumerate(hosts):
                self.processes.append(_start_worker(address, host, rank, len(hosts)))
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def graph(self) -> dtorch.Graph:
        """A process-mode graph on the cluster's workers, once all of them are ready."""
        if self.node is None:
            MainNode.wait_cluster_ready(READY_TIMEOUT)
            pool: Any = MainNode.worker_pool()
        else:
            pool = self.node.wait_ready(READY_TIMEOUT)
        return dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))

    def close(self) -> list[int | None]:
        """Stop the cluster; the workers' exit codes."""
        if self.node is None:
            MainNode.close()
        else:
            self.node.close()
        deadline = time.monotonic() + GRACE
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(GRACE)
        return [p.returncode for p in self.processes]


def _start_worker(address: str, host: str, rank: int, world: int) -> subprocess.Popen[bytes]:
    environ = dict(os.environ, DTORCH_CLUSTER_TOKEN=TOKEN)
    # the worker imports this interpreter's dtorch and torch, wherever they come from
    environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if os.path.isabs(p))
    command = [
        sys.executable, "-m", "dtorch.worker", "--main", address, "--host", host,
        "--rank", str(rank), "--world-size", str(world), "--threads", "1",
        "--device-type", "cpu",
    ]  # fmt: skip
    return subprocess.Popen(command, env=environ, stdin=subprocess.DEVNULL)


@dataclass
class Contender:
    """One configuration's graph; ``walls``: the current row's samples (seconds)."""

    name: str
    graph: dtorch.Graph
    walls: list[float] = field(default_factory=list)


def contenders(stack: ExitStack) -> list[Contender]:
    """The four graphs; the clusters start together (their workers boot in parallel)."""
    two = stack.enter_context(closing(Cluster(TWO_HOSTS, main_node=True)))
    gloo = Cluster(TWO_HOSTS, main_node=False, cpu_collectives="gloo")
    stack.enter_context(closing(gloo))
    one = stack.enter_context(closing(Cluster(ONE_HOST, main_node=False)))
    local = stack.enter_context(closing(WorkerPool(4, "cpu", threads=1)))
    option = dtorch.GraphOption(per_device_per_process=True, worker_pool=local)
    graphs = [two.graph(), gloo.graph(), one.graph(), dtorch.Graph(option)]
    names = ["two hosts", "two hosts, Gloo", "one host", "local pool"]
    return [
        Contender(n, stack.enter_context(closing(g))) for n, g in zip(names, graphs, strict=True)
    ]


# --- timing -----------------------------------------------------------------------------------


def race(players: list[Contender], runs: list[Callable[[], object]], repeats: int) -> None:
    """Every contender runs once per round, in turn (run + sync); fills ``walls``."""
    for player in players:
        player.walls = []
    for i in range(repeats + 2):
        for player, run in zip(players, runs, strict=True):
            with _naming(player):
                start = time.perf_counter()
                run()
                player.graph.sync()
            if i >= 2:  # two warm-up rounds
                player.walls.append(time.perf_counter() - start)


def prepare(players: list[Contender], make: Callable[[dtorch.Graph], Any]) -> list[Any]:
    """``make(graph)`` for every contender (its checked run)."""
    runs = []
    for player in players:
        with _naming(player):
            runs.append(make(player.graph))
    return runs


@contextmanager
def _naming(player: Contender) -> Iterator[None]:
    # a failure says which configuration it happened on
    try:
        yield
    except Exception as error:
        error.add_note(f"(on the {player.name} graph)")
        raise


def redistribution(case: Case, rows: int, graph: dtorch.Graph) -> Callable[[], object]:
    """The row's redistribute on ``graph``, its result checked once against torch."""
    mesh = dtorch.init_device_mesh("cpu", case.mesh_shape)
    src = placements(case.src, dtorch.Shard, dtorch.Replicate, dtorch.Partial)
    dst = placements(case.dst, dtorch.Shard, dtorch.Replicate, dtorch.Partial)
    full = full_tensor(rows)
    source = dtorch.from_torch(full, device_mesh=mesh, placements=src, graph=graph)
    result = source.redistribute(mesh, dst)
    if list(result.placements) != dst:
        raise AssertionError(f"{case.name}: got placements {result.placements}, wanted {dst}")
    torch.testing.assert_close(result.to_torch(), full, rtol=0, atol=0)
    return lambda: source.redistribute(mesh, dst)


def mlp_forward(graph: dtorch.Graph) -> Callable[[], object]:
    """The tp=4 MLP's forward on ``graph``, its output checked once against torch's."""
    ref, x = mlp_reference()
    with torch.no_grad():
        expected = ref(x)
    mesh = dtorch.init_device_mesh("cpu", 4, mesh_dim_names=("tp",))
    with graph.as_default():
        model = dtorch.nn.Sequential(
            dtorch.nn.ColumnParallelLinear(DIM, HIDDEN, device_mesh=mesh),
            dtorch.nn.RowParallelLinearWithReplicateOutput(HIDDEN, DIM, device_mesh=mesh),
        )
    model.load_state_dict(ref.state_dict())
    xd = dtorch.from_torch(x, device_mesh=mesh, graph=graph)
    check("MLP", model(xd).to_torch(), expected)
    return lambda: model(xd)


# --- the report -------------------------------------------------------------------------------


def _load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def report_row(what: str, shape: str, mesh: str, players: list[Contender]) -> str:
    """A markdown row: the contenders' median ms and the three ratios."""
    two, gloo, one, local = (statistics.median(p.walls) for p in players)
    figures = " | ".join(f"{t * 1e3:.2f}" for t in (two, gloo, one, local))
    ratios = " | ".join(f"{two / t:.2f}" for t in (gloo, one, local))
    return f"| {what} | {shape} | {mesh} | {figures} | {ratios} |"


HEADER = [
    "| row | shape | mesh | two hosts | two hosts, Gloo | one host | local pool | two / Gloo "
    "| two / one | two / local |",
    "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
]


def measure(players: list[Contender], quick: bool, sizes: Sequence[int], repeats: int) -> None:
    """Print the table, a row at a time (so a long run shows progress)."""
    print("\n".join(HEADER), flush=True)
    for case in cases(quick):
        for rows in sizes:
            make = partial(redistribution, case, rows)
            race(players, prepare(players, make), repeats)
            mesh = "x".join(map(str, case.mesh_shape))
            print(report_row(case.name, f"[{rows}, {COLS}]", mesh, players), flush=True)
    race(players, prepare(players, mlp_forward), repeats)
    shape = f"[{BATCH}, {DIM}] -> {HIDDEN} -> {DIM}"
    print(report_row("TP MLP forward", shape, "tp=4", players), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one row of each kind, 3 repeats")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--rows", type=int, nargs="+", default=[1024, 4096])
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    sizes = args.rows[:1] if args.quick else args.rows
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, one torch thread per worker")
    print(f"load average before: {_load()} (a shared machine skews every figure)")
    started = time.perf_counter()
    with ExitStack() as stack:
        players = contenders(stack)
        print(f"16 workers ready in {time.perf_counter() - started:.0f} s\n", flush=True)
        measure(players, args.quick, sizes, repeats)
    print(f"\nload average after: {_load()}; medians of {repeats} rounds after 2 warm-up")
    print(f"{time.perf_counter() - started:.0f} s in all, workers stopped")
    print("command:", " ".join([os.path.relpath(sys.executable), *sys.argv]))


if __name__ == "__main__":
    main()
