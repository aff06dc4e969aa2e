"""The Runner seam: what the controller hands batches to.

A runner executes ``ExecuteBatch`` messages in order on its devices and frees the no-hold
operands after each batch. ``execute`` never blocks on the devices. The thread runner runs
devices as threads of this process; the process runner (a later stage) feeds worker processes
over ZeroMQ. The controller assumes nothing else about where devices live.
"""

from __future__ import annotations

from typing import Protocol

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch
from dtorch.kernels.promises import PromiseTable


class Runner(Protocol):
    """Executes batches of operators on devices; see the module docstring."""

    @property
    def promises(self) -> PromiseTable:
        """Where the client registers the promises its GetTensor/Sync/Memory operators name."""
        ...

    @property
    def stream_count(self) -> int:
        """How many parties report to a Sync or Memory operator."""
        ...

    def execute(self, batch: ExecuteBatch) -> None:
        """Queue ``batch`` for execution and return at once."""
        ...

    def satisfy(self, mesh: DeviceMesh) -> bool:
        """Whether this runner can run operators on ``mesh`` here."""
        ...

    def close(self, timeout: float) -> None:
        """Finish queued work (within ``timeout``), stop every thread/process, fail what is left."""
        ...
