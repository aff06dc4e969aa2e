"""The Sdpa group kernel: local attention per device, or ring attention along a mesh dim.

Without a ring dim each device runs ``torch.nn.functional.scaled_dot_product_attention`` on
its shards; a causal q whose sequence is sharded gets the explicit mask of its global query
offset (read from q's layout), since torch's ``is_causal`` assumes query 0 is position 0.

Ring attention (``SdpaParam.ring_dim``): every device of a ring line holds one block of the
query, key and value sequence. The key/value blocks go around the line one at a time (block
``j`` is broadcast from rank ``j``: ``ThreadGroup`` has no point-to-point send, and a
broadcast per block keeps one foreign block in memory at a time, as a ring does), and each
device folds every block into its output with an online softmax: per block the output and
the log-sum-exp of its scores (torch's CPU flash kernel returns both), merged as
``lse = logaddexp(lse, lse_j)``. Causal masking compares global positions; blocks entirely
in a query block's future are skipped, blocks entirely in its past need no mask.

Example:
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> q, k, v = (torch.randn(2, 3, 4, generator=g) for _ in range(3))
    >>> out, lse = block_attention(q, k, v, 0.5, None)
    >>> want = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.5)
    >>> torch.allclose(out, want, atol=1e-6)
    True
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import SdpaParam
from dtorch.kernels.base import GroupKernel, KernelContext, Shards

if TYPE_CHECKING:
    from dtorch.comm.group import ThreadGroup


def _param(ctx: KernelContext) -> SdpaParam:
    param = ctx.param
    assert isinstance(param, SdpaParam)
    return param


def sdpa_kernel(ctx: KernelContext, inputs: dict[int, Shards]) -> dict[int, Shards]:
    """Every held device's attention output (ring attention when the param names a ring)."""
    if _param(ctx).ring_dim >= 0:
        return ring_attention(ctx, inputs)
    return {d: [local_attention(ctx, d, shards)] for d, shards in inputs.items()}


def causal_allowed(q_offset: int, rows: int, k_offset: int, cols: int) -> torch.Tensor:
    """``allowed[i, j]``: key ``k_offset + j`` is not after query ``q_offset + i``."""
    q_pos = torch.arange(q_offset, q_offset + rows).unsqueeze(-1)
    return q_pos >= torch.arange(k_offset, k_offset + cols)


def local_attention(ctx: KernelContext, device: int, shards: Shards) -> torch.Tensor:
    """torch's attention on one device's shards (causal offset from q's layout)."""
    param, q_op = _param(ctx), ctx.inputs[0]
    q, k, v, *mask = shards
    causal, attn_mask = param.is_causal, mask[0] if mask else None
    offset = q_op.shard(device).offset[-2]
    if causal and (offset or q.shape[-2] != q_op.shape[-2]):  # a shard of the query sequence
        attn_mask = causal_allowed(offset, q.shape[-2], 0, k.shape[-2]).to(q.device)
        causal = False
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask, 0.0, causal, scale=param.scale, enable_gqa=param.enable_gqa
    )


#: torch's CPU flash attention, which also returns each row's log-sum-exp (None: absent)
_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)

#: ``(q offset, k offset)`` of a causal block (global positions), or None: no mask
Causal = tuple[int, int] | None


def block_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: Causal
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of ``q`` over one key/value block (in ``accumulation(q.dtype)``) and each
    row's log-sum-exp of its scores, shaped ``(..., L, 1)``; a row the causal mask hides
    entirely gets -inf and a zero output. torch's CPU flash kernel where it exists (3x faster
    than the matmuls of :func:`masked_block`, which serves the other devices)."""
    if not _flash_fits(q, v):
        allowed = None if causal is None else causal_allowed(*_rows_cols(causal, q, k))
        return masked_block(q, k, v, scale, allowed)
    return _flash_block(q, k, v, scale, causal)


def accumulation(dtype: torch.dtype) -> torch.dtype:
    """The dtype ring attention folds blocks in: float32, or float64 for float64 inputs.

    Example:
        >>> accumulation(torch.bfloat16), accumulation(torch.float64)
        (torch.float32, torch.float64)
    """
    return torch.promote_types(dtype, torch.float32)


_FLASH_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _flash_fits(q: torch.Tensor, v: torch.Tensor) -> bool:
    # the flash kernel: CPU tensors, one head size for q, k and v; never an empty shard (a
    # device holding no head or no query row): the kernel divides by zero there (SIGFPE)
    cpu = _FLASH_CPU is not None and q.device.type == "cpu"
    sized = q.numel() > 0 and v.numel() > 0
    return cpu and sized and q.dtype in _FLASH_DTYPES and q.shape[-1] == v.shape[-1]


def _rows_cols(causal: tuple[int, int], q: torch.Tensor, k: torch.Tensor) -> tuple[int, ...]:
    return causal[0], q.shape[-2], causal[1], k.shape[-2]


def _flash_block(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: Causal
) -> tuple[torch.Tensor, torch.Tensor]:
    # torch's causal flag is top-left aligned: right for blocks that start together
    mask, aligned = None, causal is not None and causal[0] == causal[1]
    if causal is not None and not aligned and causal[1] + k.shape[-2] - 1 > causal[0]:
        allowed = causal_allowed(*_rows_cols(causal, q, k))
        mask = torch.zeros(allowed.shape, dtype=q.dtype).masked_fill(~allowed, -math.inf)
    assert _FLASH_CPU is not None
    lead = q.shape[:-2]  # the kernel takes (B, H, T, K) only
    q4, k4, v4 = (t.reshape(1, -1, *t.shape[-2:]) if t.ndim != 4 else t for t in (q, k, v))
    out, lse = _FLASH_CPU(q4, k4, v4, 0.0, aligned, attn_mask=mask, scale=scale)
    out = out.reshape(*lead, *out.shape[-2:])
    acc = accumulation(q.dtype)
    lse = lse.reshape(*lead, lse.shape[-1], 1).to(acc)
    if causal is not None and causal[1] > causal[0]:  # rows before the block's first key
        hidden = min(causal[1] - causal[0], q.shape[-2])
        lse[..., :hidden, :] = -math.inf
    return out.to(acc), lse


def masked_block(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, allowed: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`block_attention` with plain matmuls and an explicit ``allowed`` mask."""
    acc = accumulation(q.dtype)
    scores = torch.matmul(q.to(acc), k.to(acc).transpose(-2, -1)) * scale
    if allowed is not None:
        scores = scores.masked_fill(~allowed, -math.inf)
    top = scores.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    weights = torch.exp(scores - top)
    total = weights.sum(-1, keepdim=True)
    out = torch.matmul(weights, v.to(acc)) / torch.where(total == 0, 1.0, total)
    return out, top + torch.log(total)


def merge(
    out: torch.Tensor, lse: torch.Tensor, out_j: torch.Tensor, lse_j: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two partial softmax results over disjoint key sets combined (the online softmax)."""
    new = torch.logaddexp(lse, lse_j)
    old_w = torch.nan_to_num(torch.exp(lse - new), nan=0.0)  # -inf - -inf: nothing seen yet
    new_w = torch.nan_to_num(torch.exp(lse_j - new), nan=0.0)
    return out * old_w + out_j * new_w, new


def ring_attention(ctx: KernelContext, inputs: dict[int, Shards]) -> dict[int, Shards]:
    """Ring attention on every ring line holding a device of this caller, lines in order.

    Every line's group is opened first, before anything can fail, in the one order every
    caller follows: a caller that then fails on its first line holds the groups of its
    later lines too, so the runtime's abort reaches the peers waiting there
    (``ThreadGroupManager.fail_scope``) instead of leaving them to the comm timeout."""
    param, q_op = _param(ctx), ctx.inputs[0]
    assert ctx.groups is not None, "ring attention needs the caller's ThreadGroupManager"
    mesh, results = q_op.mesh, {}
    lines = sorted({mesh.group_of(d, param.ring_dim) for d in inputs})
    groups = [ctx.groups.get_group(mesh.device_kind, line, ctx.devices) for line in lines]
    for line, group in zip(lines, groups, strict=True):
        held = {d: inputs[d] for d in line if d in inputs}
        results.update(_ring_line(ctx, line, group, held))
    return results


class _Fold:
    """One device's running output and log-sum-exp while blocks go around its ring."""

    def __init__(self, ctx: KernelContext, device: int, q: torch.Tensor, ev: int) -> None:
        param, q_op = _param(ctx), ctx.inputs[0]
        self.q, self.dtype = q, q.dtype
        self.offset = q_op.shard(device).offset[-2]
        self.scale = param.scale if param.scale is not None else 1.0 / math.sqrt(q.shape[-1])
        self.causal, self.gqa = param.is_causal, param.enable_gqa
        acc = accumulation(q.dtype)
        self.out = torch.zeros((*q.shape[:-1], ev), dtype=acc, device=q.device)
        self.lse = torch.full((*q.shape[:-1], 1), -math.inf, dtype=acc, device=q.device)

    def add(self, k: torch.Tensor, v: torch.Tensor, k_offset: int) -> None:
        """Fold in the block of keys at ``k_offset`` (skipped when causally all hidden)."""
        rows, cols = self.q.shape[-2], k.shape[-2]
        if rows == 0 or cols == 0 or (self.causal and k_offset > self.offset + rows - 1):
            return
        if self.gqa and self.q.ndim >= 3 and k.shape[-3] != self.q.shape[-3]:
            group = self.q.shape[-3] // k.shape[-3]
            k, v = k.repeat_interleave(group, -3), v.repeat_interleave(group, -3)
        causal = (self.offset, k_offset) if self.causal else None
        out, lse = block_attention(self.q, k, v, self.scale, causal)
        self.out, self.lse = merge(self.out, self.lse, out, lse)

    def result(self) -> torch.Tensor:
        return self.out.to(self.dtype)


def _ring_line(
    ctx: KernelContext, line: tuple[int, ...], group: ThreadGroup, held: dict[int, Shards]
) -> dict[int, Shards]:
    # one broadcast per block, the same order on every caller of this line
    k_op, v_op = ctx.inputs[1:3]
    e, ev = k_op.shard(line[0]).shape[-1], v_op.shard(line[0]).shape[-1]  # the line's local
    folds = {d: _Fold(ctx, d, shards[0], ev) for d, shards in held.items()}
    for rank, source in enumerate(line):
        blocks = {line.index(d): _block_to_send(k_op, v_op, source, d, held) for d in held}
        received = group.broadcast(blocks, src=rank)
        offset = k_op.shard(source).offset[-2]
        for r, kv in received.items():
            k, v = kv.split([e, ev], dim=-1)
            folds[line[r]].add(k, v, offset)
    return {d: [fold.result()] for d, fold in folds.items()}


def _block_to_send(
    k_op: Operand, v_op: Operand, source: int, device: int, held: dict[int, Shards]
) -> torch.Tensor:
    """k and v side by side on the source rank; an empty tensor of that shape elsewhere."""
    if device == source:
        return torch.cat([held[device][1], held[device][2]], dim=-1)
    shape, ev = k_op.shard(source).shape, v_op.shard(source).shape[-1]
    like = held[device][1]
    return torch.empty((*shape[:-1], shape[-1] + ev), dtype=like.dtype, device=like.device)


GROUP_KERNELS: dict[OpKind, GroupKernel] = {OpKind.Sdpa: sdpa_kernel}
