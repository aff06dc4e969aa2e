"""Run one function per item on its own thread: the callers (or ranks) of the thread tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def on_threads(items: Sequence[T], fn: Callable[[T], R], timeout_s: float = 60.0) -> list[R]:
    """``fn(item)`` on one daemon thread per item; the results in item order.

    A thread still running after ``timeout_s`` (waited for per thread) fails the test instead
    of blocking it; otherwise the error of the first failed item is re-raised.
    """
    results: list[R | None] = [None] * len(items)
    errors: list[BaseException | None] = [None] * len(items)

    def body(index: int) -> None:
        try:
            results[index] = fn(items[index])
        except BaseException as error:
            errors[index] = error

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(len(items))]
    for thread in threads:
        thread.start()
    for index, thread in enumerate(threads):
        thread.join(timeout_s)
        assert not thread.is_alive(), f"the thread of {items[index]!r} hung"
    for error in errors:
        if error is not None:
            raise error
    return results  # type: ignore[return-value]  # every item finished without an error
