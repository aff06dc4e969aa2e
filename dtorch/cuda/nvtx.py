"""``dtorch.cuda.nvtx``: NVTX ranges around controller code, for profilers.

With CUDA present the calls go to ``torch.cuda.nvtx``. Without CUDA they are recorded no-ops:
each thread keeps its stack of open range names, so ``range_push`` returns the depth of the new
range (0-based, as torch) and ``range_pop`` the depth left, or -1 when no range is open (an
unpaired pop, torch's error value), in both cases.

Example:
    >>> from dtorch.cuda import nvtx
    >>> nvtx.range_push("step")
    0
    >>> nvtx.range_pop(), nvtx.range_pop()
    (0, -1)
    >>> with nvtx.range("forward"):
    ...     nvtx.open_ranges()
    ['forward']
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

_THREAD = threading.local()  # per-thread stack of open range names (NVTX ranges are per thread)


def _stack() -> list[str]:
    # created on first use in each thread
    stack: list[str] | None = getattr(_THREAD, "stack", None)
    if stack is None:
        stack = _THREAD.stack = []
    return stack


def range_push(msg: str) -> int:
    """Open a range named ``msg``; its depth (0 for the outermost)."""
    if not isinstance(msg, str):
        raise TypeError(f"nvtx.range_push takes a str message, got {type(msg).__name__}")
    stack = _stack()
    stack.append(msg)
    if torch.cuda.is_available():
        torch.cuda.nvtx.range_push(msg)
    return len(stack) - 1


def range_pop() -> int:
    """Close the innermost range; the depth it had, or -1 when no range was open."""
    stack = _stack()
    if not stack:
        return -1
    stack.pop()
    if torch.cuda.is_available():
        torch.cuda.nvtx.range_pop()
    return len(stack)


@contextmanager
def range(msg: str) -> Iterator[None]:  # torch.cuda.nvtx's name
    """``with nvtx.range(msg):`` a pushed range, popped when the block ends."""
    range_push(msg)
    try:
        yield
    finally:
        range_pop()


def open_ranges() -> list[str]:
    """The names of this thread's open ranges, outermost first."""
    return list(_stack())


__all__ = ["open_ranges", "range", "range_pop", "range_push"]
