"""Fixtures for the promise tests: a shared spawn process pool and a checked namespace."""

from __future__ import annotations

import gc
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import pytest
from promise_scenarios import warm

from dtorch.comm.namespace import CommNamespace


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
    """Two spawned worker processes shared by every cross-process promise test."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        assert {future.result() for future in [pool.submit(warm) for _ in range(4)]}
        yield pool
