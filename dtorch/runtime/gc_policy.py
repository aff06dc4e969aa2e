"""What dtorch asks of Python's cyclic garbage collector.

The runtime allocates a few small objects per recorded operator (an Operator, its operands, a
Tensor handle, queue items); those in flight between the client, the controller and the
streams survive young collections and get promoted, which makes Python run full collections
regularly. A full collection rescans every tracked object of the process - after ``import
torch`` well over 100,000 of them (modules, classes, functions) - and that costed about a
quarter of the per-operator time (benchmarks/op_overhead.py: 16.4 µs -> 12.3 µs per op).

So importing dtorch moves every object that exists at that moment to the collector's
permanent generation (``gc.freeze()``): they are never rescanned, and reference counting still
frees them as usual. The one consequence for a program: a reference cycle among objects that
existed before ``import dtorch`` is never collected. Set DTORCH_GC_FREEZE=0 to opt out.

What the collector finds of a Graph or a WorkerPool is closed by ``collected``: only in the
process that made it (a child made by ``os.fork`` inherits the parent's objects and their
finalizers, and closing them there would stop the parent's workers and remove its files), and
never on a thread the close joins nor on any other of dtorch's own threads (the last
reference may go on a graph's own report thread, where a future's callback runs, or on a
kernel stream where the collector happens to run, and a thread cannot join itself: the close
then runs on a thread of its own, which the interpreter's exit waits for; anywhere else it
runs at once, as before).

Example:
    >>> import gc
    >>> from dtorch.options import GlobalOption
    >>> freeze_at_import() == GlobalOption.get_gc_freeze()
    True
"""

from __future__ import annotations

import atexit
import gc
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import ClassVar

from dtorch.errors import OptionError
from dtorch.options import GlobalOption
from dtorch.runtime.daemon import in_runtime_thread


def freeze_at_import() -> bool:
    """Freeze the objects that exist now unless DTORCH_GC_FREEZE=0; True if it did. An
    invalid DTORCH_* variable does not fail ``import dtorch`` (a program could not catch
    that): nothing is frozen, and the OptionError comes at the first use of the options."""
    try:
        freeze = GlobalOption.get_gc_freeze()
    except OptionError:
        return False
    if not freeze:
        return False
    gc.freeze()
    return True


def collected(
    close: Callable[[], None], owner_pid: int, joins_this_thread: Callable[[], bool] = bool
) -> None:
    """The finalizer of an object that owns threads or processes: ``close()`` (see the module
    docstring for when it does nothing, or runs on a thread of its own:
    ``joins_this_thread()`` says whether the close would join the calling thread).

    Example:
        >>> closed = []
        >>> collected(lambda: closed.append(1), os.getpid()); collected(closed.clear, -1)
        >>> closed
        [1]
    """
    if os.getpid() != owner_pid:  # a forked child: what it inherited is its parent's
        return
    if joins_this_thread() or in_runtime_thread():
        _Closing.start(close)
        return
    close()


#: How long the interpreter's exit waits for closes begun on threads of their own.
EXIT_JOIN_S = 30.0


class _Closing:
    """The closes ``collected`` runs on threads of their own. The interpreter's exit waits
    for them (``join_at_exit``): a graph whose streams still run kernels as the interpreter
    tears down aborts the process (``daemon.py``), and nothing else waits for these."""

    lock: ClassVar[threading.Lock] = threading.Lock()
    threads: ClassVar[set[threading.Thread]] = set()
    hooked: ClassVar[bool] = False

    @classmethod
    def start(cls, close: Callable[[], None]) -> None:
        thread = threading.Thread(target=cls._run, args=(close,), name="dtorch-collected")
        thread.daemon = True  # the exit hook joins it; a daemon never blocks the exit itself
        with cls.lock:
            cls.threads.add(thread)
            if not cls.hooked:
                cls.hooked = True
                atexit.register(cls.join_at_exit)
        thread.start()

    @classmethod
    def _run(cls, close: Callable[[], None]) -> None:
        try:
            close()
        finally:
            with cls.lock:
                cls.threads.discard(threading.current_thread())

    @classmethod
    def join_at_exit(cls) -> None:
        """Mark the exit first (a close still running drops what is queued from then on,
        as an exit-time close does), then wait for every close begun, up to EXIT_JOIN_S."""
        _Exit.mark()
        deadline = time.monotonic() + EXIT_JOIN_S
        with cls.lock:
            threads = list(cls.threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class _Exit:
    """Whether the interpreter is exiting (its ``atexit`` hooks run: every thread the program
    waited for has ended), watched from the first ``watch_exit()`` on: not at import."""

    watching = False
    exiting = False

    @classmethod
    def mark(cls) -> None:
        cls.exiting = True


def watch_exit() -> None:
    """Start watching for the interpreter's exit (idempotent). Hooks run last-registered
    first, so this one must come after the hook through which ``weakref.finalize`` runs the
    finalizers left at exit (a graph's close among them): that hook is registered with the
    process's first ``finalize``, which this one makes sure exists (it finalizes nothing)."""
    if not _Exit.watching:
        _Exit.watching = True
        weakref.finalize(_Exit, _Exit.mark).atexit = False  # weakref's exit hook, first
        atexit.register(_Exit.mark)


def exiting() -> bool:
    """True once the interpreter exits: nothing can read a graph's results any more."""
    return _Exit.exiting
