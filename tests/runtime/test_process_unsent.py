"""Operators the codec cannot write (``dtorch.runtime.process.unsent``): the process runner
sends an Unsent operator in their place, whose outputs fail; the rest of their batch runs and
the graph goes on, as in thread mode, where such an operator's kernel fails."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dtorch
from dtorch import Replicate, Shard
from dtorch.api.record import emit_one
from dtorch.errors import KernelError, MeshError, ParamError, SerializationError
from dtorch.ir.mesh import init_device_mesh
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import MemoryKind, OpKind
from dtorch.ir.params import (
    ExpandParam,
    MemoryParam,
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


def test_an_operator_without_outputs_is_not_replaced() -> None:
    """It has nothing to fail in its place: a promise it settles (a Sync, memory stats, a
    fetch) would wait for ever; an Unsent operator with no operands also stopped every worker
    (no mesh to route it by). The batch cannot go: the runner's codec error."""
    param = MemoryParam(MemoryKind.STATS, 1)  # type: ignore[arg-type]
    stats = Operator(1, "memory_stats_1", param, (), (), Span.unknown())
    with pytest.raises(SerializationError, match=r"memory_stats_1 .* could not be sent"):
        encode_or_substitute(ExecuteBatch((stats,), ()))


@pytest.mark.parametrize("flag", [1, "y", None, torch.tensor(True)])
def test_get_memory_stats_takes_a_bool_reset_peak(graph: dtorch.Graph, flag: object) -> None:
    """A non-bool ``reset_peak`` went into the operator's param: the codec refused it, and in
    process mode every worker stopped."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    x = dtorch.ones(8, device_mesh=mesh, placements=[Shard(0)])
    with pytest.raises(TypeError, match="reset_peak must be a bool"):
        graph.get_memory_stats(reset_peak=flag)  # type: ignore[arg-type]
    assert len(graph.get_memory_stats(mesh, reset_peak=np.bool_(True)).stats) == 2
    assert (x + 1).tolist() == [2.0] * 8


def test_get_memory_stats_refuses_a_mesh_the_graph_cannot_run_on(graph: dtorch.Graph) -> None:
    """A CUDA mesh without CUDA gave the CPU devices' rows (they share its device indices)."""
    if graph.satisfy(dtorch.DeviceMesh("cuda", [0])):
        pytest.skip("this machine runs CUDA meshes: there the rows are the GPU's")
    dtorch.ones(8, device_mesh=dtorch.init_device_mesh("cpu", 2), placements=[Shard(0)])
    for mesh in ("cuda", dtorch.DeviceMesh("cuda", [0, 1])):
        with pytest.raises(MeshError, match="cannot run on"):
            graph.get_memory_stats(mesh)
