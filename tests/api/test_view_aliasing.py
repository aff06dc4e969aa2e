"""``contiguous``, ``reshape``, ``flatten`` and ``view`` share memory with their input exactly
where torch's do on the full tensor, on every mesh: a device holding one row of a transposed
or column-sliced tensor must copy like the others (its shard alone looks contiguous), so a
write through the result reaches the input as in torch, never on some devices only."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch import Replicate, Shard
from dtorch.errors import KernelError, ShapeError

Program = Callable[[Any], None]


def _transpose_contiguous_scaled(t: Any) -> None:
    t.transpose(1, 2).contiguous().mul_(0.5)


def _slice_reshape_filled(t: Any) -> None:
    t[:, 0:3].reshape(-1).fill_(-1.0)


def _transpose_contiguous_added(t: Any) -> None:
    t.transpose(0, 1).contiguous().add_(100)


def _transpose_flatten_added(t: Any) -> None:
    t.transpose(1, 2).flatten(1).add_(100)


def _merge_reshape_filled(t: Any) -> None:  # viewable: the write reaches the input
    t.reshape(-1)[0:2].fill_(-2.0) if t.ndim == 1 else t.reshape(t.shape[0], -1).fill_(-2.0)


def _split_reshape_filled(t: Any) -> None:  # a split is always a view
    t.unsqueeze(0).reshape(1, *t.shape).fill_(7.0)


def _contiguous_of_contiguous_added(t: Any) -> None:  # the input itself
    t.contiguous().add_(1)


CASES: list[tuple[tuple[int, ...], int, Program]] = [
    ((1, 4, 2, 3), 2, _transpose_contiguous_scaled),
    ((4, 6), 0, _slice_reshape_filled),
    ((2, 3, 4), 1, _transpose_contiguous_added),
    ((2, 3, 4), 0, _transpose_flatten_added),
    ((5, 3, 4), 0, _transpose_flatten_added),
    ((4, 6), 0, _merge_reshape_filled),
    ((4, 6), 1, _split_reshape_filled),
    ((3, 5), 0, _contiguous_of_contiguous_added),
]


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize(
    ("shape", "dim", "program"), CASES, ids=lambda x: getattr(x, "__name__", str(x))
)
def test_writes_through_a_reshape_reach_the_input_as_in_torch(
    graph: dtorch.Graph, devices: int, shape: tuple[int, ...], dim: int, program: Program
) -> None:
    full = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
    mesh = dtorch.init_device_mesh("cpu", devices)
    for placements in ([dtorch.Shard(dim)], [dtorch.Replicate()]):
        t = dtorch.from_torch(full, device_mesh=mesh, placements=placements, graph=graph)
        want = full.clone()
        program(t)
        program(want)
        assert torch.equal(t.to_torch(), want), (placements, t.to_torch(), want)


def _clone_of_slice(t: Any) -> tuple[Any, Any]:  # torch's clone of a slice: contiguous
    c = t[:, :2].clone()
    return c, c.contiguous()


def _clone_of_step_slice(t: Any) -> tuple[Any, Any]:
    c = t[::2].clone()
    return c, c.contiguous()


def _contiguous_of_created(t: Any) -> tuple[Any, Any]:
    return t, t.contiguous()


def _same_shape_reshape_of_transpose(t: Any) -> tuple[Any, Any]:  # a view, then a copy
    return t, t.T.reshape(t.T.shape).contiguous()


def _flatten_of_reshaped_transpose(t: Any) -> tuple[Any, Any]:
    return t, t.T.reshape(t.T.shape).flatten()


def _view_of_transpose(t: Any) -> tuple[Any, Any]:  # a view of a view: the input itself
    return t, t.T.view(-1).contiguous()


def _cast_of_slice(t: Any) -> tuple[Any, Any]:  # torch's conversion of a slice: contiguous
    c = t[:, :2].double()
    return c, c.contiguous()


def _clone_of_transpose(t: Any) -> tuple[Any, Any]:  # torch keeps the transposed layout
    c = t.T.clone()
    return c, c.contiguous()


def _cast_of_transpose(t: Any) -> tuple[Any, Any]:
    c = t.T.double()
    return c, c.contiguous()


#: (shape, mesh, placements, program): the program returns a base and a result that torch
#: makes a view or a copy of it; a write to the base must reach the result as in torch
SIZE_ONE_CASES: list[tuple[tuple[int, ...], tuple[int, ...], list[str], Callable[..., Any]]] = [
    ((3, 4), (2,), ["S0"], _clone_of_slice),
    ((3, 2, 1, 5), (3,), ["S0"], _clone_of_slice),
    ((4,), (2,), ["S0"], _clone_of_step_slice),
    ((2, 5), (2, 2), ["S1", "S0"], _contiguous_of_created),
    ((3, 3, 2), (2, 2), ["S0", "S1"], _contiguous_of_created),
    ((2, 2), (2,), ["S1"], _same_shape_reshape_of_transpose),
    ((2, 2), (3,), ["S1"], _same_shape_reshape_of_transpose),
    ((2, 2), (2,), ["S1"], _flatten_of_reshaped_transpose),
    ((1, 4), (2, 2), ["S1", "S1"], _view_of_transpose),
    ((3, 4), (2,), ["S0"], _cast_of_slice),
    ((2, 3), (3,), ["S1"], _clone_of_transpose),
    ((2, 3), (2,), ["S1"], _clone_of_transpose),
    ((2, 3), (3,), ["S1"], _cast_of_transpose),
]


@pytest.mark.parametrize(
    ("shape", "mesh_shape", "placements", "program"),
    SIZE_ONE_CASES,
    ids=lambda x: getattr(x, "__name__", str(x)),
)
def test_a_dim_held_one_row_per_device_views_or_copies_as_torch(
    graph: dtorch.Graph,
    shape: tuple[int, ...],
    mesh_shape: tuple[int, ...],
    placements: list[str],
    program: Callable[..., Any],
) -> None:
    """A dim a device holds one row of is size 1 there, and the stride torch gives a size-1
    dim (in a created shard, a clone, a view) is any: it made some devices view where
    torch copies on the full tensor, or copy where it views (found by a view/in-place fuzz)."""
    full = torch.arange(1.0, torch.Size(shape).numel() + 1.0).reshape(shape)
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    t = dtorch.from_torch(full, device_mesh=mesh, placements=placements, graph=graph)
    want_base, want = program(full.clone())
    base, got = program(t)
    want_base.add_(100)
    base.add_(100)
    assert torch.equal(got.to_torch(), want), (got.to_torch(), want)
    assert torch.equal(base.to_torch(), want_base)


def test_a_view_torch_refuses_copies_alike_on_every_mesh(graph: dtorch.Graph) -> None:
    """torch refuses ``t().view(-1)``; dtorch's ``is_contiguous()`` is always True, so a
    program may call ``view`` after checking it: the devices copy (as ``reshape`` would),
    however sharded, and a write through the copy leaves the input alone on every mesh."""
    full = torch.arange(8.0).reshape(2, 4)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        full.t().view(-1)
    for devices, placements in ((2, [dtorch.Replicate()]), (4, [dtorch.Shard(1)])):
        mesh = dtorch.init_device_mesh("cpu", devices)
        t = dtorch.from_torch(full, device_mesh=mesh, placements=placements, graph=graph)
        assert t.t().is_contiguous()
        flat = t.t().view(-1)
        assert torch.equal(flat.to_torch(), full.t().reshape(-1))
        flat[0:3] = 100.0
        assert torch.equal(t.to_torch(), full)


@pytest.mark.parametrize("placements", [[dtorch.Shard(0)], [dtorch.Replicate()]], ids=str)
def test_fill_and_zero_of_an_expanded_view_write_the_input(
    graph: dtorch.Graph, placements: list[dtorch.Placement]
) -> None:
    """torch allows ``fill_``/``zero_`` on an expanded view (every alias of an element gets
    the same value) and refuses a copy of varying values into it."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    for write in (lambda v: v.zero_(), lambda v: v.fill_(3.0)):
        t = dtorch.from_torch(
            torch.arange(1.0, 7.0), device_mesh=mesh, placements=placements, graph=graph
        )
        want = torch.arange(1.0, 7.0)
        write(t.expand(2, 6))
        write(want.expand(2, 6))
        assert torch.equal(t.to_torch(), want)
        graph.sync()
    t = dtorch.from_torch(
        torch.arange(1.0, 7.0), device_mesh=mesh, placements=[dtorch.Replicate()], graph=graph
    )
    varying = dtorch.from_torch(torch.arange(12.0).reshape(2, 6), device_mesh=mesh, graph=graph)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        torch.arange(1.0, 7.0).expand(2, 6).copy_(torch.arange(12.0).reshape(2, 6))
    with pytest.raises(ShapeError, match="more than one element of the written-to tensor"):
        t.expand(2, 6).copy_(varying)
    assert torch.equal(t.to_torch(), torch.arange(1.0, 7.0))


def _alike(t: Any, full: torch.Tensor) -> Any:
    """``full`` beside ``t``: itself for a torch ``t``, else replicated on ``t``'s mesh."""
    if isinstance(t, torch.Tensor):
        return full
    return dtorch.from_torch(full, device_mesh=t.device_mesh)


def _mask(t: Any) -> Any:
    return _alike(t, torch.tensor([[True, False, True, False], [False, True, True, False]]))


#: In-place writes of an expanded (2, 4) view that torch refuses at the call: its elements
#: share memory, so each would be written twice (or read after another was written).
_OVERLAPPING_WRITES: dict[str, Callable[[Any], Any]] = {
    "add_": lambda e: e.add_(1.0),
    "+=": lambda e: e.__iadd__(_alike(e, torch.arange(8.0).reshape(2, 4))),
    "mul_": lambda e: e.mul_(2.0),
    "clamp_": lambda e: e.clamp_(0.0, 1.0),
    "exp_": lambda e: e.exp_(),
    "relu_": lambda e: e.relu_(),
    "lerp_": lambda e: e.lerp_(_alike(e, torch.ones(2, 4)), 0.5),
    "copy_": lambda e: e.copy_(_alike(e, torch.arange(8.0).reshape(2, 4))),
    "uniform_": lambda e: e.uniform_(),
    "masked_scatter_": lambda e: e.masked_scatter_(_mask(e), _alike(e, torch.ones(8))),
    "setitem column": lambda e: e.__setitem__((slice(None), 1), 5.0),
    "setitem all": lambda e: e.__setitem__(Ellipsis, _alike(e, torch.ones(4))),
}
#: ... and the writes it allows there (every alias of an element gets the same value).
_ALLOWED_WRITES: dict[str, Callable[[Any], Any]] = {
    "fill_": lambda e: e.fill_(3.0),
    "zero_": lambda e: e.zero_(),
    "masked_fill_": lambda e: e.masked_fill_(_mask(e), -1.0),
    "setitem row": lambda e: e.__setitem__(0, _alike(e, torch.arange(4.0))),
    "setitem one-row slice": lambda e: e.__setitem__((slice(1, 2), slice(0, 2)), 9.0),
}


@pytest.mark.parametrize("placements", [[dtorch.Shard(0)], [dtorch.Replicate()]], ids=str)
@pytest.mark.parametrize("name", list(_OVERLAPPING_WRITES))
def test_writes_torch_refuses_on_an_expanded_view_are_refused_at_the_call(
    graph: dtorch.Graph, placements: list[dtorch.Placement], name: str
) -> None:
    """An in-place write of an ``expand``-ed view that torch refuses (its elements share
    memory) raises at the call with torch's words; the input keeps its values (the add of
    one changed the input once before, and ``e[:, 1] = 5`` failed on the devices)."""
    write = _OVERLAPPING_WRITES[name]
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(4.0) - 1.0
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        write(full.clone().expand(2, 4))
    t = dtorch.from_torch(full, device_mesh=mesh, placements=placements, graph=graph)
    with pytest.raises(ShapeError, match="more than one element of the written-to tensor"):
        write(t.expand(2, 4))
    assert torch.equal(t.to_torch(), full)
    assert torch.equal((t + 1).to_torch(), full + 1)


@pytest.mark.parametrize("placements", [[dtorch.Shard(0)], [dtorch.Replicate()]], ids=str)
@pytest.mark.parametrize("name", list(_ALLOWED_WRITES))
def test_writes_torch_allows_on_an_expanded_view_write_the_input(
    graph: dtorch.Graph, placements: list[dtorch.Placement], name: str
) -> None:
    """The writes torch allows on an expanded view change the input as torch's do."""
    write = _ALLOWED_WRITES[name]
    mesh = dtorch.init_device_mesh("cpu", 2)
    want = torch.arange(4.0) - 1.0
    t = dtorch.from_torch(want, device_mesh=mesh, placements=placements, graph=graph)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation of masked_fill_ here
        write(want.expand(2, 4))
        write(t.expand(2, 4))
    assert torch.equal(t.to_torch(), want)


@pytest.mark.parametrize("placements", [[dtorch.Shard(1)], [dtorch.Replicate()]], ids=str)
def test_a_copy_between_overlapping_parts_reads_the_source_first(
    graph: dtorch.Graph, placements: list[dtorch.Placement]
) -> None:
    """torch refuses ``x[1:].copy_(x[:-1])`` at the call; dtorch cannot refuse at the call
    (it does not track memory there), so the devices read the source whole first, as if
    ``x[:-1].clone()`` were copied, instead of failing a write the base never shows."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(32.0).reshape(8, 4)
    x = dtorch.from_torch(full, device_mesh=mesh, placements=placements, graph=graph)
    x[1:].copy_(x[:-1])
    want = full.clone()
    want[1:] = full[:-1]
    assert torch.equal(x.to_torch(), want)
    graph.sync()


def _rows(t: dtorch.Tensor, row: int) -> dtorch.Tensor:
    # a dtorch index placed as ``t`` (its values are read on the devices; a torch one's are
    # checked at the call)
    index = torch.tensor([[row, 0, 0]])
    return dtorch.from_torch(index, device_mesh=t.device_mesh, placements=t.placements)


def _failed_value(t: dtorch.Tensor) -> Any:
    ones = dtorch.ones(2, 3, device_mesh=t.device_mesh)
    return ones.scatter(0, _rows(ones, 9), 1.0)  # row 9 of 2: fails on the devices


def _bad_index(t: dtorch.Tensor) -> Any:
    return t.scatter_(0, _rows(t, 7), 1.0)  # row 7 of 2: fails on the devices


@pytest.mark.parametrize(
    "write",
    [
        _bad_index,
        lambda v: v.add_(_failed_value(v)),
    ],
    ids=["scatter_ out of range", "add_ of a failed value"],
)
def test_a_failed_write_through_a_view_fails_its_base_and_siblings(
    write: Callable[[Any], Any], graph: dtorch.Graph
) -> None:
    """The base of a view whose in-place write failed raises at its next read, as the view
    does (it returned the old values, silently: torch would have raised at the call); so do
    the base's other views. A tensor sharing no storage with it is unaffected."""
    for mesh_shape, placements in [
        ((2,), [Replicate()]),
        ((2,), [Shard(1)]),
        ((2, 2), [Shard(1), Replicate()]),
    ]:
        mesh = dtorch.init_device_mesh("cpu", mesh_shape)
        x = dtorch.from_torch(torch.zeros(4, 3), device_mesh=mesh, placements=placements)
        other = x.clone()
        view, sibling = x[1:3], x[0]
        write(view)
        for t in (view, x, sibling):
            with pytest.raises(KernelError, match="out of bounds"):
                t.to_torch()
        assert torch.equal(other.to_torch(), torch.zeros(4, 3))


_IN_PLACE_VIEWS: dict[str, Callable[[Any], Any]] = {
    "unsqueeze_": lambda t: t.unsqueeze_(0),
    "squeeze_": lambda t: t.squeeze_(0),
    "squeeze_ all": lambda t: t.squeeze_(),
    "t_": lambda t: t.t_(),
    "transpose_": lambda t: t.transpose_(0, 1),
    "swapdims_": lambda t: t.swapdims_(1, 0),
    "swapaxes_": lambda t: t.swapaxes_(0, 1),
}


@pytest.mark.parametrize("placements", [[Shard(0)], [Shard(1)], [Replicate()]], ids=str)
@pytest.mark.parametrize("name", list(_IN_PLACE_VIEWS))
def test_views_in_place_change_the_handle_not_its_memory(
    graph: dtorch.Graph, placements: list[dtorch.Placement], name: str
) -> None:
    """torch's in-place view methods return the tensor itself with the view's shape; the
    memory is the same, so a later in-place write reaches its alias and its other views,
    which keep their own shapes (the methods were missing)."""
    view_in_place = _IN_PLACE_VIEWS[name]
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(12.0).reshape(3, 4)
    x = dtorch.from_torch(full, device_mesh=mesh, placements=placements, graph=graph)
    alias, part = x.detach(), x[:, 1:3]
    want = full.clone()
    want_alias, want_part = want.detach(), want[:, 1:3]
    for step in (view_in_place, lambda t: t.mul_(2)):
        assert step(x) is x and step(want) is want
        assert x.shape == want.shape and torch.equal(x.to_torch(), want)
    assert torch.equal(alias.to_torch(), want_alias) and torch.equal(part.to_torch(), want_part)


@pytest.mark.parametrize(
    "view",
    [lambda e: e, lambda e: e.T, lambda e: e[1:3], lambda e: e.unsqueeze(0), lambda e: e[0]],
    ids=["expanded", "transposed", "sliced", "unsqueezed", "a row"],
)
def test_writes_into_an_expand_of_a_tensor_of_unknown_strides_are_refused(
    graph: dtorch.Graph, view: Callable[[Any], Any]
) -> None:
    """A redistributed tensor has unknown strides (its devices decide its layout), yet the
    stride-0 dims ``expand`` makes are known, and so are those of views of it: torch's
    refusal holds there too (the add changed the input once)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(16.0).reshape(4, 4)
    t = dtorch.from_torch(full, device_mesh=mesh, placements=[Shard(0)], graph=graph)
    base = t.redistribute(placements=[Replicate()])
    with pytest.raises(RuntimeError, match="single memory location"):
        view(full.clone()[:, :1].expand(4, 3)).add_(1.0)
    with pytest.raises(ShapeError, match="single memory location"):
        view(base[:, :1].expand(4, 3)).add_(1.0)
    assert torch.equal(base.to_torch(), full)
