"""Kernel event recording: what a stream times while a ``dtorch.profile`` block is open.

A Profile operator with ``start`` set gives every stream an ``EventRecorder``; while it has
one, the stream times each kernel (``KernelStream._run_recorded``: one attribute check per
operator when none is open) and appends one ``ProfileEvent`` per device to it, up to
``MAX_EVENTS`` (later ones are counted as dropped). The stop operator sends the events as
one ``ProfileReport`` on the report channel (so they cross the process boundary like any
other report) and drops the recorder. Times are the stream's own ``perf_counter_ns``: the
controller aligns each party's clock with its own (``dtorch.api.profile``).

Example:
    >>> from dtorch.ir.opkind import OpKind
    >>> recorder = EventRecorder(limit=1)
    >>> recorder.add(7, "add_7", OpKind.BroadcastBinary, (4,), 0, False, 10, 25)
    >>> recorder.add(8, "add_8", OpKind.BroadcastBinary, (4,), 0, False, 30, 35)
    >>> report = recorder.report("p", party=0)
    >>> [e.end_ns - e.start_ns for e in report.events], report.dropped
    ([15], 1)
"""

from __future__ import annotations

import os
import time

from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import OpKind
from dtorch.ir.report import ProfileEvent, ProfileReport

#: Events one stream keeps per profile (about 150 bytes each); later ones are only counted.
MAX_EVENTS = 1 << 20


class EventRecorder:
    """A stream's events since its profile started (bounded, see ``MAX_EVENTS``)."""

    __slots__ = ("_pid", "dropped", "events", "limit", "started_ns")

    def __init__(self, limit: int = MAX_EVENTS) -> None:
        self.limit = limit
        self.events: list[tuple[object, ...]] = []  # ProfileEvent fields: made at the report
        self.dropped = 0
        self.started_ns = time.perf_counter_ns()
        self._pid = os.getpid()  # thread mode: the controller's; process mode: the worker's

    def add(
        self,
        operator_id: int,
        name: str,
        kind: OpKind,
        shape: tuple[int, ...],
        device: int,
        group: bool,
        start_ns: int,
        end_ns: int,
    ) -> None:
        """Keep one device's run of one kernel (or count it, once the bound is reached)."""
        if len(self.events) >= self.limit:
            self.dropped += 1
            return
        self.events.append(
            (operator_id, name, kind, shape, self._pid, device, group, start_ns, end_ns)
        )

    def add_run(
        self,
        op: Operator,
        operands: tuple[Operand, ...],
        devices: tuple[int, ...],
        group: bool,
        start_ns: int,
    ) -> None:
        """Keep ``op``'s run from ``start_ns`` to now on each of ``devices``."""
        end_ns = time.perf_counter_ns()
        shape = operands[0].shape if operands else ()
        for device in devices:
            self.add(op.id, op.name, op.param.kind, shape, device, group, start_ns, end_ns)

    def report(self, promise: str, party: int) -> ProfileReport:
        """Everything kept, for the controller, stamped with this clock's time now."""
        events = tuple(ProfileEvent(*fields) for fields in self.events)  # type: ignore[arg-type]
        stopped = time.perf_counter_ns()
        return ProfileReport(promise, party, events, self.dropped, self.started_ns, stopped)
