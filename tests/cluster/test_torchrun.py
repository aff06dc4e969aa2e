"""Workers started by torchrun, as on two machines: two torchrun agents (one per simulated
host) meet in torchrun's own c10d rendezvous, start 2 workers each with RANK/WORLD_SIZE/
LOCAL_RANK, and the workers join the controller's cluster."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import dtorch
from dtorch.cluster.main_node import ClusterNode, cluster_token
from tests.cluster.cluster_setup import HOSTS, TOKEN

pytestmark = pytest.mark.timeout(240)


def _free_port() -> int:
    """A free port below the ephemeral range (32768-60999 here): torchrun's agents bind it a
    few seconds later, and a port from that range may meanwhile become the local port of any
    outgoing connection on the machine (a reconnecting ZeroMQ socket takes a new one every
    100 ms), after which no agent can serve the rendezvous and both wait as clients."""
    start = random.randrange(20000, 30000)
    for port in range(start, start + 2000):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {start}..{start + 1999}")


def _torchrun(
    node_rank: int, host: str, rdzv: str, main: str, logs: Path
) -> subprocess.Popen[bytes]:
    """A torchrun agent; ``logs``: its log directory (without one torchrun makes a
    ``torchelastic_*`` directory in the temp dir and leaves it there)."""
    environ = dict(os.environ, DTORCH_CLUSTER_TOKEN=TOKEN)
    environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if os.path.isabs(p))
    command = [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(node_rank),
        "--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv, "--local-addr", host,
        "--log-dir", str(logs / f"agent-{node_rank}"),
        "-m", "dtorch.worker", "--main", main, "--host", host,
        "--threads", "1", "--device-type", "cpu",
    ]  # fmt: skip
    return subprocess.Popen(command, env=environ, stdin=subprocess.DEVNULL)


def test_a_cluster_of_torchrun_workers_matches_torch(tmp_path: Path) -> None:
    node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    rdzv = f"127.0.0.1:{_free_port()}"
    agents = [_torchrun(i, host, rdzv, node.address, tmp_path) for i, host in enumerate(HOSTS)]
    try:
        pool = node.wait_ready(180)
        assert pool.workers == 4 and sorted(set(pool.hosts)) == list(HOSTS)
        graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
        mesh = dtorch.init_device_mesh("cpu", (2, 2))
        full = torch.randn(6, 8)
        x = dtorch.from_torch(
            full, device_mesh=mesh, placements=[dtorch.Shard(0), dtorch.Shard(1)], graph=graph
        )
        whole = (x * 2 + 1).redistribute(mesh, [dtorch.Replicate(), dtorch.Replicate()])
        torch.testing.assert_close(whole.to_torch(), full * 2 + 1)
        torch.testing.assert_close(x.sum().to_torch(), full.sum())
        graph.close()
    finally:
        node.close()
        codes = []
        for agent in agents:
            try:
                codes.append(agent.wait(30))
            except subprocess.TimeoutExpired:
                agent.kill()
                codes.append(agent.wait())
    assert codes == [0, 0], f"torchrun agents exited with {codes}"
