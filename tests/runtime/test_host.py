"""DeviceHost on its own: the bodies of traced programs it compiles, keeps and drops.

A worker process hands every batch, and the releases of batches it skips, to the same
``DeviceHost`` as the thread runner does, so these hold in both modes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import CreateKind, MathKind
from dtorch.ir.params import BaseMathParam, CreateParam, SubGraphParam
from dtorch.ir.placement import Replicate
from dtorch.ir.span import Span
from dtorch.runtime.board import LocalFailureBoard
from dtorch.runtime.handlers import StreamServices
from dtorch.runtime.host import DeviceHost, PartyLayout
from dtorch.runtime.reports import ReportQueue

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
