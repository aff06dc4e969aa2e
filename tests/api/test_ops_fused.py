"""The fused operators against their unfused torch forms on the full tensors:
``F._apply_rotary_emb`` (transformers' Llama ``apply_rotary_pos_emb``; the interleaved layout
against complex multiplication), ``F._silu_linear_chunk`` (``silu(a) * b`` of
``linear(x, w).chunk(2, -1)``; the tensor-parallel ``(2, out, in)`` weight view) and
``F._layer_norm_mul_add`` (``layer_norm(x) * mul + add``): every layout on 1-D meshes, a
sample on 2-D and 3-D ones, output placements from the one-mesh-dim tables (elementwise except
on the dims the operator mixes), refusals; thread and process mode."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

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
    Table,
    elementwise_table,
    place,
    row_combos,
    run_api,
)
from tests.simulate import layout_combos

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(3)


def _combos(table: Table, fulls: Sequence[torch.Tensor], mesh_ndim: int, seed: int) -> list[Combo]:
    """1-D: every layout; N-D: random ones and ones built from table rows (mostly accepted)."""
    if mesh_ndim == 1:
        return layout_combos(1, fulls, limit=150, seed=seed)
    rng = random.Random(seed)
    options = [[R, P, *(dtorch.Shard(d) for d in range(t.ndim))] for t in fulls]
    drawn = [tuple(tuple(rng.choice(o) for _ in range(mesh_ndim)) for o in options)
             for _ in range(6)]  # fmt: skip
    built = row_combos(table, mesh_ndim, len(fulls), 10, seed)
    return [((R,) * mesh_ndim,) * len(fulls), *built, *drawn]


def _mixing_rows_dropped(
    table: dict[Row, dtorch.Placement], shapes: Sequence[tuple[int, ...]], mixed: int
) -> dict[Row, dtorch.Placement]:
    """``table`` without the rows that shard one of the last ``mixed`` output dims."""
    out_ndim = max(len(s) for s in shapes)

    def mixes(row: Row) -> bool:
        return any(
            isinstance(p, dtorch.Shard) and p.dim + out_ndim - len(s) >= out_ndim - mixed
            for p, s in zip(row, shapes, strict=True)
        )

    return {row: p for row, p in table.items() if not mixes(row)}


def _run(
    graph: dtorch.Graph,
    name: str,
    fn: Callable[..., dtorch.Tensor],
    fulls: list[torch.Tensor],
    mesh_shape: tuple[int, ...],
    want: torch.Tensor,
    table: Table,
) -> None:
    combos = _combos(table, fulls, len(mesh_shape), seed=len(mesh_shape))
    accepted = run_api(
        graph, name, fn, fulls, mesh_shape, [want], table=table, exact=False, combos=combos
    )
    assert len(accepted) >= 3


def _hf_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    return apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=1)[0]  # type: ignore[no-any-return]


_X = torch.randn(2, 3, 5, 4, generator=_G)  # (batch, heads, seq, head_dim)
_ANGLES = torch.rand(2, 5, 2, generator=_G) * 6  # (batch, seq, head_dim / 2)
_COS = torch.cat([_ANGLES.cos()] * 2, dim=-1)  # transformers' layout: (batch, seq, head_dim)
_SIN = torch.cat([_ANGLES.sin()] * 2, dim=-1)


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_rotary_against_transformers(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    cos, sin = _COS.unsqueeze(1), _SIN.unsqueeze(1)  # (batch, 1, seq, head_dim)
    shapes = [tuple(t.shape) for t in (_X, cos, sin)]
    table = _mixing_rows_dropped(elementwise_table(shapes, {(P, R, R): P}), shapes, 1)
    want = _hf_rotary(_X, _COS, _SIN)
    fn = lambda x, c, s: DF._apply_rotary_emb(x, [c, s])  # noqa: E731
    _run(graph, "_apply_rotary_emb", fn, [_X, cos, sin], mesh_shape, want, table)


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 3)])
def test_rotary_interleaved_is_complex_multiplication(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """Pairs (2i, 2i + 1) rotate by their angle: ``(a + ib) * e^(i theta)``; cos and sin
    given as torch tensors of shape (seq, head_dim), broadcast over batch and heads."""
    angles = _ANGLES[0]
    cos, sin = angles.cos().repeat_interleave(2, -1), angles.sin().repeat_interleave(2, -1)
    pairs = torch.view_as_complex(_X.reshape(2, 3, 5, 2, 2))
    want = torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    for layout in ([S0, S2][: len(mesh_shape)], [S2, S1][: len(mesh_shape)]):
        x = place(_X, mesh, layout, graph)
        out = DF._apply_rotary_emb(x, [cos, sin], interleaved=True)
        assert out.placements == layout
        torch.testing.assert_close(out.to_torch(), want)


def test_rotary_refusals(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = place(_X, mesh, [dtorch.Shard(3)], graph)
    with pytest.raises(PlacementError, match=r"_apply_rotary_emb: got .*accepted.*feature"):
        DF._apply_rotary_emb(x, [_COS[0], _SIN[0]])
    x = dtorch.tensor(_X)
    with pytest.raises(ShapeError, match="accepted: cos and sin broadcasting to x"):
        DF._apply_rotary_emb(x, [torch.ones(3, 4), torch.ones(3, 4)])
    with pytest.raises(ShapeError, match="even last"):
        DF._apply_rotary_emb(dtorch.ones(2, 3), [torch.ones(3), torch.ones(3)])
    with pytest.raises(TypeError, match=r"must be \[cos, sin\]"):
        DF._apply_rotary_emb(x, [_COS])
    with pytest.raises(DtypeError, match="one floating dtype"):
        DF._apply_rotary_emb(x, [_COS[0].double(), _SIN[0]])


_XS = torch.randn(3, 5, 4, generator=_G)
_W = torch.randn(12, 4, generator=_G)  # cat([w_gate, w_up]): 6 output features


def _swiglu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a, b = F.linear(x, w).chunk(2, dim=-1)
    return F.silu(a) * b


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_silu_linear_chunk(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    want = _swiglu(_XS, _W)
    flat: dict[Row, dtorch.Placement] = {(R, R): R, (S0, R): S0, (S1, R): S1}
    fn = DF._silu_linear_chunk
    _run(graph, "_silu_linear_chunk", fn, [_XS, _W], mesh_shape, want, flat)
    view: dict[Row, dtorch.Placement] = {**flat, (R, S1): S2}  # each device: its gate and up rows
    _run(graph, "_silu_linear_chunk", fn, [_XS, _W.view(2, 6, 4)], mesh_shape, want, view)


def test_silu_linear_chunk_refusals(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = place(_XS, mesh, [R], graph)
    with pytest.raises(PlacementError, match=r"_silu_linear_chunk: got .*accepted.*\(2, out, in\)"):
        DF._silu_linear_chunk(x, place(_W, mesh, [S0], graph))
    with pytest.raises(PlacementError, match="_silu_linear_chunk: got"):
        DF._silu_linear_chunk(place(_XS, mesh, [S2], graph), place(_W, mesh, [S1], graph))
    with pytest.raises(ShapeError, match=r"accepted: x \(..., in\) and weight \(2 \* out, in\)"):
        DF._silu_linear_chunk(x, place(_W[:11], mesh, [R], graph))
    with pytest.raises(ShapeError, match="do not fit"):
        DF._silu_linear_chunk(x, place(_W.view(3, 4, 4), mesh, [R], graph))


_XL = torch.randn(3, 5, 6, generator=_G)
_MUL = torch.randn(6, generator=_G) + 1
_ADD = torch.randn(5, 6, generator=_G)


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_layer_norm_mul_add(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    want = F.layer_norm(_XL, (6,), eps=1e-6) * _MUL + _ADD
    shapes = [tuple(t.shape) for t in (_XL, _MUL, _ADD)]
    table = _mixing_rows_dropped(elementwise_table(shapes, {(R, P, P): P}), shapes, 1)
    fn = lambda x, m, a: DF._layer_norm_mul_add(x, 6, m, a, 1e-6)  # noqa: E731
    _run(graph, "_layer_norm_mul_add", fn, [_XL, _MUL, _ADD], mesh_shape, want, table)


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2)])
def test_layer_norm_mul_add_two_normalized_dims(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """``normalized_shape`` (5, 6): only the batch dim shards; mul and add from torch."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    layout = [S0] + [R] * (len(mesh_shape) - 1)
    x = place(_XL, mesh, layout, graph)
    out = DF._layer_norm_mul_add(x, (5, 6), _ADD, _MUL)
    assert out.placements == layout
    torch.testing.assert_close(out.to_torch(), F.layer_norm(_XL, (5, 6)) * _ADD + _MUL)
    with pytest.raises(PlacementError, match=r"_layer_norm_mul_add: got .*accepted"):
        DF._layer_norm_mul_add(place(_XL, mesh, [S1] * len(mesh_shape), graph), (5, 6), _ADD, _MUL)


def test_layer_norm_mul_add_refusals(graph: dtorch.Graph) -> None:
    x = dtorch.tensor(_XL)
    with pytest.raises(ShapeError, match="is not the trailing shape"):
        DF._layer_norm_mul_add(x, (5,), _MUL, _ADD)
    with pytest.raises(ShapeError, match="accepted: mul and add broadcasting to x"):
        DF._layer_norm_mul_add(x, 6, torch.ones(2, 3, 5, 6), _ADD)
    with pytest.raises(ParamError, match="chunks the last dim only"):
        from dtorch.api.record import record_one
        from dtorch.ir.params import SiluLinearChunkParam

        record_one("_silu_linear_chunk", SiluLinearChunkParam(0), (x, dtorch.tensor(_W)))
