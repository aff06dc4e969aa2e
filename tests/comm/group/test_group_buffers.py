"""BufferPool: pooled tensors behave like torch.empty ones, memory comes back only when every
view of a tensor is gone, the idle budget holds, and collective outputs from the pool never
alias one another, an input, or a live earlier output."""

from __future__ import annotations

import threading

import pytest
import torch

from dtorch.comm.group import CommTopology, ThreadGroupManager
from dtorch.comm.group.buffers import BufferPool, size_class

pytestmark = pytest.mark.timeout(60)

SMALL_MIN = 4096  # pools in these tests lend from 4 KiB on, so tensors stay small


def _pointer(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@pytest.mark.parametrize(
    "dtype",
    [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.bool, torch.complex64],
)
def test_pooled_tensors_hold_values_like_torch(dtype: torch.dtype) -> None:
    pool = BufferPool(min_bytes=SMALL_MIN)
    expected = (torch.randn(64, 33) * 10).to(dtype)
    out = pool.empty((64, 33), dtype)
    out.copy_(expected)
    assert out.shape == (64, 33) and out.dtype == dtype and out.is_contiguous()
    assert torch.equal(out, expected)
    assert torch.equal(out + out, expected + expected)
    assert pool.stats().created == (1 if out.numel() * out.element_size() >= SMALL_MIN else 0)


def test_small_and_non_cpu_requests_bypass_the_pool() -> None:
    pool = BufferPool(min_bytes=1 << 20)
    small = pool.empty((16,), torch.float32)
    meta = pool.empty((1 << 20,), torch.float32, torch.device("meta"))
    empty = pool.empty((0, 5), torch.float32)
    assert small.shape == (16,) and meta.device.type == "meta" and empty.shape == (0, 5)
    assert pool.stats().created == 0


def test_memory_returns_only_after_the_last_view_dies() -> None:
    pool = BufferPool(min_bytes=SMALL_MIN)
    first = pool.empty((4096,), torch.float32).fill_(1.0)
    view = first[10:20]
    pointer = _pointer(first)
    del first
    second = pool.empty((4096,), torch.float32).fill_(2.0)
    assert _pointer(second) != pointer and torch.equal(view, torch.ones(10))
    del view
    third = pool.empty((4096,), torch.float32)
    assert _pointer(third) == pointer
    assert (pool.stats().created, pool.stats().reused) == (2, 1)


def test_sizes_within_a_class_share_memory() -> None:
    pool = BufferPool(min_bytes=SMALL_MIN)
    assert size_class(40_000 * 4) == size_class(39_000 * 4)
    pointer = _pointer(pool.empty((40_000,), torch.float32))  # dies at once
    assert _pointer(pool.empty((39_000,), torch.float32)) == pointer


def test_idle_budget_drops_what_exceeds_it() -> None:
    size = size_class(8192 * 4)
    pool = BufferPool(min_bytes=SMALL_MIN, max_idle_bytes=size)
    held = [pool.empty((8192,), torch.float32) for _ in range(3)]
    del held
    stats = pool.stats()
    assert (stats.created, stats.idle_buffers, stats.idle_bytes) == (3, 1, size)


def test_clear_drops_idle_and_later_returns() -> None:
    pool = BufferPool(min_bytes=SMALL_MIN)
    lent = pool.empty((8192,), torch.float32)
    pool.empty((8192,), torch.float32)  # returned at once
    pool.clear()
    del lent
    assert pool.stats().idle_buffers == 0
    again = pool.empty((8192,), torch.float32).fill_(3.0)
    assert torch.equal(again, torch.full((8192,), 3.0))


def test_threads_never_share_live_memory() -> None:
    pool = BufferPool(min_bytes=SMALL_MIN)
    errors: list[str] = []

    def worker(index: int) -> None:
        for step in range(200):
            held = [pool.empty((2048 + 64 * k,), torch.int64).fill_(index) for k in range(3)]
            if step % 7 == 0:
                held.append(held[0][5:50])  # a view outliving nothing: dies with the list
            if any(bool((t != index).any()) for t in held):
                errors.append(f"thread {index} saw another thread's values at step {step}")
                return

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert pool.stats().reused > 0


def test_large_collective_outputs_come_from_the_pool_and_never_alias() -> None:
    """Two callers (threads) all-gather 1 MiB shards twice, keeping the first outputs: the
    second outputs are new memory; once the first die, their memory is reused."""
    rows = 1 << 16  # [65536, 4] float32 per shard: 1 MiB, the pool's default threshold
    shards = {r: torch.full((rows, 4), float(r)) for r in range(2)}
    expected = torch.cat([shards[0], shards[1]])
    with ThreadGroupManager(CommTopology.threads([[0], [1]])) as manager:
        results: dict[int, list[torch.Tensor]] = {0: [], 1: []}

        def caller(rank: int) -> None:
            group = manager.get_group("cpu", [0, 1], [rank])
            for _ in range(2):
                results[rank].append(group.all_gather({rank: shards[rank]}, 0)[rank])

        threads = [threading.Thread(target=caller, args=(r,)) for r in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        outputs = results[0] + results[1]
        results.clear()
        assert len(outputs) == 4 and all(torch.equal(o, expected) for o in outputs)
        pointers = {_pointer(o) for o in outputs}
        inputs = {_pointer(s) for s in shards.values()}
        assert len(pointers) == 4 and not pointers & inputs
        assert manager.buffers.stats().created == 4
        outputs.clear()
        assert manager.buffers.stats().idle_buffers == 4
