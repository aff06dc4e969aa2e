"""Executor: the controller of one Graph - its two threads, its promises, its health.

The client appends recorded operators (with the metadata of the operands they produce) and
released operand ids to one queue, in program order. The dispatch thread drains the queue in
batches and hands each batch to the Runner as one ``ExecuteBatch``: the operators, their
output operands, and the operand ids no handle holds any more (freed after the batch's
operators ran). One queue for both keeps a release from overtaking the operator that
produced the operand. The queue is bounded for operators (the client waits while it is full,
see ``WorkQueue.put_bounded``) and never for releases.

The report thread reads the runner's report channel and settles the promises the client
registered (``register``): the controller alone owns them. A worker failure report, or a
runner that cannot take a batch, breaks the executor: every pending promise fails with the
cause, later operators are refused at record time (GraphError, caused by it), and ``broken``
holds the cause for ``sync()`` to raise.

Example:
    >>> from dtorch.runtime.thread_runner import ThreadRunner
    >>> executor = Executor(ThreadRunner(num_streams=1), name="doc")
    >>> executor.release(5)     # releasing an id nobody produced is harmless
    >>> executor.close(timeout=5.0)
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from dtorch.errors import GraphError, WorkerDiedError, WorkerError
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import OpKind
from dtorch.ir.report import WorkerFailureReport
from dtorch.ir.span import Span
from dtorch.runtime.daemon import DaemonThread
from dtorch.runtime.gc_policy import exiting, watch_exit
from dtorch.runtime.reports import END
from dtorch.runtime.runner import Runner
from dtorch.runtime.settle import Settlements
from dtorch.runtime.workqueue import WorkQueue

#: What the client queues per operator: the operator and the metadata of its outputs.
Submission = tuple[Operator, tuple[Operand, ...]]

#: Largest number of queue items per batch: bounds the latency of the first operator.
MAX_BATCH = 4096
#: Bytes of dropped results after which a batch ends: its streams free what it released only
#: once it has run, so a loop that drops each result (``y = a @ w``) while the devices are
#: behind kept up to half a batch of them alive (3.5 GiB of 4 MiB results, torch holds two).
#: Counted in full-tensor bytes, of an operator's first output when it has at least
#: ``TRACKED_NUMEL`` elements: a batch of small ones is not cut (each batch costs a message
#: in process mode), and the check costs a small vector's operator next to nothing.
RELEASED_BYTES_PER_BATCH = 32 << 20
TRACKED_NUMEL = 1 << 14
#: Queued operators beyond which the recording client waits for the controller.
QUEUE_LIMIT = 1 << 14
#: How long the report thread waits for a report before it looks again.
REPORT_POLL_SECONDS = 1.0

_LOG = logging.getLogger(__name__)


def _track(sizes: dict[int, int], output: Operand) -> None:
    # a large output's bytes, counted when it is released (see Executor._drain)
    numel = math.prod(output.shape)
    if numel >= TRACKED_NUMEL:
        sizes[output.id] = numel * output.dtype.itemsize


def worker_died(report: WorkerFailureReport) -> WorkerDiedError:
    """The error every pending future raises once a worker failed (it exits after a report);
    the report's reason names the worker, its devices and what happened."""
    return WorkerDiedError(report.reason)


def _left(deadline: float) -> float:
    """Seconds until ``deadline``; a little even once it passed (a step still gets to look)."""
    return max(deadline - time.monotonic(), 0.01)


def _channel(error: Exception) -> GraphError:
    failure = GraphError(f"the report channel of this graph failed: {error!r}")
    failure.__cause__ = error
    return failure


class Executor:
    """Drains one graph's queue into its runner, and its runner's reports into promises."""

    def __init__(self, runner: Runner, name: str) -> None:
        self.runner = runner
        self.settlements = Settlements()
        self.promises = self.settlements.promises
        self._queue = WorkQueue(limit=QUEUE_LIMIT)
        #: ``release(operand_id)``: queue the release of an operand no handle holds (any
        #: thread, even a finalizer; never blocks). The queue's own ``put``, bound once:
        #: every operator's output is released when its last handle goes.
        self.release: Callable[[int], None] = self._queue.put
        #: ``submit((operator, its output operands))``: queue a recorded operator (client
        #: thread; waits while the queue is full and, where the devices are elsewhere, now
        #: and then for the controller to send what is queued). ``close`` and a broken runner
        #: swap in a refusal (GraphError) for later operators.
        queue = self._queue
        self.submit: Callable[[Submission], None] = (
            queue.put_handing_over if runner.elsewhere else queue.put_bounded
        )
        self._pins: dict[int, int] = {}  # operand id -> how many pins hold it
        self._held: set[int] = set()  # pinned ids whose last handle went meanwhile
        #: pinned id -> the value a handle of it was rebound to (``t.data = other``; None for
        #: a value of another graph): what a program holding the id as a constant reads now
        self.rebound: dict[int, Operand | None] = {}
        #: pinned id -> ``rebind_count`` when one of its several handles was rebound: a
        #: program that read it before cannot tell which handle it read (it refuses calls)
        self.ambiguous: dict[int, int] = {}
        #: rebinds so far (``t.data = other``): a program is not concerned by those before it
        #: was traced (a trace refuses one inside its function: ``rebinds_here``)
        self.rebind_count = 0
        #: thread ident -> how many rebinds it made, and where the last one was made
        self._rebinds_by_thread: dict[int, tuple[int, Span]] = {}
        # reentrant: a handle collected while pin/unpin holds it releases on the same thread
        self._pin_lock = threading.RLock()
        self._carry: Any = None  # an item that opens the next batch (see _drain)
        self._sizes: dict[int, int] = {}  # bytes of the live large outputs, by id (see _drain)
        self._stopping = False  # a close began: later operators are refused
        self._closed = False  # a close finished
        self._error: BaseException | None = None  # why the runner broke
        self._final: BaseException | None = None  # what a promise registered too late gets
        self._dispatcher = DaemonThread(self._main, f"{name}-executor")
        self._reporter = DaemonThread(self._read_reports, f"{name}-reports")
        watch_exit()  # close() drops queued work once the interpreter exits

    # --- health -----------------------------------------------------------------------------
    @property
    def broken(self) -> BaseException | None:
        """Why the runner broke (a worker died, a batch was refused), or None."""
        return self._error

    def _refuse(self, item: Submission) -> None:
        error = GraphError(self._refusal())
        error.__cause__ = self._error
        raise error

    def _refusal(self) -> str:
        if self._error is not None:
            return f"this graph's runner failed ({self._error}); create a new Graph"
        return "this graph is closed; create a new Graph to record more operators"

    def _break(self, error: BaseException) -> None:
        """Fail everything pending with ``error``; refuse later operators."""
        if self._error is not None:
            return
        self._error = error
        self._final = error
        self.submit = self._refuse
        refusal = GraphError(self._refusal())
        refusal.__cause__ = error
        self._queue.refuse(refusal)
        self.promises.fail_all(error)

    def refuse_inherited(self, error: BaseException) -> None:
        """In a forked child (its parent's threads did not come along): later operators and
        fetches raise ``error`` at once. Takes no lock: one of the parent's threads may have
        held any of them at the fork. Promises registered before the fork are left as they
        are (settling them would take their locks)."""
        if self._error is None:
            self._error = error
            self._final = error
            self.submit = self._refuse

    # --- promises ---------------------------------------------------------------------------
    def register(self, name: str, target: Any) -> None:
        """Register the promise or collector a GetTensor/Sync/Memory operator will settle."""
        self.promises.add(name, target)
        final = self._final
        if final is not None:  # broken or closed meanwhile: nothing will settle it
            late = self.promises.pop(name)
            if late is not None:
                late.set_error(final)

    # --- pins -------------------------------------------------------------------------------
    def pin(self, operand_ids: tuple[int, ...]) -> None:
        """Keep ``operand_ids`` on the devices after their last handle goes, until ``unpin``
        (a traced program's constants: the program holds their ids, not their handles).
        While anything is pinned, ``release`` checks the pins first."""
        with self._pin_lock:
            for operand_id in operand_ids:
                self._pins[operand_id] = self._pins.get(operand_id, 0) + 1
            if self._pins:
                self.release = self._release_pinned

    def rebinds_here(self) -> int:
        """How many rebinds the calling thread made (a trace refuses its own, not others')."""
        return self._rebinds_by_thread.get(threading.get_ident(), (0, Span.unknown()))[0]

    def last_rebind_here(self) -> Span:
        """The user's line of the calling thread's last rebind (a trace's refusal names it)."""
        return self._rebinds_by_thread.get(threading.get_ident(), (0, Span.unknown()))[1]

    def rebind(
        self, old: int, new: Operand | None, shared: bool = False, span: Span | None = None
    ) -> None:
        """A handle of ``old`` now stands for ``new`` (``t.data = other``; None: a value of
        another graph). Where ``old`` is pinned (a program's constant), the program reads
        ``new`` from its next call, and ``new`` stays pinned as long as ``old`` is. Where
        another handle of ``old`` lives on (``shared``), which one the program read is not
        known: it refuses its next call (``ambiguous``)."""
        with self._pin_lock:
            self.rebind_count += 1
            here = threading.get_ident()
            made = self.rebinds_here() + 1
            self._rebinds_by_thread[here] = (made, span or Span.unknown())
            if old not in self._pins or (new is not None and self._follows(new.id, old)):
                return  # not a constant; or rebound to itself (a cycle): it reads itself
            if shared:
                self.ambiguous[old] = self.rebind_count
                return
            replaced = self.rebound.get(old)
            self.rebound[old] = new
            if new is not None:
                self._pins[new.id] = self._pins.get(new.id, 0) + 1
        if replaced is not None:
            self.unpin((replaced.id,))

    def _follows(self, start: int, target: int) -> bool:
        """Whether following rebinds from ``start`` reaches ``target`` (they form no cycle)."""
        operand_id: int | None = start
        while operand_id is not None and operand_id != target:
            new = self.rebound.get(operand_id)
            operand_id = None if new is None else new.id
        return operand_id == target

    def unpin(self, operand_ids: tuple[int, ...]) -> None:
        """Undo one ``pin`` of ``operand_ids``; those no handle holds any more are released,
        and the values they were rebound to lose the pin they held."""
        freed: list[int] = []
        work = list(operand_ids)
        with self._pin_lock:
            for operand_id in work:  # grows by the rebound values of ids let go
                count = self._pins.get(operand_id, 0) - 1
                if count > 0:
                    self._pins[operand_id] = count
                    continue
                self._pins.pop(operand_id, None)
                self.ambiguous.pop(operand_id, None)
                new = self.rebound.pop(operand_id, None)
                if new is not None:
                    work.append(new.id)
                if operand_id in self._held:
                    self._held.discard(operand_id)
                    freed.append(operand_id)
            if not self._pins:
                self.release = self._queue.put
        for operand_id in freed:
            self._queue.put(operand_id)

    def _release_pinned(self, operand_id: int) -> None:
        with self._pin_lock:
            if operand_id in self._pins:
                self._held.add(operand_id)
                return
        self._queue.put(operand_id)

    # --- closing ----------------------------------------------------------------------------
    def joins_this_thread(self) -> bool:
        """Whether the calling thread is one ``close`` joins (the dispatcher or the reporter)."""
        return self._dispatcher.is_current() or self._reporter.is_current()

    def close(self, timeout: float) -> None:
        """Run what is queued, then stop both threads and the runner. As the interpreter
        exits, drop what is queued instead: nothing can read its results any more, and
        kernels still running as the interpreter tears down abort the process. A close that
        did not finish (Ctrl-C, or a timeout) can be called again: it goes on where it was."""
        if self._closed:
            return
        if not self._stopping:
            self._stopping = True
            self.submit = self._refuse
            self._queue.refuse(GraphError(self._refusal()))
        discard = exiting()
        if discard:
            self._queue.clear()
        self._queue.put(None)  # a wake token: the thread wakes, drains, sees _stopping
        deadline = time.monotonic() + timeout  # one budget for the three steps, not three
        self._dispatcher.join(timeout)
        try:
            self.runner.close(_left(deadline), discard)
        finally:
            self._reporter.join(_left(deadline))
            closed = GraphError("the graph was closed before this value was computed")
            self._final = self._final or closed
            self.promises.fail_all(self._final)
        if self._dispatcher.is_alive() or self._reporter.is_alive():
            raise GraphError(f"the controller threads did not stop within {timeout} s")
        self._closed = True

    # --- the dispatch thread ----------------------------------------------------------------
    def _main(self) -> None:
        while True:
            if self._stopping and exiting():  # a close begun before the exit: as one at exit
                self._queue.clear()
            batch = self._drain()
            self._queue.made_room()
            if batch is not None:
                self._dispatch(batch)
            elif self._stopping:
                return
            else:
                self._queue.sleep(1.0)

    def _drain(self) -> ExecuteBatch | None:
        queue = self._queue
        operators: list[Operator] = []
        operands: list[Operand] = []
        no_hold: list[int] = []
        sizes, released = self._sizes, 0
        carry, self._carry = self._carry, None
        if carry is not None:  # a memory-stats operator held back by the previous batch
            operators.append(carry[0])
        for _ in range(min(len(queue), MAX_BATCH)):
            item = queue.popleft()
            if item is None:  # close()'s wake token
                continue
            if type(item) is int:
                no_hold.append(item)
                if sizes:
                    released += sizes.pop(item, 0)
                    if released >= RELEASED_BYTES_PER_BATCH and operators:
                        break  # what this batch's operators dropped is freed once they have run
                continue
            outputs = item[1]
            if not outputs and no_hold and item[0].param.kind is OpKind.Memory:
                # A batch frees its no-hold operands after its operators: memory stats must
                # see the frees recorded before them, so they open the next batch.
                self._carry = item
                break
            operators.append(item[0])
            operands.extend(outputs)
            if outputs:  # the first output (nearly always the only one) counts
                shape = outputs[0].shape  # a short vector is small without a product
                if len(shape) > 1 or (shape and shape[0] >= TRACKED_NUMEL):
                    _track(sizes, outputs[0])
        if not operators and not no_hold:
            return None
        return ExecuteBatch(tuple(operators), tuple(operands), tuple(no_hold))

    def _dispatch(self, batch: ExecuteBatch) -> None:
        if self._error is not None:  # broken: nothing runs any more
            return
        try:
            self.runner.execute(batch)
        except WorkerError as error:  # a worker died or broke: that is the cause
            self._break(error)
        except Exception as error:  # a runner bug must not kill the controller silently
            if self._error is not None:  # the runner broke meanwhile: that is the cause
                return
            failure = GraphError(f"the runner failed to take a batch: {error!r}")
            failure.__cause__ = error
            self._break(failure)

    # --- the report thread ------------------------------------------------------------------
    def _read_reports(self) -> None:
        source, settle = self.runner.reports, self.settlements.settle
        while True:
            try:
                report = source.get(REPORT_POLL_SECONDS)
            except Exception as error:  # the channel broke (an unreadable report): so did
                if self._stopping:  # the graph, since nothing it waits for can arrive;
                    return  # while closing, the runner closes the channel under it
                self._break(error if isinstance(error, WorkerError) else _channel(error))
                time.sleep(REPORT_POLL_SECONDS / 10)  # a channel that keeps failing
                continue
            if report is None:
                continue
            if report is END:
                return
            try:
                if type(report) is WorkerFailureReport:
                    self._break(worker_died(report))
                else:
                    settle(report)
            except Exception:  # one bad report must not stop the settling of the others
                _LOG.exception("the controller could not apply a report")
