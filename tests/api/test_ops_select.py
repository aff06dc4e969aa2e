"""Value-selecting operators through the public API against torch: ``where`` (tensors and
numbers), ``clamp``/``clip``, ``masked_fill(_)``, ``masked_scatter(_)``, ``nonzero`` and
``equal``, on 1-D, 2-D and 3-D meshes, even and uneven shards, every layout on 1-D meshes (a
seeded sample on the larger ones). They broadcast like the other elementwise operators; Partial
survives only where selecting is linear (``where(c, P, P)``, ``where(c, P, 0)``,
``masked_fill(P, mask, 0)``); ``masked_scatter`` reads its source in mask order and accepts
Replicate inputs only."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import KernelError, PlacementError, ShapeError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    P,
    R,
    elementwise_table,
    expected_layout,
    limit_for,
    place,
    run_api,
)
from tests.simulate import layout_combos

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(4242)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(4242)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


def _mask(*shape: int) -> torch.Tensor:
    return torch.rand(shape, generator=_G) > 0.5


_WHERE_SHAPES = [((5, 3), (5, 3), (5, 3)), ((5, 3), (5, 3), (3,)), ((5, 1), (1, 3), (5, 3))]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("sc", "sx", "sy"), _WHERE_SHAPES)
def test_where_tensors_every_layout(sc, sx, sy, mesh_shape, graph) -> None:  # type: ignore[no-untyped-def]
    cond, x, y = _mask(*sc), _randn(*sx), _randn(*sy)
    table = elementwise_table([sc, sx, sy], {(R, P, P): P}, bools=[True, False, False])
    want = torch.where(cond, x, y)
    limit = limit_for(mesh_shape, 200, 10)
    run_api(
        graph, "where", dtorch.where, [cond, x, y], mesh_shape, [want], table=table, limit=limit
    )
    run_api(
        graph, "where", lambda c, a, b: a.where(c, b), [cond, x, y], mesh_shape, [want],
        table=table, limit=limit // 4,
    )  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("value", [0, 2.5, -1])
def test_where_with_numbers(value: float, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    """A number on either side (``where(c, P, 0)`` stays Partial) or on both."""
    cond, x = _mask(5, 3), _randn(5, 3).double()
    zero = {(R, P): P} if value == 0 else {}
    table = elementwise_table([(5, 3), (5, 3)], zero, bools=[True, False])
    limit = limit_for(mesh_shape, n_d=10)
    cases = [
        (lambda c, t: dtorch.where(c, t, value), torch.where(cond, x, torch.tensor(value))),
        (lambda c, t: dtorch.where(c, value, t), torch.where(cond, torch.tensor(value), x)),
    ]
    for call, want in cases:
        run_api(graph, "where", call, [cond, x], mesh_shape, [want], table=table, limit=limit)
    both = torch.where(cond, torch.tensor(value), torch.tensor(7))
    table = elementwise_table([(5, 3)], bools=[True])
    run_api(
        graph, "where", lambda c: dtorch.where(c, value, 7), [cond], mesh_shape, [both],
        table=table, limit=limit,
    )  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_clamp_and_clip_every_layout(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    """Bounds as numbers, either or both, on floats and ints; never Partial."""
    x, ints = _randn(5, 3), torch.randint(-5, 5, (5, 3), generator=_G)
    table = elementwise_table([(5, 3)])
    for low, high in ((-0.5, 0.5), (None, 0.0), (0, None), (-1, 2)):
        for t in (x, ints):
            want = torch.clamp(t, low, high)
            for call in (
                lambda v, lo=low, hi=high: v.clamp(lo, hi),
                lambda v, lo=low, hi=high: v.clip(min=lo, max=hi),
                lambda v, lo=low, hi=high: dtorch.clip(v, min=lo, max=hi),
            ):
                run_api(
                    graph, "clamp", call, [t], mesh_shape, [want], table=table,
                    limit=limit_for(mesh_shape, n_d=6),
                )  # fmt: skip


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("value", [0, 1.5])
@pytest.mark.parametrize("mask_shape", [(5, 3), (5, 1), (3,)])
def test_masked_fill_every_layout(  # type: ignore[no-untyped-def]
    mask_shape, value, mesh_shape, graph
) -> None:
    t, mask = _randn(5, 3), _mask(*mask_shape)
    want = t.masked_fill(mask, value)
    zero = {(P, R): P} if value == 0 else {}
    table = elementwise_table([(5, 3), mask_shape], zero, bools=[False, True])
    limit = limit_for(mesh_shape, n_d=10)
    for call in (
        lambda a, m: a.masked_fill(m, value),
        lambda a, m: dtorch.masked_fill(a, m, value),
    ):
        run_api(graph, "masked_fill", call, [t, mask], mesh_shape, [want], table=table, limit=limit)


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_masked_fill_in_place(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    """``masked_fill_`` writes t in place (t keeps its layout) for the layouts where the mask
    can follow t (t is never redistributed)."""
    t, mask = _randn(5, 3), _mask(5, 1)
    want = t.masked_fill(mask, 0)
    table = elementwise_table([(5, 3), (5, 1)], {(P, R): P}, bools=[False, True], fixed=[0])

    def fill(a: Any, m: Any) -> Any:
        out = a.masked_fill_(m, 0)
        assert out is a
        return a

    run_api(
        graph, "masked_fill_", fill, [t, mask], mesh_shape, [want],
        table={row: row[0] for row in table}, combos=_accepted_by(table, mesh_shape),
    )  # fmt: skip


def _accepted_by(table: dict[Any, Any], mesh_shape: tuple[int, ...]) -> list[Any]:
    """Combinations whose every mesh-dim row is in ``table`` (rejections are tested apart:
    see test_masked_fill_in_place_rejection_names_it)."""
    full = [torch.zeros(5, 3), torch.zeros(5, 1, dtype=torch.bool)]
    combos = layout_combos(len(mesh_shape), full, limit=limit_for(mesh_shape, n_d=12))
    return [c for c in combos if expected_layout(table, c) is not None]


def test_masked_fill_in_place_rejection_names_it(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = place(_randn(4, 3), mesh, [R], graph)
    with pytest.raises(PlacementError, match=r"^masked_fill_: got \(R,\) x \(S\(0\),\)"):
        t.masked_fill_(place(_mask(4, 3), mesh, [S0], graph), 1.0)


@pytest.mark.parametrize("mesh_shape", [(2,), (3,), (2, 2)])
def test_masked_scatter_replicate_only(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    t, mask, source = _randn(4, 3), _mask(4, 3), _randn(12)
    want = t.masked_scatter(mask, source)
    replicate = (R,) * len(mesh_shape)
    accepted = run_api(
        graph, "masked_scatter", dtorch.masked_scatter,
        [t, mask, source], mesh_shape, [want], table=None, limit=limit_for(mesh_shape, 60, 20),
    )  # fmt: skip
    assert accepted == [(replicate, replicate, replicate)]
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    a = place(t, mesh, replicate, graph)
    out = a.masked_scatter_(
        place(mask, mesh, replicate, graph), place(source, mesh, replicate, graph)
    )
    assert out is a and torch.equal(a.to_torch(), want)
    got = a.masked_scatter(
        place(mask, mesh, replicate, graph), place(source, mesh, replicate, graph)
    )
    assert torch.equal(got.to_torch(), t.masked_scatter(mask, want.masked_select(mask)))


@pytest.mark.parametrize("mesh_shape", [(3,), (2, 2), (2, 1, 2)])
def test_nonzero_and_equal(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    """``nonzero`` (method and function) on the mesh's first device; ``equal`` compares
    shapes and values whatever the layouts."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    x = torch.randint(-1, 2, (5, 4), generator=_G)
    rest = [R] * (len(mesh_shape) - 1)
    t = place(x, mesh, [S0, *rest], graph)
    for out in (t.nonzero(), dtorch.nonzero(t), dtorch.nonzero(t > 0)):
        assert out.device_mesh == mesh  # nonzero keeps the input's mesh (issue 9)
    assert torch.equal(t.nonzero().to_torch(), x.nonzero())
    assert torch.equal(dtorch.nonzero(t > 0).to_torch(), torch.nonzero(x > 0))
    same = place(x, mesh, [P, *rest], graph)
    assert dtorch.equal(t, same) and t.equal(same)
    assert not dtorch.equal(t, t + 1)
    assert not t.equal(place(x[:4], mesh, [R, *rest], graph))


def test_dtypes_and_rejections(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    cond, x = _mask(4, 3), _randn(4, 3)
    ints = torch.randint(-3, 3, (4, 3), generator=_G)
    c, t, i = (
        place(cond, mesh, [S0], graph),
        place(x, mesh, [S0], graph),
        place(ints, mesh, [R], graph),
    )
    for out, want in (
        (dtorch.where(c, t, i), torch.where(cond, x, ints)),
        (dtorch.where(c, i, 2.5), torch.where(cond, ints, 2.5)),
        (i.clamp(0.5), torch.clamp(ints, 0.5)),
        (i.clamp(max=1), torch.clamp(ints, max=1)),
        (i.masked_fill(c, 7), ints.masked_fill(cond, 7)),
    ):
        assert out.dtype == want.dtype
        assert torch.equal(out.to_torch(), want)
    p = place(x, mesh, [P], graph)
    with pytest.raises(PlacementError) as info:
        dtorch.where(c.redistribute(mesh, [R]), p, t.redistribute(mesh, [R]))
    text = str(info.value)
    assert text.startswith("where: got (R,) x (P,) x (R,) on mesh (2,); accepted per mesh dim")
    assert "R x P x P -> P" in text
    with pytest.raises(PlacementError, match=r"^clamp: got \(P,\).*accepted"):
        p.clamp(0, 1)
    with pytest.raises(PlacementError, match=r"^masked_fill: got \(P,\) x \(S\(0\),\)"):
        p.masked_fill(c, 0)
    with pytest.raises(PlacementError, match=r"^masked_fill: got \(P,\) x \(R,\).*accepted"):
        p.masked_fill(c.redistribute(mesh, [R]), 1.0)
    with pytest.raises(PlacementError, match=r"^masked_scatter: got \(S\(0\),\) x"):
        t.masked_scatter(c, place(_randn(12), mesh, [R], graph))
    with pytest.raises(ShapeError, match=r"^where: shapes"):
        dtorch.where(c, t, place(_randn(5), mesh, [R], graph))
    with pytest.raises(ValueError, match=r"^clamp: at least one of min and max"):
        t.clamp()
    with pytest.raises(TypeError, match=r"^clamp: bounds must be numbers"):
        t.clamp("low")
    with pytest.raises(TypeError, match="masked"):
        t.masked_fill(t, 0.0)


def test_a_failed_mask_fails_the_tensor_changed_in_place(graph: dtorch.Graph) -> None:
    """``masked_fill_``/``masked_scatter_`` with a mask whose value failed (a division by zero
    upstream) fail the tensor they change, as ``copy_`` does; a good mask still changes it
    as torch does."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.tensor([5, 6, 7, 8])
    for placement in (S0, R):
        put = lambda v, p=placement: place(v, mesh, [p], graph)  # noqa: E731
        for divisor in (torch.tensor([1, 1, 1, 1]), torch.tensor([1, 1, 0, 1])):
            mask = (put(x) // put(divisor)) > 6
            filled, scattered = put(x).clone(), place(x, mesh, [R], graph)
            assert filled.masked_fill_(mask, -1) is filled
            scattered.masked_scatter_(mask.redistribute(mesh, [R]), place(-x, mesh, [R], graph))
            if divisor.all():
                assert filled.tolist() == [5, 6, -1, -1]
                assert scattered.tolist() == [5, 6, -5, -6]
                continue
            for changed in (filled, scattered):
                with pytest.raises(KernelError, match="floor_divide"):
                    changed.to_torch()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_where_numbers_promote_as_numbers(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """A number branch keeps the tensor's dtype and its own precision (0.1 and 1e300 in
    float64, a 0-d float16 stays float16), as in torch; nan_to_num relies on it."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.tensor([float("inf"), float("-inf"), float("nan"), 1.0], dtype=dtype)
    cond = torch.tensor([True, False, True, False])
    t, c = place(x, mesh, [S0], graph), place(cond, mesh, [S0], graph)
    big = torch.finfo(dtype).max
    for out, want in (
        (dtorch.where(c, 0.1, t), torch.where(cond, 0.1, x)),
        (dtorch.where(c, t, big), torch.where(cond, x, big)),
        (t.nan_to_num(), x.nan_to_num()),
        (t.nan_to_num(nan=0.1), x.nan_to_num(nan=0.1)),
        (place(x[2], mesh, [R], graph).nan_to_num(), x[2].nan_to_num()),
        (dtorch.where(place(cond[0], mesh, [R], graph), 1.5, place(x[3], mesh, [R], graph)),
         torch.where(cond[0], 1.5, x[3])),
    ):  # fmt: skip
        assert out.dtype == want.dtype
        torch.testing.assert_close(out.to_torch(), want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize(
    ("full", "bounds"),
    [
        (torch.tensor(2.5, dtype=torch.bfloat16), {"max": 1.3}),
        (torch.tensor(2.5, dtype=torch.float16), {"min": 3, "max": 4.5}),
        (torch.tensor(5, dtype=torch.int32), {"max": 2}),
        (torch.tensor(5, dtype=torch.uint8), {"min": True}),
        (torch.tensor([5, 1], dtype=torch.int32), {"min": 2.5}),
        (torch.tensor(7, dtype=torch.int8), {"min": 1, "max": 3.5}),
    ],
    ids=["bf16-0d", "f16-0d", "int32-0d", "uint8-bool", "int32-float-bound", "int8-mixed"],
)
def test_clamp_by_numbers_keeps_torchs_dtype_on_0d_tensors(
    full: torch.Tensor, bounds: dict[str, Any], graph: dtorch.Graph
) -> None:
    """A number bound promotes as a number, not as a 0-d tensor: a 0-d bfloat16 clamped by
    1.3 stays bfloat16 (dtorch recorded float32 and every fetch failed)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.from_torch(full, device_mesh=mesh, placements=[R], graph=graph)
    want = full.clamp(**bounds)
    got = x.clamp(**bounds)
    assert got.dtype == want.dtype
    assert torch.equal(got.to_torch(), want)
