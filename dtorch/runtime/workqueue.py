"""WorkQueue: items for one consumer thread; producers wake it only when idle.

Waking a thread costs far more than queueing an item (an Event set, then a GIL hand-off), so a
producer sets the event only when the consumer has announced it is going to sleep, and only
once until it runs again. The consumer announces idleness *before* it re-checks the queue, so
an item put in between is either seen by the check or wakes it.

``put`` never blocks (releases come from finalizers, which may run on any thread, the
consumer's own included). ``put_bounded`` is for the one producer that must be held back
when the consumer falls behind (the client recording operators): past ``limit`` items it
waits until the consumer has drained half of them, waking every second to see whether the
queue was refused meanwhile (``refuse``: the graph closed or broke), which it then raises.

Example:
    >>> queue = WorkQueue(limit=8)
    >>> queue.put(1); queue.extend([2, 3]); queue.put_bounded(4)
    >>> [queue.popleft() for _ in range(len(queue))]
    [1, 2, 3, 4]
    >>> queue.sleep(0.01)   # nothing queued: returns after the timeout
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

#: How often a producer held back by a full queue checks whether the queue was refused.
ROOM_CHECK_SECONDS = 1.0


class WorkQueue:
    """A deque drained by one consumer thread (see the module docstring)."""

    __slots__ = ("_full", "_idle", "_items", "_limit", "_refusal", "_room", "_wake", "popleft")

    def __init__(self, limit: int = 0) -> None:
        self._items: deque[Any] = deque()
        self._wake = threading.Event()
        self._idle = False
        self._limit = limit  # 0: unbounded
        self._room = threading.Event()
        self._full = False
        self._refusal: BaseException | None = None
        # The oldest item (IndexError when empty): the deque's own method, bound once, since
        # the consumer calls it for every operator.
        self.popleft = self._items.popleft

    def put(self, item: Any) -> None:
        """Queue ``item`` (any thread, even a finalizer: never blocks, takes no lock)."""
        self._items.append(item)
        if self._idle:  # wake it once: later items before it runs need no second set()
            self._idle = False
            self._wake.set()

    def put_bounded(self, item: Any) -> None:
        """Queue ``item``; then, past the limit, wait until the consumer made room."""
        items = self._items
        items.append(item)
        if self._idle:
            self._idle = False
            self._wake.set()
        if len(items) >= self._limit > 0:
            self._wait_for_room()

    def _wait_for_room(self) -> None:
        # Resume at the consumer's own condition (half drained): resuming as soon as one item
        # left would refill the queue at once and wait again, a second each time.
        half = self._limit // 2
        while len(self._items) > half:
            self._room.clear()
            self._full = True
            if len(self._items) <= half:  # drained between the check and the flag
                return
            self._room.wait(ROOM_CHECK_SECONDS)
            if self._refusal is not None:
                raise self._refusal

    def made_room(self) -> None:
        """Consumer: call after draining; lets held-back producers go once half is free."""
        if self._full and len(self._items) <= self._limit // 2:
            self._full = False
            self._room.set()

    def refuse(self, error: BaseException) -> None:
        """Producers held back now, or later, raise ``error`` instead of waiting."""
        self._refusal = error
        self._room.set()

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
