"""How a cluster's CPU groups exchange tensors: by default over stores that authenticate
every peer (shared memory between the workers of a host, the network store across hosts),
with Gloo - whose listeners accept anyone who reaches a worker's ``--host`` - only when the
controller asks for it (``MainNode.set_address(..., cpu_collectives="gloo")``).

Four workers on two simulated hosts (ranks 0-1 on 127.0.0.2, 2-3 on 127.0.0.3) run
collectives over groups within a host and across hosts, equal to torch either way. Gloo listens
on every rank of a group; the network store only on its first rank, and shared memory nowhere:
so with the stores, workers 2 and 3 open no TCP listener until a group is led by their device
(fetching a shard makes one: each device with device 0).
"""

from __future__ import annotations

import pytest
import torch

import dtorch
from dtorch.cluster import MainNode
from dtorch.cluster.records import ProgramRecord
from dtorch.errors import RendezvousError
from tests.cluster.cluster_setup import TOKEN, Cluster
from tests.tcp_table import LISTEN, own_inodes, tcp_sockets

pytestmark = pytest.mark.timeout(180)

S0, S1, R = dtorch.Shard(0), dtorch.Shard(1), dtorch.Replicate()


def _listeners(pid: int) -> set[tuple[str, int]]:
    """(hex address, port) of each TCP socket process ``pid`` listens on."""
    mine = own_inodes(pid)
    listening = (s for s in tcp_sockets() if s.state == LISTEN and s.inode in mine)
    return {(s.local_address, s.local_port) for s in listening}


def _gathers_match_torch(graph: dtorch.Graph, full: torch.Tensor) -> None:
    """All-gathers over groups within a host ((0, 1), (2, 3)), across hosts ((0, 2), (1, 3))
    and of all four; read from device 0's Replicate: no fetch group."""
    square = dtorch.init_device_mesh("cpu", (2, 2))
    x = dtorch.from_torch(full, device_mesh=square, placements=[S0, S1], graph=graph)
    torch.testing.assert_close(x.redistribute(square, [R, R]).to_torch(), full)
    line = dtorch.init_device_mesh("cpu", (4,))
    y = dtorch.from_torch(full, device_mesh=line, placements=[S1], graph=graph)
    torch.testing.assert_close(y.redistribute(line, [R]).to_torch(), full)


def _reductions_match_torch(graph: dtorch.Graph, full: torch.Tensor) -> None:
    """Partial sums within and across hosts, an all-to-all, and fetches of shards (groups
    of each device with device 0)."""
    square = dtorch.init_device_mesh("cpu", (2, 2))
    x = dtorch.from_torch(full, device_mesh=square, placements=[S0, S1], graph=graph)
    torch.testing.assert_close(x.sum(dim=1).to_torch(), full.sum(dim=1))
    torch.testing.assert_close(x.sum().to_torch(), full.sum())
    line = dtorch.init_device_mesh("cpu", (4,))
    y = dtorch.from_torch(full, device_mesh=line, placements=[S1], graph=graph)
    torch.testing.assert_close(y.redistribute(line, [S0]).to_torch(), full)
    torch.testing.assert_close((y @ y.T.redistribute(line, [S0])).to_torch(), full @ full.T)


@pytest.mark.parametrize("choice", ["store", "gloo"])
def test_cpu_groups_listen_only_where_the_choice_says(choice: str) -> None:
    full = torch.randn(8, 6, generator=torch.Generator().manual_seed(5))
    cluster = Cluster(main_node=False, cpu_collectives=choice)
    try:
        cluster.wait_ready()
        graph = cluster.graph()
        _gathers_match_torch(graph, full)
        listening = [_listeners(p.pid) for p in cluster.processes]
        _reductions_match_torch(graph, full)
        graph.close()
    finally:
        codes = cluster.close()
    assert codes == [0, 0, 0, 0], codes
    hosts = {"0200007F", "0300007F"}  # 127.0.0.2, 127.0.0.3: every listener on its --host
    assert all(address in hosts for opened in listening for address, _ in opened), listening
    if choice == "store":  # a network store for (0, 2), (1, 3) and (0, 1, 2, 3), led by 0 and 1
        assert [len(opened) for opened in listening] == [2, 1, 0, 0], listening
    else:
        assert all(listening), f"Gloo listens on every rank: {listening}"


@pytest.fixture
def own_main_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """MainNode is one per process: the folder's shared cluster may hold it; it gets it back."""
    from dtorch.runtime.process.runner import ClusterDefault

    monkeypatch.setattr(MainNode, "_node", None)
    monkeypatch.setattr(ClusterDefault, "pool", ClusterDefault.pool)


@pytest.mark.usefixtures("own_main_node")
def test_an_unknown_choice_is_refused_before_anything_listens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(RendezvousError, match=r"cpu_collectives is one of \['store', 'gloo'\]"):
        MainNode.set_address("127.0.0.1:0", cpu_collectives="nccl")
    with pytest.raises(RendezvousError, match="no cluster"):
        MainNode.address()  # nothing was served
    with pytest.raises(RendezvousError, match="cpu_collectives is one of"):
        ProgramRecord("n", "127.0.0.1:1", "i", "a", "b", "c", "d", "GLOO")
    monkeypatch.setenv("DTORCH_CLUSTER_CPU_COLLECTIVES", "tcp")
    with pytest.raises(RendezvousError, match="DTORCH_CLUSTER_CPU_COLLECTIVES: cpu_collectives"):
        MainNode.set_address("127.0.0.1:0")
    with pytest.raises(RendezvousError, match="no cluster"):
        MainNode.address()


@pytest.mark.usefixtures("own_main_node")
def test_the_environment_gives_the_default_and_the_argument_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A DTorch program that calls ``set_address`` unchanged can be put on Gloo from outside."""
    monkeypatch.setenv("DTORCH_CLUSTER_CPU_COLLECTIVES", "gloo")
    for argument, expected in ((None, "gloo"), ("store", "store")):
        MainNode.set_address("127.0.0.1:0", token=TOKEN, cpu_collectives=argument)
        try:
            assert MainNode._current().cpu_collectives == expected
        finally:
            MainNode.close()
    monkeypatch.delenv("DTORCH_CLUSTER_CPU_COLLECTIVES")
    MainNode.set_address("127.0.0.1:0", token=TOKEN)
    try:
        assert MainNode._current().cpu_collectives == "store"
    finally:
        MainNode.close()
