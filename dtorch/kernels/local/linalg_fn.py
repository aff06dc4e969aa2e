"""Local kernel of Linalg: torch.linalg's matrix function on the device's own matrices.

The rule keeps every matrix (the last two dims) whole on each device and lets only the batch
dims be sharded, so each device runs torch's function on complete matrices: its results are
exactly the full tensor's results for those matrices.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.opkind import LinalgKind
    >>> from dtorch.ir.params import LinalgParam
    >>> from dtorch.ir.span import Span
    >>> x = Operand(1, (2, 2), torch.float32, DeviceMesh("cpu"), ())
    >>> op = Operator(4, "det_4", LinalgParam(LinalgKind.DET), (1,), (5,), Span.unknown())
    >>> linalg_kernel(KernelContext(op, (x,), (), (0,)), 0, [torch.tensor([[2.0, 1], [1, 3]])])
    [tensor(5.)]
"""

from __future__ import annotations

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import LinalgParam
from dtorch.ir.rules.linalg_fn import run_linalg
from dtorch.kernels.base import KernelContext, LocalKernel, Shards


def linalg_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """torch's matrix function of the param on the local (whole-matrix) blocks."""
    param = ctx.param
    assert isinstance(param, LinalgParam)
    return [out.contiguous() for out in run_linalg(param, inputs)]


KERNELS: dict[OpKind, LocalKernel] = {OpKind.Linalg: linalg_kernel}
