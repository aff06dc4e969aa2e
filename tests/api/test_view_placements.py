"""``Tensor.view([placements])`` (issue 9, "## Tensor"): the local shards read under new
placements without moving data, compared with torch computed by hand from the full tensor, on
1-D, 2-D and 3-D meshes, in thread and process mode (``graph``); refusals name ``view``."""

from __future__ import annotations

import math

import pytest
import torch

import dtorch
from dtorch.errors import PlacementError
from dtorch.ir.placement import Partial, Replicate, Shard
from tests.api.ops_harness import place

R, P = Replicate(), Partial()
_G = torch.Generator().manual_seed(54)
MESHES = [(4,), (2, 3), (2, 2, 2)]


def _mesh(shape: tuple[int, ...]) -> dtorch.DeviceMesh:
    return dtorch.init_device_mesh("cpu", shape)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_G)


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_replicate_viewed_as_partial_sums_n_times(
    graph: dtorch.Graph, mesh_shape: tuple[int, ...]
) -> None:
    mesh, x = _mesh(mesh_shape), _randn(3, 5)
    t = place(x, mesh, [R] * mesh.ndim, graph)
    last = t.view([R] * (mesh.ndim - 1) + [P])
    assert last.placements == [R] * (mesh.ndim - 1) + [P] and last.shape == x.shape
    assert torch.allclose(last.to_torch(), mesh_shape[-1] * x)
    every = t.view(placements=[P] * mesh.ndim)
    assert torch.allclose(every.to_torch(), math.prod(mesh_shape) * x)
    assert torch.equal(t.to_torch(), x)  # the input is untouched


@pytest.mark.parametrize("parts", [2, 4])
def test_shard_viewed_as_another_shard_keeps_the_pieces(graph: dtorch.Graph, parts: int) -> None:
    x = _randn(8, 3)
    t = place(x, _mesh((parts,)), [Shard(0)], graph)
    out = t.view([Shard(1)])
    assert out.placements == [Shard(1)] and out.shape == (8 // parts, 3 * parts)
    assert torch.equal(out.to_torch(), torch.cat(x.chunk(parts, 0), dim=1))
    assert torch.equal(t.view([R]).to_torch(), x.chunk(parts, 0)[0])  # device 0's piece


@pytest.mark.parametrize("mesh_shape", [(2, 3), (2, 2, 2)])
def test_two_shards_swapped_on_a_mesh(graph: dtorch.Graph, mesh_shape: tuple[int, ...]) -> None:
    a, b = mesh_shape[0], mesh_shape[-1]
    x = _randn(2 * a, 2 * b, 3)
    middle = [R] * (len(mesh_shape) - 2)
    t = place(x, _mesh(mesh_shape), [Shard(0), *middle, Shard(1)], graph)
    out = t.view([Shard(1), *middle, Shard(0)])
    # device (i, ..., j) holds piece(i, j); read back, piece(i, j) is block (j, i)
    piece = [[p.chunk(b, 1)[j] for j in range(b)] for p in x.chunk(a, 0)]
    rows = [torch.cat([piece[i][j] for i in range(a)], dim=1) for j in range(b)]
    assert out.shape == (2 * b, 2 * a, 3)
    assert torch.equal(out.to_torch(), torch.cat(rows, dim=0))


@pytest.mark.parametrize("mesh_shape", MESHES)
def test_partial_viewed_as_replicate_is_the_first_devices_value(
    graph: dtorch.Graph, mesh_shape: tuple[int, ...]
) -> None:
    n = mesh_shape[-1]
    x = _randn(2 * n, 3)
    rest = [R] * (len(mesh_shape) - 1)
    summed = place(x, _mesh(mesh_shape), [*rest, Shard(0)], graph).view([*rest, P])
    assert summed.shape == (2, 3)
    assert torch.allclose(summed.to_torch(), sum(x.chunk(n, 0)))  # type: ignore[arg-type]
    first = summed.view([*rest, R])
    assert first.placements == [R] * len(mesh_shape)
    assert torch.equal(first.to_torch(), x.chunk(n, 0)[0])


def test_uneven_shards_keep_their_layout_and_refuse_replicate(graph: dtorch.Graph) -> None:
    x = _randn(5, 3)
    t = place(x, _mesh((2, 2)), [Shard(0), R], graph)
    assert torch.equal(t.view([Shard(0), R]).to_torch(), x)
    for wanted in ([R, R], [Shard(1), R], [P, R]):
        with pytest.raises(PlacementError, match=r"^view: cannot view .*local shapes \[2, 3\]"):
            t.view(wanted)


def test_bad_placements_are_refused(graph: dtorch.Graph) -> None:
    t = place(_randn(4, 2), _mesh((2, 2)), [Shard(0), R], graph)
    with pytest.raises(PlacementError, match=r"^view: 1 placements .* 2-D mesh; give one"):
        t.view([P])
    with pytest.raises(PlacementError, match=r"^view: Placement\('x'\): not a placement; accepted"):
        t.view([P, "x"])
    with pytest.raises(PlacementError, match=r"^view: placements must be a list .* got int"):
        t.view(placements=3)
    with pytest.raises(TypeError, match=r"^view: give sizes or placements="):
        t.view(8, placements=[P, R])
    assert t.view(2, 4).shape == (2, 4)  # view(*sizes) as before
    assert torch.equal(t.view(-1).to_torch(), t.to_torch().view(-1))


def _cat_of_shards(graph: dtorch.Graph, rows: tuple[int, int]) -> tuple[list, dtorch.Tensor]:
    mesh = _mesh((2,))
    parts = [_randn(n, 3) for n in rows]
    out = dtorch.cat([place(p, mesh, [Shard(0)], graph) for p in parts])
    assert out.placements == [Shard(0, sub_split_coordinates=(rows[0],))]
    return parts, out


def test_marked_cat_viewed_as_plain_shard_drops_the_mark(graph: dtorch.Graph) -> None:
    (a, b), marked = _cat_of_shards(graph, (4, 6))  # local sizes 2 + 3 = 5, the chunk of 10
    plain = marked.view([Shard(0)])
    assert plain.placements == [Shard(0)] and plain.shape == (10, 3)
    assert torch.equal(plain.to_torch(), torch.cat([a[:2], b[:3], a[2:], b[3:]]))
    assert torch.equal(marked.to_torch(), torch.cat([a, b]))


def test_marked_cat_with_other_local_sizes_is_refused(graph: dtorch.Graph) -> None:
    _, marked = _cat_of_shards(graph, (3, 3))  # local sizes 2 + 2 and 1 + 1; chunks are 3, 3
    with pytest.raises(PlacementError, match=r"^view: cannot view .*local shapes \[2, 3\], \[4"):
        marked.view([Shard(0)])
    with pytest.raises(PlacementError, match=r"^view: .*sub.split"):
        marked.view([Shard(0, sub_split_coordinates=(3,))])
