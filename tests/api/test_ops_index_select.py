"""Integer-array indexing on the devices (IndexSelect, IndexPut) against torch: ``t[index]``
with one integer array (any shape; list, torch or dtorch) among basic indices, ``t[..., index]
= value``, ``dtorch.index_select``; the documented placements (never the client path's
one-device mesh), a sharded batch of ids, out-of-range ids failing on the devices, and the
operator count (one IndexSelect, not one operator per index); 1-D, 2-D and 3-D meshes, even
and uneven, thread and process mode."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import KernelError
from dtorch.ir.opkind import OpKind
from tests.api.ops_harness import ALL_MESHES, S0, S1, S2, P, R, on_mesh, place

pytestmark = pytest.mark.timeout(60)

_X = torch.arange(5 * 6 * 4, dtype=torch.float32).view(5, 6, 4) - 50
_I2 = torch.tensor([[1, 0], [-1, 5]])


#: (index of a (5, 6, 4) tensor sharded S(d) on mesh dim 0, d, the result's shard dim or
#: None where the indexed dim was sharded and is gathered, making it Replicate).
_GET: list[tuple[Any, int, int | None]] = [
    ((slice(None), [[1, 0], [2, 2]]), 0, 0),
    ((slice(None), 2, torch.tensor([[3], [0]])), 0, 0),
    ((None, slice(None), slice(None), torch.tensor(1)), 0, 1),
    ((Ellipsis, [[0, 1, 2]]), 0, 0),
    ((slice(1, None, 2), _I2), 0, 0),
    (([[0, 1]],), 2, 3),  # the index's two dims replace dim 0: t's dim 2 is the result's 3
    ((slice(None), []), 2, 2),
    ([4, 0, 4], 0, None),  # the sharded dim is gathered on the devices first
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_getitem_one_array_on_the_devices(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    rest = [R, P][: len(mesh_shape) - 1] + [R] * (len(mesh_shape) - 3)
    for index, dim, out_dim in _GET:
        t = place(_X, mesh, [dtorch.Shard(dim), *rest], graph)
        for kind, make in (("torch", lambda i: i), ("dtorch", lambda i: _dtorch(i, mesh, graph))):
            out = t[_convert(index, make)]
            want = _X[index]
            assert torch.equal(out.to_torch(), want), (kind, index)
            first = R if out_dim is None else dtorch.Shard(out_dim)
            assert out.device_mesh == mesh and out.placements == [first, *rest], (kind, index)


def _dtorch(i: Any, mesh: dtorch.DeviceMesh, graph: dtorch.Graph) -> Any:
    return place(i, mesh, [R] * mesh.ndim, graph) if isinstance(i, torch.Tensor) else i


def _convert(index: Any, make: Any) -> Any:
    return tuple(make(i) for i in index) if isinstance(index, tuple) else make(index)


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 3), (2, 1, 2)])
def test_sharded_ids_of_a_replicated_table(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """An embedding lookup: the ids' batch shard becomes the result's (no gather)."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    table = torch.randn(7, 4)
    ids = torch.randint(-7, 7, (5, 3))
    rest = [S1][: len(mesh_shape) - 1] + [R] * (len(mesh_shape) - 2)
    t = place(table, mesh, [R, *rest], graph)  # the table's hidden dim sharded on mesh dim 1
    i = place(ids, mesh, [S0] + [R] * (len(mesh_shape) - 1), graph)
    out = t[i]
    assert torch.equal(out.to_torch(), table[ids])
    want = [S0] + [S2][: len(rest)] + [R] * (len(mesh_shape) - 2)
    assert tuple(out.placements) == on_mesh(mesh, (tuple(want),))[0]  # size-1 mesh dims: R
    if rest:  # ids split on the mesh dim that splits the table: made Replicate there
        both = place(ids, mesh, [R, S0] + [R] * (len(mesh_shape) - 2), graph)
        assert torch.equal(t[both].to_torch(), table[ids])
        want = [R, S2] + [R] * (len(mesh_shape) - 2)
        assert tuple(t[both].placements) == on_mesh(mesh, (tuple(want),))[0]


@pytest.mark.parametrize("mesh_shape", [(3,), (2, 2), (2, 1, 2)])
def test_index_select_like_torch(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    placements = [S1] + [R] * (len(mesh_shape) - 1)
    t = place(_X, mesh, placements, graph)
    for dim, index in ((0, torch.tensor([4, 0, 0])), (-1, torch.tensor(2)), (1, [5, 1])):
        want = torch.index_select(_X, dim, torch.as_tensor(index))
        for got in (dtorch.index_select(t, dim, index), t.index_select(dim, index)):
            assert torch.equal(got.to_torch(), want), (dim, index)
            assert got.device_mesh == mesh
        d = _dtorch(torch.as_tensor(index), mesh, graph)
        assert torch.equal(dtorch.index_select(input=t, dim=dim, index=d).to_torch(), want)
    assert dtorch.index_select(t, 2, torch.tensor([1])).placements == placements


@pytest.mark.parametrize("placement", [R, P])
def test_index_select_of_a_0d_tensor_like_torch(placement: Any, graph: dtorch.Graph) -> None:
    """torch takes one index value (0) on dim 0 or -1 of a 0-d tensor; the result is 0-d."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.tensor(-2.5)
    t = place(x, mesh, [placement], graph)
    for index in ([0], torch.tensor(0), _dtorch(torch.tensor([0]), mesh, graph)):
        for dim in (0, -1):
            want = x.index_select(dim, torch.tensor([0]))
            got = t.index_select(dim, index)
            assert got.shape == want.shape and torch.equal(got.to_torch(), want)
    with pytest.raises(RuntimeError, match="0-d tensor must hold exactly one value"):
        t.index_select(0, [0, 0])
    with pytest.raises(IndexError, match="index 1 is out of bounds"):
        t.index_select(0, [1])
    with pytest.raises(KernelError, match="index 1 is out of bounds"):
        t.index_select(0, _dtorch(torch.tensor([1]), mesh, graph)).to_torch()


def test_index_select_bad_input(graph: dtorch.Graph) -> None:
    t = place(_X, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    with pytest.raises(IndexError, match="index_select: the index must be a 0-d or 1-D"):
        dtorch.index_select(t, 0, torch.tensor([[0]]))
    with pytest.raises(IndexError, match="index_select: index -1 is out of bounds"):
        t.index_select(1, torch.tensor([-1]))  # torch's index_select refuses negatives too
    with pytest.raises(TypeError, match="index_select: the index must be int64 or int32"):
        t.index_select(1, place(torch.tensor([0.0]), t.device_mesh, [R], graph))
    with pytest.raises(dtorch.DTorchError, match="index_select: dimension 3 is out of range"):
        t.index_select(3, [0])


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 3)])
def test_out_of_range_ids_fail_on_the_devices(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """Values torch holds are checked at once; a dtorch index's on the devices: reading the
    result raises KernelError naming the operator and the line; the graph keeps working."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    t = place(_X, mesh, [S2] + [R] * (len(mesh_shape) - 1), graph)
    bad = place(torch.tensor([0, 6]), mesh, [R] * len(mesh_shape), graph)
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    out = t[:, bad]
    message = rf"getitem.*py:{line}.*index 6 is out of bounds for dimension 1"
    with pytest.raises(KernelError, match=message):
        out.to_torch()
    with pytest.raises(KernelError, match=r"index_select.*index -6 is out of bounds"):
        t.index_select(0, -bad).to_torch()
    with pytest.raises(KernelError, match=r"setitem.*index 6 is out of bounds"):
        t[:, bad] = 1.0
        t.to_torch()
    with pytest.raises(IndexError, match="getitem: index 6 is out of bounds for dimension 1"):
        t[:, [0, 6]]
    ok = place(_X, mesh, [S2] + [R] * (len(mesh_shape) - 1), graph)
    assert torch.equal(ok[:, bad - 1].to_torch(), _X[:, [-1, 5]])


def test_many_ids_record_a_handful_of_operators(graph: dtorch.Graph, kinds: list[OpKind]) -> None:
    """1,000 ids (list, torch, dtorch) are one IndexSelect each, not one operator per id."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    t = place(_X, mesh, [S1, P], graph)
    ids = torch.randint(0, 5, (1000,))
    d = place(ids, mesh, [R, R], graph)
    for index in (ids.tolist(), ids, d):
        kinds.clear()
        out = t[index]
        assert len(kinds) <= 3 and kinds.count(OpKind.IndexSelect) == 1, kinds
        assert torch.equal(out.to_torch(), _X[ids])
    kinds.clear()
    t[:, :, ids % 4] = 0.0
    assert len(kinds) <= 3 and kinds.count(OpKind.IndexPut) == 1, kinds


_PUT: list[tuple[Any, Any, int]] = [  # (index, value, the dim t is sharded on: another one)
    ([0, 3, -1], 7.5, 2),
    ((slice(None), torch.tensor([[1, 0], [5, 5]])), torch.arange(4.0), 0),  # last write wins
    ((Ellipsis, [3, 0]), "dtorch", 1),
    ((slice(None), slice(None), torch.tensor([2])), torch.ones(5, 6, 1), 0),  # (0-d: an int)
    (torch.tensor([1, 4]), "sharded", 1),
]


@pytest.mark.parametrize("mesh_shape", [(3,), (2, 2), (2, 1, 2), (2, 2, 2)])
def test_setitem_one_array_on_the_devices(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph, kinds: list[OpKind]
) -> None:
    """Numbers, torch and dtorch values broadcast to the slot; ``t`` keeps its placements and
    is never fetched (no GetTensor is recorded)."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    values = {
        "dtorch": place(torch.arange(12.0).view(6, 2), mesh, [R] * len(mesh_shape), graph),
        "sharded": place(-torch.ones(2, 6, 4), mesh, [S2] * len(mesh_shape), graph),
    }
    for index, given, dim in _PUT:
        placements = [dtorch.Shard(dim), P, R][: len(mesh_shape)]
        t = place(_X, mesh, placements, graph)
        value = values[given] if isinstance(given, str) else given
        want = _X.clone()
        want[index] = value.to_torch() if isinstance(value, dtorch.Tensor) else value
        kinds.clear()
        t[index] = value
        assert OpKind.IndexPut in kinds and OpKind.GetTensor not in kinds, (index, kinds)
        assert torch.equal(t.to_torch(), want), index
        assert t.device_mesh == mesh
        assert tuple(t.placements) == on_mesh(mesh, (tuple(placements),))[0]


def test_setitem_on_a_sharded_dim_goes_to_the_client(graph: dtorch.Graph) -> None:
    """The indexed dim sharded: written on the client, ``t`` keeps its placements."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    t = place(_X, mesh, [S0], graph)
    t[[4, 0]] = 2.0
    want = _X.clone()
    want[[4, 0]] = 2.0
    assert torch.equal(t.to_torch(), want) and t.placements == [S0]
