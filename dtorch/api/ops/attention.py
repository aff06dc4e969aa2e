"""``scaled_dot_product_attention`` and context-parallel attention (``SdpaOption``).

torch's semantics and shapes: q ``(..., Hq, L, E)``, k ``(..., Hk, S, E)``, v ``(..., Hk, S,
Ev)``, an optional mask broadcasting to ``(..., Hq, L, S)`` (bool: True attends; float: added
to the scores), ``is_causal`` (top-left aligned, as torch), ``scale`` (default
``1 / sqrt(E)``), ``enable_gqa`` (q head ``h`` reads kv head ``h // (Hq // Hk)``).
``dropout_p > 0`` is refused: torch draws the dropout mask inside its fused kernel, which
dtorch cannot reproduce shard by shard; apply ``dropout`` to the inputs or use 0.

Placements (``dtorch.ir.rules.attention``): batch and head dims shard freely (q, k, v alike;
with GQA the kv heads must split evenly: Replicate ones that do not are repeated first, the
fewest times that makes them), the mask follows, the query sequence may be sharded with k/v
replicated (causal masking uses each device's global query offset), v's feature
dim may be sharded, and ``R R P -> P`` on v. Everything else is refused.

Context parallelism: where q, k and v are all sharded on their sequence dim (``-2``) on a mesh
dim named ``SdpaOption.ulysess_cp_dim`` ("ulysess_cp", DTorch's spelling), attention runs
Ulysses: q, k, v are redistributed sequence -> heads on that mesh dim (one all-to-all each),
attention runs on whole sequences, and the output goes back heads -> sequence. On a mesh dim
named ``SdpaOption.ring_cp_dim`` ("ring_cp") it runs ring attention: the key/value blocks
go around that mesh dim with an online softmax (``dtorch.kernels.attention``). Both together
on a 2-D cp mesh: Ulysses first, then the ring on what the ring dim still splits. With GQA,
kv heads that do not split over the Ulysses devices are repeated to the q heads first. The
option is a keyword (``sdpa_option=``); without it the default names apply. A mask cannot be
combined with context parallelism (use ``is_causal``).

Example:
    >>> import torch, dtorch
    >>> import dtorch.nn.functional as F
    >>> mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("ring_cp",))
    >>> q, k, v = (torch.randn(1, 2, 6, 4, generator=torch.Generator().manual_seed(i))
    ...            for i in range(3))
    >>> dq, dk, dv = (dtorch.tensor(t, device_mesh=mesh, placements=[dtorch.Shard(2)])
    ...               for t in (q, k, v))
    >>> out = F.scaled_dot_product_attention(dq, dk, dv, is_causal=True)
    >>> want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    >>> out.placements, torch.allclose(out.to_torch(), want, atol=1e-6)
    ([Shard(dim=2)], True)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.creation import from_torch
from dtorch.api.dims import as_flag
from dtorch.api.ops.repeats import repeat_interleave
from dtorch.api.ops.scalars import as_real
from dtorch.api.record import record_one, tensor_arg
from dtorch.errors import ParamError, PlacementError
from dtorch.ir.params import SdpaParam
from dtorch.ir.placement import Placement, Replicate, Shard, format_placements

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_NAME = "scaled_dot_product_attention"


@dataclass(frozen=True, slots=True)
class SdpaOption:
    """Names of the mesh dims that run context-parallel attention (``ulysess``: DTorch's
    spelling). Pass it as ``scaled_dot_product_attention(..., sdpa_option=SdpaOption(...))``.

    Example:
        >>> SdpaOption(ring_cp_dim="cp").ring_cp_dim
        'cp'
    """

    ulysess_cp_dim: str = "ulysess_cp"
    ring_cp_dim: str = "ring_cp"


_DEFAULT = SdpaOption()


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    sdpa_option: SdpaOption | None = None,
) -> Tensor:
    """``torch.nn.functional.scaled_dot_product_attention`` (see the module for placements
    and context parallelism; ``attn_mask`` may be a dtorch or torch tensor).

    Example:
        >>> import torch, dtorch
        >>> import dtorch.nn.functional as F
        >>> q = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0))
        >>> out = F.scaled_dot_product_attention(dtorch.tensor(q), dtorch.tensor(q),
        ...                                      dtorch.tensor(q), is_causal=True)
        >>> want = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        >>> torch.allclose(out.to_torch(), want)
        True
    """
    if as_real(f"{_NAME}: dropout_p", dropout_p):
        raise ParamError(
            f"{_NAME}: dropout_p={dropout_p} is not supported (torch draws the mask inside its "
            "kernel, which dtorch cannot reproduce); accepted: dropout_p=0.0"
        )
    for i, t in enumerate((query, key, value)):  # before their shapes are read
        tensor_arg(_NAME, t, f"input {i}")
    query, key, value = _broadcast_leading(query, key, value)
    mask = None if attn_mask is None else _on_mesh_of(query, attn_mask)
    param = SdpaParam(
        as_flag(is_causal, _NAME, "is_causal"), None if scale is None else float(scale), 0.0,
        mask is not None, as_flag(enable_gqa, _NAME, "enable_gqa"),
    )  # fmt: skip
    option = sdpa_option if sdpa_option is not None else _DEFAULT
    ulysses, ring = (_cp_dim(t, (query, key, value)) for t in _names(option))
    if ulysses is None:  # Ulysses repeats the kv heads its own way (_kv_for_ulysses)
        key, value, param = _kv_for_head_split(query, key, value, param)
    if ulysses is None and ring is None:
        inputs = (query, key, value) if mask is None else (query, key, value, mask)
        return record_one(_NAME, param, inputs)
    if mask is not None:
        raise PlacementError(
            f"{_NAME}: got an attn_mask with q, k, v sharded on their sequence for context-"
            "parallel attention; accepted: is_causal=True or no mask there (or redistribute "
            "the sequence to Replicate)"
        )
    return _context_parallel(query, key, value, param, ulysses, ring)


def _broadcast_leading(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """q, k, v with their leading dims broadcast as torch's attention does (batch dims of
    size 1, missing leading dims, one head against many); with GQA's differing head counts
    only the dims before the heads broadcast. Shapes that do not broadcast are left for the
    rule, which names them."""
    if q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        return q, k, v  # the usual case: nothing to do, no operator
    for keep in (2, 3):  # all leading dims, else those before the heads (GQA)
        if min(t.ndim for t in (q, k, v)) < keep:
            break
        try:
            lead = torch.broadcast_shapes(*(t.shape[:-keep] for t in (q, k, v)))
        except RuntimeError:
            continue
        try:
            q, k, v = (_expanded(t, lead, keep) for t in (q, k, v))
        except PlacementError as error:
            raise _unbroadcastable(q, k, v, lead, error) from None
        return q, k, v
    return q, k, v


def _kv_for_head_split(
    q: Tensor, k: Tensor, v: Tensor, param: SdpaParam
) -> tuple[Tensor, Tensor, SdpaParam]:
    """GQA k, v that no mesh dim shards by head, repeated the fewest times (``r``) that gives
    each device of q's head split whole kv heads for its q heads: tp=4 over 8 q heads and 2
    kv heads reads each kv head on two devices. q head ``h`` then reads repeated head
    ``h // (g / r)``, which is kv head ``h // g`` (``g = Hq / Hk``), as torch's repeat."""
    if not param.enable_gqa or q.ndim < 3 or k.ndim != q.ndim or v.ndim != q.ndim:
        return k, v, param
    heads = q.ndim - 3
    hq, hk = q.shape[heads], k.shape[heads]
    mesh = q.device_mesh
    parts = _head_parts(q)
    if hq == hk or hk % parts == 0 or hq % hk or hk != v.shape[heads]:
        return k, v, param  # nothing to do, or what the rule names
    if {k.device_mesh, v.device_mesh} != {mesh} or Shard(heads) in (*k.placements, *v.placements):
        return k, v, param
    # parts dividing Hq = Hk * g: r divides g; else (an uneven head split) each kv head once
    # per q head, so every device's q heads meet theirs however torch.chunk splits them
    r = parts // math.gcd(hk, parts) if hq % parts == 0 else hq // hk
    k, v = (repeat_interleave(t, r, heads) for t in (k, v))
    return k, v, param


def _head_parts(q: Tensor) -> int:
    """Into how many parts the mesh dims that shard q's heads (dim -3) split them."""
    heads, sizes = Shard(q.ndim - 3), q.device_mesh.shape
    return math.prod(n for p, n in zip(q.placements, sizes, strict=True) if p == heads)


def _unbroadcastable(
    q: Tensor, k: Tensor, v: Tensor, lead: torch.Size, error: PlacementError
) -> PlacementError:
    """Attention's refusal of leading dims that broadcast (a kv head against q's heads)
    where they are sharded: a sharded size-1 dim cannot be expanded on the devices."""
    shapes = ", ".join(
        f"{list(t.shape)} {format_placements(tuple(t.placements))}" for t in (q, k, v)
    )
    return PlacementError(
        f"{_NAME}: q, k, v ({shapes}) broadcast their leading dims to {list(lead)}, but a "
        f"dim that broadcasts from size 1 is sharded ({error}); accepted: Replicate on the "
        "dims that broadcast (redistribute them first), or as many kv heads as the mesh "
        "splits (enable_gqa with Hk divisible by the head shards)"
    )


def _expanded(t: Tensor, lead: torch.Size, keep: int) -> Tensor:
    # ``t`` expanded to ``lead`` before its last ``keep`` dims (a view where nothing changes)
    if t.shape[:-keep] == lead:
        return t
    return t.expand(*lead, *t.shape[-keep:])


def _names(option: SdpaOption) -> tuple[str, str]:
    if not isinstance(option, SdpaOption):
        raise TypeError(f"{_NAME}: sdpa_option must be an SdpaOption, got {type(option).__name__}")
    return option.ulysess_cp_dim, option.ring_cp_dim


def _on_mesh_of(x: Tensor, value: Any) -> Tensor:
    """A torch mask distributed Replicate on ``x``'s mesh; a dtorch one as it is."""
    if not isinstance(value, torch.Tensor):
        return value
    mesh = x.device_mesh
    return from_torch(value, graph=x.graph, device_mesh=mesh, placements=[Replicate()] * mesh.ndim)


def _cp_dim(name: str, qkv: tuple[Tensor, Tensor, Tensor]) -> int | None:
    """The mesh dim called ``name`` where q, k and v all shard their sequence, or None."""
    mesh = qkv[0].device_mesh
    m = mesh.dim_name_index(name)
    if m is None or qkv[0].ndim < 2:
        return None
    seq = Shard(qkv[0].ndim - 2)
    return m if all(t.placements[m] == seq for t in qkv) else None


def _context_parallel(
    q: Tensor, k: Tensor, v: Tensor, param: SdpaParam, ulysses: int | None, ring: int | None
) -> Tensor:
    """Ulysses on ``ulysses`` (sequence <-> heads), ring attention on ``ring``."""
    if ring is not None:
        param = dataclasses.replace(param, ring_dim=ring)
    if ulysses is None:
        return record_one(_NAME, param, (q, k, v))
    if q.ndim < 3:
        raise PlacementError(
            f"{_NAME}: Ulysses attention got q of shape {list(q.shape)} with "
            f"{format_placements(tuple(q.placements))}; accepted: a head dim (..., H, L, E)"
        )
    k, v, param = _kv_for_ulysses(q, k, v, param, ulysses)
    heads = Shard(q.ndim - 3)
    out = record_one(_NAME, param, tuple(_at(t, ulysses, heads) for t in (q, k, v)))
    return _at(out, ulysses, q.placements[ulysses])


def _kv_for_ulysses(
    q: Tensor, k: Tensor, v: Tensor, param: SdpaParam, ulysses: int
) -> tuple[Tensor, Tensor, SdpaParam]:
    """k, v with heads that split over the Ulysses devices: GQA heads repeated if need be."""
    hq, hk = q.shape[-3], k.shape[-3]
    heads = q.ndim - 3
    # q's head split (k/v Replicate there are chunked as q's heads), times Ulysses'
    parts = k.device_mesh.shape[ulysses] * _head_parts(q)
    if hq == hk or hk % parts == 0:
        return k, v, param
    group = hq // hk
    k, v = (repeat_interleave(t, group, heads) for t in (k, v))
    return k, v, dataclasses.replace(param, enable_gqa=False)


def _at(t: Tensor, m: int, p: Placement) -> Tensor:
    """``t`` redistributed to ``p`` on mesh dim ``m`` (the other mesh dims kept)."""
    placements = list(t.placements)
    if placements[m] == p:
        return t
    placements[m] = p
    return t.redistribute(placements=placements)
