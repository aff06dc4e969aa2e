"""Tensor compatibility with DTorch's API (issue 9, "## Tensor"): identity hashing and ``==``
with non-tensors, torch-style construction and typed aliases, ``data``, ``device``, ``to``,
``check_placement``, names, ``redistribute_by_dict``, ``repeat(repeats=)``, clamp with tensor
bounds, ``max``/``min`` forms, ``softmax(dim=None)`` and ``nonzero``; torch behaviours
(``format``, ``round(decimals=)``, ``nonzero(as_tuple=True)``, ``where(condition)``, ``mT``,
``type``, ``repeat_interleave`` with tensor repeats, ``in``, byte sizes, ``t``, ``view_as``,
``fill_``/``zero_``, ``new_*``, ``split``/``narrow``, ``tril``/``triu``); compared with torch on
1-D, 2-D and 3-D meshes (even and uneven), in thread and process mode (``graph``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import dtorch
from dtorch.errors import MeshError, PlacementError, ShapeError
from dtorch.ir.placement import Partial, Replicate, Shard
from tests.api.ops_harness import place

R, P = Replicate(), Partial()
_G = torch.Generator().manual_seed(9)
# mesh shape, placements, full shape (uneven shards on purpose)
LAYOUTS = [
    ((4,), [Shard(0)], (7, 3)),
    ((2, 2), [Shard(1), Shard(0)], (5, 3)),
    ((2, 2, 2), [Shard(0), R, Shard(1)], (3, 5, 2)),
]
NAMES = {1: ("tp",), 2: ("dp", "tp"), 3: ("pp", "dp", "tp")}


def _mesh(shape: tuple[int, ...]) -> dtorch.DeviceMesh:
    return dtorch.init_device_mesh("cpu", shape, mesh_dim_names=NAMES[len(shape)])


def _placed(graph: dtorch.Graph, layout: tuple) -> tuple[torch.Tensor, dtorch.Tensor]:
    shape, placements, full_shape = layout
    full = torch.randn(full_shape, generator=_G)
    return full, place(full, _mesh(shape), placements, graph)


def test_hash_and_comparison_with_non_tensors(graph: dtorch.Graph) -> None:
    a, b = dtorch.zeros(2, graph=graph), dtorch.zeros(2, graph=graph)
    assert len({a, b, a}) == 2 and {a: 1, b: 2}[b] == 2 and hash(a) == hash(a)
    assert (a == None) is False and (a != None) is True  # noqa: E711
    assert (a == "x") is False and a != object()
    assert torch.equal((a == 0).to_torch(), torch.tensor([True, True]))
    module = torch.nn.Module()
    module.holder = {a}  # type: ignore[assignment]
    assert a in module.holder


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: str(x[0]))
def test_construction(graph: dtorch.Graph, layout: tuple) -> None:
    full, t = _placed(graph, layout)
    mesh = t.device_mesh
    empty = dtorch.Tensor(graph=graph)
    assert empty.shape == torch.Tensor().shape and empty.dtype == torch.Tensor().dtype
    sized = dtorch.Tensor(2, 3, graph=graph, device_mesh=mesh)
    assert sized.shape == torch.Tensor(2, 3).shape and sized.dtype == torch.float32
    assert dtorch.Tensor(torch.Size([4, 1]), graph=graph).shape == torch.Size([4, 1])
    listed = dtorch.Tensor([1, 2], graph=graph)
    assert torch.equal(listed.to_torch(), torch.Tensor([1, 2]))
    copy = dtorch.Tensor(t)
    assert copy.placements == t.placements and torch.equal(copy.to_torch(), full)
    moved = dtorch.Tensor(t, placements=[R] * mesh.ndim, dtype=torch.float64)
    assert moved.placements == [R] * mesh.ndim and torch.equal(moved.to_torch(), full.double())
    distributed = dtorch.Tensor(full, device_mesh=mesh, placements=t.placements, graph=graph)
    assert distributed.placements == t.placements and torch.equal(distributed.to_torch(), full)


_TYPED = {
    "FloatTensor": torch.float32, "DoubleTensor": torch.float64, "HalfTensor": torch.float16,
    "BFloat16Tensor": torch.bfloat16, "ByteTensor": torch.uint8, "CharTensor": torch.int8,
    "ShortTensor": torch.int16, "IntTensor": torch.int32, "LongTensor": torch.int64,
    "BoolTensor": torch.bool,
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(_TYPED))
def test_typed_aliases(name: str) -> None:
    cls = getattr(dtorch, name)
    want = getattr(torch, name)([1, 0, 2])
    made = cls([1, 0, 2])
    assert isinstance(made, dtorch.Tensor) and made.dtype == want.dtype == _TYPED[name]
    assert torch.equal(made.to_torch(), want)
    assert cls(2, 3).shape == torch.Size([2, 3]) and cls(2, 3).dtype == _TYPED[name]
    assert cls(torch.arange(3)).dtype == _TYPED[name]
    # isinstance asks for the dtype, as torch's typed classes do, however the tensor was made
    for dtype in _TYPED.values():
        plain, ref = dtorch.zeros(2, dtype=dtype), torch.zeros(2, dtype=dtype)
        assert isinstance(plain, cls) == isinstance(ref, getattr(torch, name))
    assert not isinstance(want, cls)  # a torch tensor is no dtorch typed tensor


class _Sub(dtorch.Tensor):
    """A handle subclass of the user's (as ``nn.Parameter`` is torch's)."""

    __slots__ = ()


@pytest.mark.parametrize("make", ["LongTensor", "FloatTensor", "subclass"])
def test_operators_on_a_handle_subclass_return_plain_tensors(
    graph: dtorch.Graph, make: str
) -> None:
    """As torch: ``torch.LongTensor(...) + 1`` and ``Parameter * 2`` are plain ``torch.Tensor``s."""
    data = torch.tensor([1, 0, 2])
    if make == "subclass":
        t, want = _Sub(data), torch.nn.Parameter(data.float(), requires_grad=False)
    else:
        t, want = getattr(dtorch, make)([1, 0, 2]), getattr(torch, make)([1, 0, 2])
    assert type(t) is not dtorch.Tensor
    results = [t + 1, t * t, t.double(), t.detach(), t[1:], t.sum(), t.data]
    torch_results = [want + 1, want * want, want.double(), want.detach(), want[1:], want.sum()]
    assert {type(r) for r in torch_results} == {torch.Tensor}
    assert [type(r) for r in results] == [dtorch.Tensor] * len(results)
    assert torch.equal((t + 1).to_torch(), data.to(t.dtype) + 1)


def test_torch_names_and_version() -> None:
    assert dtorch.Generator is torch.Generator and dtorch.Size is torch.Size
    assert dtorch.short is torch.short and isinstance(dtorch.__version__, str)
    from importlib.metadata import version

    assert dtorch.__version__ == version("dtorch")
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert torch.equal(dtorch.from_numpy(array).to_torch(), torch.from_numpy(array))


def test_data_rebinds_in_place(graph: dtorch.Graph) -> None:
    t = dtorch.zeros(2, graph=graph)
    alias = t.detach()
    other = dtorch.arange(3.0, graph=graph)
    handle = t
    t.data = other
    assert handle is t and torch.equal(t.to_torch(), torch.arange(3.0))
    assert torch.equal(alias.to_torch(), torch.zeros(2))
    assert torch.equal(t.data.to_torch(), torch.arange(3.0))
    plain = dtorch.ones(2, graph=graph)
    plain.data = dtorch.zeros(4, graph=graph)
    assert torch.equal(plain.to_torch(), torch.zeros(4))
    with pytest.raises(TypeError, match=r"^data: expected a dtorch\.Tensor"):
        t.data = torch.zeros(2)  # type: ignore[assignment]


def test_device(graph: dtorch.Graph) -> None:
    assert dtorch.zeros(2, graph=graph).device == torch.device("cpu") == torch.zeros(2).device
    assert dtorch.zeros(2, graph=graph, device="cpu:3").device == torch.device("cpu", 3)
    mesh = dtorch.DeviceMesh("cpu", [[2, 3], [4, 5]])
    assert dtorch.zeros(2, graph=graph, device_mesh=mesh).device == torch.device("cpu", 2)


def test_tensors_on_device_ids_past_torchs_index_limit(graph: dtorch.Graph) -> None:
    """Logical CPU ids of 128 and more (torch.device would wrap them): values, fetches,
    client-side indexing and moves stay on the right devices."""
    mesh = dtorch.DeviceMesh.from_ids("cpu", (4,), (1000, 1001, 1002, 1003))
    full = torch.arange(12.0).reshape(6, 2)
    t = dtorch.from_torch(full, device_mesh=mesh, placements=[Shard(0)])
    assert torch.equal(t.to_torch(), full) and not t.is_cuda and t.is_cpu
    mask = full[:, 0] > 3
    picked = t[mask]
    assert picked.device_mesh == mesh and picked.placements == [Replicate()]
    assert torch.equal(picked.to_torch(), full[mask])
    moved = t.to("cpu:300")
    assert moved.device_mesh == dtorch.DeviceMesh("cpu", [300])
    assert torch.equal(moved.to_torch(), full)
    with pytest.raises(MeshError, match=r"cpu:1000 has no torch\.device"):
        _ = t.device


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: str(x[0]))
def test_to_forms(graph: dtorch.Graph, layout: tuple) -> None:
    full, t = _placed(graph, layout)
    mesh = t.device_mesh
    other = dtorch.zeros(1, dtype=torch.float64, device_mesh=mesh, graph=graph)
    for out, want in (
        (t.to(torch.float64), full.double()),
        (t.to(dtype=torch.int32), full.to(torch.int32)),
        (t.to("cpu", torch.float16), full.half()),
        (t.to(device="cpu"), full),
        (t.to(device_mesh=mesh), full),
        (t.to(mesh, dtype=torch.float64), full.double()),
        (t.to(other), full.double()),
    ):
        assert out.dtype == want.dtype and out.device_mesh == mesh
        assert out.placements == t.placements and torch.equal(out.to_torch(), want)
    single = t.to("cpu:0")
    assert single.device == torch.device("cpu") and torch.equal(single.to_torch(), full)
    wrong = dtorch.init_device_mesh("cpu", (8,) if mesh.ndim > 1 else (2, 2))
    with pytest.raises(MeshError, match="use redistribute"):
        t.to(wrong)
    with pytest.raises(TypeError, match=r"^to: device and device_mesh"):
        t.to(device="cpu", device_mesh=mesh)
    parsed = dtorch.Tensor.parser_tensor_to_function_arg((mesh,), {"dtype": torch.int8})
    assert parsed == (mesh, torch.int8)
    assert dtorch.Tensor.parser_tensor_to_function_arg(("cpu",), {}) == (torch.device("cpu"), None)


def test_to_its_own_device_stays_and_copy_makes_a_new_tensor(graph: dtorch.Graph) -> None:
    """``x.to(x.device)`` is ``x`` (torch), whichever device id the mesh starts at; ``copy=True``
    always gives a tensor of its own, even when nothing else changes."""
    full = torch.arange(4.0)
    mesh = dtorch.DeviceMesh("cpu", [1, 2])
    t = dtorch.from_torch(full, device_mesh=mesh, placements=[Shard(0)], graph=graph)
    assert t.to(t.device) is t and t.to(device=t.device) is t
    assert t.to("cpu:2").device_mesh == dtorch.DeviceMesh("cpu", [2])
    for copy in (t.to(copy=True), t.to(t.dtype, copy=True), t.to(t.device, copy=True)):
        assert copy is not t and copy.placements == t.placements
        copy.add_(1)
        assert torch.equal(copy.to_torch(), full + 1)
    assert torch.equal(t.to_torch(), full)


def test_check_placement_and_names(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 1, 2), mesh_dim_names=("dp", "pp", "tp"))
    t = dtorch.zeros(4, 4, device_mesh=mesh, placements=[Shard(0), R, Shard(1)], graph=graph)
    t.check_placement("dp", Shard(0))
    t.check_placement(2, Shard(1))
    t.check_placement("pp", Shard(0))  # size-1 mesh dim: skipped
    with pytest.raises(PlacementError, match="check_placement: mesh dim 'pp'"):
        t.check_placement("pp", Shard(0), skip_when_dim_size_equal_one=False)
    with pytest.raises(PlacementError, match="check_placement: mesh dim 'tp'"):
        t.check_placement("tp", R)
    with pytest.raises(MeshError, match="check_placement: mesh dim 'xx'"):
        t.check_placement("xx", R)
    assert t.get_name() is None
    t.set_name("weight")
    assert t.get_name() == "weight" and "weight" in repr(t)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: str(x[0]))
def test_redistribute_by_dict(graph: dtorch.Graph, layout: tuple) -> None:
    full, t = _placed(graph, layout)
    mesh = t.device_mesh
    names = mesh.dim_names
    wanted = {names[-1]: Shard(0), "absent": Shard(1)}
    if mesh.ndim > 1:  # a mesh dim missing from the dict: kept by default (API.md), or refused
        with pytest.raises(PlacementError, match="raise_error"):
            t.redistribute_by_dict(placements_dict=wanted, default_placement_mode="raise_error")
        default = t.redistribute_by_dict(mesh, wanted)  # the mode is positional too
        assert default.placements == [*t.placements[:-1], Shard(0)]
        assert torch.allclose(default.to_torch(), full)
    replicated = t.redistribute_by_dict(placements_dict=wanted, default_placement_mode="replicate")
    assert replicated.placements == [R] * (mesh.ndim - 1) + [Shard(0)]
    assert torch.equal(replicated.to_torch(), full)
    kept = t.redistribute_by_dict(placements_dict={mesh.ndim - 1: P}, default_placement_mode="keep")
    assert kept.placements == [*t.placements[:-1], P]
    assert torch.allclose(kept.to_torch(), full)
    every = {i: Shard(0) for i in range(mesh.ndim)}
    assert t.redistribute_by_dict(placements_dict=every).placements == [Shard(0)] * mesh.ndim
    single = t.redistribute_by_dict(dtorch.DeviceMesh("cpu", 0), placements_dict=wanted)
    assert torch.equal(single.to_torch(), full)
    narrow = t[:1]  # tensor dim 0 of size 1: Shard(0) there becomes Replicate
    out = narrow.redistribute_by_dict(placements_dict=every)
    assert out.placements == [R] * mesh.ndim and torch.equal(out.to_torch(), full[:1])
    raw = narrow.redistribute_by_dict(
        placements_dict=every, convert_shard_size_one_to_replicate=False
    )
    assert raw.placements == [Shard(0)] * mesh.ndim and torch.equal(raw.to_torch(), full[:1])
    both = dtorch.tensor.tensors_redistribute_by_dict([t, t * 2], placements_dict=every)
    assert [b.placements for b in both] == [[Shard(0)] * mesh.ndim] * 2
    assert torch.equal(both[1].to_torch(), full * 2)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: str(x[0]))
def test_operator_forms(graph: dtorch.Graph, layout: tuple) -> None:
    full, t = _placed(graph, layout)
    mesh = t.device_mesh
    counts = (2,) + (1,) * full.ndim  # a new leading dim: the shards need not move
    replicated = t.redistribute(placements=[R] * mesh.ndim)
    assert torch.equal(replicated.repeat(repeats=counts).to_torch(), full.repeat(repeats=counts))
    assert torch.equal(replicated.repeat(*counts).to_torch(), full.repeat(*counts))
    low_full = torch.randn(full.shape[-1], generator=_G)
    low = dtorch.from_torch(low_full, device_mesh=mesh, graph=graph)
    high = dtorch.from_torch(low_full.double() + 0.5, device_mesh=mesh, graph=graph)
    for out, want in (
        (t.clamp(low, high), full.clamp(low_full, low_full.double() + 0.5)),
        (t.clip(min=low), full.clip(min=low_full)),
        (dtorch.clamp(t, max=high), torch.clamp(full, max=low_full.double() + 0.5)),
    ):
        assert out.dtype == want.dtype and torch.equal(out.to_torch(), want)
    other = t * -1
    for method in ("max", "min"):
        got, want = getattr(t, method)(other), getattr(full, method)(-full)
        assert torch.equal(got.to_torch(), want)
        got = getattr(t, method)(other=other)
        assert torch.equal(got.to_torch(), want)
        reduced, expected = getattr(replicated, method)(dim=1), getattr(full, method)(dim=1)
        assert type(reduced) is type(expected) and isinstance(reduced.values, dtorch.Tensor)
        assert torch.equal(reduced.values.to_torch(), expected.values)
        assert torch.equal(reduced.indices.to_torch(), expected.indices)
    for x in (full, full[0], full[0, 0]):
        d = dtorch.from_torch(x, device_mesh=mesh, graph=graph)
        with pytest.warns(UserWarning):
            want = torch.nn.functional.softmax(x, dim=None)
        assert torch.allclose(d.softmax().to_torch(), want)
        assert torch.allclose(dtorch.softmax(d).to_torch(), want)
    mask = (t > 0).nonzero()
    assert mask.device_mesh == mesh and torch.equal(mask.to_torch(), (full > 0).nonzero())


def test_format_matches_torch(graph: dtorch.Graph) -> None:
    """torch's ``Tensor.__format__``: a 0-d tensor formats its value (also a Partial one, whose
    value is the sum); another tensor takes only the empty spec; a Parameter none."""
    mesh = _mesh((2,))
    for value, spec in (
        (torch.tensor(2.0) / 3, ".3f"),
        (torch.tensor(-1.5, dtype=torch.float64), "+.1e"),
        (torch.tensor(7), "04d"),
        (torch.tensor(True), ""),
        (torch.tensor(0.25, dtype=torch.float16), ">8"),
    ):
        for placements in ([R], [P]):
            t = place(value, mesh, placements, graph)
            assert format(t, spec) == format(value, spec) == f"{t:{spec}}"
    for value in (torch.tensor([1.5]), torch.zeros(2, 2)):
        with pytest.raises(TypeError, match="unsupported format string"):
            format(value, ".1f")
        t = place(value, mesh, [R], graph)
        with pytest.raises(TypeError, match=r"unsupported format string passed to Tensor"):
            format(t, ".1f")
        assert format(t, "") == str(t)
    with pytest.raises(TypeError, match="unsupported format string passed to Parameter"):
        format(torch.nn.Parameter(torch.tensor(1.0)), ".1f")
    with pytest.raises(TypeError, match="unsupported format string passed to Parameter"):
        format(dtorch.nn.Parameter(dtorch.tensor(1.0, graph=graph)), ".1f")


_FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: str(x[0]))
def test_round_with_decimals(graph: dtorch.Graph, layout: tuple) -> None:
    """``round(decimals=n)`` equals torch's bit for bit (halves to even, float16/bfloat16
    computed in float32 as torch does), keeps the placements; integers take decimals=0 only."""
    full, t = _placed(graph, layout)
    full, t = full * 300, t * 300
    for dtype in _FLOATS:
        x, d = full.to(dtype), t.to(dtype)
        for decimals in (-2, -1, 0, 1, 3):
            out, want = d.round(decimals=decimals), x.round(decimals=decimals)
            assert out.dtype == want.dtype and out.placements == t.placements
            assert torch.equal(out.to_torch(), want), (dtype, decimals)
        want = torch.round(x, decimals=2)
        assert torch.equal(dtorch.round(d, decimals=2).to_torch(), want)
    ints = t.to(torch.int64)
    assert torch.equal(ints.round().to_torch(), full.to(torch.int64).round())
    with pytest.raises(NotImplementedError):
        full.to(torch.int64).round(decimals=1)
    with pytest.raises(TypeError, match=r"^round: decimals=1 needs a floating-point tensor"):
        ints.round(decimals=1)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: str(x[0]))
def test_nonzero_as_tuple_and_where_of_a_condition(graph: dtorch.Graph, layout: tuple) -> None:
    """``nonzero(as_tuple=True)`` and ``dtorch.where(condition)``: one index tensor per dim, as
    torch's, replicated on the input's mesh (also of a 0-d input)."""
    full, t = _placed(graph, layout)
    mesh = t.device_mesh
    scalar = t.redistribute(placements=[R] * mesh.ndim)[0, 0]  # an int index needs Replicate
    for x, d in ((full > 0, t > 0), (full[0, 0] > 0, scalar > 0), (full > 9, t > 9)):
        want = x.nonzero(as_tuple=True)
        for got in (d.nonzero(as_tuple=True), dtorch.nonzero(d, as_tuple=True), dtorch.where(d)):
            assert isinstance(got, tuple) and len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                assert g.device_mesh == mesh and g.placements == [R] * mesh.ndim
                assert torch.equal(g.to_torch(), w)
        assert torch.equal(d.nonzero(as_tuple=False).to_torch(), x.nonzero())
    with pytest.raises(TypeError):
        torch.where(full > 0, full)
    with pytest.raises(TypeError, match=r"^where: give both input and other, or neither"):
        dtorch.where(t > 0, t)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: str(x[0]))
def test_matrix_transpose_and_type(graph: dtorch.Graph, layout: tuple) -> None:
    """``mT``/``mH`` (the last two dims swapped; real dtypes) and ``type``: torch's type name,
    and conversion by dtype, type name, or torch's or dtorch's typed class."""
    full, t = _placed(graph, layout)
    for out, want in ((t.mT, full.mT), (t.mH, full.mH)):
        assert out.shape == want.shape and torch.equal(out.to_torch(), want)
    rest = tuple(range(1, full.ndim))  # a 1-D result
    with pytest.raises(RuntimeError, match=r"tensor\.mT is only supported on matrices"):
        _ = full.sum(rest).mT
    with pytest.raises(ShapeError, match=r"^tensor\.mT is only supported on matrices .* 1-D"):
        _ = t.sum(rest).mT
    for dtype in _TYPED.values():
        assert t.to(dtype).type() == full.to(dtype).type()
    assert t.type(torch.float32) is t and full.type(torch.float32) is full
    for target in (torch.int32, "torch.DoubleTensor", torch.ShortTensor, torch.bool):
        out, want = t.type(target), full.type(target)  # type: ignore[arg-type]
        assert out.dtype == want.dtype and out.placements == t.placements
        assert torch.equal(out.to_torch(), want)
    assert t.type(dtorch.LongTensor).dtype == torch.int64
    with pytest.raises(ValueError, match="invalid type: 'float'"):
        full.type("float")
    with pytest.raises(ValueError, match="invalid type: 'float'"):
        t.type("float")


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: str(x[0]))
def test_repeat_interleave_with_tensor_repeats(graph: dtorch.Graph, layout: tuple) -> None:
    """A torch or dtorch tensor of repeats (one count per element, or one for all), along a
    dim, flattened, or alone (``repeat_interleave(counts)``); torch's refusals."""
    full, t = _placed(graph, layout)
    mesh = t.device_mesh
    rows = torch.randint(0, 3, (full.shape[0],), generator=_G)
    cols = torch.randint(0, 3, (full.shape[-1],), generator=_G)
    every = torch.randint(0, 3, (full.numel(),), generator=_G)
    dcols = dtorch.from_torch(cols, device_mesh=mesh, placements=[Shard(0)] * mesh.ndim)
    replicated = t.redistribute(placements=[R] * mesh.ndim)
    two, total = torch.tensor(2), int(rows.sum())
    for out, want in (
        (t.repeat_interleave(rows, dim=0), full.repeat_interleave(rows, dim=0)),
        (t.repeat_interleave(dcols, -1), full.repeat_interleave(cols, -1)),
        # one count for all: as the int (which needs even shards of the repeated dim)
        (replicated.repeat_interleave(two, dim=1), full.repeat_interleave(two, 1)),
        (replicated.repeat_interleave(two[None], dim=0), full.repeat_interleave(two[None], 0)),
        (replicated.repeat_interleave(every), full.repeat_interleave(every)),
        (dtorch.repeat_interleave(t, rows, 0, output_size=total), full.repeat_interleave(rows, 0)),
        (dtorch.repeat_interleave(dcols), torch.repeat_interleave(cols)),
    ):
        assert out.shape == want.shape and out.dtype == want.dtype
        assert out.device_mesh == mesh and torch.equal(out.to_torch(), want)
    for bad, error in (
        (torch.tensor([1, 2, 3, 4, 5, 6, 7, 8]), ShapeError),  # not one count per element
        (-rows - 1, ValueError),
        (rows.float(), TypeError),
        (rows[None], ShapeError),
    ):
        with pytest.raises((RuntimeError, NotImplementedError)):
            full.repeat_interleave(bad, dim=0)
        with pytest.raises(error, match=r"^repeat_interleave: "):
            t.repeat_interleave(bad, dim=0)
    with pytest.raises(ShapeError, match="Invalid output_size"):
        t.repeat_interleave(rows, 0, output_size=total + 1)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: str(x[0]))
def test_membership_sizes_and_shape_forms(graph: dtorch.Graph, layout: tuple) -> None:
    """``in`` (torch's: any entry equal), byte sizes, device flags, ``t()``, ``view_as``,
    ``reshape_as`` as torch's."""
    full, t = _placed(graph, layout)
    for element in (full.flatten()[3].item(), 123.0, full.flatten()[0]):
        assert (element in t) == (element in full)
    with pytest.raises(RuntimeError, match=r"__contains__ only supports Tensor or scalar"):
        _ = "x" in t
    for dtype in (torch.float16, torch.int64, torch.bool):
        x, d = full.to(dtype), t.to(dtype)
        assert (d.itemsize, d.element_size(), d.nbytes) == (x.itemsize, x.element_size(), x.nbytes)
    assert (t.is_cuda, t.is_cpu, t.ndimension()) == (full.is_cuda, full.is_cpu, full.ndimension())
    flat = torch.zeros(full.numel())
    replicated = t.redistribute(placements=[R] * t.device_mesh.ndim)  # a sharded inner dim
    like = dtorch.from_torch(flat)  # cannot be merged in place
    assert torch.equal(replicated.reshape_as(like).to_torch(), full.reshape_as(flat))
    assert torch.equal(replicated.view_as(like).to_torch(), full.view_as(flat))
    matrix, vector = t.sum(0), t.sum(tuple(range(full.ndim - 1)))  # 2-D or 1-D, then 1-D
    for d, x in ((matrix, full.sum(0)), (vector, full.sum(tuple(range(full.ndim - 1))))):
        if x.ndim <= 2:
            torch.testing.assert_close(d.t().to_torch(), x.t())
    if full.ndim > 2:
        with pytest.raises(RuntimeError, match=r"t\(\) expects a tensor with <= 2 dimensions"):
            full.t()
        with pytest.raises(ShapeError, match=r"^t\(\) expects a tensor with <= 2 dimensions"):
            t.t()


# the layouts above, and Partial ones (fill_, slices and tril keep Partial)
_WITH_PARTIAL = [
    *LAYOUTS,
    ((2, 2), [P, Shard(1)], (5, 3)),
    ((2, 2, 2), [Shard(2), P, Shard(0)], (3, 5, 3)),
]


def _typed_like(full: torch.Tensor, t: dtorch.Tensor, dtype: torch.dtype) -> dtorch.Tensor:
    """``full`` as ``dtype`` placed as ``t`` (a Partial float casts to no int or bool)."""
    return place(full.to(dtype), t.device_mesh, t.placements, t.graph)


def _unsharded(t: dtorch.Tensor) -> int | None:
    """A dim of ``t`` no mesh dim shards (None: each is sharded)."""
    sharded = {p.dim for p in t.placements if isinstance(p, Shard)}
    return next((d for d in range(t.ndim) if d not in sharded), None)


def _same_or_refused(
    t: dtorch.Tensor, dim: int, call: Callable[..., Any], args: tuple, want: Any
) -> None:
    """``call(*args)`` equals ``want`` (a tensor or a tuple of them), or, on a sharded ``dim``,
    raises getitem's PlacementError under the method's name (a slice whose result is not
    chunked as the input)."""
    try:
        got = call(*args)
    except PlacementError as error:
        assert any(p == Shard(dim) for p in t.placements), error
        assert str(error).startswith(f"{call.__name__}: ") and "Redistribute dim" in str(error)
        return
    pairs = zip(got, want, strict=True) if isinstance(want, tuple) else [(got, want)]
    for g, w in pairs:
        assert g.shape == w.shape and torch.equal(g.to_torch(), w)


@pytest.mark.parametrize("layout", _WITH_PARTIAL, ids=lambda x: f"{x[0]}{x[1]}")
def test_fill_and_zero_in_place(graph: dtorch.Graph, layout: tuple) -> None:
    """``fill_``/``zero_`` change the tensor in place (a view and an alias see it), in its
    dtype and placements, with a number or a 0-d torch or dtorch tensor; return self."""
    full, t = _placed(graph, layout)
    mesh, placements = t.device_mesh, t.placements
    view, alias, want_view = t.transpose(0, 1), t.detach(), full.transpose(0, 1)
    assert t.fill_(2.5) is t and full.fill_(2.5) is full
    assert t.placements == placements and torch.equal(t.to_torch(), full)
    assert torch.equal(view.to_torch(), want_view) and torch.equal(alias.to_torch(), full)
    free = _unsharded(t)  # a slice of a sharded dim is refused (getitem), a view
    if free is not None:
        part = (slice(None),) * free + (slice(1, None),)
        assert t[part].zero_() is not None
        full[part].zero_()
        assert torch.equal(t.to_torch(), full) and torch.equal(view.to_torch(), want_view)
    assert view.zero_() is view
    want_view.zero_()
    assert torch.equal(t.to_torch(), full) and torch.equal(alias.to_torch(), full)
    ints, want = _typed_like(full, t, torch.int64), full.to(torch.int64)
    for value in (2.7, True, torch.tensor(-3), dtorch.tensor(4.9, graph=graph, device_mesh=mesh)):
        ints.fill_(value)
        want.fill_(value.to_torch() if isinstance(value, dtorch.Tensor) else value)
        assert ints.dtype == torch.int64 and torch.equal(ints.to_torch(), want)
    flags = _typed_like(full, t, torch.bool).zero_()
    assert torch.equal(flags.to_torch(), torch.zeros_like(full, dtype=torch.bool))
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        full.fill_(torch.zeros(2))
    with pytest.raises(ShapeError, match=r"^fill_ only supports 0-dimension value tensor"):
        t.fill_(torch.zeros(2))
    with pytest.raises(TypeError, match=r"^fill_: value must be a number"):
        t.fill_("x")


@pytest.mark.parametrize("layout", _WITH_PARTIAL, ids=lambda x: f"{x[0]}{x[1]}")
def test_new_tensors(graph: dtorch.Graph, layout: tuple) -> None:
    """``new_zeros``/``new_ones``/``new_full``/``new_empty``/``new_tensor``: torch's shapes,
    values and dtypes (the input's by default), on the input's mesh, every mesh dim Replicate."""
    full, t = _placed(graph, layout)
    mesh = t.device_mesh
    ints, wide = _typed_like(full, t, torch.int32), full.to(torch.int32)
    data = [[1.7, -2.0], [3.0, 0.5]]
    source = torch.arange(6).reshape(2, 3)
    dsource = place(source, mesh, [Shard(0)] * mesh.ndim, graph)
    for out, want in (
        (t.new_zeros(2, 3), full.new_zeros(2, 3)),
        (t.new_zeros((4,), dtype=torch.int64), full.new_zeros((4,), dtype=torch.int64)),
        (ints.new_ones([2, 1]), wide.new_ones([2, 1])),
        (t.new_ones(torch.Size([0, 2])), full.new_ones(torch.Size([0, 2]))),
        (ints.new_full((3,), 7.9), wide.new_full((3,), 7.9)),
        (t.new_full([2, 2], 5, dtype=torch.float64), full.new_full([2, 2], 5, dtype=torch.float64)),
        (t.new_full((), True), full.new_full((), True)),
        (ints.new_tensor(data), wide.new_tensor(data)),
        (t.new_tensor(3), full.new_tensor(3)),
        (t.new_tensor(data, dtype=torch.float16), full.new_tensor(data, dtype=torch.float16)),
        (t.new_tensor(source), source.to(full.dtype)),  # torch's new_tensor(tensor) warns
        (ints.new_tensor(dsource), source.to(torch.int32)),
        (t.new_tensor(dsource, dtype=torch.int64), source),
    ):
        assert out.shape == want.shape and out.dtype == want.dtype
        assert out.device_mesh == mesh and out.placements == [R] * mesh.ndim
        assert torch.equal(out.to_torch(), want)
    empty = ints.new_empty(3, 2)
    assert (empty.shape, empty.dtype, empty.placements) == ((3, 2), torch.int32, [R] * mesh.ndim)
    copied = dsource.redistribute(placements=[R] * mesh.ndim)
    fresh = copied.new_tensor(copied)  # a copy, not the same value
    fresh.zero_()
    assert torch.equal(copied.to_torch(), source)
    with pytest.raises(TypeError, match=r"^new_full: fill_value must be a number"):
        t.new_full((2,), [1])


def test_the_split_function_takes_torchs_keywords(graph: dtorch.Graph) -> None:
    """``dtorch.split(tensor=, split_size_or_sections=, dim=)`` as ``torch.split`` (it was the
    method, whose keyword is ``split_size``)."""
    full = torch.arange(10).view(5, 2)
    t = dtorch.from_torch(full, device_mesh=dtorch.init_device_mesh("cpu", 2), graph=graph)
    got = dtorch.split(tensor=t, split_size_or_sections=[1, 4], dim=0)
    want = torch.split(tensor=full, split_size_or_sections=[1, 4], dim=0)
    assert [p.tolist() for p in got] == [p.tolist() for p in want]


@pytest.mark.parametrize("layout", _WITH_PARTIAL, ids=lambda x: f"{x[0]}{x[1]}")
def test_split_and_narrow(graph: dtorch.Graph, layout: tuple) -> None:
    """``split`` (a size: the last piece shorter; a list of sizes) and ``narrow`` along every
    dim, sharded or not (uneven shards), as torch's, with torch's refusals."""
    full, t = _placed(graph, layout)
    for dim in range(full.ndim):
        size = full.shape[dim]
        for how in (1, 2, 3, size, size + 4, [size], [size - 1, 0, 1], [1] * size):
            _same_or_refused(t, dim, t.split, (how, dim), full.split(how, dim))
        negative = dim - full.ndim
        for start, length in ((0, size), (1, size - 1), (-2, 2), (size, 0), (-size, 1)):
            want = full.narrow(negative, start, length)
            _same_or_refused(t, dim, t.narrow, (negative, start, length), want)
            _same_or_refused(t, dim, t.narrow, (dim, torch.tensor(start), length), want)
        replicated = t.redistribute(placements=[R] * t.device_mesh.ndim)  # the error's advice
        assert torch.equal(replicated.split(2, dim)[-1].to_torch(), full.split(2, dim)[-1])
    first = t.redistribute(placements=[R] * t.device_mesh.ndim)
    for call, error, message in (
        (lambda x: x.split(0), ShapeError, "split_size can only be 0 if dimension size is 0"),
        (lambda x: x.split(-1), ValueError, "split expects split_size be non-negative"),
        (lambda x: x.split([1, 1]), ShapeError, "split_with_sizes expects split_sizes to sum"),
        (lambda x: x.split([9, -6]), ValueError, "split_with_sizes expects split_sizes have only"),
        (lambda x: x.narrow(0, 4, 1), IndexError, r"start out of range \(expected to be in range"),
        (lambda x: x.narrow(0, 1, 3), ShapeError, r"start \(1\) \+ length \(3\) exceeds"),
        (lambda x: x.narrow(0, 0, -1), ValueError, r"narrow\(\): length must be non-negative"),
        (lambda x: x.narrow(5, 0, 1), IndexError, "narrow"),
    ):
        with pytest.raises((RuntimeError, IndexError)):
            call(full[:3])
        with pytest.raises(error, match=message):
            call(first[:3])
    assert [p.shape for p in first[:0].split(0)] == [p.shape for p in full[:0].split(0)]


@pytest.mark.parametrize("layout", _WITH_PARTIAL, ids=lambda x: f"{x[0]}{x[1]}")
def test_tril_and_triu(graph: dtorch.Graph, layout: tuple) -> None:
    """``tril``/``triu`` of the last two dims, sharded (uneven) or not, on a batch: torch's
    values (an inf outside the triangle is a 0, not a nan), dtype and placements."""
    full, t = _placed(graph, layout)
    full[..., 0, -1] = float("inf")
    for x in (full, full.to(torch.int64), full > 0):
        d = _typed_like(x, t, x.dtype)
        for diagonal in (-6, -2, -1, 0, 1, 2, 6):
            for out, want in (
                (d.tril(diagonal), x.tril(diagonal)),
                (d.triu(diagonal), x.triu(diagonal)),
            ):
                assert out.dtype == want.dtype and out.placements == d.placements
                assert torch.equal(out.to_torch(), want), diagonal
    vector = t.sum(tuple(range(full.ndim - 1)))
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dimensions"):
        full.sum(tuple(range(full.ndim - 1))).tril()
    with pytest.raises(ShapeError, match=r"^triu: input tensor must have at least 2 dimensions"):
        vector.triu()


def test_a_mesh_the_graph_cannot_run_is_refused_at_the_call(graph: dtorch.Graph) -> None:
    """As torch's ``.cuda()`` raises at once on a machine without CUDA, moving to or creating
    on a mesh the graph cannot satisfy raises at the call (not a KernelError at the fetch);
    where the GPUs exist the same calls give the value."""
    full = torch.arange(6.0).reshape(3, 2)
    t = dtorch.from_torch(full, graph=graph)
    cuda = dtorch.DeviceMesh("cuda", [0, 1])
    one, two = dtorch.DeviceMesh("cuda:0"), dtorch.DeviceMesh("cuda:1")
    calls: list[tuple[Callable[[], dtorch.Tensor], dtorch.DeviceMesh]] = [
        (t.cuda, one),
        (lambda: t.to("cuda:1"), two),
        (lambda: dtorch.zeros(3, 2, device="cuda", graph=graph), one),
        (lambda: dtorch.from_torch(full, device_mesh=cuda, graph=graph), cuda),
    ]
    for call, mesh in calls:
        if graph.satisfy(mesh):
            assert call().cpu().to_torch().shape == full.shape
        else:
            with pytest.raises(MeshError, match=r"cannot run on DeviceMesh\('cuda'.*accepted"):
                call()
    assert torch.equal(t.to_torch(), full)  # the graph goes on after the refusals


def test_function_forms_of_methods_equal_torchs(graph: dtorch.Graph) -> None:
    """``dtorch.prod``, ``log_softmax``, ``split``, ``narrow``, ``tril``/``triu``, ``t``,
    ``logical_not``, ``detach``, ``numel``, ``is_floating_point`` as torch's functions."""
    x = torch.arange(1.0, 13.0).reshape(3, 4)
    t = dtorch.from_torch(x, device_mesh=_mesh((2,)), placements=[Shard(0)], graph=graph)
    pairs: list[tuple[Any, Any]] = [
        (dtorch.prod(t, 1), torch.prod(x, 1)),
        (dtorch.log_softmax(t, 1), torch.log_softmax(x, 1)),
        (dtorch.narrow(t, 1, 1, 2), torch.narrow(x, 1, 1, 2)),
        (dtorch.tril(t), torch.tril(x)),
        (dtorch.triu(t, 1), torch.triu(x, 1)),
        (dtorch.t(t), torch.t(x)),
        (dtorch.logical_not(t), torch.logical_not(x)),
        (dtorch.detach(t), torch.detach(x)),
        *zip(dtorch.split(t, 2, 1), torch.split(x, 2, 1), strict=True),
    ]
    for got, want in pairs:
        torch.testing.assert_close(got.to_torch(), want)
    assert dtorch.numel(t) == torch.numel(x) and dtorch.is_floating_point(t)


def test_autograd_attributes_answer_as_torch_under_no_grad(graph: dtorch.Graph) -> None:
    """Inference code reads ``requires_grad``, ``grad``, ``grad_fn``, ``is_leaf`` and turns
    gradients off; dtorch records none: a tensor answers as torch's made under no_grad
    (the attributes were missing), and turning gradients on is refused."""
    with torch.no_grad():
        want = torch.ones(2) * 2
    t = dtorch.ones(2) * 2
    for name in ("requires_grad", "grad", "grad_fn", "is_leaf"):
        assert getattr(t, name) == getattr(want, name), name
    assert t.requires_grad_(False) is t
    with pytest.raises(
        dtorch.DTorchError, match=r"requires_grad_\(True\): dtorch computes no gradients"
    ):
        t.requires_grad_()
    p = dtorch.nn.Parameter(dtorch.ones(2))  # keeps its own flag
    assert p.requires_grad and p.requires_grad_(False) is p and not p.requires_grad


def test_new_methods_take_torch_s_keywords(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.ones(4, device_mesh=mesh, placements=[dtorch.Shard(0)])
    one = dtorch.DeviceMesh("cpu")
    on_one = t.new_tensor(2.5, device="cpu")  # torch.nn.init.trunc_normal_ reads bounds so
    assert on_one.device_mesh == one and on_one.item() == 2.5
    strict = {"requires_grad": False, "layout": torch.strided, "pin_memory": False}
    for made in (t.new_zeros(2, **strict), t.new_ones((2,), device=None), t.new_empty(2, **strict)):
        assert made.device_mesh == mesh and made.placements == [dtorch.Replicate()]
    assert t.new_full((2,), 3, device="cpu").device_mesh == one
    copied = t.new_tensor(t, device="cpu", dtype=torch.float64)
    assert copied.device_mesh == one and copied.dtype == torch.float64
    assert copied.tolist() == [1.0] * 4
    partial = dtorch.from_torch(torch.tensor([1.2, -2.7]), device_mesh=mesh, placements=[P])
    for device in (None, "cpu"):  # the parts are summed before the cast, as torch's value
        made = t.new_tensor(partial, dtype=torch.int64, device=device)
        assert made.tolist() == torch.tensor([1.2, -2.7]).to(torch.int64).tolist()
    with pytest.raises(ValueError, match="requires_grad=True is not supported"):
        t.new_zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"unexpected keyword\(s\) \['memory'\]; accepted: dtype"):
        t.new_ones(2, memory=1)


@pytest.mark.parametrize("value", [1 + 2j, 3 + 0j, 2.5, 3, True])
def test_python_number_protocols_as_torch(value: Any, graph: dtorch.Graph) -> None:
    """``bool``/``int``/``float``/``complex`` of a one-element tensor give torch's numbers;
    a complex value with an imaginary part refuses ``int``/``float`` with torch's message (a
    RuntimeError); ``complex()`` of a complex tensor works (it raised TypeError)."""
    full = torch.tensor(value)
    t = place(full, dtorch.init_device_mesh("cpu", 2), [Replicate()], graph)
    for convert in (bool, int, float, complex):
        try:
            want = convert(full)
        except RuntimeError as error:
            with pytest.raises(RuntimeError, match=re.escape(str(error))):
                convert(t)
            continue
        got = convert(t)
        assert type(got) is type(want) and got == want, convert


def test_long_tail_of_tensor_methods_as_torch(graph: dtorch.Graph) -> None:
    """Methods and keyword spellings torch users call: ``stride`` (row-major, as DTorch's
    ``is_contiguous()`` True says), ``storage_offset``, ``is_same_size``, ``is_nonzero``,
    ``detach_``, ``narrow_copy``, ``reversed``, a ``range`` index, ``new_zeros(size=)``,
    ``tile(dims=)``, ``sum_to_size(size=)``, ``aminmax(axis=)``, ``to(memory_format=)``."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(24.0).reshape(2, 3, 4)
    t = place(full, mesh, [Shard(1)], graph)
    assert t.stride() == full.stride() and t.stride(-2) == full.stride(-2)
    assert t.storage_offset() == 0 and t.is_same_size(place(full, mesh, [Replicate()], graph))
    with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no dimensions"):
        place(torch.tensor(1.0), mesh, [Replicate()], graph).stride(0)
    assert place(torch.tensor([2]), mesh, [Replicate()], graph).is_nonzero()
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        t.is_nonzero()
    assert t.detach_() is t
    pairs = [
        (t.narrow_copy(2, 1, 2), full.narrow_copy(2, 1, 2)),
        (reversed(t), reversed(full)),
        (t[range(1, 2)], full[range(1, 2)]),
        (t[:, range(2)], full[:, range(2)]),
        (t.new_zeros(size=(2, 1)), full.new_zeros(size=(2, 1))),
        (t.new_ones(size=[3]), full.new_ones(size=[3])),
        (t.tile(dims=(2, 1, 1)), full.tile(dims=(2, 1, 1))),
        (t.sum_to_size(size=(1, 3, 4)), full.sum_to_size(size=(1, 3, 4))),
        (t.aminmax(axis=1).max, full.aminmax(axis=1).max),
        (
            t.to(memory_format=torch.contiguous_format),
            full.to(memory_format=torch.contiguous_format),
        ),
    ]
    for got, want in pairs:
        assert got.shape == want.shape and torch.equal(got.to_torch(), want)
    with pytest.raises(RuntimeError, match=r"memory_format=torch\.channels_last is not supported"):
        t.unsqueeze(0).to(memory_format=torch.channels_last)
