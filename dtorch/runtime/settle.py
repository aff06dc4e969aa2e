"""Settling promises from reports: the controller's half of the Runner seam.

The client registers a promise (GetTensor) or a collector (Sync, Memory) under a fresh name
with the controller before it records the operator that names it; the controller's report
thread hands every report to ``Settlements.settle``, which finds the target by name and
settles it. Devices never see a promise: they only send report records. A report for a name
that is not (or no longer) registered is dropped: its promise was failed already (the runner
broke, or the graph closed), and a value that comes late changes nothing.

Example:
    >>> import torch
    >>> from dtorch.comm.promise import create_promise
    >>> from dtorch.ir.opkind import PromiseKind
    >>> from dtorch.ir.report import ValueReport
    >>> book = Settlements()
    >>> promise = create_promise(PromiseKind.MEMORY)
    >>> book.promises.add("p1", promise)
    >>> book.settle(ValueReport("p1", torch.ones(2)))
    >>> promise.get_future().get().tolist(), len(book.promises)
    ([1.0, 1.0], 0)
"""

from __future__ import annotations

import contextlib
import heapq
import threading
import traceback
from collections.abc import Callable
from typing import Any, Protocol

from dtorch.errors import DTorchError, KernelError, PromiseStateError
from dtorch.ir.report import Failure, PartyReport, ProfileReport, ValueReport


class ValueSink(Protocol):
    """What a collector delivers to: a promise's setters."""

    def set_value(self, value: Any) -> None: ...

    def set_error(self, error: BaseException) -> None: ...


class CountdownCollector:
    """Sets ``sink`` once ``expected`` parties reported; ``finish`` builds the value from the
    reports (in arrival order), or the first failure any party reported is raised instead.

    Example:
        >>> import torch
        >>> from dtorch.comm.promise import create_promise
        >>> from dtorch.ir.opkind import PromiseKind
        >>> promise = create_promise(PromiseKind.MEMORY)
        >>> collector = CountdownCollector(2, promise, lambda rows: torch.tensor(rows))
        >>> collector.add(3), collector.add(4), promise.get_future().get().tolist()
        (False, True, [3, 4])
    """

    def __init__(
        self, expected: int, sink: ValueSink, finish: Callable[[list[object]], Any]
    ) -> None:
        self._expected = expected
        self._sink = sink
        self._finish = finish
        self._lock = threading.Lock()
        self._reports: list[object] = []
        self._failure: BaseException | None = None
        self._parties: set[int] = set()  # the parties whose PartyReport came

    def add_party(self, report: PartyReport) -> bool:
        """Add one party's report (its rows, and its first failure, if any)."""
        with self._lock:
            self._parties.add(report.party)
        return self.add(report.rows, _failure_error(report.failure))

    def unreported(self) -> tuple[int, ...]:
        """The parties (of ``expected``, numbered from 0) whose PartyReport has not come."""
        with self._lock:
            return tuple(p for p in range(self._expected) if p not in self._parties)

    def add(self, report: object, failure: BaseException | None = None) -> bool:
        """Report one party's result (and its failure, if any); True when complete."""
        with self._lock:
            self._reports.append(report)
            self._failure = self._failure or failure
            done = len(self._reports) == self._expected
        if not done:
            return False
        if self._failure is not None:
            self._sink.set_error(self._failure)
        else:
            self._settle()
        return True

    def set_error(self, error: BaseException) -> None:
        """Settle with ``error`` now (the runner stopped before every party reported)."""
        with self._lock:
            if len(self._reports) >= self._expected:
                return
            self._reports.extend([None] * (self._expected - len(self._reports)))
        self._sink.set_error(error)

    def _settle(self) -> None:
        try:
            value = self._finish(self._reports)
        except Exception as error:  # building the value is our code: surface it on the future
            self._sink.set_error(_detached(error))
            return
        self._sink.set_value(value)


def _detached(error: Exception) -> Exception:
    """``error`` without its traceback, whose frames hold the collector and its sink: the
    promise's cell keeps the error, the promise's finalizer keeps the cell, so every failed
    ``sync()`` kept its promise, collector and error alive for good. A failure of dtorch's
    own code keeps the traceback's text, as a note."""
    if not isinstance(error, DTorchError):
        error.add_note("".join(traceback.format_tb(error.__traceback__)))
    return error.with_traceback(None)


class RaisedFailures:
    """Operators whose kernel failure a future has raised to the user since the last sync
    completed: ``sync()`` raises the first failure the user has not seen instead (a failure
    delivered once is not stale news at every later sync). Thread-safe: futures note from
    the user's threads, the controller's report thread reads.

    Example:
        >>> from dtorch.ir.report import Failure
        >>> raised = RaisedFailures()
        >>> seen, other = Failure(3, "add_3", 0, "E", "x"), Failure(5, "mul_5", 1, "E", "y")
        >>> raised.note(seen.error())
        >>> raised.first_unseen([seen, other]).operator_id
        5
    """

    _KEPT = 4096  # a client that never syncs keeps at most this many ids

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: set[int] = set()
        # the same ids negated, a max-heap: past ``_KEPT`` the latest operator goes, since a
        # stream reports its first failures since the sync (``FAILURES_KEPT``), not its last
        self._latest: list[int] = []

    def note(self, error: BaseException) -> None:
        """``error`` reached the user: remember its operator (a KernelError that has one)."""
        operator = error.operator_id if isinstance(error, KernelError) else None
        if operator is None:
            return
        with self._lock:
            if operator in self._ids:
                return
            self._ids.add(operator)
            heapq.heappush(self._latest, -operator)
            if len(self._ids) > self._KEPT:
                self._ids.discard(-heapq.heappop(self._latest))

    def first_unseen(self, failures: list[Failure]) -> Failure | None:
        """The first of ``failures`` the user has not seen; forgets every id (a sync ends)."""
        with self._lock:
            ids, self._ids, self._latest = self._ids, set(), []
        return next((f for f in failures if f.operator_id not in ids), None)


class SyncCollector(CountdownCollector):
    """The collector of a Sync: completes when every party reported, with the first failure
    of any party (arrival order) that no future has raised already (``RaisedFailures``)."""

    def __init__(self, expected: int, sink: ValueSink, raised: RaisedFailures) -> None:
        super().__init__(expected, sink, self._verdict)
        self._raised = raised
        self._failures: list[Failure] = []

    def add_party(self, report: PartyReport) -> bool:
        with self._lock:
            self._parties.add(report.party)
            if report.failure is not None:
                self._failures.append(report.failure)
            self._failures.extend(report.later)
        return self.add(report.rows)

    def _verdict(self, reports: list[object]) -> None:
        unseen = self._raised.first_unseen(self._failures)
        if unseen is not None:
            raise unseen.error()


class PromiseTable:
    """Live promises and collectors of one controller, by name (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Any] = {}

    def add(self, name: str, target: object) -> None:
        with self._lock:
            if name in self._items:
                raise KeyError(f"promise {name!r} is already registered")
            self._items[name] = target

    def get(self, name: str) -> Any:
        """The target registered as ``name``, or None."""
        with self._lock:
            return self._items.get(name)

    def pop(self, name: str) -> Any:
        """Remove and return the target registered as ``name``, or None."""
        with self._lock:
            return self._items.pop(name, None)

    def __len__(self) -> int:
        return len(self._items)

    def fail_all(self, error: BaseException) -> None:
        """Settle every live promise and collector with ``error`` (the runner stopped or broke:
        nothing will set them any more). One settled already is left as it is: its future's
        finalizer abandoned it (at interpreter exit, before the exit-time close ran)."""
        with self._lock:
            items, self._items = list(self._items.values()), {}
        for target in items:
            with contextlib.suppress(PromiseStateError):
                target.set_error(error)


def _failure_error(failure: Failure | None) -> BaseException | None:
    return None if failure is None else failure.error()


class Settlements:
    """The controller's promises and what each report does to them."""

    def __init__(self) -> None:
        self.promises = PromiseTable()
        self.raised = RaisedFailures()

    def settle(self, report: object) -> None:
        """Apply one value or party report (other records are the runner's or executor's)."""
        handler = _HANDLERS.get(type(report))
        if handler is None:
            return
        try:
            handler(self.promises, report)
        except PromiseStateError:  # settled already: dropped by its owner (its finalizer
            return  # abandons it, at exit too) - the value has no reader any more


def _value(promises: PromiseTable, report: ValueReport) -> None:
    promise = promises.pop(report.promise)
    if promise is None:
        return
    if report.failure is not None:
        promise.set_error(report.failure.error())
    else:
        promise.set_value(report.value)


def _party(promises: PromiseTable, report: PartyReport) -> None:
    collector = promises.get(report.promise)
    if collector is None:
        return
    if collector.add_party(report):
        promises.pop(report.promise)


def _profile(promises: PromiseTable, report: ProfileReport) -> None:
    collector = promises.get(report.promise)
    if collector is not None and collector.add(report):
        promises.pop(report.promise)


#: What each report record does to the promise table, by record type.
_HANDLERS: dict[type, Callable[[PromiseTable, Any], None]] = {
    ValueReport: _value,
    PartyReport: _party,
    ProfileReport: _profile,
}
