"""The rendezvous file's cleanup by the ranks' links to it (torch_peers), without process
groups: ranks of one FileStore in this process, some of them pretending to be dead."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
import torch.distributed as dist

from dtorch.comm.group.backend import GroupInfo
from dtorch.comm.group.rendezvous import GroupRendezvous
from dtorch.comm.group.torch_dist import TorchDistBackend
from dtorch.comm.group.torch_peers import RankPeers, hello_key, hello_text
from dtorch.comm.process_identity import ProcessIdentity
from dtorch.errors import CommError, CommTimeoutError
from dtorch.options import GlobalOption

pytestmark = pytest.mark.timeout(30)


def _open(tmp_path, world: int) -> list:
    """Each rank's FileStore of one rendezvous file, every hello said."""
    rendezvous = GroupRendezvous.in_directory("rdv", str(tmp_path))
    stores = [rendezvous.open(world, rank, timedelta(seconds=5)) for rank in range(world)]
    for rank, store in enumerate(stores):
        store.set(hello_key(rank), hello_text())
    return stores


def test_the_last_rank_to_leave_removes_the_file(tmp_path):
    stores = _open(tmp_path, 2)
    peers = [RankPeers.read(store, rank, 2) for rank, store in enumerate(stores)]
    assert [p.processes[0][0] for p in peers] == [1, 0] and peers[0].dead() == []
    stores[0] = None  # a rank leaves once its FileStore is destroyed
    peers[0].leave(str(tmp_path / "rdv"))
    assert sorted(os.listdir(tmp_path)) == ["rdv", "rdv.rank1"]  # rank 1 still uses it
    stores[1] = None
    peers[1].leave(str(tmp_path / "rdv"))
    assert os.listdir(tmp_path) == []


def test_the_file_stays_while_a_rank_that_has_not_left_holds_its_store(tmp_path):
    """Every other rank gone, even counted in the store: a FileStore's destructor opens the
    file again after checking it exists, so removing it under a live store could make it anew."""
    stores = _open(tmp_path, 3)
    for rank in (0, 1):
        stores[rank].add("gone", 1)
        stores[rank] = None
        RankPeers.read(stores[2], rank, 3).leave(str(tmp_path / "rdv"))
    assert sorted(os.listdir(tmp_path)) == ["rdv", "rdv.rank2"]
    stores[2] = None  # its destructor runs on the file, which is still there
    RankPeers.read(dist.HashStore(), 2, 0).leave(str(tmp_path / "rdv"))
    assert os.listdir(tmp_path) == []


def test_a_dead_rank_is_taken_out_by_a_survivor(tmp_path):
    stores = _open(tmp_path, 3)
    me = ProcessIdentity.of_self()
    dead = ProcessIdentity(me.pid, me.start_ticks + 1)  # a pid now held by another process
    survivors = [RankPeers(r, 3, ((2, dead), (1 - r, me))) for r in (0, 1)]
    assert survivors[0].dead() == [(2, me.pid)]
    killed = stores.pop()  # a killed rank's store is never destroyed while the others run
    for rank, survivor in enumerate(survivors):
        stores[rank] = None
        survivor.leave(str(tmp_path / "rdv"))  # rank 1 takes nothing of rank 2's away again
        assert sorted(os.listdir(tmp_path)) == ([] if rank else ["rdv", "rdv.rank1"])
    del killed  # a destructor that comes after finds no file and makes none
    assert os.listdir(tmp_path) == []


def test_a_failed_creation_leaves_no_file(tmp_path):
    """Rank 1 of two never comes: rank 0's creation times out, and takes its use of the file
    away."""
    rendezvous = GroupRendezvous.in_directory("rdv", str(tmp_path))
    with (
        GlobalOption.override(comm_timeout_second=0.3),
        pytest.raises(CommTimeoutError, match=r"ranks \[1\] never came"),
    ):
        TorchDistBackend(GroupInfo("cpu", (0, 1), (0,)), rendezvous)
    assert os.listdir(tmp_path) == []


def test_peers_on_another_host_address_are_not_judged_by_pid():
    """A hello from a rank binding another address (a simulated host, or a real one) names a
    pid this machine cannot look up: that rank is no peer to watch; one of the same address is."""
    store = dist.HashStore()
    me = ProcessIdentity.of_self()
    store.set(hello_key(0), hello_text("127.0.0.2"))
    store.set(hello_key(1), hello_text("127.0.0.3"))
    store.set(hello_key(2), hello_text("127.0.0.2"))
    peers = RankPeers.read(store, 0, 3, "127.0.0.2")
    assert peers.processes == ((2, me),)
    assert RankPeers.read(store, 1, 3, "127.0.0.3").processes == ()
    assert RankPeers.read(store, 1, 3).processes == ()  # loopback by default: no such host


def test_a_failed_process_group_destroys_its_store_before_leaving(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure's chained frames held the FileStore: the rank gave up its link while its
    store lived on, and the store's destructor, run whenever the error went, could make the
    file anew (the race the links close). The error is kept here, as a caller keeps it; a
    destroyed FileStore has written its ``cleanup/`` count into the file."""
    from dtorch.comm.group import torch_dist

    def failing(store, rank, world, timeout, host):
        raise RuntimeError("connection refused (a simulated Gloo failure)")

    monkeypatch.setitem(torch_dist._PROCESS_GROUPS, "cpu", failing)
    path = tmp_path / "rdv"
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    os.link(path, tmp_path / "peer")  # another rank's use of the file: it stays
    rendezvous = GroupRendezvous.in_directory("rdv", str(tmp_path))
    with pytest.raises(CommError, match="creating the process group failed") as kept:
        TorchDistBackend(GroupInfo("cpu", (0,), (0,)), rendezvous)
    assert kept.value is not None and b"cleanup/" in (tmp_path / "peer").read_bytes()
    assert "rdv.rank0" not in os.listdir(tmp_path)


def test_without_hard_links_no_rank_removes_the_file(tmp_path, monkeypatch) -> None:
    """A file system without hard links: the group still meets, and no rank can tell that it is
    the last, so none removes the file while another uses it; torch's own count removes it
    once every rank's store is destroyed (a killed rank's file stays, as before links)."""

    def refused(*args: object) -> None:
        raise PermissionError("hard links not supported here")

    monkeypatch.setattr(os, "link", refused)
    stores = _open(tmp_path, 2)
    peers = [RankPeers.read(store, rank, 2) for rank, store in enumerate(stores)]
    for rank, left in ((0, ["rdv"]), (1, [])):
        stores[rank] = None
        peers[rank].leave(str(tmp_path / "rdv"))
        assert os.listdir(tmp_path) == left
