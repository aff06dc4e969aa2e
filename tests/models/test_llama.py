"""examples/llama.py against transformers' LlamaForCausalLM: the same random weights (loaded
from the transformers model), logits within 1e-4 on meshes of every parallelism the model
knows (dp, tp, pp, Ulysses and ring context parallelism, and their products, up to all five
on 32 devices; an odd batch and sequence length shard unevenly), in thread mode and, for a
few meshes, in process mode; greedy generation (recomputing, and with the KV cache) equal to
``generate(do_sample=False)``; tied embeddings; the placements the docstring promises; meshes
the model refuses."""

from __future__ import annotations

import doctest
from collections.abc import Iterator

import pytest
import torch
import transformers

import dtorch
import examples.llama
from dtorch import Replicate, Shard
from examples.llama import build_llama, load_hf_weights

pytestmark = pytest.mark.timeout(120)

#: 3 layers so that two pp stages are uneven (2 + 1); GQA with 4 q heads over 2 kv heads.
CONFIG = transformers.LlamaConfig(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    eos_token_id=None,
    bos_token_id=None,
)
#: batch 3 and sequence 7: uneven over dp=2 and over the cp dims.
IDS = torch.randint(0, CONFIG.vocab_size, (3, 7), generator=torch.Generator().manual_seed(1))

_THREAD_MESHES = [
    ((1,), None),
    ((2,), ("dp",)),
    ((2,), ("tp",)),
    ((2,), ("pp",)),
    ((2,), ("ulysess_cp",)),
    ((2,), ("ring_cp",)),
    ((2, 2), ("ulysess_cp", "ring_cp")),
    ((2, 2, 2), ("tp", "pp", "ulysess_cp")),
    ((2, 2, 2), ("pp", "ring_cp", "tp")),
    ((2, 2, 2, 2), ("dp", "tp", "pp", "ring_cp")),
    ((2, 2, 2, 2, 2), ("dp", "tp", "pp", "ulysess_cp", "ring_cp")),
    ((2, 4), ("dp", "tp")),  # tp=4 over 2 kv heads: k/v projections Replicate
    ((4, 2), ("tp", "ring_cp")),  # the same beside ring attention
]
#: Run in thread and process mode (the process set is small: it is slower).
_BOTH_MESHES = [((2,), ("tp",)), ((2, 2, 2), ("tp", "pp", "ring_cp")), ((4,), ("tp",))]


def _hf(config: transformers.LlamaConfig = CONFIG) -> transformers.LlamaForCausalLM:
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def hf() -> transformers.LlamaForCausalLM:
    return _hf()


def _mesh(shape: tuple[int, ...], names: tuple[str, ...] | None) -> dtorch.DeviceMesh:
    return dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)


def _check_logits(hf: transformers.LlamaForCausalLM, mesh: dtorch.DeviceMesh) -> None:
    model = load_hf_weights(build_llama(CONFIG, mesh), hf)
    with torch.no_grad():
        want = hf(IDS).logits
    got = model(model.place_ids(IDS)).to_torch()
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


@pytest.fixture
def thread_graph() -> Iterator[dtorch.Graph]:
    """A thread-mode graph as the default graph (the many-mesh test runs in thread mode;
    process mode runs the ``graph`` fixture's meshes below)."""
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False))
    try:
        with graph.as_default():
            yield graph
    finally:
        graph.close()


@pytest.mark.parametrize(("shape", "names"), _THREAD_MESHES, ids=str)
def test_logits_match_transformers_thread(
    thread_graph: dtorch.Graph,
    hf: transformers.LlamaForCausalLM,
    shape: tuple[int, ...],
    names: tuple[str, ...] | None,
) -> None:
    _check_logits(hf, _mesh(shape, names))


@pytest.mark.parametrize(("shape", "names"), _BOTH_MESHES, ids=str)
def test_logits_match_transformers_both_runners(
    graph: dtorch.Graph,
    hf: transformers.LlamaForCausalLM,
    shape: tuple[int, ...],
    names: tuple[str, ...] | None,
) -> None:
    _check_logits(hf, _mesh(shape, names))


def _greedy(hf: transformers.LlamaForCausalLM, prompt: torch.Tensor, steps: int) -> torch.Tensor:
    """transformers' greedy generation of ``steps`` tokens after ``prompt``."""
    with torch.no_grad():
        return hf.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=steps,
            do_sample=False, pad_token_id=0,
        )  # fmt: skip


@pytest.mark.parametrize("use_cache", [False, True], ids=["recompute", "kv_cache"])
@pytest.mark.parametrize(
    ("shape", "names"),
    [
        ((2, 2), ("dp", "tp")),
        ((2, 2), ("pp", "ring_cp")),
        ((2, 2), ("ulysess_cp", "tp")),
        ((4,), ("tp",)),  # a cache of Replicate kv heads, repeated for tp=4's q heads
    ],
    ids=str,
)
def test_greedy_generation_matches_transformers(
    graph: dtorch.Graph,
    hf: transformers.LlamaForCausalLM,
    shape: tuple[int, ...],
    names: tuple[str, ...],
    use_cache: bool,
) -> None:
    prompt = IDS[:2, :5]
    model = load_hf_weights(build_llama(CONFIG, _mesh(shape, names)), hf)
    want = _greedy(hf, prompt, 4)
    got = model.generate(prompt, max_new_tokens=4, use_cache=use_cache)
    assert want.shape == (2, 9)
    assert torch.equal(got, want)


def test_placements_follow_the_mesh(thread_graph: dtorch.Graph) -> None:
    mesh = _mesh((2, 2, 2), ("dp", "pp", "tp"))
    model = build_llama(CONFIG, mesh)
    first, last = mesh.unbind("pp")
    layers = model.model.layers
    assert [layer.mesh for layer in layers] == [first, first, last]
    assert layers[0].self_attn.k_proj.weight.placements == [Replicate(), Shard(0)]
    assert layers[2].mlp.down_proj.weight.placements == [Replicate(), Shard(1)]
    assert model.model.embed_tokens.weight.device_mesh == first
    assert model.lm_head.weight.device_mesh == last
    ids = model.place_ids(IDS)
    assert (ids.device_mesh, ids.placements) == (first, [Shard(0), Replicate()])
    logits = model(ids)
    assert (logits.device_mesh, logits.placements) == (last, [Shard(0), Replicate()])


def test_cp_shards_the_sequence(thread_graph: dtorch.Graph) -> None:
    model = build_llama(CONFIG, _mesh((2, 2), ("ring_cp", "tp")))
    logits = model(model.place_ids(IDS))
    assert logits.placements == [Shard(1), Replicate()]


@pytest.mark.parametrize(("shape", "names"), [((2,), ("ulysess_cp",)), ((2, 2), ("tp", "ring_cp"))])
def test_rotary_tables_on_the_devices_match_torch(
    graph: dtorch.Graph, shape: tuple[int, ...], names: tuple[str, ...]
) -> None:
    # LlamaRotary's device operators against the torch form, from position 5 (a KV-cache
    # step's offset), the sequence of 7 sharded unevenly on the cp dim (the last mesh dim)
    rotary = examples.llama.LlamaRotary(CONFIG, _mesh(shape, names))
    cos, sin = rotary(7, 5, sharded=True)
    assert cos.placements[-1] == Shard(0) and sin.placements[-1] == Shard(0)
    expected = examples.llama.rotary_cos_sin(CONFIG, 7, 5)
    torch.testing.assert_close(cos.to_torch(), expected[0])
    torch.testing.assert_close(sin.to_torch(), expected[1])
    assert "inv_freq" not in rotary.state_dict()


def test_tied_embeddings_load_from_the_embedding(thread_graph: dtorch.Graph) -> None:
    config = transformers.LlamaConfig(**{**CONFIG.to_dict(), "tie_word_embeddings": True})
    hf = _hf(config)
    assert hf.lm_head.weight is hf.model.embed_tokens.weight
    model = load_hf_weights(build_llama(config, _mesh((2,), ("tp",))), hf)
    with torch.no_grad():
        want = hf(IDS).logits
    torch.testing.assert_close(model(model.place_ids(IDS)).to_torch(), want, atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    ("shape", "names", "prompt"),
    [((2,), ("dp",), IDS[:1, :5]), ((2,), ("ring_cp",), IDS[:2, :1])],
    ids=["batch of one on dp", "one-token prompt on ring_cp"],
)
def test_a_batch_of_one_and_a_prompt_of_one_token_generate(
    graph: dtorch.Graph,
    hf: transformers.LlamaForCausalLM,
    shape: tuple[int, ...],
    names: tuple[str, ...],
    prompt: torch.Tensor,
) -> None:
    """A size-1 dim sharded on dp (or cp) stays sharded through the model's views: they
    refused it (a PlacementError) for a batch of one, or a prompt of one token."""
    model = load_hf_weights(build_llama(CONFIG, _mesh(shape, names)), hf)
    want = _greedy(hf, prompt, 3)
    assert torch.equal(model.generate(prompt, max_new_tokens=3, use_cache=True), want)


@pytest.mark.parametrize("act", ["gelu", "gelu_pytorch_tanh", "relu"])
def test_the_configs_activation_is_used(graph: dtorch.Graph, act: str) -> None:
    """The MLP was SiLU whatever ``hidden_act`` said (logits off by 4e-3 with gelu)."""
    config = transformers.LlamaConfig(**{**CONFIG.to_dict(), "hidden_act": act})
    reference = _hf(config)
    model = load_hf_weights(build_llama(config, _mesh((2,), ("tp",))), reference)
    with torch.no_grad():
        want = reference(IDS).logits
    torch.testing.assert_close(model(model.place_ids(IDS)).to_torch(), want, atol=1e-4, rtol=0)
    unknown = transformers.LlamaConfig(**{**CONFIG.to_dict(), "hidden_act": "tanh"})
    with pytest.raises(ValueError, match="hidden_act 'tanh' is not supported"):
        build_llama(unknown, _mesh((1,), None))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_model_cast_to_half_precision_matches_transformers_cast(
    graph: dtorch.Graph, dtype: torch.dtype
) -> None:
    """``model.to(torch.bfloat16)`` as transformers: rotary tables computed in float32, then
    cast (the bfloat16 inverse frequencies met float32 positions: every forward raised a
    DtypeError)."""
    reference = _hf().to(dtype)
    mesh = _mesh((2, 2), ("tp", "ring_cp"))
    model = load_hf_weights(build_llama(CONFIG, mesh), _hf()).to(dtype)
    with torch.no_grad():
        want = reference(IDS).logits
    got = model(model.place_ids(IDS)).to_torch()
    assert got.dtype == dtype
    ulp = torch.finfo(dtype).eps * want.abs().max().item()  # sums in another order: a few ulps
    torch.testing.assert_close(got, want, atol=4 * ulp, rtol=0)


@pytest.mark.parametrize(
    ("shape", "names", "match"),
    [
        ((2,), ("cp",), "unknown names"),
        ((8,), ("tp",), "attention heads"),
        ((2, 4), ("ulysess_cp", "tp"), "attention heads"),  # Ulysses splits the heads too
        ((2, 2), None, "names"),
    ],
    ids=str,
)
def test_bad_meshes_are_refused(
    thread_graph: dtorch.Graph, shape: tuple[int, ...], names: tuple[str, ...] | None, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        build_llama(CONFIG, _mesh(shape, names))


def test_docstring_examples(thread_graph: dtorch.Graph) -> None:
    result = doctest.testmod(examples.llama, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0
