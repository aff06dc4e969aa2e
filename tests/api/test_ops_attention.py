"""``dtorch.nn.functional.scaled_dot_product_attention`` against torch's on the full tensors:
every layout of q, k, v on 1-D meshes (a seeded sample on the larger ones), causal and not,
with the output placements of the one-mesh-dim table (batch and head dims shard alike, the
query sequence shards with k/v replicated, v's features shard, ``R R P -> P``); masks (bool
and float, broadcasting) following a sharded batch or query sequence; GQA with the kv heads
split evenly, repeated under a finer q head split, or refused; and the refusals (dropout, mask
with is_causal, shapes, dtypes); 1-D, 2-D and 3-D meshes, even and uneven, thread and process
mode."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import DtypeError, ParamError, PlacementError, ShapeError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    S1,
    S2,
    Combo,
    P,
    R,
    Row,
    place,
    row_combos,
    run_api,
)

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(11)
#: batch 3, heads 2, L 5, S 7, E 4, Ev 3: uneven over 2 and 3 devices
_Q = torch.randn(3, 2, 5, 4, generator=_G)
_K = torch.randn(3, 2, 7, 4, generator=_G)
_V = torch.randn(3, 2, 7, 3, generator=_G)

#: what each dim of q, k, v is: a kept output dim (its index) or a contracted one (None)
_KEPT: tuple[tuple[int | None, ...], ...] = ((0, 1, 2, None), (0, 1, None, None), (0, 1, None, 3))


def _table() -> dict[Row, dtorch.Placement]:
    """The one-mesh-dim table of attention, from its math: every sharded input shards the
    same kept dim (a Replicate one holding it is chunked), nothing shards S or E, and only v
    may be Partial (attention is linear in v alone)."""
    options = [R, P, *(dtorch.Shard(d) for d in range(4))]
    table: dict[Row, dtorch.Placement] = {(R, R, P): P}
    for pq in options:
        for pk in options:
            for pv in options:
                out = _row((pq, pk, pv))
                if out is not None:
                    table[(pq, pk, pv)] = out
    return table


def _row(row: Row) -> dtorch.Placement | None:
    if P in row:
        return None
    dims = {_KEPT[i][p.dim] for i, p in enumerate(row) if isinstance(p, dtorch.Shard)}
    if not dims:
        return R
    if None in dims or len(dims) > 1:
        return None
    return dtorch.Shard(dims.pop())  # type: ignore[arg-type]


_TABLE = _table()


def _sdpa(causal: bool):  # type: ignore[no-untyped-def]
    return lambda q, k, v: DF.scaled_dot_product_attention(q, k, v, is_causal=causal)


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("causal", [False, True])
def test_layouts_against_torch(
    mesh_shape: tuple[int, ...], causal: bool, graph: dtorch.Graph
) -> None:
    want = F.scaled_dot_product_attention(_Q, _K, _V, is_causal=causal)
    seed = len(mesh_shape) + causal
    combos = _random_combos(len(mesh_shape), 70 if len(mesh_shape) == 1 else 8, seed)
    combos += row_combos(_TABLE, len(mesh_shape), 3, 10, seed)
    accepted = run_api(
        graph, "scaled_dot_product_attention", _sdpa(causal), [_Q, _K, _V], mesh_shape, [want],
        table=_TABLE, exact=False, combos=combos,
    )  # fmt: skip
    assert len(accepted) > 8


def _random_combos(mesh_ndim: int, count: int, seed: int) -> list[Combo]:
    """All-Replicate, then random layouts (most of them refused)."""
    rng, options = random.Random(seed), [R, P, S0, S1, S2, dtorch.Shard(3)]
    draws = [
        tuple(tuple(rng.choice(options) for _ in range(mesh_ndim)) for _ in range(3))
        for _ in range(count)
    ]
    return [((R,) * mesh_ndim,) * 3, *draws]


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 3)])
def test_sharded_query_sequence_causal_offsets(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """Each device's causal mask starts at its global query offset (uneven: 5 rows over 3)."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    seq = [S2] + [R] * (len(mesh_shape) - 1)
    q = place(_Q, mesh, seq, graph)
    k, v = (place(t, mesh, [R] * len(mesh_shape), graph) for t in (_K, _V))
    for scale in (None, 0.3):
        out = DF.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
        want = F.scaled_dot_product_attention(_Q, _K, _V, is_causal=True, scale=scale)
        assert out.placements == seq
        torch.testing.assert_close(out.to_torch(), want)


#: (mask shape, layout of q, k, v on the 1-D mesh, the mask's expected placement after the
#: implicit chunk is invisible: we check the output's placement)
_MASKS = [
    ((3, 2, 5, 7), S0),
    ((5, 7), S2),  # broadcasts over batch and heads; follows the query sequence
    ((3, 1, 1, 7), S0),
    ((2, 5, 7), S1),
    ((1, 7), S2),  # broadcasts over the query sequence too: stays whole
]


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2)])
@pytest.mark.parametrize("dtype", [torch.bool, torch.float32])
def test_masks_follow_the_shards(
    mesh_shape: tuple[int, ...], dtype: torch.dtype, graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    rest = [R] * (len(mesh_shape) - 1)
    for shape, placement in _MASKS:
        full = torch.rand(shape, generator=_G)
        mask = full > 0.3 if dtype is torch.bool else full - 0.5
        if dtype is torch.bool:
            mask[..., 0] = True  # no fully hidden row (torch gives NaN there)
        kv_place = [R if placement == S2 else placement, *rest]
        q = place(_Q, mesh, [placement, *rest], graph)
        k, v = (place(t, mesh, kv_place, graph) for t in (_K, _V))
        for m in (mask, place(mask, mesh, [R] * len(mesh_shape), graph)):
            out = DF.scaled_dot_product_attention(q, k, v, attn_mask=m)
            want = F.scaled_dot_product_attention(_Q, _K, _V, attn_mask=mask)
            assert out.placements == [placement, *rest], (shape, placement)
            torch.testing.assert_close(out.to_torch(), want, msg=lambda s, sh=shape: f"{sh}: {s}")


def test_mask_sharded_on_keys_is_refused(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    q, k, v = (place(t, mesh, [R], graph) for t in (_Q, _K, _V))
    mask = place(torch.ones(5, 7, dtype=torch.bool), mesh, [S1], graph)
    with pytest.raises(PlacementError, match=r"scaled_dot_product_attention: got .*accepted"):
        DF.scaled_dot_product_attention(q, k, v, attn_mask=mask)


_QG = torch.randn(2, 8, 5, 4, generator=_G)
_KG = torch.randn(2, 4, 6, 4, generator=_G)
_VG = torch.randn(2, 4, 6, 4, generator=_G)


@pytest.mark.parametrize(
    ("mesh_shape", "heads_on"), [((2,), (0,)), ((4,), (0,)), ((2, 2), (0, 1)), ((2, 3), (0,))]
)
def test_gqa_heads_split_evenly(
    mesh_shape: tuple[int, ...], heads_on: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """8 q heads read 4 kv heads; the heads shard over 2 or 4 devices (each device's q heads
    read its own kv heads), the other mesh dims shard the batch."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    layout = [S1 if m in heads_on else S0 for m in range(len(mesh_shape))]
    q, k, v = (place(t, mesh, layout, graph) for t in (_QG, _KG, _VG))
    for causal in (False, True):
        out = DF.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        want = F.scaled_dot_product_attention(_QG, _KG, _VG, is_causal=causal, enable_gqa=True)
        assert out.placements == layout
        torch.testing.assert_close(out.to_torch(), want)


@pytest.mark.parametrize("mesh_shape", [(3,), (2, 2, 2)])
def test_gqa_uneven_head_split_is_refused(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    layout = [S1] * len(mesh_shape)
    q, k, v = (place(t, mesh, layout, graph) for t in (_QG, _KG, _VG))
    with pytest.raises(PlacementError, match=r"scaled_dot_product_attention: got .*kv heads"):
        DF.scaled_dot_product_attention(q, k, v, enable_gqa=True)


@pytest.mark.parametrize(("devices", "q_heads", "kv_heads"), [(3, 8, 4), (4, 6, 3), (2, 9, 3)])
def test_gqa_replicate_kv_over_an_uneven_q_head_split(  # type: ignore[no-untyped-def]
    devices, q_heads, kv_heads, graph
) -> None:
    """q heads that do not split evenly (8 over 3 devices: 3, 3, 2): Replicate kv heads are
    repeated to q's heads, so each device's q heads meet theirs (it was refused, naming the
    repeat_interleave that now runs)."""
    mesh = dtorch.init_device_mesh("cpu", devices)
    fulls = [torch.randn(2, h, 5, 4, generator=_G) for h in (q_heads, kv_heads, kv_heads)]
    q = place(fulls[0], mesh, [S1], graph)
    k, v = (place(t, mesh, [R], graph) for t in fulls[1:])
    for causal in (False, True):
        out = DF.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=causal)
        want = F.scaled_dot_product_attention(*fulls, enable_gqa=True, is_causal=causal)
        assert out.placements == [S1]
        torch.testing.assert_close(out.to_torch(), want)


@pytest.mark.parametrize(
    ("mesh_shape", "q_layout", "kv_layout", "kv_heads"),
    [
        ((2, 2, 2), [S1, S1, S1], [R, R, R], 4),  # 8 devices over 4 kv heads: each read twice
        ((4,), [S1], [R], 2),  # tp=4, 2 kv heads
        ((2, 4), [S1, S1], [R, R], 2),  # 8 devices over 2 kv heads: each read 4 times
        ((2, 4), [S0, S1], [S0, R], 2),  # the batch sharded too
        ((2, 3), [S1, S0], [R, S0], 1),  # multi-query attention
    ],
)
def test_gqa_replicate_kv_under_a_finer_q_head_split(
    mesh_shape: tuple[int, ...],
    q_layout: list[dtorch.Placement],
    kv_layout: list[dtorch.Placement],
    kv_heads: int,
    graph: dtorch.Graph,
) -> None:
    """Fewer kv heads than devices sharding q's heads: a Replicate k/v is repeated just enough
    that each device reads whole kv heads (tp=4 over 2 kv heads), as torch's GQA maps them."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    kg, vg = _KG[:, :kv_heads], _VG[:, :kv_heads]
    q = place(_QG, mesh, q_layout, graph)
    k, v = (place(t, mesh, kv_layout, graph) for t in (kg, vg))
    for causal in (False, True):
        out = DF.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        want = F.scaled_dot_product_attention(_QG, kg, vg, is_causal=causal, enable_gqa=True)
        assert out.placements == q_layout
        torch.testing.assert_close(out.to_torch(), want)


def test_two_dim_inputs_and_partial_values(graph: dtorch.Graph) -> None:
    """(L, E) inputs without heads; a Partial v gives a Partial output."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    q2, k2, v2 = _Q[0, 0], _K[0, 0], _V[0, 0]
    out = DF.scaled_dot_product_attention(
        place(q2, mesh, [S0], graph), place(k2, mesh, [R], graph), place(v2, mesh, [R], graph),
        is_causal=True,
    )  # fmt: skip
    torch.testing.assert_close(
        out.to_torch(), F.scaled_dot_product_attention(q2, k2, v2, is_causal=True)
    )
    q, k = (place(t, mesh, [R], graph) for t in (_Q, _K))
    out = DF.scaled_dot_product_attention(q, k, place(_V, mesh, [P], graph))
    assert out.placements == [P]
    torch.testing.assert_close(out.to_torch(), F.scaled_dot_product_attention(_Q, _K, _V))


def test_refusals(graph: dtorch.Graph) -> None:
    q, k, v = (dtorch.tensor(t) for t in (_Q, _K, _V))
    name = "scaled_dot_product_attention"
    with pytest.raises(ParamError, match=f"{name}: dropout_p=0.1 is not supported.*accepted"):
        DF.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    with pytest.raises(ParamError, match="attn_mask cannot be combined with is_causal"):
        DF.scaled_dot_product_attention(q, k, v, torch.ones(5, 7, dtype=torch.bool), is_causal=True)
    with pytest.raises(ShapeError, match=f"{name}: q, k, v of shapes .* do not fit; accepted"):
        DF.scaled_dot_product_attention(q, dtorch.tensor(_K[..., :3]), v)
    with pytest.raises(ShapeError, match="enable_gqa=True"):
        DF.scaled_dot_product_attention(dtorch.tensor(_QG), dtorch.tensor(_KG), dtorch.tensor(_VG))
    with pytest.raises(ShapeError, match="does not broadcast"):
        DF.scaled_dot_product_attention(q, k, v, torch.ones(4, 7, dtype=torch.bool))
    with pytest.raises(DtypeError, match="accepted: one floating dtype"):
        DF.scaled_dot_product_attention(q, k.double(), v)
    with pytest.raises(DtypeError, match=r"attn_mask has dtype torch.int64"):
        DF.scaled_dot_product_attention(q, k, v, torch.ones(5, 7, dtype=torch.int64))


def test_sharded_features_are_refused(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    for layout in ([S2, S2, S2], [dtorch.Shard(3), dtorch.Shard(3), R]):
        q, k, v = (place(t, mesh, [p], graph) for t, p in zip((_Q, _K, _V), layout, strict=True))
        with pytest.raises(
            PlacementError, match=r"got \(.*accepted per mesh dimension.*SdpaOption"
        ):
            DF.scaled_dot_product_attention(q, k, v)


#: (q, k, v, kwargs) whose leading dims differ but broadcast, as torch's attention allows.
_BROADCAST = [
    (_Q, _K[:1], _V[:1], {}),  # one k/v batch for every q batch
    (_Q[:1], _K, _V, {"is_causal": True}),  # one q batch against three
    (_Q, _K[:, :1], _V[:, :1], {}),  # one k/v head for both q heads
    (_Q, _K[0], _V[0], {}),  # k/v without the batch dim
    (_QG, _KG[:1], _VG[:1], {"enable_gqa": True}),  # GQA: only the batch broadcasts
]


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2)])
@pytest.mark.parametrize("case", range(len(_BROADCAST)))
def test_broadcast_leading_dims(
    graph: dtorch.Graph, mesh_shape: tuple[int, ...], case: int
) -> None:
    """Leading dims broadcast as torch's do; a sharded q batch stays sharded."""
    q, k, v, kwargs = _BROADCAST[case]
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    first = [S0 if q.shape[0] > 1 else R] + [R] * (len(mesh_shape) - 1)
    dq = place(q, mesh, first, graph)
    dk, dv = (place(t, mesh, [R] * len(mesh_shape), graph) for t in (k, v))
    out = DF.scaled_dot_product_attention(dq, dk, dv, **kwargs)
    want = F.scaled_dot_product_attention(q, k, v, **kwargs)
    torch.testing.assert_close(out.to_torch(), want)
    assert out.placements[0] == (S0 if q.shape[0] > 1 else R)
    bad = [place(t, mesh, [R] * len(mesh_shape), graph) for t in (_Q, _K[:2], _V[:2])]
    with pytest.raises(ShapeError, match="do not fit"):  # 3 batches against 2 do not broadcast
        DF.scaled_dot_product_attention(*bad)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mesh_shape", [(3,), (2, 2)])
def test_float32_mask_with_another_query_dtype(
    dtype: torch.dtype, mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """torch takes a float32 mask with a q of any floating dtype (the output in q's dtype);
    a mask of another dtype than q's, float32 and bool stays refused, as torch refuses it."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    rest = [R] * (len(mesh_shape) - 1)
    q, k, v = (t.to(dtype) for t in (_Q, _K, _V))
    mask = torch.rand((5, 7), generator=_G) - 0.5
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    for layout in ([S0, *rest], [S2, *rest]):  # a sharded batch, a sharded query sequence
        kv = [R if layout[0] == S2 else S0, *rest]
        dq, dk, dv = (place(t, mesh, p, graph) for t, p in ((q, layout), (k, kv), (v, kv)))
        for m in (mask, place(mask, mesh, [R] * mesh.ndim, graph)):
            out = DF.scaled_dot_product_attention(dq, dk, dv, attn_mask=m)
            assert out.dtype == want.dtype == dtype and out.placements == layout
            torch.testing.assert_close(out.to_torch(), want)
    other = mask.to(dtype)  # with a float32 q
    with pytest.raises(RuntimeError, match="Expected attn_mask dtype to be bool or float"):
        F.scaled_dot_product_attention(_Q, _K, _V, attn_mask=other)
    dq, dk, dv = (place(t, mesh, [R] * mesh.ndim, graph) for t in (_Q, _K, _V))
    # each accepted dtype named once: q's dtype is float32 here
    once = rf"has dtype {dtype}; accepted: torch.bool or torch.float32$"
    with pytest.raises(DtypeError, match=once):
        DF.scaled_dot_product_attention(dq, dk, dv, attn_mask=other)
    wide = [place(t.double(), mesh, [R] * mesh.ndim, graph) for t in (_Q, _K, _V)]
    with pytest.raises(DtypeError, match=r"accepted: torch.bool, torch.float32 or torch.float64$"):
        DF.scaled_dot_product_attention(*wide, attn_mask=torch.ones(5, 7, dtype=torch.int64))


def test_a_sharded_kv_head_that_broadcasts_is_refused_by_attention(graph: dtorch.Graph) -> None:
    """One kv head against two q heads broadcasts; sharded on the head dim it cannot: the
    refusal is attention's, naming the shapes (it was ``expand``'s, an operator the user
    never called)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    q, k = torch.randn(1, 2, 3, 4), torch.randn(1, 1, 3, 4)
    dq, dk = (dtorch.from_torch(t, device_mesh=mesh, placements=[S1]) for t in (q, k))
    with pytest.raises(PlacementError, match=r"scaled_dot_product_attention: q, k, v .* broadcast"):
        DF.scaled_dot_product_attention(dq, dk, dk, enable_gqa=True)
    replicated = dtorch.from_torch(k, device_mesh=mesh)
    out = DF.scaled_dot_product_attention(dq, replicated, replicated, enable_gqa=True)
    want = F.scaled_dot_product_attention(q, k, k, enable_gqa=True)
    torch.testing.assert_close(out.to_torch(), want)
