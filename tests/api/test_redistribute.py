"""Redistribution through the API, against torch on the full tensor: every placement pair on
1-D/2-D/3-D meshes, even and uneven, between meshes, and the by-dict / like / to forms."""

from __future__ import annotations

import itertools

import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard
from dtorch.errors import MeshError, PlacementError

SINGLE = [Shard(0), Shard(1), Shard(-1), Replicate(), Partial()]


def _full(shape: tuple[int, ...]) -> torch.Tensor:
    return torch.arange(float(torch.Size(shape).numel())).reshape(shape)


@pytest.mark.parametrize("shape", [(8, 4), (7, 3), (2, 5)])
@pytest.mark.parametrize(("src", "dst"), list(itertools.product(SINGLE, SINGLE)))
def test_every_pair_on_a_1d_mesh(src, dst, shape, graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", 4)
    full = _full(shape)
    t = dtorch.from_torch(full, device_mesh=mesh, placements=[src], graph=graph)
    out = t.redistribute(mesh, [dst])
    assert out.placements == [dst.normalized(2) if isinstance(dst, Shard) else dst]
    assert torch.equal(out.to_torch(), full)


LAYOUTS_2D = [
    (Shard(0), Shard(1)),
    (Shard(1), Shard(0)),
    (Shard(0), Shard(0)),
    (Replicate(), Shard(1)),
    (Partial(), Shard(0)),
    (Partial(), Partial()),
    (Replicate(), Replicate()),
]


@pytest.mark.parametrize("shape", [(8, 6), (5, 7)])
@pytest.mark.parametrize(("src", "dst"), list(itertools.product(LAYOUTS_2D, LAYOUTS_2D)))
def test_pairs_on_a_2d_mesh(src, dst, shape, graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    full = _full(shape)
    t = dtorch.from_torch(full, device_mesh=mesh, placements=list(src), graph=graph)
    assert torch.equal(t.redistribute(mesh, list(dst)).to_torch(), full)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ((Shard(0), Shard(1), Partial()), (Replicate(), Replicate(), Replicate())),
        ((Partial(), Partial(), Partial()), (Shard(1), Shard(0), Replicate())),
        ((Shard(0), Shard(0), Shard(0)), (Shard(1), Replicate(), Shard(0))),
    ],
)
def test_3d_mesh(src, dst, graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", (2, 2, 2))
    full = _full((9, 5))
    t = dtorch.from_torch(full, device_mesh=mesh, placements=list(src), graph=graph)
    assert torch.equal(t.redistribute(mesh, list(dst)).to_torch(), full)


def test_between_meshes(graph: dtorch.Graph) -> None:
    full = _full((9, 4))
    a = dtorch.init_device_mesh("cpu", 4)
    b = dtorch.DeviceMesh("cpu", [[4, 5], [6, 7]])
    t = dtorch.from_torch(full, device_mesh=a, placements=[Shard(0)], graph=graph)
    moved = t.redistribute(b, [Shard(1), Partial()])
    assert moved.device_mesh == b and torch.equal(moved.to_torch(), full)
    single = t.to(dtorch.DeviceMesh("cpu", 9))
    assert single.device_mesh == dtorch.DeviceMesh("cpu", 9) and torch.equal(
        single.to_torch(), full
    )
    back = single.redistribute(a, [Shard(1)])
    assert torch.equal(back.to_torch(), full)
    assert torch.equal(t.to("cpu:2").to_torch(), full)


def test_redistribute_like_and_by_dict(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    full = _full((6, 4))
    t = dtorch.from_torch(full, device_mesh=mesh, placements=[Shard(0), Shard(1)], graph=graph)
    other = dtorch.zeros(6, 4, device_mesh=mesh, placements=[Replicate(), Shard(0)], graph=graph)
    like = t.redistribute_like(other)
    assert like.placements == [Replicate(), Shard(0)] and torch.equal(like.to_torch(), full)
    kept = t.redistribute_by_dict(
        placements_dict={"tp": Replicate()}, default_placement_mode="keep"
    )
    assert kept.placements == [Shard(0), Replicate()] and torch.equal(kept.to_torch(), full)
    rep = t.redistribute_by_dict(
        placements_dict={"tp": Shard(0)}, default_placement_mode="replicate"
    )
    assert rep.placements == [Replicate(), Shard(0)] and torch.equal(rep.to_torch(), full)
    with pytest.raises(PlacementError, match="'dp'"):
        t.redistribute_by_dict(
            placements_dict={"tp": Replicate()}, default_placement_mode="raise_error"
        )
    ignored = t.redistribute_by_dict(  # names the mesh lacks are ignored (issue 9)
        placements_dict={"pp": Replicate()}, default_placement_mode="keep"
    )
    assert ignored.placements == t.placements
    with pytest.raises(ValueError, match="accepted"):
        t.redistribute_by_dict(placements_dict={}, default_placement_mode="bogus")


def test_redistribution_errors(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.ones(4, device_mesh=mesh, placements=[Shard(0)], graph=graph)
    with pytest.raises(PlacementError):
        t.redistribute(mesh, [Shard(3)])
    with pytest.raises(PlacementError):
        t.redistribute(mesh, [Shard(0), Shard(0)])
    with pytest.raises(MeshError):
        t.redistribute(dtorch.DeviceMesh("cuda", [0, 1]), [Shard(0)])


def test_implicit_replicate_to_shard_in_binary_ops(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    a = dtorch.from_torch(_full((7, 2)), device_mesh=mesh, placements=[Shard(0)], graph=graph)
    b = dtorch.from_torch(_full((7, 2)), device_mesh=mesh, placements=[Replicate()], graph=graph)
    c = a + b
    assert c.placements == [Shard(0)] and torch.equal(c.to_torch(), 2 * _full((7, 2)))


@pytest.mark.parametrize(
    "dst_placements",
    [[Shard(1), Partial()], [Replicate(), Shard(0)], [Partial(), Partial()], [Shard(0), Shard(0)]],
)
def test_copy_across_meshes(dst_placements, graph) -> None:  # type: ignore[no-untyped-def]
    a = dtorch.init_device_mesh("cpu", 4)
    b = dtorch.DeviceMesh("cpu", [[4, 5], [6, 7]])
    full = _full((5, 4))
    src = dtorch.from_torch(full, device_mesh=a, placements=[Shard(0)], graph=graph)
    dst = dtorch.zeros(5, 4, device_mesh=b, placements=dst_placements, graph=graph)
    assert dst.copy_(src) is dst and dst.placements == dst_placements
    assert torch.equal(dst.to_torch(), full)
    row = dtorch.from_torch(_full((4,)), device_mesh=a, placements=[Shard(0)], graph=graph)
    dst.copy_(row)  # broadcasting across meshes
    assert torch.equal(dst.to_torch(), _full((4,)).expand(5, 4))
    halves = dtorch.from_torch(full.half(), device_mesh=a, placements=[Partial()], graph=graph)
    dst.copy_(halves)  # and a dtype conversion (float16 parts are exact in float32)
    assert dst.dtype == torch.float32 and torch.equal(dst.to_torch(), full)


def test_placements_given_as_text(graph: dtorch.Graph) -> None:
    """A list of text placements reads as Placement(text) reads each (API.md: placements
    construct from text; redistribute_by_dict took them, lists were refused)."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    full = torch.arange(24.0).reshape(4, 6)
    t = dtorch.from_torch(full, device_mesh=mesh, placements=["S0", "S-1"], graph=graph)
    assert t.placements == [Shard(0), Shard(1)]
    moved = t.redistribute(mesh, ["R", "S0"])
    assert moved.placements == [Replicate(), Shard(0)] and torch.equal(moved.to_torch(), full)
    assert dtorch.zeros(4, device_mesh=mesh, placements=["P", "R"]).placements[0] == Partial()
    with pytest.raises(PlacementError, match=r"Placement\('Q'\): not a placement"):
        t.redistribute(mesh, ["R", "Q"])
    with pytest.raises(PlacementError, match=r"did you mean \['R'\]"):
        t.redistribute(dtorch.init_device_mesh("cpu", 2), "R")
