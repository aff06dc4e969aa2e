"""``dtorch.nn.functional.embedding`` against torch.nn.functional.embedding on the full
tensors: ids sharded on any dim, the weight sharded on the embedding dim (Shard(-1) output)
or on the vocab dim (vocab-parallel: Partial output, each device looking up its own rows),
a Partial weight, torch ids, padding_idx, out-of-range ids failing on the devices, and the
rejections; 1-D, 2-D and 3-D meshes, even and uneven, thread and process mode."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import DtypeError, KernelError, ParamError, PlacementError, ShapeError
from tests.api.ops_harness import ALL_MESHES, S0, S1, S2, P, R, limit_for, place, run_api

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(11)
S3 = dtorch.Shard(3)

#: ids x weight on one mesh dim -> the output (ids 2-D, weight (vocab, dim)).
_TABLE = {(R, R): R, (S0, R): S0, (S1, R): S1, (R, S1): S2, (R, S0): P, (R, P): P}


@pytest.fixture(autouse=True)
def _seeded() -> None:
    _G.manual_seed(11)


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_embedding_every_layout(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    ids = torch.randint(0, 10, (4, 3), generator=_G)
    weight = torch.randn((10, 6), generator=_G)
    run_api(
        graph, "embedding", DF.embedding, [ids, weight], mesh_shape, [F.embedding(ids, weight)],
        table=_TABLE, limit=limit_for(mesh_shape, one_d=60, n_d=16),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("mesh_shape", "ids_layout", "weight_layout", "out_layout"),
    [
        ((3,), [R], [S0], [P]),  # 7 rows over 3 devices: uneven vocab ranges
        ((2, 2), [S2, R], [R, S0], [S2, P]),
        ((2, 2, 2), [R, S0, R], [S0, R, S0], [P, S0, P]),  # the vocab split on two mesh dims
        ((2, 3), [S1, R], [R, S1], [S1, S3]),
    ],
)
def test_embedding_3d_ids_and_nested_vocab(
    mesh_shape: tuple[int, ...],
    ids_layout: list[dtorch.Placement],
    weight_layout: list[dtorch.Placement],
    out_layout: list[dtorch.Placement],
    graph: dtorch.Graph,
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    ids = torch.randint(0, 7, (2, 3, 4), generator=_G)
    weight = torch.randn((7, 5), generator=_G)
    dw = place(weight, mesh, weight_layout, graph)
    out = DF.embedding(place(ids, mesh, ids_layout, graph), dw)
    assert out.placements == out_layout
    assert torch.equal(out.to_torch(), F.embedding(ids, weight))
    replicated = out.redistribute(placements=[R] * mesh.ndim)  # the vocab-parallel sum
    assert torch.equal(replicated.to_torch(), F.embedding(ids, weight))


def test_embedding_torch_ids_padding_idx_int32(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    weight = torch.randn((8, 4), generator=_G)
    ids = torch.tensor([[0, 7, 3], [7, 7, 1]], dtype=torch.int32)
    dw = place(weight, mesh, [S0, S1], graph)
    out = DF.embedding(ids, dw, padding_idx=-1, scale_grad_by_freq=True)
    assert out.placements == [P, S2]
    assert torch.equal(out.to_torch(), F.embedding(ids, weight, padding_idx=-1))


@pytest.mark.parametrize("weight_layout", [[R], [S0], [S1]])
def test_out_of_range_ids_fail_on_the_devices(
    weight_layout: list[dtorch.Placement], graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    dw = place(torch.randn((6, 4), generator=_G), mesh, weight_layout, graph)
    bad = place(torch.tensor([1, 6]), mesh, [R], graph)
    with pytest.raises(KernelError, match=r"embedding.*out of range"):
        DF.embedding(bad, dw).to_torch()
    negative = place(torch.tensor([-1, 0]), mesh, [R], graph)
    with pytest.raises(KernelError, match=r"embedding.*out of range"):
        DF.embedding(negative, dw).to_torch()
    ok = place(torch.tensor([5, 0]), mesh, [R], graph)  # the graph keeps working
    assert DF.embedding(ok, dw).shape == (2, 4)


def test_rejections(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    weight = place(torch.randn((6, 4), generator=_G), mesh, [S0, R], graph)
    ids = place(torch.tensor([[1, 2], [3, 4]]), mesh, [S0, R], graph)
    got = r"^embedding: got \(S\(0\), R\) x \(S\(0\), R\) on mesh \(2, 2\); accepted per mesh"
    with pytest.raises(PlacementError, match=got + r" dimension: .*Redistribute the ids"):
        DF.embedding(ids, weight)
    rep = place(torch.tensor([1]), mesh, [R, R], graph)
    with pytest.raises(TypeError, match=r"^embedding: max_norm must be a number, got str"):
        DF.embedding(rep, weight, max_norm="1.0")  # max_norm itself: test_embedding_max_norm
    with pytest.raises(ParamError, match=r"^embedding: padding_idx 6 is out of range for 6"):
        DF.embedding(rep, weight, padding_idx=6)
    with pytest.raises(DtypeError, match=r"^embedding: the ids must be int64 or int32; got torch"):
        DF.embedding(place(torch.ones(2), mesh, [R, R], graph), weight)
    with pytest.raises(ShapeError, match=r"^embedding: the weight must be 2-D"):
        DF.embedding(rep, place(torch.ones(6), mesh, [R, R], graph))


@pytest.mark.parametrize("padding_idx", [-6, -7, -10, 5])
def test_padding_idx_out_of_range_is_refused(padding_idx: int, graph: dtorch.Graph) -> None:
    """torch refuses a padding_idx outside [-rows, rows); a negative one is not wrapped into
    range first (-6 is no -1 of a 5-row weight)."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    weight, ids = torch.randn((5, 3), generator=_G), torch.tensor([[0, 4], [2, 1]])
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        F.embedding(ids, weight, padding_idx=padding_idx)
    dw = place(weight, mesh, [S0], graph)
    with pytest.raises(
        ParamError,
        match=rf"^embedding: padding_idx {padding_idx} is out of range for 5 embeddings; "
        r"accepted: -5 to 4 or None",
    ):
        DF.embedding(place(ids, mesh, [R], graph), dw, padding_idx=padding_idx)
    out = DF.embedding(place(ids, mesh, [R], graph), dw, padding_idx=-5)  # the lowest in range
    assert torch.equal(out.to_torch(), F.embedding(ids, weight, padding_idx=-5))
