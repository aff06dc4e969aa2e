"""Fixtures for the TensorStore tests: rank threads (the pool and namespaces: ../conftest.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

RankFn = Callable[[int], Any]


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
