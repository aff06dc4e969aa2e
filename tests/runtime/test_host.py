"""DeviceHost on its own: the bodies of traced programs it compiles, keeps and drops; an
operator that reads an operand released before it came.

A worker process hands every batch, and the releases of batches it skips, to the same
``DeviceHost`` as the thread runner does, so these hold in both modes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from dtorch.errors import GraphError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import CreateKind, MathKind
from dtorch.ir.params import BaseMathParam, CreateParam, SubGraphParam
from dtorch.ir.placement import Replicate
from dtorch.ir.span import Span
from dtorch.runtime import host as host_module
from dtorch.runtime import plan, stream, subgraph
from dtorch.runtime.board import LocalFailureBoard
from dtorch.runtime.handlers import StreamServices
from dtorch.runtime.host import DeviceHost, PartyLayout
from dtorch.runtime.reports import ReportQueue
from dtorch.runtime.shards import KernelFailure

MESH = DeviceMesh("cpu", [0, 1])
R = (Replicate(),)


def _operand(operand_id: int) -> Operand:
    return Operand(operand_id, (4,), torch.float32, MESH, R)


@pytest.fixture
def host() -> Iterator[DeviceHost]:
    services = StreamServices(None, LocalFailureBoard(), ReportQueue(), False)
    made = DeviceHost(PartyLayout(parties=2, first=0, count=2), services, "test-host")
    try:
        yield made
    finally:
        made.close(timeout=10.0)


def _ones(operand_id: int) -> Operator:
    param = CreateParam(CreateKind.ONES, (4,), torch.float32, MESH, R)
    return Operator(operand_id, f"ones_{operand_id}", param, (), (operand_id,), Span.unknown())


def _negate_body(program: int) -> SubGraphParam:
    """A body of one operator: placeholder 10 negated into 11, the result."""
    neg = Operator(20, "neg_20", BaseMathParam(MathKind.NEG), (10,), (11,), Span.unknown())
    return SubGraphParam((neg,), (_operand(10), _operand(11)), (10,), (11,), program)


def test_a_released_program_name_drops_its_compiled_body(host: DeviceHost) -> None:
    call = Operator(3, "f_3", _negate_body(50), (1,), (2,), Span.unknown())
    host.execute(ExecuteBatch((_ones(1), call), (_operand(1), _operand(2))))
    assert 50 in host._programs
    host.execute(ExecuteBatch((), (), (2, 50)))  # a batch's releases: an operand, a program
    assert not host._programs
    again = Operator(4, "f_4", _negate_body(60), (1,), (5,), Span.unknown())
    host.execute(ExecuteBatch((again,), (_operand(5),)))
    host.skip((60,))  # a worker's batch with nothing to run here: its releases alone
    assert not host._programs
    host.close(timeout=10.0)
    assert host.streams[0].shards.get(5, 0).tolist() == [-1.0] * 4  # the call ran


def test_a_first_call_compiles_its_body_however_empty(host: DeviceHost) -> None:
    """A program that runs no operator and returns its constant: its first call carries an
    empty body (no operators, no operands); only a call by name runs the cached one."""
    empty = SubGraphParam((), (), (), (1,), program=70)
    first = Operator(3, "f_3", empty, (1,), (2,), Span.unknown())
    named = Operator(4, "f_4", SubGraphParam((), program=70, by_name=True), (1,), (3,),
                     Span.unknown())  # fmt: skip
    host.execute(ExecuteBatch((_ones(1), first, named), (_operand(1), _operand(2), _operand(3))))
    assert 70 in host._programs
    host.close(timeout=10.0)
    for result in (2, 3):
        assert host.streams[1].shards.get(result, 1).tolist() == [1.0] * 4


def _neg(op_id: int, source: int, result: int) -> Operator:
    return Operator(op_id, f"neg_{op_id}", BaseMathParam(MathKind.NEG), (source,), (result,),
                    Span.unknown())  # fmt: skip


def test_an_operator_reading_a_released_operand_fails_and_the_host_goes_on(
    host: DeviceHost,
) -> None:
    """Another thread's ``t.data = other`` released what an operator had read before it was
    queued: that operator's outputs (and their dependents') fail naming it, on every device;
    the operand is released again after the batch; later operators run."""
    host.execute(ExecuteBatch((_ones(1),), (_operand(1),)))
    host.execute(ExecuteBatch((), (), (1,)))  # released
    late = (_neg(2, 1, 2), _neg(3, 2, 3), _neg(4, 1, 4), _ones(5))
    host.execute(ExecuteBatch(late, tuple(_operand(i) for i in (2, 3, 4, 5))))
    assert 1 not in host._metas  # released again
    host.close(timeout=10.0)
    for each, device in zip(host.streams, (0, 1), strict=True):
        for failed in (2, 3, 4):
            value = each.shards.get(failed, device)
            assert isinstance(value, KernelFailure), value
            assert value.failure.operator_id == 2
            assert "released before it ran" in value.failure.message
        assert each.shards.get(5, device).tolist() == [1.0] * 4


def test_an_operand_released_long_before_is_a_graph_error(
    host: DeviceHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the last ``RELEASED_METAS`` (to twice as many) released operands are known: an
    operator reading an older one cannot be placed, and the host says why."""
    monkeypatch.setattr(host_module, "RELEASED_METAS", 2)
    operands = tuple(_operand(i) for i in range(1, 7))
    host.execute(ExecuteBatch(tuple(_ones(i) for i in range(1, 7)), operands))
    host.execute(ExecuteBatch((), (), tuple(range(1, 7))))
    assert list(host._released) == [5, 6]  # the oldest went
    with pytest.raises(GraphError, match="reads operand 1, which was released long before"):
        host.execute(ExecuteBatch((_neg(7, 1, 7),), (_operand(7),)))


def test_the_stream_item_tags_are_distinct() -> None:
    """Control items of three modules share one tag space (a FAIL tag equal to BIND had made
    every program call's binding fail)."""
    tags = (stream.FREE, stream.STOP, stream.PROGRESS, stream.RESET, stream.FAIL,
            subgraph.BIND, subgraph.FINISH, plan.PLAN)  # fmt: skip
    assert len(set(tags)) == len(tags)
