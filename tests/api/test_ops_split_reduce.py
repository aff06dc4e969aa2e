"""Reductions that are not linear (``max min amax amin argmax argmin any all prod`` and
``logsumexp``) over dims that mesh dims shard, ``topk`` and the scans (``cumsum cumprod
logcumsumexp cummax cummin``) along such a dim, through the public API against torch: the
devices reduce their blocks and combine the results (a SplitReduce; a SplitTopK picks from
the blocks' top k), the result is Replicate there; a SplitScan (SplitCumExtreme) carries each
block on from the totals (last extremes) of those before it, every shard kept. Ties (the
smallest index wins; a running extreme's latest), NaN, infinities, the dtypes' extremes,
devices whose block is empty (4 entries over 3 devices), nested shards, traced programs, and
no redistribution of the input. The layout tables are in ``test_ops_reduce*.py`` and
``test_ops_order*.py``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Placement
from dtorch.errors import PlacementError
from dtorch.ir.opkind import OpKind
from tests.api.ops_harness import S0, S1, P, R, place

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(71)

_LAYOUTS = [
    ((3,), [S1]),  # 4 columns over 3 devices: 2, 2 and an empty block
    ((4,), [S0]),  # 5 rows over 4 devices: 2, 2, 1 and an empty block
    ((2, 2), [S1, S1]),  # the reduced dim nested over both mesh dims
    ((2, 2), [S0, S1]),
    ((2, 1, 2), [S1, R, S0]),
]


def _values(dtype: torch.dtype) -> torch.Tensor:
    """5 x 4 values with ties across blocks, and per dtype its extremes and special values."""
    if dtype is torch.bool:
        return torch.tensor(
            [[False, True, False, True]] * 2 + [[False] * 4, [True] * 4, [False] * 4]
        )
    x = torch.tensor([[3, 1, 3, 0], [0, 0, 0, 0], [2, 5, 5, 1], [1, 2, 3, 4], [4, 3, 2, 1]])
    if dtype.is_floating_point:
        x = x.to(dtype)
        x[0, 2], x[2, 0], x[3, 3] = math.nan, -math.inf, math.inf
        x[4, 1:3] = math.nan
        return x
    info = torch.iinfo(dtype)
    x = x.to(dtype)
    x[1, 1], x[1, 3], x[3, 0] = info.min, info.min, info.max
    return x


def _calls(dtype: torch.dtype) -> list[tuple[str, Callable[[Any], Any]]]:
    """The reductions torch defines on ``dtype``, each over a dim, several dims and all."""
    calls: list[tuple[str, Callable[[Any], Any]]] = [
        ("amax(1)", lambda t: t.amax(1)),
        ("amin((0, 1), keepdim)", lambda t: t.amin((0, 1), keepdim=True)),
        ("amax()", lambda t: t.amax()),
        ("max()", lambda t: t.max()),
        ("max(1)", lambda t: tuple(t.max(1))),
        ("min(0, keepdim)", lambda t: tuple(t.min(0, keepdim=True))),
        ("any(1)", lambda t: t.any(1)),
        ("all(0)", lambda t: t.all(0)),
        ("any()", lambda t: t.any()),
    ]
    if dtype is not torch.bool:
        calls += [
            ("argmax(1)", lambda t: t.argmax(1)),
            ("argmin(0, keepdim)", lambda t: t.argmin(0, keepdim=True)),
            ("argmax()", lambda t: t.argmax()),
            ("argmin(keepdim)", lambda t: t.argmin(keepdim=True)),
            ("prod(1)", lambda t: t.prod(1)),
        ]
    if dtype.is_floating_point:
        calls += [("logsumexp(1)", lambda t: t.logsumexp(1))]
    return calls


_DTYPES = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int8,
    torch.uint8,
    torch.int64,
    torch.bool,
]


@pytest.mark.parametrize(("mesh_shape", "placements"), _LAYOUTS)
def test_split_reductions_against_torch(
    mesh_shape: tuple[int, ...], placements: list[Placement], graph: dtorch.Graph
) -> None:
    """Every reduction torch defines on each dtype, on blocks with ties, NaN, infinities,
    the dtype's extremes and empty blocks: torch's values and indices exactly (``prod`` and
    ``logsumexp`` of floats within rounding: the blocks are multiplied or summed apart)."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    for dtype in _DTYPES:
        x = _values(dtype)
        t = place(x, mesh, placements, graph)
        for name, call in _calls(dtype):
            want, got = call(x), call(t)
            wants, gots = (want, got) if isinstance(want, tuple) else ((want,), (got,))
            for w, g in zip(wants, gots, strict=True):
                assert not any(p.is_partial() for p in g.placements), (name, dtype)
                rounded = dtype.is_floating_point and name.startswith(("prod", "logsumexp"))
                tolerance = {} if rounded else {"rtol": 0, "atol": 0}
                torch.testing.assert_close(
                    g.to_torch(), w, equal_nan=True, msg=f"{name} of {dtype}", **tolerance
                )


def test_prod_over_a_sharded_dim_keeps_its_dtype(graph: dtorch.Graph) -> None:
    """``prod(dtype=)`` of a narrow dtype wraps as torch's does (the blocks' products were
    combined in int64, and a product over several dims took ``dtype=`` for the first only:
    the result held int64 data under an int8 dtype)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.tensor([[16, 3, 16, 5], [1, -1, 2, 127]])
    t = place(x, mesh, [S1], graph)
    for dtype in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.bool):
        for got, want in ((t.prod(1, dtype=dtype), x.prod(1, dtype=dtype)),
                          (t.prod(dtype=dtype), x.prod(dtype=dtype))):  # fmt: skip
            assert got.dtype == want.dtype
            assert torch.equal(got.to_torch(), want), (dtype, got.to_torch(), want)
            assert torch.equal(got.to(torch.float64).to_torch(), want.double())
    small = place(x.to(torch.int8), mesh, [S1], graph)
    assert torch.equal(small.prod(1).to_torch(), x.to(torch.int8).prod(1))  # int64, as torch
    whole = place(x, mesh, [R], graph).prod(dtype=torch.int8)  # a Reduce over both dims
    assert torch.equal(whole.to_torch(), x.prod(dtype=torch.int8))  # held int64 data too


def test_kept_dims_keep_their_shards_and_every_dim_sharded(graph: dtorch.Graph) -> None:
    """A kept dim's shard stays (at its new index) beside a reduced dim's Replicate; over
    every dim of a tensor sharded on both, argmax is the index in the flattened tensor."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = torch.randn((6, 7, 5), generator=_G)
    t = place(x, mesh, [S1, S0], graph)
    values, indices = t.max(1)
    assert values.placements == indices.placements == [R, S0]
    torch.testing.assert_close(values.to_torch(), x.max(1).values, rtol=0, atol=0)
    assert torch.equal(indices.to_torch(), x.max(1).indices)
    for keepdim in (False, True):
        got = place(x, mesh, [S1, dtorch.Shard(2)], graph).argmax(keepdim=keepdim)
        assert torch.equal(got.to_torch(), x.argmax(keepdim=keepdim))
    assert place(x, mesh, [S0, dtorch.Shard(2)], graph).amax(1).placements == [S0, S1]


def test_greedy_tokens_of_vocab_sharded_logits_move_no_logits(graph: dtorch.Graph) -> None:
    """Greedy decoding on a dp x tp mesh: the argmax of logits sharded on the vocabulary is
    torch's, recorded as a SplitReduce; nothing larger than the tokens is redistributed."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    logits = torch.randn((4, 3, 1000), generator=_G)
    logits[1, 2, 10] = logits[1, 2, 900] = 50.0  # a tie across the tp blocks: the first wins
    x = place(logits, mesh, [S0, dtorch.Shard(2)], graph)
    with dtorch.profile(graph) as prof:
        tokens = x[:, -1].argmax(-1)
        got = tokens.to_torch()
    assert torch.equal(got, logits[:, -1].argmax(-1)) and got[1] == 10
    assert tokens.placements == [S0, R]
    assert OpKind.SplitReduce in [e.kind for e in prof.events]
    moved = [e.shape for e in prof.events if e.kind is OpKind.Convert]  # to_torch's: tokens
    assert all(math.prod(shape) <= 4 for shape in moved), moved


def test_split_reductions_replay_in_a_traced_program(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((3, 9), generator=_G)
    program = dtorch.trace(
        lambda t: (t.argmax(1), t.amax(1), t.logsumexp(1)), place(x, mesh, [S1], graph)
    )
    for scale in (1.0, -2.0):
        y = x * scale
        index, peak, lse = program(place(y, mesh, [S1], graph))
        assert torch.equal(index.to_torch(), y.argmax(1))
        torch.testing.assert_close(peak.to_torch(), y.amax(1), rtol=0, atol=0)
        torch.testing.assert_close(lse.to_torch(), y.logsumexp(1))


def _check_topk(got: Any, x: torch.Tensor, k: int, dim: int, largest: bool, split: bool) -> None:
    """torch's values; along a sharded dim (``split``) indices that hold them, distinct, the
    smallest of equal values; else torch's indices (its kernel on the whole dim)."""
    want = torch.topk(x, k, dim, largest)
    values, indices = got.values.to_torch(), got.indices.to_torch()
    torch.testing.assert_close(values, want.values, rtol=0, atol=0, equal_nan=True)
    if not split:
        assert torch.equal(indices, want.indices)
        return
    torch.testing.assert_close(x.gather(dim, indices), values, rtol=0, atol=0, equal_nan=True)
    if k == 0:
        return
    assert (indices.sort(dim).values.diff(dim=dim) > 0).all(), indices  # distinct
    rows = x.movedim(dim, -1).reshape(-1, x.shape[dim])
    picked = indices.movedim(dim, -1).reshape(-1, k).tolist()
    for row, chosen in zip(rows, picked, strict=True):
        for index in chosen:  # every equal value before a chosen one is chosen too
            value = row[index]
            same = (row == value) | (row.isnan() & value.isnan())
            assert set(same[:index].nonzero().flatten().tolist()) <= set(chosen), (row, chosen)


@pytest.mark.parametrize(("mesh_shape", "placements"), _LAYOUTS)
def test_topk_along_a_sharded_dim_against_torch(
    mesh_shape: tuple[int, ...], placements: list[Placement], graph: dtorch.Graph
) -> None:
    """topk of every k (0 to the dim's size), largest and smallest, along each dim, on
    blocks with ties, NaN, infinities, extremes and empty blocks: torch's values; of equal
    values the smallest indices (torch's choice among them is unspecified)."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.uint8):
        x = _values(dtype)
        t = place(x, mesh, placements, graph)
        for dim in (0, -1):
            split = any(p == dtorch.Shard(dim % x.ndim) for p in placements)
            for k in range(x.shape[dim] + 1):
                for largest in (True, False):
                    # sorted=False: torch's order is unspecified; a split topk sorts
                    got = t.topk(k, dim, largest=largest, sorted=bool(k % 2) or not split)
                    _check_topk(got, x, k, dim, largest, split)


def test_topk_without_ties_is_torchs_and_moves_k_per_row(graph: dtorch.Graph) -> None:
    """Top-k sampling candidates of vocab-sharded logits on a dp x tp mesh: torch's values and
    indices (no ties), the batch shard kept, the logits never redistributed; a traced program
    replays it; a Partial input is refused."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    logits = torch.randn((4, 1000), generator=_G)
    x = place(logits, mesh, [S0, S1], graph)
    with dtorch.profile(graph) as prof:
        got = x.topk(5)
        values, indices = got.values.to_torch(), got.indices.to_torch()
    assert torch.equal(values, logits.topk(5).values) and torch.equal(
        indices, logits.topk(5).indices
    )
    assert got.values.placements == got.indices.placements == [S0, R]
    assert OpKind.SplitTopK in [e.kind for e in prof.events]
    moved = [e.shape for e in prof.events if e.kind is OpKind.Convert]  # to_torch's: 4 x 5
    assert all(math.prod(shape) <= 20 for shape in moved), moved
    program = dtorch.trace(lambda t: t.topk(3, largest=False).indices, x)
    for scale in (1.0, -1.0):
        assert torch.equal(
            program(place(logits * scale, mesh, [S0, S1], graph)).to_torch(),
            (logits * scale).topk(3, largest=False).indices,
        )
    with pytest.raises(PlacementError, match="The top entries of a sum"):
        place(logits, mesh, [R, P], graph).topk(2)


@pytest.mark.parametrize(("mesh_shape", "placements"), _LAYOUTS)
def test_scans_along_a_sharded_dim_against_torch(
    mesh_shape: tuple[int, ...], placements: list[Placement], graph: dtorch.Graph
) -> None:
    """cumsum/cumprod (with and without ``dtype=``) and logcumsumexp along each dim, on
    blocks with infinities, NaN, the dtypes' extremes (integers wrap as torch's) and empty
    blocks: integers exactly torch's, floats within rounding (the blocks' totals are added
    apart); every shard stays."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    for dtype in (torch.float32, torch.float64, torch.int8, torch.int64, torch.bool):
        x = _values(dtype)
        t = place(x, mesh, placements, graph)
        for dim in (0, -1):
            calls: list[Callable[[Any], Any]] = [
                lambda a, d=dim: a.cumsum(d),
                lambda a, d=dim: a.cumprod(d),
                lambda a, d=dim: a.cumsum(d, dtype=torch.float64),
                lambda a, d=dim: a.cumprod(d, dtype=torch.int16),
            ]  # fmt: skip
            if dtype.is_floating_point:
                calls.append(lambda a, d=dim: a.logcumsumexp(d))
            for call in calls:
                want, got = call(x), call(t)
                assert got.placements == placements and got.dtype == want.dtype
                exact = {} if want.dtype.is_floating_point else {"rtol": 0, "atol": 0}
                torch.testing.assert_close(got.to_torch(), want, equal_nan=True, **exact)


def test_scan_positions_of_a_sequence_sharded_mask_and_partial_sums(graph: dtorch.Graph) -> None:
    """Position ids from a sequence-sharded attention mask (``mask.cumsum(-1) - 1``, as
    transformers computes them) on a dp x cp mesh, the sequence nested on both; a Partial
    input keeps Partial (cumsum is linear), cumprod refuses it; a traced program replays."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2, 2))
    mask = (torch.rand((4, 13), generator=_G) > 0.3).long()
    t = place(mask, mesh, [S0, S1, S1], graph)
    positions = t.cumsum(-1) - 1
    assert positions.placements == [S0, S1, S1]
    assert torch.equal(positions.to_torch(), mask.cumsum(-1) - 1)
    flat = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.randn((3, 9), generator=_G)
    p = place(x, flat, [P, S1], graph)
    summed = p.cumsum(1)
    assert summed.placements == [P, S1]
    torch.testing.assert_close(summed.to_torch(), x.cumsum(1))
    with pytest.raises(PlacementError, match="Redistribute a Partial input to Replicate"):
        p.cumprod(1)
    program = dtorch.trace(lambda a: a.cumsum(1) * 2, place(x, flat, [R, S1], graph))
    torch.testing.assert_close(
        program(place(-x, flat, [R, S1], graph)).to_torch(), -x.cumsum(1) * 2
    )


@pytest.mark.parametrize(("mesh_shape", "placements"), _LAYOUTS)
def test_running_extremes_along_a_sharded_dim_are_torchs(
    mesh_shape: tuple[int, ...], placements: list[Placement], graph: dtorch.Graph
) -> None:
    """cummax/cummin along each dim, on blocks with ties (the latest index), NaN (it stays,
    with the last NaN's index), infinities, extremes and empty blocks: torch's values and
    indices exactly; every shard stays."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    for dtype in (torch.float32, torch.bfloat16, torch.int8, torch.int64, torch.uint8):
        x = _values(dtype)
        t = place(x, mesh, placements, graph)
        for dim in (0, -1):
            for got, want in (
                (t.cummax(dim), x.cummax(dim)),
                (dtorch.cummin(t, dim), x.cummin(dim)),
            ):
                assert got.values.placements == got.indices.placements == placements
                torch.testing.assert_close(
                    got.values.to_torch(), want.values, rtol=0, atol=0, equal_nan=True
                )
                assert torch.equal(got.indices.to_torch(), want.indices), (dtype, dim)
