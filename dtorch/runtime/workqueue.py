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

``put_handing_over`` is ``put_bounded`` that, every ``HAND_OVER_EVERY`` items, waits (at most
``HAND_OVER_SECONDS``) for the consumer's next drain. It is for the producer whose consumer
feeds other processes (process mode's controller): a thread holding the GIL keeps it for the
interpreter's switch interval (5 ms), longer than recording a few hundred operators takes, so
the consumer would send nothing until the producer stopped, and the workers would start
late: one stage after the other. A ``sleep(0)`` does not hand the GIL over reliably (the
releasing thread often takes it back first); a wait does. Thread mode gains nothing from it:
its devices need the same GIL.

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
#: Items between two hand-overs in ``put_handing_over``: 128 cut process mode's cost per small
#: operator by 10-20% with 1, 2 and 4 workers (64 and 256 less reliably; interleaved runs).
HAND_OVER_EVERY = 128
#: The longest a hand-over waits for the consumer's drain (it never needs to wait longer).
HAND_OVER_SECONDS = 0.002


class WorkQueue:
    """A deque drained by one consumer thread (see the module docstring)."""

    __slots__ = (
        "_drained",
        "_full",
        "_handing",
        "_idle",
        "_items",
        "_limit",
        "_put_since",
        "_refusal",
        "_room",
        "_wake",
        "popleft",
    )

    def __init__(self, limit: int = 0) -> None:
        self._items: deque[Any] = deque()
        self._wake = threading.Event()
        self._idle = False
        self._limit = limit  # 0: unbounded
        self._room = threading.Event()
        self._full = False
        self._refusal: BaseException | None = None
        self._put_since = 0  # items since the last hand-over (put_handing_over)
        self._handing = False  # a producer waits for the next drain
        self._drained = threading.Event()
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

    def put_handing_over(self, item: Any) -> None:
        """``put_bounded``; every ``HAND_OVER_EVERY`` items, wait for the consumer to drain
        (``made_room``), so it runs now instead of after the producer's time slice."""
        self.put_bounded(item)
        self._put_since += 1
        if self._put_since < HAND_OVER_EVERY:
            return
        self._put_since = 0
        self._drained.clear()
        self._handing = True
        if self._items:  # else drained already: nothing to wait for
            self._drained.wait(HAND_OVER_SECONDS)
        self._handing = False

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
        if self._handing:
            self._handing = False
            self._drained.set()

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

    def clear(self) -> None:
        """Drop every queued item (a close at exit: nobody can read what they would make)."""
        self._items.clear()

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
