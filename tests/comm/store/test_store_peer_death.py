"""A file store participant that dies (SIGKILL) while the others wait on it: every waiter fails
within a second or so with a PeerDiedError naming the dead rank and pid and what it waited for,
although the comm timeout is 60 s; and nothing of the namespace is left in /dev/shm."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
from store_scenarios import barrier_until_error, open_and_sleep, open_for, take_and_sleep

from dtorch.comm.store import FileTensorStore
from dtorch.comm.store.base import Deadline
from dtorch.errors import PeerDiedError
from dtorch.options import GlobalOption
from tests.process_pool import Job, kill_process, start_process

pytestmark = pytest.mark.timeout(90)

#: Far below the comm timeout of the waits (60 s): a death is seen in a half-second re-check.
FAST_S = 5.0


def _killed_while_waiting(process: Any, wait: Callable[[], object]) -> tuple[PeerDiedError, float]:
    """Run ``wait()`` here (comm timeout 60 s) while ``process`` is SIGKILLed 0.3 s into it;
    the PeerDiedError it raised and the seconds it took."""
    killer = threading.Timer(0.3, kill_process, (process,))
    start = time.monotonic()
    killer.start()
    try:
        with GlobalOption.override(comm_timeout_second=60), pytest.raises(PeerDiedError) as caught:
            wait()
    finally:
        killer.join()
    return caught.value, time.monotonic() - start


def _names(error: PeerDiedError, rank: int, pid: int) -> None:
    assert f"rank {rank} (pid {pid}) died" in str(error), error
    assert error.peers == ((rank, pid),)


def test_dest_get_fails_when_the_producer_dies(namespace):
    victim = start_process(open_and_sleep, "file", namespace.instance_id, "get", 2, 1)
    with open_for("file", namespace.instance_id, "get", 2, 0) as store:
        error, seconds = _killed_while_waiting(victim, lambda: store.dest_get("never"))
    _names(error, 1, victim.pid)
    assert "dest_get failed" in str(error) and "no participant called src_set('never')" in str(
        error
    )
    assert seconds < FAST_S


def test_finish_wait_fails_when_a_consumer_dies(namespace):
    victim = start_process(take_and_sleep, "file", namespace.instance_id, "finish", 2, 1)
    with open_for("file", namespace.instance_id, "finish", 2, 0) as store:
        store.src_set("k", torch.ones(3), get_count=1)
        error, seconds = _killed_while_waiting(
            victim, lambda: store.src_wait_until_get_finished("k")
        )
    _names(error, 1, victim.pid)
    assert "src_wait_until_get_finished failed" in str(error)
    assert "key 'k': 0 of 1 consumers finished" in str(error)
    assert seconds < FAST_S


def test_every_barrier_waiter_fails_when_a_member_dies(namespace, process_pool):
    """Rank 1 (a pool process) and rank 0 (here) wait in a barrier; rank 2 is killed."""
    ns = namespace.instance_id
    victim = start_process(open_and_sleep, "file", ns, "barrier", 3, 2)
    run = process_pool.start([Job(barrier_until_error, ("file", ns, "barrier", 3, 1))])
    with open_for("file", ns, "barrier", 3, 0) as store:
        error, seconds = _killed_while_waiting(victim, store.barrier)
    _names(error, 2, victim.pid)
    assert "barrier failed" in str(error) and "never arrived" in str(error)
    assert seconds < FAST_S
    [(kind, message, peers, other_seconds)] = run.results(timeout_s=60)
    assert kind == "PeerDiedError" and f"rank 2 (pid {victim.pid}) died" in message
    assert peers == ((2, victim.pid),) and other_seconds < FAST_S + 1.0


def test_opening_fails_when_a_member_dies_in_the_construction_barrier(namespace):
    """Rank 1 opened a 3-participant store and waits for the others in the construction
    barrier; it is killed while rank 0 opens too (rank 2 never comes)."""
    victim = start_process(open_for, "file", namespace.instance_id, "opening", 3, 1)
    deadline = time.monotonic() + 30
    while not namespace.leftovers():  # the victim created the control segment
        assert time.monotonic() < deadline, "the victim never opened the store"
        time.sleep(0.02)
    error, seconds = _killed_while_waiting(
        victim, lambda: open_for("file", namespace.instance_id, "opening", 3, 0)
    )
    _names(error, 1, victim.pid)
    assert seconds < FAST_S
    assert namespace.leftovers() == []  # the last one out of a failed opening unlinks it


def test_opening_a_store_with_a_dead_member_fails_at_once(namespace):
    victim = start_process(open_for, "file", namespace.instance_id, "late", 2, 1)
    deadline = time.monotonic() + 30
    while not namespace.leftovers():
        assert time.monotonic() < deadline, "the victim never opened the store"
        time.sleep(0.02)
    time.sleep(0.2)  # the victim joins right after it created the segment
    kill_process(victim)
    start = time.monotonic()
    with pytest.raises(PeerDiedError, match="opening the store failed") as caught:
        open_for("file", namespace.instance_id, "late", 2, 0)
    _names(caught.value, 1, victim.pid)
    assert time.monotonic() - start < 0.5
    assert namespace.leftovers() == []


def test_a_reused_pid_counts_as_a_dead_member(namespace):
    """A member whose pid now belongs to another process (its start time differs) is dead:
    simulated by rewriting the start time rank 1 recorded when it joined."""
    opened: dict[int, FileTensorStore] = {}
    other = threading.Thread(
        target=lambda: opened.setdefault(1, FileTensorStore.open("reuse", 2, 1, namespace))
    )
    other.start()
    store = FileTensorStore.open("reuse", 2, 0, namespace)
    other.join()
    try:
        with store._txn(Deadline()) as state:
            member = state.members[1]
            assert member is not None
            member[2] += 1  # the pid (this process) is alive, but is not that process
            state.dirty = True
        start = time.monotonic()
        with GlobalOption.override(comm_timeout_second=60), pytest.raises(PeerDiedError) as got:
            store.dest_get("k")
        assert time.monotonic() - start < FAST_S
        _names(got.value, 1, member[0])
    finally:
        store.close()
        opened[1].close()
