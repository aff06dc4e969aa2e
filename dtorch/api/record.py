"""Recording: turn one operator call into an Operator on the graph's queue, at once.

``record`` checks the inputs share one graph, infers the outputs' shape, dtype and placements
(``dtorch.ir.rules``; a wrong program fails here, at the user's line), inserts the one implicit
redistribution the rules may ask for, allocates ids, captures the user's span, enqueues the
Operator and returns the output Tensors. Nothing here waits for the controller.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from operator import attrgetter
from typing import TYPE_CHECKING

# A module reference, not the class: tensor.py imports the operator methods, which import
# this module, while Tensor is still being defined. Looked up at call time.
import dtorch.api.tensor as _tensor
from dtorch.errors import GraphError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.params import ConvertParam, OpParam
from dtorch.ir.placement import Placement
from dtorch.ir.rules import Inference, OutputMeta
from dtorch.ir.span import Span, caller_span
from dtorch.ir.subsplit import is_marked

if TYPE_CHECKING:
    from dtorch.api.graph import Graph
    from dtorch.api.tensor import Tensor

_ID = attrgetter("id")

#: Frames from files under these directories are dtorch's own; spans name the user's line.
_OWN_FRAMES = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)


def graph_of(name: str, inputs: Sequence[Tensor]) -> Graph:
    """The one graph all ``inputs`` belong to (GraphError naming the operator otherwise)."""
    graph = inputs[0]._graph
    for tensor in inputs:
        if tensor._graph is not graph:
            raise GraphError(
                f"{name}: inputs belong to different graphs (ids {graph.id} and "
                f"{tensor._graph.id}); operators take tensors of one graph"
            )
    return graph


def record(name: str, param: OpParam, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """Record ``param`` applied to ``inputs``; return the output tensors (not yet computed)."""
    graph = graph_of(name, inputs)
    inference = graph._inferences.infer(name, param, tuple([t._operand for t in inputs]))
    span = caller_span(_OWN_FRAMES, 2)  # this frame and its caller, an operator function
    return _emit_inferred(graph, name, param, inputs, inference, span)


def _emit_inferred(
    graph: Graph,
    name: str,
    param: OpParam,
    inputs: tuple[Tensor, ...],
    inference: Inference,
    span: Span,
) -> tuple[Tensor, ...]:
    """Record the implicit redistributions ``inference`` asks for, then the operator."""
    if inference.input_placements:
        inputs = _implicit_redistribute(inputs, inference.input_placements, span)
    operands = tuple([t._operand for t in inputs])
    return emit(graph, name, param, operands, inference.outputs, operands[0].mesh, span)


def record_one(name: str, param: OpParam, inputs: tuple[Tensor, ...], known: int = 1) -> Tensor:
    """``record`` for an operator with exactly one output (nearly all of them), without the
    result tuple: the per-operator hot path. ``known``: how many frames above this one are
    certainly dtorch's (at least its caller, an operator function); the span search skips
    them (see ``caller_span``)."""
    graph = inputs[0]._graph
    if len(inputs) == 2:  # binary operators: no loop, no list
        if inputs[1]._graph is not graph:
            graph_of(name, inputs)  # raises the GraphError
        operands: tuple[Operand, ...] = (inputs[0]._operand, inputs[1]._operand)
    elif len(inputs) == 1:
        operands = (inputs[0]._operand,)
    else:
        operands = tuple([t._operand for t in inputs])
        graph_of(name, inputs)
    inference = graph._inferences.infer(name, param, operands)
    span = caller_span(_OWN_FRAMES, 1 + known)  # this frame, and ``known`` above it
    if inference.input_placements or len(inference.outputs) != 1:
        return _emit_inferred(graph, name, param, inputs, inference, span)[0]
    return emit_one(graph, name, param, operands, inference.outputs[0], operands[0].mesh, span)


def emit_one(
    graph: Graph,
    name: str,
    param: OpParam,
    inputs: tuple[Operand, ...],
    out: OutputMeta,
    mesh: DeviceMesh,
    span: Span | None = None,
) -> Tensor:
    """``emit`` for one output: the per-operator hot path, so counters and the executor are
    used directly and no intermediate lists are built. ``span``: the user's line, when the
    caller found it more cheaply than a search from here."""
    operand = Operand(next(graph._operand_ids), out.shape, out.dtype, mesh, out.placements)
    op_id = next(graph._operator_ids)
    if span is None:
        span = caller_span(_OWN_FRAMES)
    # input ids by index for the usual arities: tuple(map(...)) costs three times as much
    if len(inputs) == 2:
        input_ids: tuple[int, ...] = (inputs[0].id, inputs[1].id)
    elif len(inputs) == 1:
        input_ids = (inputs[0].id,)
    else:
        input_ids = tuple(map(_ID, inputs))
    op = Operator(op_id, f"{name}_{op_id}", param, input_ids, (operand.id,), span)
    graph.executor.submit((op, (operand,)))
    return _tensor.Tensor._wrap(graph, operand)


def emit(
    graph: Graph,
    name: str,
    param: OpParam,
    inputs: tuple[Operand, ...],
    outputs: Sequence[OutputMeta],
    mesh: DeviceMesh,
    span: Span | None = None,
) -> tuple[Tensor, ...]:
    """Allocate ids, enqueue the Operator, and wrap its outputs in Tensors."""
    if len(outputs) == 1:
        return (emit_one(graph, name, param, inputs, outputs[0], mesh, span),)
    ids = graph._operand_ids
    operands = tuple([Operand(next(ids), o.shape, o.dtype, mesh, o.placements) for o in outputs])
    op_id = next(graph._operator_ids)
    input_ids = tuple([o.id for o in inputs])
    output_ids = tuple([o.id for o in operands])
    if span is None:
        span = caller_span(_OWN_FRAMES)
    op = Operator(op_id, f"{name}_{op_id}", param, input_ids, output_ids, span)
    graph.executor.submit((op, operands))
    wrap = _tensor.Tensor._wrap
    return tuple([wrap(graph, operand) for operand in operands])


def redistribute_to(
    tensor: Tensor,
    mesh: DeviceMesh,
    placements: tuple[Placement, ...],
    span: Span | None = None,
) -> Tensor:
    """Record a Convert of ``tensor`` to ``mesh`` and normalised ``placements`` (``span``: the
    user's line, when the caller has it)."""
    operand = tensor._operand
    if operand.mesh == mesh and operand.placements == placements:
        return tensor
    if is_marked(operand.placements) or is_marked(placements):
        from dtorch.api.marked import redistribute_marked  # it records through this module

        return redistribute_marked(tensor, mesh, placements, span)
    out = OutputMeta(operand.shape, operand.dtype, placements)
    param = ConvertParam(mesh, placements)
    return emit_one(tensor._graph, "redistribute", param, (operand,), out, mesh, span)


def _implicit_redistribute(
    inputs: tuple[Tensor, ...], wanted: Sequence[tuple[Placement, ...] | None], span: Span
) -> tuple[Tensor, ...]:
    converted = []
    for tensor, placements in zip(inputs, wanted, strict=False):
        if placements is None:
            converted.append(tensor)
        else:
            converted.append(redistribute_to(tensor, tensor._operand.mesh, placements, span))
    return tuple(converted) + inputs[len(converted) :]
