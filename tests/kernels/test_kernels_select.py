"""Where, Clamp and Masked simulated on 1-D, 2-D and 3-D meshes against torch."""

from __future__ import annotations

import pytest
import torch

from dtorch.ir.opkind import MaskedKind
from dtorch.ir.params import ClampParam, MaskedParam, WhereParam
from dtorch.ir.placement import Partial, Replicate, Shard
from dtorch.ir.scalar import Scalar
from tests.simulate import MESHES, run_layouts

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(17)
R, P = Replicate(), Partial()


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


def _mask(*shape: int) -> torch.Tensor:
    return torch.rand(shape, generator=_G) > 0.5


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_where_tensors_all_layouts(mesh_shape: tuple[int, ...]) -> None:
    cond, x, y = _mask(5, 3), _randn(5, 3), _randn(3)
    limit = 100 if len(mesh_shape) > 1 else 300
    accepted = run_layouts(
        "where", WhereParam(), [cond, x, y], mesh_shape, [torch.where(cond, x, y)], limit=limit
    )
    if mesh_shape == (2,):
        assert ((R,), (P,), (P,)) in accepted and ((Shard(0),), (R,), (R,)) in accepted


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 3)])
@pytest.mark.parametrize("value", [0, 2.5, -1])
def test_where_with_scalars(value: float, mesh_shape: tuple[int, ...]) -> None:
    cond, x = _mask(5, 3), _randn(5, 3).double()
    s = Scalar.of(value)
    want = torch.where(cond, x, torch.tensor(value))
    accepted = run_layouts("where", WhereParam(y=s), [cond, x], mesh_shape, [want])
    assert any(P in px for _, px in accepted) == (value == 0)
    want = torch.where(cond, torch.tensor(value), x)
    assert run_layouts("where", WhereParam(x=s), [cond, x], mesh_shape, [want])
    both = torch.where(cond, torch.tensor(value), torch.tensor(1))
    assert run_layouts("where", WhereParam(s, Scalar.of(1)), [cond], mesh_shape, [both])


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_clamp_all_layouts(mesh_shape: tuple[int, ...]) -> None:
    x, ints = _randn(5, 3), torch.randint(-5, 5, (5, 3), generator=_G)
    for low, high in ((-0.5, 0.5), (None, 0.0), (0, None), (-1, 2)):
        param = ClampParam(
            None if low is None else Scalar.of(low), None if high is None else Scalar.of(high)
        )
        for t in (x, ints):
            want = torch.clamp(t, low, high)
            accepted = run_layouts("clamp", param, [t], mesh_shape, [want], limit=60)
            assert not any(P in pl for (pl,) in accepted)


@pytest.mark.parametrize("mesh_shape", MESHES)
@pytest.mark.parametrize("in_place", [False, True])
def test_masked_fill_all_layouts(in_place: bool, mesh_shape: tuple[int, ...]) -> None:
    t, mask = _randn(5, 3), _mask(5, 1)
    for value in (0, 1.5):
        want = t.masked_fill(mask, value)
        param = MaskedParam(MaskedKind.FILL, Scalar.of(value), in_place)
        after = [(0, want)] if in_place else []
        accepted = run_layouts(
            "masked_fill", param, [t, mask], mesh_shape, [want], after=after, limit=100
        )
        assert any(P in pt for pt, _ in accepted) == (value == 0)
        if in_place:
            assert all(
                not (a == R and b != R) for pt, pm in accepted for a, b in zip(pt, pm, strict=True)
            )


def test_masked_scatter_replicate_only() -> None:
    t, mask, source = _randn(4, 3), _mask(4, 3), _randn(12)
    want = t.masked_scatter(mask, source)
    param = MaskedParam(MaskedKind.SCATTER)
    accepted = run_layouts("masked_scatter", param, [t, mask, source], (2,), [want])
    assert accepted == [((R,), (R,), (R,))]
