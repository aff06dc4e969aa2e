"""Reports across processes: a worker's report sink, and how the controller reads reports.

A worker's streams ``put`` report records into a ``PushSink``: each becomes one ``REPORT``
envelope, the record encoded with the codec (which copies a value's bytes: the shard may
change later). Values of ``SHARED_MIN`` bytes (1 MiB) or more do not travel inside the
message: the sink copies them into a touched segment of the worker's pool (memory speed, no
page faults) and sends a ``SharedValue`` that says where; the controller copies the value out
and hands the segment back (``RELEASE``), so a worker's segments are reused, never leaked.
Bool values travel with bytes 0 and 1 only (``clean_bools``: the reader refuses others).

A report for a promise (a value, a party's sync or memory rows, a profile) carries the
promise's name in a second frame, beside the record: a report the controller cannot read
(a bug: the codec refuses malformed bytes) then fails that one promise with a failure that
says so, and the graph goes on. A report without a promise (progress, a worker's failure,
``InputsDone``) that cannot be read breaks the graph: flow control or shared memory would
wait for it for ever.

Example:
    >>> import torch
    >>> from dtorch.ir.report import ValueReport
    >>> from dtorch.transport import Envelope, InProcPuller
    >>> puller = InProcPuller()
    >>> sink = PushSink(puller.pusher(0), worker=0)
    >>> sink.put(ValueReport("p", torch.arange(3)))
    >>> reader = ReportReader(lambda worker, token: None, pids=None)
    >>> reader.read(puller.recv()).value.tolist()
    [0, 1, 2]
    >>> unread = reader.read(Envelope(1, b"report", (memoryview(b"junk"), memoryview(b"p"))))
    >>> unread.promise, unread.failure.error_type
    ('p', 'WorkerError')
    >>> sink.close(); reader.close()
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Sequence

import torch

from dtorch.comm.shm import (
    Locator,
    PeerMaps,
    Segment,
    SegmentPool,
    map_peer,
    release_buffer,
    tensor_view,
)
from dtorch.errors import DeserializationError, DTorchError, WorkerError
from dtorch.ir.report import Failure, Report, SharedValue, ValueReport
from dtorch.ir.sharding import capped_product
from dtorch.runtime.process.protocol import REPORT
from dtorch.runtime.reports import EndOfReports
from dtorch.serialization import deserialize, serialize
from dtorch.serialization.columns import show
from dtorch.serialization.tensors import copy_clean
from dtorch.transport import Envelope, PusherLike

_LOG = logging.getLogger(__name__)

#: Values of this many bytes or more travel through shared memory, not inside messages.
SHARED_MIN = 1 << 20
#: Bytes of free segments a worker keeps for the next values (an idle worker holds no more).
KEPT_BYTES = 1 << 28


class PushSink:
    """A worker's ReportSink: records onto its pusher, large values through shared memory."""

    def __init__(self, pusher: PusherLike, worker: int, *, shared_min: int | None = SHARED_MIN):
        self._pusher = pusher
        self._worker = worker
        self._shared_min = shared_min  # None: no shared memory with the controller (remote)
        # a fetched value's touched pages are reused; a worker keeps few of them once idle
        self._pool = SegmentPool(max_free=2, max_bytes=KEPT_BYTES)
        self._lock = threading.Lock()
        self._lent: dict[int, Segment] = {}  # token -> segment the controller still reads
        self._tokens = itertools.count(1)

    def put(self, report: Report | EndOfReports) -> None:
        if type(report) is ValueReport and report.value is not None:
            report = self._travelling(report)
        promise = getattr(report, "promise", None)
        payload = serialize(report)
        self._pusher.send(REPORT, [payload] if promise is None else [payload, promise.encode()])

    def _travelling(self, report: ValueReport) -> ValueReport:
        value = report.value
        assert value is not None
        value = value.detach().to("cpu")
        if self._shared_min is None or value.nbytes < self._shared_min:
            return ValueReport(report.promise, value)  # serialize copies the bytes
        segment = self._pool.acquire(value.nbytes)
        copy_clean(tensor_view(segment.buffer, 0, value.dtype, tuple(value.shape)), value)
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
    shared value's segment back once the value was copied out. ``pids``: each worker's
    process id, by worker index - a shared value is read from its own sender's segments only
    (a report naming another process's descriptor would have the controller map any file of
    this user's processes) - or None where the workers share no memory with this process (a
    cluster), which refuses every shared value."""

    def __init__(self, release: Callable[[int, int], None], *, pids: Sequence[int] | None) -> None:
        self._release = release
        self._pids = None if pids is None else tuple(pids)
        # a worker keeps up to KEPT_BYTES of its segments for reuse; others it closes, and a
        # mapping kept here would hold their memory (16 GiB after 32 fetches of 512 MiB)
        self._maps = PeerMaps(max_bytes=2 * KEPT_BYTES)

    def read(self, envelope: Envelope) -> Report:
        """The record of a REPORT envelope; one that cannot be read is a failure of the
        promise it names, or WorkerError when it names none (see the module docstring)."""
        parts = envelope.parts
        if not parts:
            raise WorkerError("a worker sent a report with no record (an empty REPORT message)")
        try:
            report = deserialize(parts[0])
        except DeserializationError as error:
            if len(parts) < 2:
                raise WorkerError(
                    f"a worker sent a report the controller cannot read: {error}"
                ) from error
            return _unreadable(bytes(parts[1]).decode(errors="replace"), envelope.sender, error)
        if type(report) is ValueReport and report.shared is not None:
            return self._shared(report.promise, report.shared, envelope.sender)
        return report

    def _shared(self, promise: str, shared: SharedValue, sender: int) -> ValueReport:
        try:
            self._check_owner(shared, sender)
        except WorkerError as error:  # not its sender's segment: nothing of it is handed back
            return _unreadable(promise, sender, error)
        try:
            report = ValueReport(promise, self._copy_out(shared))
        except (DTorchError, OSError, RuntimeError, ValueError) as error:  # no such segment
            report = _unreadable(promise, shared.worker, error)
        try:  # the segment goes back whether or not the value could be read
            self._release(shared.worker, shared.token)
        except (DTorchError, OSError):  # the graph is closing: the worker closes its segments
            _LOG.debug("could not hand back worker %d's segment %d", shared.worker, shared.token)
        return report

    def _check_owner(self, shared: SharedValue, sender: int) -> None:
        pids = self._pids
        if pids is None:
            raise WorkerError("a shared-memory value from a worker that shares no memory here")
        if shared.worker != sender or not 0 <= sender < len(pids) or pids[sender] != shared.pid:
            raise WorkerError(
                f"a shared value said to lie in process {shared.pid} (worker {shared.worker}), "
                f"sent by worker {sender}: it must lie in its sender's own segments"
            )

    def _copy_out(self, shared: SharedValue) -> torch.Tensor:
        # linear in the shape's length, whatever the report holds
        needed = capped_product(shared.shape, shared.size) * shared.dtype.itemsize
        if min(shared.shape, default=0) < 0 or not 0 <= needed <= shared.size:
            raise WorkerError(
                f"a value of {shared.dtype} {show(list(shared.shape))} cannot lie in a segment "
                f"of {shared.size} bytes"
            )
        locator = Locator(shared.pid, shared.fd, shared.inode, shared.size)
        if shared.size <= KEPT_BYTES:  # a segment the worker may reuse: keep it mapped
            return tensor_view(self._maps.get(locator), 0, shared.dtype, shared.shape).clone()
        buffer = map_peer(locator)  # the worker closes it once released: unmapped at once
        try:
            return tensor_view(buffer, 0, shared.dtype, shared.shape).clone()
        finally:
            release_buffer(buffer)

    def close(self) -> None:
        self._maps.close()


def _unreadable(promise: str, worker: int, error: BaseException) -> ValueReport:
    """The failure that settles ``promise`` in place of a report the controller cannot read."""
    reason = f"the controller cannot read it: {type(error).__name__}: {error}"
    # operator 0 is none (ids start at 1); worker w hosts device w first
    return ValueReport(
        promise,
        failure=Failure(
            0, f"the report of worker {worker} for {promise}", worker, "WorkerError", reason
        ),
    )
