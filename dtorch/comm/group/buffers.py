"""BufferPool: fresh CPU output tensors in recycled memory, so large outputs skip page faults.

Measured on this machine, a large tensor that torch allocates usually lands in pages the C
library has just taken from the kernel (a fresh mmap, or a heap grown past a freed hole that
``posix_memalign``'s slack no longer fits), and its first write pays one page fault per 4 KiB:
16 MiB cost ~8-15 ms of faults against ~2 ms of copying. Collective outputs are exactly such
tensors, made on every call. The pool lends anonymous memory maps instead: a map is wrapped
in a memoryview that only the tensor's storage references; when the storage dies (the last
view of the tensor is gone) the memoryview is collected and a weakref callback gives the map,
already touched, back to the pool. Idle maps beyond ``max_idle_bytes`` are dropped.

Requests below ``min_bytes``, and tensors on other devices (CUDA has its own caching
allocator), come from ``torch.empty``. Pooled tensors are ordinary contiguous CPU tensors,
page-aligned, whose storage cannot be resized (like any ``torch.frombuffer`` tensor).

Example:
    >>> import torch
    >>> pool = BufferPool(min_bytes=4096)
    >>> a = pool.empty((1024, 4), torch.float32)
    >>> a.fill_(1.0).sum().item(), pool.stats().created
    (4096.0, 1)
    >>> del a
    >>> b = pool.empty((4096,), torch.int32)     # the same map again: no new pages
    >>> pool.stats().created, pool.stats().reused
    (1, 1)
"""

from __future__ import annotations

import math
import mmap
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

#: ``empty(shape, dtype, device)``: a fresh tensor that aliases nothing (pooled or not).
EmptyFn = Callable[[Sequence[int], torch.dtype, torch.device], torch.Tensor]

_PAGE = mmap.PAGESIZE
#: Below this many bytes the C library's warm small-object heap serves torch.empty well.
DEFAULT_MIN_BYTES = 1 << 20
#: Idle memory a pool keeps for reuse; beyond it, returned maps are unmapped.
DEFAULT_MAX_IDLE_BYTES = 1 << 30


def torch_empty(shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The plain allocator: ``torch.empty`` (an ``EmptyFn`` for callers without a pool)."""
    return torch.empty(tuple(shape), dtype=dtype, device=device)


def size_class(nbytes: int) -> int:
    """The map size serving ``nbytes``: whole pages, rounded up to 3 significant bits, so
    requests within 12.5% of each other share maps.

    Example:
        >>> size_class(1), size_class(4096 * 9) // 4096
        (4096, 10)
    """
    pages = -(-nbytes // _PAGE)
    step = 1 << max(0, pages.bit_length() - 3)
    return -(-pages // step) * step * _PAGE


@dataclass(frozen=True, slots=True)
class PoolStats:
    """Maps created and reused so far, and the idle maps (count, bytes) held now."""

    created: int
    reused: int
    idle_buffers: int
    idle_bytes: int


class BufferPool:
    """Lends recycled, already-touched memory to large CPU tensors; see the module doc.

    Thread-safe: any thread may allocate, and a tensor may die on any thread.
    """

    def __init__(
        self, min_bytes: int = DEFAULT_MIN_BYTES, max_idle_bytes: int = DEFAULT_MAX_IDLE_BYTES
    ) -> None:
        self._min_bytes = max(1, min_bytes)
        self._max_idle = max(0, max_idle_bytes)
        self._lock = threading.Lock()
        self._idle: dict[int, list[mmap.mmap]] = {}
        self._idle_bytes = 0
        # filled by weakref callbacks, which may run on any thread at any point (even while
        # this pool's lock is held by that thread), so they only append here, lock-free
        self._returned: deque[mmap.mmap] = deque()
        self._created = 0
        self._reused = 0
        self._closed = False

    def empty(
        self, shape: Sequence[int], dtype: torch.dtype, device: torch.device | str = "cpu"
    ) -> torch.Tensor:
        """An uninitialised contiguous tensor; pooled when on CPU and at least ``min_bytes``."""
        device = torch.device(device)
        numel = math.prod(shape)
        if device.type != "cpu" or numel * dtype.itemsize < self._min_bytes:
            return torch.empty(tuple(shape), dtype=dtype, device=device)
        buffer = self._take(size_class(numel * dtype.itemsize))
        view = memoryview(buffer)
        # the storage holds the only reference to ``view``: it dies with the last tensor view
        weakref.finalize(view, self._give_back, buffer).atexit = False
        return torch.frombuffer(view, dtype=dtype, count=numel).view(tuple(shape))

    def stats(self) -> PoolStats:
        """Counters and idle memory (after taking in the maps returned so far)."""
        with self._lock:
            self._drain_returned()
            idle = sum(len(maps) for maps in self._idle.values())
            return PoolStats(self._created, self._reused, idle, self._idle_bytes)

    def clear(self) -> None:
        """Drop every idle map; maps still lent are dropped when they come back."""
        with self._lock:
            self._closed = True
            self._returned.clear()
            self._idle.clear()
            self._idle_bytes = 0

    def _take(self, size: int) -> mmap.mmap:
        with self._lock:
            self._drain_returned()
            maps = self._idle.get(size)
            if maps:
                self._idle_bytes -= size
                self._reused += 1
                return maps.pop()  # the most recently returned: the warmest in cache
            self._created += 1
        return mmap.mmap(-1, size)  # outside the lock: the kernel call may take a while

    def _give_back(self, buffer: mmap.mmap) -> None:
        if not self._closed:
            self._returned.append(buffer)

    def _drain_returned(self) -> None:
        """Move returned maps to the idle lists, up to the idle budget (lock held)."""
        returned = self._returned
        while returned:
            buffer = returned.popleft()
            size = len(buffer)
            if self._closed or self._idle_bytes + size > self._max_idle:
                continue  # dropped: unmapped once the last reference goes
            self._idle.setdefault(size, []).append(buffer)
            self._idle_bytes += size
