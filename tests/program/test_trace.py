"""dtorch.trace and Program replay, against torch on the full tensors, on both runners."""

from __future__ import annotations

import pytest
import torch

import dtorch


def _mesh(n: int = 2) -> dtorch.DeviceMesh:
    return dtorch.init_device_mesh("cpu", n)


def test_replay_equals_torch_on_new_inputs(graph: dtorch.Graph) -> None:
    mesh = _mesh(4)
    weight = torch.randn(8, 8)
    w = dtorch.from_torch(weight, device_mesh=mesh, placements=[dtorch.Shard(1)])

    def fn(t: dtorch.Tensor) -> dtorch.Tensor:
        return ((t @ w.redistribute(mesh, [dtorch.Replicate()])).relu() * 2).sum(0)

    example = dtorch.from_torch(torch.randn(6, 8), device_mesh=mesh, placements=[dtorch.Shard(0)])
    program = dtorch.trace(fn, example)
    for _ in range(3):
        x = torch.randn(6, 8)
        got = program(dtorch.from_torch(x, device_mesh=mesh, placements=[dtorch.Shard(0)]))
        torch.testing.assert_close(got.to_torch(), ((x @ weight).relu() * 2).sum(0))


def test_nested_arguments_and_results(graph: dtorch.Graph) -> None:
    mesh = _mesh()
    place = [dtorch.Shard(0)]

    def fn(pair: tuple, scale: float = 2.0, extra: dict | None = None) -> dict:
        a, b = pair
        return {"sum": [a + b, (a * scale, 7)], "b": b, "e": extra["k"] - a}

    make = lambda t: dtorch.from_torch(t, device_mesh=mesh, placements=place)  # noqa: E731
    ta, tb, tk = torch.randn(4), torch.randn(4), torch.randn(4)
    program = dtorch.trace(fn, (make(ta), make(tb)), 3.0, extra={"k": make(tk)})
    ta, tb, tk = torch.randn(4), torch.randn(4), torch.randn(4)
    out = program((make(ta), make(tb)), 3.0, extra={"k": make(tk)})
    torch.testing.assert_close(out["sum"][0].to_torch(), ta + tb)
    torch.testing.assert_close(out["sum"][1][0].to_torch(), ta * 3.0)
    assert out["sum"][1][1] == 7
    torch.testing.assert_close(out["b"].to_torch(), tb)
    torch.testing.assert_close(out["e"].to_torch(), tk - ta)


def test_constants_outlive_their_handles(graph: dtorch.Graph) -> None:
    weight = torch.randn(3)
    held = [dtorch.from_torch(weight)]
    program = dtorch.trace(lambda x: x * held[0], dtorch.zeros(3))
    held.clear()  # the program's pin keeps the value on the devices
    graph.sync()
    x = torch.randn(3)
    torch.testing.assert_close(program(dtorch.from_torch(x)).to_torch(), x * weight)


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (lambda t: t.sum().item(), "reads a tensor's value"),
        (lambda t: t if t.sum() > 0 else -t, "reads a tensor's value"),
        (lambda t: t + dtorch.randn(4), "random numbers"),
    ],
)
def test_value_dependent_code_is_refused_naming_the_line(
    graph: dtorch.Graph, fn: object, words: str
) -> None:
    with pytest.raises(dtorch.TraceError, match=words) as info:
        dtorch.trace(fn, dtorch.ones(4))  # type: ignore[arg-type]
    assert "test_trace.py:" in str(info.value)
    assert (dtorch.ones(2) + 1).tolist() == [2.0, 2.0]  # the graph goes on


def test_every_kind_a_body_may_not_hold_is_refused_in_words() -> None:
    from dtorch.program.trace import _REFUSED
    from dtorch.runtime.subgraph import REFUSED_KINDS

    assert set(_REFUSED) == REFUSED_KINDS
    assert all(_REFUSED[kind] for kind in REFUSED_KINDS)


def test_calling_another_program_is_refused_naming_the_line(graph: dtorch.Graph) -> None:
    inner = dtorch.trace(lambda t: t + 1, dtorch.zeros(3))
    with pytest.raises(dtorch.TraceError, match=r"calls another traced program.*test_trace\.py:"):
        dtorch.trace(lambda t: inner(t) * 2, dtorch.zeros(3))
    assert inner(dtorch.ones(3)).tolist() == [2.0, 2.0, 2.0]  # the graph goes on


def test_other_inputs_are_refused(graph: dtorch.Graph) -> None:
    mesh = _mesh()
    x = dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Shard(0)])
    program = dtorch.trace(lambda t, k=1: t * k, x, k=1)
    with pytest.raises(dtorch.TraceError, match=r"float32\[4, 3\].*traced with float32\[4, 2\]"):
        program(dtorch.ones(4, 3, device_mesh=mesh, placements=[dtorch.Shard(0)]), k=1)
    with pytest.raises(dtorch.TraceError, match=r"S\(0\).*traced with|traced with"):
        program(dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Replicate()]), k=1)
    with pytest.raises(dtorch.TraceError, match="fixed when the program is traced"):
        program(x, k=2)


def test_a_kernel_failure_in_a_replay_names_the_traced_line(graph: dtorch.Graph) -> None:
    ints = lambda v: dtorch.full((4,), v, dtype=torch.int64)  # noqa: E731
    program = dtorch.trace(lambda a, b: a // b, ints(1), ints(1))
    with pytest.raises(dtorch.DTorchError, match=r"test_trace\.py"):
        program(ints(1), ints(0)).to_torch()
    assert program(ints(6), ints(3)).tolist() == [2, 2, 2, 2]


def test_in_place_changes_of_inputs_are_written_back(graph: dtorch.Graph) -> None:
    def fn(t: dtorch.Tensor) -> dtorch.Tensor:
        t[0] = 5.0
        return t * 2

    program = dtorch.trace(fn, dtorch.zeros(3))
    x = dtorch.from_torch(torch.tensor([1.0, 2.0, 3.0]))
    assert program(x).tolist() == [10.0, 4.0, 6.0]
    assert x.tolist() == [5.0, 2.0, 3.0]
