"""DaemonThread: its end is the target's return, whatever an interrupted join did."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from dtorch.runtime.daemon import DaemonThread

pytestmark = pytest.mark.timeout(30)


def test_a_join_interrupted_by_ctrl_c_leaves_the_thread_running() -> None:
    """CPython 3.11's ``Thread.join`` marks a running thread stopped when Ctrl-C interrupts
    it; a DaemonThread still says it runs, and a later join waits for it."""
    assert threading.current_thread() is threading.main_thread()  # where signals land
    release = threading.Event()
    thread = DaemonThread(release.wait, "held", (20.0,))
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        thread.join(10.0)
    timer.join()
    assert thread.is_alive()
    assert not thread.join(0.05)
    release.set()
    assert thread.join(5.0)
    assert not thread.is_alive()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_the_thread_ends_when_its_target_raises() -> None:
    def fails() -> None:
        raise ValueError("the target's own error")

    thread = DaemonThread(fails, "fails")
    assert thread.join(5.0)
    assert not thread.is_alive() and not thread.is_current()
    thread.thread.join(5.0)  # its error reported (threading.excepthook) within this test
