"""Fixtures for the TensorStore tests: rank threads (the pool and namespaces: ../conftest.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from network_peers import STORE_LOGGER, LogWatch

from tests.thread_runner import on_threads


@pytest.fixture
def threads() -> Callable[..., list[Any]]:
    """``threads(world_size, fn)``: run fn(rank) on one thread per rank (30 s each at most)."""

    def run(world_size: int, fn: Callable[[int], Any], timeout_s: float = 30.0) -> list[Any]:
        return on_threads(range(world_size), fn, timeout_s)

    return run


@pytest.fixture
def watch():
    """The network store's log records from every thread (the coordinator logs from its
    own), for the tests that check a refusal is logged."""
    handler = LogWatch()
    logger = logging.getLogger(STORE_LOGGER)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old_level)
