"""Heartbeats (``dtorch.cluster.liveness``): a malformed message on the controller's beat
socket is ignored, and the watch goes on noticing silent workers (it used to end the watch:
no worker death was noticed after it, and the workers, no longer beaten, gave up)."""

from __future__ import annotations

import os
import time

import pytest
import zmq

from dtorch.cluster.liveness import Beacon, BeatMonitor
from dtorch.transport import Publisher, Puller
from dtorch.transport.security import CurveKeys

pytestmark = pytest.mark.timeout(60)


def test_a_malformed_beat_is_ignored_and_lost_workers_are_still_noticed() -> None:
    # a short silence for this monitor only: patching the module's LOST_AFTER_SECONDS made
    # the session cluster's monitor take its own busy workers for lost (every later cluster
    # test then failed on a broken cluster)
    keys = CurveKeys.from_secret(os.urandom(32))
    out = Publisher("tcp://127.0.0.1:0", keys=keys)
    into = Puller("tcp://127.0.0.1:0", keys=keys)
    lost: list[int] = []
    monitor = BeatMonitor(
        out, into, workers=1, on_lost=lambda worker, _: lost.append(worker), lost_after_s=1.0
    )
    beacon = Beacon(out.address, into.address, 0, keys, on_gone=lambda: None)
    rogue = zmq.Context.instance().socket(zmq.PUSH)
    try:
        monitor.wait_first_beats(10)
        for option, value in keys.client_options().items():
            rogue.setsockopt(option, value)
        rogue.connect(into.address)
        rogue.send(b"one frame: not an envelope")
        time.sleep(0.5)
        assert not lost  # the beacon still beats
        beacon.stop()  # the worker goes silent
        deadline = time.monotonic() + 10
        while not lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lost == [0]
    finally:
        rogue.close(linger=0)
        beacon.stop()
        monitor.stop()
        out.close()
        into.close()


def test_a_beat_from_another_pid_than_the_registered_one_is_a_replaced_worker() -> None:
    """A restarted worker that got past the rank claim beats as its rank: the registered
    process is gone, and the monitor says so at its first beat (not after 5 s of silence)."""
    keys = CurveKeys.from_secret(os.urandom(32))
    out = Publisher("tcp://127.0.0.1:0", keys=keys)
    into = Puller("tcp://127.0.0.1:0", keys=keys)
    replaced: list[tuple[int, int]] = []
    lost: list[int] = []
    monitor = BeatMonitor(
        out,
        into,
        workers=1,
        on_lost=lambda worker, _: lost.append(worker),
        pids=(os.getpid() + 1,),  # the registered process: not this one
        on_replaced=lambda worker, pid: replaced.append((worker, pid)),
    )
    beacon = Beacon(out.address, into.address, 0, keys, on_gone=lambda: None)
    try:
        deadline = time.monotonic() + 10
        while not replaced and time.monotonic() < deadline:
            time.sleep(0.05)
        assert replaced == [(0, os.getpid())]
        time.sleep(1.5)
        assert replaced == [(0, os.getpid())] and not lost  # said once
    finally:
        beacon.stop()
        monitor.stop()
        out.close()
        into.close()


def test_a_lost_worker_is_told_to_the_others() -> None:
    """The monitor says so on the beats channel once it counts a worker lost: a survivor's
    beacon hears the rank (and abandons its collectives: a network store cannot see a peer on
    another host die)."""
    keys = CurveKeys.from_secret(os.urandom(32))
    out = Publisher("tcp://127.0.0.1:0", keys=keys)
    into = Puller("tcp://127.0.0.1:0", keys=keys)
    heard: list[int] = []
    monitor = BeatMonitor(out, into, workers=2, on_lost=lambda w, s: None, lost_after_s=1.0)
    survivor = Beacon(out.address, into.address, 0, keys, lambda: None, heard.append)
    victim = Beacon(out.address, into.address, 1, keys, lambda: None)
    try:
        monitor.wait_first_beats(10)
        victim.stop()
        deadline = time.monotonic() + 10
        while not heard and time.monotonic() < deadline:
            time.sleep(0.05)
        assert heard == [1]
    finally:
        survivor.stop()
        victim.stop()
        monitor.stop()
        out.close()
        into.close()
