"""``MultiheadAttention``: torch.nn.MultiheadAttention on a mesh.

torch's constructor (``embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None, dtype=None``) plus
``device_mesh=``; torch's parameters by name and shape: ``in_proj_weight`` (3E, E) or, where
``kdim``/``vdim`` differ from ``embed_dim``, ``q_proj_weight``, ``k_proj_weight``,
``v_proj_weight``; ``in_proj_bias`` (3E); ``out_proj`` (a ``Linear``: ``out_proj.weight``,
``out_proj.bias``); ``bias_k``, ``bias_v`` (1, 1, E); all Replicate on the layer's mesh,
initialised as torch does (xavier-uniform projections, zero biases, xavier-normal
``bias_k``/``bias_v``), so a torch layer's ``state_dict`` loads. ``forward`` is
``dtorch.nn.functional.multi_head_attention_forward`` (its placements: a batch sharded on a
``dp`` mesh dim stays sharded); ``batch_first`` inputs are transposed to it and back.

Example:
    >>> import torch, dtorch
    >>> ref = torch.nn.MultiheadAttention(4, 2, batch_first=True)
    >>> m = dtorch.nn.MultiheadAttention(4, 2, batch_first=True)
    >>> m.load_state_dict(ref.state_dict())
    <All keys matched successfully>
    >>> x = torch.randn(2, 3, 4)
    >>> out, w = m(*(dtorch.from_torch(x),) * 3)
    >>> torch.allclose(out.to_torch(), ref(x, x, x)[0], atol=1e-6), w.shape
    (True, torch.Size([2, 3, 3]))
"""

from __future__ import annotations

from typing import Any

import torch

from dtorch.api.creation import empty
from dtorch.api.ops.mha import AttentionArgumentError, multi_head_attention_forward
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement, Replicate
from dtorch.nn import init
from dtorch.nn.modules.linear import (
    Device,
    NonDynamicallyQuantizableLinear,
    check_features,
    check_float,
    resolve_mesh,
)
from dtorch.nn.modules.module import Module
from dtorch.nn.parameter import Parameter


class MultiheadAttention(Module):
    """Multi-head attention with torch's parameters (see the module docstring).

    Example:
        >>> import dtorch
        >>> dtorch.nn.MultiheadAttention(4, 2, kdim=3).k_proj_weight.shape
        torch.Size([4, 3])
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        embed_dim, num_heads = _check_heads(embed_dim, num_heads)
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.batch_first = dropout, batch_first
        self.head_dim = embed_dim // num_heads
        self.add_zero_attn = add_zero_attn
        dtype = check_float("MultiheadAttention", dtype)
        mesh = resolve_mesh("MultiheadAttention", device_mesh, device)
        self._make_parameters(mesh, dtype, bias, add_bias_kv)
        self._reset_parameters()

    def _make_parameters(
        self, mesh: DeviceMesh, dtype: torch.dtype | None, bias: bool, add_bias_kv: bool
    ) -> None:
        """torch's parameters (None where absent: torch registers those names as None)."""
        e = self.embed_dim
        new = lambda *shape: Parameter(_replicate(shape, mesh, dtype))  # noqa: E731
        same = self._qkv_same_embed_dim
        self.register_parameter("in_proj_weight", new(3 * e, e) if same else None)
        self.register_parameter("q_proj_weight", None if same else new(e, e))
        self.register_parameter("k_proj_weight", None if same else new(e, self.kdim))
        self.register_parameter("v_proj_weight", None if same else new(e, self.vdim))
        self.register_parameter("in_proj_bias", new(3 * e) if bias else None)
        self.out_proj = NonDynamicallyQuantizableLinear(
            e, e, bias=bias, dtype=dtype, device_mesh=mesh
        )
        self.register_parameter("bias_k", new(1, 1, e) if add_bias_kv else None)
        self.register_parameter("bias_v", new(1, 1, e) if add_bias_kv else None)

    def _reset_parameters(self) -> None:
        """torch's initialisation, drawn in torch's order from torch's default generator."""
        for name in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight"):
            if getattr(self, name) is not None:
                init.xavier_uniform_(getattr(self, name))
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            if self.out_proj.bias is not None:
                init.constant_(self.out_proj.bias, 0.0)
        for name in ("bias_k", "bias_v"):
            if getattr(self, name) is not None:
                init.xavier_normal_(getattr(self, name))

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Any = None,
        need_weights: bool = True,
        attn_mask: Any = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """torch's forward: ``(output, weights)`` (weights None when ``need_weights=False``)."""
        flip = self.batch_first and query.ndim == 3
        if flip:
            query, key, value = _seq_first(query, key, value)
        out, weights = multi_head_attention_forward(
            query,
            key,
            value,
            self.embed_dim,
            self.num_heads,
            self.in_proj_weight,
            self.in_proj_bias,
            self.bias_k,
            self.bias_v,
            self.add_zero_attn,
            self.dropout,
            self.out_proj.weight,
            self.out_proj.bias,
            training=self.training,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights,
            attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights,
            is_causal=is_causal,
        )
        return (out.transpose(1, 0) if flip else out), weights


def _check_heads(embed_dim: Any, num_heads: Any) -> list[int]:
    # torch's checks: positive sizes (ValueError), embed_dim divisible by num_heads
    embed, heads = check_features("MultiheadAttention", embed_dim=embed_dim, num_heads=num_heads)
    if embed <= 0 or heads <= 0:
        raise ValueError(
            f"MultiheadAttention: embed_dim and num_heads must be greater than 0, got "
            f"embed_dim={embed} and num_heads={heads} instead"
        )
    if embed % heads:
        raise AttentionArgumentError(
            f"MultiheadAttention: embed_dim must be divisible by num_heads, got "
            f"embed_dim={embed} and num_heads={heads}"
        )
    return [embed, heads]


def _replicate(shape: tuple[int, ...], mesh: DeviceMesh, dtype: torch.dtype | None) -> Tensor:
    placements: list[Placement] = [Replicate()] * mesh.ndim
    return empty(shape, dtype=dtype, device_mesh=mesh, placements=placements)


def _seq_first(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Batch-first inputs as (seq, batch, feature), keeping ``q is k is v`` where it holds."""
    tq = q.transpose(1, 0)
    tk = tq if k is q else k.transpose(1, 0)
    tv = tk if v is k else (tq if v is q else v.transpose(1, 0))
    return tq, tk, tv


__all__ = ["MultiheadAttention"]
