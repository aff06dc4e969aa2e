"""Run convert_kernel the way the runtime does: one call per caller (thread), each for all the
devices it holds, and check every device's output against torch on the full tensor (the
sharding oracle: tests/sharding_oracle.py)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from dtorch.comm.group import CommTopology, ThreadGroupManager
from dtorch.comm.namespace import CommNamespace
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.params import ConvertParam
from dtorch.ir.placement import Placement, normalize_placements
from dtorch.ir.span import Span
from dtorch.kernels.base import KernelContext
from dtorch.kernels.convert import convert_kernel
from dtorch.options import GlobalOption
from tests.sharding_oracle import check_layout, distribute
from tests.thread_runner import on_threads

Outputs = dict[int, list[torch.Tensor]]


def convert_context(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    src: tuple[DeviceMesh, Sequence[Placement]],
    dst: tuple[DeviceMesh, Sequence[Placement]],
) -> tuple[Operator, Operand, Operand]:
    """The Convert operator and its operands, as the client records them."""
    src_p = normalize_placements(src[1], src[0].ndim, len(shape))
    dst_p = normalize_placements(dst[1], dst[0].ndim, len(shape))
    a = Operand(1, shape, dtype, src[0], src_p)
    b = Operand(2, shape, dtype, dst[0], dst_p)
    op = Operator(3, "redistribute_3", ConvertParam(dst[0], dst_p), (1,), (2,), Span.unknown())
    return op, a, b


def stripes(devices: Sequence[int], callers: int) -> list[list[int]]:
    """Devices dealt to callers by position, as the thread runner does."""
    return [list(devices[i::callers]) for i in range(callers) if devices[i::callers]]


def run_convert(
    full: torch.Tensor,
    src: tuple[DeviceMesh, Sequence[Placement]],
    dst: tuple[DeviceMesh, Sequence[Placement]],
    callers: int,
    gen: torch.Generator,
) -> Outputs:
    """Shard ``full`` per ``src``, run the kernel on ``callers`` threads, return all outputs."""
    op, a, b = convert_context(tuple(full.shape), full.dtype, src, dst)
    locals_ = distribute(full, a.mesh, a.placements, gen)
    devices = sorted(set(a.mesh.device_ids) | set(b.mesh.device_ids))
    layout = stripes(devices, callers)
    with (
        GlobalOption.override(comm_timeout_second=20.0),
        ThreadGroupManager(
            CommTopology.threads(layout), namespace=CommNamespace.create()
        ) as manager,
    ):

        def caller(held: list[int]) -> Outputs:
            ctx = KernelContext(op, (a,), (b,), tuple(held), manager)
            inputs = {d: [locals_[d]] if d in locals_ else [] for d in held}
            return convert_kernel(ctx, inputs)

        per_caller = on_threads(layout, caller) if len(layout) > 1 else [caller(layout[0])]
    merged: Outputs = {}
    for outputs in per_caller:
        merged.update(outputs)
    assert sorted(merged) == devices
    return merged


def convert_and_check(
    shape: tuple[int, ...],
    src: tuple[DeviceMesh, Sequence[Placement]],
    dst: tuple[DeviceMesh, Sequence[Placement]],
    *,
    callers: int,
    seed: int = 0,
    dtype: torch.dtype = torch.int64,
) -> Outputs:
    """Run the Convert and compare every destination device with torch on the full tensor."""
    gen = torch.Generator().manual_seed(seed)
    full = torch.randint(-100, 100, shape, generator=gen).to(dtype)
    out = run_convert(full, src, dst, callers, gen)
    mesh, placements = dst[0], normalize_placements(dst[1], dst[0].ndim, len(shape))
    check_layout(full, mesh, placements, {d: v[0] for d, v in out.items() if v})
    assert all(not v for d, v in out.items() if d not in mesh)
    return out
