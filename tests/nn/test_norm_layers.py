"""The normalisation, embedding, dropout and sloped-activation layers against torch.nn: the
same weights (a torch layer's ``state_dict`` loaded, strictly), outputs within float32
tolerance (dropout and embedding bit for bit), BatchNorm2d's running buffers and
``num_batches_tracked`` as torch updates them, torch's initial values and reprs; the batch
sharded on ``dp`` (even and uneven) on 1-D, 2-D and 3-D meshes, the vocab-parallel
``EmbeddingWithReplicateOutput`` on ``tp``; thread and process mode; bad arguments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import dtorch
import dtorch.nn.functional as F
from dtorch import Replicate, Shard, nn
from tests.nn.layer_harness import DP_MESHES, batch_on_dp

pytestmark = pytest.mark.timeout(120)

R = Replicate()


def _randomised(layer: torch.nn.Module) -> torch.nn.Module:
    """``layer`` with random parameters and buffers (not its initial ones and zeros)."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, t in [*layer.named_parameters(), *layer.named_buffers()]:
            if t.is_floating_point():
                t.copy_(
                    torch.rand(t.shape, generator=gen) + 0.5
                    if "var" in name
                    else torch.randn(t.shape, generator=gen)
                )
    return layer


#: torch layer, dtorch layer (on a mesh), input shape.
_Case = tuple[str, Callable[[], torch.nn.Module], Callable[..., Any], tuple[int, ...]]
_NORM_LAYERS: list[_Case] = [
    (
        "bn",
        lambda: torch.nn.BatchNorm2d(4),
        lambda m: nn.BatchNorm2d(4, device_mesh=m),
        (5, 4, 3, 2),
    ),
    (
        "bn-nobias",
        lambda: torch.nn.BatchNorm2d(4, momentum=None, bias=False),
        lambda m: nn.BatchNorm2d(4, momentum=None, bias=False, device_mesh=m),
        (5, 4, 3, 2),
    ),
    (
        "bn-untracked",
        lambda: torch.nn.BatchNorm2d(4, affine=False, track_running_stats=False),
        lambda m: nn.BatchNorm2d(4, affine=False, track_running_stats=False, device_mesh=m),
        (5, 4, 2, 2),
    ),
    (
        "ln",
        lambda: torch.nn.LayerNorm([3, 6]),
        lambda m: nn.LayerNorm([3, 6], device_mesh=m),
        (5, 3, 6),
    ),
    (
        "ln-nobias",
        lambda: torch.nn.LayerNorm(6, eps=1e-3, bias=False),
        lambda m: nn.LayerNorm(6, eps=1e-3, bias=False, device_mesh=m),
        (5, 3, 6),
    ),
    ("rms", lambda: torch.nn.RMSNorm(6), lambda m: nn.RMSNorm(6, device_mesh=m), (5, 3, 6)),
    (
        "rms-plain",
        lambda: torch.nn.RMSNorm([6], eps=1e-4, elementwise_affine=False),
        lambda m: nn.RMSNorm([6], eps=1e-4, elementwise_affine=False, device_mesh=m),
        (5, 3, 6),
    ),
    (
        "gn",
        lambda: torch.nn.GroupNorm(2, 4),
        lambda m: nn.GroupNorm(2, 4, device_mesh=m),
        (5, 4, 3),
    ),
    (
        "gn-nobias",
        lambda: torch.nn.GroupNorm(4, 4, bias=False),
        lambda m: nn.GroupNorm(4, 4, bias=False, device_mesh=m),
        (5, 4, 3),
    ),
]


@pytest.mark.parametrize(("shape", "names"), DP_MESHES)
@pytest.mark.parametrize(("case", "make_torch", "make", "x_shape"), _NORM_LAYERS)
def test_norm_layers_match_torch(  # type: ignore[no-untyped-def]
    case, make_torch, make, x_shape, shape, names, graph
) -> None:
    """Train mode twice (running buffers updated as torch's), then eval mode."""
    mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)
    ref = _randomised(make_torch())
    layer = make(mesh)
    assert repr(layer) == repr(ref)
    assert list(layer.state_dict()) == list(ref.state_dict())
    assert str(layer.load_state_dict(ref.state_dict())) == "<All keys matched successfully>"
    gen = torch.Generator().manual_seed(1)
    for mode in ("train", "train", "eval"):
        layer.train(mode == "train")
        ref.train(mode == "train")
        x = torch.randn(x_shape, generator=gen) * 2 + 1
        out = layer(dtorch.from_torch(x, device_mesh=mesh, placements=batch_on_dp(mesh)))
        assert out.placements == batch_on_dp(mesh)
        torch.testing.assert_close(out.to_torch(), ref(x), msg=f"{case} {mode}")
    for key, value in ref.state_dict().items():
        torch.testing.assert_close(layer.state_dict()[key].to_torch(), value, msg=key)


def test_initial_values_and_dtype(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    layers = [
        (
            nn.BatchNorm2d(3, device_mesh=mesh, dtype=torch.float64),
            torch.nn.BatchNorm2d(3, dtype=torch.float64),
        ),
        (
            nn.LayerNorm(3, device_mesh=mesh, dtype=torch.float64),
            torch.nn.LayerNorm(3, dtype=torch.float64),
        ),
        (nn.GroupNorm(1, 3, device_mesh=mesh), torch.nn.GroupNorm(1, 3)),
        (
            nn.RMSNorm(3, device_mesh=mesh, dtype=torch.bfloat16),
            torch.nn.RMSNorm(3, dtype=torch.bfloat16),
        ),
    ]
    for layer, ref in layers:
        for key, value in ref.state_dict().items():
            got = layer.state_dict()[key]
            assert got.placements == [R, R] and got.device_mesh == mesh
            assert torch.equal(got.to_torch(), value), key


@pytest.mark.parametrize(("shape", "names"), DP_MESHES)
def test_embedding_matches_torch(
    shape: tuple[int, ...], names: tuple[str, ...], graph: dtorch.Graph
) -> None:
    """The same seed draws torch's weight (padding row zeroed); ids sharded on dp."""
    mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)
    torch.manual_seed(3)
    ref = torch.nn.Embedding(10, 4, padding_idx=-2)
    torch.manual_seed(3)
    layer = nn.Embedding(10, 4, padding_idx=-2, device_mesh=mesh)
    assert repr(layer) == repr(ref) and layer.weight.placements == [R] * mesh.ndim
    assert torch.equal(layer.weight.to_torch(), ref.weight.detach())
    ids = torch.randint(0, 10, (5, 3), generator=torch.Generator().manual_seed(2))
    out = layer(dtorch.from_torch(ids, device_mesh=mesh, placements=batch_on_dp(mesh)))
    assert out.placements == batch_on_dp(mesh)
    assert torch.equal(out.to_torch(), ref(ids))


@pytest.mark.parametrize(
    ("shape", "names"),
    [
        ((2,), ("tp",)),
        ((3,), ("tp",)),
        ((2, 2), ("dp", "tp")),
        ((3, 1, 2), ("tp", "pp", "dp")),
        ((2,), ("dp",)),
    ],
)
def test_vocab_parallel_embedding(
    shape: tuple[int, ...], names: tuple[str, ...], graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)
    ref = torch.nn.Embedding(11, 6)
    layer = nn.EmbeddingWithReplicateOutput(11, 6, device_mesh=mesh)
    layer.load_state_dict(ref.state_dict())
    tp = mesh.dim_name_index("tp")
    want = [R] * mesh.ndim
    if tp is not None:
        want[tp] = Shard(0)
    assert layer.weight.placements == want
    ids = torch.randint(0, 11, (4, 5), generator=torch.Generator().manual_seed(4))
    placements = [Shard(1) if n in ("dp", "tp") else R for n in names]  # tp: made Replicate
    out = layer(dtorch.from_torch(ids, device_mesh=mesh, placements=placements))
    assert out.placements == [Shard(1) if n == "dp" else R for n in names]
    assert torch.equal(out.to_torch(), ref(ids))
    assert layer(ids).placements == [R] * mesh.ndim  # torch ids: sent Replicate
    torch.manual_seed(6)
    drawn = nn.EmbeddingWithReplicateOutput(11, 6, padding_idx=3, device_mesh=mesh)
    torch.manual_seed(6)  # the vocab-split weight holds torch's draw, padding row zeroed
    assert torch.equal(
        drawn.weight.to_torch(), torch.nn.Embedding(11, 6, padding_idx=3).weight.detach()
    )


def test_dropout_and_activations(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 3), mesh_dim_names=("dp", "tp"))
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(5))
    t = dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(0), Shard(1)])
    pairs = [
        (nn.Dropout(0.3, device_mesh=mesh), torch.nn.Dropout(0.3)),
        (nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)),
        (nn.ELU(alpha=0.7, inplace=False), torch.nn.ELU(alpha=0.7)),
        (nn.ELU(inplace=True), torch.nn.ELU(inplace=True)),
    ]
    for layer, ref in pairs:
        assert repr(layer) == repr(ref)
        torch.manual_seed(8)
        out = layer(t.clone() if getattr(layer, "inplace", False) else t)
        torch.manual_seed(8)
        want = ref(x.clone())
        if isinstance(layer, nn.ELU):  # exp's vectorised and scalar paths differ in the last bit
            torch.testing.assert_close(out.to_torch(), want)
        else:  # dropout's mask and leaky_relu's product are bit-identical
            assert torch.equal(out.to_torch(), want), repr(layer)
        assert out.placements == [Shard(0), Shard(1)]
    dropout = nn.Dropout(0.9).eval()
    assert dropout(t) is t


def test_bad_arguments(graph: dtorch.Graph) -> None:
    with pytest.raises(
        ValueError, match=r"num_channels \(5\) must be divisible by num_groups \(2\)"
    ):
        nn.GroupNorm(2, 5)
    with pytest.raises(
        ValueError, match="dropout probability has to be between 0 and 1, but got 2"
    ):
        nn.Dropout(2)
    with pytest.raises(ValueError, match=r"^BatchNorm2d: expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(dtorch.ones(2, 3, 4))
    with pytest.raises(ValueError, match=r"^Embedding: padding_idx must be within num_embeddings"):
        nn.Embedding(4, 2, padding_idx=4)
    with pytest.raises(TypeError, match=r"^LayerNorm: dtype must be a floating-point"):
        nn.LayerNorm(3, dtype=torch.int64)
    with pytest.raises(
        TypeError, match=r"^EmbeddingWithReplicateOutput: tp_dim must be a mesh dim"
    ):
        nn.EmbeddingWithReplicateOutput(4, 2, tp_dim=1)  # type: ignore[arg-type]
    # sizes torch refuses (TypeError) are refused, not truncated (2.5 gave a LayerNorm of 2)
    for layer in (nn.LayerNorm, nn.RMSNorm):
        for shape in [(2.5,), (5.0,), True, "ab", None]:
            with pytest.raises(TypeError):  # the oracle
                getattr(torch.nn, layer.__name__)(shape)
            with pytest.raises(TypeError, match=rf"^{layer.__name__}: .*normalized_shape"):
                layer(shape)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^layer_norm: each size of normalized_shape must be"):
        F.layer_norm(dtorch.ones(2, 4), (4.0,))  # type: ignore[arg-type]
    for shape in (np.int64(4), np.array([4]), (n for n in [4])):  # as torch takes them
        assert nn.LayerNorm(shape).normalized_shape == (4,)


def test_batch_norm_with_a_device_holding_no_channels(graph: dtorch.Graph) -> None:
    """4 channels sharded over 3 devices (2 + 2 + 0): train twice, then eval, as torch."""
    mesh = dtorch.init_device_mesh("cpu", (3,), mesh_dim_names=("tp",))
    ref = _randomised(torch.nn.BatchNorm2d(4))
    layer = nn.BatchNorm2d(4, device_mesh=mesh)
    layer.load_state_dict(ref.state_dict())
    gen = torch.Generator().manual_seed(2)
    for mode in ("train", "train", "eval"):
        layer.train(mode == "train")
        ref.train(mode == "train")
        x = torch.randn((5, 4, 3, 3), generator=gen)
        out = layer(dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(1)]))
        assert out.placements == [Shard(1)]
        torch.testing.assert_close(out.to_torch(), ref(x), msg=mode)
    for key, value in ref.state_dict().items():
        torch.testing.assert_close(layer.state_dict()[key].to_torch(), value, msg=key)


def test_batch_norm_training_on_other_channels_is_refused(graph: dtorch.Graph) -> None:
    """BatchNorm2d(4) on 3 channels: torch refuses it, dtorch names the running mean's size,
    and the running statistics stay as they were."""
    x = torch.randn(2, 3, 2, 2)
    with pytest.raises(RuntimeError):
        torch.nn.BatchNorm2d(4)(x)
    mesh = dtorch.init_device_mesh("cpu", (2,), mesh_dim_names=("dp",))
    layer = nn.BatchNorm2d(4, device_mesh=mesh)
    with pytest.raises(ValueError, match=r"^batch_norm: running_mean has shape \[4\]; expected"):
        layer(dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(0)]))
    assert torch.equal(layer.running_mean.to_torch(), torch.zeros(4))
    assert torch.equal(layer.running_var.to_torch(), torch.ones(4))


def test_embedding_from_pretrained(graph: dtorch.Graph) -> None:
    """torch's classmethod: a torch or dtorch tensor, placed as the layer places its weight
    (the vocab split on tp for the vocab-parallel layer), frozen unless freeze=False."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    full = torch.randn((7, 3), generator=torch.Generator().manual_seed(7))
    ref = torch.nn.Embedding.from_pretrained(full, padding_idx=2, max_norm=None)
    ids = torch.tensor([[0, 2, 6], [5, 5, 1]])
    layer = nn.Embedding.from_pretrained(full, padding_idx=2, device_mesh=mesh)
    assert repr(layer) == repr(ref) and layer.weight.requires_grad is False
    assert layer.weight.placements == [R, R] and layer.weight.device_mesh == mesh
    assert torch.equal(layer(dtorch.from_torch(ids, device_mesh=mesh)).to_torch(), ref(ids))
    sharded = dtorch.from_torch(full, device_mesh=mesh, placements=[Shard(1), Shard(0)])
    parallel = nn.EmbeddingWithReplicateOutput.from_pretrained(sharded, freeze=False)
    assert parallel.weight.placements == [R, Shard(0)] and parallel.weight.requires_grad
    assert torch.equal(parallel(ids).to_torch(), torch.nn.Embedding.from_pretrained(full)(ids))
    plain = nn.Embedding.from_pretrained(sharded)  # the tensor's mesh, the layer's placements
    assert plain.weight.device_mesh == mesh and plain.weight.placements == [R, R]
    with pytest.raises(ValueError, match=r"^Embedding.from_pretrained: embeddings must be 2-D"):
        nn.Embedding.from_pretrained(torch.ones(3))
