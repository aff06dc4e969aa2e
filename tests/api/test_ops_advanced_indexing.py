"""Advanced indexing against torch through the public API: int lists and tuples inside an
index, integer tensors (dtorch, torch) with broadcast index shapes mixed with ints, slices,
None and ``...``, torch's rule for where the advanced dims go, boolean masks and Python
bools, for ``t[index]`` and ``t[index] = value``; on 1-D, 2-D and 3-D meshes, even and
uneven, in thread and process mode. One 1-D integer array on a dim that is not sharded keeps
the sharding; other results of ``t[index]`` are Replicate on the input's mesh (their
placements cannot be known at record time); ``t[index] = v`` keeps ``t``'s placements."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import dtorch
from dtorch.errors import DtypeError, ShapeError
from tests.api.ops_harness import ALL_MESHES, S0, S1, R, place

pytestmark = pytest.mark.timeout(60)

_X = torch.arange(5 * 6 * 4, dtype=torch.float32).view(5, 6, 4) - 50
_MASK0 = torch.tensor([True, False, True, False, True])
_MASK1 = torch.tensor([False, True, True, False, False, True])

#: Indices built from a converter of tensor indices (torch as is, or a dtorch tensor).
_INDICES: list[Callable[[Callable[[torch.Tensor], Any]], Any]] = [
    lambda c: [0, 2],
    lambda c: (slice(None), [1, 0]),
    lambda c: ((0, 1),),  # a tuple inside the index is an integer array, like a list
    lambda c: ([[0, 1], [4, 3]],),
    lambda c: c(torch.tensor([[0, 1], [2, -1]])),
    lambda c: (c(torch.tensor([0, 2])), slice(None), c(torch.tensor([1, 3]))),  # go first
    lambda c: (slice(None), c(torch.tensor([[0], [2]])), c(torch.tensor([1, 3]))),  # in place
    lambda c: (1, slice(None), c(torch.tensor([0, 3, 3]))),  # int and array separated
    lambda c: (Ellipsis, [3, 0]),
    lambda c: (None, [0, 4], Ellipsis, -1),
    lambda c: (slice(1, None, 2), [-1, 0]),
    lambda c: c(_MASK0),
    lambda c: (slice(None), c(_MASK1), 2),
    lambda c: c(_X > 0),
    lambda c: (c(_MASK0), c(torch.tensor([0, 1, 5]))),
    lambda c: True,
    lambda c: (Ellipsis, False),
    lambda c: (0, True, slice(1, 3)),
]
_PLACEMENTS = {1: [S0], 2: [S1, S0], 3: [S0, R, S1]}


def _converters(graph: dtorch.Graph, mesh: dtorch.DeviceMesh) -> dict[str, Any]:
    return {
        "torch": lambda i: i,
        "dtorch": lambda i: place(i, mesh, [R] * mesh.ndim, graph),
        "sharded": lambda i: place(i, mesh, [S0] + [R] * (mesh.ndim - 1), graph),
    }


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_getitem_advanced_like_torch(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    t = place(_X, mesh, _PLACEMENTS[len(mesh_shape)], graph)
    for kind, convert in _converters(graph, mesh).items():
        for make in _INDICES:
            want = _X[make(lambda i: i)]
            out = t[make(convert)]
            assert torch.equal(out.to_torch(), want), (kind, make(lambda i: i))
            assert out.device_mesh == mesh, (kind, make(lambda i: i))
            assert out.dtype == want.dtype


_KEPT: list[tuple[Any, int]] = [  # (index, the result dim holding the tensor's dim 0)
    ((slice(None), [1, 0]), 0),
    ((slice(None), 2, [3, 3, -4]), 0),
    ((Ellipsis, [0]), 0),
    ((None, slice(None), torch.tensor([5, 0, 1])), 1),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_one_array_on_an_unsharded_dim_keeps_the_sharding(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    """Placements known at record time: slices of the devices' shards joined by cat."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    rest = [R, dtorch.Partial()][: len(mesh_shape) - 1]
    t = place(_X, mesh, [S0, *rest], graph)
    for index, dim in _KEPT:
        out = t[index]
        assert torch.equal(out.to_torch(), _X[index]), index
        assert out.device_mesh.shape == mesh.shape and out.placements == [dtorch.Shard(dim), *rest]


_ELLIPSES: list[Any] = [
    (Ellipsis, 0, Ellipsis),
    (Ellipsis, Ellipsis),
    (Ellipsis, None, Ellipsis),
    (0, Ellipsis, Ellipsis, slice(None)),
    (Ellipsis, slice(1, 3), Ellipsis, Ellipsis),
    (Ellipsis, [0, 2], Ellipsis),
]


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 3), (2, 1, 2)])
def test_several_ellipses_like_torch(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    """torch moves every ``...`` over the dims the other indices leave: so does dtorch."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    t = place(_X, mesh, [S1] + [R] * (len(mesh_shape) - 1), graph)
    for index in _ELLIPSES:
        assert torch.equal(t[index].to_torch(), _X[index]), index
        want = _X.clone()
        want[index] = -3.0
        t2 = place(_X, mesh, [R] * len(mesh_shape), graph)
        t2[index] = -3.0
        assert torch.equal(t2.to_torch(), want), index


def test_basic_indices_keep_the_devices(graph: dtorch.Graph) -> None:
    """A bare tuple is several indices, not an array; basic indexing never leaves the mesh."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    t = place(_X, mesh, [S0, R], graph)
    for index in ((slice(None), (1)), (slice(None), 0, 1), (Ellipsis, 2), (slice(None), None, -1)):
        out = t[index]
        assert torch.equal(out.to_torch(), _X[index])
        assert out.device_mesh.shape == mesh.shape
    t[:, 1] = torch.arange(4.0)  # a torch value, broadcast over the slot
    want = _X.clone()
    want[:, 1] = torch.arange(4.0)
    assert torch.equal(t.to_torch(), want) and t.placements == [S0, R]


@pytest.mark.parametrize("mesh_shape", [(3,), (2, 2), (2, 1, 2)])
def test_setitem_advanced_like_torch(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    """Numbers, torch and dtorch values (broadcast); ``t`` keeps its mesh and placements."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    placements = _PLACEMENTS[len(mesh_shape)]
    convert = _converters(graph, mesh)["dtorch"]
    cases: list[tuple[Any, Any]] = [
        ([0, 2], 7.5),
        ((slice(None), [1, 0]), torch.arange(4.0)),
        ((convert(torch.tensor([0, 2])), slice(None), [1, 3]), convert(torch.tensor([1.0]))),
        (convert(_X > 0), -1.0),
        ((convert(_MASK0), 1), torch.tensor([[9.0], [8.0], [7.0]])),
        ((Ellipsis, [3, 0]), place(torch.ones(6, 1), mesh, [R] * mesh.ndim, graph)),
        (True, 0.0),
    ]
    for index, value in cases:
        want = _X.clone()
        want[_torch_index(index)] = _torch_value(value)
        t = place(_X, mesh, placements, graph)
        t[index] = value
        assert torch.equal(t.to_torch(), want), index
        assert t.device_mesh.shape == mesh.shape and t.placements == placements


def _torch_index(index: Any) -> Any:
    if isinstance(index, tuple):
        return tuple(_torch_index(i) for i in index)
    return index.to_torch() if isinstance(index, dtorch.Tensor) else index


def _torch_value(value: Any) -> Any:
    return value.to_torch() if isinstance(value, dtorch.Tensor) else value


def test_setitem_duplicates_last_write_wins(graph: dtorch.Graph) -> None:
    """Like torch's index_put_ (accumulate=False) on CPU: the last of duplicate indices wins."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = place(torch.zeros(4), mesh, [S0], graph)
    t[[1, 3, 1]] = torch.tensor([5.0, 6.0, 7.0])
    want = torch.zeros(4)
    want[[1, 3, 1]] = torch.tensor([5.0, 6.0, 7.0])
    assert torch.equal(t.to_torch(), want) and want[1] == 7.0


def test_partial_input(graph: dtorch.Graph) -> None:
    """A Partial tensor is summed when read, and stays Partial when written."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = place(_X, mesh, [dtorch.Partial()], graph)
    assert torch.equal(t[[4, 0]].to_torch(), _X[[4, 0]])
    t[_MASK0] = 1.0
    want = _X.clone()
    want[_MASK0] = 1.0
    assert torch.equal(t.to_torch(), want) and t.placements == [dtorch.Partial()]


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2)])
def test_augmented_mask_assignment(mesh_shape: tuple[int, ...], graph: dtorch.Graph) -> None:
    """``t[mask] += v`` is ``t[mask] = t[mask] + v``: the read is Replicate on ``t``'s mesh,
    so it mixes with a dtorch ``v`` there (a 0-d one, or one of the selected length)."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    rest = [R] * (len(mesh_shape) - 1)
    t = place(_X, mesh, [S0, *rest], graph)
    mask = place(_X > 10, mesh, [S0, *rest], graph)
    t[mask] += place(torch.tensor(2.0), mesh, [R, *rest], graph)
    picked = _X[_X > 10]
    t[mask] *= place(torch.arange(picked.numel(), dtype=torch.float32), mesh, [R, *rest], graph)
    want = _X.clone()
    want[_X > 10] += 2.0
    want[_X > 10] *= torch.arange(picked.numel(), dtype=torch.float32)
    assert torch.equal(t.to_torch(), want) and t.placements == [S0, *rest]


_BAD: list[tuple[Any, str]] = [
    ([0, 5], "out of bounds"),
    ((slice(None), torch.tensor([6])), "out of bounds"),
    (torch.tensor([True, False]), "shape of the mask"),
    (torch.tensor([0.0, 1.0]), "long, int, byte or bool; got torch.float32"),
    ([0, 1.5], "ints or bools; got float"),
    (([0], [0], [0], [0]), "too many indices"),
    ((0, Ellipsis, Ellipsis, 1), "index 1"),
    ((0, Ellipsis, Ellipsis, [1]), "too many indices"),  # torch's words for an array index
]


@pytest.mark.parametrize(("index", "message"), _BAD, ids=[m for _, m in _BAD])
def test_bad_indices_name_the_operator(index: Any, message: str, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    t = place(_X, mesh, [S0], graph)
    with pytest.raises(IndexError, match=rf"getitem: .*{message}"):
        t[index]
    with pytest.raises(IndexError, match=rf"setitem: .*{message}"):
        t[index] = 0.0


def test_setitem_bad_value_names_the_operator(graph: dtorch.Graph) -> None:
    t = place(_X, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    with pytest.raises(RuntimeError, match=r"setitem: .*shape"):  # torch's class
        t[[0, 1]] = torch.ones(3, 6, 4)
    with pytest.raises(RuntimeError, match=r"setitem: shape mismatch: value tensor of shape"):
        t[:, [0, 1]] = place(torch.ones(3, 1), t.device_mesh, [R], graph)  # on the devices
    with pytest.raises(TypeError, match="setitem: value must be"):
        t[0] = "x"


@pytest.mark.parametrize(
    "index", ["mask", 0, slice(0, 2), [0, 1], Ellipsis], ids=["mask", "int", "slice", "list", "..."]
)
def test_setitem_numpy_values_as_torch(index: Any, graph: dtorch.Graph) -> None:
    """torch assigns numpy integers and float64 (a Python float) but refuses a numpy float32,
    float16, bool or array with a TypeError, whatever the index (a mask too)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.zeros(3)
    where = full == 0 if index == "mask" else index
    for value in (np.float64(5.5), np.int64(5), np.int32(-2)):
        want = full.clone()
        want[where] = value
        t = place(full, mesh, [S0], graph)
        t[place(where, mesh, [S0], graph) if index == "mask" else where] = value
        assert torch.equal(t.to_torch(), want), repr(value)
    for value in (np.float32(5.5), np.float16(1.0), np.bool_(True), np.array(5.5)):
        with pytest.raises(TypeError, match="can't assign a numpy"):
            full.clone()[where] = value
        t = place(full, mesh, [S0], graph)
        with pytest.raises(TypeError, match=r"^setitem: can't assign a numpy\.\w+ to a torch"):
            t[place(where, mesh, [S0], graph) if index == "mask" else where] = value


def test_index_put_of_another_dtype_is_refused_at_the_call_as_torch(graph: dtorch.Graph) -> None:
    """torch's ``index_put_`` casts nothing: ``x[[0, 2]] = float values`` into an int64 ``x``
    raises at the call (dtorch failed at the fetch, or raised IndexError); a one-element
    value under one boolean mask converts, as torch's masked_fill does."""
    cases: list[tuple[Any, Any]] = [
        ([0, 2], torch.tensor([1.5, 2.5])),
        ([0, 2], torch.tensor(1.5)),
        (torch.tensor([1, 3]), torch.tensor([1, 2], dtype=torch.int32)),
        ("mask", torch.ones(2)),
    ]
    for placements in ([R], [S0]):
        mesh = dtorch.init_device_mesh("cpu", 2)
        full = torch.arange(4)
        x = place(full, mesh, placements, graph)
        for index, value in cases:
            torch_index = full > 1 if isinstance(index, str) else index
            with pytest.raises(
                RuntimeError, match="Index put requires the source and destination dtypes match"
            ) as want:
                full.clone()[torch_index] = value
            dtorch_index = x > 1 if isinstance(index, str) else index
            for given in (value, place(value, mesh, [R], graph)):
                with pytest.raises(DtypeError) as got:
                    x[dtorch_index] = given
                assert str(got.value) == str(want.value)
        assert torch.equal(x.to_torch(), full)  # refused: unchanged
        x[x > 1] = torch.tensor([1.5])  # one boolean mask, one element: converts
        assert torch.equal(x.to_torch(), torch.tensor([0, 1, 1, 1]))


def test_a_one_element_value_of_another_dtype_fills_through_any_mask_form(
    graph: dtorch.Graph,
) -> None:
    """torch fills with a one-element value of another dtype wherever a boolean mask is in
    the index (``(mask,)``, ``[:, mask]``, a list of bools), not only a bare mask."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    forms = [
        lambda m, t: (m.tensor([True, False, True]),),
        lambda m, t: [True, False, True],
        lambda m, t: (slice(None), m.tensor([True, False, True])),
    ]
    for form in forms:
        want = torch.zeros(3, 3)
        want[form(torch, want)] = torch.tensor(5)
        got = place(torch.zeros(3, 3), mesh, [R], graph)
        got[form(dtorch, got)] = dtorch.tensor(5)
        assert torch.equal(got.to_torch(), want)


_FILL_VALUES: list[Any] = [-1.5, 0, True, torch.tensor(7), "0-d dtorch"]


@pytest.mark.parametrize("mask_kind", ["torch", "dtorch as t", "dtorch replicate"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("placements", [[S0], [S1], [R]], ids=str)
def test_a_full_mask_with_a_number_fills_on_the_devices(  # type: ignore[no-untyped-def]
    mask_kind, dtype, placements, graph
):
    """``t[mask] = v`` with a boolean mask of ``t``'s shape and a number (or a 0-d tensor)
    is torch's ``masked_fill_``: the same values as torch, and no fetch (a trace of it
    records, where a fetch would be refused)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full, mask = (_X[:, :, 0] % 7).to(dtype), _X[:, :, 0] % 3 == 0
    for value in _FILL_VALUES:
        want = full.clone()
        want[mask] = torch.tensor(-2).to(dtype) if isinstance(value, str) else value
        t = place(full, mesh, placements, graph)
        given = mask if mask_kind == "torch" else place(mask, mesh, [R], graph)
        if mask_kind == "dtorch as t":
            given = place(mask, mesh, placements, graph)
        if isinstance(value, str):
            t[given] = place(torch.tensor(-2).to(dtype), mesh, [R], graph)
        else:
            t[given] = value
        assert torch.equal(t.to_torch(), want), f"value {value!r}"

    def fill(x: dtorch.Tensor, m: dtorch.Tensor) -> dtorch.Tensor:
        x[m] = 3
        return x * 1

    traced = dtorch.trace(fill, place(full, mesh, placements, graph), place(mask, mesh, [R], graph))
    want = full.clone()
    want[mask] = 3
    out = traced(place(full, mesh, placements, graph), place(mask, mesh, [R], graph))
    assert torch.equal(out.to_torch(), want)


def test_a_mask_write_into_an_expanded_view_writes_its_input(graph) -> None:  # type: ignore[no-untyped-def]
    """torch deprecates but allows ``e[e > 0] = v`` on an expanded view (every alias gets
    the same value): dtorch writes the input as torch does (it failed on the devices, and
    the input with it). Other advanced writes there are refused at the call, the input
    unchanged."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    for placements in ([S0], [R]):
        want = torch.arange(4.0) - 1.0
        x = place(want, mesh, placements, graph)
        e, expected = x.expand(2, 4), want.expand(2, 4)
        with pytest.warns(UserWarning, match="deprecated"):
            expected[expected > 0] = -1.0
        e[e > 0] = -1.0
        assert torch.equal(x.to_torch(), want)
        with pytest.raises(ShapeError, match="share memory"):
            e[[0, 1], [1, 2]] = 5.0
        assert torch.equal(x.to_torch(), want)


_BAD_WRITES: dict[str, Callable[[Any, Any], Any]] = {
    "a str value": lambda x, i: x.__setitem__(i, "x"),
    "a list value through a mask": lambda x, i: x.__setitem__(x > 2, [1, 2]),
    "a value of another shape": lambda x, i: x.__setitem__((i, i), torch.ones(3)),
    "a zero step beside an array": lambda x, i: x.__setitem__((i, slice(None, None, 0)), 1),
    "a complex value": lambda x, i: x.__setitem__(i, 1j),
    "an index out of range": lambda x, i: x[[0, 7], 0],
}


@pytest.mark.parametrize("name", list(_BAD_WRITES))
def test_indexing_errors_keep_the_class_torch_raises(name: str, graph) -> None:  # type: ignore[no-untyped-def]
    """An advanced index torch refuses raises the exception class torch raises (they all
    became IndexError, which ``except TypeError`` / ``except RuntimeError`` missed)."""
    call = _BAD_WRITES[name]
    full, rows = torch.arange(12.0).reshape(3, 4), torch.tensor([0, 1])
    with pytest.raises(Exception) as expected:
        call(full.clone(), rows)
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = place(full, mesh, [R], graph)
    with pytest.raises(Exception) as got:
        call(x, place(rows, mesh, [R], graph))
    assert type(got.value) is type(expected.value), (got.value, expected.value)
    assert torch.equal(x.to_torch(), full)
