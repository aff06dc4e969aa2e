"""Kernel streams keep freed memory for their next kernels (dtorch.runtime.heap): worker
processes, and a thread-mode graph's stream threads in this process (DTORCH_KEEP_FREED_MEMORY,
on by default). The forward-like pattern below (thirty-two 512 KiB activations alive at once,
then all freed) faults pages back in at nearly every step with glibc's default thresholds (the
freed heap top is trimmed, the next step faults it in again): some 3,800 per step in each
worker in an earlier version of this test, and 250-1,250 in a thread-mode stream of a pytest
process in most runs with DTORCH_KEEP_FREED_MEMORY=0 (glibc moves its thresholds itself as
blocks are freed, so a process's history decides how much); a handful with the settings.
"""

from __future__ import annotations

import os
import platform
import statistics

import pytest
import torch

import dtorch
from dtorch import Shard

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
        reason="mallopt thresholds are glibc's; other C libraries keep their own policy",
    ),
]

ACTIVATIONS = 32
FLOATS = 1 << 17  # 512 KiB of float32 per device


def _minor_faults(stat_path: str) -> int:
    # field 10 of /proc/<pid>/stat (after the parenthesised command name): minflt
    with open(stat_path) as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[7])


def _stats(graph: dtorch.Graph) -> list[str]:
    """The /proc stat files of what runs the graph's kernels: its worker processes, or this
    process's stream threads (not the test's own thread, whose to_torch copies are not
    kernels)."""
    pool = getattr(graph.runner, "pool", None)
    if pool is not None:
        return [f"/proc/{pid}/stat" for pid in pool.pids]
    return [f"/proc/self/task/{stream.native_id}/stat" for stream in graph.runner.streams]


def _step(x: dtorch.Tensor) -> torch.Tensor:
    """Thirty-two activations alive at once, then their sum; all of them freed after it."""
    activations = [x + k for k in range(ACTIVATIONS)]
    total = activations[0]
    for activation in activations[1:]:
        total = total + activation
    return total.to_torch()


def test_kernel_streams_reuse_the_pages_their_kernels_freed(graph: dtorch.Graph) -> None:
    """Each worker's (stream thread's) median step faults in less than 1/16 of the step's
    activations."""
    stats = _stats(graph)
    mesh = dtorch.init_device_mesh("cpu", len(stats))
    x = dtorch.ones(len(stats), FLOATS, device_mesh=mesh, placements=[Shard(0)])
    expected = sum(torch.ones(len(stats), FLOATS) + k for k in range(ACTIVATIONS))
    for _ in range(5):  # the first steps grow the heap
        torch.testing.assert_close(_step(x), expected)
    graph.sync()
    faults = [[_minor_faults(stat) for stat in stats]]
    for _ in range(7):
        torch.testing.assert_close(_step(x), expected)
        graph.sync()
        faults.append([_minor_faults(stat) for stat in stats])
    # each worker's median step: a step that happens to hold more tensors at once grows the
    # heap for good (once); a heap handed back to the system after every step faults one
    # step's activations, 16 MiB = 4,096 pages per worker, in again at every step
    steps = [[b - a for a, b in zip(faults[i], faults[i + 1], strict=True)] for i in range(7)]
    medians = [statistics.median(worker) for worker in zip(*steps, strict=True)]
    pages = ACTIVATIONS * FLOATS * 4 // os.sysconf("SC_PAGE_SIZE")
    assert max(medians) < pages // 16, (steps, pages)
