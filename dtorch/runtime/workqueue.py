"""WorkQueue: items for one consumer thread; producers never block and wake it only when idle.

Waking a thread costs far more than queueing an item (an Event set, then a GIL hand-off), so a
producer sets the event only when the consumer has announced it is going to sleep, and only
once until it runs again. The consumer announces idleness *before* it re-checks the queue, so
an item put in between is either seen by the check or wakes it.

Example:
    >>> queue = WorkQueue()
    >>> queue.put(1); queue.extend([2, 3])
    >>> [queue.popleft() for _ in range(len(queue))]
    [1, 2, 3]
    >>> queue.sleep(0.01)   # nothing queued: returns after the timeout
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Any


class WorkQueue:
    """A deque drained by one consumer thread (see the module docstring)."""

    __slots__ = ("_idle", "_items", "_wake", "popleft")

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._wake = threading.Event()
        self._idle = False
        # The oldest item (IndexError when empty): the deque's own method, bound once, since
        # the consumer calls it for every operator.
        self.popleft = self._items.popleft

    def put(self, item: Any) -> None:
        """Queue ``item`` (any thread, even a finalizer: no lock is taken)."""
        self._items.append(item)
        if self._idle:  # wake it once: later items before it runs need no second set()
            self._idle = False
            self._wake.set()

    def extend(self, items: Iterable[Any]) -> None:
        self._items.extend(items)
        if self._idle:
            self._idle = False
            self._wake.set()

    def __len__(self) -> int:
        return len(self._items)

    def wake(self) -> None:
        """Wake the consumer now (to stop it)."""
        self._wake.set()

    def sleep(self, timeout: float) -> None:
        """Consumer: wait until something is queued, a wake, or ``timeout`` seconds."""
        self._wake.clear()
        self._idle = True
        if not self._items:
            self._wake.wait(timeout)
        self._idle = False
