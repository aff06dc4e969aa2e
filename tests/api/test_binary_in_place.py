"""In-place binary arithmetic (``add_``, ``t += x``, ``mul_``, ``div_``, ...) as one operator
whose devices write the tensor's shards, against torch: wherever the result has the tensor's
dtype, shape and placements the call records one BroadcastBinary and no write-back Copy, and
the tensor, an alias and a view taken before hold torch's values on every layout of a 1-D and
a 2-D mesh (uneven shards too), beside every kind of other operand; elsewhere the result is
written back as before (a cast, a redistribution back) or refused as torch refuses it, and
nothing changes. An operand sharing the tensor's memory is read before the write; a failed
tensor stays failed; a traced program writes its in-place targets back."""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import ParamError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import BinaryKind, OpKind
from dtorch.ir.params import BroadcastBinaryParam, ClampParam
from dtorch.ir.placement import Replicate, Shard
from dtorch.ir.rules.elementwise import binary_rule
from dtorch.ir.rules.select import clamp_rule
from dtorch.ir.scalar import Scalar
from tests.api.ops_harness import S0, S1, P, R, place

pytestmark = pytest.mark.timeout(180)

_G = torch.Generator().manual_seed(11)

Fn = Callable[[Any, Any], Any]

#: name, the call on a target and an operand (the same spelling in torch and dtorch).
_CALLS: list[tuple[str, Fn]] = [
    ("+=", operator.iadd),
    ("-=", operator.isub),
    ("*=", operator.imul),
    ("/=", operator.itruediv),
    ("add_ alpha", lambda t, o: t.add_(o, alpha=3)),
    ("sub_ alpha", lambda t, o: t.sub_(o, alpha=2)),
    ("div_ floor", lambda t, o: t.div_(o, rounding_mode="floor")),
    ("div_ trunc", lambda t, o: t.div_(o, rounding_mode="trunc")),
    ("//=", operator.ifloordiv),
    ("%=", operator.imod),
    ("**=", operator.ipow),
    ("&=", operator.iand),
    ("^=", operator.ixor),
]

#: target dtype, other operand's dtype (a tensor operand's; numbers follow the target's kind).
_DTYPES = [
    (torch.float32, torch.float32),
    (torch.float64, torch.int64),
    (torch.float16, torch.float16),
    (torch.bfloat16, torch.float32),
    (torch.int64, torch.int32),
]


def _values(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Values every call takes: no zero divisor, small powers."""
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=_G) * 2 + 0.5).to(dtype)
    return torch.randint(1, 5, shape, generator=_G).to(dtype)


def _others(dtype: torch.dtype) -> list[tuple[str, Any, Callable[[DeviceMesh, Any], Any]]]:
    """label, torch's operand, and dtorch's from a mesh and the target's layout: a tensor
    laid out as the target, a Replicate broadcast row, a number, a 0-d torch tensor."""
    full, row = _values((5, 8), dtype), _values((4,), dtype)
    number = 2 if not dtype.is_floating_point else 1.5
    zero_d = torch.tensor(3, dtype=dtype)
    index = (slice(1, None), slice(None, None, 2))
    return [
        ("tensor", full[index], lambda mesh, layout: place(full, mesh, layout, None)[index]),
        ("row", row, lambda mesh, layout: place(row, mesh, [R] * mesh.ndim, None)),
        ("number", number, lambda mesh, layout: number),
        ("0-d", zero_d, lambda mesh, layout: zero_d),
    ]


def _torch_after(call: Fn, base: torch.Tensor, index: Any, other: Any) -> torch.Tensor | None:
    """torch's base after the call on its view ``index`` (None: torch refuses it)."""
    want = base.clone()
    try:
        call(want[index], other)
    except RuntimeError:
        return None
    return want


@pytest.mark.parametrize(("name", "call"), _CALLS, ids=[c[0] for c in _CALLS])
def test_in_place_binary_writes_the_tensor_and_its_views(  # type: ignore[no-untyped-def]
    name, call, graph
) -> None:
    """On a strided view of each layout (uneven shards: 5 rows over 2 devices): the same
    handle back, torch's values in the base, an alias and the view; torch's refusals refused
    with nothing changed."""
    for mesh_shape, layouts in (((2,), [[R], [S0], [S1]]), ((2, 2), [[S0, S1], [S1, R]])):
        mesh = dtorch.init_device_mesh("cpu", mesh_shape)
        for dtype, other_dtype in _DTYPES:
            base = _values((5, 8), dtype)
            index = (slice(1, None), slice(None, None, 2))
            for label, torch_other, make_other in _others(other_dtype):
                want = _torch_after(call, base, index, torch_other)
                for layout in layouts:
                    context = f"{name} {dtype} {label} {layout} on {mesh_shape}"
                    t, dtorch_other = place(base, mesh, layout, graph), make_other(mesh, layout)
                    alias, view = t, t[index]
                    if want is None:
                        with pytest.raises((RuntimeError, TypeError)):
                            call(view, dtorch_other)
                        assert torch.equal(t.to_torch(), base), context
                        continue
                    assert call(view, dtorch_other) is view, context
                    assert t.placements == layout, context
                    assert torch.equal(alias.to_torch(), want), context
                    assert torch.equal(view.to_torch(), want[index]), context


def _in_place(kinds_seen: list[Any]) -> list[bool]:
    return [getattr(param, "in_place", None) for param in kinds_seen]


def test_one_operator_where_the_result_is_the_tensor_s(
    graph: dtorch.Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``+=`` of a tensor sharded alike, ``*=`` a number, ``add_`` with alpha: one in-place
    BroadcastBinary each; a Replicate tensor plus a sharded one, a float16 tensor plus a
    float32 one: the operator and its result written back (a redistribution and a Copy)."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    seen: list[Any] = []
    submit = graph.executor.submit
    monkeypatch.setattr(
        graph.executor, "submit", lambda item: (seen.append(item[0].param), submit(item))[1]
    )
    full, other = torch.randn(6, 4, generator=_G), torch.randn(6, 4, generator=_G)
    t, o = place(full, mesh, [S0], graph), place(other, mesh, [S0], graph)
    seen.clear()
    t += o
    t *= 2
    t.add_(o, alpha=0.5)
    t.div_(o, rounding_mode="floor")
    assert [p.kind for p in seen] == [OpKind.BroadcastBinary] * 4 and all(_in_place(seen))
    assert torch.equal(
        t.to_torch(), torch.div((full + other) * 2 + other * 0.5, other, rounding_mode="floor")
    )
    r = place(full, mesh, [R], graph)
    seen.clear()
    r += o
    assert _in_place([p for p in seen if p.kind is OpKind.BroadcastBinary]) == [False]
    assert seen[-1].kind is OpKind.Copy and r.placements == [Replicate()]
    assert torch.equal(r.to_torch(), full + other)
    h = place(full.half(), mesh, [S0], graph)
    seen.clear()
    h += o
    assert _in_place(seen) == [False, None] and seen[-1].kind is OpKind.Copy
    assert torch.equal(h.to_torch(), (full.half() + other).half())


def test_partial_targets_stay_partial(graph: dtorch.Graph) -> None:
    """A Partial times a number and a Partial plus a Partial are written in place, parts
    and all; the sum of the parts is torch's."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    full = torch.randn(4, 3, generator=_G)
    p, q = place(full, mesh, [P], graph), place(full * 3, mesh, [P], graph)
    p *= 2
    p += q
    assert p.placements[0].is_partial()
    assert torch.allclose(p.to_torch(), full * 2 + full * 3)


def test_an_operand_sharing_the_tensor_s_memory_is_read_first(graph: dtorch.Graph) -> None:
    """``t[:, 1:] += t[:, :-1]`` (torch refuses it for the whole tensor: the two overlap)
    reads the operand whole before writing, as the operator and its write-back did;
    ``t += t`` and ``t[:, :4] *= t[:, 4:]`` (no overlap) are torch's."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    full = torch.arange(32.0).view(4, 8)
    for layout in ([R], [S0]):
        t = place(full, mesh, layout, graph)
        t[:, 1:] += t[:, :-1]
        want = full.clone()
        want[:, 1:] = full[:, 1:] + full[:, :-1]
        assert torch.equal(t.to_torch(), want), layout
        t += t
        want += want
        t[:, :4] *= t[:, 4:]
        want[:, :4] *= want[:, 4:]
        assert torch.equal(t.to_torch(), want), layout


def test_a_failed_tensor_stays_failed(graph: dtorch.Graph) -> None:
    """``//=`` by a zero divisor on one device fails the tensor and its views, named after
    the operator; a tensor failed upstream stays failed after ``+= 1``; a good one changes."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.tensor([[5, 6], [7, 8]])
    for divisor in (torch.tensor([[1, 2], [1, 2]]), torch.tensor([[1, 1], [0, 1]])):
        t = place(x, mesh, [S0], graph)
        view = t[:, 1:]
        t //= place(divisor, mesh, [S0], graph)
        t += 1
        if divisor.all():
            assert t.tolist() == (x // divisor + 1).tolist()
            assert view.tolist() == (x // divisor + 1)[:, 1:].tolist()
            continue
        for failed in (t, view):
            with pytest.raises(dtorch.DTorchError, match="floor_divide_"):
                failed.to_torch()


@pytest.mark.parametrize("profiled", [False, True], ids=["plan", "contexts"])
def test_traced_in_place_arithmetic_writes_back(graph: dtorch.Graph, profiled: bool) -> None:
    """A traced function that adds to its input and scales a closure's tensor in place:
    each replay writes both back, as the eager calls do (the compiled plan, and the
    stream's per-operator contexts under a profile)."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    w_full = torch.randn(4, 2, generator=_G)
    w = place(w_full, mesh, [S0], graph)

    def fn(t: dtorch.Tensor) -> dtorch.Tensor:
        t += 1
        w.mul_(0.5)
        return t * 2

    program = dtorch.trace(fn, place(torch.zeros(4, 2), mesh, [S1], graph))
    want_w = w_full * 0.5  # tracing ran the function once
    with dtorch.profile(graph) if profiled else contextlib.nullcontext():
        for _ in range(2):
            full = torch.randn(4, 2, generator=_G)
            x = place(full, mesh, [S1], graph)
            out = program(x)
            want_w *= 0.5
            assert torch.equal(x.to_torch(), full + 1)
            assert torch.equal(w.to_torch(), want_w)
            assert torch.equal(out.to_torch(), (full + 1) * 2)


def test_the_rule_refuses_an_in_place_form_that_does_not_fit() -> None:
    """A program that asks for an in-place BroadcastBinary whose result is not its first
    input's (a float result of an integer tensor, a sharded result of a Replicate one, a
    broadcast that grows it) is refused, so no device writes a shard of another layout."""
    mesh = DeviceMesh("cpu", [0, 1])
    ints = Operand(0, (4, 2), torch.int64, mesh, (Shard(0),))
    floats = Operand(1, (4, 2), torch.float32, mesh, (Shard(0),))
    rep = Operand(2, (4, 2), torch.float32, mesh, (Replicate(),))
    row = Operand(3, (2,), torch.float32, mesh, (Replicate(),))
    add = BroadcastBinaryParam(BinaryKind.ADD, in_place=True)
    for target, other, why in (
        (ints, floats, "dtype"),
        (rep, floats, "placements"),
        (row, rep, "shape"),
    ):
        with pytest.raises(
            ParamError, match=f"cannot write the result in place: the result's {why}"
        ):
            binary_rule("add_", add, (target, other))
    assert binary_rule("add_", add, (floats, floats)).outputs[0].placements == (Shard(0),)
    clamp = ClampParam(Scalar.of(0.5), in_place=True)
    with pytest.raises(ParamError, match=r"in place: the result's dtype torch\.float32 is not"):
        clamp_rule("clamp_", clamp, (ints,))
    assert clamp_rule("clamp_", clamp, (floats,)).outputs[0].dtype == torch.float32


#: name, torch's in-place clamp, dtorch's (the same spelling on dtorch tensors).
_CLAMPS: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = [
    ("clamp_", lambda t: t.clamp_(1.0, 2.0), lambda t: t.clamp_(1.0, 2.0)),
    ("clamp_ min", lambda t: t.clamp_(min=2), lambda t: t.clamp_(min=2)),
    ("clip_ max", lambda t: t.clip_(max=1.5), lambda t: t.clip_(max=1.5)),
    ("clamp_ of ints by floats", lambda t: t.clamp_(0.5, 1.5), lambda t: t.clamp_(0.5, 1.5)),
    (
        "F.hardtanh",
        lambda t: F.hardtanh(t, 1.0, 2.0, inplace=True),
        lambda t: DF.hardtanh(t, 1.0, 2.0, inplace=True),
    ),
    ("F.hardtanh_", lambda t: F.hardtanh_(t, 0.5, 1.5), lambda t: DF.hardtanh_(t, 0.5, 1.5)),
    ("F.relu6", lambda t: F.relu6(t, inplace=True), lambda t: DF.relu6(t, inplace=True)),
    ("nn.ReLU6", torch.nn.ReLU6(inplace=True), dtorch.nn.ReLU6(inplace=True)),
]


@pytest.mark.parametrize(
    ("name", "torch_call", "dtorch_call"), _CLAMPS, ids=[c[0] for c in _CLAMPS]
)
def test_in_place_clamps_write_the_tensor_and_its_views(  # type: ignore[no-untyped-def]
    name, torch_call, dtorch_call, graph
) -> None:
    """``clamp_``, ``clip_``, ``hardtanh_`` and ``relu6``/``hardtanh`` with ``inplace=True`` on
    a strided view of each layout: torch's values in the base, an alias and the view, its
    refusals refused with nothing changed."""
    for mesh_shape, layouts in (((2,), [[R], [S0], [S1]]), ((2, 2), [[S0, S1], [S1, R]])):
        mesh = dtorch.init_device_mesh("cpu", mesh_shape)
        for dtype in (torch.float32, torch.bfloat16, torch.int64):
            base = _values((5, 8), dtype) - 1
            index = (slice(1, None), slice(None, None, 2))
            want = base.clone()
            try:
                torch_call(want[index])
            except RuntimeError:
                want = None
            for layout in layouts:
                context = f"{name} {dtype} {layout} on {mesh_shape}"
                t = place(base, mesh, layout, graph)
                alias, view = t, t[index]
                if want is None:
                    with pytest.raises(RuntimeError):
                        dtorch_call(view)
                    assert torch.equal(t.to_torch(), base), context
                    continue
                dtorch_call(view)
                assert t.placements == layout, context
                assert torch.equal(alias.to_torch(), want), context
                assert torch.equal(view.to_torch(), want[index]), context


def test_an_in_place_clamp_is_one_operator(graph: dtorch.Graph, kinds: list[OpKind]) -> None:
    """``clamp_`` by numbers, ``hardtanh_`` and ``relu6(inplace=True)``: one Clamp each, no
    Copy; ``clamp_`` by a tensor bound: the operators and the write-back, as before."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    full = torch.randn(6, 4, generator=_G) * 4
    t = place(full, mesh, [S0], graph)
    kinds.clear()
    t.clamp_(-3.0, 3.0)
    DF.hardtanh_(t, -2.0, 2.0)
    DF.relu6(t, inplace=True)
    assert kinds == [OpKind.Clamp] * 3
    assert torch.equal(t.to_torch(), full.clamp(0.0, 2.0))
    kinds.clear()
    t.clamp_(max=place(torch.ones(6, 4), mesh, [S0], graph))
    assert kinds[-1] is OpKind.Copy


def test_an_expanded_target_the_call_cannot_see_is_written_once(graph: dtorch.Graph) -> None:
    """An expanded view seen through a dtype view (which keeps no strides, so the call does
    not refuse it as torch does) is written once on the devices, as the operator and its
    write-back Copy wrote it: ``+=`` and ``clamp_`` of values alike along the expanded dim."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    full = torch.arange(16.0).view(4, 4)
    t = place(full, mesh, [R], graph)
    row = t[:1].expand(4, 4).view(torch.float32)
    row += 1
    row.clamp_(0.0, 3.0)
    want = full.clone()
    want[0] = (full[0] + 1).clamp(0.0, 3.0)
    assert torch.equal(t.to_torch(), want)


def test_div_refuses_a_rounding_mode_of_any_type_as_div_does(graph: dtorch.Graph) -> None:
    """``div_`` with a rounding mode that is none of torch's (a list, which cannot be hashed,
    too) raises ``div``'s ValueError naming the accepted ones; the tensor keeps its values."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    t = place(torch.arange(4.0), mesh, [S0], graph)
    for mode in (["floor"], "round"):
        with pytest.raises(ValueError, match="accepted: None, 'floor', 'trunc'"):
            t.div_(2, rounding_mode=mode)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
