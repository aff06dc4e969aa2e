"""Local kernel of Fft: torch.fft's transform on the device's own block.

The rule keeps every transformed dim whole on each device and lets only the other dims be
sharded, so each device transforms complete rows: its results are exactly the full tensor's
results for those rows (and a Partial input's parts transform to the parts of the result).
An empty block (a device's share of an uneven shard, or an empty dim that ``n`` pads) gives
zeros of the result's shape, torch's values: torch's CPU transform of a tensor with an empty
batch dim fails inside MKL.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.opkind import FftKind
    >>> from dtorch.ir.params import FftParam
    >>> from dtorch.ir.span import Span
    >>> x = Operand(1, (2,), torch.float32, DeviceMesh("cpu"), ())
    >>> op = Operator(4, "fft_4", FftParam(FftKind.FFT), (1,), (5,), Span.unknown())
    >>> fft_kernel(KernelContext(op, (x,), (), (0,)), 0, [torch.tensor([1.0, 2.0])])
    [tensor([ 3.+0.j, -1.+0.j])]
"""

from __future__ import annotations

import torch

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import FftParam
from dtorch.ir.rules.fft import run_fft
from dtorch.kernels.base import KernelContext, LocalKernel, Shards


def fft_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """torch's transform of the param on the local block (transformed dims whole)."""
    param = ctx.param
    assert isinstance(param, FftParam)
    block = inputs[0]
    if block.numel() == 0:  # torch's MKL path fails on an empty block (an uneven shard's)
        meta = run_fft(param, block.to("meta"))  # zeros: what a padded empty dim transforms to
        return [torch.zeros(meta.shape, dtype=meta.dtype, device=block.device)]
    return [run_fft(param, block).contiguous()]


KERNELS: dict[OpKind, LocalKernel] = {OpKind.Fft: fft_kernel}
