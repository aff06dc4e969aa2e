"""The rendezvous file's cleanup by counting ranks out (torch_peers), without process groups:
two ranks of a world-2 FileStore in this process, one of them pretending to be dead."""

from __future__ import annotations

import torch.distributed as dist

from dtorch.comm.group.torch_peers import RankPeers, hello_key, hello_text
from dtorch.comm.process_identity import ProcessIdentity


def _say_hello(store, rank: int) -> None:
    store.set(hello_key(rank), hello_text())


def test_the_last_rank_to_leave_removes_the_file(tmp_path):
    path = str(tmp_path / "rdv")
    stores = [dist.FileStore(path, 2) for _ in range(2)]
    for rank, store in enumerate(stores):
        _say_hello(store, rank)
    peers = [RankPeers.read(store, rank, 2) for rank, store in enumerate(stores)]
    assert [p.processes[0][0] for p in peers] == [1, 0] and peers[0].dead() == []
    peers[0].leave(stores[0], path)
    assert (tmp_path / "rdv").exists()
    peers[1].leave(stores[1], path)
    assert not (tmp_path / "rdv").exists()
    del stores  # their destructors find no file and leave none
    assert not (tmp_path / "rdv").exists()


def test_a_dead_rank_is_counted_out_by_a_survivor_once(tmp_path):
    path = str(tmp_path / "rdv")
    store = dist.FileStore(path, 3)
    for rank in range(3):
        _say_hello(store, rank)
    me = ProcessIdentity.of_self()
    dead = ProcessIdentity(me.pid, me.start_ticks + 1)  # a pid now held by another process
    survivors = [RankPeers(r, 3, ((2, dead), (1 - r, me))) for r in (0, 1)]
    assert survivors[0].dead() == [(2, me.pid)]
    survivors[0].leave(store, path)
    assert (tmp_path / "rdv").exists()  # rank 1 still uses it
    survivors[1].leave(store, path)  # rank 2 was counted already: only rank 1 is added
    assert not (tmp_path / "rdv").exists()
    del store
    assert not (tmp_path / "rdv").exists()


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
