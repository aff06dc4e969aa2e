"""Starting a cluster that goes wrong: a refused cluster tells its workers why, a rank is held
by one worker only, a restarted rank breaks the pool at once, a closed node frees its port,
IPv6 is refused up front, and a program record copied into another controller's store is
refused."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist

import dtorch
from dtorch.cluster import main_node
from dtorch.cluster.main_node import ClusterNode, MainNode, cluster_token
from dtorch.cluster.records import StartRecord
from dtorch.cluster.rendezvous import PROGRAM_KEY, START_KEY, connect_store, worker_key
from dtorch.errors import RendezvousError, WorkerDiedError
from tests.cluster.cluster_setup import TOKEN
from tests.cluster.test_cluster_faults import _listening_addresses

pytestmark = pytest.mark.timeout(120)


def _worker(
    address: str, rank: int, world: int, host: str = "127.0.0.2"
) -> subprocess.Popen[bytes]:
    """``python -m dtorch.worker`` for ``rank`` of ``world``; its stderr is kept."""
    environ = dict(os.environ, DTORCH_CLUSTER_TOKEN=TOKEN)
    environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if os.path.isabs(p))
    command = [
        sys.executable, "-m", "dtorch.worker", "--main", address, "--host", host,
        "--rank", str(rank), "--world-size", str(world), "--threads", "1",
        "--device-type", "cpu", "--join-timeout", "60",
    ]  # fmt: skip
    return subprocess.Popen(command, env=environ, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _ended(process: subprocess.Popen[bytes], timeout: float) -> tuple[int, str]:
    """The exit status and stderr of ``process`` (killed if it outlives ``timeout``)."""
    try:
        _, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        return -1, err.decode()
    return process.returncode, err.decode()


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.communicate()


@pytest.mark.parametrize("worlds", [(2, 3), (3, 2)], ids=["rank-1-says-more", "rank-0-says-more"])
def test_a_refused_cluster_tells_its_workers_at_once(worlds: tuple[int, int]) -> None:
    """Refused as soon as rank 1's record disagrees (not at the deadline of a rank 2 that
    will never come), and the workers exit with the controller's reason."""
    node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    started = time.monotonic()
    workers = [
        _worker(node.address, 0, worlds[0]),
        _worker(node.address, 1, worlds[1], "127.0.0.3"),
    ]
    try:
        with pytest.raises(RendezvousError, match="worker records disagree"):
            node.wait_ready(60)
        refused = time.monotonic()
        assert refused - started < 40.0  # not at the 60 s deadline
        for worker in workers:
            code, err = _ended(worker, 30)
            assert code == 3 and "the controller refused the cluster: worker records" in err
        assert time.monotonic() - refused < 10.0
        with pytest.raises(RendezvousError, match="this cluster was refused"):
            node.wait_ready(1)
    finally:
        node.close()
        _stop(workers)


def test_the_pool_of_a_refused_cluster_says_it_was_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """MainNode.worker_pool() (and num_node_in_cluster) after a refusal named the refusal,
    not 'not ready: call wait_cluster_ready()', which would only raise it again."""
    from dtorch.runtime.process.runner import ClusterDefault

    # MainNode is one per process: the folder's shared cluster may hold it; it gets it back
    monkeypatch.setattr(MainNode, "_node", None)
    monkeypatch.setattr(ClusterDefault, "pool", ClusterDefault.pool)
    MainNode.set_address("127.0.0.1:0", token=TOKEN)
    workers = [_worker(MainNode.address(), 0, 2), _worker(MainNode.address(), 1, 3, "127.0.0.3")]
    try:
        with pytest.raises(RendezvousError, match="worker records disagree"):
            MainNode.wait_cluster_ready(60)
        with pytest.raises(RendezvousError, match=r"this cluster was refused \(worker records"):
            MainNode.num_node_in_cluster()
    finally:
        MainNode.close()
        _stop(workers)


def test_a_timeout_leaves_the_workers_waiting_and_a_close_tells_them() -> None:
    """A ``wait_ready`` that times out is no refusal (a program may wait again: rank 0 may be
    late); closing the node before the start tells the waiting workers at once."""
    node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    waiting = _worker(node.address, 1, 2)  # rank 0 never comes
    try:
        for _ in range(2):
            with pytest.raises(RendezvousError, match="rank 0 did not register in time"):
                node.wait_ready(2)
        assert waiting.poll() is None  # still waiting for the start
    finally:
        node.close()
        closed = time.monotonic()
        code, err = _ended(waiting, 30)
    # it reads the abort record, or finds the store gone: at once either way
    told = ("the controller closed the cluster before it started", "store is gone")
    assert code == 3 and any(reason in err for reason in told), err
    assert time.monotonic() - closed < 5.0


def test_close_frees_the_port_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    port = node.port
    node.close()  # ``node`` still referenced
    assert _listening_addresses(port) == set()
    again = ClusterNode("127.0.0.1", port, cluster_token(TOKEN))
    again.close()

    def refuse(*_: object) -> None:
        raise RendezvousError("no sockets")

    monkeypatch.setattr(main_node, "_open_channels", refuse)
    with pytest.raises(RendezvousError, match="no sockets") as failed:
        ClusterNode("127.0.0.1", port, cluster_token(TOKEN))
    assert failed.value.__traceback__ is not None  # the traceback is alive, the port free
    assert _listening_addresses(port) == set()


def _computes(pool: dtorch.cluster.ClusterPool) -> None:
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
    try:
        mesh = dtorch.init_device_mesh("cpu", (2,))
        x = dtorch.from_torch(
            torch.arange(4.0), device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph
        )
        assert torch.equal((x + 1).to_torch(), torch.arange(4.0) + 1)
        whole = x.redistribute(mesh, [dtorch.Replicate()]).to_torch()
        assert torch.equal(whole, torch.arange(4.0))
    finally:
        graph.close()


def test_a_second_worker_for_a_rank_is_refused() -> None:
    node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    workers = [_worker(node.address, r, 2, h) for r, h in ((0, "127.0.0.2"), (1, "127.0.0.3"))]
    workers.append(_worker(node.address, 1, 2, "127.0.0.3"))
    try:
        pool = node.wait_ready(90)
        assert pool.workers == 2
        deadline = time.monotonic() + 30
        while all(w.poll() is None for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        refused = [w for w in workers if w.poll() is not None]
        assert len(refused) == 1 and refused[0] is not workers[0]
        code, err = _ended(refused[0], 5)
        assert code == 3 and "rank 1 is already registered with this controller" in err
        _computes(pool)
        assert pool.broken is None
    finally:
        node.close()
        codes = [_ended(w, 15)[0] for w in workers if w not in refused]
        _stop(workers)
    assert codes == [0, 0]


def test_a_restarted_rank_breaks_the_pool_at_once() -> None:
    node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    workers = [_worker(node.address, r, 2, h) for r, h in ((0, "127.0.0.2"), (1, "127.0.0.3"))]
    try:
        pool = node.wait_ready(90)
        graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, worker_pool=pool))
        workers[1].send_signal(signal.SIGKILL)
        workers[1].wait()
        killed = time.monotonic()
        workers.append(_worker(node.address, 1, 2, "127.0.0.3"))  # as torchrun would restart it
        code, err = _ended(workers[2], 60)
        assert code == 3 and "rank 1 is already registered" in err
        while pool.broken is None and time.monotonic() - killed < 30:
            time.sleep(0.1)
        assert isinstance(pool.broken, WorkerDiedError) and "worker 1 " in str(pool.broken)
        assert time.monotonic() - killed < 30
        closing = time.monotonic()
        graph.close()
        assert time.monotonic() - closing < 10.0
    finally:
        node.close()
        code, _ = _ended(workers[0], 15)
        _stop(workers)
    assert code == 0


def test_a_worker_dying_after_it_registered_is_named_within_seconds() -> None:
    """A registered worker that dies before the start: ``wait_ready`` names it once its
    heartbeats' silence is a verdict (not at its deadline), the others are stopped (not left
    to take the controller for gone), and the cluster cannot start again."""
    node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    workers = [_worker(node.address, r, 2, h) for r, h in ((0, "127.0.0.2"), (1, "127.0.0.3"))]
    try:
        waited = time.monotonic()
        while not node.records.has(worker_key(1)):
            assert time.monotonic() - waited < 60, "rank 1 never registered"
            time.sleep(0.1)
        workers[1].kill()
        workers[1].wait()
        killed = time.monotonic()
        with pytest.raises(RendezvousError, match=r"worker 1 \(.*sent no heartbeat"):
            node.wait_ready(90)
        assert time.monotonic() - killed < 20.0  # the verdict takes 5 s; the deadline is 90
        code, err = _ended(workers[0], 15)
        assert code == 0, err  # stopped by the controller
        with pytest.raises(RendezvousError, match="this cluster was refused"):
            node.wait_ready(1)
    finally:
        node.close()
        _stop(workers)


def test_a_wait_that_times_out_after_the_start_refuses_nothing() -> None:
    """A wait_ready whose deadline falls just after the start record (the workers had no time
    to connect) is a timeout like one before it: the next wait_ready goes on with the same
    started workers (it refused the healthy cluster for good, and its STOP was lost)."""
    node = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    workers = [_worker(node.address, r, 2, h) for r, h in ((0, "127.0.0.2"), (1, "127.0.0.3"))]
    try:
        waited = time.monotonic()
        while not all(node.records.has(worker_key(r)) for r in (0, 1)):
            assert time.monotonic() - waited < 60, "the workers never registered"
            time.sleep(0.1)
        with pytest.raises(RendezvousError, match=r"never connected|no heartbeat"):
            node.wait_ready(0.05)
        pool = node.wait_ready(60)
        _computes(pool)
    finally:
        node.close()
        codes = [_ended(w, 15)[0] for w in workers]
        _stop(workers)
    assert codes == [0, 0]


def test_ipv6_addresses_are_refused_up_front() -> None:
    from dtorch.options import Launch
    from dtorch.worker.main import parse_arguments

    with pytest.raises(RendezvousError, match="IPv6 address: clusters run on IPv4 only"):
        MainNode.set_address("[::1]:0", token=TOKEN)
    with pytest.raises(RendezvousError, match="IPv4"):
        ClusterNode("::1", 0, cluster_token(TOKEN))
    launch = Launch(cluster_token=TOKEN)
    argv = ["--rank", "0", "--world-size", "1"]
    with pytest.raises(RendezvousError, match="--host is '::1', an IPv6 address"):
        parse_arguments([*argv, "--main", "127.0.0.1:1", "--host", "::1"], launch)
    with pytest.raises(RendezvousError, match="IPv4"):
        parse_arguments([*argv, "--main", "[::1]:29500"], launch)
    with pytest.raises(RendezvousError, match=r"'0\.0\.0\.0', every interface"):  # it was taken
        MainNode.set_address("0.0.0.0:0", token=TOKEN)
    with pytest.raises(RendezvousError, match=r"--host is '0\.0\.0\.0'"):
        parse_arguments([*argv, "--main", "127.0.0.1:1", "--host", "0.0.0.0"], launch)
    # its other spellings: "0" and "0.0" bound 0.0.0.0 and published an address no peer
    # could use; ZeroMQ's "*" bound every socket, then failed with a raw ZMQError
    for host in ("0", "0.0", "*", "0.0.0.0%lo"):  # ZeroMQ binds what precedes a %scope
        with pytest.raises(RendezvousError, match=rf"'{re.escape(host)}', every interface"):
            MainNode.set_address(f"{host}:0", token=TOKEN)
        with pytest.raises(RendezvousError, match=rf"--host is '{re.escape(host)}', every"):
            parse_arguments([*argv, "--main", "127.0.0.1:1", "--host", host], launch)


def test_bad_numbers_are_refused_up_front() -> None:
    """``--join-timeout nan`` or ``inf``, ``--threads -1`` and a ``wait_cluster_ready`` of
    nan ended in a ValueError/OverflowError/RuntimeError traceback, and ``--join-timeout -1``
    was taken; inf waits as long as dtorch waits at all."""
    from dtorch.options import MAX_WAIT_SECOND, Launch
    from dtorch.worker.main import parse_arguments

    launch = Launch(cluster_token=TOKEN)
    argv = ["--rank", "0", "--world-size", "1", "--main", "127.0.0.1:1"]
    for bad in ("nan", "-1"):
        with pytest.raises(RendezvousError, match="--join-timeout: timeout_s must be"):
            parse_arguments([*argv, "--join-timeout", bad], launch)
    assert parse_arguments([*argv, "--join-timeout", "inf"], launch).join_timeout == MAX_WAIT_SECOND
    with pytest.raises(RendezvousError, match="--threads must be at least 1, got -1"):
        parse_arguments([*argv, "--threads", "-1"], launch)
    with pytest.raises(ValueError, match="timeout_s must be"):  # before any node is looked at
        MainNode.wait_cluster_ready(float("nan"))


def test_a_program_record_copied_into_another_store_is_refused() -> None:
    first = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    second = ClusterNode("127.0.0.1", 0, cluster_token(TOKEN))
    worker = None
    try:
        token = cluster_token(TOKEN)
        source = connect_store("127.0.0.1", first.port, token, timeout_s=5.0)
        target = connect_store("127.0.0.1", second.port, token, timeout_s=5.0)
        first.records.put(START_KEY, StartRecord(("127.0.0.2",)))
        for key in (PROGRAM_KEY, START_KEY):  # an intruder who passed both gates
            target.set(key, source.get(key))
        source.close()
        target.close()
        worker = _worker(second.address, 0, 1, "127.0.0.3")
        code, err = _ended(worker, 60)
        assert code == 3 and "was copied from another controller's store" in err
        assert f"names the store at 127.0.0.1:{first.port}" in err
    finally:
        first.close()
        second.close()
        if worker is not None:
            _stop([worker])


def test_a_ready_from_another_pid_than_the_registered_one_is_refused() -> None:
    from dtorch.cluster.records import WorkerRecord

    records = (WorkerRecord(0, 1, "127.0.0.2", 4242, "cpu", 0),)
    main_node._check_pid(records, 0, 4242)
    with pytest.raises(RendezvousError, match="pid 4243, but pid 4242 registered it"):
        main_node._check_pid(records, 0, 4243)


def test_a_worker_waiting_for_the_start_reads_only_a_signed_abort_record() -> None:
    from dtorch.cluster.records import AbortRecord, record_key
    from dtorch.cluster.rendezvous import ABORT_KEY, SignedStore, wait_start

    inner = dist.HashStore()
    store = SignedStore(inner, record_key(bytes(32)))
    inner.set(ABORT_KEY, b"\0" * 32 + b'{"reason": "forged"}')  # a token holder may write
    with pytest.raises(RendezvousError, match="no StartRecord appeared within 1 s"):
        wait_start(store, 1.0)
    store.put(ABORT_KEY, AbortRecord("rank 1 disagrees"))
    with pytest.raises(RendezvousError, match="the controller refused the cluster: rank 1"):
        wait_start(store, 30.0)


def test_a_store_failure_ends_a_worker_with_a_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch's DistStoreError from the rendezvous store (a connection lost while the worker
    reads the start record) ended the worker with a traceback, status 1."""
    import torch.distributed as dist

    from dtorch.runtime.process.worker import EXIT_FATAL
    from dtorch.worker import main as worker_main

    def lost(options: object) -> int:
        raise dist.DistStoreError("the connection was lost (the controller closed the store)")

    monkeypatch.setattr(worker_main, "run", lost)
    monkeypatch.setenv("DTORCH_CLUSTER_TOKEN", TOKEN)
    argv = ["--rank", "0", "--world-size", "1", "--main", "127.0.0.1:1"]
    assert worker_main.main(argv) == EXIT_FATAL
    assert capsys.readouterr().err == (
        "dtorch.worker: the rendezvous store failed: the connection was lost (the controller "
        "closed the store)\n"
    )


def test_a_main_address_that_does_not_resolve_fails_the_worker_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It waited for its whole --join-timeout; a label the resolver rejects outright (a
    UnicodeError, not an OSError) is a resolution failure too."""
    from dtorch.worker import main as worker_main

    monkeypatch.setenv("DTORCH_CLUSTER_TOKEN", TOKEN)
    argv = ["--rank", "0", "--world-size", "1", "--main", "a..b:1234", "--join-timeout", "60"]
    started = time.monotonic()
    with pytest.raises(RendezvousError, match=r"--main a\.\.b:1234: cannot resolve the host"):
        worker_main._join(worker_main.parse_arguments(argv))
    assert time.monotonic() - started < 5.0


def test_a_worker_waiting_for_its_controller_says_so_now_and_then(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker started before its controller (or whose controller never comes) is not
    silent until its --join-timeout: it says every WAIT_NOTICE_SECONDS that it waits."""
    import socket

    from dtorch.cluster import rendezvous
    from dtorch.worker import main as worker_main

    monkeypatch.setattr(rendezvous, "WAIT_NOTICE_SECONDS", 0.3)
    monkeypatch.setenv("DTORCH_CLUSTER_TOKEN", TOKEN)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = ["--rank", "0", "--world-size", "1", "--main", f"127.0.0.1:{port}"]
    options = worker_main.parse_arguments([*argv, "--join-timeout", "1.5"])
    never = r"never was reached within the timeout \(1.5 s"
    with (
        caplog.at_level("WARNING", logger="dtorch.worker"),
        pytest.raises(RendezvousError, match=never),
    ):
        worker_main._join(options)
    notices = [r.getMessage() for r in caplog.records if "no answer yet" in r.getMessage()]
    assert 2 <= len(notices) <= 5, notices
    said = f"store at 127.0.0.1:{port} after 0 s; waiting up to --join-timeout (1.5 s)"
    assert said in notices[0]
