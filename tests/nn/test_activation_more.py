"""The remaining activation layers against torch.nn's (``Softplus``, ``LogSigmoid``,
``Hardswish``, ``Hardsigmoid``, ``Mish``, ``SELU``, ``CELU``, ``Softsign``, ``Tanhshrink``,
``Hardshrink``, ``Softshrink``, ``Threshold``, ``Softmin``): outputs equal to torch's on
sharded inputs (1-D, 2-D and 3-D meshes, even and uneven), placements kept, reprs and
attributes, inplace forms, torch's constructor and call refusals, Partial refused."""

from __future__ import annotations

import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard, nn
from dtorch.errors import ParamError, PlacementError

pytestmark = pytest.mark.timeout(120)

#: (dtorch layer, torch layer) pairs built with the same arguments.
_PAIRS = [
    (nn.Softplus(), torch.nn.Softplus()),
    (nn.Softplus(2, 10), torch.nn.Softplus(2, 10)),
    (nn.Softplus(beta=0.5, threshold=1.0), torch.nn.Softplus(beta=0.5, threshold=1.0)),
    (nn.LogSigmoid(), torch.nn.LogSigmoid()),
    (nn.Hardswish(), torch.nn.Hardswish()),
    (nn.Hardsigmoid(), torch.nn.Hardsigmoid()),
    (nn.Mish(), torch.nn.Mish()),
    (nn.SELU(), torch.nn.SELU()),
    (nn.CELU(), torch.nn.CELU()),
    (nn.CELU(alpha=0.5), torch.nn.CELU(alpha=0.5)),
    (nn.Softsign(), torch.nn.Softsign()),
    (nn.Tanhshrink(), torch.nn.Tanhshrink()),
    (nn.Hardshrink(), torch.nn.Hardshrink()),
    (nn.Hardshrink(1), torch.nn.Hardshrink(1)),
    (nn.Softshrink(), torch.nn.Softshrink()),
    (nn.Softshrink(lambd=1.5), torch.nn.Softshrink(lambd=1.5)),
    (nn.Threshold(0.1, 20), torch.nn.Threshold(0.1, 20)),
    (nn.Threshold(threshold=-0.5, value=-3.0), torch.nn.Threshold(threshold=-0.5, value=-3.0)),
    (nn.Softmin(dim=-1), torch.nn.Softmin(dim=-1)),
    (nn.Softmin(dim=0), torch.nn.Softmin(dim=0)),
]
_X = torch.randn((5, 4, 3), generator=torch.Generator().manual_seed(11)) * 3
#: Layers whose torch kernel computes the SIMD body and the scalar tail differently (by an
#: ulp), so a shard may differ from the full tensor there; the others must be bit-equal.
_ULP = (nn.Softplus, nn.Mish, nn.SELU, nn.CELU, nn.Softmin)


@pytest.mark.parametrize(
    ("mesh_shape", "placements"),
    [((2,), [Shard(1)]), ((3,), [Shard(0)]), ((2, 3), [Shard(0), Shard(1)]),
     ((2, 1, 2), [Shard(1), Replicate(), Shard(2)])],
)  # fmt: skip
def test_layers_match_torch(mesh_shape: tuple, placements: list, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x = dtorch.from_torch(_X, device_mesh=mesh, placements=placements)
    for ours, ref in _PAIRS:  # a Softmin along a sharded dim reduces across the devices
        assert repr(ours) == repr(ref)
        y = ours(x)
        assert y.placements == x.placements, ours
        if isinstance(ours, _ULP):
            torch.testing.assert_close(y.to_torch(), ref(_X))
        else:
            assert torch.equal(y.to_torch(), ref(_X)), ours


def test_attributes_are_torchs() -> None:
    names = ("beta", "threshold", "inplace", "alpha", "lambd", "value", "dim")
    for ours, ref in _PAIRS:
        for name in names:
            assert getattr(ours, name, None) == getattr(ref, name, None), (ours, name)
    for ours, ref in (
        (nn.Hardswish(True), torch.nn.Hardswish(True)),  # torch's repr omits inplace here
        (nn.Hardsigmoid(inplace=True), torch.nn.Hardsigmoid(inplace=True)),
        (nn.Mish(True), torch.nn.Mish(True)),
        (nn.SELU(inplace=True), torch.nn.SELU(inplace=True)),
        (nn.CELU(2.0, True), torch.nn.CELU(2.0, True)),
        (nn.Threshold(0.0, 1.0, True), torch.nn.Threshold(0.0, 1.0, True)),
        (nn.Softmin(), torch.nn.Softmin()),
    ):
        assert repr(ours) == repr(ref) and getattr(ours, "inplace", 0) == getattr(ref, "inplace", 0)


def test_inplace_forms(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    for ours, ref in (
        (nn.Hardswish(True), torch.nn.Hardswish(True)),
        (nn.Hardsigmoid(True), torch.nn.Hardsigmoid(True)),
        (nn.Mish(True), torch.nn.Mish(True)),
        (nn.SELU(True), torch.nn.SELU(True)),
        (nn.CELU(0.7, True), torch.nn.CELU(0.7, True)),
        (nn.Threshold(0.3, -1.0, True), torch.nn.Threshold(0.3, -1.0, True)),
    ):
        x = dtorch.from_torch(_X, device_mesh=mesh, placements=[Shard(2), Shard(0)])
        xt = _X.clone()
        assert ours(x) is x and ref(xt) is xt
        assert x.placements == [Shard(2), Shard(0)], ours
        torch.testing.assert_close(x.to_torch(), xt, rtol=0, atol=1e-6)


def test_constructor_refusals_and_device_arguments(graph: dtorch.Graph) -> None:
    for layer in (nn.LogSigmoid, nn.Softsign, nn.Tanhshrink):  # torch's message, naming it
        with pytest.raises(TypeError, match=rf"^{layer.__name__}\.__init__\(\) takes 1 posi"):
            layer(1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="threshold"):
        nn.Threshold()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        nn.Softplus(1, 2, 3)  # type: ignore[misc]
    mesh = dtorch.init_device_mesh("cpu", 2)
    layer = nn.Softplus(device_mesh=mesh, dtype=torch.float64)
    assert layer(dtorch.zeros(1)).tolist() == torch.nn.Softplus()(torch.zeros(1)).tolist()


def test_call_refusals(graph: dtorch.Graph) -> None:
    """Numbers torch refuses when called (not when built), Partial, integer inputs."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.from_torch(_X, device_mesh=mesh, placements=[Shard(0)])
    for ours, ref in ((nn.CELU(0.0), torch.nn.CELU(0.0)), (nn.Softshrink(-1), None)):
        if ref is not None:
            with pytest.raises(RuntimeError, match="alpha cannot be 0"):
                ref(_X)
        with pytest.raises(ParamError):
            ours(x)
    partial = dtorch.from_torch(_X, device_mesh=mesh, placements=[Partial()])
    for layer, name in ((nn.Softplus(), "softplus"), (nn.Threshold(0, 1), "threshold")):
        with pytest.raises(PlacementError, match=rf"^{name}: got \(P,\).*accepted"):
            layer(partial)
    ints = dtorch.tensor([-9, 0, 3, 9])
    assert nn.Threshold(0.5, 7)(ints).tolist() == [7, 7, 3, 9]
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        nn.Mish()(ints)


def test_softmin_legacy_dim(graph: dtorch.Graph) -> None:
    for shape in ((3,), (2, 3), (2, 3, 4)):
        t = torch.randn(shape)
        with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
            ours = nn.Softmin()(dtorch.from_torch(t)).to_torch()
        with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
            torch.testing.assert_close(ours, torch.nn.Softmin()(t))
