"""Traced programs on the example models: ``dtorch.trace`` of examples/llama.py's and
examples/vision.py's forward, replayed on new inputs of the traced shape, in thread and
process mode.

* Llama (eval): on one device and on tp2, dp2 x tp2, pp2 (uneven stages) and ring_cp2
  meshes, the replayed logits of new ids are transformers' (the model tests' 1e-4) and the
  eager dtorch forward's on the same ids (exactly: the same kernels run), and one call records
  a single SubGraph operator. One KV-cache decode step (dp2 x tp2) replays likewise.
* ResNet-18 and AlexNet (eval, BatchNorm on running statistics): replays of new batches,
  unsharded and batch sharded on dp2, equal the torch.nn reference (float32 tolerance).
* Training mode: AlexNet's Dropout(p>0) is refused with a TraceError naming the model's line;
  ResNet-18's BatchNorm statistics, which a training forward updates in place, are updated by
  every replay as torch updates them (output, running mean/var, batch count); a BatchNorm
  with ``momentum=None`` (a cumulative average: it reads its batch count) is refused.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import torch
import transformers

import dtorch
from dtorch import Replicate, Shard
from dtorch.ir.opkind import OpKind
from dtorch.program.spec_checks import check_spec
from examples import vision
from examples.llama import build_llama, load_hf_weights
from tests.models import reference_vision as ref
from tests.models.test_llama import CONFIG
from tests.models.test_vision import SIZE, _calibrated

pytestmark = pytest.mark.timeout(120)

#: Ids as the Llama model tests use them: batch 3 and sequence 7 (uneven on dp2 and ring_cp2).
IDS_SHAPE = (3, 7)

_LLAMA_MESHES = [
    ((1,), None),
    ((2,), ("tp",)),
    ((2, 2), ("dp", "tp")),
    ((2,), ("pp",)),
    ((2,), ("ring_cp",)),
]


def _ids(seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, CONFIG.vocab_size, IDS_SHAPE, generator=generator)


@pytest.fixture(scope="module")
def hf() -> transformers.LlamaForCausalLM:
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(CONFIG).eval()


@pytest.mark.parametrize(("shape", "names"), _LLAMA_MESHES, ids=str)
def test_llama_replay_matches_transformers_and_eager(
    graph: dtorch.Graph,
    kinds: list[OpKind],
    hf: transformers.LlamaForCausalLM,
    shape: tuple[int, ...],
    names: tuple[str, ...] | None,
) -> None:
    mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)
    model = load_hf_weights(build_llama(CONFIG, mesh), hf).eval()
    program = dtorch.trace(model, model.place_ids(_ids(0)))
    check_spec(program.spec)  # a file of it would load: every rule agrees
    for seed in (1, 2, 3):
        ids = _ids(seed)
        placed = model.place_ids(ids)
        kinds.clear()
        logits = program(placed)
        assert kinds == [OpKind.SubGraph]  # one operator however many the forward has
        got = logits.to_torch()
        with torch.no_grad():
            want = hf(ids).logits
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
        eager = model(placed)
        assert (logits.device_mesh, logits.placements) == (eager.device_mesh, eager.placements)
        assert torch.equal(got, eager.to_torch())


def test_llama_kv_cache_step_replay(graph: dtorch.Graph, hf: transformers.LlamaForCausalLM) -> None:
    """One decode step with a KV cache (not the generation loop: its Python control flow and
    growing cache are outside a program), traced with a 5-position cache and replayed with
    other prompts' caches of that length: transformers' logits at the 6th position, and the
    eager step's logits and new cache exactly."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = load_hf_weights(build_llama(CONFIG, mesh), hf).eval()

    def prompt(seed: int) -> tuple[torch.Tensor, dtorch.Tensor, list[Any]]:
        ids = _ids(seed)[:, :6]
        _, past = model.decode(model.place_ids(ids[:, :5]))
        return ids, model.place_ids(ids[:, 5:], shard_seq=False), past

    _, step, past = prompt(0)
    program = dtorch.trace(model.decode, step, past)
    check_spec(program.spec)  # a file of it would load: every rule agrees
    for seed in (1, 2):
        ids, step, past = prompt(seed)
        logits, cache = program(step, past)
        with torch.no_grad():
            want = hf(ids).logits[:, 5:]
        torch.testing.assert_close(logits.to_torch(), want, atol=1e-4, rtol=0)
        eager_logits, eager_cache = model.decode(step, past)
        assert torch.equal(logits.to_torch(), eager_logits.to_torch())
        assert len(cache) == CONFIG.num_hidden_layers
        for kv, eager_kv in zip(cache, eager_cache, strict=True):
            for mine, theirs in zip(kv, eager_kv, strict=True):
                assert mine.shape == (3, 2, 6, 16)
                assert torch.equal(mine.to_torch(), theirs.to_torch())


def _vision_model(name: str, reference: torch.nn.Module, mesh: dtorch.DeviceMesh) -> Any:
    model = getattr(vision, name)(num_classes=10, device_mesh=mesh)
    assert model.load_state_dict(reference.state_dict(), strict=True) == ([], [])
    return model


_VISION: dict[str, Callable[[], torch.nn.Module]] = {
    "resnet18": lambda: _calibrated(ref.resnet18(10), 1),
    "alexnet": lambda: ref.AlexNet(10, dropout=0.3).eval(),
}


@pytest.mark.parametrize("name", ["resnet18", "alexnet"])
def test_vision_eval_replay_matches_torch(graph: dtorch.Graph, name: str) -> None:
    """One model on dp2 (AlexNet's 57M parameters load once), traced twice: for a batch
    Replicate on dp (unsharded) and for one sharded on dp (batch 3: uneven)."""
    torch.manual_seed(0)
    reference = _VISION[name]()
    mesh = dtorch.init_device_mesh("cpu", (2,), mesh_dim_names=("dp",))
    model = _vision_model(name, reference, mesh).eval()
    g = torch.Generator().manual_seed(5)
    batches = [torch.randn(3, 3, SIZE, SIZE, generator=g) for _ in range(3)]
    for placements in ([Replicate()], [Shard(0)]):

        def put(x: torch.Tensor, placements: list[Any] = placements) -> dtorch.Tensor:
            return dtorch.from_torch(x, device_mesh=mesh, placements=placements)

        program = dtorch.trace(model, put(batches[0]))
        check_spec(program.spec)  # a file of it would load: every rule agrees
        for x in batches[1:]:
            y = program(put(x))
            assert y.placements == placements
            with torch.no_grad():
                torch.testing.assert_close(y.to_torch(), reference(x))


def _return_line(function: Callable[..., Any]) -> str:
    """``file:line:`` of ``function``'s return statement."""
    lines, start = inspect.getsourcelines(function)
    body = next(i for i, text in enumerate(lines) if text.strip().startswith("return "))
    return f"{inspect.getsourcefile(function)}:{start + body}:"


def test_training_dropout_is_refused_at_the_model_line(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2,), mesh_dim_names=("dp",))
    model = vision.alexnet(num_classes=10, device_mesh=mesh, dropout=0.3).train()
    x = dtorch.from_torch(torch.randn(2, 3, SIZE, SIZE), device_mesh=mesh, placements=[Shard(0)])
    with pytest.raises(dtorch.TraceError, match="dropout in training mode") as caught:
        dtorch.trace(model, x)
    assert _return_line(vision.AlexNet.forward) in str(caught.value)
    model.eval()  # the refused trace left the graph usable: eval mode traces
    assert dtorch.trace(model, x)(x).shape == (2, 10)


def test_training_batch_norm_replay_updates_running_stats(graph: dtorch.Graph) -> None:
    """ResNet-18 in training mode on a batch sharded on dp2: every replay normalises with
    the batch's statistics and updates each BatchNorm's running mean/var and batch count in
    place, as torch does call after call (the calls recorded back to back)."""
    torch.manual_seed(0)
    reference = ref.resnet18(10).train()
    mesh = dtorch.init_device_mesh("cpu", (2,), mesh_dim_names=("dp",))
    model = _vision_model("resnet18", reference, mesh).train()
    g = torch.Generator().manual_seed(6)
    batches = [torch.randn(4, 3, SIZE, SIZE, generator=g) for _ in range(3)]

    def put(x: torch.Tensor) -> dtorch.Tensor:
        return dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(0)])

    program = dtorch.trace(model, put(batches[0]))  # the trace run is a training step too
    check_spec(program.spec)  # a file of it would load: every rule agrees
    ys = [program(put(x)) for x in batches[1:]]  # back to back: each reads the last's stats
    with torch.no_grad():
        wants = [reference(x) for x in batches]
    for y, want in zip(ys, wants[1:], strict=True):
        torch.testing.assert_close(y.to_torch(), want)
    mine = {k: v.to_torch() for k, v in model.named_buffers()}
    for key, value in reference.named_buffers():
        torch.testing.assert_close(mine[key], value, msg=lambda m, k=key: f"{k}: {m}")
    assert int(mine["layer4.1.bn2.num_batches_tracked"]) == len(batches)


def test_training_batch_norm_cumulative_average_replays(graph: dtorch.Graph) -> None:
    """``momentum=None`` averages over the batch count, which the devices read now: it was
    read with ``item()``, a value a trace refuses. Every call, traced or replayed, updates
    the running statistics as torch's."""
    torch.manual_seed(0)
    reference = torch.nn.BatchNorm2d(3, momentum=None).train()
    mesh = dtorch.init_device_mesh("cpu", (2,), mesh_dim_names=("dp",))
    norm = dtorch.nn.BatchNorm2d(3, momentum=None, device_mesh=mesh).train()
    g = torch.Generator().manual_seed(2)
    batches = [torch.randn(3, 3, 4, 4, generator=g) * 2 + 1 for _ in range(4)]

    def put(x: torch.Tensor) -> dtorch.Tensor:
        return dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(0)])

    program = dtorch.trace(norm, put(batches[0]))  # the trace run is a step too
    ys = [program(put(x)) for x in batches[1:]]
    with torch.no_grad():
        wants = [reference(x) for x in batches]
    for y, want in zip(ys, wants[1:], strict=True):
        torch.testing.assert_close(y.to_torch(), want)
    for key, value in reference.named_buffers():
        torch.testing.assert_close(getattr(norm, key).to_torch(), value)
    assert int(norm.num_batches_tracked.item()) == len(batches)
