"""The online softmax of ring attention (``dtorch.kernels.attention``): key/value blocks
folded one at a time with ``block_attention`` (torch's CPU flash kernel) or ``masked_block``
(plain matmuls, the other devices' path) and ``merge``, in any order and with causal masks at
global offsets, give torch's attention over all the keys."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from dtorch.kernels.attention import block_attention, causal_allowed, masked_block, merge

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(13)
Block = Callable[..., tuple[torch.Tensor, torch.Tensor]]


def _masked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
            causal: tuple[int, int] | None) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    allowed = (
        None if causal is None else causal_allowed(causal[0], q.shape[-2], causal[1], k.shape[-2])
    )
    return masked_block(q, k, v, scale, allowed)


_BLOCKS = [pytest.param(block_attention, id="flash"), pytest.param(_masked, id="masked")]


def _fold(block: Block, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bounds: list[int],
          order: list[int], q_offset: int | None) -> torch.Tensor:  # fmt: skip
    out = torch.zeros(*q.shape[:-1], v.shape[-1])
    lse = torch.full((*q.shape[:-1], 1), -torch.inf)
    for j in order:
        start, stop = bounds[j], bounds[j + 1]
        if q_offset is not None and start > q_offset + q.shape[-2] - 1:
            continue  # entirely in the future (the kernel skips it too)
        causal = None if q_offset is None else (q_offset, start)
        o, s = block(q, k[..., start:stop, :], v[..., start:stop, :], 0.5, causal)
        out, lse = merge(out, lse, o, s)
    return out


@pytest.mark.parametrize("block", _BLOCKS)
@pytest.mark.parametrize("order", [[0, 1, 2], [2, 0, 1]])
def test_blocks_in_any_order(block: Block, order: list[int]) -> None:
    """3-D blocks (the flash kernel takes 4-D ones: reshaped)."""
    q, k, v = torch.randn(2, 4, 3, generator=_G), torch.randn(2, 9, 3), torch.randn(2, 9, 3)
    want = F.scaled_dot_product_attention(q, k, v, scale=0.5)
    torch.testing.assert_close(_fold(block, q, k, v, [0, 4, 7, 9], order, None), want)


@pytest.mark.parametrize("block", _BLOCKS)
@pytest.mark.parametrize(("start", "stop", "bounds"), [(3, 7, [0, 3, 6, 9]), (4, 8, [0, 4, 6, 9])])
def test_causal_blocks_at_global_offsets(
    block: Block, start: int, stop: int, bounds: list[int]
) -> None:
    """A query block against key blocks before it, aligned with it, overlapping it (some rows
    hidden entirely) and after it."""
    q_full, k, v = (torch.randn(1, 9, 4, generator=_G) for _ in range(3))
    want = F.scaled_dot_product_attention(q_full, k, v, is_causal=True, scale=0.5)[:, start:stop]
    got = _fold(block, q_full[:, start:stop], k, v, bounds, [2, 1, 0], start)
    torch.testing.assert_close(got, want)


def test_value_features_differ() -> None:
    """Ev != E: the flash kernel refuses it; block_attention falls back to matmuls."""
    q, k, v = (
        torch.randn(1, 2, 4, 3, generator=_G),
        torch.randn(1, 2, 6, 3),
        torch.randn(1, 2, 6, 5),
    )
    out, lse = block_attention(q, k, v, 0.5, (2, 0))
    allowed = causal_allowed(2, 4, 0, 6)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=0.5)
    torch.testing.assert_close(out, want)
    scores = (q @ k.transpose(-2, -1) * 0.5).masked_fill(~allowed, -torch.inf)
    torch.testing.assert_close(lse, scores.logsumexp(-1, keepdim=True))


class _Groups:
    """A ThreadGroupManager stand-in that records which groups are opened, in order, and
    hands out groups whose broadcast fails (a peer's failure reaching this caller)."""

    def __init__(self) -> None:
        self.opened: list[tuple[int, ...]] = []

    def get_group(self, kind: str, line: tuple[int, ...], devices: tuple[int, ...]) -> object:
        self.opened.append(line)
        return self

    def broadcast(self, blocks: object, src: int) -> object:
        raise RuntimeError(f"broadcast on {self.opened} failed")


def test_ring_attention_opens_every_lines_group_before_anything_can_fail() -> None:
    """A caller holding devices of two ring lines (a worker of several devices) opens both
    lines' groups before the first broadcast: failing on the first line, it still holds the
    second's group, so the runtime's abort reaches that line's peers."""
    from dtorch import Shard
    from dtorch.ir.mesh import DeviceMesh
    from dtorch.ir.operator import Operand, Operator
    from dtorch.ir.params import SdpaParam
    from dtorch.ir.span import Span
    from dtorch.kernels.attention import sdpa_kernel
    from dtorch.kernels.base import KernelContext

    mesh = DeviceMesh("cpu", [[0, 1], [2, 3]])
    q, k, v = (Operand(i, (1, 2, 4, 3), torch.float32, mesh, (Shard(2), Shard(2)))
               for i in (1, 2, 3))  # fmt: skip
    out = Operand(4, (1, 2, 4, 3), torch.float32, mesh, (Shard(2), Shard(2)))
    op = Operator(5, "sdpa_5", SdpaParam(ring_dim=1), (1, 2, 3), (4,), Span.unknown())
    groups = _Groups()
    ctx = KernelContext(op, (q, k, v), (out,), (0, 3), groups)  # type: ignore[arg-type]
    shards = {d: [torch.zeros(1, 1, 2, 3) for _ in range(3)] for d in (0, 3)}
    with pytest.raises(RuntimeError, match=r"broadcast on \[\(0, 1\), \(2, 3\)\] failed"):
        sdpa_kernel(ctx, shards)
