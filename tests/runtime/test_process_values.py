"""Reports across processes (``dtorch.runtime.process.values``): what a worker's sink writes,
what the controller reads, and what a report it cannot read does."""

from __future__ import annotations

import os
import re

import pytest
import torch

import dtorch
from dtorch.comm.promise import create_promise
from dtorch.comm.shm import Segment
from dtorch.errors import KernelError, TransportError, WorkerError
from dtorch.ir.opkind import PromiseKind
from dtorch.ir.report import PartyReport, ProgressReport, SharedValue, ValueReport
from dtorch.runtime.process.protocol import REPORT
from dtorch.runtime.process.values import PushSink, ReportReader
from dtorch.runtime.settle import Settlements, SyncCollector
from dtorch.serialization import serialize
from dtorch.transport import Envelope, InProcPuller

_ME = (os.getpid(), os.getpid())  # the sinks of these tests write this process's segments


def _junk_bools(count: int) -> torch.Tensor:
    """A bool tensor holding other bytes than 0 and 1, as torch.empty may leave."""
    return (torch.arange(count) % 4).to(torch.uint8).mul_(85).view(torch.bool)


@pytest.mark.parametrize("count", [16, 1 << 21])
def test_bool_values_travel_as_0_and_1(count: int) -> None:
    """A small value inside the message, a large one (>= 1 MiB) through shared memory: the
    controller gets every nonzero byte as True, written as 1."""
    puller = InProcPuller()
    sink = PushSink(puller.pusher(0), worker=0)
    released: list[tuple[int, int]] = []
    reader = ReportReader(lambda worker, token: released.append((worker, token)), pids=_ME)
    junk = _junk_bools(count)
    try:
        sink.put(ValueReport("p", junk))
        report = reader.read(puller.recv(10))
    finally:
        sink.close()
        reader.close()
    assert isinstance(report, ValueReport) and report.value is not None
    assert report.value.view(torch.uint8).tolist() == junk.view(torch.uint8).ne(0).int().tolist()
    assert len(released) == (1 if count >= 1 << 20 else 0)


def _report(payload: bytes, *promise: bytes, sender: int = 1) -> Envelope:
    return Envelope(sender, REPORT, tuple(memoryview(p) for p in (payload, *promise)))


def test_an_unreadable_report_fails_the_promise_it_names() -> None:
    book = Settlements()
    value, other = (
        create_promise(PromiseKind.MEMORY, name="g.p1"),
        create_promise(PromiseKind.MEMORY, name="g.p2"),
    )
    sync = create_promise(PromiseKind.MEMORY, name="g.p3")
    book.promises.add("g.p1", value)
    book.promises.add("g.p2", other)
    book.promises.add("g.p3", SyncCollector(2, sync, book.raised))
    reader = ReportReader(lambda worker, token: None, pids=_ME)
    good = serialize(ValueReport("g.p2", torch.ones(2)))
    for envelope in (_report(b"\x00" * 40, b"g.p1"), _report(good, b"g.p2")):
        book.settle(reader.read(envelope))
    book.settle(reader.read(_report(serialize(PartyReport("g.p3", 0))[:-3], b"g.p3")))
    with pytest.raises(KernelError, match=r"the report of worker 1 for g\.p1 .*cannot read it"):
        value.get_future().get(1.0)
    assert other.get_future().get(1.0).tolist() == [1.0, 1.0]
    with pytest.raises(KernelError, match=r"g\.p3 .*cannot read it"):
        sync.get_future().get(1.0)
    assert len(book.promises) == 0


@pytest.mark.parametrize(
    ("shape", "size_times"),
    [((1 << 20,), 1), ((4,), 4), ((-1, 4), 1)],
    ids=["value-larger-than-its-segment", "segment-larger-than-its-file", "negative-dim"],
)
def test_a_shared_value_that_does_not_fit_its_segment_fails_its_promise_alone(
    shape: tuple[int, ...], size_times: int
) -> None:
    """A SharedValue whose shape needs more bytes than its segment, or whose size exceeds
    the segment's file: that promise fails (the graph goes on), and the segment goes back."""
    segment = Segment.create(1 << 16)
    where = segment.locator()
    released: list[tuple[int, int]] = []
    reader = ReportReader(lambda worker, token: released.append((worker, token)), pids=_ME)
    shared = SharedValue(
        where.pid, where.fd, where.inode, where.size * size_times, torch.float32, shape, 0, 7
    )
    try:
        report = reader.read(
            _report(serialize(ValueReport("g.p", shared=shared)), b"g.p", sender=0)
        )
    finally:
        reader.close()
        segment.close()
    assert isinstance(report, ValueReport) and report.failure is not None
    assert report.promise == "g.p" and "cannot read it" in report.failure.message
    assert released == [(0, 7)]


@pytest.mark.parametrize(
    ("pids", "sender", "why"),
    [
        ((12345, 12345), 0, r"process \d+ \(worker 0\), sent by worker 0"),  # not its pid
        (_ME, 1, r"\(worker 0\), sent by worker 1"),  # another worker's segment
        (None, 0, "shares no memory here"),  # a cluster: no shared values at all
    ],
    ids=["another-process", "another-worker", "no-shared-memory"],
)
def test_a_shared_value_is_read_from_its_senders_own_process_only(
    pids: tuple[int, ...] | None, sender: int, why: str
) -> None:
    """A report naming a descriptor of any process of this user made the controller map it
    and return its bytes (a file held open elsewhere, read through /proc): only the sending
    worker's own process is read, and nothing where the workers share no memory."""
    segment = Segment.create(1 << 16)
    segment.buffer[:6] = b"secret"
    where = segment.locator()
    released: list[tuple[int, int]] = []
    reader = ReportReader(lambda worker, token: released.append((worker, token)), pids=pids)
    shared = SharedValue(where.pid, where.fd, where.inode, where.size, torch.uint8, (6,), 0, 7)
    try:
        envelope = _report(serialize(ValueReport("g.p", shared=shared)), b"g.p", sender=sender)
        report = reader.read(envelope)
        assert isinstance(report, ValueReport) and report.value is None
        assert report.failure is not None and re.search(why, report.failure.message)
        assert released == []  # another worker's segment is not handed back for it either
        if pids is _ME and sender == 1:  # the same value from its own worker is read
            mine = _report(serialize(ValueReport("g.p", shared=shared)), b"g.p", sender=0)
            assert bytes(reader.read(mine).value.numpy()) == b"secret"
    finally:
        reader.close()
        segment.close()


def test_a_value_copied_out_stays_good_when_its_segment_cannot_go_back() -> None:
    """Handing the segment back fails once the graph is closing: the value is read all the
    same."""
    puller = InProcPuller()
    sink = PushSink(puller.pusher(0), worker=0)

    def closed(worker: int, token: int) -> None:
        raise TransportError("the publisher is closed")

    reader = ReportReader(closed, pids=_ME)
    try:
        sink.put(ValueReport("p", torch.ones(1 << 18)))
        report = reader.read(puller.recv(10))
    finally:
        sink.close()
        reader.close()
    assert isinstance(report, ValueReport) and report.value is not None
    assert torch.equal(report.value, torch.ones(1 << 18))


def test_an_unreadable_report_without_a_promise_is_a_worker_error() -> None:
    reader = ReportReader(lambda worker, token: None, pids=_ME)
    assert reader.read(_report(serialize(ProgressReport(0, 1)))) == ProgressReport(0, 1)
    with pytest.raises(WorkerError, match="cannot read"):
        reader.read(_report(serialize(ProgressReport(0, 1))[:-2]))
    with pytest.raises(WorkerError, match="no record"):  # it was an IndexError
        reader.read(Envelope(1, REPORT, ()))


@pytest.mark.parametrize("count", [16, 1 << 21])
def test_bool_tensors_with_any_bytes_work_in_every_runner(graph: dtorch.Graph, count: int) -> None:
    """A torch bool tensor holding other bytes than 0 and 1 (torch.empty's), and dtorch.empty:
    both reach the devices and come back (small ones inside messages, large ones through
    shared memory), and the graph goes on."""
    junk = _junk_bools(count)
    value = dtorch.from_torch(junk).to_torch()
    assert torch.equal(value.view(torch.uint8).ne(0), junk.view(torch.uint8).ne(0))
    noise = dtorch.randn(count) * 1e6  # leaves other bytes in the devices' free memory
    noise.sum().item()
    del noise
    empty = dtorch.empty(count, dtype=torch.bool).to_torch()
    assert empty.shape == (count,) and empty.dtype == torch.bool
    if graph.runner.elsewhere:  # what crossed a process boundary is clean
        assert int(value.view(torch.uint8).max()) <= 1
        assert int(empty.view(torch.uint8).max()) <= 1
    assert (dtorch.ones(2) + 1).tolist() == [2.0, 2.0]
