"""In-place activations (``F.relu(x, inplace=True)``, ``relu_``, ``Tensor.sigmoid_``, ...)
against torch: one Activation operator whose devices write the tensor's shards, so the tensor,
its aliases and the views taken before all see torch's values, on every layout of a 1-D and a
2-D mesh; torch's refusals (a result dtype that does not cast back, a tensor whose elements
share memory) change nothing; a failed tensor stays failed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import DtypeError, KernelError, ShapeError
from dtorch.ir.opkind import OpKind
from tests.api.ops_harness import S0, S1, R, place

pytestmark = pytest.mark.timeout(180)

_G = torch.Generator().manual_seed(5)

Fn = Callable[[Any], Any]

#: name, torch's in-place call, dtorch's (the same spelling on dtorch tensors).
_CALLS: list[tuple[str, Fn, Fn]] = [
    ("F.relu", lambda t: F.relu(t, inplace=True), lambda t: DF.relu(t, inplace=True)),
    ("relu_", torch.relu_, dtorch.relu_),
    ("F.relu_", F.relu_, DF.relu_),
    ("Tensor.relu_", lambda t: t.relu_(), lambda t: t.relu_()),
    ("Tensor.sigmoid_", lambda t: t.sigmoid_(), lambda t: t.sigmoid_()),
    ("Tensor.tanh_", lambda t: t.tanh_(), lambda t: t.tanh_()),
    ("F.silu", lambda t: F.silu(t, inplace=True), lambda t: DF.silu(t, inplace=True)),
    ("F.elu", lambda t: F.elu(t, 0.7, inplace=True), lambda t: DF.elu(t, 0.7, inplace=True)),
    ("F.elu_", lambda t: F.elu_(t, 1.5), lambda t: DF.elu_(t, 1.5)),
    (
        "F.leaky_relu",
        lambda t: F.leaky_relu(t, 0.2, inplace=True),
        lambda t: DF.leaky_relu(t, 0.2, inplace=True),
    ),
    ("F.celu", lambda t: F.celu(t, 1.3, inplace=True), lambda t: DF.celu(t, 1.3, inplace=True)),
    ("F.selu_", F.selu_, DF.selu_),
    ("F.hardswish", lambda t: F.hardswish(t, True), lambda t: DF.hardswish(t, True)),
    ("F.hardsigmoid", lambda t: F.hardsigmoid(t, True), lambda t: DF.hardsigmoid(t, True)),
    ("F.mish", lambda t: F.mish(t, inplace=True), lambda t: DF.mish(t, inplace=True)),
    ("F.threshold_", lambda t: F.threshold_(t, 0.5, -2.0), lambda t: DF.threshold_(t, 0.5, -2.0)),
    (
        "nn.ReLU(inplace=True)",
        torch.nn.ReLU(inplace=True),
        dtorch.nn.ReLU(inplace=True),
    ),
]

_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32]


def _full(dtype: torch.dtype) -> torch.Tensor:
    return (torch.randn(6, 8, generator=_G) * 3).to(dtype)


def _torch_result(call: Fn, full: torch.Tensor, index: Any) -> torch.Tensor | Exception:
    """torch's tensor after the call on its view ``index``, or its refusal."""
    want = full.clone()
    try:
        call(want[index])
    except (RuntimeError, NotImplementedError) as error:
        return error
    return want


@pytest.mark.parametrize(("name", "torch_call", "dtorch_call"), _CALLS, ids=[c[0] for c in _CALLS])
def test_in_place_activation_writes_the_tensor_and_its_views(  # type: ignore[no-untyped-def]
    name, torch_call, dtorch_call, graph
) -> None:
    """On a strided view of a tensor of each layout: the same handle back, torch's values in
    the view, the base and an alias taken before; torch's dtype refusals refused and nothing
    changed."""
    for mesh_shape, layouts in (((2,), [[R], [S0], [S1]]), ((2, 2), [[S0, S1], [S1, R]])):
        mesh = dtorch.init_device_mesh("cpu", mesh_shape)
        for dtype in _DTYPES:
            full = _full(dtype)
            index = (slice(1, 5), slice(None, None, 2))
            want = _torch_result(torch_call, full, index)
            for layout in layouts:
                context = f"{name} {dtype} {layout} on {mesh_shape}"
                t = place(full, mesh, layout, graph)
                alias, view = t, t[index]
                if isinstance(want, Exception):
                    with pytest.raises((DtypeError, RuntimeError, NotImplementedError)):
                        dtorch_call(view)
                    assert torch.equal(t.to_torch(), full), context
                    continue
                result = dtorch_call(view)
                assert result is view and t.placements == layout, context
                assert torch.equal(alias.to_torch(), want), context
                assert torch.equal(view.to_torch(), want[index]), context


def test_one_operator_and_no_copy(kinds: list[OpKind], graph: dtorch.Graph) -> None:
    """An in-place activation records one Activation operator, not an Activation and the
    write-back Copy of the other in-place forms (which ``exp_`` still records)."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    t = place(torch.randn(4, 4, generator=_G), mesh, [S0], graph)
    kinds.clear()
    DF.relu(t, inplace=True)
    t.sigmoid_()
    dtorch.nn.SiLU(inplace=True)(t)
    assert kinds == [OpKind.Activation] * 3
    t.exp_()
    assert OpKind.Copy in kinds[3:]


def test_refusals_change_nothing(graph: dtorch.Graph) -> None:
    """torch's refusals: ``sigmoid_`` of an integer tensor (its result does not cast back),
    ``relu_`` of an expanded tensor (elements sharing memory), a bool ``relu_``; the tensors
    keep their values."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    ints = place(torch.arange(-3, 5), mesh, [S0], graph)
    with pytest.raises(DtypeError, match=r"^sigmoid_: result type torch.float32 can't be cast"):
        ints.sigmoid_()
    expanded = place(torch.tensor([-1.0, 2.0]), mesh, [R], graph).expand(3, 2)
    with pytest.raises(ShapeError, match="more than one element of the written-to tensor"):
        expanded.relu_()
    with pytest.raises(DtypeError, match="Boolean inputs not supported for relu"):
        place(torch.tensor([True, False]), mesh, [S0], graph).relu_()
    assert ints.tolist() == list(range(-3, 5))
    assert expanded.tolist() == [[-1.0, 2.0]] * 3


def test_a_failed_tensor_stays_failed(graph: dtorch.Graph) -> None:
    """``relu_`` of a tensor whose value failed upstream (an integer division by zero on one
    device) leaves it failed, with the upstream operator named; a good one changes."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = torch.tensor([[-5, 6], [-7, 8]])
    for divisor in (torch.tensor([[1, 1], [1, 1]]), torch.tensor([[1, 1], [0, 1]])):
        t = place(x, mesh, [S0], graph) // place(divisor, mesh, [S0], graph)
        view = t[:, 1:]
        assert t.relu_() is t
        if divisor.all():
            assert t.tolist() == [[0, 6], [0, 8]] and view.tolist() == [[6], [8]]
            continue
        for failed in (t, view):
            with pytest.raises(KernelError, match="floor_divide"):
                failed.to_torch()


@pytest.mark.parametrize("profiled", [False, True], ids=["plan", "contexts"])
def test_traced_in_place_activations_write_back(graph: dtorch.Graph, profiled: bool) -> None:
    """A traced function that activates its input and a closure's tensor in place: each
    replay writes both back, as the eager calls do (the compiled plan, and the stream's
    per-operator contexts under a profile); an input that failed upstream fails the input
    and the result."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    w_full = torch.randn(4, 2, generator=_G)
    w = place(w_full, mesh, [S0], graph)

    def fn(t: dtorch.Tensor) -> dtorch.Tensor:
        t.relu_()
        DF.leaky_relu(w, 0.5, inplace=True)
        return t * 2

    program = dtorch.trace(fn, place(torch.zeros(4, 2), mesh, [S1], graph))
    want_w = F.leaky_relu(w_full, 0.5)  # tracing ran the function once
    with dtorch.profile(graph) if profiled else contextlib.nullcontext():
        for _ in range(2):
            full = torch.randn(4, 2, generator=_G)
            x = place(full, mesh, [S1], graph)
            out = program(x)
            F.leaky_relu(want_w, 0.5, inplace=True)
            assert torch.equal(x.to_torch(), full.relu())
            assert torch.equal(out.to_torch(), full.relu() * 2)
            assert torch.equal(w.to_torch(), want_w)
        ints = place(torch.tensor([[4, -4], [6, 6], [8, 8], [1, 1]]), mesh, [S1], graph)
        failed = ints // place(torch.tensor([[1, 1], [0, 1], [1, 1], [1, 1]]), mesh, [S1], graph)
        out = dtorch.trace(lambda t: t.relu_() * 2, ints.clone())(failed)
        for changed in (failed, out):
            with pytest.raises(dtorch.DTorchError, match="floor_divide"):
                changed.to_torch()


def test_an_expanded_target_the_call_cannot_see_is_written_once(graph: dtorch.Graph) -> None:
    """An expanded view seen through a dtype view (which keeps no strides, so the call does
    not refuse it as torch does) is written once on the devices, as the two-operator form
    wrote it (``relu_`` and ``hardswish(inplace=True)``, whose torch kernels would refuse
    it)."""
    mesh = dtorch.init_device_mesh("cpu", (2,))
    full = torch.arange(-8.0, 8.0).view(4, 4)
    t = place(full, mesh, [R], graph)
    row = t[:1].expand(4, 4).view(torch.float32)
    row.relu_()
    DF.hardswish(row, True)
    want = full.clone()
    want[0] = F.hardswish(full[0].relu())
    assert torch.equal(t.to_torch(), want)
