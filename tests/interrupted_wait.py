"""One check for every blocking wait that a ``close()`` from another thread must end at once
(a poll of a subscriber or a puller, a ``get`` of the rendezvous store's client)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def assert_close_ends_the_wait(
    wait: Callable[[], object],
    close: Callable[[], object],
    error: type[BaseException],
    *,
    settle_s: float = 0.2,
    join_s: float = 2.0,
) -> None:
    """``wait()`` runs in a thread; ``settle_s`` later ``close()`` returns within a second,
    and the wait ends within ``join_s`` raising ``error`` that says the thing was closed."""
    outcome: list[BaseException] = []

    def waiting() -> None:
        try:
            wait()
        except error as raised:
            outcome.append(raised)

    thread = threading.Thread(target=waiting)
    thread.start()
    time.sleep(settle_s)
    started = time.monotonic()
    close()
    assert time.monotonic() - started < 1.0
    thread.join(join_s)
    assert not thread.is_alive() and outcome and "closed" in str(outcome[0])
