"""``dtorch.compiled_op``: the fused operators' math as plain torch functions, against their
unfused forms (transformers' rotary embedding, ``silu(a) * b`` of a chunked linear, layer norm
then scale and shift). Nothing here calls ``torch.compile`` (tens of seconds on this CPU)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dtorch import compiled_op

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(9)


def test_rotary_matches_transformers() -> None:
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, rotate_half

    q = torch.randn(2, 3, 5, 8, generator=_G)
    angles = torch.rand(2, 5, 4, generator=_G)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    assert torch.equal(compiled_op.rotate_half(q), rotate_half(q))
    want = apply_rotary_pos_emb(q, q, cos, sin, unsqueeze_dim=1)[0]
    got = compiled_op.apply_rotary_emb(q, cos.unsqueeze(1), sin.unsqueeze(1))
    torch.testing.assert_close(got, want)


def test_interleaved_rotation_pairs_neighbours() -> None:
    x = torch.arange(1.0, 7.0)
    assert compiled_op.rotate_interleaved(x).tolist() == [-2.0, 1.0, -4.0, 3.0, -6.0, 5.0]


def test_silu_linear_chunk_both_weight_forms() -> None:
    x, w = torch.randn(4, 3, generator=_G), torch.randn(10, 3, generator=_G)
    gate, up = F.linear(x, w[:5]), F.linear(x, w[5:])
    want = F.silu(gate) * up
    torch.testing.assert_close(compiled_op.silu_linear_chunk(x, w), want)
    torch.testing.assert_close(compiled_op.silu_linear_chunk(x, w.view(2, 5, 3)), want)


def test_layer_norm_mul_add() -> None:
    x, mul, add = (torch.randn(s, generator=_G) for s in ((2, 3, 4), (4,), (3, 4)))
    want = F.layer_norm(x, (4,), eps=1e-3) * mul + add
    torch.testing.assert_close(compiled_op.layer_norm_mul_add(x, [4], mul, add, 1e-3), want)
