"""The flow window (``dtorch.runtime.window``): it holds a runner back while too many operators
are in flight, lets it go as the devices report progress, and fails with a WorkerError once
the devices have reported nothing for ``stall_s`` (a stopped worker process used to hold the
recording thread for ever)."""

from __future__ import annotations

import threading
import time

import pytest

from dtorch.errors import WorkerError
from dtorch.ir.report import ProgressReport
from dtorch.runtime.window import FlowWindow

pytestmark = pytest.mark.timeout(30)


def test_a_full_window_without_progress_fails_after_stall_s() -> None:
    window = FlowWindow(parties=2, limit=4, chunk=2, stall_s=0.3)
    assert window.admit(3) == 1  # crosses the first mark: the parties report it
    window.admit(3)  # 3 in flight, not over the limit yet: admitted
    with pytest.raises(WorkerError, match=r"reported no progress for \d+ s while 6 operators"):
        window.admit(1)
    with pytest.raises(WorkerError):  # failed for good: later batches are refused at once
        window.admit(1)


def test_progress_lets_a_waiting_batch_in_and_keeps_the_window_alive() -> None:
    window = FlowWindow(parties=2, limit=4, chunk=2, stall_s=0.5)
    first = window.admit(3)
    window.admit(3)

    def report() -> None:  # each party reports the first mark, a little apart
        for party in (0, 1):
            time.sleep(0.3)
            window.progress(ProgressReport(party, first))

    reporter = threading.Thread(target=report)
    reporter.start()
    window.admit(1)  # waits 0.6 s in all, never 0.5 s without a report: admitted
    reporter.join()
    assert window.in_flight == 4  # the first 3 are done


def test_without_stall_s_a_window_waits_until_it_fails() -> None:
    window = FlowWindow(parties=1, limit=1, chunk=1)
    window.admit(2)
    error = WorkerError("worker 0 died")
    threading.Timer(0.2, window.fail, (error,)).start()
    with pytest.raises(WorkerError, match="worker 0 died"):
        window.admit(1)


def test_a_stall_names_the_parties_that_have_not_reported() -> None:
    """Party 0 reported the oldest mark, party 2 too: the stall asks the runner about party 1
    alone, and says what the runner answers."""
    asked: list[list[int]] = []

    def waiting_on(parties: object) -> str:
        asked.append(sorted(parties))  # type: ignore[call-overload]
        return "waiting for worker 1 (pid 7), whose process is stopped"

    window = FlowWindow(parties=3, limit=4, chunk=2, stall_s=0.3, waiting_on=waiting_on)
    first = window.admit(3)
    window.admit(3)
    window.progress(ProgressReport(0, first))
    window.progress(ProgressReport(2, first))
    with pytest.raises(WorkerError, match=r"a device is hung .*; waiting for worker 1 \(pid 7\)"):
        window.admit(1)
    assert asked == [[1]]
