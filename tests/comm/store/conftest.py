"""Fixtures for the TensorStore tests: rank threads, a shared spawn process pool, namespaces."""

from __future__ import annotations

import gc
import multiprocessing
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest
from store_scenarios import warm

from dtorch.comm.namespace import CommNamespace

RankFn = Callable[[int], Any]
POOL_WORKERS = 2


def run_threads(world_size: int, fn: RankFn, timeout_s: float = 30.0) -> list[Any]:
    """Run ``fn(rank)`` for every rank on its own thread; return results, re-raise errors."""
    results: list[Any] = [None] * world_size
    errors: list[BaseException | None] = [None] * world_size

    def body(rank: int) -> None:
        try:
            results[rank] = fn(rank)
        except BaseException as error:
            errors[rank] = error

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(world_size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout_s)
        assert not thread.is_alive(), "a rank thread hung"
    for error in errors:
        if error is not None:
            raise error
    return results


@pytest.fixture
def threads() -> Callable[..., list[Any]]:
    """``threads(world_size, fn)``: run fn(rank) on one thread per rank."""
    return run_threads


@pytest.fixture
def namespace() -> Iterator[CommNamespace]:
    """A fresh namespace; the test fails if anything of it is left in /dev/shm."""
    ns = CommNamespace.create()
    yield ns
    gc.collect()  # finalizers of objects caught in reference cycles (e.g. by tracebacks)
    left = [path.name for path in ns.leftovers()]
    ns.reclaim()
    assert left == [], f"left behind in /dev/shm: {left}"


@pytest.fixture(scope="session")
def process_pool() -> Iterator[ProcessPoolExecutor]:
    """Spawned worker processes shared by every process test (torch imports once each)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(POOL_WORKERS, mp_context=context) as pool:
        pids = {future.result() for future in [pool.submit(warm) for _ in range(6)]}
        assert pids
        yield pool
