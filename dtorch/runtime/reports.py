"""The report channel: how report records travel from the devices to the controller.

Kernel streams ``put`` records into a ``ReportSink``; the controller's report thread ``get``s
them from a ``ReportSource``. Thread mode's channel is ``ReportQueue``, an in-process queue
that is both. Process mode's sink encodes records onto a ZeroMQ PUSH socket in each worker and
its source decodes them from the controller's PULL socket (``dtorch.runtime.process``).

A ``ValueReport`` handed to ``put`` may hold a device shard itself, not a copy: the channel
makes the value the controller receives its own (a copy, or the encoded bytes) before ``put``
returns, so later in-place kernels on the shard cannot change a value already fetched.

Example:
    >>> import torch
    >>> from dtorch.ir.report import ValueReport
    >>> channel = ReportQueue()
    >>> shard = torch.zeros(2)
    >>> channel.put(ValueReport("p", shard)); _ = shard.fill_(5.0)
    >>> channel.get(1.0).value.tolist(), channel.get(0.01)
    ([0.0, 0.0], None)
"""

from __future__ import annotations

import queue
from typing import Protocol

import torch

from dtorch.ir.report import Report, ValueReport


class EndOfReports:
    """The last thing a runner's report source yields, once the runner is closed."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "END"


#: The one end-of-reports marker (compared with ``is``).
END = EndOfReports()


class ReportSink(Protocol):
    """The devices' side of the channel (thread-safe: every stream of a runner puts)."""

    def put(self, report: Report) -> None: ...


class ReportSource(Protocol):
    """The controller's side: the next record, or None after ``timeout_s`` without one (or
    early, after a record the source kept for itself); ``END`` once the runner closed."""

    def get(self, timeout_s: float) -> Report | EndOfReports | None: ...


def owned_cpu(value: torch.Tensor) -> torch.Tensor:
    """A CPU copy of ``value`` that nothing else references."""
    return value.to("cpu", copy=True)


class ReportQueue:
    """Thread mode's report channel: an unbounded queue (putting never blocks a stream)."""

    __slots__ = ("_queue",)

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Report | EndOfReports] = queue.SimpleQueue()

    def put(self, report: Report | EndOfReports) -> None:
        if type(report) is ValueReport and report.value is not None:
            report = ValueReport(report.promise, owned_cpu(report.value))
        self._queue.put(report)

    def get(self, timeout_s: float) -> Report | EndOfReports | None:
        try:
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None
