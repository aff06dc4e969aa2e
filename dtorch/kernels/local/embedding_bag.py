"""Local kernel of EmbeddingBag: torch's ``embedding_bag`` on the device's bags and rows.

With whole rows (the weight Replicate or split on its embedding dim) a device runs torch's own
``embedding_bag`` on its bags, so its values are torch's. With the vocab split (the rule made
the output Partial, sum and mean only) it reduces only the entries whose rows it holds: those
entries are kept (their ids made local, their per-sample weights with them), the bags'
offsets recounted over what is kept, and torch's ``sum`` run on them; a mean divides by each
whole bag's count of non-padding entries, which every device computes alike from the
Replicate ids. The padding entries are left out there as torch leaves them out. Ids outside
the vocabulary and bad offsets fail as in torch.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.params import EmbeddingBagParam
    >>> from dtorch.ir.placement import Replicate
    >>> from dtorch.ir.span import Span
    >>> ids = Operand(1, (1, 2), torch.int64, DeviceMesh("cpu"), (Replicate(),))
    >>> w = Operand(2, (3, 1), torch.float32, DeviceMesh("cpu"), (Replicate(),))
    >>> out = Operand(5, (1, 1), torch.float32, DeviceMesh("cpu"), (Replicate(),))
    >>> op = Operator(4, "bag_4", EmbeddingBagParam("sum"), (1, 2), (5,), Span.unknown())
    >>> ctx = KernelContext(op, (ids, w), (out,), (0,))
    >>> embedding_bag_kernel(ctx, 0, [torch.tensor([[0, 2]]), torch.tensor([[1.0], [2], [4]])])
    [tensor([[5.]])]
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dtorch.ir.opkind import OpKind
from dtorch.ir.params import EmbeddingBagParam
from dtorch.ir.rules.embedding_bag import check_offsets
from dtorch.kernels.base import KernelContext, LocalKernel, Shards


def embedding_bag_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """The device's bags of its rows; see the module doc."""
    param = ctx.param
    assert isinstance(param, EmbeddingBagParam)
    ids, weight, offsets, psw = _parts(param, inputs)
    if offsets is not None:
        check_offsets(offsets, ids.numel(), param.include_last_offset)
    out = ctx.outputs[0]
    if 0 in out.local_shape(device):  # no bags (torch's kernel crashes the process on none)
        return [torch.zeros(out.local_shape(device), dtype=out.dtype, device=weight.device)]
    rows = ctx.inputs[1].shard(device).slices()[0]
    vocab = ctx.inputs[1].shape[0]
    if rows.start == 0 and rows.stop == vocab:
        return [_torch_bag(param, ids, weight, offsets, psw, param.padding_idx)]
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        raise IndexError(f"embedding_bag: an id is out of range for {vocab} embeddings")
    last = param.include_last_offset and param.offsets  # torch ignores it for 2-D ids
    flat, offsets, psw = _flat(ids, offsets, psw)
    keep = (flat >= rows.start) & (flat < rows.stop)
    if param.padding_idx is not None:
        keep &= flat != param.padding_idx
    local = _kept_offsets(offsets, keep)
    summed = _torch_bag(
        EmbeddingBagParam("sum", None, last, True, psw is not None),
        flat[keep] - rows.start, weight, local, None if psw is None else psw[keep], None,
    )  # fmt: skip
    if param.mode == "sum":
        return [summed]
    counts = _bag_counts(flat, offsets, param.padding_idx, last)
    return [summed / counts.clamp(min=1).unsqueeze(1).to(summed.dtype)]


def _parts(
    param: EmbeddingBagParam, inputs: Shards
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    # (ids, weight, offsets or None, per-sample weights or None), as the flags say
    rest = list(inputs[2:])
    offsets = rest.pop(0) if param.offsets else None
    psw = rest.pop(0) if param.weighted else None
    return inputs[0], inputs[1], offsets, psw


def _torch_bag(
    param: EmbeddingBagParam,
    ids: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None,
    psw: torch.Tensor | None,
    padding_idx: int | None,
) -> torch.Tensor:
    """torch's ``embedding_bag`` (an empty shard of bags, which MKL-free torch takes, too)."""
    out = F.embedding_bag(
        ids, weight, offsets, mode=param.mode, per_sample_weights=psw,
        include_last_offset=param.include_last_offset, padding_idx=padding_idx,
    )  # fmt: skip
    return out.contiguous()


def _flat(
    ids: torch.Tensor, offsets: torch.Tensor | None, psw: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """1-D ids with offsets: 2-D ids (bags of equal length) as torch flattens them."""
    if offsets is not None:
        return ids, offsets, psw
    bags, length = ids.shape
    starts = torch.arange(0, bags * length, length, dtype=ids.dtype, device=ids.device)
    return ids.reshape(-1), starts, None if psw is None else psw.reshape(-1)


def _kept_offsets(offsets: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Each bag's start among the kept entries: the kept entries before its own start."""
    before = torch.cat([keep.new_zeros(1, dtype=torch.int64), keep.cumsum(0)])
    return before[offsets].to(offsets.dtype)


def _bag_counts(
    flat: torch.Tensor, offsets: torch.Tensor, padding_idx: int | None, last: bool
) -> torch.Tensor:
    """Each bag's count of non-padding entries (the divisor of its mean): the entries between
    its offset and the next one's (the last bag runs to the end, or to the last offset)."""
    counted = torch.ones_like(flat, dtype=torch.int64)
    if padding_idx is not None:
        counted = (flat != padding_idx).to(torch.int64)
    before = torch.cat([counted.new_zeros(1), counted.cumsum(0)])
    ends = torch.cat([offsets[1:], offsets.new_full((1,), flat.numel())])
    if last:
        offsets, ends = offsets[:-1], offsets[1:]
    return before[ends] - before[offsets]


KERNELS: dict[OpKind, LocalKernel] = {OpKind.EmbeddingBag: embedding_bag_kernel}
