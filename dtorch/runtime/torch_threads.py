"""Torch's intra-op threads in kernel stream threads: a share of the creating thread's.

Thread mode runs every device's kernels on a few stream threads of one process. A stream
thread starts with torch's process default of intra-op threads (one per core), so with two
streams busy - a tp=2 or dp=2 mesh, dtorch's usual case - twice as many OpenMP threads as
cores ran, and oversubscribed OpenMP teams spin against each other (the tensor-parallel MLP
of benchmarks/models.py used about 15% more CPU per forward that way). Each stream now runs
``share(streams)`` threads: the creating thread's ``torch.get_num_threads()`` divided among
the streams, at least one (process mode already divides the cores among its workers).

``torch.set_num_threads`` in a thread sets that thread's OpenMP and MKL counts and also
torch's process default, which threads made later start from: ``keeping_default`` puts the
default back once the streams have taken theirs, so making a graph leaves the user's torch
as it found it.

Example:
    >>> import threading, torch
    >>> before = torch.get_num_threads()
    >>> seen = []
    >>> def stream_thread():
    ...     adopt(1)
    ...     seen.append(torch.get_num_threads())
    >>> with keeping_default():
    ...     thread = threading.Thread(target=stream_thread); thread.start(); thread.join()
    >>> seen, torch.get_num_threads() == before
    ([1], True)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


def share(streams: int) -> int:
    """Intra-op threads for each of ``streams`` stream threads made by the calling thread."""
    return max(1, torch.get_num_threads() // streams)


def adopt(count: int) -> None:
    """Run the calling thread's torch kernels on ``count`` intra-op threads."""
    # torch sets a thread's count up lazily, from the process default, on the thread's first
    # parallel call: done after set_num_threads it would undo it, so it goes first
    torch.get_num_threads()
    torch.set_num_threads(count)


@contextmanager
def keeping_default() -> Iterator[int]:
    """Within the block threads may ``adopt`` their counts; after it torch's process default
    is the calling thread's count again (which the block yields)."""
    saved = torch.get_num_threads()
    try:
        yield saved
    finally:
        torch.set_num_threads(saved)
