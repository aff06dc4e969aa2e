"""Views and copies judged by the GLOBAL tensor's strides, tracked at record time.

A device cannot always tell from its shard whether torch's ``contiguous``/``reshape`` of the
full tensor copies: a column slice covering a device's whole shard, or a transpose whose dims
a device holds one row each of, looks contiguous there. Handles carry the strides torch would
give the full tensor where they are known (``dtorch.api.strides``); these tests write through
the result and compare the input with torch's, on every layout of the meshes below.
"""

from __future__ import annotations

import copy
import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
from dtorch import Replicate, Shard
from dtorch.api.ops.basic_index import normalize_index
from dtorch.api.strides import (
    contiguous_strides,
    expanded,
    indexed,
    is_contiguous,
    preserved,
    unsqueezed,
    view_strides,
)

#: name, the views then the copy-or-view, the input's shape. torch copies in the first
#: thirteen (writes through the result stay there) and views in the rest (they reach the input).
_CASES: list[tuple[str, Callable[[Any], Any], tuple[int, ...]]] = [
    ("column slice, contiguous", lambda t: t[:, 0:3].contiguous(), (2, 8)),
    ("transpose, contiguous", lambda t: t.T.contiguous(), (2, 2)),
    ("transpose of (2, 3), contiguous", lambda t: t.T.contiguous(), (2, 3)),
    ("column slice, reshape", lambda t: t[:, 0:3].reshape(-1), (2, 8)),
    ("transpose, flatten", lambda t: t.T.flatten(), (2, 2)),
    ("narrow, reshape", lambda t: t.narrow(1, 0, 2).reshape(-1), (2, 4)),
    ("unsqueeze, slice, contiguous", lambda t: t.unsqueeze(1)[:, :, 0:2].contiguous(), (2, 4)),
    ("permute, reshape", lambda t: t.permute(1, 0, 2).reshape(-1), (2, 2, 2)),
    ("chunk, slice, contiguous", lambda t: t.chunk(1, 0)[0][:, 0:2].contiguous(), (2, 3)),
    ("unbind, transpose, contiguous", lambda t: t.unbind(0)[1].T.contiguous(), (2, 2, 2)),
    ("clone, slice, contiguous", lambda t: t.clone()[:, 0:2].contiguous(), (2, 3)),
    ("cast, transpose, contiguous", lambda t: t.double().T.contiguous(), (2, 2)),
    ("deep copy, transpose, contiguous", lambda t: copy.deepcopy(t).T.contiguous(), (2, 2)),
    ("contiguous", lambda t: t.contiguous(), (2, 4)),
    ("reshape merging a dim held one row per device", lambda t: t.reshape(2, -1), (2, 2, 4)),
    ("flatten merging a dim held one row per device", lambda t: t.flatten(1, 2), (3, 2, 4)),
    ("view merging a dim held one row per device", lambda t: t.view(2, -1), (2, 2, 4)),
    ("row slice, contiguous", lambda t: t[0:1].contiguous(), (2, 4)),
    ("row slice, reshape", lambda t: t[0:2].reshape(-1), (4, 4)),
    ("transpose twice, view", lambda t: t.T.T.view(-1), (2, 4)),
]

_ONE_D = [((4,), [p]) for p in (Replicate(), Shard(0), Shard(1))] + [((3,), [Shard(1)])]
_TWO_D = [((2, 2), list(p)) for p in itertools.product((Replicate(), Shard(0), Shard(1)), repeat=2)]
_THREE_D = [
    ((2, 1, 2), [Shard(1), Shard(0), Shard(0)]),
    ((2, 1, 2), [Shard(0), Replicate(), Shard(1)]),
]
_LAYOUTS = _ONE_D + _TWO_D + _THREE_D


@pytest.mark.parametrize(("name", "fn", "shape"), _CASES, ids=[c[0] for c in _CASES])
def test_writes_through_a_copy_or_view_reach_the_input_as_in_torch(
    name: str, fn: Callable[[Any], Any], shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    full = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
    want_input = full.clone()
    want = fn(want_input).add_(100)  # torch: reaches want_input exactly where it views
    checked = 0
    for mesh_shape, placements in _LAYOUTS:
        if any(isinstance(p, Shard) and p.dim >= len(shape) for p in placements):
            continue
        mesh = dtorch.init_device_mesh("cpu", mesh_shape)
        t = dtorch.from_torch(full, device_mesh=mesh, placements=placements)
        try:
            out = fn(t)
        except dtorch.PlacementError:
            continue  # a layout the view refuses (its message is tested elsewhere)
        out.add_(100)
        context = f"{name} on {mesh_shape} {placements}"
        assert torch.equal(t.to_torch(), want_input), context
        assert torch.equal(out.to_torch(), want), context
        checked += 1
    assert checked >= 2


#: One operator of each family whose result torch makes row-major from contiguous inputs
#: (``strides.ROW_MAJOR_KINDS``), as ``fn(module, t)`` for torch's and dtorch's modules alike.
_FRESH: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("mul", lambda m, t: t * 1),
    ("add of a broadcast row", lambda m, t: t + t[0]),
    ("exp", lambda m, t: t.exp()),
    ("relu", lambda m, t: m.relu(t)),
    ("clamp", lambda m, t: t.clamp(1, 2)),
    ("where", lambda m, t: m.where(t > 1, t, t * 2)),
    ("masked_fill", lambda m, t: t.masked_fill(t > 1, 0.5)),
    ("softmax", lambda m, t: t.softmax(-1)),
    ("cumsum", lambda m, t: t.cumsum(0)),
    ("sum keepdim", lambda m, t: t.sum(0, keepdim=True).expand(2, 2) + t),
    ("max with indices", lambda m, t: t.max(0, keepdim=True)[0] * t),
    ("cat", lambda m, t: m.cat((t, t), 1)[:, 1:3]),
    ("repeat", lambda m, t: t.repeat((1,) * t.ndim)),
    ("pad", lambda m, t: m.nn.functional.pad(t, (0, 0))),
    ("matmul", lambda m, t: t @ t),
    ("mul of a transpose, transposed", lambda m, t: (t.T * 2).T),
    ("exp of a transpose, transposed", lambda m, t: t.T.exp().T),
]


@pytest.mark.parametrize(("name", "fn"), _FRESH, ids=[c[0] for c in _FRESH])
def test_views_of_an_operator_result_copy_or_view_as_in_torch(
    name: str, fn: Callable[[Any, Any], Any], graph: dtorch.Graph
) -> None:
    """``y = f(t)`` is row-major in torch, so ``y.T.contiguous()`` copies; on a (2, 2) mesh
    sharding both dims each device holds one row of each, and its shard cannot tell."""
    full = torch.arange(4.0).reshape(2, 2)
    y_want = fn(torch, full)
    y_want.T.contiguous().add_(100)
    y_want.contiguous().add_(10)
    checked = 0
    for mesh_shape, placements in _TWO_D + _ONE_D[:2]:
        mesh = dtorch.init_device_mesh("cpu", mesh_shape)
        try:
            y = fn(dtorch, dtorch.from_torch(full, device_mesh=mesh, placements=placements))
        except dtorch.PlacementError:
            continue  # a layout the operator refuses (its message is tested elsewhere)
        y.T.contiguous().add_(100)  # a copy: y unchanged
        y.contiguous().add_(10)  # y itself in torch: y changed
        assert torch.equal(y.to_torch(), y_want), f"{name} on {mesh_shape} {placements}"
        checked += 1
    assert checked >= 2


def test_a_matmul_sharding_both_dims_of_its_result_copies_its_transpose(
    graph: dtorch.Graph,
) -> None:
    full = torch.arange(4.0).reshape(2, 2)
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    a = dtorch.from_torch(full, device_mesh=mesh, placements=[Shard(0), Replicate()])
    b = dtorch.from_torch(full, device_mesh=mesh, placements=[Replicate(), Shard(1)])
    y, y_want = a @ b, full @ full
    assert y.placements == [Shard(0), Shard(1)]  # each device: one row of each dim
    y.T.contiguous().add_(100)
    y_want.T.contiguous().add_(100)
    assert torch.equal(y.to_torch(), y_want)


#: name, fn(module, functional, make) building y from a tensor torch calls contiguous but
#: strides otherwise on a size-1 dim (or that a kernel lays out row-major), then y's writes.
_ODD_LAYOUTS: list[tuple[str, Callable[[Any, Any, Any], Any]]] = [
    (
        "broadcast of a permuted (2, 1, 1)",
        lambda m, f, mk: (
            mk(torch.arange(2.0).reshape(1, 2, 1)).permute(1, 2, 0) + mk(torch.zeros(1, 3, 1))
        ),
    ),
    (
        "cat of a one-channel NHWC tensor seen as NCHW",
        lambda m, f, mk: m.cat([_nchw(mk), _nchw(mk)], 1),
    ),
    ("pad of an NHWC tensor seen as NCHW", lambda m, f, mk: f.pad(_nchw3(mk), (1, 1, 1, 1))),
    ("logsigmoid of a transpose", lambda m, f, mk: f.logsigmoid(mk(torch.zeros(2, 3)).T)),
    ("a number to a transpose's power", lambda m, f, mk: 2 ** mk(torch.zeros(2, 3)).T),
]


def _nchw(mk: Any) -> Any:
    return mk(torch.arange(8.0).reshape(2, 2, 2, 1)).permute(0, 3, 1, 2)


def _nchw3(mk: Any) -> Any:
    return mk(torch.arange(6.0).reshape(2, 1, 1, 3)).permute(0, 3, 1, 2)


@pytest.mark.parametrize(("name", "fn"), _ODD_LAYOUTS, ids=[c[0] for c in _ODD_LAYOUTS])
def test_results_of_oddly_strided_inputs_copy_or_view_as_in_torch(
    name: str, fn: Callable[[Any, Any, Any], Any], graph: dtorch.Graph
) -> None:
    """A review's cases: inputs contiguous by torch's test but strided otherwise on a size-1
    dim, whose results torch lays out otherwise (a broadcast, a channels-last guess), and
    kernels that return row-major results of a transposed input. Marking them row-major made
    contiguous() return them where torch copies (or the reverse)."""
    want = fn(torch, F, lambda t: t)
    want.contiguous().add_(100)
    want.reshape(-1).add_(10)
    got = fn(dtorch, dtorch.nn.functional, dtorch.from_torch)
    got.contiguous().add_(100)
    got.reshape(-1).add_(10)
    assert torch.equal(got.to_torch(), want), name


def test_operator_results_are_row_major_in_torch() -> None:
    """The claim behind ``strides.ROW_MAJOR_KINDS``, checked on torch: contiguous inputs
    (size-1 dims, broadcasts) give row-major results."""
    for shape in [(2, 3), (1, 3), (3, 1), (2, 1, 3), (4,), ()]:
        t = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
        if t.ndim < 2:
            t = t.reshape(2, -1) if t.numel() % 2 == 0 else t.reshape(1, -1)
        for name, fn in _FRESH:
            if name in (
                "sum keepdim",
                "max with indices",
                "cat",
                "add of a broadcast row",
                "matmul",
            ):
                continue  # their second step depends on the (2, 2) shape
            out = fn(torch, t)
            assert _same(out.stride(), contiguous_strides(out.shape), out.shape), (name, shape)
        assert (t + t[:1]).is_contiguous() and (t[:1] * t).is_contiguous()
        assert torch.cat((t, t), 1).is_contiguous() and t.max(0)[1].is_contiguous()
    for a_dims, b_dims in itertools.product(range(1, 5), repeat=2):  # matmul of every rank
        a, b = torch.ones((2, 2, 4, 3)[4 - a_dims :]), torch.ones((2, 2, 3, 5)[4 - b_dims :])
        a, b = (torch.ones(3) if a_dims == 1 else a), (torch.ones(3) if b_dims == 1 else b)
        assert torch.matmul(a, b).is_contiguous(), (a_dims, b_dims)


def _random_view(rng: random.Random) -> torch.Tensor:
    # a tensor of up to 4 dims (some of size 0 or 1) after a few transposes, slices, unsqueezes
    t = torch.empty([rng.choice([0, 1, 2, 3, 4]) for _ in range(rng.randint(0, 4))])
    for _ in range(rng.randint(0, 3)):
        if t.ndim >= 2 and rng.random() < 0.4:
            t = t.transpose(rng.randrange(t.ndim), rng.randrange(t.ndim))
        elif t.ndim and rng.random() < 0.7:
            d = rng.randrange(t.ndim)
            start = rng.randint(0, t.shape[d])
            t = t[(slice(None),) * d + (slice(start, None, rng.choice([1, 2])),)]
        else:
            t = t.unsqueeze(rng.randint(0, t.ndim))
    return t


def _same(got: tuple[int, ...], want: tuple[int, ...], shape: torch.Size) -> bool:
    # strides agree on every dim of more than one element (torch's own checks skip the rest)
    if len(got) != len(want):
        return False
    return all(g == w for g, w, s in zip(got, want, shape, strict=True) if s > 1)


def _reshapes(t: torch.Tensor) -> list[list[int]]:
    n, dims = t.numel(), list(t.shape)
    shapes = [[n], [1, n], [*dims, 1], [1, *dims]]
    if len(dims) >= 2:
        shapes += [[dims[0] * dims[1], *dims[2:]], [*dims[:-2], dims[-2] * dims[-1]]]
    return shapes


def test_the_stride_rules_agree_with_torch() -> None:
    rng = random.Random(0)
    for _ in range(3000):
        t = _random_view(rng)
        shape, strides = tuple(t.shape), t.stride()
        assert is_contiguous(shape, strides) == t.is_contiguous(), (shape, strides)
        for new in _reshapes(t):
            try:
                want: tuple[int, ...] | None = t.view(new).stride()
            except RuntimeError:
                want = None
            got = view_strides(shape, strides, tuple(new))
            assert (got is None) == (want is None), (shape, strides, new)
            if got is not None and want is not None and t.numel():
                assert _same(got, want, torch.Size(new)), (shape, strides, new, got, want)
        index = tuple(rng.choice([slice(None), slice(1, None, 2), None]) for _ in shape)
        entries = normalize_index(index, shape)
        assert _same(indexed(shape, strides, entries), t[index].stride(), t[index].shape)
        d = rng.randint(0, t.ndim)
        assert unsqueezed(shape, strides, d) == t.unsqueeze(d).stride()
        target = (2, *(3 if s == 1 else s for s in shape))
        assert expanded(shape, strides, target) == t.expand(target).stride()
        if t.numel():
            assert contiguous_strides(shape) == torch.empty(shape).stride()
            assert _same(preserved(shape, strides), t.clone().stride(), t.shape)
            assert _same(preserved(shape, strides), (t * 2).stride(), t.shape)  # elementwise
            assert _same(preserved(shape, strides), t.exp().stride(), t.shape)
