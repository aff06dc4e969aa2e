"""MemoryCell: the promise state for threads of one process (spec 002 section 4.3).

A lock, a ``threading.Event`` (waiters sleep in the kernel, the setter wakes them) and a list
of callbacks run by the setting thread. ``await`` registers a callback that hands completion
to the event loop with ``call_soon_threadsafe``: no polling, no thread. A promise dropped
without being set settles its future with an error, so nothing waits for a value that cannot
come (the spec's broken promise).

Example:
    >>> import torch
    >>> cell = MemoryCell("doc")
    >>> cell.is_ready(), cell.wait(0.0)
    (False, False)
    >>> cell.settle(torch.zeros(1), None); cell.outcome().tolist()
    [0.0]
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Callable

import torch

from dtorch.comm.promise.base import PromiseStateError
from dtorch.errors import CommError, raised_anew

_LOG = logging.getLogger(__name__)


def run_callback(fn: Callable[[], None]) -> None:
    """Run a done-callback; its failure is logged, never raised into the setter."""
    try:
        fn()
    except Exception:  # a user callback must not break the thread that settled the promise
        _LOG.exception("a future's done-callback raised")


class MemoryCell:
    """Promise state shared by threads; see the module docstring."""

    __slots__ = ("_callbacks", "_error", "_event", "_lock", "_value", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._value: torch.Tensor | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[], None]] = []

    def settle(self, value: torch.Tensor | None, error: BaseException | None) -> None:
        with self._lock:
            if self._event.is_set():
                raise PromiseStateError(f"promise {self.name!r} was already set")
            self._value, self._error = value, error
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            run_callback(fn)

    def abandon(self) -> None:
        """Settle with an error if nobody set the promise before it was dropped."""
        if not self._event.is_set():
            error = CommError(f"promise {self.name!r} was dropped before a value was set")
            try:
                self.settle(None, error)
            except PromiseStateError:  # set concurrently by another thread: that value stands
                return

    def wait(self, timeout_s: float) -> bool:
        return self._event.wait(max(0.0, timeout_s))

    def is_ready(self) -> bool:
        return self._event.is_set()

    def outcome(self) -> torch.Tensor | None:
        if self._error is not None:
            raise raised_anew(self._error)
        return self._value

    def add_callback(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        run_callback(fn)

    def loop_waiter(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        waiter: asyncio.Future[None] = loop.create_future()
        callback = functools.partial(_complete_threadsafe, loop, waiter)
        self.add_callback(callback)
        # a cancelled or timed-out await leaves nothing behind in the cell
        waiter.add_done_callback(lambda _: self._drop_callback(callback))
        return waiter

    def _drop_callback(self, fn: Callable[[], None]) -> None:
        """Forget ``fn`` if it has not run (its awaiter stopped waiting)."""
        with self._lock, contextlib.suppress(ValueError):  # ValueError: ran already
            self._callbacks.remove(fn)


def _complete_threadsafe(loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None]) -> None:
    try:
        loop.call_soon_threadsafe(complete, waiter)
    except RuntimeError:  # the loop was closed meanwhile: nobody awaits any more
        return


def complete(waiter: asyncio.Future[None]) -> None:
    """Mark ``waiter`` done unless it was cancelled or timed out already."""
    if not waiter.done():
        waiter.set_result(None)
