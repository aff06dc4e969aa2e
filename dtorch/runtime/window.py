"""FlowWindow: how far a runner lets its devices fall behind the client.

Recording returns at once and the controller never waits for a kernel, so without a bound a
client that records a million operators without fetching anything queues a million items
between the controller and the devices (hundreds of MB). A runner therefore counts the
operators it has handed its devices; every ``chunk`` operators it asks every party to report
when it has finished that batch (a ``ProgressReport``, a few per ``chunk`` operators, never
one per operator), and once more than ``limit`` operators are handed out but not known to be
finished, ``admit`` waits for those reports. The controller thread then stops draining the
client's queue, which fills up, and the client waits in turn (``WorkQueue.put_bounded``):
memory stays bounded end to end.

Waiting wakes every second to see whether the window failed (a worker died: the error is
raised), so it never outlives the runner. Nor does it outlive a hung device: once no party has
reported any progress for ``stall_s`` seconds (the runners pass the comm timeout) while the
window is full, the window fails with a WorkerError that says so (a stopped worker process, a
kernel that never returns) and names, through the runner's ``waiting_on``, the parties that
have not reported the oldest mark; the graph breaks with it instead of waiting for ever.

Example:
    >>> from dtorch.ir.report import ProgressReport
    >>> window = FlowWindow(parties=2, limit=100, chunk=10)
    >>> window.admit(4), window.admit(8)       # the second batch crosses 10 operators
    (0, 1)
    >>> window.progress(ProgressReport(0, 1)); window.progress(ProgressReport(1, 1))
    >>> window.in_flight
    0
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from dtorch.errors import WorkerError, raised_anew
from dtorch.ir.report import ProgressReport, Report

if TYPE_CHECKING:
    from dtorch.runtime.reports import EndOfReports, ReportSource

#: Operators handed to the devices but not known to be finished, at most (per runner).
DEFAULT_LIMIT = 1 << 15
#: Every this many operators, the parties report their progress: often enough that a slow
#: device (up to 0.3 s per operator) is not taken for a hung one (``stall_s``, 300 s default).
DEFAULT_CHUNK = 1 << 10
#: How often a waiting ``admit`` checks whether the window failed.
CHECK_SECONDS = 1.0


class FlowWindow:
    """Counts operators in flight between a runner and its ``parties``; see the module doc."""

    def __init__(
        self,
        parties: int,
        limit: int = DEFAULT_LIMIT,
        chunk: int = DEFAULT_CHUNK,
        stall_s: float | None = None,
        waiting_on: Callable[[Collection[int]], str] | None = None,
    ) -> None:
        self._parties = parties
        self._stall_s = stall_s  # None: wait as long as it takes
        self._waiting_on = waiting_on  # names the parties a stall waits for (the runner's)
        self._progress_at = time.monotonic()  # when a party last reported
        self._limit = limit
        self._chunk = chunk
        self._cond = threading.Condition()
        self._sent = 0  # operators handed out
        self._done = 0  # operators every party finished, as of the last complete mark
        self._next_mark = chunk
        self._sequence = 0
        self._marks: deque[tuple[int, int]] = deque()  # (sequence, operators sent by then)
        self._reports: dict[int, set[int]] = {}  # sequence -> the parties that reported it
        self._error: BaseException | None = None

    @property
    def in_flight(self) -> int:
        return self._sent - self._done

    def admit(self, count: int) -> int:
        """Account for a batch of ``count`` operators; wait while too many are in flight.

        Returns the sequence number the parties must report once they finished this batch,
        or 0 when this batch needs no report.
        """
        with self._cond:
            since = time.monotonic()
            while self._sent - self._done > self._limit and self._error is None:
                self._cond.wait(CHECK_SECONDS if self._stall_s is None else self._check(since))
            if self._error is not None:
                raise raised_anew(self._error)
            self._sent += count
            if self._sent < self._next_mark:
                return 0
            self._next_mark = self._sent + self._chunk
            self._sequence += 1
            self._marks.append((self._sequence, self._sent))
            return self._sequence

    def _check(self, since: float) -> float:
        """Fail the window if no party reported since ``since`` or its last report, whichever
        is later, for ``stall_s``; else how long to wait before the next look."""
        assert self._stall_s is not None
        silent = time.monotonic() - max(since, self._progress_at)
        if silent >= self._stall_s:
            self._error = WorkerError(
                f"the devices reported no progress for {silent:.0f} s while {self.in_flight} "
                f"operators were in flight (more than {self._limit}): a device is hung (a "
                "stopped worker process, or a kernel that does not return; the limit is "
                f"DTORCH_COMM_TIMEOUT_SECOND){self._laggards()}"
            )
            return 0.0
        return min(CHECK_SECONDS, self._stall_s - silent)

    def _laggards(self) -> str:
        """'; ' and, in the runner's words, the parties that have not reported the oldest
        mark in flight ('' when that cannot be told)."""
        if self._waiting_on is None or not self._marks:
            return ""
        reported = self._reports.get(self._marks[0][0], set())
        late = [p for p in range(self._parties) if p not in reported]
        try:
            detail = self._waiting_on(late)
        except Exception:  # the stall is the news: a failing diagnosis must not hide it
            return ""
        return f"; {detail}" if detail else ""

    def progress(self, report: ProgressReport) -> None:
        """One party finished batch ``report.batch``."""
        with self._cond:
            self._progress_at = time.monotonic()
            reported = self._reports.setdefault(report.batch, set())
            reported.add(report.party)
            if len(reported) < self._parties:
                return
            self._reports.pop(report.batch, None)
            while self._marks and self._marks[0][0] <= report.batch:
                self._done = max(self._done, self._marks.popleft()[1])
            self._cond.notify_all()

    def fail(self, error: BaseException) -> None:
        """Waiting and later ``admit`` calls raise ``error``."""
        with self._cond:
            if self._error is None:
                self._error = error
            self._cond.notify_all()


class WindowedSource:
    """A report source that keeps the progress reports for the runner's flow window (the
    controller never sees them; ``get`` returns None for one, as after a timeout)."""

    __slots__ = ("_source", "_window")

    def __init__(self, source: ReportSource, window: FlowWindow) -> None:
        self._source = source
        self._window = window

    def get(self, timeout_s: float) -> Report | EndOfReports | None:
        report = self._source.get(timeout_s)
        if type(report) is ProgressReport:
            self._window.progress(report)
            return None
        return report
