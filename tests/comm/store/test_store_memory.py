"""MemoryTensorStore: the handshake between threads, rounds, timeouts, isolation, misuse."""

from __future__ import annotations

import gc
import threading
import time

import pytest
import torch
from store_scenarios import allreduce_once, hand_over_rank

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.store import StoreKind, open_store
from dtorch.comm.store.memory import REGISTRY
from dtorch.errors import CommError, CommTimeoutError
from dtorch.options import GlobalOption

pytestmark = pytest.mark.timeout(30)


def _open(key: str, world: int, rank: int, ns: CommNamespace | None = None):
    return open_store(StoreKind.MEMORY, key, world, rank, namespace=ns)


def test_handshake_hands_over_the_producers_tensor(threads):
    source = torch.randn(5, 3)

    def rank_fn(rank: int):
        with _open("hs", 2, rank) as store:
            if rank == 0:
                store.src_set("t", source, get_count=1)
                store.src_wait_until_get_finished("t")
                return None
            got = store.dest_get("t")
            result = (got is source, got.clone())
            store.dest_finish_get("t")
            return result

    _, (same, value) = threads(2, rank_fn)
    assert same
    torch.testing.assert_close(value, source)


def test_get_count_above_one_waits_for_every_consumer(threads):
    finished = []

    def rank_fn(rank: int):
        with _open("many", 4, rank) as store:
            if rank == 0:
                store.src_set("k", torch.arange(6), get_count=3)
                store.src_wait_until_get_finished("k")
                return sorted(finished)
            total = int(store.dest_get("k").sum())
            time.sleep(0.01 * rank)
            finished.append(rank)
            store.dest_finish_get("k")
            return total

    results = threads(4, rank_fn)
    assert results[0] == [1, 2, 3]
    assert results[1:] == [15, 15, 15]


def test_allreduce_pattern_from_the_spec(threads):
    world = 4
    inputs = [torch.randn(7) for _ in range(world)]

    def rank_fn(rank: int):
        with _open("allreduce", world, rank) as store:
            result = allreduce_once(store, inputs[rank])
            store.reset()
            return result

    expected = torch.stack(inputs).sum(0)
    for result in threads(world, rank_fn):
        torch.testing.assert_close(result, expected)


def test_reset_allows_the_same_key_in_the_next_round(threads):
    def rank_fn(rank: int):
        seen = []
        with _open("rounds", 2, rank) as store:
            for round_index in range(5):
                if rank == 0:
                    store.src_set("k", torch.tensor([round_index]), 1)
                    store.src_wait_until_get_finished("k")
                else:
                    seen.append(int(store.dest_get("k")))
                    store.dest_finish_get("k")
                store.reset()
        return seen

    assert threads(2, rank_fn)[1] == [0, 1, 2, 3, 4]


def test_barrier_orders_the_ranks(threads):
    log: list[tuple[str, int]] = []
    lock = threading.Lock()

    def rank_fn(rank: int):
        with _open("barrier", 3, rank) as store:
            time.sleep(0.01 * rank)
            with lock:
                log.append(("before", rank))
            store.barrier()
            with lock:
                log.append(("after", rank))

    threads(3, rank_fn)
    assert [phase for phase, _ in log[:3]] == ["before"] * 3
    assert [phase for phase, _ in log[3:]] == ["after"] * 3


def test_dest_get_times_out_naming_the_key():
    pattern = r"dest_get.*'to-get'.*src_set\('missing'\)"
    with GlobalOption.override(comm_timeout_second=0.3), _open("to-get", 1, 0) as store:
        store_error = pytest.raises(CommTimeoutError, match=pattern)
        with store_error:
            store.dest_get("missing")


def test_src_wait_times_out_naming_who_finished(threads):
    def rank_fn(rank: int):
        with _open("to-wait", 2, rank) as store:
            if rank == 0:
                store.src_set("k", torch.ones(1), get_count=2)
                short = GlobalOption.override(comm_timeout_second=0.5)  # process-wide
                with short, pytest.raises(CommTimeoutError, match=r"1 of 2 consumers.*\[1\]"):
                    store.src_wait_until_get_finished("k")
            else:
                store.dest_get("k")
                store.dest_finish_get("k")

    threads(2, rank_fn)


def test_construction_barrier_times_out_naming_missing_ranks():
    pattern = r"ranks \[1, 2\] never arrived"
    with (
        GlobalOption.override(comm_timeout_second=0.3),
        pytest.raises(CommTimeoutError, match=pattern),
    ):
        _open("to-open", 3, 0)
    # the failed participant left nothing behind: the key can be opened again
    with _open("to-open", 1, 0) as store:
        assert store.world_size == 1


def test_namespaces_with_the_same_key_are_isolated(threads):
    first, second = CommNamespace("iso_a"), CommNamespace("iso_b")

    def rank_fn(rank: int):
        ns = first if rank < 2 else second
        with _open("same-key", 2, rank % 2, ns) as store:
            return hand_over_rank(store, rank)

    assert threads(4, rank_fn) == [None, 0, None, 2]


def test_shared_state_is_freed_with_its_last_participant():
    scoped = CommNamespace.of_process().scoped_key("freed")
    store = _open("freed", 1, 0)
    assert REGISTRY._states.get(scoped) is not None
    store.close()
    gc.collect()
    assert REGISTRY._states.get(scoped) is None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.src_set("k", torch.ones(1), 0), r"get_count must be in \[1, world_size=1\]"),
        (lambda s: s.src_set("k", [1.0], 1), "needs a torch.Tensor, got list"),
        (lambda s: s.src_set("", torch.ones(1), 1), "non-empty str"),
        (lambda s: s.dest_finish_get("k"), "before the key was set"),
        (lambda s: s.src_wait_until_get_finished("k"), "never set"),
    ],
)
def test_bad_calls_raise_clear_errors(call, message):
    with _open("misuse", 1, 0) as store, pytest.raises(CommError, match=message):
        call(store)


def test_setting_a_key_twice_in_a_round_is_refused():
    with _open("twice", 1, 0) as store:
        store.src_set("k", torch.ones(1), 1)
        with pytest.raises(CommError, match="already set in this round"):
            store.src_set("k", torch.ones(1), 1)


def test_more_finishes_than_consumers_are_refused():
    with _open("finish", 1, 0) as store:
        store.src_set("k", torch.ones(1), 1)
        store.dest_get("k")
        store.dest_finish_get("k")
        with pytest.raises(CommError, match="already finished"):
            store.dest_finish_get("k")


def test_mismatched_world_size_and_duplicate_rank_are_refused(threads):
    def rank_fn(rank: int):
        if rank == 0:
            with _open("dup", 2, 0):
                time.sleep(0.3)
            return None
        time.sleep(0.05)
        with pytest.raises(CommError, match="world_size=2"):
            _open("dup", 3, 1)
        with pytest.raises(CommError, match="rank 0 is already open"):
            _open("dup", 2, 0)
        with _open("dup", 2, 1):
            return "joined"

    assert threads(2, rank_fn)[1] == "joined"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("", 1, 0), "store_key"),
        (("k", 0, 0), "world_size"),
        (("k", 2, 2), r"rank must be an int in \[0, 2\)"),
    ],
)
def test_bad_participants_are_refused(args, message):
    with pytest.raises(CommError, match=message):
        _open(*args)


def test_closed_store_refuses_calls():
    store = _open("closed", 1, 0)
    store.close()
    store.close()
    with pytest.raises(CommError, match="closed"):
        store.barrier()
    with pytest.raises(CommError, match="StoreKind"):
        open_store("memory", "k", 1, 0)  # type: ignore[arg-type]


def test_dest_get_and_to_device_returns_a_tensor_on_that_device(threads):
    def rank_fn(rank: int):
        with _open("to-device", 2, rank) as store:
            if rank == 0:
                store.src_set("k", torch.arange(4.0), 1)
                store.src_wait_until_get_finished("k")
                return None
            got = store.dest_get_and_to_device("k", torch.device("cpu")).clone()
            store.dest_finish_get("k")
            return got

    torch.testing.assert_close(threads(2, rank_fn)[1], torch.arange(4.0))


# --- combine: the threads' one-meeting exchange ------------------------------------------------


def _total(tensors: dict[int, torch.Tensor]) -> dict[int, torch.Tensor]:
    whole = torch.stack([tensors[r] for r in sorted(tensors)]).sum(0)
    return {r: whole.clone() for r in tensors}


def test_combine_runs_finish_once_on_every_participants_tensors(threads):
    calls = []

    def finish(tensors):
        calls.append(sorted(tensors))
        return _total(tensors)

    def rank_fn(rank: int):
        with _open("meet", 3, rank) as store:
            mine = {2 * rank: torch.full((2,), float(rank)), 2 * rank + 1: torch.ones(2)}
            return store.combine("op/all", mine, finish)

    results = threads(3, rank_fn)
    assert calls == [[0, 1, 2, 3, 4, 5]]
    assert all(result is results[0] for result in results)  # the one result, shared
    torch.testing.assert_close(results[0][4], torch.full((2,), 6.0))


def test_combine_meetings_are_forgotten_and_keys_reusable(threads):
    def rank_fn(rank: int):
        with _open("meet-again", 3, rank) as store:
            got = [
                store.combine(f"s{i}/all", {rank: torch.tensor(float(i))}, _total)
                for i in range(20)
            ]
            # one key again and again: a done meeting whose waiters have not all left yet
            # gives way to the next one
            again = [store.combine("same/all", {rank: torch.ones(1)}, _total) for _ in range(300)]
            store.barrier()
            values = [g[rank].item() for g in got] + [a[rank].item() for a in again]
            return values, dict(store._state().meetings)

    for values, left in threads(3, rank_fn):
        assert values == [3.0 * i for i in range(20)] + [3.0] * 300 and left == {}


def test_combine_failure_of_the_last_arrival_reaches_the_others_through_abort(threads):
    from dtorch.comm.store import PeerFailedError

    def rank_fn(rank: int):
        with _open("meet-fail", 2, rank) as store:
            if rank == 1:
                while not store._state().meetings:  # arrive last
                    time.sleep(0.001)

                def broken(tensors):
                    raise ValueError("finish broke")

                try:
                    store.combine("op3/all", {rank: torch.ones(1)}, broken)
                except ValueError as error:
                    store.abort("op3", f"caller 1: {error}")
                    return "raised"
            start = time.monotonic()
            with pytest.raises(PeerFailedError, match="caller 1: finish broke"):
                store.combine("op3/all", {rank: torch.ones(1)}, _total)
            return time.monotonic() - start

    elapsed, raised = threads(2, rank_fn)
    assert raised == "raised" and elapsed < 5


def test_combine_times_out_naming_who_never_came(threads):
    from dtorch.comm.store.base import MeetingTimeoutError

    timed_out = threading.Event()  # the others wait for it outside the store: the override is
    # the process's, so a barrier of theirs during it would time out as well

    def rank_fn(rank: int):
        with _open("meet-late", 3, rank) as store:
            if rank == 0:
                short = GlobalOption.override(comm_timeout_second=0.3)
                pattern = r"participants \[1, 2\] never came"
                with short, pytest.raises(MeetingTimeoutError, match=pattern) as caught:
                    store.combine("op/all", {0: torch.ones(1)}, _total)
                timed_out.set()
                assert caught.value.missing == (1, 2)
                assert store._state().meetings == {}
            assert timed_out.wait(20)
            store.barrier()

    threads(3, rank_fn)


def test_combine_refuses_an_aborted_scope_and_a_second_arrival(threads):
    from dtorch.comm.store import PeerFailedError

    with _open("meet-bad", 1, 0) as store:
        store.abort("gone", "it failed")
        with pytest.raises(PeerFailedError, match="it failed"):
            store.combine("gone/all", {0: torch.ones(1)}, _total)
        with pytest.raises(CommError, match=r"non-empty str|key"):
            store.combine("", {0: torch.ones(1)}, _total)

    done = threading.Event()  # rank 1 waits outside the store while rank 0's override holds

    def rank_fn(rank: int):
        with _open("meet-twice", 2, rank) as store:
            if rank == 0:
                short = GlobalOption.override(comm_timeout_second=0.5)
                first = threading.Thread(target=lambda: _swallow(store))
                first.start()
                while not store._state().meetings:
                    time.sleep(0.001)
                with short, pytest.raises(CommError, match="rank 0 arrived twice"):
                    store.combine("k/all", {0: torch.ones(1)}, _total)
                first.join()
                done.set()
            assert done.wait(20)
            store.barrier()

    threads(2, rank_fn)


def _swallow(store) -> None:
    with GlobalOption.override(comm_timeout_second=0.5), pytest.raises(CommTimeoutError):
        store.combine("k/all", {0: torch.ones(1)}, _total)
