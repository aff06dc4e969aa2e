"""KernelStream: one thread that runs, in order, the kernels of the devices it owns.

The runner pushes lists of items; the stream drains them without waking anyone. A kernel that
raises turns its outputs into ``KernelFailure`` markers naming the operator and the user's
line; kernels whose inputs are failures pass the marker on instead of running, so every value
that depends on a failure fails, and everything else keeps working. The next Sync reports the
first failure since the previous one.

Items: a ``KernelContext`` per operator (the operator, its operand metadata and the devices
this stream runs it for: built once by the runner, so the stream allocates nothing per
operator to dispatch it), ``(FREE, operand ids)`` and ``(STOP,)``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import torch

from dtorch.errors import KernelError
from dtorch.ir.operator import Operator
from dtorch.ir.opkind import OpKind
from dtorch.kernels.base import KernelContext
from dtorch.kernels.promises import KernelFailure
from dtorch.kernels.table import GROUP_KERNELS, LOCAL_KERNELS
from dtorch.runtime.handlers import STREAM_HANDLERS, StreamServices
from dtorch.runtime.shards import ShardTable
from dtorch.runtime.workqueue import WorkQueue

FREE, STOP = 1, 2

#: Kinds that change their first input in place and have no outputs: a failure poisons it.
IN_PLACE_KINDS = frozenset({OpKind.Copy, OpKind.SetItem})


def kernel_error(operator: Operator, device: int, error: BaseException) -> KernelError:
    """The error users see: operator, user line, device, and the original error."""
    failure = KernelError(
        f"{operator.describe()} failed on device {device}: {type(error).__name__}: {error}"
    )
    failure.__cause__ = error
    return failure


class KernelStream:
    """A thread running its devices' kernels in order; ``push`` never blocks."""

    def __init__(self, name: str, services: StreamServices) -> None:
        self.name = name
        self.shards = ShardTable()
        self.failures: list[KernelError] = []
        self._services = services
        self._queue = WorkQueue()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    @property
    def services(self) -> StreamServices:
        return self._services

    def push(self, items: Sequence[object]) -> None:
        self._queue.extend(items)

    def stop(self, timeout: float) -> bool:
        """Ask the thread to finish what it has and exit; True if it did within ``timeout``."""
        self.push([(STOP,)])
        self._queue.wake()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # --- the loop ---------------------------------------------------------------------------
    def _main(self) -> None:
        queue = self._queue
        while True:
            try:
                item = queue.popleft()
            except IndexError:
                queue.sleep(1.0)
                continue
            if item.__class__ is KernelContext:
                self._run(item)
            elif item[0] == FREE:
                self.shards.free(item[1])
            else:
                return

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
                self._fail(op, device, error)
                continue
            if len(outputs) == 1 and len(op.outputs) == 1:
                put(op.outputs[0], device, outputs[0])
            else:
                for operand, value in zip(op.outputs, outputs, strict=True):
                    put(operand, device, value)

    def _pass_failure(self, op: Operator, device: int) -> bool:
        """If an input of ``op`` failed on ``device``, pass the failure on; True if so."""
        for operand in op.inputs:
            value = self.shards.get(operand, device)
            if value.__class__ is KernelFailure:
                self._store_failure(op, device, value)
                return True
        return False

    def _run_group(self, ctx: KernelContext) -> None:
        op = ctx.operator
        inputs = {d: self._group_inputs(ctx, d) for d in ctx.devices}
        failed = self._services.failed_ops
        try:
            kernel = GROUP_KERNELS.get(op.param.kind)
            if kernel is None:
                raise NotImplementedError(f"no kernel for {op.kind.name}")
            results = kernel(ctx, inputs)
            if self._services.validate:
                for device in ctx.devices:
                    check_outputs(ctx, device, results[device])
        except Exception as error:
            failure = KernelFailure(kernel_error(op, ctx.devices[0], error))
            failed.setdefault(op.id, failure)
            self.failures.append(failure.error)
            results = {}
        self._store_group_results(ctx, results, failed.get(op.id))

    def _group_inputs(self, ctx: KernelContext, device: int) -> list[torch.Tensor]:
        """A device's input shards for a group kernel; a failed input contributes zeros so
        that the collective still completes for every participant (the outputs fail after)."""
        shards: list[torch.Tensor] = []
        for operand in ctx.inputs:
            if device not in operand.mesh:
                continue
            value = self.shards.get(operand.id, device)
            if isinstance(value, KernelFailure):
                self._services.failed_ops.setdefault(ctx.operator.id, value)
                value = torch.zeros(operand.local_shape(device), dtype=operand.dtype)
            shards.append(value)
        return shards

    def _store_group_results(
        self,
        ctx: KernelContext,
        results: dict[int, list[torch.Tensor]],
        failure: KernelFailure | None,
    ) -> None:
        for device in ctx.devices:
            produced = [o for o in ctx.outputs if device in o.mesh]
            if failure is not None:
                in_place = ctx.operator.kind in IN_PLACE_KINDS and device in ctx.inputs[0].mesh
                if not produced and in_place:  # only where the target has a shard
                    self.shards.put(ctx.operator.inputs[0], device, failure)
                for operand in produced:
                    self.shards.put(operand.id, device, failure)
                continue
            for operand, value in zip(produced, results[device], strict=True):
                self.shards.put(operand.id, device, value)

    def _fail(self, op: Operator, device: int, error: BaseException) -> None:
        failure = KernelFailure(kernel_error(op, device, error))
        self.failures.append(failure.error)
        self._store_failure(op, device, failure)

    def _store_failure(self, op: Operator, device: int, failure: KernelFailure) -> None:
        if not op.outputs and op.param.kind in IN_PLACE_KINDS:
            self.shards.put(op.inputs[0], device, failure)
        for operand in op.outputs:
            self.shards.put(operand, device, failure)


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
