"""Every backend's handshake with threads: all-reduce rounds, broadcast of odd dtypes and
shapes, gathers, timeouts, isolation. The oracle is torch on the full tensors."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from store_scenarios import (
    allreduce,
    broadcast_check,
    exchanges,
    expected_allreduce,
    expected_exchanges,
    gather_check,
    get_many,
    get_many_times_out,
    hand_over_rank,
    held_slots,
    open_for,
    open_with_timeout,
    stack_names,
    wait_times_out,
    with_endpoint,
)

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.shm import SegmentPool
from dtorch.comm.store import StoreKind, open_store
from dtorch.errors import CommError
from dtorch.ir.dtypes import dtype_code

pytestmark = pytest.mark.timeout(60)
KINDS = ["memory", "file", "network"]
ODD = [
    (torch.bool, (3, 5)),
    (torch.uint8, (0,)),
    (torch.int16, ()),
    (torch.float16, (2, 1, 3)),
    (torch.bfloat16, (7, 9)),
    (torch.complex64, (4,)),
    (torch.float64, (1, 1023)),
    (torch.int64, (5, 0, 2)),
]


@pytest.fixture(params=KINDS)
def kind(request) -> str:
    """Each backend; a network store gets a fresh loopback port."""
    return with_endpoint(request.param)


def test_allreduce_rounds(kind, namespace, threads):
    world = 4
    results = threads(world, lambda r: allreduce(kind, namespace.instance_id, "ar", world, r, 3))
    expected = expected_allreduce(world, 3)
    for per_rank in results:
        torch.testing.assert_close(torch.tensor(per_rank), torch.tensor(expected))


def test_exchanges_without_reset(kind, namespace, threads):
    # 60 rounds of unique keys closed by end_exchange: every store forgets each finished
    # key without a barrier; then a spec round with reset still works
    world, rounds = 3, 60
    results = threads(
        world, lambda r: exchanges(kind, namespace.instance_id, "ex", world, r, rounds)
    )
    expected = expected_exchanges(world, rounds)
    for rank, (*sums, left) in enumerate(results):
        torch.testing.assert_close(torch.tensor(sums), torch.tensor(expected))
        assert left == (None if kind.startswith("network") and rank else 0)  # rank 0 serves it


@pytest.mark.parametrize(("dtype", "shape"), ODD, ids=[f"{d}-{s}" for d, s in ODD])
def test_broadcast_odd_dtypes_and_shapes(kind, dtype, shape, namespace, threads):
    code = dtype_code(dtype)
    ns = namespace.instance_id
    ok = threads(3, lambda r: broadcast_check(kind, ns, "bc", 3, r, code, shape, 7))
    assert all(ok)


def test_conjugate_and_negative_views_travel_by_value(kind, namespace, threads):
    z = torch.tensor([1 + 2j, -3j], dtype=torch.complex64)
    sources = {"conj": z.conj(), "neg": torch._neg_view(z)}

    def rank_fn(rank: int):
        with open_for(kind, namespace.instance_id, "views", 2, rank) as store:
            if rank == 0:
                for key, tensor in sources.items():
                    store.src_set(key, tensor, 1)
                for key in sources:
                    store.src_wait_until_get_finished(key)
                return None
            got = {}
            for key in sources:
                got[key] = store.dest_get(key).resolve_conj().resolve_neg().clone()
                store.dest_finish_get(key)
            return got

    got = threads(2, rank_fn)[1]
    assert torch.equal(got["conj"], z.conj().resolve_conj())
    assert torch.equal(got["neg"], -z)


def test_large_tensor(kind, namespace, threads):
    code, shape = dtype_code(torch.float32), (16, 1 << 20)  # 64 MiB
    ns = namespace.instance_id
    assert all(threads(2, lambda r: broadcast_check(kind, ns, "big", 2, r, code, shape, 3)))


def test_gather_into_rank_zero(kind, namespace, threads):
    results = threads(4, lambda r: gather_check(kind, namespace.instance_id, "gather", 4, r))
    assert results[0] == [0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0]


def test_src_wait_timeout_names_key_and_finished_consumers(kind, namespace, threads):
    ns = namespace.instance_id
    message = threads(3, lambda r: wait_times_out(kind, ns, "tw", 3, r, 0.5))[0]
    assert "src_wait_until_get_finished timed out after 0.5s" in message
    assert "'k': 1 of 2 consumers finished (ranks [1])" in message


def test_dest_get_many_waits_for_every_key(kind, namespace, threads):
    results = threads(4, lambda r: get_many(kind, namespace.instance_id, "many", 4, r, 0.3))
    assert results[0] == [[3.0, 3.0], [2.0, 2.0], [1.0, 1.0]]


def test_dest_get_many_timeout_names_the_keys_never_set(kind, namespace, threads):
    ns = namespace.instance_id
    message, keys = threads(3, lambda r: get_many_times_out(kind, ns, "gm", 3, r, 0.5))[0]
    assert keys == ("y/never",)
    assert "dest_get" in message and "timed out after 0.5s" in message
    assert "'y/never'" in message


def test_construction_timeout_names_missing_ranks(kind, namespace):
    message = open_with_timeout(kind, namespace.instance_id, "lonely", 3, 0, 0.3)
    assert "barrier timed out" in message and "ranks [1, 2] never arrived" in message


def test_network_without_its_coordinator_times_out_clearly(namespace):
    message = open_with_timeout(with_endpoint("network"), namespace.instance_id, "k", 2, 1, 0.2)
    assert "coordinator at tcp://127.0.0.1:" in message and "did not answer" in message


def test_same_key_in_two_namespaces_is_two_stores(kind, namespace, threads):
    other = CommNamespace.create()
    other_kind = with_endpoint(kind.partition("@")[0])  # a network store has its own endpoint

    def rank_fn(rank: int):
        ns, k = (namespace, kind) if rank < 2 else (other, other_kind)
        with open_for(k, ns.instance_id, "shared-key", 2, rank % 2) as store:
            return hand_over_rank(store, rank)

    assert threads(4, rank_fn) == [None, 0, None, 2]
    assert other.leftovers() == []


def test_misuse_raises_clear_errors(kind, namespace):
    with open_for(kind, namespace.instance_id, "misuse", 1, 0) as store:
        with pytest.raises(CommError, match="before the key was set"):
            store.dest_finish_get("nope")
        with pytest.raises(CommError, match="never set"):
            store.src_wait_until_get_finished("nope")
        store.src_set("k", torch.ones(1), 1)
        with pytest.raises(CommError, match="already set in this round"):
            store.src_set("k", torch.ones(1), 1)
        store.dest_get("k")
        store.dest_finish_get("k")
        with pytest.raises(CommError, match="already finished"):
            store.dest_finish_get("k")
        store.src_wait_until_get_finished("k")
        store.reset()
        store.src_set("k", torch.zeros(1), 1)  # a new round takes the key again
    with pytest.raises(CommError, match="closed"):
        store.dest_get("k")


def test_file_stores_share_a_segment_pool(namespace, threads):
    pool = SegmentPool()

    def rank_fn(rank: int) -> None:
        for index in range(3):  # one store per "operator", as kernels open them
            store = open_store(
                StoreKind.FILE, f"op{index}", 2, rank, namespace=namespace, segment_pool=pool
            )
            with store:
                if rank == 0:
                    store.src_set("t", torch.full((1000,), float(index)), 1)
                    store.src_wait_until_get_finished("t")
                    continue
                value = float(store.dest_get("t")[0])
                store.dest_finish_get("t")
                assert value == index

    threads(2, rank_fn)
    assert len(pool._free) == 1  # every store reused the one touched segment
    pool.close()


def _blocked_in(thread: threading.Thread, function: str, timeout_s: float = 30.0) -> None:
    """Wait until ``thread`` is inside ``function`` (its stack, seen from outside)."""
    deadline = time.monotonic() + timeout_s
    while function not in stack_names(thread):
        assert time.monotonic() < deadline, f"the thread never reached {function}()"
        time.sleep(0.01)


def test_mismatched_world_size_and_duplicate_rank_are_refused(kind, namespace):
    ns = namespace.instance_id
    waiting = [
        threading.Thread(target=lambda r=rank: open_for(kind, ns, "dup", 3, r).close())
        for rank in (0, 1)
    ]
    for thread in waiting:
        thread.start()
        _blocked_in(thread, "barrier")  # joined, and waiting in the construction barrier
    with pytest.raises(CommError, match=r"world_size"):
        open_for(kind, ns, "dup", 4, 2)
    with pytest.raises(CommError, match=r"rank 1 is already open"):
        open_for(kind, ns, "dup", 3, 1)
    with pytest.raises(CommError, match=r"rank 0 is already open|cannot serve"):
        open_for(kind, ns, "dup", 3, 0)
    open_for(kind, ns, "dup", 3, 2).close()  # the refused ones left the others intact
    for thread in waiting:
        thread.join(10)
        assert not thread.is_alive()


def test_release_exchange_forgets_the_published_keys_once_read(kind, namespace, threads):
    # on every store: the keys are gone once the consumer has read and finished them (the
    # memory and network stores wait for it in release_exchange; the file store drops them
    # in a later transaction of the producer, or flush)
    def rank_fn(rank: int):
        with open_for(kind, namespace.instance_id, "rel", 2, rank) as store:
            if rank == 0:
                for i in range(3):
                    store.src_set(f"e{i}/x", torch.full((3,), float(i)), get_count=1)
                    store.release_exchange((), (f"e{i}/x",))
                store.flush()
                left = held_slots(store)
                store.barrier()
                return left
            got = []
            for i in range(3):
                (tensor,) = store.dest_get_many([f"e{i}/x"])
                got.append(tensor.tolist())
                store.release_exchange((f"e{i}/x",), ())
            store.barrier()
            return got

    left, got = threads(2, rank_fn)
    assert got == [[float(i)] * 3 for i in range(3)]
    assert left in (0, None)  # None: a network store's other rank cannot see the slots


def test_file_store_release_does_not_wait_for_readers_and_recycles_their_segment(
    namespace, threads
):
    read = threading.Event()

    def rank_fn(rank: int):
        with open_for("file", namespace.instance_id, "relf", 2, rank) as store:
            if rank == 1:
                assert read.wait(10)  # the producer released its key before this read it
                (tensor,) = store.dest_get_many(["a/x"])
                value = tensor.tolist()
                store.release_exchange(("a/x",), ())
                store.barrier()
                return value
            store.src_set("a/x", torch.arange(4.0), get_count=1)
            first = store._in_use["a/x"].locator()
            store.release_exchange((), ("a/x",))  # returns at once
            read.set()
            store.barrier()  # the reader has finished: a transaction of the barrier drops a/x
            store.src_set("b/x", torch.ones(4), get_count=1)  # in a/x's segment, recycled
            second = store._in_use["b/x"].locator()
            store.release_exchange((), ("b/x",))
            store.discard()
            return first == second, held_slots(store)

    (recycled, left), value = threads(2, rank_fn)
    assert value == [0.0, 1.0, 2.0, 3.0]
    assert recycled and left == 0


def test_file_store_producer_waits_once_too_many_keys_are_unread(namespace, threads):
    from dtorch.comm.store.file import MAX_RELEASED

    released_at: list[float] = []

    def rank_fn(rank: int):
        with open_for("file", namespace.instance_id, "relw", 2, rank) as store:
            if rank == 1:
                time.sleep(0.5)  # the producer runs ahead meanwhile
                start = time.monotonic()
                for i in range(MAX_RELEASED + 1):
                    (tensor,) = store.dest_get_many([f"k{i}/x"])
                    assert tensor.tolist() == [float(i)]
                    store.release_exchange((f"k{i}/x",), ())
                store.barrier()
                return start
            for i in range(MAX_RELEASED + 1):
                store.src_set(f"k{i}/x", torch.full((1,), float(i)), get_count=1)
                released_at.append(time.monotonic())
                store.release_exchange((), (f"k{i}/x",))
            store.flush()
            store.barrier()
            return held_slots(store)

    left, reader_started = threads(2, rank_fn)
    # the first MAX_RELEASED went out at once; the next one waited for the reader
    assert released_at[MAX_RELEASED - 1] < reader_started <= released_at[MAX_RELEASED]
    assert left == 0
