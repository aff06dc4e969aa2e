"""KernelStream on its own: failures become markers and reports, and a stream never dies."""

from __future__ import annotations

import torch

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import PromiseKind
from dtorch.ir.params import GetTensorParam, NvtxParam, PromiseHandle, SyncParam
from dtorch.ir.placement import Replicate
from dtorch.ir.report import PartyReport, ValueReport
from dtorch.ir.span import Span
from dtorch.kernels.base import KernelContext
from dtorch.runtime.board import LocalFailureBoard
from dtorch.runtime.handlers import StreamServices
from dtorch.runtime.reports import ReportQueue
from dtorch.runtime.shards import KernelFailure
from dtorch.runtime.stream import KernelStream

MESH = DeviceMesh("cpu", [0, 1])


def _stream() -> tuple[KernelStream, ReportQueue]:
    channel = ReportQueue()
    services = StreamServices(None, LocalFailureBoard(), channel, validate=False)
    return KernelStream("test-stream", services, party=3), channel


def _sync(op_id: int, name: str) -> KernelContext:
    op = Operator(
        op_id,
        f"sync_{op_id}",
        SyncParam(PromiseHandle(PromiseKind.MEMORY, name)),
        (),
        (),
        Span.unknown(),
    )
    return KernelContext(op, (), (), ())


def test_a_kind_without_a_kernel_fails_its_outputs_naming_the_operator() -> None:
    stream, channel = _stream()
    try:
        out = Operand(2, (3,), torch.float32, MESH, (Replicate(),))
        op = Operator(5, "nvtx_5", NvtxParam("range"), (), (out.id,), Span("m.py", 3, 1))
        stream.push([KernelContext(op, (), (out,), (0, 1)), _sync(6, "s")])
        report = channel.get(10.0)
    finally:
        assert stream.stop(timeout=10.0)
    for device in (0, 1):
        failure = stream.shards.get(out.id, device)
        assert isinstance(failure, KernelFailure)
        assert "nvtx_5 (Nvtx) at m.py:3:1" in failure.failure.describe()
        assert "no kernel for Nvtx" in failure.failure.describe()
    assert isinstance(report, PartyReport) and report.party == 3 and report.promise == "s"
    assert report.failure is not None and report.failure.operator_id == 5
    assert stream.failures == []  # reported once, then forgotten


def test_a_failure_outside_any_kernel_reports_the_promise_and_the_stream_goes_on() -> None:
    """A GetTensor of an operand the stream never held (a KeyError outside any kernel): the
    fetch fails with a report naming it, and the next operators still run."""
    stream, channel = _stream()
    try:
        ghost = Operand(9, (2,), torch.float32, DeviceMesh("cpu", [0]), (Replicate(),))
        param = GetTensorParam(PromiseHandle(PromiseKind.MEMORY, "v"))
        fetch = Operator(7, "get_tensor_7", param, (9,), (), Span("m.py", 8, 1))
        stream.push([KernelContext(fetch, (ghost,), (), (0,)), _sync(8, "after")])
        value, after = channel.get(10.0), channel.get(10.0)
    finally:
        assert stream.stop(timeout=10.0)
    assert isinstance(value, ValueReport) and value.promise == "v" and value.failure is not None
    assert "get_tensor_7 (GetTensor) at m.py:8:1" in value.failure.describe()
    assert isinstance(after, PartyReport) and after.promise == "after"
