"""Rule of Sdpa: ``scaled_dot_product_attention(q, k, v[, mask])`` with torch's shapes.

Shapes: q ``(..., Hq, L, E)``, k ``(..., Hk, S, E)``, v ``(..., Hk, S, Ev)``, the leading
dims equal; ``Hq == Hk``, or ``Hq % Hk == 0`` with ``enable_gqa`` (q head ``h`` reads kv head
``h // (Hq // Hk)``, torch's repeat). The mask broadcasts to ``(..., Hq, L, S)``; the output
is ``(..., Hq, L, Ev)``.

Labels: the leading dims (batch, heads) are shared by all inputs and kept; ``L`` (q and the
mask) and ``Ev`` (v) are kept; ``S`` and ``E`` are contracted: sharding them is refused
(softmax runs over ``S``). So per mesh dim: any mix of R and S(i) with at least one S(i)
gives S(i) (a Replicate operand holding that dim is chunked to match, e.g. k/v for a sharded
batch, the mask for a sharded query sequence), and ``R R P -> P`` (attention is linear in v).
With GQA the kv heads must split evenly over the mesh dims that shard the heads, so that
each device's q heads read exactly its kv heads. A sharded query sequence with
``is_causal`` needs each device's global query offset: the kernel reads it from q's layout.

Ring attention (``ring_dim >= 0``, recorded by ``dtorch.api.ops.attention``): on that mesh
dim q, k and v are all sharded on their sequence dim (``L``, ``S``) and the output keeps
q's shard; the other mesh dims follow the table above.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import SdpaParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> q = Operand(1, (2, 4, 8, 16), torch.float32, mesh, (Shard(1),))
    >>> kv = Operand(2, (2, 4, 8, 16), torch.float32, mesh, (Replicate(),))
    >>> inference = sdpa_rule("sdpa", SdpaParam(), (q, kv, kv))
    >>> inference.outputs[0].placements, inference.input_placements[1]
    ((Shard(dim=1),), (Shard(dim=1),))
"""

from __future__ import annotations

import math

import torch

from dtorch.errors import DtypeError, ParamError, PlacementError, ShapeError, UnsupportedDtypeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import OpParam, SdpaParam
from dtorch.ir.placement import Placement, Replicate, Shard, format_placements
from dtorch.ir.rules.base import (
    Inference,
    OutputMeta,
    Rule,
    all_replicate,
    describe_shapes,
    replicated,
)
from dtorch.ir.rules.signature import Labels, elementwise, expand, identity

_E = 20_000  # the contracted feature dim of q and k
_S = 20_001  # the contracted key/value sequence dim

_LEGEND = (
    "i: a batch or head dim of every input, the query sequence dim of q and the mask, or the "
    "feature dim of v; the key sequence dim and the q/k feature dim cannot be sharded"
)
_HINT = (
    "shard the sequence of q, k and v on mesh dims named as in SdpaOption (ulysess_cp, "
    "ring_cp) for context-parallel attention, or redistribute to Replicate"
)
_SIGS = {
    3: elementwise(3, ["R R P -> P"], legend=_LEGEND, hint=_HINT),
    4: elementwise(4, ["R R P R -> P"], legend=_LEGEND, hint=_HINT),
}


def sdpa_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """Output shape and placements of scaled dot-product attention (see the module)."""
    assert isinstance(param, SdpaParam)
    q = inputs[0]
    shape = _check_shapes(name, param, inputs)
    _check_dtypes(name, inputs)
    if param.ring_dim >= 0:
        return _ring(name, param, inputs, shape)
    if all_replicate(inputs):
        return replicated(shape, q.dtype, len(q.placements))
    return _sharded(name, param, inputs, shape)


def _sharded(
    name: str, param: SdpaParam, inputs: tuple[Operand, ...], shape: tuple[int, ...]
) -> Inference:
    # the signature over the labels, then the GQA head split check on the result
    sig = _SIGS[len(inputs)]
    expansion = expand(name, sig, inputs, _labels(inputs), (identity(len(shape)),))
    k_placements = expansion.requested[1] if expansion.requested else None
    _check_gqa_split(name, inputs, k_placements or inputs[1].placements)
    return Inference(
        (OutputMeta(shape, inputs[0].dtype, expansion.outputs[0]),), expansion.requested
    )


def _labels(inputs: tuple[Operand, ...]) -> tuple[Labels, ...]:
    """q, k, v (and mask) labels; a mask dim of size 1 that broadcasts gets its own label."""
    nd = inputs[0].ndim
    lead = tuple(range(nd - 2))
    labels: list[Labels] = [(*lead, nd - 2, _E), (*lead, _S, _E), (*lead, _S, nd - 1)]
    if len(inputs) == 4:
        target = (*inputs[0].shape[:-1], inputs[1].shape[-2])
        full = (*lead, nd - 2, _S)
        mask = inputs[3].shape
        start = nd - len(mask)
        labels.append(
            tuple(full[j] if size == target[j] else -3000 - j for j, size in enumerate(mask, start))
        )
    return tuple(labels)


def _check_shapes(name: str, param: SdpaParam, inputs: tuple[Operand, ...]) -> tuple[int, ...]:
    # torch's checks before its kernel runs; returns the output shape
    q, k, v = inputs[:3]
    if param.is_causal and len(inputs) == 4:
        raise ParamError(f"{name}: an explicit attn_mask cannot be combined with is_causal=True")
    bad = q.ndim < 2 or not q.ndim == k.ndim == v.ndim
    bad = bad or q.shape[:-3] != k.shape[:-3] or k.shape[:-1] != v.shape[:-1]
    bad = bad or q.shape[-1] != k.shape[-1]
    if bad:
        raise ShapeError(
            f"{name}: q, k, v of shapes {describe_shapes(inputs[:3])} do not fit; accepted: q "
            "(..., Hq, L, E), k (..., Hk, S, E), v (..., Hk, S, Ev) with equal leading dims"
        )
    _check_heads(name, param, q, k)
    if len(inputs) == 4:
        _check_mask(name, inputs[3].shape, (*q.shape[:-1], k.shape[-2]))
    return (*q.shape[:-1], v.shape[-1])


def _check_heads(name: str, param: SdpaParam, q: Operand, k: Operand) -> None:
    if q.ndim < 3 or q.shape[-3] == k.shape[-3]:
        return
    hq, hk = q.shape[-3], k.shape[-3]
    if not param.enable_gqa or hk == 0 or hq % hk:
        raise ShapeError(
            f"{name}: q has {hq} heads and k/v {hk}; accepted: equal heads, or enable_gqa=True "
            "with the q heads a multiple of the kv heads"
        )


def _check_mask(name: str, mask: tuple[int, ...], target: tuple[int, ...]) -> None:
    start = len(target) - len(mask)
    if start < 0 or any(s not in (1, target[j]) for j, s in enumerate(mask, start)):
        raise ShapeError(
            f"{name}: attn_mask of shape {list(mask)} does not broadcast to the attention "
            f"weights' shape {list(target)}"
        )


def _check_dtypes(name: str, inputs: tuple[Operand, ...]) -> None:
    q, k, v = inputs[:3]
    if not q.dtype.is_floating_point or not q.dtype == k.dtype == v.dtype:
        # one complex dtype reaches torch's softmax, which has no complex kernel
        same_complex = q.dtype.is_complex and q.dtype == k.dtype == v.dtype
        raise (UnsupportedDtypeError if same_complex else DtypeError)(
            f"{name}: q, k, v have dtypes {q.dtype}, {k.dtype}, {v.dtype}; accepted: one "
            "floating dtype"
        )
    # torch's rule: a bool mask, one of q's dtype, or a float32 one with any q (the output
    # keeps q's dtype)
    accepted = tuple(dict.fromkeys((torch.bool, torch.float32, q.dtype)))  # once each
    if len(inputs) == 4 and inputs[3].dtype not in accepted:
        listed = ", ".join(map(str, accepted[:-1])) + f" or {accepted[-1]}"
        raise DtypeError(f"{name}: attn_mask has dtype {inputs[3].dtype}; accepted: {listed}")


def _check_gqa_split(
    name: str, inputs: tuple[Operand, ...], k_layout: tuple[Placement, ...]
) -> None:
    """With GQA, the mesh dims sharding the heads must split the kv heads evenly."""
    q, k = inputs[0], inputs[1]
    if q.ndim < 3 or q.shape[-3] == k.shape[-3]:
        return
    heads = q.ndim - 3
    parts = math.prod(
        n
        for p, n in zip(k_layout, k.mesh.shape, strict=True)
        if isinstance(p, Shard) and p.dim == heads
    )
    if k.shape[-3] % parts:
        given = format_placements(k.placements)
        chunked = format_placements(k_layout)
        got = given if given == chunked else f"{given} (chunked as q's heads: {chunked})"
        raise PlacementError(
            f"{name}: got {got} for k/v on mesh {k.mesh.shape}; with enable_gqa the "
            f"{k.shape[-3]} kv heads must split evenly over the {parts} devices that shard "
            "the heads (accepted: a head split that divides the kv heads), so each device's q "
            f"heads read its own kv heads; or repeat k and v to q's {q.shape[-3]} heads "
            f"(repeat_interleave({q.shape[-3] // k.shape[-3]}, dim={k.ndim - 3})) first"
        )


def _ring(
    name: str, param: SdpaParam, inputs: tuple[Operand, ...], shape: tuple[int, ...]
) -> Inference:
    """The ring mesh dim shards every sequence; the other mesh dims follow the table."""
    m, seq = param.ring_dim, inputs[0].ndim - 2
    if len(inputs) != 3 or any(o.placements[m] != Shard(seq) for o in inputs):
        raise PlacementError(
            f"{name}: ring attention on mesh dim {m} got "
            f"{' x '.join(format_placements(o.placements) for o in inputs)}; accepted: q, k and "
            f"v all Shard({seq}) (their sequence dim) on mesh dim {m}, and no attn_mask"
        )
    others = tuple(_without(name, o, m) for o in inputs)
    inner = sdpa_rule(
        name, SdpaParam(param.is_causal, param.scale, enable_gqa=param.enable_gqa), others
    )
    out = inner.outputs[0]
    placements = _with(out.placements, m, Shard(seq))
    requested = tuple(
        None if r is None else _with(r, m, Shard(seq)) for r in inner.input_placements
    )
    return Inference((OutputMeta(out.shape, out.dtype, placements),), requested)


def _without(name: str, o: Operand, m: int) -> Operand:
    """``o`` as if Replicate on mesh dim ``m`` (the rest of the table checks it)."""
    if any(
        isinstance(p, Shard) and p.dim == o.ndim - 2 for i, p in enumerate(o.placements) if i != m
    ):
        raise PlacementError(
            f"{name}: ring attention got {format_placements(o.placements)}; accepted: the "
            f"sequence dim sharded on the ring mesh dim {m} only"
        )
    return Operand(o.id, o.shape, o.dtype, o.mesh, _with(o.placements, m, Replicate()))


def _with(placements: tuple[Placement, ...], m: int, p: Placement) -> tuple[Placement, ...]:
    # placements are tuples in operands: one mesh dim replaced
    return (*placements[:m], p, *placements[m + 1 :])


RULES: dict[OpKind, Rule] = {OpKind.Sdpa: sdpa_rule}
