"""``masked_select``, ``remainder`` (function and method) and ``tril_``/``triu_`` against
torch on the full tensors, on 1-D and 2-D meshes with uneven shards; thread and process mode
(names a placement sweep found missing)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, ShapeError
from tests.api.ops_harness import place

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(11)
_X = torch.randn((5, 3), generator=_G)
_PLACEMENTS = [
    ((3,), [dtorch.Shard(0)]),
    ((3,), [dtorch.Shard(1)]),
    ((2, 2), [dtorch.Shard(0), dtorch.Shard(1)]),
    ((2, 2), [dtorch.Replicate(), dtorch.Partial()]),
]
_IDS = ["S0", "S1", "S0xS1", "RxP"]


@pytest.mark.parametrize(("mesh_shape", "placements"), _PLACEMENTS, ids=_IDS)
def test_masked_select_as_torch(mesh_shape: Any, placements: Any, graph: dtorch.Graph) -> None:
    """The mask of the input's shape, one that broadcasts (a row), a torch mask, all False."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x = place(_X, mesh, placements, graph)
    row = torch.tensor([True, False, True])
    like = [p if not p.is_partial() else dtorch.Replicate() for p in placements]
    for mask, given in ((_X > 0, place(_X > 0, mesh, like, graph)), (row, row),
                        (_X > 9, place(_X > 9, mesh, like, graph))):  # fmt: skip
        want = torch.masked_select(_X, mask)
        assert torch.allclose(dtorch.masked_select(x, given).to_torch(), want)
        assert torch.allclose(x.masked_select(given).to_torch(), want)
    with pytest.raises(DtypeError, match="expected BoolTensor for mask"):
        dtorch.masked_select(x, torch.ones(5, 3))
    with pytest.raises(ShapeError, match="masked_select"):
        dtorch.masked_select(x, torch.ones(4, dtype=torch.bool))


@pytest.mark.parametrize(("mesh_shape", "placements"), _PLACEMENTS[:3], ids=_IDS[:3])
def test_remainder_and_the_in_place_triangles(
    mesh_shape: Any, placements: Any, graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    ints = torch.arange(-7, 8).reshape(5, 3)
    x = place(ints, mesh, placements, graph)
    assert torch.equal(dtorch.remainder(x, 4).to_torch(), torch.remainder(ints, 4))
    assert torch.equal(x.remainder(-3).to_torch(), ints.remainder(-3))
    assert torch.equal(dtorch.remainder(10, x + 8).to_torch(), torch.remainder(10, ints + 8))
    for name, diagonal in (("tril_", 0), ("triu_", 1), ("tril_", -1)):
        t = place(_X, mesh, placements, graph)
        want = getattr(_X.clone(), name)(diagonal)
        assert getattr(t, name)(diagonal) is t and torch.equal(t.to_torch(), want)


@pytest.mark.parametrize(("mesh_shape", "placements"), _PLACEMENTS[:3], ids=_IDS[:3])
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_as_torch(
    mesh_shape: Any, placements: Any, accumulate: bool, graph: dtorch.Graph
) -> None:
    """One index tensor, two (row and column positions), a repeated position (added twice
    with accumulate), a boolean mask; the function leaves its input unchanged."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    rows, cols = torch.tensor([0, 4, 0]), torch.tensor([2, 1, 2])
    cases = [
        ((rows,), torch.ones(3, 3)),
        ((rows, cols), torch.tensor([1.0, 2.0, 3.0])),
        ((_X > 0,), torch.tensor(7.0)),
    ]
    for indices, values in cases:
        want = _X.clone().index_put_(indices, values, accumulate=accumulate)
        t = place(_X, mesh, placements, graph)
        given = place(values, mesh, [dtorch.Replicate()] * len(mesh_shape), graph)
        assert t.index_put_(indices, given, accumulate=accumulate) is t
        assert torch.allclose(t.to_torch(), want), (indices, accumulate)
        u = place(_X, mesh, placements, graph)
        got = dtorch.index_put(u, indices, values, accumulate=accumulate)
        assert torch.allclose(got.to_torch(), want) and torch.equal(u.to_torch(), _X)
    with pytest.raises(TypeError, match="argument 'values' must be a Tensor"):
        t.index_put_((rows,), 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="element 0 of 'indices' must be a Tensor"):
        t.index_put_((None, rows), given)
