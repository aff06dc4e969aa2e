"""``embedding(..., max_norm=...)`` and ``nn.Embedding(max_norm=...)`` against torch on the full
tensors: torch's ``embedding_renorm_`` runs on a clone of the full weight, and both the output
and the weight written in place (``weight.to_torch()`` after the call) must match dtorch's.
Weights Replicate, vocab-sharded (uneven too), embedding-sharded and Partial; ids torch,
Replicate and batch-sharded; 1-D and 2-D meshes; every norm_type torch takes; padding_idx,
repeated ids, rows below the limit; the refusals; thread and process mode."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import DtypeError, PlacementError
from dtorch.ir.placement import Shard
from tests.api.ops_harness import S0, S1, P, R, place

pytestmark = pytest.mark.timeout(120)

INF = float("inf")


def _weight(rows: int = 7, cols: int = 5, seed: int = 3) -> torch.Tensor:
    # rows of norms spread around the limits the tests use (about 0.3 to 6)
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((rows, cols), generator=gen) * torch.linspace(0.1, 2.5, rows)[:, None]


def _check(ids: Any, full_ids: torch.Tensor, weight: dtorch.Tensor, **kw: Any) -> None:
    """dtorch's lookup with ``kw`` against torch's on a clone of the full weight: the output,
    the weight written in place, and the weight's placements kept."""
    expected_weight = weight.to_torch().clone()
    expected = F.embedding(full_ids, expected_weight, **kw)
    placements = list(weight.placements)
    out = DF.embedding(ids, weight, **kw)
    assert weight.placements == placements
    full_out = out.redistribute(placements=[R] * weight.device_mesh.ndim).to_torch()
    torch.testing.assert_close(full_out, expected)
    torch.testing.assert_close(weight.to_torch(), expected_weight)


@pytest.mark.parametrize(
    ("mesh_shape", "weight_layout", "ids_layout"),
    [
        ((2,), [R], None),  # torch ids
        ((2,), [R], [R]),
        ((2,), [R], [S0]),
        ((2,), [S0], None),  # 7 rows over 2 devices: uneven vocab ranges
        ((3,), [S0], [R]),
        ((3,), [S1], [R]),
        ((2,), [S1], None),
        ((2,), [P], [R]),
        ((2, 2), [R, S0], [S0, R]),  # dp x tp: vocab-parallel
        ((2, 2), [R, S1], [S0, R]),
        ((2, 2), [S0, S1], [R, R]),
        ((2, 2), [S0, S0], None),  # the vocab split on both mesh dims
        ((2, 2), [Shard(0, split_order=1), Shard(0, split_order=0)], None),  # nested the other way
    ],
)
def test_layouts(
    mesh_shape: tuple[int, ...],
    weight_layout: list[dtorch.Placement],
    ids_layout: list[dtorch.Placement] | None,
    graph: dtorch.Graph,
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    ids = torch.tensor([[0, 3, 6], [3, 5, 0], [1, 1, 6], [4, 0, 2]])
    weight = _weight()
    if P in weight_layout:  # the parts of a Partial weight sum to the full one
        weight = weight / 2
    dw = place(weight, mesh, weight_layout, graph)
    given = ids if ids_layout is None else place(ids, mesh, ids_layout, graph)
    _check(given, ids, dw, max_norm=1.5)


@pytest.mark.parametrize("norm_type", [1, 2.0, 3.5, INF, 0, -1.0, -INF])
@pytest.mark.parametrize("weight_layout", [[R], [S0], [S1]])
def test_norm_types(
    norm_type: float, weight_layout: list[dtorch.Placement], graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    ids = torch.tensor([6, 2, 5, 2, 0])
    dw = place(_weight(), mesh, weight_layout, graph)
    _check(ids, ids, dw, max_norm=1.2, norm_type=norm_type)


@pytest.mark.parametrize("max_norm", [0, 0.0, -1.0, 1, True, INF, float("nan"), 1e-3])
def test_limits(max_norm: float, graph: dtorch.Graph) -> None:
    """0 zeroes the rows named (a zero row stays), a negative limit flips and rescales every
    row named, inf and nan change nothing: torch's comparisons and scale, as they fall."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    weight = _weight()
    weight[3] = 0
    ids = torch.tensor([[3, 1], [4, 4]])
    _check(ids, ids, place(weight, mesh, [S0], graph), max_norm=max_norm)


def test_rows_not_named_or_below_the_limit_are_untouched(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    weight = _weight()
    dw = place(weight, mesh, [S0], graph)
    out = DF.embedding(torch.tensor([0, 6, 6, 1]), dw, max_norm=2.0)
    after = dw.to_torch()
    norms = weight.norm(dim=1)
    assert norms[0] < 2.0 and norms[1] < 2.0 and norms[5] > 2.0 and norms[6] > 2.0
    for row in (0, 1, 2, 3, 4, 5):  # below the limit, or not named: bit for bit
        assert torch.equal(after[row], weight[row]), row
    torch.testing.assert_close(after[6].norm(), torch.tensor(2.0))
    assert torch.equal(out.redistribute(placements=[R]).to_torch()[1], after[6])


def test_tiny_rows_keep_torchs_epsilon(graph: dtorch.Graph) -> None:
    """Rows of norm near 1e-7: torch's ``max_norm / (norm + 1e-7)`` shows (atol 0)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    weight = _weight() * 1e-6
    ids = torch.tensor([5, 6, 1])
    expected_weight = weight.clone()
    expected = F.embedding(ids, expected_weight, max_norm=1e-7)
    dw = place(weight, mesh, [S1], graph)
    out = DF.embedding(ids, dw, max_norm=1e-7).redistribute(placements=[R])
    torch.testing.assert_close(out.to_torch(), expected, atol=0, rtol=1e-5)
    torch.testing.assert_close(dw.to_torch(), expected_weight, atol=0, rtol=1e-5)


def test_padding_idx_and_repeated_ids(graph: dtorch.Graph) -> None:
    """The padding row is renormalised when named, as torch's is; a repeated id scales its row
    once."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    weight = _weight()
    ids = torch.tensor([[6, 6, 5], [6, 2, 6]])
    dw = place(weight, mesh, [R, S0], graph)
    _check(place(ids, mesh, [S0, R], graph), ids, dw, max_norm=0.5, padding_idx=-1)
    torch.testing.assert_close(dw.to_torch()[6].norm(), torch.tensor(0.5))


def test_float64_and_int32_ids(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    ids = torch.tensor([[1, 6], [6, 3]], dtype=torch.int32)
    dw = place(_weight().double(), mesh, [S1], graph)
    _check(place(ids, mesh, [R], graph), ids, dw, max_norm=np.float32(1.5), norm_type=3)


@pytest.mark.parametrize("layer", [dtorch.nn.Embedding, dtorch.nn.EmbeddingWithReplicateOutput])
def test_layer_twice_against_torch(layer: type[dtorch.nn.Embedding], graph: dtorch.Graph) -> None:
    """The second forward sees the weight the first renormalised (a smaller limit renormalises
    again); ``EmbeddingWithReplicateOutput`` holds the weight vocab-parallel."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    ref = torch.nn.Embedding(7, 5, max_norm=2.0, norm_type=3.0)
    ours = layer(7, 5, max_norm=2.0, norm_type=3.0, device_mesh=mesh)
    ref.weight.data.copy_(_weight())
    ours.load_state_dict(ref.state_dict())
    assert ours.extra_repr().startswith(ref.extra_repr())
    placements = list(ours.weight.placements)
    for ids, limit in ((torch.tensor([[0, 6], [5, 6]]), 2.0), (torch.tensor([[6, 4]]), 1.0)):
        ref.max_norm = ours.max_norm = limit
        expected = ref(ids)
        out = ours(place(ids, mesh, [S0, R], graph))
        full_out = out.redistribute(placements=[R, R]).to_torch()
        torch.testing.assert_close(full_out, expected.detach())
        torch.testing.assert_close(ours.weight.to_torch(), ref.weight.detach())
    assert ours.weight.placements == placements


def test_from_pretrained(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    full = _weight()
    ref = torch.nn.Embedding.from_pretrained(full.clone(), max_norm=1.0, norm_type=1.0)
    ours = dtorch.nn.EmbeddingWithReplicateOutput.from_pretrained(
        full, max_norm=1.0, norm_type=1.0, device_mesh=mesh
    )
    ids = torch.tensor([[2, 6, 3]])
    torch.testing.assert_close(ours(ids).to_torch(), ref(ids))
    torch.testing.assert_close(ours.weight.to_torch(), ref.weight)


def test_refusals(graph: dtorch.Graph) -> None:
    """Refused where torch refuses (the types), and a refused lookup writes nothing."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    full = _weight(6, 4)
    weight = place(full, mesh, [S0, R], graph)
    rep = place(torch.tensor([1]), mesh, [R, R], graph)
    with pytest.raises(TypeError, match=r"^embedding: max_norm must be a number, got str"):
        DF.embedding(rep, weight, max_norm="1")
    with pytest.raises(TypeError, match=r"^embedding: max_norm: 1j is not a real number"):
        DF.embedding(rep, weight, max_norm=1j)
    with pytest.raises(TypeError, match=r"^embedding: norm_type must be a number, got str"):
        DF.embedding(rep, weight, max_norm=1.0, norm_type="fro")
    with pytest.raises(TypeError, match=r"^Embedding: max_norm must be a number, got list"):
        dtorch.nn.Embedding(6, 4, max_norm=[2.0], device_mesh=mesh)  # at construction
    with pytest.raises(TypeError, match=r"^Embedding: norm_type must be a number, got NoneType"):
        dtorch.nn.Embedding(6, 4, max_norm=2.0, norm_type=None, device_mesh=mesh)
    ids = place(torch.tensor([[1, 2], [3, 4]]), mesh, [S0, R], graph)
    with pytest.raises(PlacementError, match=r"^embedding: got \(S\(0\), R\) x \(S\(0\), R\)"):
        DF.embedding(ids, weight, max_norm=0.1)  # ids and vocab split on one mesh dim
    integer = place(torch.ones((6, 4), dtype=torch.int64), mesh, [R, R], graph)
    with pytest.raises(DtypeError, match=r"^embedding: max_norm needs a floating point or "):
        DF.embedding(rep, integer, max_norm=0.1)
    assert torch.equal(weight.to_torch(), full)
    assert torch.equal(integer.to_torch(), torch.ones((6, 4), dtype=torch.int64))
    plain = DF.embedding(rep, integer, norm_type="x")  # unread without max_norm, as in torch
    assert torch.equal(plain.to_torch(), integer.to_torch()[[1]])
