"""The online softmax of ring attention (``dtorch.kernels.attention``): key/value blocks
folded one at a time with ``block_attention`` and ``merge``, in any order and with causal
masks at global offsets, give torch's attention over all the keys."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dtorch.kernels.attention import block_attention, causal_allowed, merge

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(13)


def _fold(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bounds: list[int], order: list[int],
          q_offset: int | None) -> torch.Tensor:  # fmt: skip
    out = torch.zeros(*q.shape[:-1], v.shape[-1])
    lse = torch.full((*q.shape[:-1], 1), -torch.inf)
    for j in order:
        start, stop = bounds[j], bounds[j + 1]
        allowed = None
        if q_offset is not None:
            allowed = causal_allowed(q_offset, q.shape[-2], start, stop - start)
        o, s = block_attention(q, k[..., start:stop, :], v[..., start:stop, :], 0.5, allowed)
        out, lse = merge(out, lse, o, s)
    return out


@pytest.mark.parametrize("order", [[0, 1, 2], [2, 0, 1]])
def test_blocks_in_any_order(order: list[int]) -> None:
    q, k, v = torch.randn(2, 4, 3, generator=_G), torch.randn(2, 9, 3), torch.randn(2, 9, 5)
    want = F.scaled_dot_product_attention(q, k, v, scale=0.5)
    torch.testing.assert_close(_fold(q, k, v, [0, 4, 7, 9], order, None), want)


def test_causal_blocks_at_global_offsets() -> None:
    """Queries 3..6 of 9: the later key blocks hide some rows entirely (zero weight)."""
    q_full, k, v = (torch.randn(1, 9, 4, generator=_G) for _ in range(3))
    want = F.scaled_dot_product_attention(q_full, k, v, is_causal=True, scale=0.5)[:, 3:7]
    got = _fold(q_full[:, 3:7], k, v, [0, 3, 6, 9], [2, 1, 0], 3)
    torch.testing.assert_close(got, want)
