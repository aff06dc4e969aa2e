"""``dtorch.profile()``: per-device kernel and collective timings of a block, as a Chrome trace.

``with dtorch.profile() as prof: ...`` records a Profile operator (start) on entry and another
(stop) on exit; every kernel stream runs them in order with the block's operators, so each
stream times exactly the kernels recorded inside the block (``dtorch.runtime.profiling``).
On exit every stream sends its events as one ``ProfileReport`` (a report record, so worker
processes send theirs back like any result) and the block waits until all have arrived:
``prof.events`` is then complete, and ``prof.export_chrome_trace(path)`` writes the trace.

Clocks. Each stream stamps its events with its own ``time.perf_counter_ns()``. The controller
aligns each party's clock with its own by causality: the start operator was recorded (at
``t0``) before the party ran it (at ``s`` on its clock), and the party sent its report (at
``e``) before the controller had it (at ``t1``). So the party's offset ``x`` (its clock minus
the controller's) lies in ``[e - t1, s - t0]``; dtorch takes the value of that interval
nearest 0. Processes of one host share ``CLOCK_MONOTONIC`` (true offset 0, always inside the
interval: no correction); another host's clock gets the smallest shift consistent with the
order of events. Event times in ``prof.events`` are nanoseconds since ``t0``.

Example:
    >>> import dtorch
    >>> a = dtorch.ones(4, device_mesh=dtorch.init_device_mesh("cpu", 2))
    >>> with dtorch.profile() as prof:
    ...     b = a + a
    >>> sorted(e.device for e in prof.events if e.name.startswith("add"))
    [0, 1]
    >>> all(e.end_ns >= e.start_ns for e in prof.events)
    True
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from dtorch.api.chrome_trace import chrome_trace
from dtorch.api.graph import Graph, resolved
from dtorch.errors import GraphError, raised_anew
from dtorch.ir.opkind import PromiseKind
from dtorch.ir.params import ProfileParam, PromiseHandle
from dtorch.ir.report import ProfileEvent, ProfileReport
from dtorch.ir.span import Span
from dtorch.runtime.settle import CountdownCollector

#: Seconds the end of a block waits for every stream's events (it waits for the block's
#: kernels to finish first, as ``sync`` does).
COLLECT_TIMEOUT_S = 600.0

_OPEN_LOCK = threading.Lock()
_OPEN: set[int] = set()  # ids of the graphs with an open profile: one at a time each


class Profile:
    """The kernel events of one ``with`` block on one graph (see the module docstring).

    ``events``: every device's kernel runs, by start time (empty until the block ends);
    ``dropped``: events the streams did not keep (over ``MAX_EVENTS`` per stream).
    """

    def __init__(self, graph: Graph | None = None) -> None:
        self._graph = graph
        self._state = "new"
        self._began_ns = 0
        self._future: Any = None
        self.events: tuple[ProfileEvent, ...] = ()
        self.dropped = 0

    def __enter__(self) -> Profile:
        if self._state != "new":
            raise GraphError("this dtorch.profile() was entered already: make a new one")
        graph = self._graph = self._graph if self._graph is not None else Graph.default_graph()
        if graph.closed:
            raise GraphError(f"Graph {graph.id} is closed; it cannot be profiled")
        _claim(graph)
        self._began_ns = time.perf_counter_ns()  # t0: before the start is recorded
        try:  # refused (while a function is traced, say): the graph may be profiled later
            _record(graph, ProfileParam(start=True))
        except BaseException:
            _release(graph)
            raise
        self._state = "open"
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        graph = self._graph
        assert graph is not None
        self._state = "closed"
        if graph.closed:  # closed inside the block: its devices stopped with their recordings
            _release(graph)
            warnings.warn(
                f"dtorch.profile: Graph {graph.id} was closed inside the profile's block; its "
                "devices' events went with it (the profile holds none)",
                UserWarning,
                stacklevel=2,
            )
            self._settle((), time.perf_counter_ns())
            return
        try:
            reports = self._collect(graph)
        except Exception:
            if error is None:  # the block's own error says more: keep it
                raise
            return
        finally:
            _release(graph)
        self._settle(reports, time.perf_counter_ns())

    def _collect(self, graph: Graph) -> list[ProfileReport]:
        """Stop every stream's recording and wait for their reports."""
        sink = _ReportsSink()
        with graph.promise_name() as name:
            handle = PromiseHandle(PromiseKind.MEMORY, name)
            collector = CountdownCollector(graph.runner.parties, sink, list)
            graph.executor.register(name, collector)
            _record(graph, ProfileParam(start=False, promise=handle))
        return sink.get(COLLECT_TIMEOUT_S)

    def _settle(self, reports: Sequence[ProfileReport], ended_ns: int) -> None:
        events: list[ProfileEvent] = []
        for report in reports:
            shift = self._began_ns + clock_offset(report, self._began_ns, ended_ns)
            events += [_shifted(e, shift) for e in report.events]
        self.events = tuple(sorted(events, key=lambda e: (e.start_ns, e.device)))
        self.dropped = sum(report.dropped for report in reports)

    def chrome_trace(self) -> dict[str, Any]:
        """The trace as a JSON-ready dict (``dtorch.api.chrome_trace``)."""
        return chrome_trace(self.events, os.getpid())

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Write the Chrome trace (JSON; open it in Perfetto or ``chrome://tracing``)."""
        if self._state != "closed":
            raise GraphError("export_chrome_trace: the profile's block has not ended yet")
        Path(path).write_text(json.dumps(self.chrome_trace()))

    def __repr__(self) -> str:
        return f"Profile({len(self.events)} events, {self._state})"


class _ReportsSink:
    """Where the stop's collector delivers every party's report (promises carry tensors)."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._reports: list[ProfileReport] = []
        self._error: BaseException | None = None

    def set_value(self, reports: list[ProfileReport]) -> None:
        self._reports = reports
        self._done.set()

    def set_error(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    def get(self, timeout_s: float) -> list[ProfileReport]:
        if not self._done.wait(timeout_s):
            raise GraphError(f"dtorch.profile: the devices sent no events in {timeout_s:g} s")
        if self._error is not None:
            raise raised_anew(self._error)
        return self._reports


def profile(graph: Graph | None = None) -> Profile:
    """Time every kernel and collective of a ``with`` block on ``graph`` (the calling thread's
    default graph when None), per device; see the module docstring.

    Example:
        >>> import json, os, tempfile, dtorch
        >>> with dtorch.profile() as prof:
        ...     _ = (dtorch.ones(3) * 2).to_torch()
        >>> path = os.path.join(tempfile.mkdtemp(), "trace.json")
        >>> prof.export_chrome_trace(path)
        >>> "traceEvents" in json.load(open(path)); os.remove(path); os.rmdir(os.path.dirname(path))
        True
    """
    graph = resolved(graph)
    if graph is not None and not isinstance(graph, Graph):
        raise TypeError(
            f"profile: graph must be a dtorch.Graph or None, got {graph!r}; a trace file is "
            "named at export: prof.export_chrome_trace(path)"
        )
    return Profile(graph)


def clock_offset(report: ProfileReport, began_ns: int, ended_ns: int) -> int:
    """The party's clock minus the controller's: the point of ``[stopped - ended, started -
    began]`` nearest 0 (the causality bounds of the module docstring).

    Example:
        >>> from dtorch.ir.report import ProfileReport
        >>> clock_offset(ProfileReport("p", 0, (), 0, 110, 190), 100, 200)  # same clock
        0
        >>> clock_offset(ProfileReport("p", 0, (), 0, 1110, 1190), 100, 200)  # 1000 ns ahead
        990
    """
    low, high = report.stopped_ns - ended_ns, report.started_ns - began_ns
    return min(max(0, low), high)


def _shifted(event: ProfileEvent, shift: int) -> ProfileEvent:
    e = event  # positional: dataclasses.replace costs several times as much per event
    fields = (e.operator_id, e.name, e.kind, e.shape, e.pid, e.device, e.group)
    return ProfileEvent(*fields, e.start_ns - shift, e.end_ns - shift)


def _record(graph: Graph, param: ProfileParam) -> None:
    graph.record_system("profile", param, Span.unknown())


def _claim(graph: Graph) -> None:
    with _OPEN_LOCK:
        if graph.id in _OPEN:
            raise GraphError(f"Graph {graph.id} is profiled already: profiles do not nest")
        _OPEN.add(graph.id)


def _release(graph: Graph) -> None:
    with _OPEN_LOCK:
        _OPEN.discard(graph.id)
