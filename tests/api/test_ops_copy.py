"""``clone``, ``copy_``, ``detach`` and dtype conversions (``to(dtype)``, ``type_as``, ``half
bfloat16 float double bool byte char short int long``, ``cpu``) through the public API against
torch, on 1-D, 2-D and 3-D meshes, even and uneven shards, every layout on 1-D meshes (a seeded
sample on the larger ones), with output placements and rejections: Partial survives a cast only
where converting each partial value and summing equals converting the sum; ``dst.copy_(src)``
writes dst's own shards, so dst's layout never changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import dtorch
from dtorch.errors import MeshError, ParamError, PlacementError, ShapeError
from tests.api.ops_harness import (
    ALL_MESHES,
    S0,
    P,
    R,
    choices,
    elementwise_table,
    limit_for,
    place,
    run_api,
)
from tests.simulate import layout_combos

pytestmark = pytest.mark.timeout(60)

_G = torch.Generator().manual_seed(303)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test draws the same values whichever tests ran before it."""
    _G.manual_seed(303)


def _values(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    x = torch.randn(shape, generator=_G) * 4
    return x > 0 if dtype == torch.bool else x.to(dtype)


def _layout_table(ndim: int, partial: bool) -> dict[tuple[Any, ...], Any]:
    table: dict[tuple[Any, ...], Any] = {(p,): p for p in choices(ndim, partial=False)}
    return {**table, (P,): P} if partial else table


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_clone_and_detach_every_layout(mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    x = torch.randn((5, 3), generator=_G)
    table = _layout_table(2, partial=True)
    for name, call in (("clone", lambda t: t.clone()), ("clone", dtorch.clone)):
        run_api(
            graph, name, call, [x], mesh_shape, [x.clone()], table=table,
            limit=limit_for(mesh_shape, n_d=16),
        )  # fmt: skip
    run_api(graph, "detach", lambda t: t.detach(), [x], mesh_shape, [x], table=table, limit=8)


def test_clone_is_a_new_value(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.randn((4, 3), generator=_G)
    t = place(x, mesh, [S0], graph)
    c = t.clone()
    t[0] = 5.0
    assert torch.equal(c.to_torch(), x) and c.id != t.id
    d = t.detach()
    assert d.id == t.id and torch.equal(d.to_torch()[0], torch.full((3,), 5.0))


_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64,
           torch.int32, torch.int8, torch.uint8, torch.bool]  # fmt: skip


_WIDENING = {
    (torch.bfloat16, torch.float32), (torch.bfloat16, torch.float64),
    (torch.float16, torch.float32), (torch.float16, torch.float64),
    (torch.float32, torch.float64),
}  # fmt: skip


def _linear(src: torch.dtype, dst: torch.dtype) -> bool:
    """Converting partial values and summing equals converting the sum: integers to integers
    no wider (the parts wrap in the source's width: a wider integer or a float would not),
    floats to a float that holds every value of the source (any other conversion rounds each
    part, and parts that cancel lose it all); never bool."""
    if src == dst:
        return True
    if torch.bool in (src, dst):
        return False
    if src.is_floating_point:
        return (src, dst) in _WIDENING
    return not dst.is_floating_point and dst.itemsize <= src.itemsize


#: Every conversion method and the dtype it converts to.
_METHODS: list[tuple[Callable[..., Any], torch.dtype]] = [
    (lambda t: t.half(), torch.float16),
    (lambda t: t.bfloat16(), torch.bfloat16),
    (lambda t: t.float(), torch.float32),
    (lambda t: t.double(), torch.float64),
    (lambda t: t.bool(), torch.bool),
    (lambda t: t.byte(), torch.uint8),
    (lambda t: t.char(), torch.int8),
    (lambda t: t.short(), torch.int16),
    (lambda t: t.int(), torch.int32),
    (lambda t: t.long(), torch.int64),
]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize("src", _DTYPES, ids=str)
def test_casts_every_layout(src: torch.dtype, mesh_shape: tuple[int, ...], graph) -> None:  # type: ignore[no-untyped-def]
    """``to(dtype)`` to every dtype and the named methods: torch's values; Partial kept where
    the conversion is linear, refused (naming ``to``) where it is not."""
    x = _values(src, 5, 3)
    combos = layout_combos(len(mesh_shape), [x], limit=limit_for(mesh_shape, n_d=6), seed=3)
    if src != torch.bool and P not in [p for c in combos for p in c[0]]:
        combos.append(((P,) * len(mesh_shape),))
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    assert place(x, mesh, [R] * len(mesh_shape), graph).is_floating_point() == src.is_floating_point
    for call, dst in [*((lambda t, d=d: t.to(d), d) for d in _DTYPES), *_METHODS]:
        table = _layout_table(2, partial=_linear(src, dst))
        run_api(
            graph, "to", call, [x], mesh_shape, [x.to(dst)], table=table, combos=combos,
        )  # fmt: skip


def test_to_forms_type_as_and_cpu(graph: dtorch.Graph) -> None:
    """``to(dtype=...)``, ``to(device, dtype)``, ``type_as``; ``to`` of the same dtype is the
    same handle (like torch); ``cpu()`` of a CPU tensor keeps its mesh and layout (like torch,
    where it is a no-op)."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.randn((5, 3), generator=_G) * 3
    t = place(x, mesh, [S0, P], graph)
    other = place(torch.ones(2, dtype=torch.float64), mesh, [R, R], graph)
    assert t.to(torch.float32) is t and t.float() is t
    for out, want in (
        (t.to(dtype=torch.float64), x.double()),
        (t.type_as(other), x.double()),
        (t.to(mesh, torch.float64), x.double()),
        (t.to(mesh), x),
        (t.cpu(), x),
    ):
        assert out.dtype == want.dtype and out.placements == [S0, P]
        assert out.device_mesh == mesh
        assert torch.equal(out.to_torch(), want)
    with pytest.raises(TypeError, match=r"^type_as: expected a dtorch\.Tensor"):
        t.type_as("float")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^to: unexpected keyword"):
        t.to(layout=torch.strided)
    assert t.to(memory_format=torch.contiguous_format) is t  # torch's keyword: no change


_COPY_SHAPES = [((5, 3), (5, 3)), ((5, 3), (3,)), ((5, 3), (5, 1))]


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
@pytest.mark.parametrize(("dst_shape", "src_shape"), _COPY_SHAPES)
@pytest.mark.parametrize("src_dtype", [torch.float32, torch.float64, torch.int64], ids=str)
def test_copy_every_layout(  # type: ignore[no-untyped-def]
    src_dtype, dst_shape, src_shape, mesh_shape, graph
) -> None:
    """``dst.copy_(src)`` (broadcasting and converting src) returns dst with dst's layout and
    src's values; a Replicate dst with a sharded src is refused (dst is never redistributed)."""
    dst = torch.randn(dst_shape, generator=_G)
    src = (torch.randn(src_shape, generator=_G) * 3).to(src_dtype)
    want = dst.clone().copy_(src)
    partial = {(P, P): P} if _linear(src_dtype, dst.dtype) else {}
    table = elementwise_table([dst_shape, src_shape], partial, fixed=[0])

    def copy(d: Any, s: Any) -> Any:
        out = d.copy_(s)
        assert out is d
        return out

    run_api(
        graph, "copy_", copy, [dst, src], mesh_shape, [want], table=_dst_layout(table),
        limit=limit_for(mesh_shape, n_d=12),
    )  # fmt: skip


def _dst_layout(table: dict[Any, Any]) -> dict[Any, Any]:
    """copy_'s result is dst itself: its placement on the mesh dim is dst's own."""
    return {row: row[0] for row in table}


def test_a_narrowing_cast_of_a_partial_is_refused(graph: dtorch.Graph) -> None:
    """Parts that cancel: each rounded to bfloat16 on its own, the sum would be 0.0 where
    torch, rounding the sum, gives 1.296875 (dtorch kept the Partial and gave 0.0)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    a, b = torch.tensor([[1000.3, -999.0]]), torch.ones(2, 1)
    p = place(a, mesh, [dtorch.Shard(1)], graph) @ place(b, mesh, [S0], graph)
    assert p.placements == [P]
    for dtype in (torch.bfloat16, torch.float16):
        with pytest.raises(PlacementError, match="Partial survives"):
            p.to(dtype)
        want = (a @ b).to(dtype)
        got = p.redistribute(mesh, [R]).to(dtype).to_torch()
        assert torch.equal(got, want)
    assert torch.equal(p.double().to_torch(), (a.double() @ b.double()).float().double())


def test_an_inexact_integer_cast_of_a_partial_is_refused(graph: dtorch.Graph) -> None:
    """Integer parts rounded each: 257 - 256 in bfloat16 parts is 0, 70000 - 69999 in float16
    overflows to nan, 2**30 + 1 - 2**30 in float32 is 0; torch converts the sum, 1."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.tensor([[257, -256], [70000, -69999], [2**30 + 1, -(2**30)]])
    ones = torch.ones(2, dtype=torch.int64)
    p = place(full, mesh, [dtorch.Shard(1)], graph) @ place(ones, mesh, [S0], graph)
    assert p.placements == [P]
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        with pytest.raises(PlacementError, match="Partial survives"):
            p.to(dtype)  # int64 fits no float exactly (float64 holds integers to 2**53)
        assert torch.equal(p.redistribute(mesh, [R]).to(dtype).to_torch(), (full @ ones).to(dtype))
    small = torch.tensor([[3, -2]], dtype=torch.int16)
    q = place(small, mesh, [dtorch.Shard(1)], graph) @ place(
        torch.ones(2, dtype=torch.int16), mesh, [S0], graph
    )
    assert q.placements == [P]
    with pytest.raises(PlacementError, match="Partial survives"):
        q.float()  # int16 parts wrap at 16 bits, float32 parts would not
    narrower = q.to(torch.int8)  # wrapping at 8 bits is wrapping at 16 bits, then at 8
    assert narrower.placements == [P]
    assert torch.equal(
        narrower.to_torch(), (small @ torch.ones(2, dtype=torch.int16)).to(torch.int8)
    )


def test_an_integer_partial_that_wraps_converts_as_its_value(graph: dtorch.Graph) -> None:
    """uint8 parts 200 and 100 hold 44 (the sum wraps at 8 bits): widening each part gave
    300. Widening and float casts of an integer Partial are refused; ``sum``, whose int64
    result widens, too; narrowing keeps the Partial and its value."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    parts = torch.tensor([[200, 7], [100, 9]], dtype=torch.uint8)
    p = place(parts, mesh, [S0], graph).sum(0, dtype=torch.uint8)
    assert p.placements == [P]
    full = parts.sum(0, dtype=torch.uint8)
    for widen in (lambda t: t.to(torch.int64), lambda t: t.float(), lambda t: t.sum()):
        with pytest.raises(PlacementError):
            widen(p)
        assert torch.equal(widen(p.redistribute(mesh, [R])).to_torch(), widen(full))
    assert torch.equal(p.to(torch.int8).to_torch(), full.to(torch.int8))


def test_copy_nonlinear_partial_names_copy(graph: dtorch.Graph) -> None:
    """Copying Partial floats into a Partial int tensor does not add up: refused, and the
    message names ``copy_`` (the operator the user called)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    dst = place(torch.zeros(4, 3, dtype=torch.int64), mesh, [P], graph)
    src = place(torch.randn((4, 3), generator=_G), mesh, [P], graph)
    with pytest.raises(PlacementError, match=r"^copy_: got \(P,\) x \(P,\).*accepted"):
        dst.copy_(src)


def test_setitem_of_partial_values_across_dtypes_as_copy(graph: dtorch.Graph) -> None:
    """``t[s] = v`` of a Partial ``v`` into a Partial ``t`` converts each part, as ``copy_``
    would: where that does not add up (float into int, float32 into bfloat16) it is refused
    as ``copy_`` refuses it; it stored int(-2.0) + int(1.25) = -1 where torch has int(-0.75)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    parts = place(torch.tensor([1.25]), mesh, [R], graph).view([P])
    value = parts - place(torch.tensor([3.25]), mesh, [P], graph)  # parts -2.0 and 1.25
    for dtype in (torch.int64, torch.bfloat16):
        dst = place(torch.zeros(2, dtype=dtype), mesh, [P], graph)
        with pytest.raises(PlacementError, match=r"^setitem: got \(P,\) x \(P,\).*does not add"):
            dst[0:1] = value
        assert torch.equal(dst.to_torch(), torch.zeros(2, dtype=dtype))  # unchanged
    same = place(torch.zeros(2), mesh, [P], graph)
    same[0:1] = value
    assert torch.equal(same.to_torch(), torch.tensor([-0.75, 0.0]))
    narrower = place(torch.zeros(2, dtype=torch.int32), mesh, [P], graph)
    narrower[1:2] = place(torch.tensor([3], dtype=torch.int64), mesh, [P], graph)  # wraps alike
    assert torch.equal(narrower.to_torch(), torch.tensor([0, 3], dtype=torch.int32))
    wider = place(torch.zeros(2, dtype=torch.int64), mesh, [P], graph)
    with pytest.raises(PlacementError, match="does not add"):  # int32 parts wrap at 32 bits
        wider[1:2] = place(torch.tensor([3], dtype=torch.int32), mesh, [P], graph)


def test_copy_rejections(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    dst = place(torch.zeros(4, 3), mesh, [R], graph)
    with pytest.raises(PlacementError) as info:
        dst.copy_(place(torch.ones(4, 3), mesh, [S0], graph))
    text = str(info.value)
    assert text.startswith("copy_: got (R,) x (S(0),) on mesh (2,); accepted per mesh dimension")
    assert "redistribute src to dst's placements" in text
    with pytest.raises(ShapeError, match=r"^copy_: shapes \[4, 3\] x \[4, 4\] do not broadcast"):
        dst.copy_(place(torch.ones(4, 4), mesh, [R], graph))
    assert torch.equal(dst.to_torch(), torch.zeros(4, 3))  # refused calls changed nothing


@pytest.mark.parametrize("value", [2.5, -3, True])
def test_copy_of_a_number_fills_as_torch_does(value: Any, graph: dtorch.Graph) -> None:
    """``t.copy_(2.5)``: torch takes the number as a 0-d tensor (dtorch refused it)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    for dtype in (torch.float32, torch.int32):
        want = torch.zeros(5, 3, dtype=dtype).copy_(value)
        dst = place(torch.zeros(5, 3, dtype=dtype), mesh, [S0], graph)
        assert dst.copy_(value) is dst
        assert torch.equal(dst.to_torch(), want)
        assert dst.placements == [S0]


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 3), (2, 2, 2)])
@pytest.mark.parametrize(("dst_shape", "src_shape"), _COPY_SHAPES)
def test_copy_of_a_torch_tensor_writes_every_layout(
    dst_shape: tuple[int, ...], src_shape: tuple[int, ...], mesh_shape: tuple[int, ...],
    graph: dtorch.Graph,
) -> None:  # fmt: skip
    """``weight.data.copy_(pretrained)``: a torch source, broadcast and cast as torch's
    copy_ does, written into dst's own layout (dtorch refused it)."""
    from tests.simulate import layouts

    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    src = torch.randn(src_shape, generator=_G, dtype=torch.float64)
    for placements in layouts(len(mesh_shape), len(dst_shape))[:12]:
        dst_full = torch.randn(dst_shape, generator=_G)
        want = dst_full.clone().copy_(src)
        dst = place(dst_full, mesh, placements, graph)
        assert dst.copy_(src) is dst
        assert dst.placements == list(placements)
        torch.testing.assert_close(dst.to_torch(), want, rtol=0, atol=0)
    with pytest.raises(RuntimeError):  # torch's own refusal of a shape that does not broadcast
        place(torch.zeros(dst_shape), mesh, [R] * len(mesh_shape), graph).copy_(torch.ones(4, 4))


def test_masked_fill_takes_a_zero_dim_dtorch_tensor(graph: dtorch.Graph) -> None:
    """A 0-d dtorch tensor as the value, as torch takes a 0-d tensor (it was refused with
    "expected a dtorch.Tensor or a number, got Tensor"); its dtype is the input's; a value
    with dimensions is refused as torch refuses it."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(10).view(5, 2)
    for dtype in (torch.float32, torch.int64):
        x = place(full.to(dtype), mesh, [S0], graph)
        value = dtorch.tensor(7.5, device_mesh=mesh, graph=graph)
        want = full.to(dtype).masked_fill(full > 4, torch.tensor(7.5))
        got = x.masked_fill(x > 4, value)
        assert got.dtype == want.dtype and torch.equal(got.to_torch(), want)
        assert x.masked_fill_(x > 4, value) is x
        assert torch.equal(x.to_torch(), want) and x.placements == [S0]
    with pytest.raises(RuntimeError, match="only supports a 0-dimensional value tensor"):
        x.masked_fill(x > 4, dtorch.ones(2, device_mesh=mesh, graph=graph))


@pytest.mark.parametrize(
    "placements", [[dtorch.Shard(0)], [dtorch.Shard(1)], [dtorch.Replicate()]], ids=str
)
def test_clone_memory_formats_lay_the_copy_out_as_torch(
    graph: dtorch.Graph, placements: list[dtorch.Placement]
) -> None:
    """``clone(memory_format=torch.contiguous_format)`` of a transpose is row-major: a
    ``view(-1)`` of it shares its memory, as torch's does (on a replicated tensor: a view
    of a shard is refused); neither copy shares memory with the input."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(12.0).reshape(4, 3)
    t = dtorch.from_torch(full, device_mesh=mesh, placements=placements, graph=graph)
    row_major = t.T.clone(memory_format=torch.contiguous_format)
    want = full.T.clone(memory_format=torch.contiguous_format)
    assert want.is_contiguous() and torch.equal(row_major.to_torch(), want)
    if placements == [dtorch.Replicate()]:
        row_major.view(-1)[1] = 100.0
        want.view(-1)[1] = 100.0
        assert torch.equal(row_major.to_torch(), want)
    row_major.add_(1)
    assert torch.equal(t.to_torch(), full)
    copy = dtorch.clone(t, memory_format=torch.contiguous_format)
    assert torch.equal(copy.to_torch(), full)


def test_copy_formats_and_flags_take_torchs_keywords(graph: dtorch.Graph) -> None:
    """torch's keywords of the copies: ``copy_(src, non_blocking)``, ``contiguous``/
    ``cpu``/``cuda``'s ``memory_format``, ``cuda``'s device forms; channels-last and
    non-format values are refused, saying what is accepted."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = dtorch.from_torch(torch.arange(4.0), device_mesh=mesh, placements=[dtorch.Shard(0)])
    target = dtorch.zeros(4, device_mesh=mesh, placements=[dtorch.Shard(0)])
    assert target.copy_(t, non_blocking=True) is target and target.copy_(t, False) is target
    assert torch.equal(target.to_torch(), torch.arange(4.0))
    assert torch.equal(
        t.contiguous(memory_format=torch.contiguous_format).to_torch(), torch.arange(4.0)
    )
    assert t.cpu(memory_format=torch.preserve_format) is t
    with pytest.raises(TypeError):  # keyword-only, as torch's
        t.cpu(torch.preserve_format)
    with pytest.raises(ParamError, match=r"accepted: torch\.preserve_format, torch\.contig"):
        t.contiguous(memory_format=torch.channels_last)
    # preserve_format: torch takes it where no copy is needed and refuses it where one is
    assert torch.equal(t.contiguous(memory_format=torch.preserve_format).to_torch(), t.to_torch())
    square = dtorch.from_torch(torch.ones(2, 2), device_mesh=mesh)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        torch.ones(2, 2).T.contiguous(memory_format=torch.preserve_format)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        square.T.contiguous(memory_format=torch.preserve_format)
    assert torch.equal(t.clone(memory_format=None).to_torch(), t.to_torch())  # torch's None
    with pytest.raises(TypeError, match=r"memory_format must be a torch\.memory_format"):
        t.clone(memory_format="contiguous")
    with pytest.raises(MeshError, match="must be a cuda device"):
        t.cuda("cpu")
    if not torch.cuda.is_available():  # every CUDA form names the device it cannot reach
        for device in ("cuda:0", torch.device("cuda", 0), 0):
            with pytest.raises(MeshError, match=r"DeviceMesh\('cuda', \[0\]\)"):
                t.cuda(device, non_blocking=True)


@pytest.mark.parametrize("name", ["float", "double", "half", "int"])
def test_cast_methods_take_torchs_memory_format(name: str, graph: dtorch.Graph) -> None:
    """``t.float(memory_format=torch.contiguous_format)`` of a transpose is row-major: a
    ``view(-1)`` of it shares its memory, as torch's does; ``preserve_format`` keeps the
    values; channels-last is refused (the keyword was refused)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    full = torch.arange(6).view(2, 3)
    t = dtorch.from_torch(full, device_mesh=mesh, graph=graph)
    kept = getattr(t.T, name)(memory_format=torch.preserve_format)
    assert torch.equal(kept.to_torch(), getattr(full.T, name)())
    row_major = getattr(t.T, name)(memory_format=torch.contiguous_format)
    want = getattr(full.T, name)(memory_format=torch.contiguous_format)
    row_major.view(-1)[0] = 9
    want.view(-1)[0] = 9
    assert torch.equal(row_major.to_torch(), want) and torch.equal(t.to_torch(), full)
    with pytest.raises(ParamError, match="channels_last is not supported"):
        getattr(t, name)(memory_format=torch.channels_last)
