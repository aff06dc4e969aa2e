"""Compiled replays (``dtorch.runtime.plan``): every step form against torch, failures in the
middle of a call and in its inputs, redistributions between local steps, memory peaks, and the
operator-by-operator path a profile takes; on both runners."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest
import torch

import dtorch
import dtorch.nn.functional as F
from dtorch.runtime.subgraph import compile_body

pytestmark = pytest.mark.timeout(120)

S0 = dtorch.Shard(0)


def _mesh(n: int = 2) -> dtorch.DeviceMesh:
    return dtorch.init_device_mesh("cpu", n)


def _sharded_ints(mesh: dtorch.DeviceMesh) -> Callable[[int], dtorch.Tensor]:
    def ints(value: int) -> dtorch.Tensor:
        return dtorch.full((4,), value, dtype=torch.int64, device_mesh=mesh, placements=[S0])

    return ints


def _mixed(x: dtorch.Tensor, y: dtorch.Tensor) -> tuple[dtorch.Tensor, ...]:
    """Direct binary and unary forms, scalars on either side, tensor-only functions with a
    scalar, activations with parameters, views and a two-output kernel."""
    a = (x + 2) * y - (3 - x) / 4
    b = F.gelu(a, approximate="tanh") + F.leaky_relu(a, 0.2) + F.elu(a) + a.exp().neg()
    c = b.maximum(y)
    values, indices = c.transpose(0, 1).max(dim=0)
    return values.relu(), indices, c.unsqueeze(0).softmax(2)


def _torch_mixed(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    a = (x + 2) * y - (3 - x) / 4
    b = (
        torch.nn.functional.gelu(a, approximate="tanh")
        + torch.nn.functional.leaky_relu(a, 0.2)
        + torch.nn.functional.elu(a)
        + a.exp().neg()
    )
    c = torch.maximum(b, y)
    values, indices = c.transpose(0, 1).max(dim=0)
    return values.relu(), indices, c.unsqueeze(0).softmax(2)


@pytest.mark.parametrize("placement", [dtorch.Replicate(), dtorch.Shard(0)])
def test_every_step_form_equals_torch(graph: dtorch.Graph, placement: dtorch.Placement) -> None:
    mesh = _mesh()
    make = lambda t: dtorch.from_torch(t, device_mesh=mesh, placements=[placement])  # noqa: E731
    shape = (5, 3)  # uneven on two devices
    program = dtorch.trace(_mixed, make(torch.randn(shape)), make(torch.randn(shape)))
    for _ in range(2):
        x, y = torch.randn(shape), torch.randn(shape)
        got = program(make(x), make(y))
        for value, expected in zip(got, _torch_mixed(x, y), strict=True):
            torch.testing.assert_close(value.to_torch(), expected)


def test_a_failure_passes_through_a_redistribution_and_later_steps(graph: dtorch.Graph) -> None:
    mesh = _mesh()
    ints = _sharded_ints(mesh)

    def fn(a: dtorch.Tensor, b: dtorch.Tensor) -> dtorch.Tensor:
        q = a // b  # fails where b is 0
        return q.redistribute(mesh, [dtorch.Replicate()]) * 3 + a

    program = dtorch.trace(fn, ints(1), ints(1))
    with pytest.raises(dtorch.DTorchError, match=r"test_plan\.py.*ZeroDivisionError|floor|zero"):
        program(ints(5), ints(0)).to_torch()
    graph.sync()  # the fetch raised the failure already: not again, as in eager mode
    program(ints(5), ints(0))
    with pytest.raises(dtorch.DTorchError, match="floor_divide"):
        graph.sync()  # a failure no fetch raised
    assert program(ints(6), ints(3)).tolist() == [12, 12, 12, 12]
    graph.sync()


def test_a_failed_input_fails_the_results_with_its_own_failure(graph: dtorch.Graph) -> None:
    ints = lambda v: dtorch.full((4,), v, dtype=torch.int64)  # noqa: E731
    program = dtorch.trace(lambda t: (t + 1) * 2, ints(1))
    broken = ints(1) // ints(0)  # this line is named, not the program's
    with pytest.raises(dtorch.DTorchError, match=r"floor_divide|div"):
        program(broken).to_torch()
    graph.sync()  # the fetch raised the failure already
    assert program(ints(2)).tolist() == [6, 6, 6, 6]


def test_a_failed_constant_fails_a_redistribution_and_what_follows(graph: dtorch.Graph) -> None:
    mesh = _mesh()
    ints = _sharded_ints(mesh)
    broken = ints(1) // ints(0)  # a constant the body reads only in a redistribution
    program = dtorch.trace(
        lambda t: t * 2 + broken.redistribute(mesh, [dtorch.Replicate()]), ints(1)
    )
    with pytest.raises(dtorch.DTorchError, match="floor_divide"):
        program(ints(3)).to_torch()
    graph.sync()  # the fetch raised the failure already
    fine = dtorch.trace(lambda t: t * 2 + ints(1).redistribute(mesh, [dtorch.Replicate()]), ints(1))
    assert fine(ints(3)).tolist() == [7, 7, 7, 7]


def test_results_no_step_reads_are_stored(graph: dtorch.Graph) -> None:
    """An input returned as it is, a constant returned that only a redistribution reads, and
    a body of no operator at all."""
    mesh = _mesh()
    shard = [dtorch.Shard(0)]
    tx, tu, tw = torch.arange(4.0), torch.ones(4), torch.arange(4.0) * 3
    make = lambda t: dtorch.from_torch(t, device_mesh=mesh, placements=shard)  # noqa: E731
    w = make(tw)
    program = dtorch.trace(
        lambda t, v: (t + w.redistribute(mesh, [dtorch.Replicate()]), v, w), make(tx), make(tu)
    )
    summed, same, constant = program(make(tx), make(tu))
    torch.testing.assert_close(summed.to_torch(), tx + tw)
    torch.testing.assert_close(same.to_torch(), tu)
    torch.testing.assert_close(constant.to_torch(), tw)
    identity = dtorch.trace(lambda t: t, make(tx))
    torch.testing.assert_close(identity(make(tu)).to_torch(), tu)


def _peak(graph: dtorch.Graph, run: Callable[[], dtorch.Tensor]) -> int:
    graph.sync()
    graph.get_memory_stats(reset_peak=True)
    run().to_torch()
    return max(s.max_memory_allocated for s in graph.get_memory_stats().stats)


def test_the_peak_of_a_call_bounds_the_eager_peak(graph: dtorch.Graph) -> None:
    """A reshape of a transposed tensor copies: the bound must count it."""
    x = dtorch.from_torch(torch.randn(256, 256))
    fn = lambda t: t.transpose(0, 1).reshape(-1).sum()  # noqa: E731
    program = dtorch.trace(fn, x)
    assert _peak(graph, lambda: program(x)) >= _peak(graph, lambda: fn(x)) > 2 * 256 * 256 * 4


def test_the_peak_counts_the_intermediates_of_a_call(graph: dtorch.Graph) -> None:
    program = dtorch.trace(lambda t: (t.expand(512, 1024) * 2).sum(), dtorch.ones(1024))
    x = dtorch.ones(1024)
    graph.get_memory_stats(reset_peak=True)
    assert program(x).item() == 2 * 512 * 1024
    stats = graph.get_memory_stats()
    assert max(s.max_memory_allocated for s in stats.stats) >= 512 * 1024 * 4


def test_a_chain_reuses_its_slots(graph: dtorch.Graph) -> None:
    x, a = dtorch.ones(3), dtorch.full((3,), 0.5)

    def chain(t: dtorch.Tensor) -> dtorch.Tensor:
        for _ in range(200):
            t = (t * a).relu()
        return t

    program = dtorch.trace(chain, x)
    metas = {o.id: o for o in program.spec.constants}
    body = compile_body(program.spec.body, metas, 1, lambda i, o: ((0, (0,)),), None)
    plan = body.plans[0]  # compiled here, as every host compiles it
    assert plan is not None and len(plan.steps) == 400 and plan.size <= 4
    x_torch = torch.ones(3)
    for _ in range(200):
        x_torch = (x_torch * 0.5).relu()
    torch.testing.assert_close(program(x).to_torch(), x_torch)


def test_a_profiled_replay_records_each_body_operator(graph: dtorch.Graph) -> None:
    mesh = _mesh()
    x = dtorch.ones(4, device_mesh=mesh, placements=[dtorch.Shard(0)])
    program = dtorch.trace(lambda t: (t + 1).redistribute(mesh, [dtorch.Replicate()]) * 2, x)
    with dtorch.profile(graph) as prof:
        out = program(x)
    assert out.tolist() == [4.0] * 4
    for device in range(2):
        names = [e.name.split("_")[0] for e in prof.events if e.device == device]
        assert names == ["add", "redistribute", "mul"]


def _masked_in_place(x: dtorch.Tensor, d: dtorch.Tensor) -> dtorch.Tensor:
    """``masked_fill_`` on a copy and ``masked_scatter_`` on the input itself, with a mask
    that fails where ``d`` is 0."""
    mask = (x // d) > 6
    z = x.clone()
    z.masked_fill_(mask, -1)
    x.masked_scatter_(mask, -x)
    return z


@pytest.mark.parametrize("profiled", [False, True])  # the plan, or the stream's contexts
def test_a_failed_mask_fails_what_masked_in_place_changes(
    graph: dtorch.Graph, profiled: bool
) -> None:
    ints = lambda *v: dtorch.from_torch(torch.tensor(v))  # noqa: E731
    program = dtorch.trace(_masked_in_place, ints(5, 6, 7, 8), ints(1, 1, 1, 1))
    x = ints(5, 6, 7, 8)
    with dtorch.profile(graph) if profiled else contextlib.nullcontext():
        out = program(x, ints(1, 1, 1, 1))
        assert out.tolist() == [5, 6, -1, -1] and x.tolist() == [5, 6, -5, -6]  # as torch
        x = ints(5, 6, 7, 8)
        out = program(x, ints(1, 0, 1, 1))
        for changed in (out, x):  # the result, and the input written back
            with pytest.raises(dtorch.DTorchError, match="floor_divide"):
                changed.to_torch()


@pytest.mark.parametrize("profiled", [False, True], ids=["plan", "contexts"])
def test_a_failed_write_into_a_constant_fails_the_constant(
    graph: dtorch.Graph, profiled: bool
) -> None:
    """A body that writes a closure's tensor in place (``w.copy_(x // d)``) with a failing
    division: ``w`` fails on the device that failed, as in eager mode, instead of keeping
    what it held (and stays failed through later writes, as an eager ``copy_`` into a failed
    tensor leaves it failed); the call's own result is fine."""
    mesh = _mesh()
    ints = _sharded_ints(mesh)
    w = ints(7)

    def write(x: dtorch.Tensor, d: dtorch.Tensor) -> dtorch.Tensor:
        w.copy_(x // d)
        return x + 1

    program = dtorch.trace(write, ints(1), ints(2))
    divisor = dtorch.from_torch(
        torch.tensor([1, 1, 1, 0]), device_mesh=mesh, placements=[dtorch.Shard(0)]
    )
    with dtorch.profile(graph) if profiled else contextlib.nullcontext():
        assert program(ints(5), divisor).tolist() == [6, 6, 6, 6]
        with pytest.raises(dtorch.DTorchError, match="floor_divide"):
            w.to_torch()
        assert program(ints(6), ints(3)).tolist() == [7, 7, 7, 7]
        with pytest.raises(dtorch.DTorchError, match="floor_divide"):
            w.to_torch()
    graph.sync()
