"""KernelStream: one thread that runs, in order, the kernels of the devices it owns.

The runner pushes lists of items; the stream drains them without waking anyone. A kernel that
raises turns its outputs into ``KernelFailure`` markers naming the operator and the user's
line; kernels whose inputs are failures pass the marker on instead of running, so every value
that depends on a failure fails, and everything else keeps working. The next Sync reports the
first failure since the previous one. A stream never dies: whatever goes wrong while it
handles an item (even outside a kernel, say a failed allocation) fails that item's outputs
and, for the operators that settle a promise, reports the failure, and the stream goes on.

Items: a ``KernelContext`` per operator (the operator, its operand metadata and the devices
this stream runs it for: built once by the runner, so the stream allocates nothing per
operator to dispatch it), ``(FREE, operand ids)``, ``(FAIL, (operand id, devices,
failure))`` (its shards there are that failure), ``(PROGRESS, sequence)`` (report that
everything before it ran), ``(RESET, event)`` (drop every shard and failure, then set the
event: a worker is handed to a new graph) and ``(STOP,)``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence

import torch

from dtorch.comm.store import PeerFailedError
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.params import GetTensorParam, MemoryParam, ProfileParam, SyncParam
from dtorch.ir.report import Failure, PartyReport, ProgressReport, Report, ValueReport
from dtorch.kernels.base import KernelContext
from dtorch.kernels.table import GROUP_KERNELS, LOCAL_KERNELS
from dtorch.runtime.daemon import DaemonThread
from dtorch.runtime.handlers import STREAM_HANDLERS, StreamServices
from dtorch.runtime.plan import PLAN, StreamPlan
from dtorch.runtime.profiling import EventRecorder
from dtorch.runtime.shards import KernelFailure, ShardTable, failure_of, writes_first_input
from dtorch.runtime.subgraph import BIND, FINISH, CompiledBody, call_items
from dtorch.runtime.torch_threads import adopt
from dtorch.runtime.workqueue import WorkQueue

FREE, STOP, PROGRESS, RESET = 1, 2, 3, 4
FAIL = 8  # after the programs' BIND, FINISH (5, 6: subgraph) and PLAN (7: plan)

_LOG = logging.getLogger(__name__)


class KernelStream:
    """A thread running its devices' kernels in order; ``push`` never blocks.

    ``party`` is the stream's index among every stream that reports to one controller (the
    streams of one runner, or of every worker of a process runner). ``threads``: torch's
    intra-op threads in the stream's thread (``dtorch.runtime.torch_threads``; None leaves
    torch's default); the constructor returns once the thread has taken them.
    """

    def __init__(
        self,
        name: str,
        services: StreamServices,
        party: int = 0,
        *,
        inline: bool = False,
        threads: int | None = None,
    ) -> None:
        self.name = name
        self.party = party
        self.shards = ShardTable()
        self.failures: list[Failure] = []  # since the previous Sync, one per operator
        self.recorder: EventRecorder | None = None  # kernel events, while a profile is open
        self._services = services
        self._queue = WorkQueue()
        self._thread: DaemonThread | None = None
        if not inline:
            adopted = threading.Event()
            self._thread = DaemonThread(self._main, name, (threads, adopted))
            adopted.wait()  # the creator may reset torch's process default only after this

    @property
    def services(self) -> StreamServices:
        return self._services

    @property
    def native_id(self) -> int | None:
        """The OS id of the stream's thread (for its figures in ``/proc/self/task``); None
        for an inline stream, which runs in its caller's thread."""
        return None if self._thread is None else self._thread.thread.native_id

    def push(self, items: Sequence[object]) -> None:
        """Queue ``items`` for the stream's thread; an inline stream (a worker process's: its
        main thread has nothing else to do, and a hand-over between threads costs more than
        a small kernel) runs them now, in the caller's thread."""
        if self._thread is None:
            for item in items:
                self._handle(item)
            return
        self._queue.extend(items)

    def stop(self, timeout: float) -> bool:
        """Ask the thread to finish what it has and exit; True if it did within ``timeout``."""
        self.ask_to_stop()
        return self.join(timeout)

    def discard_queued(self) -> None:
        """Drop the items the thread has not started (its current kernel runs to its end)."""
        self._queue.clear()

    def ask_to_stop(self) -> None:
        """Queue the stop after what the thread has (``join`` then waits for it)."""
        if self._thread is not None:
            self.push([(STOP,)])
            self._queue.wake()

    def join(self, timeout: float) -> bool:
        """Wait at most ``timeout`` s for the thread to exit; True if it did (or never ran)."""
        if self._thread is None:
            return True
        return self._thread.join(timeout)

    # --- the loop ---------------------------------------------------------------------------
    def _main(self, threads: int | None, adopted: threading.Event) -> None:
        """The stream thread: ``threads`` torch intra-op threads (None: torch's default)."""
        try:
            if threads is not None:
                adopt(threads)
        finally:
            adopted.set()  # never leave the creator waiting
        queue = self._queue
        while True:
            try:
                item = queue.popleft()
            except IndexError:
                queue.sleep(1.0)
                continue
            if not self._handle(item):
                return

    def _handle(self, item: object) -> bool:
        """Run one item; False for STOP."""
        try:
            if item.__class__ is KernelContext:
                if self.recorder is None:  # the one check profiling costs when off
                    self._run(item)
                else:
                    self._run_recorded(item)
            elif item[0] == STOP:  # type: ignore[index]
                return False
            else:
                self._control(item)  # type: ignore[arg-type]
        except Exception as error:  # the stream goes on; the item's outputs fail
            self._recover(item, error)
        return True

    def _control(self, item: tuple[int, object]) -> None:
        tag, value = item
        if tag == FREE:
            self.shards.free(value)  # type: ignore[arg-type]
        elif tag == FAIL:  # an operand read after its release: its shards are a failure
            failed: tuple[int, tuple[int, ...], KernelFailure] = value  # type: ignore[assignment]
            self._note(failed[2])  # for the next Sync, as a failed kernel's
            for device in failed[1]:
                self.shards.put(failed[0], device, failed[2])
        elif tag == BIND:  # a program call's placeholders take its inputs' shards
            self.shards.bind(value)  # type: ignore[arg-type]
        elif tag == FINISH:  # its results take the body's, and the body's operands go
            moves: tuple[tuple[int, int], ...] = value[0]  # type: ignore[index]
            self.shards.bind(moves)
            self.shards.free(value[1])  # type: ignore[index]
        elif tag == PLAN:  # a program call: its plan, or its contexts where a plan cannot run
            plan: StreamPlan | None
            body: CompiledBody
            call: Operator
            index: int
            plan, body, call, index = value  # type: ignore[misc]
            fast = self.recorder is None and not self._services.validate
            if plan is None or not fast or not plan.run(self.shards, call, self._run, self._note):
                for each in call_items(body, call, index):
                    self._handle(each)
        elif tag == PROGRESS:
            self._report(ProgressReport(self.party, value))  # type: ignore[arg-type]
        elif tag == RESET:
            self.shards = ShardTable()
            self.failures = []
            self.recorder = None
            self._services.board.clear(self.party)
            value.set()  # type: ignore[attr-defined]

    def _run(self, ctx: KernelContext) -> None:
        """Run one operator for the devices ``ctx`` names."""
        op = ctx.operator
        kind = op.param.kind
        local = LOCAL_KERNELS.get(kind)
        if local is None:
            handler = STREAM_HANDLERS.get(kind)
            if handler is not None:
                handler(self, op, ctx.inputs, ctx.devices)
            else:
                self._run_group(ctx)
            return
        # The per-operator path: the local kernel runs inline for each device.
        shards = self.shards
        values, put, failed = shards._values, shards.put, shards.failed
        inputs = op.inputs
        for device in ctx.devices:
            if failed and not failed.isdisjoint(inputs) and self._pass_failure(op, device):
                continue
            try:
                # no comprehension: Python 3.11 builds a function object for each one
                if len(inputs) == 2:
                    args = [values[inputs[0]][device], values[inputs[1]][device]]
                elif len(inputs) == 1:
                    args = [values[inputs[0]][device]]
                else:
                    args = [values[i][device] for i in inputs]
                outputs = local(ctx, device, args)  # type: ignore[arg-type]
                if self._services.validate:
                    check_outputs(ctx, device, outputs)
            except Exception as error:
                self._fail(op, device, failure_of(op, device, error))
                continue
            if len(outputs) == 1 and len(op.outputs) == 1:
                put(op.outputs[0], device, outputs[0])
            else:
                for operand, value in zip(op.outputs, outputs, strict=True):
                    put(operand, device, value)

    def _run_recorded(self, ctx: KernelContext) -> None:
        """``_run``, timing each device's kernel (a group kernel once, for all its devices);
        handled kinds (GetTensor, Sync, Memory, Profile) are not kernels and go untimed."""
        op = ctx.operator
        kind = op.param.kind
        if kind in STREAM_HANDLERS:
            self._run(ctx)
            return
        operands = ctx.outputs or ctx.inputs
        if kind not in LOCAL_KERNELS:
            start = time.perf_counter_ns()
            try:
                self._run(ctx)
            finally:  # a failed kernel ran too: its time counts
                self._recorded(op, operands, ctx.devices, True, start)
            return
        memo = ctx.memo  # one context per device, sharing the scratch as the devices would
        for device in ctx.devices:
            one = ctx
            if len(ctx.devices) > 1:
                one = KernelContext(op, ctx.inputs, ctx.outputs, (device,), ctx.groups, memo)
            start = time.perf_counter_ns()
            try:
                self._run(one)
            finally:
                memo = one.memo
                self._recorded(op, operands, (device,), False, start)

    def _recorded(
        self,
        op: Operator,
        operands: tuple[Operand, ...],
        devices: tuple[int, ...],
        group: bool,
        start: int,
    ) -> None:
        recorder = self.recorder
        if recorder is not None:  # the kernel cannot stop the profile, but stay safe
            recorder.add_run(op, operands, devices, group, start)

    def _pass_failure(self, op: Operator, device: int) -> bool:
        """If an input of ``op`` failed on ``device``, pass the failure on; True if so."""
        for operand in op.inputs:
            value = self.shards.get(operand, device)
            if value.__class__ is KernelFailure:
                self._store_failure(op, device, value)
                return True
        return False

    # --- group kernels ----------------------------------------------------------------------
    def _run_group(self, ctx: KernelContext) -> None:
        """Run a group kernel in the operator's scope of the groups (``ThreadGroupManager.
        scope``): should it fail here, at any point, the failure is posted on the board and
        then every peer waiting for this party in a collective of the operator is told at
        once; a party told so (``PeerFailedError``) marks its outputs with the posted failure.
        """
        op = ctx.operator
        board = self._services.board
        upstream: KernelFailure | None = None
        own: list[KernelFailure] = []  # this party's failure, once posted

        def on_failure(error: BaseException) -> str:
            """The groups tell the peers after this: post first, so they find the record."""
            if upstream is not None:  # posted before the kernel ran
                return upstream.failure.describe()
            if isinstance(error, PeerFailedError):  # the failing party posted its own
                return error.reason
            if not own:
                own.append(self._post_own(op, ctx, error))
            return own[0].failure.describe()

        try:
            upstream = self._failed_input(ctx)
            if upstream is not None:  # posted before this party sends anything to the others
                board.post(self.party, op.id, upstream.failure)
            kernel = GROUP_KERNELS.get(op.param.kind)
            if kernel is None:
                raise NotImplementedError(f"no kernel for {op.kind.name}")
            groups = ctx.groups
            if groups is None:
                results = kernel(ctx, self._group_inputs(ctx))
            else:  # the stand-in zeros too: should they fail, the peers are told
                with groups.scope(op.id, on_failure):
                    results = kernel(ctx, self._group_inputs(ctx))
            if self._services.validate:
                for device in ctx.devices:
                    check_outputs(ctx, device, results[device])
        except Exception as error:
            if upstream is not None:
                failure = upstream
            else:
                failure = own[0] if own else self._group_failure(op, ctx, error)
            self._store_group_failure(ctx, failure)
            return
        posted = upstream.failure if upstream is not None else board.find(op.id)
        if posted is not None:
            self._store_group_failure(ctx, KernelFailure(posted))
            return
        for device in ctx.devices:
            produced = [o for o in ctx.outputs if device in o.mesh]
            for operand, value in zip(produced, results[device], strict=True):
                self.shards.put(operand.id, device, value)

    def _post_own(self, op: Operator, ctx: KernelContext, error: BaseException) -> KernelFailure:
        """A group kernel failed on this party: note the failure, post it for the others."""
        failure = failure_of(op, ctx.devices[0], error)
        self._note(failure)
        self._services.board.post(self.party, op.id, failure.failure)
        return failure

    def _group_failure(
        self, op: Operator, ctx: KernelContext, error: BaseException
    ) -> KernelFailure:
        """What a failed group kernel's outputs become: another party's failure, posted
        before it told this one; otherwise this party's own."""
        if isinstance(error, PeerFailedError):
            posted = self._services.board.find(op.id)
            if posted is not None:
                return KernelFailure(posted)
        return self._post_own(op, ctx, error)

    def _failed_input(self, ctx: KernelContext) -> KernelFailure | None:
        """The first input shard of this stream's devices that is a failure, if any."""
        if not self.shards.failed:
            return None
        for device in ctx.devices:
            for operand in ctx.inputs:
                if device in operand.mesh:
                    value = self.shards.get(operand.id, device)
                    if value.__class__ is KernelFailure:
                        return value
        return None

    def _group_inputs(self, ctx: KernelContext) -> dict[int, list[torch.Tensor]]:
        """Every device's input shards for a group kernel: a failed input contributes zeros,
        so the exchange still completes for every participant."""
        inputs: dict[int, list[torch.Tensor]] = {}
        for device in ctx.devices:
            shards: list[torch.Tensor] = []
            inputs[device] = shards
            for operand in ctx.inputs:
                if device not in operand.mesh:
                    continue
                value = self.shards.get(operand.id, device)
                if value.__class__ is KernelFailure:
                    value = zero_bytes(operand.local_shape(device), operand.dtype)
                shards.append(value)  # type: ignore[arg-type]
        return inputs

    def _store_group_failure(self, ctx: KernelContext, failure: KernelFailure) -> None:
        in_place = writes_first_input(ctx.operator)
        for device in ctx.devices:
            if in_place and device in ctx.inputs[0].mesh:  # only where the target has a shard
                self.shards.fail_write(ctx.operator.inputs[0], device, failure)
            for operand in ctx.outputs:
                if device in operand.mesh:
                    self.shards.put(operand.id, device, failure)

    # --- failures ---------------------------------------------------------------------------
    def _note(self, failure: KernelFailure) -> None:
        """Remember a failure for the next Sync: the first of each operator (another device's
        adds nothing), up to ``FAILURES_KEPT``."""
        noted, operator = self.failures, failure.failure.operator_id
        if len(noted) < FAILURES_KEPT and all(f.operator_id != operator for f in noted):
            noted.append(failure.failure)

    def _fail(self, op: Operator, device: int, failure: KernelFailure) -> None:
        self._note(failure)
        self._store_failure(op, device, failure)

    def _store_failure(self, op: Operator, device: int, failure: KernelFailure) -> None:
        if writes_first_input(op):
            self.shards.fail_write(op.inputs[0], device, failure)
        for operand in op.outputs:
            self.shards.put(operand, device, failure)

    def _recover(self, item: object, error: Exception) -> None:
        """Something outside a kernel failed: fail the item's outputs and report its promise."""
        if item.__class__ is not KernelContext:
            _LOG.error("stream %s could not handle %r: %r", self.name, item, error)
            return
        ctx: KernelContext = item
        failure = failure_of(ctx.operator, ctx.devices[0] if ctx.devices else -1, error)
        self._note(failure)
        try:
            for device in ctx.devices:
                self._store_failure(ctx.operator, device, failure)
        except Exception:  # the outputs cannot even be marked: dependents fail on lookup
            _LOG.exception("stream %s could not mark the outputs of a failed operator", self.name)
        report = promise_failure(ctx.operator, self.party, failure.failure)
        if report is not None:
            self._report(report)

    def _report(self, report: Report) -> None:
        try:
            self._services.reports.put(report)
        except Exception:  # the channel itself is broken: the runner's liveness catches it
            _LOG.exception("stream %s could not send a report", self.name)


#: Failures of distinct operators a stream keeps between Syncs: sync() raises the first that no
#: future raised already, so a few after it are worth keeping, not every one.
FAILURES_KEPT = 16


def promise_failure(operator: Operator, party: int, failure: Failure) -> Report | None:
    """The report that settles ``operator``'s promise with ``failure`` (None: it has none)."""
    param = operator.param
    if isinstance(param, GetTensorParam):
        return ValueReport(param.promise.name, failure=failure)
    if isinstance(param, SyncParam):
        return PartyReport(param.promise.name, party, failure)
    if isinstance(param, (MemoryParam, ProfileParam)) and param.promise is not None:
        return PartyReport(param.promise.name, party, failure)
    return None


def zero_bytes(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Zeros of ``shape`` and any ``dtype``, as zero bytes: torch cannot fill every dtype
    (bits8 from 32768 elements on), and a stand-in that fails leaves no shard to send.

    Example:
        >>> zero_bytes((2, 3), torch.float16).sum().item(), zero_bytes((), torch.bool).item()
        (0.0, False)
    """
    nbytes = math.prod(shape) * dtype.itemsize
    return torch.zeros(nbytes, dtype=torch.uint8).view(dtype).view(shape)


def check_outputs(ctx: KernelContext, device: int, outputs: Sequence[torch.Tensor]) -> None:
    """DTORCH_VALIDATE_KERNEL_INPUT_OUTPUT: every output shard must match its metadata."""
    expected = [o for o in ctx.outputs if device in o.mesh]
    if len(outputs) != len(expected):
        raise RuntimeError(f"kernel returned {len(outputs)} outputs, expected {len(expected)}")
    for operand, value in zip(expected, outputs, strict=True):
        shape = operand.local_shape(device)
        if tuple(value.shape) != shape or value.dtype != operand.dtype:
            raise RuntimeError(
                f"kernel output {tuple(value.shape)} {value.dtype} does not match the inferred "
                f"local shard {shape} {operand.dtype} of operand {operand.id}"
            )
