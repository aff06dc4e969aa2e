"""KernelStream on its own: an operator of a kind without any kernel fails its outputs."""

from __future__ import annotations

import torch

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.params import NvtxParam
from dtorch.ir.placement import Replicate
from dtorch.ir.span import Span
from dtorch.kernels.base import KernelContext
from dtorch.kernels.promises import KernelFailure, PromiseTable
from dtorch.runtime.handlers import StreamServices
from dtorch.runtime.stream import KernelStream


def test_a_kind_without_a_kernel_fails_its_outputs_naming_the_operator() -> None:
    services = StreamServices(PromiseTable(), None, {}, validate=False)
    stream = KernelStream("test-stream", services)
    try:
        out = Operand(2, (3,), torch.float32, DeviceMesh("cpu", [0, 1]), (Replicate(),))
        op = Operator(5, "nvtx_5", NvtxParam("range"), (), (out.id,), Span("m.py", 3, 1))
        stream.push([KernelContext(op, (), (out,), (0, 1))])
    finally:
        assert stream.stop(timeout=10.0)
    for device in (0, 1):
        failure = stream.shards.get(out.id, device)
        assert isinstance(failure, KernelFailure)
        assert "nvtx_5 (Nvtx) at m.py:3:1" in str(failure.error)
        assert "no kernel for Nvtx" in str(failure.error)
    assert len(stream.failures) == 1
    assert services.failed_ops[op.id] is stream.shards.get(out.id, 0)
