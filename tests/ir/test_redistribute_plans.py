"""Plans without devices: the collectives each transition issues (CommDebugMode's count), so a
regression to a costlier plan fails here, plus the planner's contract (normalisation, caching,
errors). Correctness of every plan is checked in test_redistribute_interpreter.py."""

from __future__ import annotations

import pytest

from dtorch.errors import MeshError, PlacementError, ShapeError
from dtorch.ir.mesh import DeviceMesh, init_device_mesh
from dtorch.ir.placement import Partial, Placement, Replicate, Shard
from dtorch.ir.redistribute import (
    AllGather,
    AllToAll,
    Gather,
    LocalChunk,
    ReduceScatter,
    Scatter,
    SendRecv,
    collective_counts,
    plan_redistribute,
)

R, P = Replicate(), Partial()


def S(dim: int, split_order: int = -1) -> Shard:
    return Shard(dim, split_order)


def counts(
    shape: tuple[int, ...],
    mesh: DeviceMesh,
    src: tuple[Placement, ...],
    dst: tuple[Placement, ...],
    dst_mesh: DeviceMesh | None = None,
) -> dict[str, int]:
    return collective_counts(plan_redistribute(shape, mesh, src, dst_mesh or mesh, dst))


MESH1 = init_device_mesh("cpu", 4)
MESH2 = init_device_mesh("cpu", (2, 2))
MESH3 = init_device_mesh("cpu", (2, 2, 2))

# (mesh, src, dst, expected counts); checked on an even and two uneven shapes
TABLE: list[tuple[DeviceMesh, tuple[Placement, ...], tuple[Placement, ...], dict[str, int]]] = [
    # 1-D: the conversion matrix of spec 002 2.5, plus the zero-traffic extras
    (MESH1, (S(0),), (S(0),), {}),
    (MESH1, (S(0),), (S(1),), {"all_to_all": 1}),
    (MESH1, (S(1),), (S(0),), {"all_to_all": 1}),
    (MESH1, (S(0),), (R,), {"all_gather": 1}),
    (MESH1, (R,), (S(0),), {}),
    (MESH1, (P,), (R,), {"all_reduce": 1}),
    (MESH1, (P,), (S(0),), {"reduce_scatter": 1}),
    (MESH1, (P,), (S(1),), {"reduce_scatter": 1}),
    (MESH1, (R,), (P,), {}),
    (MESH1, (S(0),), (P,), {}),
    (MESH1, (P,), (P,), {}),
    # 2-D: one collective per mesh dim that must move
    (MESH2, (S(0), S(1)), (R, R), {"all_gather": 2}),
    (MESH2, (S(0), S(0)), (R, R), {"all_gather": 2}),
    (MESH2, (R, R), (S(0), S(1)), {}),
    (MESH2, (R, R), (S(0), S(0)), {}),
    (MESH2, (P, P), (R, R), {"all_reduce": 2}),
    (MESH2, (P, P), (S(0), S(1)), {"reduce_scatter": 2}),
    (MESH2, (P, P), (S(0), S(0)), {"reduce_scatter": 2}),
    (MESH2, (P, R), (R, P), {"all_reduce": 1}),
    (MESH2, (S(0), R), (S(0), S(1)), {}),
    (MESH2, (S(0), R), (S(0), S(0)), {}),
    (MESH2, (S(0), S(1)), (S(0), R), {"all_gather": 1}),
    (MESH2, (S(0), S(1)), (S(1), S(0)), {"all_gather": 1, "all_to_all": 1}),
    (MESH2, (S(0), S(1)), (S(0), S(0)), {"all_to_all": 1}),
    (MESH2, (S(0), R), (R, S(0)), {"all_gather": 1}),
    (MESH2, (R, S(0)), (S(0), S(0)), {"all_gather": 1}),
    (MESH2, (S(0), P), (S(0), S(1)), {"reduce_scatter": 1}),
    (MESH2, (P, S(0)), (R, R), {"all_gather": 1, "all_reduce": 1}),
    (MESH2, (S(0), R), (P, R), {}),
    (MESH2, (R, P), (S(0), S(1)), {"reduce_scatter": 1}),
    (MESH2, (S(0), S(1)), (S(1), S(1)), {"all_gather": 1, "all_to_all": 1}),
    # nested shards of one tensor dim: mesh order vs split_order order
    (MESH2, (S(0), S(0)), (S(0, 1), S(0, 0)), {"all_gather": 2}),
    (MESH2, (S(0, 1), S(0, 0)), (S(0), S(0)), {"all_gather": 2}),
    (MESH2, (R, S(0)), (S(0, 1), S(0, 0)), {}),
    (MESH2, (S(0, 1), S(0, 0)), (S(1), S(0)), {"all_to_all": 1}),
    (MESH2, (S(0), S(0)), (S(1, 1), S(1, 0)), {"all_to_all": 2}),
    (MESH2, (S(0), S(0)), (S(1), S(1)), {"all_gather": 1, "all_to_all": 1}),
    # 3-D
    (MESH3, (S(0), S(1), S(2)), (R, R, R), {"all_gather": 3}),
    (MESH3, (P, P, P), (S(0), S(0), S(0)), {"reduce_scatter": 3}),
    (MESH3, (P, P, P), (R, R, R), {"all_reduce": 3}),
    (MESH3, (S(0), S(1), S(2)), (S(1), S(2), S(0)), {"all_gather": 1, "all_to_all": 2}),
    (MESH3, (S(0), S(1), P), (S(2), P, S(0)), {"all_to_all": 1, "reduce_scatter": 1}),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("shape", [(8, 8, 8), (7, 5, 3), (3, 1, 2)], ids=["even", "uneven", "tiny"])
@pytest.mark.parametrize(("mesh", "src", "dst", "expected"), TABLE, ids=repr)
def test_collective_counts_table(
    shape: tuple[int, ...],
    mesh: DeviceMesh,
    src: tuple[Placement, ...],
    dst: tuple[Placement, ...],
    expected: dict[str, int],
) -> None:
    assert counts(shape, mesh, src, dst) == expected


def test_the_named_plans_of_the_brief() -> None:
    assert plan_redistribute((8, 8), MESH1, (S(0),), MESH1, (S(1),)).steps == (AllToAll(0, 0, 1),)
    assert plan_redistribute((8, 8), MESH1, (P,), MESH1, (S(0),)).steps == (ReduceScatter(0, 0),)
    assert plan_redistribute((8, 8), MESH1, (R,), MESH1, (S(1),)).steps == (LocalChunk(0, 1),)


def test_nested_gather_goes_inner_first() -> None:
    """DTensor's rule: the outer split cannot be gathered while the inner one is split."""
    plan = plan_redistribute((8, 8), MESH2, (S(0), S(0)), MESH2, (R, R))
    assert plan.steps == (AllGather(1, 0), AllGather(0, 0))
    swapped = plan_redistribute((8, 8), MESH2, (S(0, 1), S(0, 0)), MESH2, (R, R))
    assert swapped.steps == (AllGather(0, 0), AllGather(1, 0))


def test_shard_minus_one_is_normalised() -> None:
    a = plan_redistribute((4, 6), MESH2, (S(-1), R), MESH2, (R, S(-2)))
    b = plan_redistribute((4, 6), MESH2, (S(1), R), MESH2, (R, S(0)))
    assert a is b
    assert a.src == (S(1), R) and a.dst == (R, S(0))


def test_plans_are_cached_and_lists_are_accepted() -> None:
    a = plan_redistribute([8, 8], MESH2, [S(0), P], MESH2, [R, R])
    assert plan_redistribute((8, 8), MESH2, (S(0), P), MESH2, (R, R)) is a


def test_size_one_mesh_dims_cost_nothing() -> None:
    mesh = init_device_mesh("cpu", (1, 4))
    assert counts((8, 8), mesh, (S(0), P), (P, S(1))) == {"reduce_scatter": 1}
    assert counts((8, 8), mesh, (S(0), R), (R, R)) == {}
    assert plan_redistribute((8,), mesh, (P, R), mesh, (S(0), R)).steps == ()


def test_dim_names_do_not_make_another_mesh() -> None:
    named = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    assert counts((8, 8), MESH2, (S(0), R), (R, R), dst_mesh=named) == {"all_gather": 1}


def test_uneven_all_to_all_is_one_collective() -> None:
    """torch.chunk semantics on uneven and empty shards do not change the plan."""
    assert counts((7, 3), MESH1, (S(0),), (S(1),)) == {"all_to_all": 1}
    assert counts((2, 3), MESH1, (S(0),), (S(1),)) == {"all_to_all": 1}


# --- between different meshes ------------------------------------------------------------

SINGLE = DeviceMesh("cpu", 0)
PAIR_A = DeviceMesh("cpu", [0, 1])
PAIR_B = DeviceMesh("cpu", [2, 3])

CROSS = [
    (SINGLE, (R,), MESH1, (S(0),), {"scatter": 1}),
    (SINGLE, (R,), MESH1, (R,), {"scatter": 1}),
    (MESH1, (S(0),), SINGLE, (R,), {"gather": 1}),
    (MESH1, (P,), SINGLE, (R,), {"all_reduce": 1}),
    (MESH1, (P,), DeviceMesh("cpu", 9), (R,), {"gather": 1, "reduce_scatter": 1}),
    (MESH1, (R,), SINGLE, (R,), {}),
    (DeviceMesh("cpu", 5), (R,), DeviceMesh("cpu", 6), (R,), {"send_recv": 1}),
    (PAIR_A, (S(0),), PAIR_B, (S(0),), {"send_recv": 2}),
    (PAIR_A, (P,), PAIR_B, (P,), {"send_recv": 2}),
    (PAIR_A, (P,), PAIR_B, (R,), {"all_reduce": 1, "send_recv": 2}),
    (PAIR_A, (P,), PAIR_B, (S(0),), {"reduce_scatter": 1, "send_recv": 2}),
    (PAIR_A, (S(0),), PAIR_B, (S(1),), {"all_to_all": 1, "send_recv": 2}),
    (MESH2, (S(0), S(1)), PAIR_B, (R,), {"send_recv": 6}),
    (MESH2, (S(0), S(1)), DeviceMesh("cpu", [4, 5]), (R,), {"send_recv": 8}),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("a", "src", "b", "dst", "expected"), CROSS, ids=repr)
def test_cross_mesh_counts(
    a: DeviceMesh,
    src: tuple[Placement, ...],
    b: DeviceMesh,
    dst: tuple[Placement, ...],
    expected: dict[str, int],
) -> None:
    assert collective_counts(plan_redistribute((8, 8), a, src, b, dst)) == expected


def test_cross_mesh_step_kinds() -> None:
    scatter = plan_redistribute((8,), SINGLE, (R,), MESH1, (S(0),)).steps[-1]
    gather = plan_redistribute((8,), MESH1, (S(0),), SINGLE, (R,)).steps[-1]
    moves = plan_redistribute((8,), PAIR_A, (S(0),), PAIR_B, (S(0),)).steps[-1]
    assert isinstance(scatter, Scatter) and isinstance(gather, Gather)
    assert isinstance(moves, SendRecv)
    assert [(m.src_device, m.dst_device, m.start, m.size) for m in moves.moves] == [
        (0, 2, (0,), (4,)),
        (1, 3, (4,), (4,)),
    ]


def test_reshaping_the_same_devices_moves_only_what_differs() -> None:
    """1-D S(0) over 4 devices equals 2x2 (S(0), S(0)) when 4 divides the dim, not otherwise."""
    assert counts((8, 3), MESH1, (S(0),), (S(0), S(0)), dst_mesh=MESH2) == {}
    assert counts((5, 3), MESH1, (S(0),), (S(0), S(0)), dst_mesh=MESH2) == {"send_recv": 2}


def test_replicas_share_the_sending() -> None:
    """A replicated source serves different destinations from different replicas."""
    plan = plan_redistribute((8,), MESH1, (R,), DeviceMesh("cpu", [4, 5]), (R,))
    assert sorted(m.src_device for m in plan.steps[-1].moves) == [0, 1]  # type: ignore[attr-defined]


def test_cpu_to_cuda_mesh_moves_even_between_equal_ids() -> None:
    cuda = DeviceMesh("cuda", [0, 1])
    assert counts((8,), PAIR_A, (S(0),), (S(0),), dst_mesh=cuda) == {"send_recv": 2}


# --- bad input ---------------------------------------------------------------------------


def test_wrong_placement_count_is_a_clear_error() -> None:
    with pytest.raises(PlacementError, match="one placement per mesh dimension"):
        plan_redistribute((4,), MESH2, (S(0),), MESH2, (R, R))


def test_shard_dim_out_of_range_is_a_clear_error() -> None:
    with pytest.raises(PlacementError, match="out of range"):
        plan_redistribute((4,), MESH1, (S(1),), MESH1, (R,))


def test_bad_shape_is_a_clear_error() -> None:
    with pytest.raises(ShapeError, match="non-negative int"):
        plan_redistribute((4, -1), MESH1, (S(0),), MESH1, (R,))


def test_a_non_mesh_is_a_clear_error() -> None:
    with pytest.raises(MeshError, match="needs DeviceMesh meshes"):
        plan_redistribute((4,), [0, 1], (S(0),), MESH1, (R,))  # type: ignore[arg-type]
