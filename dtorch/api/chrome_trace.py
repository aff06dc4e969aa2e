"""Kernel events as a Chrome trace: the JSON that Perfetto and ``chrome://tracing`` open.

``torch.profiler``'s ``export_chrome_trace`` writes the same format: ``{"traceEvents": [...]}``
with one ``"ph": "X"`` (complete) event per kernel run (``ts`` and ``dur`` in microseconds),
plus ``"ph": "M"`` metadata events that name the processes and threads. Here a process
(``pid``) is the OS process that ran the kernel ("dtorch" for the controller's own, where
thread mode runs them; "dtorch worker" for a worker process) and a thread (``tid``) is a
device: each device is one row in the viewer. Collectives and redistributions (group
kernels) have category ``collective``, every other kernel ``kernel``.

Example:
    >>> from dtorch.ir.opkind import OpKind
    >>> from dtorch.ir.report import ProfileEvent
    >>> event = ProfileEvent(3, "add_3", OpKind.BroadcastBinary, (4,), 1, 0, False, 2000, 5000)
    >>> trace = chrome_trace([event], controller_pid=1)
    >>> [(e["ph"], e["name"]) for e in trace["traceEvents"]]
    [('M', 'process_name'), ('M', 'thread_name'), ('X', 'add_3')]
    >>> trace["traceEvents"][-1]["ts"], trace["traceEvents"][-1]["dur"]
    (2.0, 3.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dtorch.ir.report import ProfileEvent


def chrome_trace(events: Sequence[ProfileEvent], controller_pid: int) -> dict[str, Any]:
    """The trace of ``events`` (times in ns since the profile began), as a JSON-ready dict."""
    rows = sorted({(e.pid, e.device) for e in events})
    metadata = [_process_name(pid, controller_pid) for pid in sorted({p for p, _ in rows})]
    metadata += [_thread_name(pid, device) for pid, device in rows]
    return {"traceEvents": metadata + [complete_event(e) for e in events]}


def complete_event(event: ProfileEvent) -> dict[str, Any]:
    """One kernel run as a ``"ph": "X"`` event (microseconds, as the format has them)."""
    return {
        "ph": "X",
        "name": event.name,
        "cat": "collective" if event.group else "kernel",
        "pid": event.pid,
        "tid": event.device,
        "ts": event.start_ns / 1000,
        "dur": (event.end_ns - event.start_ns) / 1000,
        "args": {
            "operator_id": event.operator_id,
            "kind": event.kind.name,
            "shape": list(event.shape),
            "group": event.group,
        },
    }


def _process_name(pid: int, controller_pid: int) -> dict[str, Any]:
    name = "dtorch" if pid == controller_pid else f"dtorch worker {pid}"
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


def _thread_name(pid: int, device: int) -> dict[str, Any]:
    label = {"name": f"device {device}"}
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": device, "args": label}
