"""The two runners under test: graphs of either kind, one shared pool of worker processes.

The runtime and API suites take the ``graph`` fixture (or ``make_graph``), parametrized over
``thread`` and ``process``; process-mode graphs lease one pool of worker processes that the
whole pytest run shares (torch's import costs seconds per process), and a pool a test broke
is replaced. A second process-mode graph alive at the same time gets a small pool of its own.
``pause_devices`` stops a graph's devices for a while, the same way for both runners, for
tests of what happens while the devices are behind.

Example:
    >>> keeper = PoolKeeper(workers=2)                   # doctest: +SKIP
    >>> g = keeper.graph("process"); g.runner.parties    # doctest: +SKIP
    2
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

import torch

import dtorch
from dtorch.runtime.process import WorkerPool

RUNNERS = ("thread", "process")
#: Workers of the shared pool: three, so that the tests meet every backend (a worker holding
#: every rank of a group, several ranks, or one rank per process: Gloo).
WORKERS = 3
#: Workers of the pool a second, concurrent process-mode graph gets.
EXTRA_WORKERS = 2


class PoolKeeper:
    """One healthy shared WorkerPool, started on first use, replaced once broken."""

    def __init__(self, workers: int = WORKERS) -> None:
        self._workers = workers
        self._pool: WorkerPool | None = None

    def pool(self) -> WorkerPool:
        pool = self._pool
        if pool is None or pool.broken is not None or pool.closed:
            if pool is not None:
                pool.close()
            pool = self._pool = WorkerPool(self._workers, "cpu")
        return pool

    def graph(self, runner: str) -> dtorch.Graph:
        """A new graph of ``runner`` (on the shared pool, unless another graph holds it)."""
        if runner == "thread":
            return dtorch.Graph(dtorch.GraphOption(per_device_per_process=False))
        pool = self.pool()
        if pool.leased:
            option = dtorch.GraphOption(per_device_per_process=True, num_workers=EXTRA_WORKERS)
        else:
            option = dtorch.GraphOption(per_device_per_process=True, worker_pool=pool)
        return dtorch.Graph(option)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()


@contextlib.contextmanager
def pause_devices(graph: dtorch.Graph) -> Iterator[None]:
    """Within the block, the graph's devices run nothing (operators recorded meanwhile wait).

    Thread mode: an operator whose kernel blocks its stream until the block ends; process
    mode: the worker processes are stopped (SIGSTOP) and continued (SIGCONT) after it.
    """
    pool = getattr(graph.runner, "pool", None)
    if pool is None:
        with _blocked_stream(graph):
            yield
        return
    for pid in pool.pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pool.pids:
            os.kill(pid, signal.SIGCONT)


@contextlib.contextmanager
def _blocked_stream(graph: dtorch.Graph) -> Iterator[None]:
    from dtorch.api.record import emit
    from dtorch.ir.opkind import OpKind
    from dtorch.ir.params import NvtxParam
    from dtorch.ir.rules import OutputMeta
    from dtorch.kernels.table import LOCAL_KERNELS, register_local_kernel

    gate = threading.Event()

    def blocking(ctx: object, device: int, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        assert gate.wait(120), "the test never let the devices go on"
        return [inputs[0]]

    register_local_kernel(OpKind.Nvtx, blocking)  # a kind with no kernel of its own
    try:
        x = dtorch.ones(1, graph=graph)
        meta = OutputMeta((1,), torch.float32, ())
        emit(x._result, graph, "block", NvtxParam(), (x._operand,), (meta,), x.device_mesh)
        yield
    finally:
        gate.set()
        graph.sync()
        del LOCAL_KERNELS[OpKind.Nvtx]
