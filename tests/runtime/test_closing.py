"""Closing within the time asked: a ``close(timeout)`` whose parts all hang returns (with its
error) after about ``timeout`` seconds, not after the timeout once per part."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from dtorch.errors import GraphError
from dtorch.ir.operator import ExecuteBatch
from dtorch.ir.report import Report
from dtorch.runtime.board import LocalFailureBoard
from dtorch.runtime.executor import Executor
from dtorch.runtime.handlers import StreamServices
from dtorch.runtime.host import DeviceHost, PartyLayout
from dtorch.runtime.stream import PROGRESS

pytestmark = pytest.mark.timeout(60)

TIMEOUT = 1.0


class _Hanging:
    """A report channel whose ``put`` blocks until released: its stream hangs there."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def put(self, report: Report) -> None:
        self.released.wait(30.0)

    def get(self, timeout: float) -> Any:
        time.sleep(min(timeout, 0.05))
        return None


class _HangingRunner:
    """A runner that never finishes a batch, and whose close takes all the time it gets."""

    elsewhere = False
    parties = 1

    def __init__(self) -> None:
        self.reports = _Hanging()
        self.closed_with: list[float] = []

    def satisfy(self, mesh: object) -> bool:
        return True

    def execute(self, batch: ExecuteBatch) -> None:
        self.reports.released.wait(30.0)

    def close(self, timeout: float, discard: bool = False) -> None:
        self.closed_with.append(timeout)
        time.sleep(timeout)


def test_an_executor_whose_runner_hangs_closes_within_its_timeout() -> None:
    runner = _HangingRunner()
    executor = Executor(runner, name="hanging")
    executor.release(1)  # a batch the dispatcher takes to the runner, and hangs in
    time.sleep(0.1)
    start = time.monotonic()
    try:
        with pytest.raises(GraphError, match="did not stop within"):
            executor.close(timeout=TIMEOUT)
        took = time.monotonic() - start
    finally:
        runner.reports.released.set()
    assert took < TIMEOUT * 1.6  # three steps shared one budget (they took 3x it before)
    assert runner.closed_with and runner.closed_with[0] < TIMEOUT * 0.2


def _hung_host(channel: _Hanging, count: int) -> DeviceHost:
    services = StreamServices(None, LocalFailureBoard(), channel, False)  # type: ignore[arg-type]
    host = DeviceHost(PartyLayout(parties=count, first=0, count=count), services, "hung-host")
    for stream in host.streams:
        stream.push([(PROGRESS, 1)])  # its report blocks in the channel's put
    return host


def test_a_host_whose_streams_all_hang_closes_within_its_timeout() -> None:
    channel = _Hanging()
    host = _hung_host(channel, count=3)
    start = time.monotonic()
    try:
        with pytest.raises(GraphError, match="did not stop within") as raised:
            host.close(timeout=TIMEOUT)
        took = time.monotonic() - start
    finally:
        channel.released.set()
    assert took < TIMEOUT * 1.6  # the streams were joined against one deadline
    for stream in host.streams:
        assert stream.name in str(raised.value)
        assert stream.join(10.0)  # released: each stops after its queued work


def test_a_host_whose_streams_all_hang_resets_within_its_timeout() -> None:
    channel = _Hanging()
    host = _hung_host(channel, count=3)
    start = time.monotonic()
    try:
        with pytest.raises(GraphError, match="did not finish its work within"):
            host.reset(timeout=TIMEOUT)
        took = time.monotonic() - start
    finally:
        channel.released.set()
        host.close(timeout=10.0)
    assert took < TIMEOUT * 1.6
