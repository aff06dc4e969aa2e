"""Fixtures for every comm test: a checked namespace (the shared worker pool is in
tests/conftest.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from dtorch.comm.namespace import CommNamespace


@pytest.fixture
def namespace() -> Iterator[CommNamespace]:
    """A fresh namespace; the test fails if anything of it is left in /dev/shm."""
    ns = CommNamespace.create()
    yield ns
    if ns.leftovers():  # a full collection costs 0.5 s late in the suite: only when needed
        gc.collect()  # finalizers of objects caught in reference cycles (e.g. by tracebacks)
    left = [path.name for path in ns.leftovers()]
    ns.reclaim()
    assert left == [], f"left behind in /dev/shm: {left}"
