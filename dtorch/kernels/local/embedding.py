"""Local kernels of Embedding and Dropout.

Embedding: where the weight is split on its vocab dim (the rule made the output Partial),
each device looks up the ids that fall in its own row range and writes zeros for the others,
so the sum over devices is the full lookup; ids outside the vocabulary fail as in torch.

Dropout: the mask is torch's for the FULL tensor (``dropout_mask``, drawn once per caller
from the param's generator snapshot and kept in ``ctx.memo``), sliced to the device's shard,
so the result is bit-identical to torch's however the input is sharded.

Example:
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> x = torch.ones(8)
    >>> _ = torch.manual_seed(0)  # F.dropout draws from the default generator
    >>> torch.equal(x * dropout_mask(x.shape, x.dtype, 0.5, g), torch.nn.functional.dropout(x))
    True
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import DropoutParam, EmbeddingParam
from dtorch.kernels.base import KernelContext, LocalKernel, Shards
from dtorch.kernels.device import torch_device_of
from dtorch.kernels.local.gather import neutral_zero


def embedding_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """Rows of the local weight at the local ids (only the local vocab range when split)."""
    param = ctx.param
    assert isinstance(param, EmbeddingParam)
    ids, weight = inputs
    rows = ctx.inputs[1].shard(device).slices()[0]
    vocab = ctx.inputs[1].shape[0]
    if rows.start == 0 and rows.stop == vocab:
        return [F.embedding(ids, weight)]
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        raise IndexError(f"embedding: an id is out of range for {vocab} embeddings")
    local = ids - rows.start
    outside = (local < 0) | (local >= weight.shape[0])
    out = F.embedding(local.masked_fill(outside, 0), weight) if weight.shape[0] else None
    zero = neutral_zero(weight.dtype)  # keeps a looked-up -0.0 in the sum
    if out is None:  # an empty shard of the vocab: every id is someone else's
        return [weight.new_full((*ids.shape, weight.shape[1]), zero)]
    return [out.masked_fill_(outside.unsqueeze(-1), zero)]


def dropout_mask(
    shape: torch.Size | tuple[int, ...], dtype: torch.dtype, p: float, generator: torch.Generator
) -> torch.Tensor:
    """torch's CPU dropout noise for a contiguous tensor of ``shape``: bernoulli(1 - p) scaled
    by 1 / (1 - p) (zeros for p = 1), drawn from ``generator`` as ``F.dropout`` draws it."""
    if p == 1.0:
        return torch.zeros(shape, dtype=dtype)
    noise = torch.empty(shape, dtype=dtype).bernoulli_(1 - p, generator=generator)
    return noise.div_(1 - p)


def dropout_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The local shard times its slice of the full tensor's mask."""
    param = ctx.param
    assert isinstance(param, DropoutParam)
    x = inputs[0]
    if not param.training or param.p == 0.0:
        return [x.clone()]
    memo = ctx.memo
    if memo is None:
        memo = ctx.memo = {}
    mask = memo.get("mask")
    if mask is None:
        assert param.generator is not None
        generator = torch.Generator().set_state(param.generator.get_state())  # never reused
        mask = memo["mask"] = dropout_mask(ctx.inputs[0].shape, x.dtype, param.p, generator)
    source = ctx.inputs[0]
    local = mask[source.shard(device).slices()].to(torch_device_of(source.mesh.device_kind, device))
    return [x * local]


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.Embedding: embedding_kernel,
    OpKind.Dropout: dropout_kernel,
}
