"""``multi_head_attention_forward``: torch.nn.functional's multi-head attention, composed of
dtorch operators (``linear``, ``reshape``/``permute``, ``cat``, ``softmax``, ``matmul``,
``scaled_dot_product_attention``): no operator of its own.

torch's signature, shapes and masks: query ``(L, N, E)`` (or unbatched ``(L, E)``), key and
value ``(S, N, kdim/vdim)``; ``attn_mask`` ``(L, S)`` or ``(N * num_heads, L, S)`` and
``key_padding_mask`` ``(N, S)``, bool (True: NOT attended) or float (added to the scores),
dtorch or torch tensors; ``is_causal`` is a hint that needs ``attn_mask`` (as torch).
``need_weights=True`` computes ``softmax(q k^T / sqrt(head_dim) + mask)`` explicitly and returns
the weights ``(N, L, S)`` (averaged over heads) or ``(N, num_heads, L, S)``;
``need_weights=False`` runs ``scaled_dot_product_attention`` and returns ``(output, None)``.
Dropout on the weights (``dropout_p > 0`` in training) takes the explicit path: dtorch's
dropout, drawn as torch's ``dropout`` draws on the same shape (torch's fused kernel, used by
torch where ``need_weights=False``, draws its own way).

Placements: the batch dim (1) of q, k, v may be sharded (data parallel: the output and the
weights keep it sharded on dim 1 and 0), the query's sequence (dim 0) too (k, v whole);
anything else (a key/value sequence, an embedding dim, Partial) is redistributed to Replicate
on that mesh dim first. Parameters are used as given (Replicate by default); masks given as
torch tensors are Replicate on the query's mesh.

Example:
    >>> import torch, dtorch
    >>> import dtorch.nn.functional as F
    >>> ref = torch.nn.MultiheadAttention(4, 2)
    >>> x = torch.randn(3, 2, 4)
    >>> p = [dtorch.from_torch(t.detach()) for t in (ref.in_proj_weight, ref.in_proj_bias,
    ...                                              ref.out_proj.weight, ref.out_proj.bias)]
    >>> dx = dtorch.from_torch(x)
    >>> out, w = F.multi_head_attention_forward(dx, dx, dx, 4, 2, p[0], p[1], None, None,
    ...                                         False, 0.0, p[2], p[3])
    >>> want, want_w = ref(x, x, x)
    >>> torch.allclose(out.to_torch(), want, atol=1e-6), w.shape
    (True, torch.Size([2, 3, 3]))
"""

from __future__ import annotations

import math
from typing import Any

import torch

from dtorch.api.creation import from_torch, zeros
from dtorch.api.ops.activations import softmax
from dtorch.api.ops.attention import scaled_dot_product_attention
from dtorch.api.ops.dropout import dropout
from dtorch.api.ops.linalg import linear
from dtorch.api.ops.shape import cat
from dtorch.api.ops.spatial import pad
from dtorch.api.tensor import Tensor
from dtorch.errors import ParamError, ShapeError
from dtorch.ir.placement import Placement, Replicate, Shard

_NAME = "multi_head_attention_forward"


class AttentionArgumentError(ParamError, AssertionError):
    """A shape, dtype or argument multi-head attention refuses where torch raises an
    AssertionError (a ParamError too: a RuntimeError and a ValueError)."""


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Any = None,
    need_weights: bool = True,
    attn_mask: Any = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Any = None,
    static_v: Any = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """``torch.nn.functional.multi_head_attention_forward`` (see the module docstring).

    Example:
        >>> import dtorch
        >>> import dtorch.nn.functional as F
        >>> x, w, b = dtorch.ones(2, 1, 2), dtorch.eye(2).repeat(3, 1), dtorch.zeros(6)
        >>> out, _ = F.multi_head_attention_forward(x, x, x, 2, 1, w, b, None, None, False,
        ...                                         0.0, dtorch.eye(2), None)
        >>> out.tolist()
        [[[1.0, 1.0]], [[1.0, 1.0]]]
    """
    batched = _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:  # a batch of one, the padding mask's (S,) as (1, S) too, as torch's
        query, key, value = (t.unsqueeze(1) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    p = float(dropout_p) if training else 0.0
    explicit = need_weights or p > 0.0  # the weights, or dropout on them, as torch's dropout
    kpm = _mask_on(query, key_padding_mask, "key_padding_mask")
    mask, is_causal = _attn_mask(query, attn_mask, is_causal, kpm is None and not explicit)
    head_dim = _check_embed(
        embed_dim, embed_dim_to_check, num_heads, key, value, use_separate_proj_weight
    )
    query, key, value = _for_attention(query, key, value)
    separate = (q_proj_weight, k_proj_weight, v_proj_weight)
    weights = _proj_weights(in_proj_weight, in_proj_bias, use_separate_proj_weight, separate)
    q, k, v = _project(query, key, value, weights)
    mask = _mask_4d(mask, tgt_len, key.shape[0], bsz, num_heads)
    k, v, mask, kpm = _add_bias_kv(k, v, bias_k, bias_v, mask, kpm, static_k, static_v)
    q = _heads(q, num_heads)
    k = _static(static_k, k, query, bsz, num_heads, head_dim, "static_k")
    v = _static(static_v, v, query, bsz, num_heads, head_dim, "static_v")
    if add_zero_attn:
        k, v, mask, kpm = _zero_attn(k, v, mask, kpm)
    mask = _merge_padding(mask, kpm, bsz, k.shape[2])
    if explicit:
        out, attn = _explicit(q, k, v, mask, p)
    else:
        out, attn = scaled_dot_product_attention(q, k, v, mask, 0.0, is_causal), None
    out = linear(
        out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, embed_dim), out_proj_weight, out_proj_bias
    )
    if attn is not None:
        attn = attn.mean(dim=1) if average_attn_weights else attn
        attn = attn if need_weights else None
    if not batched:
        out = out.squeeze(1)
        attn = None if attn is None else attn.squeeze(0)
    return out, attn


def _attn_mask(query: Tensor, mask: Any, is_causal: bool, fused: bool) -> tuple[Any, bool]:
    """(the float attn_mask, is_causal for the fused kernel): torch drops the mask for
    ``is_causal`` where the fused kernel runs without padding; elsewhere the mask does it."""
    if is_causal and mask is None:
        raise _causal_without_mask()
    if is_causal and fused:  # the mask's dtype checked even so, as torch's module does
        if not (mask.dtype == torch.bool or mask.dtype.is_floating_point):
            raise AttentionArgumentError(
                f"{_NAME}: only bool and floating types of attn_mask are supported, got "
                f"{mask.dtype}"
            )
        return None, True
    return _mask_on(query, mask, "attn_mask"), False


def _causal_without_mask() -> ParamError:
    # torch's RuntimeError and message
    return ParamError(
        f"{_NAME}: Need attn_mask if specifying the is_causal hint. You may use the Transformer "
        "module method `generate_square_subsequent_mask` to create this mask."
    )


def _check_shapes(query: Any, key: Any, value: Any, kpm: Any, mask: Any, heads: int) -> bool:
    """torch's ``_mha_shape_check``: True for a batched (3-D) query, False for a 2-D one."""
    if query.ndim not in (2, 3):
        raise AttentionArgumentError(
            f"{_NAME}: query should be unbatched 2D or batched 3D tensor "
            f"but received {query.ndim}-D query tensor"
        )
    nd = query.ndim
    if key.ndim != nd or value.ndim != nd:
        raise AttentionArgumentError(
            f"{_NAME}: for a {nd}-D query, expected key and value to be "
            f"{nd}-D but found {key.ndim}-D and {value.ndim}-D"
        )
    if kpm is not None and kpm.ndim != nd - 1:
        raise AttentionArgumentError(
            f"{_NAME}: for a {nd}-D query, expected key_padding_mask to "
            f"be None or {nd - 1}-D but found {kpm.ndim}-D"
        )
    if mask is not None and mask.ndim not in (2, 3):
        raise AttentionArgumentError(
            f"{_NAME}: expected attn_mask to be None, 2-D or 3-D but found {mask.ndim}-D"
        )
    return nd == 3


def _check_embed(
    embed: int, expected: int, heads: int, key: Tensor, value: Tensor, separate: bool
) -> int:
    """The head dim, after torch's checks of the embedding size and of key against value."""
    if embed != expected:
        raise AttentionArgumentError(
            f"{_NAME}: was expecting embedding dimension of {expected}, but got {embed}"
        )
    if heads <= 0 or embed % heads:
        raise AttentionArgumentError(
            f"{_NAME}: embed_dim {embed} not divisible by num_heads {heads}"
        )
    same = key.shape[:2] == value.shape[:2] if separate else key.shape == value.shape
    if not same:
        raise AttentionArgumentError(
            f"{_NAME}: key shape {list(key.shape)} does not match value shape {list(value.shape)}"
        )
    return embed // heads


def _mask_on(query: Tensor, mask: Any, name: str) -> Tensor | None:
    """torch's ``_canonical_mask`` on the query's mesh: bool -> 0 / -inf of the query's
    dtype, float as it is; a torch mask goes Replicate."""
    if mask is None:
        return None
    if not (mask.dtype == torch.bool or mask.dtype.is_floating_point):
        raise AttentionArgumentError(
            f"{_NAME}: only bool and floating types of {name} are supported, got {mask.dtype}"
        )
    if isinstance(mask, torch.Tensor):
        float_mask = _float_mask(mask, query.dtype)
        return from_torch(
            float_mask,
            graph=query.graph,
            device_mesh=query.device_mesh,
            placements=[Replicate()] * query.device_mesh.ndim,
        )
    if mask.dtype != torch.bool:
        return mask
    return zeros(
        mask.shape,
        dtype=query.dtype,
        device_mesh=mask.device_mesh,
        placements=mask.placements,
        graph=mask.graph,
    ).masked_fill(mask, -math.inf)


def _float_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # a bool torch mask as torch's _canonical_mask makes it (done on the host: no operator)
    if mask.dtype != torch.bool:
        return mask
    return torch.zeros_like(mask, dtype=dtype).masked_fill_(mask, -math.inf)


def _for_attention(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """q, k, v with every mesh dim that does not shard what attention keeps apart (the batch,
    dim 1; the query's sequence, dim 0) made Replicate."""
    q = _keep(q, (Shard(0), Shard(1)))
    k, v = _keep(k, (Shard(1),)), _keep(v, (Shard(1),))
    return q, k, v


def _keep(t: Tensor, kept: tuple[Placement, ...]) -> Tensor:
    # Replicate on mesh dims whose placement is not one of ``kept`` (no operator if none)
    want = [p if p in kept else Replicate() for p in t.placements]
    return t if want == list(t.placements) else t.redistribute(placements=want)


def _proj_weights(
    packed: Tensor | None,
    bias: Tensor | None,
    separate: bool,
    weights: tuple[Tensor | None, ...],
) -> tuple[tuple[Tensor, ...], tuple[Tensor | None, ...]]:
    """The q, k, v projection weights and biases (torch's packed or separate forms)."""
    biases: tuple[Tensor | None, ...] = (None, None, None)
    if bias is not None:
        biases = tuple(bias.chunk(3))
    if not separate:
        if packed is None:
            raise AttentionArgumentError(
                f"{_NAME}: use_separate_proj_weight is False but in_proj_weight is None"
            )
        return tuple(packed.chunk(3)), biases
    for name, w in zip(("q_proj_weight", "k_proj_weight", "v_proj_weight"), weights, strict=True):
        if w is None:
            raise AttentionArgumentError(
                f"{_NAME}: use_separate_proj_weight is True but {name} is None"
            )
    return tuple(w for w in weights if w is not None), biases


def _project(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    weights: tuple[tuple[Tensor, ...], tuple[Tensor | None, ...]],
) -> tuple[Tensor, Tensor, Tensor]:
    # one linear per input: q, k, v may differ in size and sharding
    (wq, wk, wv), (bq, bk, bv) = weights
    return linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)


def _mask_4d(mask: Tensor | None, tgt: int, src: int, bsz: int, heads: int) -> Tensor | None:
    """attn_mask ``(L, S)`` -> ``(1, 1, L, S)``; ``(N * heads, L, S)`` -> ``(N, heads, L, S)``
    after torch's shape checks."""
    if mask is None:
        return None
    if mask.ndim == 2:
        if tuple(mask.shape) != (tgt, src):
            raise ShapeError(
                f"{_NAME}: the shape of the 2D attn_mask is {list(mask.shape)}, "
                f"but should be {[tgt, src]}"
            )
        return mask.reshape(1, 1, tgt, src)
    if tuple(mask.shape) != (bsz * heads, tgt, src):
        raise ShapeError(
            f"{_NAME}: the shape of the 3D attn_mask is {list(mask.shape)}, but "
            f"should be {[bsz * heads, tgt, src]}"
        )
    return mask.reshape(bsz, heads, tgt, src)


def _add_bias_kv(
    k: Tensor,
    v: Tensor,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    mask: Tensor | None,
    kpm: Tensor | None,
    static_k: Any,
    static_v: Any,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """torch's ``bias_k``/``bias_v``: one more key/value position (the masks padded by a
    0 column)."""
    if (bias_k is None) != (bias_v is None):
        set_name = "bias_k" if bias_k is not None else "bias_v"
        raise AttentionArgumentError(
            f"{_NAME}: {set_name} is set but the other of bias_k/bias_v is None"
        )
    if bias_k is None or bias_v is None:
        return k, v, mask, kpm
    if static_k is not None or static_v is not None:
        raise AttentionArgumentError(f"{_NAME}: bias cannot be added to static key or value.")
    k, v = (_append_row(t, b) for t, b in ((k, bias_k), (v, bias_v)))
    return k, v, _pad_last(mask), _pad_last(kpm)


def _append_row(t: Tensor, row: Tensor) -> Tensor:
    # (S, N, E) + the (1, 1, E) bias repeated over the batch -> (S + 1, N, E)
    return cat([t, row.expand(1, t.shape[1], t.shape[2])], 0)


def _pad_last(mask: Tensor | None) -> Tensor | None:
    return None if mask is None else pad(mask, (0, 1))


def _heads(t: Tensor, heads: int) -> Tensor:
    """``(S, N, E)`` -> ``(N, heads, S, E / heads)``: torch's view and transpose, with the
    batch and the heads as separate dims (a batch shard stays one)."""
    s, n, e = t.shape
    return t.reshape(s, n, heads, e // heads).permute(1, 2, 0, 3)


def _static(
    given: Any, t: Tensor, query: Tensor, bsz: int, heads: int, head_dim: int, name: str
) -> Tensor:
    """``static_k``/``static_v`` ``(N * heads, S, head_dim)`` in place of the projection."""
    if given is None:
        return _heads(t, heads)
    if given.shape[0] != bsz * heads or given.shape[2] != head_dim:
        raise AttentionArgumentError(
            f"{_NAME}: expecting {name} of shape "
            f"({bsz * heads}, S, {head_dim}), got {list(given.shape)}"
        )
    if isinstance(given, torch.Tensor):
        given = from_torch(
            given,
            graph=query.graph,
            device_mesh=query.device_mesh,
            placements=[Replicate()] * query.device_mesh.ndim,
        )
    return given.reshape(bsz, heads, given.shape[1], head_dim)


def _zero_attn(
    k: Tensor, v: Tensor, mask: Tensor | None, kpm: Tensor | None
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """torch's ``add_zero_attn``: a zero key and value appended (the masks padded)."""
    n, h, _, e = k.shape
    k, v = (
        cat(
            [
                t,
                zeros(
                    (n, h, 1, e),
                    dtype=t.dtype,
                    device_mesh=t.device_mesh,
                    placements=t.placements,
                    graph=t.graph,
                ),
            ],
            2,
        )
        for t in (k, v)
    )
    return k, v, _pad_last(mask), _pad_last(kpm)


def _merge_padding(mask: Tensor | None, kpm: Tensor | None, bsz: int, src: int) -> Tensor | None:
    """The key padding mask ``(N, S)`` added to attn_mask as ``(N, 1, 1, S)``."""
    if kpm is None:
        return mask
    if tuple(kpm.shape) != (bsz, src):
        raise AttentionArgumentError(
            f"{_NAME}: expecting key_padding_mask shape of {[bsz, src]}, but got {list(kpm.shape)}"
        )
    padding = kpm.reshape(bsz, 1, 1, src)
    return padding if mask is None else mask + padding


def _explicit(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, p: float
) -> tuple[Tensor, Tensor]:
    """softmax(q k^T / sqrt(head_dim) + mask) (dropped out with ``p``) @ v, and the weights."""
    scores = (q * math.sqrt(1.0 / float(q.shape[-1]))) @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores + mask
    attn = softmax(scores, dim=-1)
    if p > 0.0:
        attn = dropout(attn, p=p)
    return attn @ v, attn


__all__ = ["AttentionArgumentError", "multi_head_attention_forward"]
