"""Recording: turn one operator call into an Operator on the graph's queue, at once.

``record`` checks the inputs share one graph, infers the outputs' shape, dtype and placements
(``dtorch.ir.rules``; a wrong program fails here, at the user's line), inserts the one implicit
redistribution the rules may ask for, allocates ids, captures the user's span, enqueues the
Operator and returns the output Tensors. Nothing here waits for the controller.

Inputs are typed against the handle base class (``dtorch.api.handle.TensorBase``); outputs
are made by the first input's ``_result`` (``Tensor._wrap``), or by the ``new`` callable
``emit``/``emit_one`` are given (creation has no input), so this module never imports Tensor.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar

from dtorch.api.marked import plan_marked
from dtorch.api.strides import ROW_MAJOR_KINDS, mark_fresh
from dtorch.errors import DtypeError, GraphError, ParamError, PlacementError, ShapeError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.params import ConvertParam, OpParam
from dtorch.ir.placement import Placement, format_placements
from dtorch.ir.rules import Inference, OutputMeta
from dtorch.ir.span import Span, caller_span
from dtorch.ir.subsplit import is_marked

if TYPE_CHECKING:
    from dtorch.api.graph import Graph
    from dtorch.api.handle import NewHandle, TensorBase
    from dtorch.api.tensor import Tensor

_ID = attrgetter("id")

_F = TypeVar("_F", bound="Callable[..., Any]")

#: A handle given to ``redistribute_to``: returned as it is when it is already there.
H = TypeVar("H", bound="TensorBase")

#: Frames from files under these directories are dtorch's own; spans name the user's line.
_OWN_FRAMES = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)


def graph_of(name: str, inputs: Sequence[TensorBase]) -> Graph:
    """The one graph all ``inputs`` belong to (GraphError naming the operator otherwise)."""
    graph = inputs[0]._graph
    for tensor in inputs:
        if tensor._graph is not graph:
            raise GraphError(
                f"{name}: inputs belong to different graphs (ids {graph.id} and "
                f"{tensor._graph.id}); operators take tensors of one graph"
            )
    return graph


def not_a_tensor(name: str, label: str, value: object) -> TypeError:
    """The error for an operator input that is no dtorch tensor (a torch tensor, a list,
    None), naming the operator, the input and what to do, for the user rather than the
    AttributeError the handle access raised."""
    return TypeError(
        f"{name}: {label} must be a dtorch.Tensor, got {type(value).__module__}."
        f"{type(value).__name__}; convert torch tensors with dtorch.from_torch(...) first"
    )


def is_handle(value: object) -> bool:
    """Whether ``value`` is a dtorch tensor (duck-typed: handle.py imports this module's
    users, so TensorBase is not importable here at run time)."""
    return hasattr(value, "_operand")


def tensor_arg(op: str, value: object, label: str = "input 0") -> None:
    """``not_a_tensor`` naming ``op`` and ``label`` when ``value`` is no dtorch tensor (a str,
    None, a torch tensor, a numpy array): for operators that read its metadata before
    recording, where ``record``'s own check comes too late."""
    if not is_handle(value):
        raise not_a_tensor(op, label, value)


#: The refusals recording raises, which ``named_as`` names after the user's call.
_REFUSALS = (DtypeError, ParamError, PlacementError, ShapeError)


@contextlib.contextmanager
def named_as(name: str, inner: str | None = None) -> Iterator[None]:
    """Refusals of the operators recorded inside are raised naming ``name``, the operator the
    user called: in place of the recorded operator's ``inner: `` (``take: shape [4] ...``
    for the ``reshape`` a ``take`` records) or, without ``inner``, before it (``var: mean:
    ...``). A refusal that already names ``name`` passes as it is.

    Example:
        >>> import dtorch
        >>> try:
        ...     with named_as("take", "reshape"):
        ...         dtorch.arange(6).reshape(4)
        ... except ValueError as error:
        ...     print(str(error)[:36])
        take: shape [4] is invalid for input
    """
    try:
        yield
    except _REFUSALS as error:
        text = str(error)
        if re.match(rf"{re.escape(name)}(?!\w)", text):  # "var:", "nanmean():", "glu does"
            raise
        if inner is not None:
            text = text.removeprefix(f"{inner}: ")
        raise type(error)(f"{name}: {text}") from None


_CALLS = "the call's tensors:"


def with_inputs(fn: _F) -> _F:
    """A composite operator whose placement refusals end with the placements of the tensors
    its caller gave it: the refusal comes from one of its steps and names that step's
    operands, which may be intermediates (a loss's ``log_softmax`` of its input). The
    outermost composite's tensors stand: an inner composite's are intermediates too.

    Example:
        >>> import dtorch
        >>> @with_inputs
        ... def doubled_sum(x, other):
        ...     return (x + x).sum() + other
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> x = dtorch.ones(2, device_mesh=mesh, placements=[dtorch.Partial()])
        >>> try:
        ...     doubled_sum(x, dtorch.ones(1, device_mesh=mesh))
        ... except dtorch.errors.PlacementError as error:
        ...     print(str(error).split("(the call's")[1])
         tensors: x (P,), other (R,))
    """
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PlacementError as error:
            given = _given(signature, args, kwargs)
            if not given:
                raise
            text = str(error).split(f" ({_CALLS}")[0]  # an inner composite's: intermediates
            raise PlacementError(f"{text} ({_CALLS} {given})") from None

    return run  # type: ignore[return-value]


def composite(name: str | None = None) -> Callable[[_F], _F]:
    """``with_inputs``, the refusals of its steps also named ``name`` (the function's own
    name by default), the operator the user called (see ``named_as``).

    Example:
        >>> import dtorch
        >>> @composite("twice")
        ... def twice(x):
        ...     return x.reshape(3)
        >>> try:
        ...     twice(dtorch.ones(2))
        ... except dtorch.errors.ShapeError as error:
        ...     print(str(error).split(":")[0])
        twice
    """

    def wrap(fn: _F) -> _F:
        label = name or fn.__name__

        @functools.wraps(fn)
        def named(*args: Any, **kwargs: Any) -> Any:
            with named_as(label):
                return fn(*args, **kwargs)

        return with_inputs(named)  # type: ignore[return-value]

    return wrap


def _given(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    # the placements of every dtorch tensor among a call's arguments, by parameter name (a
    # list or tuple of them, ``multi_dot``'s or ``block_diag``'s ``*tensors``, as a list)
    try:
        bound = signature.bind(*args, **kwargs).arguments
    except TypeError:
        return ""
    return ", ".join(f"{name} {text}" for name, value in bound.items() if (text := _placed(value)))


def _placed(value: Any) -> str:
    # a tensor's placements, a sequence's tensors' as a list, '' for anything else
    if is_handle(value):
        return format_placements(value.placements)
    if isinstance(value, (list, tuple)) and value and all(is_handle(v) for v in value):
        return "[" + ", ".join(format_placements(v.placements) for v in value) + "]"
    return ""


def _not_tensors(name: str, inputs: Sequence[object]) -> TypeError:
    # not_a_tensor for the first input that is no handle
    bad = next(i for i, t in enumerate(inputs) if not is_handle(t))
    return not_a_tensor(name, f"input {bad}", inputs[bad])


def record(name: str, param: OpParam, inputs: tuple[TensorBase, ...]) -> tuple[Tensor, ...]:
    """Record ``param`` applied to ``inputs``; return the output tensors (not yet computed)."""
    graph, inference = infer(name, param, inputs)
    span = caller_span(_OWN_FRAMES, 2)  # this frame and its caller, an operator function
    return _emit_inferred(graph, name, param, inputs, inference, span)


def record_inferred(
    name: str, param: OpParam, inputs: tuple[TensorBase, ...], found: tuple[Graph, Inference]
) -> tuple[Tensor, ...]:
    """``record`` with what ``infer`` found for ``inputs`` already (a caller that had to look
    before choosing ``param``: an in-place form whose rule gives the same inference)."""
    span = caller_span(_OWN_FRAMES, 2)
    return _emit_inferred(found[0], name, param, inputs, found[1], span)


def infer(name: str, param: OpParam, inputs: tuple[TensorBase, ...]) -> tuple[Graph, Inference]:
    """The graph of ``inputs`` and what ``record`` would infer for them, recording nothing:
    its refusals raise here (a composite checks a step before it writes anything)."""
    try:
        graph = graph_of(name, inputs)
        operands = tuple([t._operand for t in inputs])
    except AttributeError:
        raise _not_tensors(name, inputs) from None
    return graph, graph._inferences.infer(name, param, operands)


def _emit_inferred(
    graph: Graph,
    name: str,
    param: OpParam,
    inputs: tuple[TensorBase, ...],
    inference: Inference,
    span: Span,
) -> tuple[Tensor, ...]:
    """Record the implicit redistributions ``inference`` asks for, then the operator."""
    if inference.input_placements:
        inputs = _implicit_redistribute(inputs, inference.input_placements, span)
    operands = tuple([t._operand for t in inputs])
    new = inputs[0]._result
    outputs = emit(new, graph, name, param, operands, inference.outputs, operands[0].mesh, span)
    if param.kind in ROW_MAJOR_KINDS:  # the inputs the operator got: redistributed ones unknown
        mark_fresh(param, outputs, inputs)
    return outputs


def record_one(name: str, param: OpParam, inputs: tuple[TensorBase, ...], known: int = 1) -> Tensor:
    """``record`` for an operator with exactly one output (nearly all of them), without the
    result tuple: the per-operator hot path. ``known``: how many frames above this one are
    certainly dtorch's (at least its caller, an operator function); the span search skips
    them (see ``caller_span``)."""
    try:  # free in the hot path; a torch tensor or None among the inputs lands in except
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
    except AttributeError:
        raise _not_tensors(name, inputs) from None
    inference = graph._inferences.infer(name, param, operands)
    span = caller_span(_OWN_FRAMES, 1 + known)  # this frame, and ``known`` above it
    if inference.input_placements or len(inference.outputs) != 1:
        return _emit_inferred(graph, name, param, inputs, inference, span)[0]
    out, mesh = inference.outputs[0], operands[0].mesh
    result = emit_one(inputs[0]._result, graph, name, param, operands, out, mesh, span)
    if param.kind in ROW_MAJOR_KINDS:
        mark_fresh(param, (result,), inputs)
    return result


def emit_one(
    new: NewHandle,
    graph: Graph,
    name: str,
    param: OpParam,
    inputs: tuple[Operand, ...],
    out: OutputMeta,
    mesh: DeviceMesh,
    span: Span | None = None,
) -> Tensor:
    """``emit`` for one output: the per-operator hot path, so counters and the executor are
    used directly and no intermediate lists are built. ``new`` makes the result's handle (an
    input's ``_result``, or a handle class's, see ``TensorBase``). ``span``: the user's line,
    when the caller found it more cheaply than a search from here."""
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
    try:
        graph.executor.submit((op, (operand,)))
    except KeyboardInterrupt:  # while waiting for room: queued, so its output goes with a
        new(graph, operand)  # handle, dropped at once (a free of an id never made is ignored)
        raise
    return new(graph, operand)


def emit(
    new: NewHandle,
    graph: Graph,
    name: str,
    param: OpParam,
    inputs: tuple[Operand, ...],
    outputs: Sequence[OutputMeta],
    mesh: DeviceMesh,
    span: Span | None = None,
) -> tuple[Tensor, ...]:
    """Allocate ids, enqueue the Operator, and wrap its outputs in handles made by ``new``."""
    if len(outputs) == 1:
        return (emit_one(new, graph, name, param, inputs, outputs[0], mesh, span),)
    ids = graph._operand_ids
    operands = tuple([Operand(next(ids), o.shape, o.dtype, mesh, o.placements) for o in outputs])
    op_id = next(graph._operator_ids)
    input_ids = tuple([o.id for o in inputs])
    output_ids = tuple([o.id for o in operands])
    if span is None:
        span = caller_span(_OWN_FRAMES)
    op = Operator(op_id, f"{name}_{op_id}", param, input_ids, output_ids, span)
    try:
        graph.executor.submit((op, operands))
    except KeyboardInterrupt:  # as emit_one: the outputs go with handles dropped at once
        [new(graph, operand) for operand in operands]
        raise
    return tuple([new(graph, operand) for operand in operands])


def redistribute_to(
    tensor: H,
    mesh: DeviceMesh,
    placements: tuple[Placement, ...],
    span: Span | None = None,
) -> H | Tensor:
    """Record a Convert of ``tensor`` to ``mesh`` and normalised ``placements`` (``span``: the
    user's line, when the caller has it)."""
    operand = tensor._operand
    if operand.mesh == mesh and operand.placements == placements:
        return tensor
    if is_marked(operand.placements) or is_marked(placements):
        return _redistribute_marked(tensor, mesh, placements, span)
    out = OutputMeta(operand.shape, operand.dtype, placements)
    param = ConvertParam(mesh, placements)
    new, graph = tensor._result, tensor._graph
    return emit_one(new, graph, "redistribute", param, (operand,), out, mesh, span)


def _redistribute_marked(
    tensor: TensorBase, mesh: DeviceMesh, placements: tuple[Placement, ...], span: Span | None
) -> Tensor:
    """``redistribute_to`` where the source or the target is marked: the steps
    ``dtorch.api.marked`` plans, recorded as ordinary operators."""
    operand = tensor._operand
    steps = plan_marked(operand.shape, operand.placements, placements)
    source = tensor if steps.before is None else redistribute_to(tensor, mesh, steps.before, span)
    sliced = [record_one("getitem", piece, (source,), known=2) for piece in steps.slices]
    parts = tuple([redistribute_to(part, mesh, steps.parts, span) for part in sliced])
    joined = record_one("cat", steps.cat, parts, known=2)
    if steps.after is None:
        assert joined._operand.placements == placements, (joined._operand.placements, placements)
        return joined
    return redistribute_to(joined, mesh, steps.after, span)


def _implicit_redistribute(
    inputs: tuple[TensorBase, ...], wanted: Sequence[tuple[Placement, ...] | None], span: Span
) -> tuple[TensorBase, ...]:
    converted: list[TensorBase] = []
    for tensor, placements in zip(inputs, wanted, strict=False):
        if placements is None:
            converted.append(tensor)
        else:
            converted.append(redistribute_to(tensor, tensor._operand.mesh, placements, span))
    return tuple(converted) + inputs[len(converted) :]
