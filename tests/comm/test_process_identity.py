"""ProcessIdentity: a live process, a zombie, a reaped one, and a pid held by another process."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from dtorch.comm.process_identity import ProcessIdentity, machine_key


def test_this_process_is_alive_and_round_trips_as_text():
    me = ProcessIdentity.of_self()
    assert me.pid == os.getpid() and me.alive()
    assert ProcessIdentity.from_text(me.to_text()) == me
    assert ProcessIdentity.of_pid(os.getpid()) == me


def test_another_start_time_is_another_process():
    """What a reused pid looks like: the pid runs, but not the process that was recorded."""
    me = ProcessIdentity.of_self()
    assert not ProcessIdentity(me.pid, me.start_ticks - 1).alive()


def test_a_killed_child_is_gone_before_and_after_it_is_reaped():
    child = subprocess.Popen(["sleep", "60"])
    try:
        identity = ProcessIdentity.of_pid(child.pid)
        assert identity is not None and identity.alive()
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while identity.alive():  # a zombie until reaped: not alive any more
            assert time.monotonic() < deadline, "the killed child still looks alive"
            time.sleep(0.01)
        assert ProcessIdentity.of_pid(child.pid) is None
    finally:
        child.wait(10)
    assert not identity.alive() and ProcessIdentity.of_pid(child.pid) is None


def test_the_machine_key_is_stable():
    assert machine_key() == machine_key() and "/" in machine_key()
