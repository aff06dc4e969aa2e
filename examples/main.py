"""The main job (`make demo`): layouts, then a two-layer MLP sharded over CPU devices.

0. Layouts: every device's local shape and offset for a few uneven shardings (torch.chunk
   sizes), each mesh and placement list round-tripped through dtorch's codec.
1. A 1-D mesh of 4 devices, Megatron-style tensor parallelism: the first linear layer is
   column-parallel (weight Shard(0): each device computes a slice of the hidden units), the
   second is row-parallel (weight Shard(1): each device holds partial sums, a Partial output),
   and a redistribution to Replicate sums them.
2. The same model on a 2-D (dp x tp) mesh of 2 x 2 devices: the batch is sharded over dp.
3. Both again in process mode: the same program, on a graph whose devices run in worker
   processes fed over ZeroMQ (``GraphOption(per_device_per_process=True)``): two workers,
   each hosting half of the logical devices, exchanging shards through shared memory.
4. A small Llama (``examples/llama.py``, random weights of a ``transformers.LlamaForCausalLM``)
   generating a few tokens greedily on a dp x tp mesh of 2 x 2 devices (thread mode), checked
   token for token against transformers' ``generate(do_sample=False)``, with the tokens/s of
   both (transformers runs in this one process): on two kernel streams (the default) and on
   one (``GraphOption(num_streams=1)``), which suits operators this small.

Every step prints its placements; the result is fetched, compared with plain torch, and timed
(in process mode, the time to start the workers is printed apart).
"""

from __future__ import annotations

import time

import torch

import dtorch
import dtorch.nn.functional as F
from dtorch import Replicate, Shard

BATCH, DIM, HIDDEN = 16, 64, 256


def _weights() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "x": torch.randn(BATCH, DIM, generator=g),
        "w1": torch.randn(HIDDEN, DIM, generator=g) / DIM**0.5,
        "b1": torch.randn(HIDDEN, generator=g),
        "w2": torch.randn(DIM, HIDDEN, generator=g) / HIDDEN**0.5,
        "b2": torch.randn(DIM, generator=g),
    }


def _reference(w: dict[str, torch.Tensor]) -> torch.Tensor:
    hidden = torch.relu(torch.nn.functional.linear(w["x"], w["w1"], w["b1"]))
    return torch.nn.functional.linear(hidden, w["w2"], w["b2"])


def _show(step: str, t: dtorch.Tensor) -> None:
    print(f"  {step:<34} shape {list(t.shape)!s:<10} placements {t.placements}")


def run_mlp(
    mesh: dtorch.DeviceMesh,
    batch: list,
    tp: int,
    w: dict[str, torch.Tensor],
    graph: dtorch.Graph,
) -> torch.Tensor:
    """The MLP with tensor parallelism over mesh dim ``tp``; ``batch`` places the input.
    Operators record into the graph of their inputs: only the inputs name ``graph``."""
    rep = [Replicate()] * mesh.ndim

    def place(name: str, placement: dtorch.Placement) -> dtorch.Tensor:
        placements = list(rep)
        placements[tp] = placement
        return dtorch.from_torch(w[name], device_mesh=mesh, placements=placements, graph=graph)

    x = dtorch.from_torch(w["x"], device_mesh=mesh, placements=batch, graph=graph)
    w1, b1, w2 = place("w1", Shard(0)), place("b1", Shard(0)), place("w2", Shard(1))
    b2 = dtorch.from_torch(w["b2"], device_mesh=mesh, placements=rep, graph=graph)
    _show("input x", x)
    _show("w1 (column-parallel)", w1)
    hidden = F.relu(F.linear(x, w1, b1))
    _show("relu(x @ w1.T + b1)", hidden)
    _show("w2 (row-parallel)", w2)
    partial = F.linear(hidden, w2)
    _show("hidden @ w2.T (partial sums)", partial)
    placements = list(partial.placements)
    placements[tp] = Replicate()
    summed = partial.redistribute(mesh, placements)
    _show("redistributed to Replicate", summed)
    out = summed + b2
    _show("+ b2", out)
    return out.to_torch()


def show_layouts() -> None:
    """Local shapes/offsets of uneven shardings, and a codec round trip of each layout."""
    from dtorch.ir.sharding import shard_spec

    cases = [
        ((11, 6), dtorch.init_device_mesh("cpu", 4), [Shard(0)]),
        ((5, 7), dtorch.init_device_mesh("cpu", (2, 3)), [Shard(1), Shard(0)]),
        ((10,), dtorch.init_device_mesh("cpu", (2, 3)), [Shard(0), Shard(0)]),
    ]
    for shape, mesh, placements in cases:
        restored = dtorch.deserialize(dtorch.serialize((mesh, placements)))
        assert restored == (mesh, placements), "codec round trip changed the layout"
        print(f"shape {list(shape)} on mesh {mesh.shape} as {placements} (codec round trip ok)")
        for device in mesh.device_ids:
            spec = shard_spec(shape, mesh.shape, placements, mesh.coordinate_of(device))
            print(f"  device {device}: local shape {list(spec.shape)}, offset {list(spec.offset)}")
    print()


def run_all(
    mode: str,
    weights: dict[str, torch.Tensor],
    expected: torch.Tensor,
    graph: dtorch.Graph | None = None,
) -> None:
    """Both meshes on ``graph`` (default: this thread's default graph), each checked against
    torch."""
    graph = graph or dtorch.default_graph()
    runs = [
        ("1-D mesh of 4 devices (tp=4)", dtorch.init_device_mesh("cpu", 4), [Replicate()], 0),
        (
            "2-D mesh 2 x 2 (dp=2, tp=2)",
            dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp")),
            [Shard(0), Replicate()],
            1,
        ),
    ]
    for title, mesh, batch, tp in runs:
        print(f"{mode}, {title}: {mesh!r}")
        start = time.perf_counter()
        result = run_mlp(mesh, batch, tp, weights, graph)
        elapsed = time.perf_counter() - start
        error = (result - expected).abs().max().item()
        verdict = "matches torch" if torch.allclose(result, expected, atol=1e-5) else "DIFFERS"
        shape = list(result.shape)
        print(f"  result {shape}: {verdict} (max abs error {error:.2e}), {elapsed * 1e3:.1f} ms\n")
        if verdict != "matches torch":
            raise SystemExit(1)
    graph.sync()


def run_llama(new_tokens: int = 6) -> None:
    """Greedy generation of a small Llama on dp x tp, against transformers (section 4): on a
    graph of two kernel streams (the default) and on one of one stream (see below)."""
    import transformers

    from examples.llama import TINY

    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(TINY).eval()
    prompt = torch.randint(0, TINY.vocab_size, (2, 8), generator=torch.Generator().manual_seed(0))
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    print(f"Llama ({TINY.num_hidden_layers} layers, hidden {TINY.hidden_size}) on {mesh!r}")
    with torch.no_grad():
        for tokens in (2, new_tokens):  # a warm-up first, as dtorch's (below) gets one
            start = time.perf_counter()
            want = hf.generate(
                prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=tokens,
                do_sample=False, pad_token_id=0,
            )  # fmt: skip
        theirs = time.perf_counter() - start
    count = prompt.shape[0] * new_tokens
    print(f"  transformers (one process, KV cache): {count / theirs:.0f} tokens/s")
    # Decoding runs operators of a few hundred values: each torch call releases the GIL, and
    # with two streams busy each waits to win it back, so one stream decodes faster here.
    for streams in (2, 1):
        option = dtorch.GraphOption(per_device_per_process=False, num_streams=streams)
        graph = dtorch.Graph(option)
        try:
            got, ours = _generate(hf, mesh, prompt, new_tokens, graph)
        finally:
            graph.close()
        verdict = "match transformers" if torch.equal(got, want) else "DIFFER from transformers"
        print(
            f"  {streams} kernel stream{'s' if streams > 1 else ''}: generated "
            f"{got[:, prompt.shape[1] :].tolist()}: {verdict}, {count / ours:.0f} tokens/s "
            "(dtorch dp=2 x tp=2, KV cache)"
        )
        if verdict != "match transformers":
            raise SystemExit(1)
    print()


def _generate(
    hf: object, mesh: dtorch.DeviceMesh, prompt: torch.Tensor, new_tokens: int, graph: dtorch.Graph
) -> tuple[torch.Tensor, float]:
    """The model built on ``graph``, its greedy continuation of ``prompt`` and the seconds
    that took (after a warm-up that fills the placement rules' caches)."""
    from examples.llama import TINY, build_llama, load_hf_weights

    with graph.as_default():
        model = load_hf_weights(build_llama(TINY, mesh), hf)
        model.generate(prompt, 2, use_cache=True)
        start = time.perf_counter()
        got = model.generate(prompt, new_tokens, use_cache=True)
        return got, time.perf_counter() - start


def main() -> None:
    show_layouts()
    weights = _weights()
    expected = _reference(weights)
    run_all("thread mode", weights, expected)
    start = time.perf_counter()
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=True, num_workers=2))
    print(f"process mode: 2 worker processes started in {time.perf_counter() - start:.2f} s\n")
    try:
        run_all("process mode", weights, expected, graph)
    finally:
        graph.close()
    run_llama()


if __name__ == "__main__":
    main()
