"""A Llama decoder written with ``dtorch.nn``, on any mesh of the named dims ``dp``, ``tp``,
``pp``, ``ulysess_cp`` and ``ring_cp`` (each optional, in any order).

The architecture is transformers' ``LlamaForCausalLM`` (default rotary embeddings, GQA
attention, SwiGLU MLP, RMSNorm, untied or tied lm head; no biases unless the config asks):

* ``dp``: the batch (dim 0 of the ids) is sharded; every parameter is Replicate there.
* ``tp``: Megatron tensor parallelism. q/k/v/gate/up are ``ColumnParallelLinear`` (heads and
  intermediate features sharded), o/down ``RowParallelLinearWithReplicateOutput`` (an
  all-reduce each), the embedding ``EmbeddingWithReplicateOutput`` (vocab sharded) and the lm
  head ``ColumnParallelLinearWithReplicateOutput``. The attention heads must split evenly
  over tp; where the kv heads do not (tp=4 over 2 kv heads), k/v are
  ``ReplicateParallelLinear`` and attention repeats each kv head for the devices that read it.
* ``pp``: pipeline stages. ``mesh.unbind("pp")`` gives one sub-mesh per pp index (the pp dim
  removed, the other dims kept); ``assign_layers_to_stages`` splits the decoder layers over
  them. The embedding lives on the first stage, the final norm and lm head on the last, and
  the hidden states are redistributed onto the next stage's mesh (same placements) between
  stages. There is no micro-batching: stages run one after the other.
* ``ulysess_cp`` / ``ring_cp``: context parallelism. The sequence (dim 1 of the ids) is
  sharded on those mesh dims; every op but attention is local along the sequence (rotary
  cos/sin are sharded alike), and ``F.scaled_dot_product_attention`` runs Ulysses and/or ring
  attention (``SdpaOption``, default names) on causal attention.

``model(ids)`` computes the logits of a whole sequence (``place_ids`` places the torch ids);
``model.decode(ids, past)`` does so with a KV cache, and ``model.generate(ids, n,
use_cache=...)`` decodes greedily, with the cache or recomputing the whole sequence each step.
``build_llama(config, mesh)`` builds the model with random weights; ``load_hf_weights(model,
hf_model_or_state_dict)`` loads a ``transformers.LlamaForCausalLM``'s weights. The module tree
mirrors transformers' so the keys map one to one (``model.embed_tokens.weight``,
``model.layers.{i}.self_attn.{q,k,v,o}_proj.weight``, ``model.layers.{i}.mlp.{gate,up,
down}_proj.weight``, ``model.layers.{i}.{input,post_attention}_layernorm.weight``,
``model.norm.weight``, ``lm_head.weight``); the only mapping is a tied checkpoint without
``lm_head.weight`` reading it from ``model.embed_tokens.weight``. ``Module.load_state_dict``
shards each full tensor onto its parameter's mesh and placements one at a time.

Example:
    >>> import torch, transformers, dtorch
    >>> from examples.llama import build_llama, load_hf_weights, TINY
    >>> torch.manual_seed(0) and None
    >>> hf = transformers.LlamaForCausalLM(TINY).eval()
    >>> mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    >>> model = load_hf_weights(build_llama(TINY, mesh), hf)
    >>> ids = torch.randint(0, TINY.vocab_size, (2, 8))
    >>> logits = model(model.place_ids(ids)).to_torch()
    >>> torch.allclose(logits, hf(ids).logits, atol=1e-4)
    True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
import transformers

import dtorch
import dtorch.nn.functional as F
from dtorch import nn
from dtorch.distributed_spec import assign_layers_to_stages
from dtorch.ir.placement import Placement, Replicate, Shard

#: The mesh dim names the model understands (``ulysess``: DTorch's spelling).
DIM_NAMES = ("dp", "tp", "pp", "ulysess_cp", "ring_cp")
CP_DIMS = ("ulysess_cp", "ring_cp")
#: One layer's cached (keys, values), each (batch, kv heads, seq, head dim).
KV = tuple[dtorch.Tensor, dtorch.Tensor]

#: A small config for tests and examples (random init; no bos/eos, so that greedy generation
#: never stops early).
TINY = transformers.LlamaConfig(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    bos_token_id=None,
    eos_token_id=None,
)


def seq_placements(mesh: dtorch.DeviceMesh, batch: int | None, seq: int | None) -> list[Placement]:
    """Placements of a tensor whose dim ``batch`` is the batch and ``seq`` the sequence
    (None: not sharded): ``Shard(batch)`` on dp, ``Shard(seq)`` on the cp dims, Replicate
    elsewhere."""
    shard = {} if seq is None else dict.fromkeys(CP_DIMS, Shard(seq))
    if batch is not None:
        shard["dp"] = Shard(batch)
    return [shard.get(name, Replicate()) for name in _dim_names(mesh)]


def _dim_names(mesh: dtorch.DeviceMesh) -> list[str]:
    # one name per mesh dim ("" for an unnamed one-device mesh)
    return list(mesh.dim_names or [""] * mesh.ndim)


def _rope_theta(config: transformers.LlamaConfig) -> float:
    # transformers 5 keeps it in rope_parameters, older versions as config.rope_theta
    params = getattr(config, "rope_parameters", None) or {}
    kind = params.get("rope_type", "default")
    if kind != "default":
        raise ValueError(f"llama: rope_type {kind!r} is not supported; accepted: 'default'")
    return float(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def rotary_cos_sin(
    config: transformers.LlamaConfig, seq: int, start: int = 0
) -> tuple[torch.Tensor, ...]:
    """transformers' default rotary ``cos``, ``sin`` for positions ``start..start+seq-1``:
    ``(seq, head_dim)`` each, the frequencies twice (``rotate_half``'s layout). In torch, for
    tests and references; the model computes the same on its devices (``LlamaRotary``)."""
    freqs = torch.arange(start, start + seq, dtype=torch.float)[:, None] * inv_freq(config)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def inv_freq(config: transformers.LlamaConfig) -> torch.Tensor:
    """The rotary inverse frequencies, ``(head_dim // 2,)`` float32, as transformers has them."""
    dim = _head_dim(config)
    return 1.0 / (_rope_theta(config) ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))


class LlamaRotary(nn.Module):
    """The rotary ``cos``, ``sin`` of a stage, computed on its devices for each forward.

    Only the inverse frequencies (a non-persistent buffer, Replicate) travel, once: the
    positions, their products, ``cos`` and ``sin`` are device operators. Computing the tables
    in torch on the client instead made the client thread start torch's OpenMP team for
    ``cos``/``sin``, whose threads then spin on the cores the device streams run on (about
    25% of a tp=2 forward of benchmarks/models.py in thread mode).
    """

    def __init__(self, config: transformers.LlamaConfig, mesh: dtorch.DeviceMesh) -> None:
        super().__init__()
        replicate = [Replicate()] * mesh.ndim
        freqs = dtorch.from_torch(inv_freq(config), device_mesh=mesh, placements=replicate)
        self.inv_freq = nn.Buffer(freqs, persistent=False)

    def forward(
        self, seq: int, start: int, sharded: bool, dtype: torch.dtype = torch.float32
    ) -> list[dtorch.Tensor]:
        """``[cos, sin]`` for positions ``start..start+seq-1``, ``(seq, head_dim)``, the
        sequence sharded on the cp dims when ``sharded`` (as the hidden states' is), in
        ``dtype``. Computed in float32 whatever the model's dtype, as transformers does
        (bfloat16 angles would be off by whole radians at long positions)."""
        freqs = self.inv_freq  # its mesh and graph (the model's: not always the default one)
        if freqs.dtype != torch.float32:  # after model.to(dtype)
            freqs = freqs.float()
        placements = seq_placements(freqs.device_mesh, None, 0 if sharded else None)
        positions = dtorch.arange(
            start,
            start + seq,
            dtype=torch.float,
            device_mesh=freqs.device_mesh,
            placements=placements,
            graph=freqs.graph,
        )
        angles = positions.unsqueeze(1) * freqs.unsqueeze(0)
        emb = dtorch.cat([angles, angles], dim=-1)
        if dtype == torch.float32:
            return [emb.cos(), emb.sin()]
        return [emb.cos().to(dtype), emb.sin().to(dtype)]


def _heads(config: transformers.LlamaConfig) -> tuple[int, int]:
    # (q heads, kv heads); transformers types them Optional, and kv defaults to q
    heads = int(config.num_attention_heads)
    return heads, int(config.num_key_value_heads or heads)


def _head_dim(config: transformers.LlamaConfig) -> int:
    head_dim = getattr(config, "head_dim", None)
    return int(head_dim or config.hidden_size // _heads(config)[0])


def _kv_linear(mesh: dtorch.DeviceMesh, kv_heads: int) -> type[nn.Module]:
    """Column-parallel k/v projections where tp splits the kv heads; else Replicate ones (tp=4
    over 2 kv heads), whose heads attention repeats for the devices' q heads."""
    tp = mesh.dim_name_index("tp")
    if tp is None or kv_heads % mesh.shape[tp] == 0:
        return nn.ColumnParallelLinear
    return nn.ReplicateParallelLinear


class LlamaAttention(nn.Module):
    """GQA self-attention: heads sharded on tp, sequence on the cp dims, causal."""

    def __init__(self, config: transformers.LlamaConfig, mesh: dtorch.DeviceMesh) -> None:
        super().__init__()
        self.heads, self.kv_heads = _heads(config)
        self.head_dim = _head_dim(config)
        hidden, bias = config.hidden_size, bool(config.attention_bias)
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        self.q_proj = nn.ColumnParallelLinear(hidden, q, bias, device_mesh=mesh)
        kv_linear = _kv_linear(mesh, self.kv_heads)
        self.k_proj = kv_linear(hidden, kv, bias, device_mesh=mesh)
        self.v_proj = kv_linear(hidden, kv, bias, device_mesh=mesh)
        self.o_proj = nn.RowParallelLinearWithReplicateOutput(q, hidden, bias, device_mesh=mesh)

    def _split(self, x: dtorch.Tensor, heads: int) -> dtorch.Tensor:
        # (batch, seq, heads * head_dim) -> (batch, heads, seq, head_dim)
        batch, seq, _ = x.shape
        return x.view(batch, seq, heads, self.head_dim).transpose(1, 2)

    def forward(
        self, x: dtorch.Tensor, cos_sin: list[dtorch.Tensor], past: KV | None = None
    ) -> tuple[dtorch.Tensor, KV]:
        """The output and this call's keys/values (``past``'s, then the new ones). With
        ``past``, ``x`` is one new position, which attends to every cached one."""
        batch, seq, _ = x.shape
        q = F._apply_rotary_emb(self._split(self.q_proj(x), self.heads), cos_sin)
        k = F._apply_rotary_emb(self._split(self.k_proj(x), self.kv_heads), cos_sin)
        v = self._split(self.v_proj(x), self.kv_heads)
        if past is not None:
            k, v = dtorch.cat([past[0], k], dim=2), dtorch.cat([past[1], v], dim=2)
        gqa = self.kv_heads != self.heads
        out = F.scaled_dot_product_attention(q, k, v, is_causal=past is None, enable_gqa=gqa)
        out = out.transpose(1, 2).reshape(batch, seq, self.heads * self.head_dim)
        return self.o_proj(out), (k, v)


#: transformers' ``hidden_act`` names the model knows (``ACT2FN``), as dtorch functions.
_ACTIVATIONS: dict[str, Callable[[dtorch.Tensor], dtorch.Tensor]] = {
    "silu": F.silu,
    "swish": F.silu,
    "gelu": F.gelu,
    "gelu_pytorch_tanh": functools.partial(F.gelu, approximate="tanh"),
    "gelu_new": functools.partial(F.gelu, approximate="tanh"),
    "relu": F.relu,
}


class LlamaMLP(nn.Module):
    """SwiGLU: ``down(act(gate(x)) * up(x))`` (``act``: the config's ``hidden_act``, SiLU for
    Llama), intermediate features sharded on tp."""

    def __init__(self, config: transformers.LlamaConfig, mesh: dtorch.DeviceMesh) -> None:
        super().__init__()
        hidden, inner, bias = config.hidden_size, config.intermediate_size, bool(config.mlp_bias)
        self.gate_proj = nn.ColumnParallelLinear(hidden, inner, bias, device_mesh=mesh)
        self.up_proj = nn.ColumnParallelLinear(hidden, inner, bias, device_mesh=mesh)
        self.down_proj = nn.RowParallelLinearWithReplicateOutput(
            inner, hidden, bias, device_mesh=mesh
        )
        self.act = _ACTIVATIONS[config.hidden_act]

    def forward(self, x: dtorch.Tensor) -> dtorch.Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    """Pre-norm residual block: attention, then the MLP."""

    def __init__(self, config: transformers.LlamaConfig, mesh: dtorch.DeviceMesh) -> None:
        super().__init__()
        self.mesh = mesh
        eps = config.rms_norm_eps
        self.self_attn = LlamaAttention(config, mesh)
        self.mlp = LlamaMLP(config, mesh)
        self.input_layernorm = nn.RMSNorm(config.hidden_size, eps=eps, device_mesh=mesh)
        self.post_attention_layernorm = nn.RMSNorm(config.hidden_size, eps=eps, device_mesh=mesh)

    def forward(
        self, x: dtorch.Tensor, cos_sin: list[dtorch.Tensor], past: KV | None = None
    ) -> tuple[dtorch.Tensor, KV]:
        attended, kv = self.self_attn(self.input_layernorm(x), cos_sin, past)
        x = x + attended
        return x + self.mlp(self.post_attention_layernorm(x)), kv


class LlamaModel(nn.Module):
    """Embedding (first stage), the decoder layers over the pp stages, final norm (last)."""

    def __init__(self, config: transformers.LlamaConfig, stages: list[dtorch.DeviceMesh]) -> None:
        super().__init__()
        self.config = config
        self.stages = stages
        groups = assign_layers_to_stages(config.num_hidden_layers, len(stages))
        self.stage_of = [s for s, group in enumerate(groups) for _ in group]
        self.embed_tokens = nn.EmbeddingWithReplicateOutput(
            config.vocab_size, config.hidden_size, device_mesh=stages[0]
        )
        self.layers = nn.ModuleList(LlamaDecoderLayer(config, stages[s]) for s in self.stage_of)
        self.norm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps, device_mesh=stages[-1])
        self.rotary = nn.ModuleList(LlamaRotary(config, mesh) for mesh in stages)

    def forward(
        self, ids: dtorch.Tensor, past: list[KV] | None = None
    ) -> tuple[dtorch.Tensor, list[KV]]:
        """The final hidden states and every layer's keys/values (see ``LlamaAttention``)."""
        x = self.embed_tokens(ids)
        start = 0 if past is None else past[0][0].shape[2]
        cos_sin: dict[int, list] = {}
        cache: list[KV] = []
        for i, (layer, stage) in enumerate(zip(self.layers, self.stage_of, strict=True)):
            mesh = self.stages[stage]
            x = _onto(x, mesh)
            if stage not in cos_sin:
                rotary = self.rotary[stage]
                cos_sin[stage] = rotary(ids.shape[1], start, _seq_sharded(ids), x.dtype)
            x, kv = layer(x, cos_sin[stage], None if past is None else past[i])
            cache.append(kv)
        return self.norm(_onto(x, self.stages[-1])), cache


class LlamaForCausalLM(nn.Module):
    """transformers' ``LlamaForCausalLM`` on a dtorch mesh (see the module docstring).

    ``forward(ids)`` takes ids placed by ``place_ids`` (a ``(batch, seq)`` int64 dtorch
    tensor on the first stage's mesh) and returns the logits ``(batch, seq, vocab)`` on the
    last stage's mesh (batch sharded on dp, sequence on the cp dims, Replicate on tp).
    """

    def __init__(self, config: transformers.LlamaConfig, mesh: dtorch.DeviceMesh) -> None:
        super().__init__()
        _check_mesh(config, mesh)
        self.config = config
        self.device_mesh = mesh
        stages = mesh.unbind("pp")
        self.model = LlamaModel(config, stages)
        self.lm_head = nn.ColumnParallelLinearWithReplicateOutput(
            config.hidden_size, config.vocab_size, False, device_mesh=stages[-1]
        )

    def place_ids(
        self, ids: torch.Tensor, graph: Any = None, shard_seq: bool = True
    ) -> dtorch.Tensor:
        """``ids`` (batch, seq) on the first stage: batch on dp, sequence on the cp dims
        (``shard_seq=False``: Replicate there)."""
        mesh = self.model.stages[0]
        placements = seq_placements(mesh, batch=0, seq=1 if shard_seq else None)
        return dtorch.from_torch(ids, device_mesh=mesh, placements=placements, graph=graph)

    def forward(self, ids: dtorch.Tensor) -> dtorch.Tensor:
        return self.lm_head(self.model(ids)[0])

    def decode(
        self, ids: dtorch.Tensor, past: list[KV] | None = None
    ) -> tuple[dtorch.Tensor, list[KV]]:
        """``forward`` with a KV cache: the logits and the cache to pass next time. Without
        ``past``, ``ids`` is the prompt (sequence sharded on the cp dims, ``place_ids``);
        with it, one new position (``place_ids(..., shard_seq=False)``). The returned cache
        holds the sequence Replicate on the cp dims (one new query attends to it locally)."""
        hidden, cache = self.model(ids, past)
        return self.lm_head(hidden), [(_seq_replicated(k), _seq_replicated(v)) for k, v in cache]

    def generate(
        self, ids: torch.Tensor, max_new_tokens: int, use_cache: bool = False
    ) -> torch.Tensor:
        """Greedy decoding (transformers' ``generate(do_sample=False)`` without eos
        stopping): ``max_new_tokens`` times, append the argmax of the last position's
        logits. Without ``use_cache`` every step recomputes the whole sequence so far; with
        it, the prompt runs once (``decode``) and each step runs one new position against
        the KV cache. ``ids`` and the result are torch int64 ``(batch, seq)``.

        Example:
            >>> import torch, dtorch
            >>> from examples.llama import build_llama, TINY
            >>> model = build_llama(TINY, dtorch.init_device_mesh("cpu", 1))
            >>> model.generate(torch.zeros(1, 3, dtype=torch.long), 2).shape
            torch.Size([1, 5])
        """
        graph = self.model.embed_tokens.weight.graph
        step, past = ids, None
        for _ in range(max_new_tokens):
            placed = self.place_ids(step, graph, shard_seq=past is None)
            if use_cache:
                logits, past = self.decode(placed, past)
            else:
                logits = self(placed)
            best = logits.argmax(-1).to_torch()  # (batch, seq): the sequence may be sharded
            ids = torch.cat([ids, best[:, -1:].to(ids.dtype)], dim=1)
            step = ids[:, -1:] if use_cache else ids
        return ids


def _onto(x: dtorch.Tensor, mesh: dtorch.DeviceMesh) -> dtorch.Tensor:
    """``x`` moved to the next pipeline stage's mesh (same dim names, same placements)."""
    return x if x.device_mesh == mesh else x.redistribute(mesh, list(x.placements))


def _seq_sharded(ids: dtorch.Tensor) -> bool:
    # whether the ids' sequence is sharded on a cp mesh dim (prompt) or not (one new step)
    pairs = zip(_dim_names(ids.device_mesh), ids.placements, strict=True)
    return any(n in CP_DIMS and p == Shard(1) for n, p in pairs)


def _seq_replicated(t: dtorch.Tensor) -> dtorch.Tensor:
    """``t`` with Replicate on the cp mesh dims (a KV cache entry one query reads whole)."""
    pairs = zip(_dim_names(t.device_mesh), t.placements, strict=True)
    placements = [Replicate() if n in CP_DIMS else p for n, p in pairs]
    return t if placements == list(t.placements) else t.redistribute(placements=placements)


def _check_mesh(config: transformers.LlamaConfig, mesh: dtorch.DeviceMesh) -> None:
    """Dim names the model knows; kv heads that split over tp; an activation it knows."""
    if config.hidden_act not in _ACTIVATIONS:
        raise ValueError(
            f"llama: hidden_act {config.hidden_act!r} is not supported; accepted: "
            f"{sorted(_ACTIVATIONS)}"
        )
    names = mesh.dim_names or []
    unknown = [n for n in names if n not in DIM_NAMES]
    if unknown or (mesh.ndim > 1 and not names):
        raise ValueError(
            f"llama: mesh dims {names or mesh.shape} include unknown names {unknown}; "
            f"accepted: names among {list(DIM_NAMES)}"
        )
    heads = _heads(config)[0]
    split = {n: mesh.shape[i] for i, n in enumerate(names) if n in ("tp", "ulysess_cp")}
    if heads % math.prod(split.values()):  # Ulysses attention splits the heads too
        raise ValueError(
            f"llama: {heads} attention heads do not split over {split}; accepted: tp (times "
            "ulysess_cp) dividing the attention heads"
        )


def build_llama(config: transformers.LlamaConfig, mesh: dtorch.DeviceMesh) -> LlamaForCausalLM:
    """A randomly initialised Llama for ``config`` on ``mesh`` (dims named among
    ``DIM_NAMES``; a one-device mesh runs unsharded).

    Example:
        >>> import dtorch
        >>> from examples.llama import build_llama, TINY
        >>> mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "tp"))
        >>> model = build_llama(TINY, mesh)
        >>> model.model.layers[1].mlp.up_proj.weight.device_mesh.device_ids
        (2, 3)
    """
    model = LlamaForCausalLM(config, mesh)
    model.eval()
    return model


def hf_state_dict(hf: Any) -> Mapping[str, torch.Tensor]:
    """The weights of a transformers ``LlamaForCausalLM`` (or a state dict of one) under
    this model's keys: the same keys, ``lm_head.weight`` taken from the embedding when the
    checkpoint ties them, non-persistent rotary buffers dropped."""
    state = dict(hf.state_dict() if hasattr(hf, "state_dict") else hf)
    state = {k: v for k, v in state.items() if "rotary_emb" not in k}
    if "lm_head.weight" not in state:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    return state


def load_hf_weights(model: LlamaForCausalLM, hf: Any) -> LlamaForCausalLM:
    """Load a transformers ``LlamaForCausalLM``'s weights (the model or its state dict)
    into ``model`` (strict; one tensor sharded at a time) and return ``model``."""
    model.load_state_dict(hf_state_dict(hf))
    return model
