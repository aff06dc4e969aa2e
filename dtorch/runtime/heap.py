"""Kernel streams keep the memory their kernels free, for the next kernel to reuse (and worker
processes may open as many descriptors as the hard limit allows: ``allow_all_descriptors``).

A kernel allocates its outputs fresh and the stream frees them a few operators later, so a
worker allocates and frees tensors of the same few sizes over and over. glibc's malloc serves
an allocation of at least ``M_MMAP_THRESHOLD`` (128 KiB at start) with a new ``mmap`` and
returns the heap's free top to the system once it exceeds ``M_TRIM_THRESHOLD``; both ways the
next tensor of that size starts on pages the kernel must fault in and zero, one 4 KiB page at a
time. glibc raises both thresholds itself as large blocks are freed, but not in a worker's
kernel stream threads: a tensor-parallel Llama forward of ``benchmarks/models.py`` (tp=2,
process mode) took some 2,600 page faults per forward in one worker, about 8 ms of its 45 ms
of CPU (some 3 us a fault on the development machine). Set to where glibc's own adjustment
ends (``MMAP_THRESHOLD``, the largest it allows on 64-bit, and twice that to trim), the faults
fall to a few hundred and the forward's CPU by about 10%.

Worker processes do this at start. A thread-mode graph's streams run in the user's process,
and there it costs as much: the small Llama of ``benchmarks/models.py`` on dp=2 took 3,100-3,500
faults per forward in each stream thread (5-7 ms of system time each, of a forward of about
30 ms), against 10-20 with the settings, and the forward's wall time fell by 10-20%. So
making a thread-mode graph sets them in the user's process too (``keep_freed_memory_here``),
unless DTORCH_KEEP_FREED_MEMORY=0: the process then keeps up to ``TRIM_THRESHOLD`` of freed
heap per malloc arena instead of returning it at once, which is where glibc's own adjustment
ends for a program that frees a block of ``MMAP_THRESHOLD``. Blocks of ``MMAP_THRESHOLD`` or
more still come from ``mmap`` and go back on free, so a process keeps at most about
``TRIM_THRESHOLD`` of free heap per arena beyond what its tensors use. Where the C library has
no ``mallopt`` (macOS) or ignores it (musl), nothing changes.

Example (a worker calls ``keep_freed_memory()`` once, at start; it changes the whole
process, so the example only shows the thresholds it sets, in MiB):
    >>> MMAP_THRESHOLD >> 20, TRIM_THRESHOLD >> 20
    (32, 64)
"""

from __future__ import annotations

import contextlib
import ctypes
import resource

from dtorch.options import GlobalOption

#: ``mallopt`` parameters (``<malloc.h>``).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Blocks below this come from the heap: glibc's ceiling for its dynamic threshold on 64-bit
#: (``DEFAULT_MMAP_THRESHOLD_MAX``); a larger value is refused.
MMAP_THRESHOLD = 32 * 1024 * 1024
#: Free heap kept before trimming: twice the mmap threshold, as glibc's own adjustment sets it.
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD


def keep_freed_memory() -> bool:
    """Make this process's malloc keep freed blocks below ``MMAP_THRESHOLD`` for reuse (see
    the module docstring); whether the C library took both settings."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process already runs on
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    mmap_set = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    return mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and mmap_set


def keep_freed_memory_here() -> bool:
    """``keep_freed_memory`` in the user's process, for a thread-mode graph's streams, unless
    DTORCH_KEEP_FREED_MEMORY=0; whether the settings were made. Idempotent (a graph made
    after another sets the same values again).

    Example:
        >>> from dtorch.options import GlobalOption
        >>> with GlobalOption.override(keep_freed_memory=False):
        ...     keep_freed_memory_here()
        False
    """
    return GlobalOption.get_keep_freed_memory() and keep_freed_memory()


def allow_all_descriptors() -> int:
    """Raise this process's soft limit on open descriptors to its hard limit; the new soft
    limit. A worker holds a few descriptors per collective group it takes part in (a store's
    segment and wake socket) for as long as its graph lives, so a program using a few hundred
    device sets would pass the usual soft limit of 1,024 while the hard limit allows far more.
    Like ``keep_freed_memory``, only worker processes do this: the user's process is theirs.

    Example:
        >>> import resource
        >>> allow_all_descriptors() == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        True
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):  # a limit the system will not raise
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
