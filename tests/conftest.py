"""Shared fixtures: a fresh graph per test, and one pool of spawned worker processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import dtorch
from tests.process_pool import ProcessPool

POOL_WORKERS = 4  # the most processes one test uses (group, store and convert tests)


@pytest.fixture
def graph() -> Iterator[dtorch.Graph]:
    """A graph of its own for one test (its threads stop at the end of the test)."""
    g = dtorch.Graph()
    try:
        yield g
    finally:
        g.close()


@pytest.fixture(scope="session")
def process_pool() -> Iterator[ProcessPool]:
    """Spawned worker processes shared by every test that needs processes (torch imports once
    in each); every job cleans up after itself, so tests share no state."""
    with ProcessPool(POOL_WORKERS) as pool:
        pool.warm()
        yield pool
