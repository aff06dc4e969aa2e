"""Meshes and placements through the public API, compared with torch, in thread and process
mode: the single device as a (1,) mesh, device strings, size-1 mesh dims as Replicate,
placements from text, unbind for pipeline stages and the distributed_spec helpers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dtorch
from dtorch.distributed_spec import (
    DeviceMesh,
    Partial,
    Placement,
    Replicate,
    Shard,
    assign_layers_to_stages,
    get_default_device_mesh,
    get_placements_from_dict,
    init_device_mesh,
)
from dtorch.errors import MeshError, PlacementError

R, P = Replicate(), Partial()


def full(*shape: int) -> torch.Tensor:
    return torch.arange(float(np.prod(shape))).reshape(shape)


@pytest.mark.parametrize("device", ["cpu", "cpu:0", "cpu:3", torch.device("cpu", 2)])
def test_a_single_device_tensor_is_replicate_on_a_1d_mesh(device, graph) -> None:  # type: ignore[no-untyped-def]
    x = full(3, 4)
    t = dtorch.from_torch(x, device=device, graph=graph)
    mesh = DeviceMesh(device)
    assert t.device_mesh == mesh and mesh.shape == (1,) and t.placements == [R]
    assert not t.is_dtensor and t.device == mesh.to_device()
    assert torch.equal((t * 2).to_torch(), x * 2) and (t * 2).placements == [R]


def test_the_default_mesh_is_one_cpu_device(graph) -> None:  # type: ignore[no-untyped-def]
    t = dtorch.ones(2, 3)
    assert t.device_mesh == DeviceMesh("cpu") == get_default_device_mesh(graph=graph)
    assert t.placements == [R] and torch.equal(t.sum().to_torch(), torch.tensor(6.0))


@pytest.mark.parametrize(
    ("shape", "given", "held"),
    [
        ((2, 1), [Shard(0), Shard(1)], [Shard(0), R]),
        ((1, 3), [P, Shard(1)], [R, Shard(1)]),
        ((2, 1, 2), [Shard(1), Shard(0), P], [Shard(1), R, P]),
    ],
)
def test_placements_on_size_one_mesh_dims_are_replicate(shape, given, held, graph) -> None:  # type: ignore[no-untyped-def]
    mesh = init_device_mesh("cpu", shape)
    x = full(4, 6)
    t = dtorch.from_torch(x, device_mesh=mesh, placements=given, graph=graph)
    assert t.placements == held
    assert torch.equal(t.to_torch(), x)
    z = dtorch.zeros(4, 6, device_mesh=mesh, placements=given, graph=graph)
    assert z.placements == held and torch.equal(z.to_torch(), torch.zeros(4, 6))
    moved = t.redistribute(mesh, given)
    assert moved.placements == held and torch.equal(moved.to_torch(), x)


def test_redistribute_by_dict_normalises_size_one_dims(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = init_device_mesh("cpu", (2, 1), ("dp", "tp"))
    x = full(4, 2)
    t = dtorch.from_torch(x, device_mesh=mesh, placements=[R, R], graph=graph)
    out = t.redistribute_by_dict(mesh, {"dp": Shard(0), "tp": Shard(1)})
    assert out.placements == [Shard(0), R] and torch.equal(out.to_torch(), x)


@pytest.mark.parametrize(
    ("text", "placement"),
    [("R", R), ("P", P), ("S0", Shard(0)), ("S1", Shard(1)), ("S-1", Shard(-1))],
)
def test_placements_from_text(text: str, placement: Placement) -> None:
    assert Placement(text) == placement and type(Placement(text)) is type(placement)
    assert Placement(repr(placement)) == placement == Placement(str(placement))


def test_placements_print_in_the_dtensor_spelling() -> None:
    assert [repr(p) for p in (Shard(0), R, P)] == ["Shard(dim=0)", "Replicate()", "Partial(sum)"]
    assert str(Shard(2)) == "Shard(dim=2)" and "split_order=1" in repr(Shard(0, 1))


@pytest.mark.parametrize("text", ["X", "S", "Sx", "", "Shard(dim=)", 3, None])
def test_bad_placement_text_is_refused(text: object) -> None:
    with pytest.raises(PlacementError, match="accepted: 'R', 'P', 'S<dim>'"):
        Placement(text)


def test_text_placements_distribute_as_torch_chunks(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = init_device_mesh("cpu", (2, 3))
    x = full(5, 7)
    t = dtorch.from_torch(x, device_mesh=mesh, placements=[Placement("S0"), Placement("S1")])
    assert t.placements == [Shard(0), Shard(1)] and torch.equal(t.to_torch(), x)
    assert torch.equal((t + t).to_torch(), x + x)


def test_unbind_builds_pipeline_stage_meshes(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = init_device_mesh("cpu", (2, 2, 2), ("pp", "dp", "tp"))
    stages = mesh.unbind("pp")
    assert [s.mesh.tolist() for s in stages] == [m.tolist() for m in torch.unbind(mesh.mesh, 0)]
    x = full(4, 4)
    for stage in stages:
        assert stage.dim_names == ["dp", "tp"]
        t = dtorch.from_torch(x, device_mesh=stage, placements=[Shard(0), Shard(1)])
        assert t.device_mesh == stage and torch.equal((t * 3).to_torch(), x * 3)


def test_get_default_device_mesh(graph) -> None:  # type: ignore[no-untyped-def]
    mesh = init_device_mesh("cpu", 2)
    assert get_default_device_mesh(device_mesh=mesh) is mesh
    assert get_default_device_mesh("cpu:3") == DeviceMesh("cpu", [3])
    assert get_default_device_mesh() == graph.default_device_mesh
    with graph.device_mesh_guard(mesh):
        assert get_default_device_mesh() == mesh == get_default_device_mesh(graph=graph)
    with pytest.raises(MeshError, match="DeviceMesh"):
        get_default_device_mesh(device_mesh="cpu")  # type: ignore[arg-type]


@pytest.mark.parametrize(("layers", "stages"), [(8, 4), (10, 4), (3, 5), (0, 2), (7, 1)])
def test_assign_layers_to_stages_is_array_split(layers: int, stages: int) -> None:
    got = assign_layers_to_stages(layers, stages)
    assert got == [list(a) for a in np.array_split(range(layers), stages)]
    assert [i for stage in got for i in stage] == list(range(layers)) and len(got) == stages
    assert max(map(len, got)) - min(map(len, got)) <= 1


@pytest.mark.parametrize(("layers", "stages"), [(-1, 2), (4, 0), (2.0, 2), (4, True)])
def test_assign_layers_to_stages_refuses_bad_counts(layers, stages) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="assign_layers_to_stages"):
        assign_layers_to_stages(layers, stages)


def test_get_placements_from_dict() -> None:
    mesh = init_device_mesh("cpu", (2, 1, 3), ("dp", "sp", "tp"))
    got = get_placements_from_dict(mesh, {"tp": Shard(1), "sp": Shard(0), "pp": P})
    assert got == [R, R, Shard(1)]
    assert get_placements_from_dict(mesh, {0: "S0", -1: "P"}) == [Shard(0), R, P]
    assert get_placements_from_dict(mesh, {}, default_placement=P) == [P, R, P]
    with pytest.raises(MeshError, match="name mesh dim 2"):
        get_placements_from_dict(mesh, {"tp": R, 2: P})


def test_the_two_dict_readers_agree(graph) -> None:  # type: ignore[no-untyped-def]
    """redistribute_by_dict and get_placements_from_dict read a placements dict alike: names
    the mesh lacks are ignored; an int out of range, or two keys naming one dim, are refused
    (MeshError); a key of another type is a TypeError."""
    mesh = init_device_mesh("cpu", (2, 2), ("dp", "tp"))
    t = dtorch.zeros(4, 4, device_mesh=mesh)
    readers = (
        lambda d: get_placements_from_dict(mesh, d, default_placement=R),
        lambda d: (
            t.redistribute_by_dict(placements_dict=d, default_placement_mode="replicate").placements
        ),
    )
    for read in readers:
        assert read({"tp": Shard(1), "pp": Shard(0)}) == [R, Shard(1)]
        assert read({-2: Shard(0)}) == [Shard(0), R]
        with pytest.raises(MeshError, match="out of range"):
            read({2: Shard(0)})
        with pytest.raises(MeshError, match="name mesh dim 1"):
            read({"tp": R, 1: Shard(0)})
        with pytest.raises(TypeError, match="accepted: mesh dim names"):
            read({1.0: R})


def test_init_device_mesh_reads_its_arguments_as_torch_does() -> None:
    """torch's init_device_mesh refuses a device type with an index (the ids are 0..n-1); a
    bare string of names is one name (torch takes it for a tuple of characters)."""
    with pytest.raises(MeshError, match=r"without an index, got 'cpu:1'"):
        dtorch.init_device_mesh("cpu:1", 2)
    with pytest.raises(MeshError, match="without an index"):
        dtorch.init_device_mesh(torch.device("cpu", 0), 2)
    assert dtorch.init_device_mesh(torch.device("cpu"), 2).device_ids == (0, 1)
    assert dtorch.init_device_mesh("cpu", 2, mesh_dim_names="dp").mesh_dim_names == ("dp",)
    with pytest.raises(MeshError, match=r"\('dp',\) has 1 names for a 2-D mesh"):
        dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names="dp")


def test_subscripting_a_mesh_says_what_to_do_instead() -> None:
    """DTensor's ``mesh["tp"]`` (the calling rank's sub-mesh) has no single-controller
    meaning: a TypeError naming the alternatives; the mesh stays not iterable."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    with pytest.raises(TypeError, match=r"DeviceMesh\['tp'\]: .*mesh\.unbind"):
        mesh["tp"]
    with pytest.raises(TypeError, match="not iterable"):
        iter(mesh)
    assert 3 in mesh and 4 not in mesh
