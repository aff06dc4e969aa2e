"""Creation functions against torch, on 1-D, 2-D and 3-D meshes, even and uneven."""

from __future__ import annotations

import pytest
import torch

import dtorch
from dtorch import Partial, Replicate, Shard
from dtorch.api.creation import uniform
from dtorch.errors import MeshError, ParamError, PlacementError

MESHES = {
    "1d": ((4,), [[Shard(0)], [Replicate()], [Partial()], [Shard(1)]]),
    "2d": (
        (2, 3),
        [
            [Shard(0), Shard(1)],
            [Replicate(), Shard(0)],
            [Partial(), Shard(1)],
            [Shard(1), Shard(1)],
        ],
    ),
    "3d": (
        (2, 2, 2),
        [
            [Shard(0), Replicate(), Shard(1)],
            [Partial(), Shard(0), Partial()],
            [Shard(0), Shard(0), Shard(0)],
        ],
    ),
}
SHAPES = [(8, 6), (7, 5), (3, 2)]  # even, uneven, smaller than the mesh (empty shards)


def _layouts():  # type: ignore[no-untyped-def]
    for name, (mesh_shape, placement_list) in MESHES.items():
        for placements in placement_list:
            for shape in SHAPES:
                yield pytest.param(mesh_shape, placements, shape, id=f"{name}-{placements}-{shape}")


@pytest.mark.parametrize(("mesh_shape", "placements", "shape"), list(_layouts()))
def test_random_values_equal_torch_however_sharded(mesh_shape, placements, shape, graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    kw = {"device_mesh": mesh, "placements": placements, "graph": graph}
    g, ref = torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)
    assert torch.equal(
        dtorch.randn(*shape, generator=g, **kw).to_torch(), torch.randn(*shape, generator=ref)
    )
    assert torch.equal(
        dtorch.rand(shape, generator=g, **kw).to_torch(), torch.rand(shape, generator=ref)
    )
    got = dtorch.randint(3, 50, shape, generator=g, **kw).to_torch()
    assert torch.equal(got, torch.randint(3, 50, shape, generator=ref))
    got = uniform(shape, -0.5, 2.0, generator=g, **kw).to_torch()
    assert torch.equal(got, torch.empty(shape).uniform_(-0.5, 2.0, generator=ref))
    # the caller's generator advanced exactly as torch's did
    assert torch.equal(g.get_state(), ref.get_state())


@pytest.mark.parametrize(("mesh_shape", "placements", "shape"), list(_layouts()))
def test_constants_and_from_torch(mesh_shape, placements, shape, graph) -> None:  # type: ignore[no-untyped-def]
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    kw = {"device_mesh": mesh, "placements": placements, "graph": graph}
    assert torch.equal(dtorch.zeros(*shape, **kw).to_torch(), torch.zeros(shape))
    assert torch.equal(
        dtorch.ones(shape, dtype=torch.bfloat16, **kw).to_torch(),
        torch.ones(shape, dtype=torch.bfloat16),
    )
    assert torch.equal(dtorch.full(shape, 2.5, **kw).to_torch(), torch.full(shape, 2.5))
    full = torch.arange(shape[0] * shape[1]).reshape(shape)
    assert torch.equal(dtorch.from_torch(full, **kw).to_torch(), full)
    assert torch.equal(dtorch.Tensor(full, **kw).to_torch(), full)
    t = dtorch.tensor(full.tolist(), **kw)
    assert t.dtype == torch.int64 and torch.equal(t.to_torch(), full)
    assert t.placements == list(dtorch.Tensor(full, **kw).placements)
    assert dtorch.empty(*shape, **kw).shape == shape


def test_arange_matches_torch(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    kw = {"device_mesh": mesh, "placements": [Shard(0)], "graph": graph}
    for args in [(10,), (2, 11), (1, 20, 3), (0.0, 1.0, 0.1), (5, -5, -2)]:
        got = dtorch.arange(*args, **kw)
        expected = torch.arange(*args)
        assert got.dtype == expected.dtype and torch.equal(got.to_torch(), expected), args


def test_default_dtypes_follow_torch(graph: dtorch.Graph) -> None:
    assert dtorch.full((2,), 3, graph=graph).dtype == torch.int64
    assert dtorch.full((2,), True, graph=graph).dtype == torch.bool
    assert dtorch.full((2,), 1.5, graph=graph).dtype == torch.float32
    assert dtorch.tensor([1.5, 2.0], graph=graph).dtype == torch.float32
    assert dtorch.tensor([True], graph=graph).dtype == torch.bool
    with graph.dtype_guard(torch.float64):
        assert dtorch.ones(2, graph=graph).dtype == torch.float64
        assert dtorch.tensor([1.0], graph=graph).dtype == torch.float64


def test_like_functions_keep_layout(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.ones(5, 3, device_mesh=mesh, placements=[Shard(0)], graph=graph, dtype=torch.float64)
    for made, value in [
        (dtorch.zeros_like(t), 0.0),
        (dtorch.ones_like(t), 1.0),
        (dtorch.full_like(t, 7), 7.0),
    ]:
        assert (
            made.placements == [Shard(0)]
            and made.device_mesh == mesh
            and made.dtype == torch.float64
        )
        assert torch.equal(made.to_torch(), torch.full((5, 3), value, dtype=torch.float64))


@pytest.mark.parametrize(
    "name", ["zeros_like", "ones_like", "empty_like", "rand_like", "randn_like"]
)
def test_like_functions_on_another_mesh_replicate(name: str, graph: dtorch.Graph) -> None:
    """A ``*_like`` told another mesh (``device_mesh`` or ``device``) without placements is
    Replicate there, as every creation (it copied the input's placements: a PlacementError
    on a mesh of another rank)."""
    like = getattr(dtorch, name)
    t = dtorch.ones(8, 4, device_mesh=dtorch.init_device_mesh("cpu", 4), placements=[Shard(0)])
    square = dtorch.init_device_mesh("cpu", (2, 2))
    made = like(t, device_mesh=square)
    assert made.device_mesh == square and made.placements == [Replicate(), Replicate()]
    assert like(t, device="cpu").placements == [Replicate()]
    assert like(t, device_mesh=square, placements=[Shard(1), Shard(0)]).placements == [
        Shard(1),
        Shard(0),
    ]
    assert like(t).placements == [Shard(0)] and made.shape == t.shape
    assert like(t, device_mesh=t.device_mesh).placements == [Shard(0)]  # its own mesh


def test_partial_creation_puts_the_value_on_the_first_rank(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 4)
    t = dtorch.ones(3, device_mesh=mesh, placements=[Partial()], graph=graph)
    assert t.placements == [Partial()] and t.to_torch().tolist() == [1.0, 1.0, 1.0]
    e = dtorch.empty(3, device_mesh=mesh, placements=[Partial()], graph=graph)
    assert e.placements == [Replicate()]


def test_metadata(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    t = dtorch.zeros(4, 6, device_mesh=mesh, placements=[Shard(0), Shard(-1)], graph=graph)
    assert (
        t.shape == torch.Size([4, 6]) and t.size() == (4, 6) and t.size(-1) == 6 and t.size(0) == 4
    )
    assert t.ndim == 2 and t.dim() == 2 and t.numel() == 24 and len(t) == 4
    assert t.placements == [Shard(0), Shard(1)] and t.is_dtensor and t.graph is graph
    assert t.device == torch.device("cpu") and t.dtype == torch.float32 and t.is_floating_point()
    single = dtorch.zeros(2, device="cpu:3", graph=graph)
    assert (
        single.device == torch.device("cpu", 3)
        and not single.is_dtensor
        and single.placements == [dtorch.Replicate()]
    )
    assert "float32[4, 6]" in repr(t)


def test_bad_creation_arguments(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    with pytest.raises(MeshError, match="not both"):
        dtorch.zeros(2, device="cpu", device_mesh=mesh, graph=graph)
    with pytest.raises(PlacementError, match="1-D mesh"):
        dtorch.zeros(2, device_mesh=mesh, placements=[Shard(0), Shard(0)], graph=graph)
    with pytest.raises(PlacementError, match="out of range"):
        dtorch.zeros(2, device_mesh=mesh, placements=[Shard(1)], graph=graph)
    with pytest.raises(TypeError, match="unexpected keyword"):
        dtorch.zeros(2, mesh=mesh, graph=graph)
    with pytest.raises(ValueError, match="requires_grad"):
        dtorch.zeros(2, requires_grad=True, graph=graph)
    with pytest.raises(ValueError, match="non-negative"):
        dtorch.zeros(-1, graph=graph)
    with pytest.raises(ParamError, match=r"uniform: low must be at most high, got low=1, high=0"):
        uniform(2, 1, 0, graph=graph)
