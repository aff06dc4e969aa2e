"""The Create kernel: each device builds its own shard of a new tensor.

Constant kinds build the shard directly. Kinds whose values depend on the position (ARANGE,
the random kinds, FROM_TENSOR) build the full tensor once per caller (``ctx.memo``) and slice
it, so every device holds exactly the values torch would produce for the whole tensor; along a
marked dim (``Shard(d, sub_split_coordinates=...)``, ``dtorch.ir.subsplit``) a device's slice
is its piece of every segment, concatenated. On a Partial mesh dimension only coordinate 0
holds the value; the others hold zeros, so the sum is the value.
"""

from __future__ import annotations

import torch

from dtorch.ir.operator import Operand
from dtorch.ir.opkind import CreateKind, OpKind
from dtorch.ir.params import CreateParam
from dtorch.ir.random_draw import draw
from dtorch.ir.sharding import is_partial_owner, local_pieces
from dtorch.ir.subsplit import is_marked
from dtorch.kernels.base import KernelContext
from dtorch.kernels.device import torch_device_of
from dtorch.kernels.table import register_local_kernel


def _full_value(param: CreateParam) -> torch.Tensor:
    """The whole tensor, for the kinds whose values depend on the position."""
    if param.create == CreateKind.FROM_TENSOR:
        assert param.value is not None
        return param.value
    if param.create == CreateKind.ARANGE:
        return torch.arange(*param.args, dtype=param.dtype)
    assert param.generator is not None
    generator = torch.Generator().set_state(param.generator.get_state())  # never reuse: threads
    strides = tuple(param.strides)
    return draw(param.create, tuple(param.shape), param.dtype, param.args, generator, strides)


def _constant(param: CreateParam, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    if param.create == CreateKind.ZEROS:
        return torch.zeros(shape, dtype=param.dtype, device=device)
    if param.create == CreateKind.ONES:
        return torch.ones(shape, dtype=param.dtype, device=device)
    if param.create == CreateKind.EMPTY:
        return torch.empty(shape, dtype=param.dtype, device=device)
    return torch.full(shape, param.args[0], dtype=param.dtype, device=device)


_CONSTANT_KINDS = frozenset({CreateKind.ZEROS, CreateKind.ONES, CreateKind.EMPTY, CreateKind.FULL})


def create_kernel(
    ctx: KernelContext, device: int, inputs: list[torch.Tensor]
) -> list[torch.Tensor]:
    """One device's shard of a Create operator's output."""
    param = ctx.param
    assert isinstance(param, CreateParam)
    out = ctx.outputs[0]
    shape, owner = _local(out, device)
    target = torch_device_of(out.mesh.device_kind, device)
    if not owner:
        return [torch.zeros(shape, dtype=param.dtype, device=target)]
    if param.create in _CONSTANT_KINDS:
        return [_constant(param, shape, target)]
    memo = ctx.memo
    if memo is None:
        memo = ctx.memo = {}
    full = memo.get("full")
    if full is None:
        full = memo["full"] = _full_value(param)
    # a private copy: kernels may later change shards in place, the param stays as recorded;
    # contiguous with torch's strides for the local shape (a copy of the slice would keep the
    # full tensor's stride for a dim the device holds one row of: see kernels/local/views.py)
    shard = torch.empty(shape, dtype=param.dtype, device=target)
    return [shard.copy_(_local_part(full, out, device))]


def _local(out: Operand, device: int) -> tuple[tuple[int, ...], bool]:
    """``device``'s local shape, and whether it holds the value on its Partial mesh dims."""
    if not is_marked(out.placements):  # the cached box: every creation comes here
        spec = out.shard(device)
        return spec.shape, spec.partial_owner
    owner = is_partial_owner(out.placements, out.mesh.coordinate_of(device))
    return out.local_shape(device), owner  # the pieces of a marked dim are not one box


def _local_part(full: torch.Tensor, out: Operand, device: int) -> torch.Tensor:
    """``device``'s part of the whole tensor ``full``: its box, or along a marked dim its
    pieces of the segments concatenated in order."""
    if not is_marked(out.placements):
        return full[out.shard(device).slices()]
    coordinate = out.mesh.coordinate_of(device)
    part = full
    for dim, runs in enumerate(local_pieces(out.shape, out.mesh.shape, out.placements, coordinate)):
        pieces = [part.narrow(dim, start, n) for start, n in runs]
        part = pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim)
    return part


register_local_kernel(OpKind.Create, create_kernel)
