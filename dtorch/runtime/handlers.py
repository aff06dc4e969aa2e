"""Operators a stream handles itself, not through a kernel: they settle client promises.

GetTensor hands each device's shard to the collector registered under the promise's name;
Sync reports, once per stream, the first failure since the previous Sync; Memory empties the
device cache or reports bytes held per device. The collector that completes removes itself
from the promise table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from dtorch.errors import KernelError
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import MemoryKind, OpKind
from dtorch.ir.params import GetTensorParam, MemoryParam, SyncParam
from dtorch.kernels.promises import KernelFailure, PromiseTable
from dtorch.runtime.shards import ShardTable


@dataclass(slots=True)
class StreamServices:
    """What every stream of one runner shares."""

    promises: PromiseTable
    groups: Any  # the runner's ThreadGroupManager (None until a group kernel needs one)
    failed_ops: dict[int, KernelFailure]  # operator id -> failure, shared across streams
    validate: bool  # check kernel outputs against the inferred local shapes


class StreamState(Protocol):
    """The parts of a KernelStream the handlers use."""

    shards: ShardTable
    failures: list[KernelError]

    @property
    def services(self) -> StreamServices: ...


def _deliver(promises: PromiseTable, name: str, done: bool) -> None:
    if done:
        promises.pop(name)


def get_tensor(
    stream: StreamState, op: Operator, ins: tuple[Operand, ...], devices: tuple[int, ...]
) -> None:
    """Settle the GetTensor's promise with a CPU copy of the (single-device) input's value, or
    with the failure that stands in for it."""
    param = op.param
    assert isinstance(param, GetTensorParam)
    promise: Any = stream.services.promises.pop(param.promise.name)
    (device,) = devices  # to_torch redistributes onto one device first
    value = stream.shards.get(ins[0].id, device)
    if isinstance(value, KernelFailure):
        promise.set_error(value.error)
    else:  # a copy: the caller may change the tensor it gets, the shard must not change
        promise.set_value(value.to("cpu", copy=True))


def sync(
    stream: StreamState, op: Operator, ins: tuple[Operand, ...], devices: tuple[int, ...]
) -> None:
    """Report that this stream got here, with its first failure since the last Sync."""
    param = op.param
    assert isinstance(param, SyncParam)
    failure = stream.failures[0] if stream.failures else None
    stream.failures.clear()
    promises = stream.services.promises
    done = promises.get(param.promise.name).add(None, failure)  # type: ignore[attr-defined]
    _deliver(promises, param.promise.name, done)


def memory(
    stream: StreamState, op: Operator, ins: tuple[Operand, ...], devices: tuple[int, ...]
) -> None:
    """Empty the device cache, or report (device, bytes held, peak bytes) per device."""
    param = op.param
    assert isinstance(param, MemoryParam)
    if param.memory == MemoryKind.EMPTY_CACHE and torch.cuda.is_available():
        torch.cuda.empty_cache()
    if param.promise is None:
        return
    rows = []
    for device in stream.shards.devices():
        allocated, peak = stream.shards.stats(device)
        rows.append((device, allocated, peak))
        if param.reset_peak:
            stream.shards.reset_peak(device)
    promises = stream.services.promises
    done = promises.get(param.promise.name).add(rows, None)  # type: ignore[attr-defined]
    _deliver(promises, param.promise.name, done)


StreamHandler = Callable[[Any, Operator, tuple[Operand, ...], tuple[int, ...]], None]

#: Kinds a stream handles itself. Sync and Memory go to every stream; GetTensor to the
#: streams that hold the input's devices.
STREAM_HANDLERS: dict[OpKind, StreamHandler] = {
    OpKind.GetTensor: get_tensor,
    OpKind.Sync: sync,
    OpKind.Memory: memory,
}

#: Kinds the runner sends to every stream, whatever their operands.
EVERY_STREAM_KINDS = frozenset({OpKind.Sync, OpKind.Memory})
