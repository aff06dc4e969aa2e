"""DaemonThread: a daemon thread whose end a join interrupted by Ctrl-C cannot fake.

CPython 3.11's ``Thread.join`` releases the joined thread's state lock when a signal handler
raises while it waits (bpo-45274: meant for a lock it had just acquired, but a running thread
holds it too) and marks the thread stopped for good: every later ``join`` returns at once and
``is_alive()`` says False while it still runs. A graph whose close was interrupted would then
"stop" its kernel streams at the interpreter's exit without waiting, and a stream still freeing
a tensor as the interpreter tears down aborts the process ("terminate called without an
active exception"). So the end of these threads is an Event their own last step sets, which an
interrupted wait leaves as it was.

Example:
    >>> done = []
    >>> thread = DaemonThread(done.append, "example", (1,))
    >>> thread.join(5.0), done
    (True, [1])
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

#: The idents of the running DaemonThreads (streams, dispatchers, report readers, monitors).
#: Not a ``threading.local``: a collector's finalizer reading one on a thread being torn down
#: makes per-thread state that CPython never frees (a weakref per short-lived thread).
_RUNTIME: set[int] = set()


def in_runtime_thread() -> bool:
    """Whether the calling thread is one of dtorch's own (a DaemonThread): a graph the
    collector finds there must close elsewhere (its close may join this very thread, or
    would hold up another graph's work).

    Example:
        >>> in_runtime_thread(), DaemonThread(lambda: None, "x").join(5.0)
        (False, True)
    """
    return threading.get_ident() in _RUNTIME


class DaemonThread:
    """Runs ``target(*args)`` on a daemon thread named ``name``, started at once."""

    __slots__ = ("_ended", "thread")

    def __init__(self, target: Callable[..., Any], name: str, args: tuple[Any, ...] = ()) -> None:
        self._ended = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(target, args), name=name, daemon=True
        )
        self.thread.start()

    def _run(self, target: Callable[..., Any], args: tuple[Any, ...]) -> None:
        _RUNTIME.add(threading.get_ident())
        try:
            target(*args)
        finally:  # after the target's frame (and what it held) is gone
            _RUNTIME.discard(threading.get_ident())
            self._ended.set()

    def join(self, timeout: float) -> bool:
        """Wait at most ``timeout`` s for the target to return; True if it did."""
        if self.is_current():  # as Thread.join: it would wait for itself
            raise RuntimeError(f"{self.thread.name} cannot join itself")
        return self._ended.wait(timeout)

    def is_alive(self) -> bool:
        """Whether the target still runs (not ``Thread.is_alive``: see the module docstring)."""
        return not self._ended.is_set()

    def is_current(self) -> bool:
        """Whether the calling thread is this one (by ident: ``current_thread()`` on a thread
        being torn down, where a default graph's finalizer runs, registers a ghost
        ``Dummy-N`` thread; an ended thread's ident may be another's now)."""
        return threading.get_ident() == self.thread.ident and not self._ended.is_set()
