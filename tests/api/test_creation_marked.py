"""Creation in sub-split (marked) placements, against torch on the whole tensor: every
``*_like`` of a ``cat`` of sharded parts keeps its marked placements, with torch's values
(random kinds: the values an unsharded draw from the same generator gives); marked placements
declared at creation (``zeros(..., placements=[Shard(0, sub_split_coordinates=(4,))])``)
lay the values out as ``cat`` does; marks no tensor can have are refused naming the call."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard
from dtorch.errors import PlacementError
from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.opkind import CreateKind, OpKind
from dtorch.ir.params import CreateParam
from dtorch.ir.rules import infer

#: (mesh shape, placements of the parts, cat dim, the parts' shapes): 2 and 3 devices, even
#: and uneven segments, an empty chunk, a mark on dim 1, 2-D meshes with the mark on either
#: mesh dim beside a Shard, a Replicate or a Partial.
LAYOUTS: dict[str, Any] = {
    "2-even": ((2,), [Shard(0)], 0, [(4,), (4,)]),
    "3-uneven": ((3,), [Shard(0)], 0, [(4, 2), (5, 2)]),
    "3-dim1-empty-chunk": ((3,), [Shard(1)], 1, [(2, 3), (2, 1), (2, 4)]),
    "2x2-mark-then-shard": ((2, 2), [Shard(0), Shard(1)], 0, [(3, 4), (5, 4)]),
    "2x2-replicate-mark": ((2, 2), [Replicate(), Shard(1)], 1, [(2, 3), (2, 5)]),
    "2x3-shard-mark": ((2, 3), [Shard(1), Shard(0)], 0, [(5, 3), (2, 3)]),
    "2x2-partial-mark": ((2, 2), [Partial(), Shard(0)], 0, [(3, 2), (4, 2)]),
}
CASES = [pytest.param(case, id=name) for name, case in LAYOUTS.items()]
SOME = [CASES[1], CASES[2], CASES[5], CASES[6]]

Case = tuple[tuple[int, ...], list[Any], int, list[tuple[int, ...]]]


def _marked(case: Case, graph: dtorch.Graph) -> tuple[dtorch.Tensor, torch.Tensor]:
    """The cat of the parts (marked) and torch's cat; distinct values show a misplaced piece."""
    mesh_shape, placements, dim, shapes = case
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    fulls, start = [], 0
    for shape in shapes:
        n = int(torch.Size(shape).numel())
        fulls.append(torch.arange(start, start + n, dtype=torch.float32).reshape(shape))
        start += n
    on = {"device_mesh": mesh, "placements": placements, "graph": graph}
    got = dtorch.cat([dtorch.from_torch(f, **on) for f in fulls], dim)
    assert any(isinstance(p, Shard) and p.has_sub_split_coordinates() for p in got.placements)
    return got, torch.cat(fulls, dim)


def _same(got: dtorch.Tensor, want: torch.Tensor, like: dtorch.Tensor) -> None:
    assert got.placements == like.placements and got.device_mesh == like.device_mesh
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    assert torch.equal(got.to_torch(), want)


@pytest.mark.parametrize("case", CASES)
def test_constant_likes_keep_the_marks_and_equal_torch(case: Case, graph: dtorch.Graph) -> None:
    c, want = _marked(case, graph)
    _same(dtorch.zeros_like(c), torch.zeros_like(want), c)
    _same(dtorch.ones_like(c), torch.ones_like(want), c)
    _same(dtorch.full_like(c, 2.5), torch.full_like(want, 2.5), c)
    empty = dtorch.empty_like(c)  # nothing to sum: Partial is Replicate, as for any empty
    plain = [Replicate() if p.is_partial() else p for p in c.placements]
    assert empty.placements == plain and tuple(empty.shape) == tuple(want.shape)
    full = empty.fill_(-1.0)  # its local shards fit the layout
    assert full.placements == plain and torch.equal(full.to_torch(), torch.full_like(want, -1.0))


@pytest.mark.parametrize("case", CASES)
def test_random_likes_draw_the_unsharded_values(case: Case, graph: dtorch.Graph) -> None:
    c, want = _marked(case, graph)
    shape = tuple(want.shape)
    g, ref = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    _same(dtorch.rand_like(c, generator=g), torch.rand(shape, generator=ref), c)
    _same(dtorch.randn_like(c, generator=g), torch.randn(shape, generator=ref), c)
    got = dtorch.randint_like(c, 3, 50, generator=g)
    _same(got, torch.randint(3, 50, shape, generator=ref, dtype=want.dtype), c)
    assert torch.equal(g.get_state(), ref.get_state())  # advanced as torch's


@pytest.mark.parametrize("case", SOME)
def test_dtype_override(case: Case, graph: dtorch.Graph) -> None:
    c, want = _marked(case, graph)
    shape = tuple(want.shape)
    _same(dtorch.zeros_like(c, dtype=torch.int32), torch.zeros(shape, dtype=torch.int32), c)
    _same(dtorch.ones_like(c, dtype=torch.bool), torch.ones(shape, dtype=torch.bool), c)
    _same(dtorch.full_like(c, 7, dtype=torch.int16), torch.full(shape, 7, dtype=torch.int16), c)
    assert dtorch.empty_like(c, dtype=torch.float64).dtype == torch.float64
    g, ref = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    got = dtorch.rand_like(c, dtype=torch.float64, generator=g)
    _same(got, torch.rand(shape, dtype=torch.float64, generator=ref), c)
    got = dtorch.randint_like(c, 10, dtype=torch.int16, generator=g)
    _same(got, torch.randint(10, shape, dtype=torch.int16, generator=ref), c)


@pytest.mark.parametrize("case", CASES)
def test_elementwise_with_the_like_is_local_and_right(case: Case, graph: dtorch.Graph) -> None:
    c, want = _marked(case, graph)
    _same(c + dtorch.ones_like(c), want + 1, c)
    _same(dtorch.full_like(c, 3.0) + c, 3.0 + want, c)
    g, ref = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    _same(c - dtorch.rand_like(c, generator=g), want - torch.rand(want.shape, generator=ref), c)


@pytest.mark.parametrize("case", CASES)
def test_declared_marks_lay_values_out_as_cat(case: Case, graph: dtorch.Graph) -> None:
    """Creation in the cat's placements: torch's whole tensor, and the same local pieces as
    the cat's (their difference, an elementwise op on the shards, is zero)."""
    c, want = _marked(case, graph)
    on = {"device_mesh": c.device_mesh, "placements": c.placements, "graph": graph}
    made = dtorch.from_torch(want, **on)
    _same(made, want, c)
    _same(made - c, torch.zeros_like(want), c)
    _same(dtorch.ones(tuple(want.shape), **on), torch.ones_like(want), c)
    g, ref = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    got = dtorch.randn(tuple(want.shape), generator=g, **on)
    _same(got, torch.randn(want.shape, generator=ref), c)


@pytest.mark.parametrize(("parts", "coords"), [(2, (4,)), (3, (4,)), (3, (1, 2, 7))], ids=str)
def test_arange_in_declared_marks(parts: int, coords: tuple[int, ...], graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", parts)
    marked = [Shard(0, sub_split_coordinates=coords)]
    got = dtorch.arange(1.0, 10.0, device_mesh=mesh, placements=marked, graph=graph)
    assert got.placements == marked
    assert torch.equal(got.to_torch(), torch.arange(1.0, 10.0))
    bounds = (0, *coords, 9)  # the same values cat of the segments makes
    segments = [
        dtorch.arange(1.0 + a, 1.0 + b, device_mesh=mesh, placements=[Shard(0)], graph=graph)
        for a, b in itertools.pairwise(bounds)
    ]
    assert torch.equal((got - dtorch.cat(segments)).to_torch(), torch.zeros(9))


def test_two_marks_on_two_mesh_dims(graph: dtorch.Graph) -> None:
    """A cat along dim 1 of tensors marked along dim 0: both dims marked."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    want = torch.arange(35.0).reshape(5, 7)
    plain = {"device_mesh": mesh, "placements": [Shard(0), Shard(1)], "graph": graph}
    rows = dtorch.cat([dtorch.from_torch(want[:2], **plain), dtorch.from_torch(want[2:], **plain)])
    on = {"device_mesh": mesh, "placements": rows.placements, "graph": graph}
    c = dtorch.cat([dtorch.from_torch(want[:, :3], **on), dtorch.from_torch(want[:, 3:], **on)], 1)
    assert c.placements == [
        Shard(0, sub_split_coordinates=(2,)),
        Shard(1, sub_split_coordinates=(3,)),
    ]
    _same(c + dtorch.ones_like(c), want + 1, c)
    g, ref = torch.Generator().manual_seed(6), torch.Generator().manual_seed(6)
    _same(dtorch.rand_like(c, generator=g), torch.rand(want.shape, generator=ref), c)
    made = dtorch.from_torch(want, device_mesh=mesh, placements=c.placements, graph=graph)
    _same(made - c, torch.zeros_like(want), c)


def test_random_fills_of_a_marked_tensor_are_local(graph: dtorch.Graph, kinds: list) -> None:
    """An in-place draw into a marked tensor creates the draw in its marks: no
    redistribution (it created Replicate and moved it part by part)."""
    c, want = _marked(LAYOUTS["3-uneven"], graph)
    g, ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    kinds.clear()
    c.uniform_(-1.0, 2.0, generator=g)
    c.normal_(generator=g)
    assert not {OpKind.Convert, OpKind.GetItem, OpKind.Concat} & set(kinds), kinds
    expected = torch.empty_like(want).uniform_(-1.0, 2.0, generator=ref).normal_(generator=ref)
    assert c.placements[0].has_sub_split_coordinates()
    assert torch.equal(c.to_torch(), expected)


def test_marks_no_tensor_can_have_are_refused_naming_the_call(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    outside = [Shard(0, sub_split_coordinates=(8,)), Replicate()]
    nested = [Shard(0, sub_split_coordinates=(4,)), Shard(0)]
    c, _ = _marked(LAYOUTS["2x2-mark-then-shard"], graph)
    on = {"device_mesh": mesh, "graph": graph}
    calls: dict[str, tuple[Callable[[], Any], str]] = {
        "zeros": (lambda: dtorch.zeros(8, placements=outside, **on), "outside dim 0"),
        "rand": (lambda: dtorch.rand(8, placements=nested, **on), "another mesh dim shards"),
        "from_torch": (
            lambda: dtorch.from_torch(torch.zeros(8), placements=nested, **on),
            "another mesh dim shards",
        ),
        "zeros_like": (lambda: dtorch.zeros_like(c, placements=outside), "outside dim 0"),
        "randn_like": (lambda: dtorch.randn_like(c, placements=nested), "another mesh dim"),
        "ones_like": (  # on another mesh than the input's
            lambda: dtorch.ones_like(
                c, device_mesh=dtorch.init_device_mesh("cpu", (4, 1)), placements=outside
            ),
            "outside dim 0",
        ),
    }
    for name, (call, why) in calls.items():
        with pytest.raises(
            PlacementError, match=rf"^{name}: the placement Shard\(dim=0, s"
        ) as info:
            call()
        assert why in str(info.value) and "accepted: " in str(info.value), name


def test_the_create_rule_accepts_what_creation_makes() -> None:
    """A program file's Create in marks passes the rule the loader checks it with; one in
    marks no tensor can have is refused."""
    mesh = init_device_mesh("cpu", 2)
    marked = (Shard(-1, sub_split_coordinates=(4,)),)
    param = CreateParam(CreateKind.ZEROS, (3, 9), torch.float32, mesh, marked)
    (out,) = infer("zeros", param, ()).outputs
    assert out.placements == (Shard(1, sub_split_coordinates=(4,)),) and out.shape == (3, 9)
    bad = CreateParam(CreateKind.ZEROS, (3, 4), torch.float32, mesh, marked)
    with pytest.raises(PlacementError, match=r"^zeros: the placement .*outside dim 1"):
        infer("zeros", bad, ())
