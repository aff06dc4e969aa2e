"""ProcessRunner: the Runner of process mode - a graph's lease on a pool of worker processes.

``execute`` encodes each batch once (``encode_batch``; an operator the codec cannot write
goes as an Unsent operator whose outputs fail: ``dtorch.runtime.process.unsent``) and
publishes it once for every worker, with the sequence number of the progress report the
flow window wants (0: none), the bitmap of the workers it concerns and its no-hold ids
(``dtorch.runtime.process.addressing``).
``reports`` reads the pool's PULL socket: report records (shared values copied out and
their segments handed back at once; progress kept for the window by ``WindowedSource``; the
workers' ``InputsDone``, which free the segments of large inputs: ``inputs``),
the workers' ``RESET_DONE`` answers when the graph closes, and ``END`` last (this graph's
session and a random mark of its own, from the controller's own pusher: any other END is
dropped - a sender's index is what the message says, and sessions are counted, so a peer
could forge both). The executor's report
thread is the socket's only reader: ``close`` gives the lease back only once that thread has
read the END, so the next graph's reports never reach it; a thread that does not read it in
time leaves the pool closed instead of lent to the next graph.

A worker that dies during the lease breaks the runner: the window stops waiting, and a
``WorkerFailureReport`` is pushed into the report channel (through the controller's own
pusher, so the report thread wakes at once), which fails every pending future.

Example:
    >>> from dtorch.api.graph import Graph, GraphOption
    >>> g = Graph(GraphOption(per_device_per_process=True, num_workers=2))  # doctest: +SKIP
    >>> type(g.runner).__name__, g.runner.parties                          # doctest: +SKIP
    ('ProcessRunner', 2)
    >>> g.close()                                                          # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from dtorch.errors import (
    GraphError,
    MessageGapError,
    TransportError,
    WorkerDiedError,
    WorkerError,
    raised_anew,
)
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch
from dtorch.ir.report import (
    Failure,
    InputsDone,
    PartyReport,
    Report,
    ValueReport,
    WorkerFailureReport,
)
from dtorch.options import GlobalOption
from dtorch.runtime.process.addressing import BatchAddresser, pack_ids, readers
from dtorch.runtime.process.inputs import InputShare
from dtorch.runtime.process.pool import STOP_GRACE_SECONDS, WorkerPool
from dtorch.runtime.process.protocol import (
    END,
    EXECUTE,
    OPEN,
    RELEASE,
    REPORT,
    RESET,
    RESET_DONE,
    pack_release,
    pack_u64,
    unpack_u64,
)
from dtorch.runtime.process.unsent import encode_or_substitute
from dtorch.runtime.process.values import ReportReader
from dtorch.runtime.reports import END as END_OF_REPORTS
from dtorch.runtime.reports import EndOfReports
from dtorch.runtime.window import FlowWindow, WindowedSource
from dtorch.serialization import serialize
from dtorch.transport import Publisher, Puller, Pusher
from dtorch.transport.wire import EVERYONE

if TYPE_CHECKING:
    from dtorch.api.graph import GraphOption

_LOG = logging.getLogger(__name__)


class PoolState(Protocol):
    """The sockets of a pool that its runner uses."""

    @property
    def publisher(self) -> Publisher: ...
    @property
    def puller(self) -> Puller: ...
    @property
    def own_pusher(self) -> Pusher: ...


class LeasablePool(Protocol):
    """What a runner needs of a pool: a ``WorkerPool`` (this machine) or a ``ClusterPool``
    (``dtorch.cluster``: workers on several hosts)."""

    @property
    def workers(self) -> int: ...
    @property
    def device_type(self) -> str: ...
    @property
    def shares_memory(self) -> bool: ...
    @property
    def pids(self) -> list[int]: ...
    @property
    def death_verdict_s(self) -> float: ...
    @property
    def layout(self) -> Layout: ...
    @property
    def broken(self) -> WorkerDiedError | None: ...
    def reap(self) -> WorkerDiedError | None: ...
    @property
    def state(self) -> PoolState: ...
    def lease(self, on_death: Callable[[WorkerDiedError, int], None]) -> int: ...
    def waiting_on(self, parties: Collection[int]) -> str: ...
    def give_back(self) -> None: ...
    def close(self, grace: float = ..., why: str = "") -> None: ...


class Layout(Protocol):
    def describe(self, party: int) -> str: ...


class ClusterDefault:
    """The pool of the cluster this process's ``MainNode`` made ready, or None: where
    process-mode graphs without a pool of their own run. Set and cleared by ``MainNode``
    only (``wait_cluster_ready`` / ``close``); class state, as the MainNode it mirrors."""

    pool: LeasablePool | None = None


class ProcessRunner:
    """Runs a graph's operators on the worker processes of ``pool`` (see the module doc)."""

    def __init__(self, pool: LeasablePool, *, owns_pool: bool) -> None:
        self._pool = pool
        self._owns_pool = owns_pool
        state = pool.state
        self._publisher = state.publisher
        self._puller = state.puller
        self._own_pusher = state.own_pusher
        self._window = FlowWindow(
            pool.workers,
            stall_s=GlobalOption.get_comm_timeout_second(),
            waiting_on=self.waiting_on,  # a stall names the parties it waits for
        )
        self._addresser = BatchAddresser(pool.workers)
        self._reader = ReportReader(self._release, pids=pool.pids if pool.shares_memory else None)
        self._inputs = InputShare(enabled=pool.shares_memory)
        self._reset_from: set[int] = set()  # workers, each counted once however often it says
        self._reset_done = threading.Event()
        self._ended = threading.Event()  # the report thread read this graph's END
        self._reading: int | None = None  # the report thread's ident, once it reads
        self._held: deque[tuple[float, Report]] = deque()  # failures awaiting a death verdict
        self._end_read = False  # this graph's END was read (held failures may still go out)
        self._closed = False
        self._session = pool.lease(self._on_death)
        self._end_mark = pack_u64(self._session) + secrets.token_bytes(16)  # see _own_end
        options = serialize(dataclasses.asdict(GlobalOption.current()))
        self._publisher.send(OPEN, [pack_u64(self._session), options])
        self.reports = WindowedSource(self, self._window)  # the runner reads the socket

    @classmethod
    def for_option(cls, option: GraphOption) -> ProcessRunner:
        """The runner a graph's option asks for: on its ``worker_pool``; else, unless it
        names ``num_workers``, on the cluster that ``dtorch.cluster.MainNode`` made ready
        (``ClusterDefault``: a DTorch program sets the cluster up and then makes its graphs
        as on one machine); else on a pool of its own that closes with it."""
        if option.worker_pool is not None:
            return cls(option.worker_pool, owns_pool=False)
        cluster = ClusterDefault.pool
        if cluster is not None and option.num_workers is None:
            return cls(cluster, owns_pool=False)
        pool = WorkerPool(option.num_workers)
        try:
            return cls(pool, owns_pool=True)
        except BaseException:
            pool.close()
            raise

    @property
    def elsewhere(self) -> bool:
        """True: the devices run in worker processes."""
        return True

    @property
    def parties(self) -> int:
        return self._pool.workers

    @property
    def pool(self) -> LeasablePool:
        return self._pool

    def waiting_on(self, parties: Collection[int]) -> str:
        """The workers of ``parties`` (and any stopped worker) in words: their index, pid,
        devices and process state, for the message of a wait that timed out."""
        return self._pool.waiting_on(parties)

    def satisfy(self, mesh: DeviceMesh) -> bool:
        """CPU meshes always (logical devices); CUDA ones on a CUDA pool with those GPUs."""
        if mesh.device_kind == "cpu":
            return True
        return self._pool.device_type == "cuda" and max(mesh.device_ids) < self._pool.workers

    # --- down -------------------------------------------------------------------------------
    def execute(self, batch: ExecuteBatch) -> None:
        failure = self._pool.broken  # a worker died during this lease (a broken pool lends none)
        if failure is not None:
            raise raised_anew(failure)
        progress = self._window.admit(len(batch.operators))
        carried, parties, to = self._addresser.address(batch)
        carried = self._inputs.share(carried, readers(parties))
        payload = encode_or_substitute(carried) if carried.operators or carried.operands else b""
        frees = pack_ids(batch.no_hold)
        to = EVERYONE if progress else to  # every party reports a progress mark
        self._publisher.send(EXECUTE, [pack_u64(progress), parties, frees, payload], to=to)

    def _release(self, worker: int, token: int) -> None:
        self._publisher.send(RELEASE, [pack_release(worker, token)], to=worker)

    # --- up (through ``reports``: the executor's report thread is the only caller) ------------
    def get(self, timeout_s: float) -> Report | EndOfReports | None:
        self._reading = threading.get_ident()
        if self._held or self._end_read:
            held = self._release_held()
            if held is not None:
                return held
        try:
            envelope = self._puller.poll(timeout_s)
        except MessageGapError as error:  # no sender of ours writes one: a stray peer's
            _LOG.warning("dropped a message the report socket cannot read: %s", error)
            return None
        except TransportError:
            if self._closed:  # the pool closed its puller before END was read: the end
                self._ended.set()
                return END_OF_REPORTS
            raise
        if envelope is None:
            return None
        kind = envelope.kind
        if kind == REPORT:
            report = self._reader.read(envelope)
            if type(report) is InputsDone:  # the runner's own business: free the segments
                self._inputs.done(report.tokens)
                return None
            failures = _failures(report)
            if failures and self._pool.reap() is not None:
                # A survivor's collective failed with a dead peer before the monitor saw the
                # death: the death (already on its way here) is what every future raises
                return None
            if self._pool.death_verdict_s and any(failure.comm for failure in failures):
                # the same, where deaths are seen late (another host's worker: by its
                # heartbeats' silence): held until the verdict, or until it cannot come
                self._held.append((time.monotonic() + self._pool.death_verdict_s, report))
                return None
            return report
        if kind == RESET_DONE:
            sender, workers = envelope.sender, self._pool.workers
            if unpack_u64(envelope.parts[0]) == self._session and 0 <= sender < workers:
                self._reset_from.add(sender)
                if len(self._reset_from) == workers:
                    self._reset_done.set()
            return None
        if kind == END and self._own_end(envelope.sender, envelope.parts):
            self._end_read = True  # failures still held go first, then the end
            return self._release_held() if self._held else self._end()
        return None  # a READY of no interest here, an END not this graph's

    def _end(self) -> EndOfReports:
        self._ended.set()
        return END_OF_REPORTS

    def _release_held(self) -> Report | EndOfReports | None:
        """A held failure whose verdict did not come in time, or came no more before this
        graph's END (none once a death is known: its report fails every future); the END
        itself once they are out."""
        if self._pool.broken is not None:
            self._held.clear()
        elif self._held and (self._end_read or self._held[0][0] <= time.monotonic()):
            return self._held.popleft()[1]
        return self._end() if self._end_read and not self._held else None

    def _own_end(self, sender: int, parts: Sequence[Any]) -> bool:
        """Whether an END is this graph's: from the controller's own pusher, with this graph's
        session (an earlier graph's END is not its end) and its random mark (no worker or
        intruder can know it)."""
        if sender != self._own_pusher.sender or len(parts) != 1:
            return False
        return hmac.compare_digest(bytes(parts[0]), self._end_mark)

    def _on_death(self, error: WorkerDiedError, worker: int) -> None:
        """The pool's monitor saw a worker die: fail the window, wake the report thread."""
        self._window.fail(error)
        self._reset_done.set()
        devices = self._pool.layout.describe(worker)
        report = WorkerFailureReport(worker, devices, str(error))
        self._own_pusher.send(REPORT, [serialize(report)])

    # --- closing ----------------------------------------------------------------------------
    def close(self, timeout: float, discard: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        self._window.fail(GraphError("the graph was closed"))
        deadline = time.monotonic() + timeout
        # what the workers get to stop, where the pool closes; at exit (discard) the batches
        # they hold are dropped, not waited for: they get what an idle worker needs to stop
        grace = EXIT_GRACE_SECONDS if discard else STOP_GRACE_SECONDS
        try:
            if not discard:  # at exit the pool is stopped below: no graph comes next
                self._reset(timeout)
        except KeyboardInterrupt:  # Ctrl-C: stop now, not after the workers' current batch
            grace = 0.0
            raise
        finally:
            with contextlib.suppress(TransportError):  # a pool closed above has no pusher
                self._own_pusher.send(END, [self._end_mark])  # its last envelope
            why = self._unfinished(discard)
            ending = self._owns_pool or self._pool.broken is not None or discard or bool(why)
            if not ending and not self._reading_stopped(deadline):
                why = "the report thread of a graph it served did not stop reading in time"
                _LOG.warning("%s: the pool is closed rather than lent on", why)
                ending = True
            self._pool.give_back()
            if ending:
                self._pool.close(grace, why)
            self._reader.close()
            self._inputs.close()

    def _unfinished(self, discard: bool) -> str:
        """Why the pool cannot serve the next graph though it may be lent (its workers may
        still run this graph's batches, which read inputs the close releases), or ''."""
        if discard or self._reset_done.is_set() or self._pool.broken is not None:
            return ""
        return "a close of the graph it served was interrupted before the workers finished"

    def _reading_stopped(self, deadline: float) -> bool:
        """Whether the pool may serve the next graph: its reports arrive on the same socket,
        so only once this graph's report thread read this graph's END (one not yet started
        reads it first thing), by ``deadline`` or within a few seconds at least, even when
        the reset took the close's whole time; False from the report thread itself."""
        if self._ended.is_set():
            return True
        if self._reading == threading.get_ident():
            return False
        return self._ended.wait(max(deadline - time.monotonic(), END_GRACE_SECONDS))

    def _reset(self, timeout: float) -> None:
        """Every worker finished this graph's work and dropped its shards."""
        if self._pool.broken is not None:
            return
        try:
            self._publisher.send(RESET, [pack_u64(self._session)])
        except TransportError:  # the pool was closed under this graph: nothing to reset
            return
        stopped = self._wait_reset(timeout)
        if not self._reset_done.is_set() and self._pool.broken is None:
            within = f"{timeout:.1f}"  # the close's time left: 0.9998 s of a 1 s timeout
            why = (
                f"the workers cannot finish this graph's work: {stopped}"
                if stopped
                else f"the workers did not finish this graph's work within {within} s"
            )
            self._pool.close(why=why)  # workers that cannot finish cannot serve the next graph
            raise WorkerError(f"{why}; the worker pool was closed")

    def _wait_reset(self, timeout: float) -> str:
        """Wait for every worker's RESET_DONE, at most ``timeout`` s, and no longer once a
        worker is stopped (SIGSTOP, Ctrl-Z, a debugger: it answers nothing until resumed);
        that worker in words, or ''."""
        deadline = time.monotonic() + timeout
        while not self._reset_done.wait(min(RESET_SLICE_SECONDS, timeout)):
            stopped = self._pool.waiting_on(())  # names every stopped worker
            timeout = deadline - time.monotonic()
            if stopped or timeout <= 0:
                return stopped
        return ""


#: How often a close waiting for the workers looks whether one of them is stopped.
RESET_SLICE_SECONDS = 0.25
#: The least a close waits for its report thread to read END before it lends the pool on.
END_GRACE_SECONDS = 2.0
#: Seconds the workers get to stop at interpreter exit (an idle one stops in about 0.1 s;
#: one still running batches the exit drops is killed after this, not after 5 s).
EXIT_GRACE_SECONDS = 0.5


def _failures(report: Report) -> tuple[Failure, ...]:
    """The kernel failures ``report`` tells of (none, for most)."""
    if type(report) is ValueReport:
        return () if report.failure is None else (report.failure,)
    if type(report) is not PartyReport:
        return ()
    return report.later if report.failure is None else (report.failure, *report.later)
