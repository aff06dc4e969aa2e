"""Local kernel of GridSample: torch's ``grid_sample`` of the device's blocks.

The rule keeps the input's spatial dims whole on every device and shards only the batch, the
input's channels or the grid's output points, so each device samples its own output elements
from the whole image, as torch samples them: its values are torch's. (torch's bicubic kernel
computes rows of output points in vectors, so a block of a row of points may differ from
torch's full result in the last bit.) A device whose block is empty makes an empty output.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import GridSampleParam
    >>> from dtorch.ir.placement import Replicate
    >>> from dtorch.ir.span import Span
    >>> mesh, r = DeviceMesh("cpu"), (Replicate(),)
    >>> x = Operand(1, (1, 1, 2, 2), torch.float32, mesh, r)
    >>> g = Operand(2, (1, 1, 1, 2), torch.float32, mesh, r)
    >>> out = Operand(3, (1, 1, 1, 1), torch.float32, mesh, r)
    >>> op = Operator(4, "grid_sample_4", GridSampleParam(), (1, 2), (3,), Span.unknown())
    >>> image, centre = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]]), torch.zeros(1, 1, 1, 2)
    >>> grid_sample_kernel(KernelContext(op, (x, g), (out,), (0,)), 0, [image, centre])
    [tensor([[[[2.5000]]]])]
"""

from __future__ import annotations

import torch

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import GridSampleParam
from dtorch.ir.rules.grid_sample import run_grid_sample
from dtorch.kernels.base import KernelContext, LocalKernel, Shards


def grid_sample_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """torch's ``grid_sample`` of the local input and grid blocks."""
    param = ctx.param
    assert isinstance(param, GridSampleParam)
    x, grid = inputs
    out = ctx.outputs[0]
    if 0 in out.local_shape(device):  # torch refuses some empty batches: nothing to sample
        return [torch.zeros(out.local_shape(device), dtype=out.dtype, device=x.device)]
    return [run_grid_sample(param, x, grid).contiguous()]


KERNELS: dict[OpKind, LocalKernel] = {OpKind.GridSample: grid_sample_kernel}
