"""WorkQueue: order, back-pressure and the producer's hand-over to its consumer."""

from __future__ import annotations

import threading
import time

import pytest

from dtorch.runtime import workqueue
from dtorch.runtime.workqueue import WorkQueue

pytestmark = pytest.mark.timeout(30)


def _consume(queue: WorkQueue, seen: list[int], stop: threading.Event, drains: list[int]) -> None:
    while not stop.is_set() or len(queue):
        taken = 0
        while True:
            try:
                seen.append(queue.popleft())
            except IndexError:
                break
            taken += 1
        queue.made_room()
        if taken:
            drains.append(taken)
        else:
            queue.sleep(0.01)


def test_a_handing_over_producer_lets_the_consumer_drain_as_it_goes() -> None:
    queue = WorkQueue(limit=1 << 14)
    seen: list[int] = []
    drains: list[int] = []
    stop = threading.Event()
    consumer = threading.Thread(target=_consume, args=(queue, seen, stop, drains))
    consumer.start()
    count = 10 * workqueue.HAND_OVER_EVERY
    for item in range(count):
        queue.put_handing_over(item)
    stop.set()
    queue.wake()
    consumer.join(10)
    assert seen == list(range(count))  # every item, in order
    # The consumer ran during the production (10 times when every hand-over finds it
    # scheduled; without the hand-over, once at the end): a margin for a loaded machine.
    assert len(drains) >= 3


def test_a_hand_over_without_a_consumer_waits_briefly_and_loses_nothing() -> None:
    queue = WorkQueue(limit=1 << 14)
    count = 3 * workqueue.HAND_OVER_EVERY
    start = time.perf_counter()
    for item in range(count):
        queue.put_handing_over(item)
    elapsed = time.perf_counter() - start
    assert elapsed < 3 * workqueue.HAND_OVER_SECONDS + 1.0  # bounded waits, never a hang
    assert [queue.popleft() for _ in range(len(queue))] == list(range(count))
