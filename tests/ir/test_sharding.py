"""Sharding math against slicing a real tensor with torch.chunk, dimension by dimension."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dtorch.ir.placement import Partial, Placement, Replicate, Shard, normalize_placements
from dtorch.ir.sharding import (
    chunk_bounds,
    chunk_sizes,
    filled_chunk_sizes,
    local_shape_and_offset,
    shard_spec,
)


def _torch_shard(full: torch.Tensor, mesh_shape, placements, coordinate) -> torch.Tensor:
    """The oracle: nested torch.chunk in the placements' shard order."""
    local = full
    dims = {p.dim for p in placements if isinstance(p, Shard)}
    for tensor_dim in sorted(dims):
        mesh_dims = [m for m, p in enumerate(placements) if p == Shard(tensor_dim)]
        subs = [p.split_order for p in placements if isinstance(p, Shard) and p.dim == tensor_dim]
        if any(s >= 0 for s in subs):
            mesh_dims = [
                m
                for _, m in sorted(
                    (p.split_order, m)
                    for m, p in enumerate(placements)
                    if isinstance(p, Shard) and p.dim == tensor_dim
                )
            ]
        for m in mesh_dims:
            pieces = torch.chunk(local, mesh_shape[m], dim=tensor_dim)
            c = coordinate[m]
            if c < len(pieces):
                local = pieces[c]
            else:
                empty_shape = list(local.shape)
                empty_shape[tensor_dim] = 0
                local = local.narrow(tensor_dim, 0, 0).reshape(empty_shape)
    return local


def test_chunk_bounds_match_torch_chunk_examples() -> None:
    assert chunk_sizes(11, 4) == (3, 3, 3, 2)
    assert chunk_sizes(5, 4) == (2, 2, 1, 0)
    assert chunk_sizes(0, 3) == (0, 0, 0)
    assert chunk_sizes(2, 4) == (1, 1, 0, 0)
    assert chunk_bounds(11, 4, 3) == (9, 2)


@given(st.integers(0, 40), st.integers(1, 9))
def test_chunk_sizes_equal_torch_chunk(size: int, parts: int) -> None:
    pieces = torch.chunk(torch.arange(size), parts) if size else ()
    expected = [len(p) for p in pieces] + [0] * (parts - len(pieces))
    assert list(chunk_sizes(size, parts)) == expected
    assert sum(chunk_sizes(size, parts)) == size


@given(st.integers(0, 40), st.integers(1, 60))
def test_filled_chunk_sizes_are_torch_chunks_of_a_non_empty_dim(size: int, parts: int) -> None:
    expected = [len(p) for p in torch.chunk(torch.arange(size), parts)] if size else []
    assert list(filled_chunk_sizes(size, parts)) == expected


def test_filled_chunk_sizes_cost_the_chunks_not_the_parts() -> None:
    assert filled_chunk_sizes(3, 2**64) == (1, 1, 1)
    assert filled_chunk_sizes(10**12, 3) == (333333333334, 333333333334, 333333333332)


@st.composite
def _layouts(draw):  # type: ignore[no-untyped-def]
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim)))
    mesh_shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    choices = st.one_of(
        st.just(Replicate()), st.just(Partial()), st.builds(Shard, st.integers(-ndim, ndim - 1))
    )
    placements = draw(st.lists(choices, min_size=len(mesh_shape), max_size=len(mesh_shape)))
    return shape, mesh_shape, normalize_placements(placements, len(mesh_shape), ndim)


@settings(max_examples=300, deadline=None)
@given(_layouts(), st.data())
def test_local_shape_and_offset_match_slicing(layout, data) -> None:  # type: ignore[no-untyped-def]
    shape, mesh_shape, placements = layout
    full = torch.arange(math.prod(shape)).reshape(shape)
    coordinate = tuple(data.draw(st.integers(0, s - 1)) for s in mesh_shape)
    local_shape, offset = local_shape_and_offset(shape, mesh_shape, placements, coordinate)
    expected = _torch_shard(full, mesh_shape, placements, coordinate)
    assert local_shape == tuple(expected.shape)
    spec = shard_spec(shape, mesh_shape, placements, coordinate)
    assert torch.equal(full[spec.slices()], expected)
    assert offset == spec.offset


@settings(max_examples=100, deadline=None)
@given(_layouts())
def test_shards_tile_the_tensor_exactly_once(layout) -> None:  # type: ignore[no-untyped-def]
    shape, mesh_shape, placements = layout
    count = torch.zeros(shape, dtype=torch.int64)
    replicated = [m for m, p in enumerate(placements) if not isinstance(p, Shard)]
    for coordinate in _coordinates(mesh_shape):
        if any(coordinate[m] for m in replicated):
            continue
        spec = shard_spec(shape, mesh_shape, placements, coordinate)
        count[spec.slices()] += 1
    assert bool((count == 1).all())


def _coordinates(mesh_shape):  # type: ignore[no-untyped-def]
    import itertools

    return itertools.product(*(range(s) for s in mesh_shape))


def test_nested_shards_follow_split_order() -> None:
    full = torch.arange(10)
    default = (Shard(0), Shard(0))
    swapped: tuple[Placement, ...] = (Shard(0, split_order=1), Shard(0, split_order=0))
    for coordinate in _coordinates((2, 3)):
        a = shard_spec((10,), (2, 3), default, coordinate)
        b = shard_spec((10,), (2, 3), swapped, coordinate)
        assert torch.equal(full[a.slices()], _torch_shard(full, (2, 3), default, coordinate))
        assert torch.equal(full[b.slices()], _torch_shard(full, (2, 3), swapped, coordinate))
    # mesh dim 1 splits first in the swapped order: device (0, 1) holds chunk 1 of 3, first half
    assert shard_spec((10,), (2, 3), swapped, (0, 1)).offset == (4,)
    assert shard_spec((10,), (2, 3), default, (0, 1)).offset == (2,)


def test_partial_owner_is_coordinate_zero_on_partial_dims() -> None:
    placements = (Partial(), Shard(0))
    assert shard_spec((4,), (2, 2), placements, (0, 1)).partial_owner
    assert not shard_spec((4,), (2, 2), placements, (1, 0)).partial_owner


def test_normalize_rejects_wrong_counts_and_bad_split_orders() -> None:
    with pytest.raises(ValueError, match="2-D mesh"):
        normalize_placements((Shard(0),), 2, 1)
    with pytest.raises(ValueError, match="out of range"):
        normalize_placements((Shard(2),), 1, 2)
    with pytest.raises(ValueError, match="split_order"):
        normalize_placements((Shard(0, 1), Shard(0, 1)), 2, 1)
    assert normalize_placements((Shard(0, 0), Shard(0, 1)), 2, 1) == (Shard(0), Shard(0))
    assert normalize_placements((Shard(-1),), 1, 3) == (Shard(2),)
