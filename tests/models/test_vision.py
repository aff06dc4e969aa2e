"""examples/vision.py against the same architectures in torch.nn (tests/models/reference_vision,
torchvision's code): the reference's state_dict loads strictly, and the outputs agree (eval
mode) with the batch unsharded and sharded on dp (even and uneven; 1-D, 2-D and 3-D meshes), in
thread and process mode; a training-mode forward on a dp-sharded batch gives torch's output
and BatchNorm running statistics (and AlexNet's dropout draws torch's masks); the module's
docstring examples run.

The references' BatchNorm layers are calibrated (their running statistics are those of a
random batch, their affine parameters random) so that activations keep unit scale through
the depth, as in a trained network: an uncalibrated ResNet-50 amplifies float32 rounding
beyond any fixed tolerance. ResNet-50 runs in float64 (its depth makes float32 results
differ with the batch split even in torch), which also exercises ``dtype=``.
"""

from __future__ import annotations

import doctest
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
import examples.vision
from dtorch import Replicate, Shard
from examples import vision
from tests.models import reference_vision as ref

pytestmark = pytest.mark.timeout(180)

R = Replicate()
SIZE = 64  # image side: the smallest that keeps every ResNet/AlexNet stage non-empty


def _calibrated(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """``model`` in eval mode, its BatchNorms given random affine parameters and the running
    statistics of one random batch."""
    g = torch.Generator().manual_seed(seed)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        for bn in norms:
            bn.weight.copy_(torch.rand(bn.weight.shape, generator=g) + 0.5)
            bn.bias.copy_(torch.randn(bn.bias.shape, generator=g) * 0.1)
            bn.momentum = 1.0
        model.train()(torch.randn(4, 3, SIZE, SIZE, generator=g))
    for bn in norms:
        bn.momentum = 0.1
    return model.eval()


_REFERENCES: dict[str, Callable[[], torch.nn.Module]] = {
    "resnet18": lambda: _calibrated(ref.resnet18(10), 1),
    "resnet50": lambda: _calibrated(ref.resnet50(10), 2).double(),
}
_MODELS: dict[str, Callable[..., dtorch.nn.Module]] = {
    "resnet18": vision.resnet18,
    "resnet50": vision.resnet50,
    "alexnet": vision.alexnet,
}


@pytest.fixture(scope="module")
def references() -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    return {name: make() for name, make in _REFERENCES.items()}


def _placements(mesh: dtorch.DeviceMesh, shard: bool) -> list[Any]:
    return [Shard(0) if shard and name == "dp" else R for name in mesh.dim_names]


def _dtorch_model(
    name: str, reference: torch.nn.Module, mesh: dtorch.DeviceMesh, **kwargs: Any
) -> Any:
    dtype = next(reference.parameters()).dtype
    model = _MODELS[name](num_classes=10, device_mesh=mesh, dtype=dtype, **kwargs)
    assert model.load_state_dict(reference.state_dict(), strict=True) == ([], [])
    assert [k for k, _ in model.named_parameters()] == [k for k, _ in reference.named_parameters()]
    assert [k for k, _ in model.named_buffers()] == [k for k, _ in reference.named_buffers()]
    return model


#: (model, mesh shape, dim names, batch, shard the batch on dp); AlexNet has its own test
_CASES = [
    ("resnet18", (2,), ("dp",), 2, False),
    ("resnet18", (2,), ("dp",), 4, True),
    ("resnet18", (4,), ("dp",), 5, True),
    ("resnet18", (2, 2), ("dp", "tp"), 3, True),
    ("resnet18", (2, 1, 2), ("pp", "tp", "dp"), 3, True),
    ("resnet50", (2,), ("dp",), 3, True),
]


@pytest.mark.parametrize(("name", "shape", "names", "batch", "shard"), _CASES)
def test_eval_matches_torch(
    name: str,
    shape: tuple[int, ...],
    names: tuple[str, ...],
    batch: int,
    shard: bool,
    references: dict[str, torch.nn.Module],
    graph: dtorch.Graph,
) -> None:
    reference = references[name]
    mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)
    model = _dtorch_model(name, reference, mesh).eval()
    dtype = next(reference.parameters()).dtype
    x = torch.randn(batch, 3, SIZE, SIZE, dtype=dtype)
    y = model(dtorch.from_torch(x, device_mesh=mesh, placements=_placements(mesh, shard)))
    assert y.placements == _placements(mesh, shard)
    with torch.no_grad():
        torch.testing.assert_close(y.to_torch(), reference(x))


def test_resnet18_train_batch_norm_on_sharded_batch(graph: dtorch.Graph) -> None:
    """One training-mode forward of a batch sharded unevenly on dp: torch's output, and every
    BatchNorm's running statistics and batch count as torch updates them."""
    reference = ref.resnet18(10).train()
    mesh = dtorch.init_device_mesh("cpu", (4,), mesh_dim_names=("dp",))
    model = _dtorch_model("resnet18", reference, mesh).train()
    x = torch.randn(5, 3, SIZE, SIZE)
    y = model(dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(0)]))
    with torch.no_grad():
        expected = reference(x)
    torch.testing.assert_close(y.to_torch(), expected)
    mine = {k: v.to_torch() for k, v in model.named_buffers()}
    for key, value in reference.named_buffers():
        torch.testing.assert_close(mine[key], value, msg=lambda m, k=key: f"{k}: {m}")
    assert int(mine["layer4.1.bn2.num_batches_tracked"]) == 1


def test_alexnet_eval_and_train_match_torch(graph: dtorch.Graph) -> None:
    """Eval mode, then training mode, where the two Dropouts draw torch's masks from the same
    seed on a batch sharded unevenly (AlexNet is built once: its 57M parameters dominate)."""
    reference = ref.AlexNet(10, dropout=0.3)
    mesh = dtorch.init_device_mesh("cpu", (3,), mesh_dim_names=("dp",))
    model = _dtorch_model("alexnet", reference, mesh, dropout=0.3)
    x = torch.randn(4, 3, SIZE, SIZE)
    xd = dtorch.from_torch(x, device_mesh=mesh, placements=[Shard(0)])
    for training in (False, True):
        model.train(training)
        reference.train(training)
        torch.manual_seed(7)
        y = model(xd)
        torch.manual_seed(7)
        with torch.no_grad():
            torch.testing.assert_close(y.to_torch(), reference(x))
        assert y.placements == [Shard(0)]


def test_constructor_arguments() -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = vision.resnet18(num_classes=7, device_mesh=mesh, dtype=torch.float64)
    assert model.fc.out_features == 7
    for _, p in [*model.named_parameters(), *model.named_buffers()]:
        assert p.device_mesh == mesh
        assert p.placements == [R, R]
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    assert vision.alexnet(num_classes=3, dropout=0.1).classifier[0].p == 0.1


def test_docstring_examples() -> None:
    result = doctest.testmod(examples.vision, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0 and result.attempted > 0
