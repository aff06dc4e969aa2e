"""The lazy layers of ``dtorch.nn.modules.lazy`` against torch's: made after the same seed,
the first call reads the input's size, draws the same weights (bit-equal state dicts), gives
torch's output and becomes torch's plain layer (type, repr); hooks and eval mode are kept,
a second call builds nothing; torch's refusals of the input's rank and of groups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn as tnn

import dtorch
from dtorch import nn
from tests.nn.layer_harness import DP_MESHES, batch_on_dp

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(5)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(5)


_LAYERS: list[tuple[str, Callable[[Any], Any], tuple[int, ...]]] = [
    ("LazyLinear", lambda m, **k: m.LazyLinear(4, **k), (6, 3, 5)),
    ("LazyLinear no bias", lambda m, **k: m.LazyLinear(3, bias=False, **k), (5, 7)),
    ("LazyConv1d", lambda m, **k: m.LazyConv1d(4, 3, stride=2, **k), (5, 3, 8)),
    ("LazyConv2d", lambda m, **k: m.LazyConv2d(4, 3, padding=1, groups=2, **k), (5, 4, 5, 4)),
    ("LazyConv3d", lambda m, **k: m.LazyConv3d(2, (2, 1, 2), padding_mode="reflect",
                                               padding=1, **k), (5, 3, 3, 4, 3)),
    ("LazyConvTranspose1d", lambda m, **k: m.LazyConvTranspose1d(2, 3, stride=2, **k),
     (5, 3, 4)),
    ("LazyConvTranspose2d", lambda m, **k: m.LazyConvTranspose2d(4, 2, groups=2, **k),
     (5, 2, 3, 3)),
    ("LazyConvTranspose3d", lambda m, **k: m.LazyConvTranspose3d(3, 2, stride=(1, 2, 1), **k),
     (5, 2, 2, 3, 2)),
    ("LazyBatchNorm1d", lambda m, **k: m.LazyBatchNorm1d(**k), (5, 3, 4)),
    ("LazyBatchNorm2d", lambda m, **k: m.LazyBatchNorm2d(momentum=0.3, **k), (5, 3, 2, 4)),
    ("LazyBatchNorm3d", lambda m, **k: m.LazyBatchNorm3d(affine=False, **k), (5, 2, 2, 3, 2)),
    ("LazyInstanceNorm1d", lambda m, **k: m.LazyInstanceNorm1d(**k), (5, 3, 6)),
    ("LazyInstanceNorm2d", lambda m, **k: m.LazyInstanceNorm2d(affine=False, **k),
     (5, 3, 4, 3)),
    ("LazyInstanceNorm3d", lambda m, **k: m.LazyInstanceNorm3d(eps=1e-3, **k), (5, 2, 3, 2, 3)),
]  # fmt: skip


@pytest.mark.parametrize(("label", "make", "shape"), _LAYERS, ids=[c[0] for c in _LAYERS])
@pytest.mark.parametrize(("mesh_shape", "names"), DP_MESHES[1::2])
def test_lazy_layers_become_torchs(
    label: str, make: Callable[..., Any], shape: tuple[int, ...],
    mesh_shape: tuple[int, ...], names: tuple[str, ...], graph: Any,
) -> None:  # fmt: skip
    mesh = dtorch.init_device_mesh("cpu", mesh_shape, mesh_dim_names=names)
    x = torch.randn(shape, generator=_G)
    torch.manual_seed(0)
    ref = make(tnn)
    unbuilt = repr(ref)
    want = ref(x)  # torch draws its weights here, at the first call
    torch.manual_seed(0)
    ours = make(nn, device_mesh=mesh)
    assert ours.has_uninitialized_params() and list(ours.parameters()) == []
    assert repr(ours) == unbuilt  # printing draws nothing: the weights below are still torch's
    dx = dtorch.from_torch(x, device_mesh=mesh, placements=batch_on_dp(mesh), graph=graph)
    got = ours(dx)
    assert type(ours).__name__ == type(ref).__name__ and repr(ours) == repr(ref)
    state = ours.state_dict()
    assert set(state) == set(ref.state_dict())
    for key, value in ref.state_dict().items():  # the same draws, the same statistics
        torch.testing.assert_close(state[key].to_torch(), value, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(got.to_torch(), want, atol=1e-5, rtol=1e-5)
    assert got.placements == batch_on_dp(mesh)


def test_hooks_mode_and_a_second_call(graph: Any) -> None:
    seen: list[str] = []
    m = nn.LazyConv2d(3, 1, bias=False).eval()
    m.register_forward_hook(lambda mod, args, out: seen.append(type(mod).__name__))
    x = dtorch.ones(2, 4, 3, 3)
    first = m(x)
    weight = m.weight
    second = m(x)
    assert seen == ["Conv2d", "Conv2d"] and not m.training and m.bias is None
    assert m.weight is weight and isinstance(m, nn.Conv2d) and m.in_channels == 4
    assert torch.equal(first.to_torch(), second.to_torch())
    unbatched = nn.LazyConvTranspose1d(2, 2)
    assert unbatched(dtorch.ones(3, 4)).shape == (2, 5) and unbatched.in_channels == 3
    linear = nn.LazyLinear(2, dtype=torch.float64)
    linear.initialize_parameters(dtorch.ones(1, 6, dtype=torch.float64))
    assert linear.weight.dtype == torch.float64 and linear.in_features == 6


def test_refusals_as_torchs(graph: Any) -> None:
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D"):
        nn.LazyConv2d(3, 2)(dtorch.ones(2, 3))
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D"):
        tnn.LazyConv2d(3, 2)(torch.ones(2, 3))
    for lib, tensor in ((nn, dtorch.ones(1, 3, 4)), (tnn, torch.ones(1, 3, 4))):
        with pytest.raises(ValueError, match="divisible by groups"):
            lib.LazyConv1d(4, 1, groups=2)(tensor)
    for lib in (nn, tnn):
        with pytest.raises(TypeError):
            lib.LazyLinear(3, in_features=2)
    with pytest.raises(RuntimeError):
        nn.LazyBatchNorm1d()(dtorch.ones(3))
