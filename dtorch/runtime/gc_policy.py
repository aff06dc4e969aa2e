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
never on a thread the close joins (the last reference may go on a graph's own report thread,
where a future's callback runs, and a thread cannot join itself: the close then runs on a
thread of its own; anywhere else it runs at once, as before).

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
import weakref
from collections.abc import Callable

from dtorch.errors import OptionError
from dtorch.options import GlobalOption


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
    if joins_this_thread():
        threading.Thread(target=close, name="dtorch-collected", daemon=True).start()
        return
    close()


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
