"""A cluster that loses a host, a controller that dies, and intruders: pending futures fail in
time naming the host, orphaned workers exit, forged records and wrong tokens are refused, and
the rendezvous store listens on the named interface only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

import dtorch
from dtorch.cluster.gated_client import GatedStoreClient
from dtorch.cluster.main_node import ClusterNode, cluster_token
from dtorch.cluster.rendezvous import connect_store, worker_key
from dtorch.errors import GraphError, RendezvousError, WorkerDiedError
from tests.cluster.cluster_setup import TOKEN, Cluster
from tests.tcp_table import LISTEN, own_inodes, tcp_sockets

pytestmark = pytest.mark.timeout(180)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _listening_addresses(port: int) -> set[str]:
    """The local addresses of this process's TCP sockets that listen on ``port`` (another
    process may listen on the same port number of another address: a flaky failure once)."""
    mine = own_inodes()
    return {
        s.local_address
        for s in tcp_sockets()
        if s.state == LISTEN and s.local_port == port and s.inode in mine
    }


def test_losing_a_host_fails_pending_futures_in_time_naming_it():
    cluster = Cluster(per_host=1, main_node=False)
    try:
        cluster.wait_ready()
        graph = cluster.graph()
        mesh = dtorch.init_device_mesh("cpu", (2,))
        x = dtorch.from_torch(
            torch.ones(4, 4), device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph
        )
        assert torch.equal((x + 1).to_torch(), torch.full((4, 4), 2.0))
        for process in cluster.processes[1:]:  # every worker of host 127.0.0.3
            process.send_signal(signal.SIGKILL)
            process.wait()
        start = time.monotonic()
        on_lost_host = dtorch.DeviceMesh("cpu", [1])  # device 1: worker 1, on 127.0.0.3
        y = dtorch.from_torch(torch.ones(3), device_mesh=on_lost_host, graph=graph) + 1
        with pytest.raises(
            WorkerDiedError, match=r"worker 1 \(devices 1, 3, .* on host 127\.0\.0\.3"
        ):
            y.to_torch()
        assert time.monotonic() - start < 10.0
        with pytest.raises(dtorch.DTorchError):
            graph.sync()
        graph.close()
        with pytest.raises(GraphError, match=r"cluster is broken \(worker 1 .* form a new one"):
            cluster.graph()
    finally:
        codes = cluster.close()
    assert codes[1] == -signal.SIGKILL and codes[0] == 0, codes


def _ones_on_two_hosts(cluster: Cluster, n: int) -> tuple[dtorch.Graph, dtorch.Tensor]:
    """A graph on the ready ``cluster`` (one worker a host) and ones(n) sharded over both."""
    cluster.wait_ready()
    graph = cluster.graph()
    mesh = dtorch.init_device_mesh("cpu", (2,))
    return graph, dtorch.ones(n, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)


@pytest.mark.parametrize(
    ("choice", "victim"),
    [("store", 1), ("store", 0), ("gloo", 1)],
    ids=["store-peer", "store-coordinator", "gloo"],
)
def test_a_collective_with_a_lost_worker_fails_with_its_death(choice: str, victim: int):
    """The future raises the death (WorkerDiedError naming the worker) once the heartbeats'
    silence tells the controller, as in process mode, not a KernelError quoting the backend.
    Then the controller tells the survivor: it abandons the collective it waits in and exits
    at the STOP. Gloo's survivor hears "connection reset by peer" itself; the network store's
    (the default across hosts) would wait for the lost peer until the comm timeout, or, when
    the lost worker served the store (``store-coordinator``), for its answer."""
    cluster = Cluster(per_host=1, main_node=False, cpu_collectives=choice)
    try:
        graph, x = _ones_on_two_hosts(cluster, 4)
        assert x.sum().item() == 4.0
        cluster.processes[victim].send_signal(signal.SIGKILL)
        cluster.processes[victim].wait()
        start = time.monotonic()
        host = f"127\\.0\\.0\\.{2 + victim}"
        with pytest.raises(
            WorkerDiedError, match=rf"worker {victim} \(devices {victim}, .* {host}"
        ):
            x.sum().to_torch_async().get(timeout_s=20)
        assert time.monotonic() - start < 10.0
        graph.close()
    finally:
        codes = cluster.close()
    assert codes[victim] == -signal.SIGKILL, codes
    # the survivor ended its collective and read the STOP (an orphan, left waiting until the
    # controller's beats end, exits 2)
    assert codes[1 - victim] == 0, codes


def test_a_worker_stalled_for_less_than_the_liveness_verdict_still_joins_new_groups():
    """Stopped 4 s (not lost: the verdict takes 5), a worker's store connection was dropped
    by a 3 s heartbeat, and its next group's rendezvous failed unreported: the collective
    hung until the comm timeout. The store's heartbeats outlast the verdict now."""
    cluster = Cluster(per_host=1, main_node=False)
    try:
        graph, x = _ones_on_two_hosts(cluster, 1000)
        assert (x + 1).to_torch().sum().item() == 2000.0  # no collective, no group yet
        cluster.processes[1].send_signal(signal.SIGSTOP)
        time.sleep(4.0)
        cluster.processes[1].send_signal(signal.SIGCONT)
        assert x.sum().to_torch_async().get(timeout_s=30).item() == 1000.0
        graph.close()
    finally:
        codes = cluster.close()
    assert codes == [0, 0], codes


def test_workers_exit_when_their_controller_is_killed():
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if os.path.isabs(p)))
    controller = subprocess.Popen(
        [sys.executable, "-m", "tests.cluster.controller_job"],
        stdout=subprocess.PIPE,
        env=environ,
    )
    try:
        assert controller.stdout is not None
        pids = [int(p) for p in controller.stdout.readline().split()]
        assert len(pids) == 2 and all(map(_alive, pids))
        controller.kill()
        controller.wait()
        deadline = time.monotonic() + 15.0
        while any(map(_alive, pids)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(_alive, pids)), "orphaned workers are still running"
    finally:
        controller.kill()
        controller.wait()


def test_a_worker_with_another_token_is_refused():
    cluster = Cluster(per_host=1, main_node=False, token="77" * 32)
    try:
        codes = [p.wait(60) for p in cluster.processes]
        assert codes == [3, 3]
        with pytest.raises(RendezvousError, match="dtorch/worker/0"):
            cluster.wait_ready(timeout=1.0)
    finally:
        cluster.close()


def _intruder(node: ClusterNode, token: str = TOKEN) -> GatedStoreClient:
    """A client of the node's store that passed its gate (read the password on the wire)."""
    return connect_store("127.0.0.1", node.port, cluster_token(token), timeout_s=5.0)


def test_a_peer_without_the_token_is_refused_at_the_store_s_gate(caplog):
    node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    try:
        started = time.monotonic()
        with pytest.raises(RendezvousError, match="refused this process's cluster token"):
            _intruder(node, "77" * 32)
        assert time.monotonic() - started < 3.0  # said at the handshake, not at a timeout
        with pytest.raises(dist.DistError):  # torch's own client cannot talk to it either
            dist.TCPStore("127.0.0.1", node.port, is_master=False, timeout=timedelta(seconds=2))
        assert "wrong password" in caplog.text
        assert not node.store.has(worker_key(0))
    finally:
        node.close()


def test_a_forged_worker_record_is_refused():
    node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    try:
        intruder = _intruder(node)
        intruder.set(worker_key(0), b"\0" * 32 + b'{"rank": 0}')
        with pytest.raises(RendezvousError, match="not signed with this cluster's token"):
            node.wait_ready(5.0)
        intruder.close()
    finally:
        node.close()


def test_a_record_of_an_earlier_program_on_the_same_token_is_refused():
    """The store is readable by every token holder (and whoever read the gate's password on
    the wire): a worker record signed for an earlier program (its nonce's key) cannot be
    replayed into this one."""
    from dtorch.cluster.records import WorkerRecord, program_secret, record_key
    from dtorch.cluster.rendezvous import SignedStore

    node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    try:
        intruder = _intruder(node)
        earlier = record_key(program_secret(cluster_token(TOKEN), "an earlier program"))
        replayed = WorkerRecord(0, 1, "127.0.0.1", os.getpid(), "cpu", 0)
        SignedStore(intruder, earlier).put(worker_key(0), replayed)
        with pytest.raises(RendezvousError, match="one of an earlier program"):
            node.wait_ready(5.0)
    finally:
        node.close()


def test_the_rendezvous_store_listens_on_the_named_interface_only():
    node = ClusterNode("127.0.0.2", 0, cluster_token(TOKEN))
    try:
        port = int(node.address.rsplit(":", 1)[1])
        assert _listening_addresses(port) == {"0200007F"}  # 127.0.0.2, nothing else
        for channel in node.channels:
            assert channel.address.startswith("tcp://127.0.0.2:")
    finally:
        node.close()


def test_addresses_and_tokens_are_checked():
    with pytest.raises(RendezvousError, match="HOST:PORT"):
        dtorch.cluster.MainNode.set_address("nowhere")
    with pytest.raises(RendezvousError, match="hex"):
        cluster_token("not hex")
    with pytest.raises(RendezvousError, match="16 bytes"):
        cluster_token(b"short")


def test_a_ready_main_node_serves_process_mode_graphs_without_a_pool(cluster):
    """A DTorch program sets the cluster up, then makes its graphs as on one machine."""
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True))
    try:
        assert graph.runner.pool is dtorch.cluster.MainNode.worker_pool()
        mesh = dtorch.init_device_mesh("cpu", (2, 2))
        full = torch.arange(24.0).reshape(4, 6)
        x = dtorch.from_torch(
            full, device_mesh=mesh, placements=[dtorch.Shard(0), dtorch.Shard(1)], graph=graph
        )
        assert torch.equal((x * 3).to_torch(), full * 3)
        assert dtorch.cluster.MainNode.num_node_in_cluster() == 2
    finally:
        graph.close()


def test_values_larger_than_a_frame_come_back_from_remote_workers(cluster):
    """A remote worker's values travel inside its reports (no shared memory), and the
    controller's reports puller takes frames of at most 1 MiB: larger ones come in pieces."""
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True))
    try:
        mesh = dtorch.init_device_mesh("cpu", (4,))
        full = torch.randn(1024, 1030)  # 4 MiB: each device's shard is just over 1 MiB
        x = dtorch.from_torch(full, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
        assert torch.equal((x + 1).to_torch(), full + 1)
        assert torch.equal(x.redistribute(mesh, [dtorch.Replicate()]).to_torch(), full)
    finally:
        graph.close()


def test_a_graph_outliving_its_cluster_closes_cleanly():
    """The cluster is closed first (its owner's choice): the graph's own close and its fetches
    end with a clear error or quietly, never a traceback from a closed socket."""
    cluster = Cluster(per_host=1, main_node=False)
    try:
        cluster.wait_ready()
        graph = cluster.graph()
        x = dtorch.ones(4, device_mesh=dtorch.init_device_mesh("cpu", (2,)), graph=graph)
        assert (x + 1).to_torch().tolist() == [2.0] * 4
    finally:
        codes = cluster.close()
    assert codes == [0, 0]
    graph.close()
    with pytest.raises(dtorch.DTorchError):
        (x + 1).to_torch()


@pytest.mark.parametrize(
    ("content", "mode", "message"),
    [
        (None, 0o600, "cannot read the token file"),
        ("ab" * 32, 0o644, "readable by others"),
        ("é" * 8, 0o600, "not hex text"),
        ("zz", 0o600, "is hex text"),
        ("", 0o600, "is 0 bytes; the controller's is at least 16"),
        ("ab" * 16, 0o600, None),
        ("ab" * 4096, 0o600, "holds more than 4096 bytes"),
        ("fifo", 0o600, "not a regular file; expected a token file"),
    ],
    ids=["missing", "world-readable", "not-ascii", "not-hex", "empty", "16-bytes", "huge", "fifo"],
)
def test_a_worker_reads_its_token_file_or_says_what_is_wrong(
    tmp_path, content, mode, message
) -> None:
    from dtorch.options import Launch
    from dtorch.worker.main import parse_arguments

    path = tmp_path / "token"
    if content == "fifo":  # a named pipe without a writer: an open() would wait for ever
        os.mkfifo(path, mode)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
        path.chmod(mode)
    argv = ["--main", "127.0.0.1:1", "--rank", "0", "--world-size", "1"]
    argv += ["--token-file", str(path)]
    if message is None:
        assert parse_arguments(argv, Launch()).token == bytes.fromhex(content)
        return
    with pytest.raises(RendezvousError, match=message):
        parse_arguments(argv, Launch())
