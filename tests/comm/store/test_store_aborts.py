"""Aborts on every backend: ``abort(scope, message)`` wakes a participant blocked on a key of
that scope within a second with a PeerFailedError carrying the message, leaves the keys of
other scopes alone, keeps each scope's first message and a bounded number of scopes, and an
aborted exchange leaves no key behind."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
from store_scenarios import held_slots, open_for, stack_names, with_endpoint

from dtorch.comm.store import PeerFailedError, TensorStore
from dtorch.comm.store.base import ABORT_MESSAGE_LIMIT, ABORTS_KEPT
from dtorch.options import GlobalOption
from tests.thread_runner import on_threads

pytestmark = pytest.mark.timeout(60)
KINDS = ["memory", "file", "network"]
#: The comm timeout of these tests: an abort must end a wait far sooner.
TIMEOUT_S = 60.0
#: How soon a blocked wait must fail once its scope is aborted.
PROMPT_S = 1.0
#: The innermost call of a participant asleep in a wait, per backend (seen on its stack).
ASLEEP_IN = {"wait_for", "_wait_until", "finish"}


@pytest.fixture(params=KINDS)
def kind(request) -> str:
    """Each backend; a network store gets a fresh loopback port."""
    return with_endpoint(request.param)


@pytest.fixture
def stores(kind, namespace):
    """Three participants of one store, opened together; closed after the test."""
    with GlobalOption.override(comm_timeout_second=TIMEOUT_S):
        opened = on_threads(range(3), lambda r: open_for(kind, namespace.instance_id, "ab", 3, r))
        try:
            yield opened
        finally:
            for store in reversed(opened):  # rank 0 last: it serves the network store
                store.close()


def _data(store: TensorStore, key: str) -> Any:
    return store.dest_get(key).tolist()


def _many(store: TensorStore, key: str) -> Any:
    return [t.tolist() for t in store.dest_get_many([key, f"{key}-too"])]


def _consumers(store: TensorStore, key: str) -> None:
    store.src_set(key, torch.ones(2), get_count=2)
    store.src_wait_until_get_finished(key)


#: The waits an abort must end: a consumer of a key never set, a producer whose consumers
#: never finish.
WAITS: dict[str, Callable[[TensorStore, str], Any]] = {
    "dest_get": _data,
    "dest_get_many": _many,
    "src_wait_until_get_finished": _consumers,
}
#: The call an error names, where it is not the wait's own name.
NAMED = {"dest_get_many": "dest_get"}


class _Blocked:
    """The wait ``WAITS[name]`` on a thread of its own: its result or error, and when it
    ended; constructed once the thread sleeps in the store's call ``name``."""

    def __init__(self, name: str, store: TensorStore, key: str):
        self.outcome: Any = None
        self.ended = 0.0
        wait = WAITS[name]
        self.thread = threading.Thread(target=self._run, args=(wait, store, key), daemon=True)
        self.thread.start()
        _asleep(self.thread, name)

    def _run(self, wait: Callable[[TensorStore, str], Any], store: TensorStore, key: str):
        try:
            self.outcome = wait(store, key)
        except Exception as error:
            self.outcome = error
        self.ended = time.monotonic()

    def result(self, timeout_s: float = 10.0) -> Any:
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "the wait never ended"
        return self.outcome


def _asleep(thread: threading.Thread, call: str, timeout_s: float = 10.0) -> None:
    """Return once ``thread`` sleeps in the store's ``call`` (its stack, seen from outside)."""
    deadline = time.monotonic() + timeout_s
    while True:
        names = stack_names(thread)
        if call in names and names & ASLEEP_IN:
            time.sleep(0.1)  # a network request has reached its coordinator by now
            return
        assert time.monotonic() < deadline, "the thread never waited"
        time.sleep(0.01)


@pytest.mark.parametrize("wait", list(WAITS))
def test_an_abort_wakes_a_blocked_wait_of_its_scope_at_once(stores, wait):
    blocked = _Blocked(wait, stores[1], "op7/x")
    other = _Blocked("dest_get", stores[2], "op8/y")  # another scope: untouched
    aborted_at = time.monotonic()
    assert stores[0].abort("op7", "rank 0 failed: boom") is True
    error = blocked.result()
    assert isinstance(error, PeerFailedError), error
    assert blocked.ended - aborted_at < PROMPT_S
    assert "rank 0 failed: boom" in str(error) and error.reason == "rank 0 failed: boom"
    assert f"{NAMED.get(wait, wait)}('op7/x')" in str(error)
    assert other.thread.is_alive()
    stores[0].src_set("op8/y", torch.arange(3), get_count=1)
    assert other.result() == [0, 1, 2]
    stores[2].dest_finish_get("op8/y")
    stores[0].src_wait_until_get_finished("op8/y")


def test_an_abort_from_another_thread_of_the_waiting_participant(stores):
    # the manager aborts on every group it holds: also through a participant whose own
    # thread is waiting in that scope
    blocked = _Blocked("dest_get", stores[1], "op3/x")
    aborted_at = time.monotonic()
    assert stores[1].abort("op3", "told through the waiter") is True
    error = blocked.result()
    assert isinstance(error, PeerFailedError) and "told through the waiter" in str(error)
    assert blocked.ended - aborted_at < PROMPT_S


def test_calls_on_an_aborted_scope_fail_at_once_and_the_first_message_stays(stores):
    assert stores[2].abort("op5", "first") is True
    assert stores[1].abort("op5", "second") is True
    assert [store.aborted("op5") for store in stores] == ["first"] * 3
    assert stores[0].aborted("op6") is None
    start = time.monotonic()
    with pytest.raises(PeerFailedError, match="scope 'op5' was aborted: first"):
        stores[0].src_set("op5/x", torch.ones(1), get_count=1)
    with pytest.raises(PeerFailedError, match="first"):
        stores[1].dest_get("op5/never-set")
    stores[1].dest_finish_get("op5/never-set")  # its failed producer dropped it: nothing to do
    assert time.monotonic() - start < PROMPT_S
    stores[0].src_set("op6/x", torch.ones(1), get_count=1)  # another scope works as before
    assert stores[1].dest_get("op6/x").tolist() == [1.0]
    stores[1].dest_finish_get("op6/x")
    stores[0].src_wait_until_get_finished("op6/x")


def test_abort_records_are_bounded_and_messages_cut(stores):
    for index in range(ABORTS_KEPT + 1):
        stores[index % 3].abort(f"s{index}", f"failure {index}")
    stores[0].abort("long", "x" * (2 * ABORT_MESSAGE_LIMIT))
    for store in stores:
        assert store.aborted("s0") is None and store.aborted("s1") is None  # the oldest went
        assert store.aborted(f"s{ABORTS_KEPT}") == f"failure {ABORTS_KEPT}"
        message = store.aborted("long")
        assert message is not None and len(message) == ABORT_MESSAGE_LIMIT
        assert message.endswith(" [...]")


def test_an_aborted_exchange_leaves_nothing_and_discard_drops_the_rest(stores):
    stores[0].src_set("op9/x", torch.ones(4), get_count=2)
    assert stores[1].dest_get("op9/x").tolist() == [1.0] * 4  # rank 2 fails instead
    stores[2].abort("op9", "rank 2 failed")
    failures = on_threads(  # the producer and the consumer that read
        [(0, [], ["op9/x"]), (1, ["op9/x"], [])],
        lambda job: _end(stores[job[0]], job[1], job[2]),
    )
    assert all("rank 2 failed" in failure for failure in failures)
    stores[1].src_set("op10/y", torch.zeros(1), get_count=1)  # read by nobody
    stores[1].discard()
    assert held_slots(stores[0]) == 0
    stores[2].src_set("op11/z", torch.zeros(1), get_count=1)  # the store is clean: it works
    assert stores[0].dest_get("op11/z").tolist() == [0.0]
    stores[0].end_exchange(["op11/z"], [])
    stores[2].end_exchange([], ["op11/z"])


def _end(store: TensorStore, read: list[str], published: list[str]) -> str:
    """``end_exchange`` of an aborted exchange: the PeerFailedError's text (it must raise)."""
    start = time.monotonic()
    with pytest.raises(PeerFailedError) as caught:
        store.end_exchange(read, published)
    assert time.monotonic() - start < PROMPT_S
    return str(caught.value)


def test_a_closed_network_coordinator_serves_the_others_until_they_leave(namespace):
    # rank 0 may end its last exchange and close while another rank is still ending its own
    kind, ns = with_endpoint("network"), namespace.instance_id
    with GlobalOption.override(comm_timeout_second=10):
        stores = on_threads(range(2), lambda r: open_for(kind, ns, "linger", 2, r))
    stores[1].src_set("op1/x", torch.ones(1), get_count=1)
    stores[0].dest_get("op1/x")
    stores[0].end_exchange(["op1/x"], [])
    stores[0].close()
    stores[1].end_exchange([], ["op1/x"])  # its DROP still reaches the coordinator
    stores[1].close()
    coordinator = stores[0]._coordinator  # type: ignore[attr-defined]
    coordinator._thread.join(10)
    assert not coordinator._thread.is_alive()  # and it stopped once rank 1 left
