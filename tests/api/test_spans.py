"""Every recorded operator names the user's line, whatever path recorded it.

Recording skips frames it knows are dtorch's without looking at them (``caller_span``'s
``known``), so these tests pin the span of each kind of entry point: operator methods, reflected
operators with scalars, module functions, calls made from C (``operator.add``, ``sum``), and
calls from a user's helper function.
"""

from __future__ import annotations

import inspect
import operator
import os
import re
from collections.abc import Callable, Iterator

import pytest

import dtorch
import dtorch.nn.functional as F
from dtorch.errors import KernelError
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.span import Span
from dtorch.serialization import deserialize, serialize


@pytest.fixture
def recorded(graph: dtorch.Graph) -> Iterator[list[Operator]]:
    """The operators ``graph`` records while the test runs (they still run)."""
    ops: list[Operator] = []
    submit = graph.executor.submit

    def capture(item: tuple[Operator, tuple[Operand, ...]]) -> None:
        ops.append(item[0])
        submit(item)

    graph.executor.submit = capture
    yield ops
    graph.executor.submit = submit


def _line() -> int:
    """The caller's line number."""
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno


def _assert_span(op: Operator, line: int) -> None:
    assert (op.span.file, op.span.line) == (__file__, line), op.describe()
    assert op.span.column > 0


# Each lambda is the user code whose line the span must name (so none is inlined).
ENTRY_POINTS: dict[str, Callable[[dtorch.Tensor, dtorch.Tensor], object]] = {
    "a + b": lambda a, b: a + b,
    "a - 1": lambda a, b: a - 1,
    "2 * a": lambda a, b: 2 * a,
    "a < b": lambda a, b: a < b,
    "operator.add": lambda a, b: operator.add(a, b),  # noqa: PLW0108
    "a.relu()": lambda a, b: a.relu(),
    "dtorch.exp": lambda a, b: dtorch.exp(a),
    "a.sum(0)": lambda a, b: a.sum(0),
    "a.view(4)": lambda a, b: a.view(4),
    "a.matmul(b.T)": lambda a, b: a.matmul(b.transpose(0, 1)),
    "dtorch.maximum": lambda a, b: dtorch.maximum(a, b),  # noqa: PLW0108
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_an_operator_names_the_line_that_recorded_it(
    graph: dtorch.Graph, recorded: list[Operator], entry: str
) -> None:
    a = dtorch.ones(2, 2, graph=graph)
    b = dtorch.ones(2, 2, graph=graph)
    recorded.clear()
    ENTRY_POINTS[entry](a, b)
    line = ENTRY_POINTS[entry].__code__.co_firstlineno
    assert recorded, entry
    for op in recorded:
        _assert_span(op, line)


def test_sum_of_a_list_names_the_line_of_sum(graph: dtorch.Graph, recorded: list[Operator]) -> None:
    tensors = [dtorch.ones(3, graph=graph) for _ in range(3)]
    recorded.clear()
    line = _line() + 1
    total = sum(tensors, dtorch.zeros(3, graph=graph))
    assert total.tolist() == [3.0, 3.0, 3.0]
    assert len([op for op in recorded if op.name.startswith("add")]) == 3
    for op in recorded:
        if op.name.startswith("add"):
            _assert_span(op, line)


def _helper(x: dtorch.Tensor) -> dtorch.Tensor:
    return x * 3  # the span of the helper's own line


def test_a_helper_function_is_user_code(graph: dtorch.Graph, recorded: list[Operator]) -> None:
    x = dtorch.ones(2, graph=graph)
    recorded.clear()
    _helper(x)
    (op,) = recorded
    _assert_span(op, _helper.__code__.co_firstlineno + 1)


def test_a_kernel_failure_names_the_line(graph: dtorch.Graph) -> None:
    x = dtorch.ones(2, dtype=dtorch.int64, graph=graph)
    zero = dtorch.zeros(2, dtype=dtorch.int64, graph=graph)
    line = _line() + 1
    bad = x // zero
    with pytest.raises(KernelError, match=rf"test_spans\.py:{line}:"):
        bad.to_torch()


def test_an_implicit_redistribution_names_the_line_that_needed_it(
    graph: dtorch.Graph, recorded: list[Operator]
) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
    y = dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Replicate()], graph=graph)
    recorded.clear()
    line = _line() + 1
    total = x + y  # y is chunked to S(0) first (binary elementwise)
    assert [op.kind.name for op in recorded] == ["Convert", "BroadcastBinary"]
    for op in recorded:
        _assert_span(op, line)
    assert total.tolist() == [[2.0, 2.0]] * 4


def test_an_implicit_redistribution_of_linears_bias_names_the_line(
    graph: dtorch.Graph, recorded: list[Operator]
) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Replicate()], graph=graph)
    w = dtorch.ones(6, 2, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
    b = dtorch.ones(6, device_mesh=mesh, placements=[dtorch.Replicate()], graph=graph)
    recorded.clear()
    line = _line() + 1
    out = F.linear(x, w, b)  # the output is S(1): the bias is chunked to S(0) first
    assert [op.kind.name for op in recorded] == ["Convert", "Linear"]
    for op in recorded:
        _assert_span(op, line)
    assert out.tolist() == [[3.0] * 6] * 4


def test_a_file_whose_name_is_not_utf8_records_and_runs(graph: dtorch.Graph) -> None:
    """A script in a directory named in Latin-1 (Python names it with surrogate escapes):
    its spans are valid text (they travel to worker processes and into files), and a failure
    names the file readably."""
    name = os.fsdecode(b"/tmp/caf\xe9/script.py")
    scope = {"x": dtorch.arange(4, graph=graph)}
    exec(compile("y = x * 2\nbad = x // (x * 0)", name, "exec"), scope)
    assert scope["y"].tolist() == [0, 2, 4, 6]
    with pytest.raises(KernelError, match=re.escape("/tmp/caf\\xe9/script.py:2:")):
        scope["bad"].tolist()
    assert (scope["x"] + 1).tolist() == [1, 2, 3, 4]  # the graph goes on
    span = Span(name, 2, 5)
    assert repr(span) == "/tmp/caf\\xe9/script.py:2:5"
    assert deserialize(serialize(span)) == span
