"""Operators the codec cannot write (``dtorch.runtime.process.unsent``): the process runner
sends an Unsent operator in their place, whose outputs fail; the rest of their batch runs and
the graph goes on, as in thread mode, where such an operator's kernel fails."""

from __future__ import annotations

import pytest
import torch

import dtorch
from dtorch import Replicate, Shard
from dtorch.api.record import emit_one
from dtorch.errors import KernelError, ParamError
from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import (
    ExpandParam,
    OpParam,
    RepeatInterleaveParam,
    RepeatParam,
    UnsentParam,
)
from dtorch.ir.rules import OutputMeta, infer
from dtorch.ir.span import Span
from dtorch.runtime.process.unsent import encode_or_substitute
from dtorch.serialization import decode_batch, encode_batch

pytestmark = pytest.mark.timeout(120)

_BIG = 2**64


def _unchecked(
    t: dtorch.Tensor, name: str, param: OpParam, shape: tuple[int, ...]
) -> dtorch.Tensor:
    """Record ``param`` on ``t`` past the rules and their checks (as a gap in them would)."""
    operand = t._operand
    out = OutputMeta(shape, operand.dtype, operand.placements)
    return emit_one(t._result, t._graph, name, param, (operand,), out, operand.mesh)


def test_an_operator_the_codec_cannot_write_fails_alone(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    earlier = dtorch.arange(4.0, device_mesh=mesh, placements=[Shard(0)])
    empty = dtorch.ones(0, device_mesh=mesh, placements=[Replicate()])
    one = dtorch.ones(1, device_mesh=mesh, placements=[Replicate()])
    bad = _unchecked(empty, "repeat_interleave", RepeatInterleaveParam(_BIG), (0,))
    huge = _unchecked(one, "expand", ExpandParam((_BIG,)), (_BIG,))
    unseen = _unchecked(one, "repeat", RepeatParam((_BIG,)), (_BIG,))
    later = earlier * 2
    dependent = bad + 1
    total = huge.sum()
    with pytest.raises(KernelError, match=r"repeat_interleave_\d+ \(") as first:
        dependent.to_torch()
    with pytest.raises(KernelError, match=r"expand_\d+ \("):
        total.item()
    if graph.runner.elsewhere:  # the reason says why it never reached the devices
        assert "could not be sent to the worker processes" in str(first.value)
        assert "64-bit range" in str(first.value)
    assert later.tolist() == [0.0, 2.0, 4.0, 6.0] and earlier.tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(KernelError, match=r"repeat_\d+ \("):
        graph.sync()  # the one failure no fetch raised, once
    graph.sync()
    del unseen
    assert (dtorch.ones(2) + 1).tolist() == [2.0, 2.0]


def _operand(op_id: int, shape: tuple[int, ...]) -> Operand:
    return Operand(op_id, shape, torch.float32, init_device_mesh("cpu", 2), (Replicate(),))


def test_a_batch_goes_with_only_its_unwritable_operators_replaced() -> None:
    span = Span("m.py", 3, 1)
    good = Operator(1, "repeat_1", RepeatParam((2,)), (10,), (11,), span)
    bad = Operator(2, "repeat_2", RepeatParam((_BIG,)), (10,), (12,), span)
    wide = Operator(3, "expand_3", ExpandParam((4,)), (10,), (13,), span)
    operands = (_operand(11, (2,)), _operand(12, (4,)), _operand(13, (_BIG,)), _operand(10, (1,)))
    batch = ExecuteBatch((good, bad, wide), operands, (5,))
    assert encode_or_substitute(ExecuteBatch((good,), operands[:1])) == encode_batch(
        ExecuteBatch((good,), operands[:1])
    )
    sent = decode_batch(encode_or_substitute(batch))
    assert sent.operators[0] == good and sent.no_hold == (5,)
    for made, original in zip(sent.operators[1:], (bad, wide), strict=True):
        assert isinstance(made.param, UnsentParam) and made.param.original is original.kind
        assert (made.id, made.name, made.inputs, made.outputs, made.span) == (
            original.id, original.name, original.inputs, original.outputs, original.span
        )  # fmt: skip
    assert "repeat_2 (Repeat) could not be sent" in sent.operators[1].param.reason
    assert "its output 13" in sent.operators[2].param.reason
    assert [o.shape for o in sent.operands] == [(2,), (4,), (0,), (1,)]


def test_no_rule_accepts_an_unsent_operator() -> None:
    """The client cannot record one, the program loader (which asks the rules) refuses one."""
    x = _operand(1, (2,))
    with pytest.raises(ParamError, match="made by the process runner only"):
        infer("unsent", UnsentParam(OpKind.Repeat, "why"), (x,))
