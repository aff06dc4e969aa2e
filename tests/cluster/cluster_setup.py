"""Two simulated hosts on one machine: workers started through the worker entry point.

``Cluster`` serves the controller's rendezvous (``MainNode``) on 127.0.0.1 and starts
``python -m dtorch.worker`` processes posing as hosts 127.0.0.2 and 127.0.0.3 (each binds
its host's address), exactly as torchrun would start them on two machines, with the cluster
token in their environment. ``close`` stops them (STOP, then SIGKILL after a grace period).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence

import dtorch
from dtorch.cluster import ClusterPool, MainNode
from dtorch.cluster.main_node import ClusterNode, cluster_token

HOSTS = ("127.0.0.2", "127.0.0.3")
TOKEN = "5a" * 32


class Cluster:
    """A controller and its workers: ``per_host`` workers on each of ``hosts``. Through
    ``MainNode`` (the public API; one per process), or with ``main_node=False`` through a
    ``ClusterNode`` of its own (tests that need a second cluster, e.g. to break it);
    ``cpu_collectives`` as ``MainNode.set_address`` takes it."""

    def __init__(
        self,
        hosts: Sequence[str] = HOSTS,
        per_host: int = 2,
        *,
        extra: Sequence[str] = (),
        main_node: bool = True,
        token: str = TOKEN,
        cpu_collectives: str = "store",
    ) -> None:
        self.node: ClusterNode | None = None
        if main_node:
            MainNode.set_address("127.0.0.1:0", token=TOKEN, cpu_collectives=cpu_collectives)
            self.address = MainNode.address()
        else:
            self.node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN), cpu_collectives)
            self.address = self.node.address
        self.token = token
        world = len(hosts) * per_host
        self.hosts = [h for h in hosts for _ in range(per_host)]
        self.processes = [
            self._start(rank, host, world, extra) for rank, host in enumerate(self.hosts)
        ]

    def _start(
        self, rank: int, host: str, world: int, extra: Sequence[str]
    ) -> subprocess.Popen[bytes]:
        environ = dict(os.environ, DTORCH_CLUSTER_TOKEN=self.token)
        environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if os.path.isabs(p))
        command = [
            sys.executable,
            "-m",
            "dtorch.worker",
            "--main",
            self.address,
            "--host",
            host,
            "--rank",
            str(rank),
            "--world-size",
            str(world),
            "--threads",
            "1",
            "--device-type",
            "cpu",
            *extra,
        ]
        return subprocess.Popen(command, env=environ, stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout: float = 120.0) -> ClusterPool:
        if self.node is not None:
            return self.node.wait_ready(timeout)
        MainNode.wait_cluster_ready(timeout)
        return MainNode.worker_pool()

    def pool(self) -> ClusterPool:
        pool = MainNode.worker_pool() if self.node is None else self.node.pool
        assert pool is not None, "the cluster is not ready"
        return pool

    def graph(self) -> dtorch.Graph:
        option = dtorch.GraphOption(per_device_per_process=True, worker_pool=self.pool())
        return dtorch.Graph(option)

    def close(self, grace: float = 10.0) -> list[int | None]:
        """Stop the cluster; the workers' exit codes."""
        if self.node is None:
            MainNode.close()
        else:
            self.node.close()
        deadline = time.monotonic() + grace
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return [p.returncode for p in self.processes]
