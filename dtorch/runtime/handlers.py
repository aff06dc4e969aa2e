"""Operators a stream handles itself, not through a kernel: they report to the controller.

GetTensor reports the (single-device) input's value, or the failure standing in for it; Sync
reports, once per stream, the failures since the previous Sync; Memory empties the
device cache or reports the bytes held per device; Profile starts a stream's kernel event
recording, or stops it and reports the events. Each sends one report record on the
runner's report channel: no promise is ever touched here (the controller settles them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import MemoryKind, OpKind
from dtorch.ir.params import GetTensorParam, MemoryParam, ProfileParam, SyncParam
from dtorch.ir.report import Failure, PartyReport, ValueReport
from dtorch.runtime.board import FailureBoard
from dtorch.runtime.profiling import EventRecorder
from dtorch.runtime.reports import ReportSink
from dtorch.runtime.shards import KernelFailure, ShardTable


@dataclass(slots=True)
class StreamServices:
    """What every stream of one runner (or of one worker) shares."""

    groups: Any  # the ThreadGroupManager of the streams' callers (None: no group kernels)
    board: FailureBoard  # failed group-kernel inputs, seen by every caller of the group
    reports: ReportSink  # the report channel to the controller
    validate: bool  # check kernel outputs against the inferred local shapes


class StreamState(Protocol):
    """The parts of a KernelStream the handlers use."""

    shards: ShardTable
    party: int
    failures: list[Failure]  # since the previous Sync, one per operator
    recorder: EventRecorder | None  # kernel events, while a profile is open

    @property
    def services(self) -> StreamServices: ...


def get_tensor(
    stream: StreamState, op: Operator, ins: tuple[Operand, ...], devices: tuple[int, ...]
) -> None:
    """Report the (single-device) input's value, or the failure that stands in for it."""
    param = op.param
    assert isinstance(param, GetTensorParam)
    (device,) = devices  # to_torch redistributes onto one device first
    value = stream.shards.get(ins[0].id, device)
    if value.__class__ is KernelFailure:
        report = ValueReport(param.promise.name, failure=value.failure)
    else:  # the channel copies the shard before put returns (see dtorch.runtime.reports)
        report = ValueReport(param.promise.name, value)  # type: ignore[arg-type]
    stream.services.reports.put(report)


def sync(
    stream: StreamState, op: Operator, ins: tuple[Operand, ...], devices: tuple[int, ...]
) -> None:
    """Report that this stream got here, with its failures since the last Sync."""
    param = op.param
    assert isinstance(param, SyncParam)
    failures, stream.failures = stream.failures, []
    first, later = (failures[0], tuple(failures[1:])) if failures else (None, ())
    stream.services.reports.put(PartyReport(param.promise.name, stream.party, first, later=later))


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
    rows: list[int] = []
    for device in stream.shards.devices():
        allocated, peak = stream.shards.stats(device)
        rows += (device, allocated, peak)
        if param.reset_peak:
            stream.shards.reset_peak(device)
    report = PartyReport(param.promise.name, stream.party, rows=tuple(rows))
    stream.services.reports.put(report)


def profile(
    stream: StreamState, op: Operator, ins: tuple[Operand, ...], devices: tuple[int, ...]
) -> None:
    """Start recording kernel events, or stop and report them (a stop without a start
    reports none: the stream was handed to this graph after the profile began)."""
    param = op.param
    assert isinstance(param, ProfileParam)
    if param.start:
        stream.recorder = EventRecorder()
        return
    recorder, stream.recorder = stream.recorder, None
    if param.promise is None:
        return
    recorder = recorder or EventRecorder(limit=0)
    stream.services.reports.put(recorder.report(param.promise.name, stream.party))


StreamHandler = Callable[[Any, Operator, tuple[Operand, ...], tuple[int, ...]], None]

#: Kinds a stream handles itself. Sync, Memory and Profile go to every stream; GetTensor to the
#: stream that holds the input's device.
STREAM_HANDLERS: dict[OpKind, StreamHandler] = {
    OpKind.GetTensor: get_tensor,
    OpKind.Sync: sync,
    OpKind.Memory: memory,
    OpKind.Profile: profile,
}

#: Kinds the runner sends to every stream, whatever their operands.
EVERY_STREAM_KINDS = frozenset({OpKind.Sync, OpKind.Memory, OpKind.Profile, OpKind.SubGraph})
