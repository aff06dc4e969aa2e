"""The Runner seam: what the controller hands batches to, and where its reports come from.

Everything that crosses the seam is data. Down: ``execute(batch)`` queues an ``ExecuteBatch``
(operators, the metadata of the operands they produce, the operand ids no handle holds any
more) and returns at once; the devices run the batch in order and free the no-hold operands
after it. Up: ``reports``, a channel of frozen report records (``dtorch.ir.report``) that the
controller alone turns into settled promises. ``parties`` says how many report to every Sync
or Memory operator; ``satisfy(mesh)`` whether the runner can run a mesh here;
``waiting_on(parties)`` names, for a fetch that timed out, the parties it waits for (and any
stopped worker process); ``close`` finishes queued work and stops every thread and process of
the runner.

Two runners implement it: ``ThreadRunner`` (devices are threads of this process) and
``ProcessRunner`` (worker processes fed over ZeroMQ); ``make_runner`` picks one from a
graph's option. The controller assumes nothing else about where devices live.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch
from dtorch.runtime.reports import ReportSource


class Runner(Protocol):
    """Executes batches of operators on devices; see the module docstring."""

    @property
    def reports(self) -> ReportSource:
        """The report channel's controller side."""
        ...

    @property
    def parties(self) -> int:
        """How many parties report to a Sync or Memory operator."""
        ...

    @property
    def elsewhere(self) -> bool:
        """Whether the devices run outside this process: then the client lets the
        controller send batches while it records (``WorkQueue.put_handing_over``)."""
        ...

    def execute(self, batch: ExecuteBatch) -> None:
        """Queue ``batch`` for execution and return (waits only while the devices are too
        far behind: see ``dtorch.runtime.window``)."""
        ...

    def satisfy(self, mesh: DeviceMesh) -> bool:
        """Whether this runner can run operators on ``mesh`` here."""
        ...

    def waiting_on(self, parties: Collection[int]) -> str:
        """Who a wait for ``parties`` that timed out is waiting for, in words (a worker's
        index, pid, devices and process state; any stopped worker too), or ''."""
        ...

    def close(self, timeout: float, discard: bool = False) -> None:
        """Finish queued work (within ``timeout``), stop every thread/process; with
        ``discard`` (the interpreter exits), drop the work not started instead."""
        ...
