"""Worker processes keep freed memory for their next kernels (dtorch.runtime.heap).

Process mode only: a thread-mode graph runs in the user's process, whose allocator settings
dtorch leaves alone. The forward-like pattern below (sixteen 1 MiB activations alive at once,
then all freed) took some 3,800 page faults per step in each worker with glibc's default
thresholds (the freed heap top is trimmed, the next step faults it back in), and none once
the worker keeps freed memory.
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

ACTIVATIONS = 16
FLOATS = 1 << 18  # 1 MiB of float32 per device


def _minor_faults(pid: int) -> int:
    # field 10 of /proc/<pid>/stat (after the parenthesised command name): minflt
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[7])


def _step(x: dtorch.Tensor) -> torch.Tensor:
    """Sixteen activations alive at once, then their sum; all of them freed after it."""
    activations = [x + k for k in range(ACTIVATIONS)]
    total = activations[0]
    for activation in activations[1:]:
        total = total + activation
    return total.to_torch()


@pytest.mark.parametrize("runner", ["process"])
def test_a_worker_reuses_the_pages_its_kernels_freed(graph: dtorch.Graph) -> None:
    pids = graph.runner.pool.pids  # type: ignore[attr-defined]
    mesh = dtorch.init_device_mesh("cpu", len(pids))
    x = dtorch.ones(len(pids), FLOATS, device_mesh=mesh, placements=[Shard(0)])
    expected = sum(torch.ones(len(pids), FLOATS) + k for k in range(ACTIVATIONS))
    for _ in range(5):  # the first steps grow the heap
        torch.testing.assert_close(_step(x), expected)
    graph.sync()
    faults = [[_minor_faults(pid) for pid in pids]]
    for _ in range(7):
        torch.testing.assert_close(_step(x), expected)
        graph.sync()
        faults.append([_minor_faults(pid) for pid in pids])
    # each worker's median step: a step that happens to hold more tensors at once grows the
    # heap for good (once); a heap handed back to the system after every step faults one
    # step's activations, 16 MiB = 4,096 pages per worker, in again at every step
    steps = [[b - a for a, b in zip(faults[i], faults[i + 1], strict=True)] for i in range(7)]
    medians = [statistics.median(worker) for worker in zip(*steps, strict=True)]
    pages = ACTIVATIONS * FLOATS * 4 // os.sysconf("SC_PAGE_SIZE")
    assert max(medians) < pages // 16, (steps, pages)
