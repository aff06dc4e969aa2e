"""Reports across processes: a worker's report sink, and how the controller reads reports.

A worker's streams ``put`` report records into a ``PushSink``: each becomes one ``REPORT``
envelope, the record encoded with the codec (which copies a value's bytes: the shard may
change later). Values of ``SHARED_MIN`` bytes (1 MiB) or more do not travel inside the
message: the sink copies them into a touched segment of the worker's pool (memory speed, no
page faults) and sends a ``SharedValue`` that says where; the controller copies the value out
and hands the segment back (``RELEASE``), so a worker's segments are reused, never leaked.

Example:
    >>> import torch
    >>> from dtorch.ir.report import ValueReport
    >>> from dtorch.transport import InProcPuller
    >>> puller = InProcPuller()
    >>> sink = PushSink(puller.pusher(0), worker=0)
    >>> sink.put(ValueReport("p", torch.arange(3)))
    >>> reader = ReportReader(lambda worker, token: None)
    >>> reader.decode(puller.recv().parts[0]).value.tolist()
    [0, 1, 2]
    >>> sink.close(); reader.close()
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

import torch

from dtorch.comm.shm import Locator, PeerMaps, Segment, SegmentPool, tensor_view
from dtorch.errors import DeserializationError, WorkerError
from dtorch.ir.report import Report, SharedValue, ValueReport
from dtorch.runtime.process.protocol import REPORT
from dtorch.runtime.reports import EndOfReports
from dtorch.serialization import deserialize, serialize
from dtorch.transport import PusherLike

#: Values of this many bytes or more travel through shared memory, not inside messages.
SHARED_MIN = 1 << 20


class PushSink:
    """A worker's ReportSink: records onto its pusher, large values through shared memory."""

    def __init__(self, pusher: PusherLike, worker: int, *, shared_min: int | None = SHARED_MIN):
        self._pusher = pusher
        self._worker = worker
        self._shared_min = shared_min  # None: no shared memory with the controller (remote)
        self._pool = SegmentPool()
        self._lock = threading.Lock()
        self._lent: dict[int, Segment] = {}  # token -> segment the controller still reads
        self._tokens = itertools.count(1)

    def put(self, report: Report | EndOfReports) -> None:
        if type(report) is ValueReport and report.value is not None:
            report = self._travelling(report)
        self._pusher.send(REPORT, [serialize(report)])

    def _travelling(self, report: ValueReport) -> ValueReport:
        value = report.value
        assert value is not None
        value = value.detach().to("cpu")
        if self._shared_min is None or value.nbytes < self._shared_min:
            return ValueReport(report.promise, value)  # serialize copies the bytes
        segment = self._pool.acquire(value.nbytes)
        tensor_view(segment.buffer, 0, value.dtype, tuple(value.shape)).copy_(value)
        token = next(self._tokens)
        with self._lock:
            self._lent[token] = segment
        where = segment.locator()
        shared = SharedValue(
            where.pid,
            where.fd,
            where.inode,
            where.size,
            value.dtype,
            tuple(value.shape),
            self._worker,
            token,
        )
        return ValueReport(report.promise, shared=shared)

    def release(self, token: int) -> None:
        """The controller copied the value of ``token`` out: its segment is free again."""
        with self._lock:
            segment = self._lent.pop(token, None)
        if segment is not None:
            self._pool.release(segment)

    def close(self) -> None:
        with self._lock:
            lent, self._lent = list(self._lent.values()), {}
        for segment in lent:
            segment.close()
        self._pool.close()


class ReportReader:
    """The controller's decoding of REPORT envelopes; ``release(worker, token)`` hands a
    shared value's segment back once the value was copied out."""

    def __init__(self, release: Callable[[int, int], None]) -> None:
        self._release = release
        self._maps = PeerMaps()

    def decode(self, payload: memoryview | bytes) -> Report:
        try:
            report = deserialize(payload)
        except DeserializationError as error:
            raise WorkerError(
                f"a worker sent a report the controller cannot read: {error}"
            ) from error
        if type(report) is ValueReport and report.shared is not None:
            return ValueReport(report.promise, self._copy_out(report.shared))
        return report

    def _copy_out(self, shared: SharedValue) -> torch.Tensor:
        locator = Locator(shared.pid, shared.fd, shared.inode, shared.size)
        try:
            buffer = self._maps.get(locator)
            return tensor_view(buffer, 0, shared.dtype, shared.shape).clone()
        finally:
            self._release(shared.worker, shared.token)

    def close(self) -> None:
        self._maps.close()
