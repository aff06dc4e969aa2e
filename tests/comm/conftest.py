"""Fixtures for every comm test: a checked namespace and one shared pool of spawned workers."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from dtorch.comm.namespace import CommNamespace
from tests.process_pool import ProcessPool

POOL_WORKERS = 4  # the most processes one test uses (group and store tests)


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
def process_pool() -> Iterator[ProcessPool]:
    """Spawned worker processes shared by the group, store and promise process tests (torch
    imports once each); every job cleans up after itself, so tests share no state."""
    with ProcessPool(POOL_WORKERS) as pool:
        pool.warm()
        yield pool
