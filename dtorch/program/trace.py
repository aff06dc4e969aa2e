"""Tracing: run a function once on dtorch tensors and keep the operators it recorded.

``Tracer`` stands in for the graph's submit while the function runs, in the tracing thread
only (operators other threads record on the graph pass through). The function gets handles
of their own for its input tensors (``own_handles``: fresh ids, the same metadata), so an
input is told apart from the same tensor read from the function's closure (a constant).
Every operator still runs, on the user's tensors where it reads an input's own handle, so
the trace run is an ordinary eager call; the tracer also keeps a copy, as recorded. It
refuses, at the user's line, what a replay could not reproduce: reading a value (``item``,
``tolist``, ``to_torch``, Python conditions on tensors), ``sync`` and memory or profile
operators, and random numbers (their generator state is fixed when they are recorded).

``build_spec`` then turns the kept operators into a ``ProgramSpec``: input tensors become
placeholders, what the operators read from outside becomes constants, and every local id is
renamed to a fresh one (so a replay never writes over a tensor the user holds).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dtorch.api.record import _OWN_FRAMES
from dtorch.errors import TraceError
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import (
    CreateParam,
    DropoutParam,
    OpParam,
    SubGraphParam,
    ViewPlacementsParam,
)
from dtorch.ir.random_draw import RANDOM_DRAWS
from dtorch.ir.rules import Inference
from dtorch.ir.span import Span, caller_span
from dtorch.program.spec import ProgramSpec
from dtorch.program.tree import Tree
from dtorch.runtime.shards import writes_first_input
from dtorch.runtime.subgraph import REFUSED_KINDS

if TYPE_CHECKING:
    from dtorch.api.graph import Graph
    from dtorch.ir.rules.cache import InferenceCache
    from dtorch.runtime.executor import Submission

#: What the user did to record each kind a body may not hold (the runtime's REFUSED_KINDS).
_REFUSED = {
    OpKind.GetTensor: "reads a tensor's value (item(), tolist(), to_torch(), or a Python "
    "condition on a tensor)",
    OpKind.Sync: "calls sync()",
    OpKind.Memory: "asks for memory statistics or empties the cache",
    OpKind.Profile: "opens or closes a profile",
    OpKind.SubGraph: "calls another traced program (trace the function that program was "
    "traced from inside this one instead)",
}

_RANDOM = frozenset(RANDOM_DRAWS)  # the random Create kinds: a replay would draw the same


def refusal(param: OpParam) -> str | None:
    """What makes ``param`` unreplayable, in words (None: it replays); the tracer's check
    and the program loader's."""
    kind = param.kind
    if kind in REFUSED_KINDS:
        return _REFUSED[kind]
    if isinstance(param, CreateParam) and param.create in _RANDOM:
        return f"draws random numbers ({param.create.name.lower()})"
    if isinstance(param, DropoutParam) and param.training and param.p > 0:
        return "applies dropout in training mode (call .eval() on the module first)"
    return None


class _SeeingInferences:
    """The graph's inference cache, noting the metadata of every operand it is asked about
    (operators carry input ids only; a constant's metadata is known where it is read)."""

    def __init__(self, inner: InferenceCache, seen: dict[int, Operand]) -> None:
        self._inner = inner
        self._seen = seen

    def infer(self, name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
        for operand in inputs:
            self._seen[operand.id] = operand
        return self._inner.infer(name, param, inputs)

    def __len__(self) -> int:
        return len(self._inner)


def own_handles(inputs: list[Any]) -> list[Any]:
    """A handle of its own for each of ``inputs`` (one per distinct tensor: one passed twice
    gets one handle twice), with the tensor's metadata on a fresh id. While the function
    runs, the tracer runs what reads it on the user's tensor; after, it is a view of that
    tensor on the devices (``Tracer.bind_inputs``)."""
    own: dict[int, Any] = {}
    for tensor in inputs:
        operand = tensor._operand
        if operand.id not in own:
            fresh = _renamed(operand, next(tensor._graph._operand_ids))
            own[operand.id] = type(tensor)._wrap(tensor._graph, fresh)
    return [own[t._operand.id] for t in inputs]


_INSTALLING = threading.Lock()  # held while a tracer is installed on or removed from a graph


def _refuse_second(graph: Graph, name: str) -> None:
    """TraceError if a tracer is installed on ``graph`` (one trace at a time per graph)."""
    if isinstance(graph._inferences, _SeeingInferences):
        raise TraceError(f"dtorch.trace({name}): this graph is being traced already")


class Tracer:
    """Keeps the operators one thread records on ``graph`` while installed (a context).

    ``users`` are the function's input tensors; ``inputs`` the handles it gets instead
    (``own_handles``): an operator reading one of those runs on the user's tensor. Operands
    read from outside the trace (constants) are pinned when first read, while a handle
    certainly holds them: ``pinned`` lists them, and whoever builds the program owns the pins
    (``release_pins`` drops them if no program is built)."""

    def __init__(self, graph: Graph, name: str, users: list[Any]) -> None:
        with _INSTALLING:  # an early refusal: __enter__ checks again as it installs
            _refuse_second(graph, name)
            self._inner: Callable[[Submission], None] = graph.executor.submit
            self._inferences = graph._inferences
        self.graph = graph
        self.name = name
        self.items: list[Submission] = []
        self.inputs = own_handles(users)  # the function's: see bind_inputs
        self.seen: dict[int, Operand] = {t._operand.id: t._operand for t in self.inputs}
        self._users = {
            own._operand.id: user._operand.id for own, user in zip(self.inputs, users, strict=True)
        }
        self.pinned: list[int] = []
        self.modules: list[Any] = []  # the modules called in this thread (nn.Module.__call__)
        self._outer_calls: list[Any] | None = None
        self._made: set[int] = set(self.seen)  # inputs, what the trace made, constants
        self._own: set[int] = set(self.seen)  # inputs and what the trace made: the function's
        self._thread = threading.get_ident()

    def __enter__(self) -> Tracer:
        graph = self.graph
        with _INSTALLING:  # check and install in one step: two threads' traces cannot both
            _refuse_second(graph, self.name)
            self._inner = graph.executor.submit
            self._inferences = graph._inferences
            graph._inferences = _SeeingInferences(self._inferences, self.seen)  # type: ignore[assignment]
            graph.executor.submit = self._submit
            calls = type(graph).traced_module_calls
            self._outer_calls = calls.get(self._thread)  # a trace inside another one's body
            calls[self._thread] = self.modules
        return self

    def __exit__(self, *exc: object) -> None:
        executor = self.graph.executor
        with _INSTALLING:  # a trace starting now sees this one installed or wholly gone
            if executor.submit == self._submit:  # a broken graph swapped in its refusal: keep it
                executor.submit = self._inner
            self.graph._inferences = self._inferences
            calls = type(self.graph).traced_module_calls
            if self._outer_calls is None:
                calls.pop(self._thread, None)
            else:
                calls[self._thread] = self._outer_calls

    def bind_inputs(self) -> None:
        """Make each input's own handle a view of the user's tensor on the devices, so that a
        handle the function kept (in a module, a closure) stays the tensor it stood for. The
        view's metadata is the tensor's own: no rule is asked (none takes a marked layout,
        which a view keeps as it is)."""
        span = caller_span(_OWN_FRAMES)
        for own, user in self._users.items():
            meta = self.seen[own]
            op_id = self.graph.new_operator_id()
            view = ViewPlacementsParam(meta.placements)
            op = Operator(op_id, f"trace_input_{op_id}", view, (user,), (own,), span)
            self._inner((op, (meta,)))

    def release_pins(self) -> None:
        """Drop the pins (the trace failed: no program holds the constants)."""
        pinned, self.pinned = self.pinned, []
        if pinned:
            self.graph.executor.unpin(tuple(pinned))

    def pin(self, operand_ids: list[int]) -> None:
        """Pin constants ``operand_ids`` (first read now) for the program to be built."""
        self.graph.executor.pin(tuple(operand_ids))
        self.pinned.extend(operand_ids)
        self._made.update(operand_ids)

    def _submit(self, item: Submission) -> None:
        op, outputs = item
        if threading.get_ident() != self._thread:
            if not self._own.isdisjoint(op.inputs):
                self._refuse_thread(op)
            self._inner(self._eager(op, outputs))
            return
        reason = refusal(op.param)
        if reason is not None:
            self._refuse(op, reason)
        outside = [i for i in op.inputs if i not in self._made]
        if outside:
            self.pin(outside)
        self._inner(self._eager(op, outputs))
        self.items.append(item)
        for operand in outputs:
            self._made.add(operand.id)
            self._own.add(operand.id)
            self.seen[operand.id] = operand

    def _eager(self, op: Operator, outputs: tuple[Operand, ...]) -> Submission:
        """What runs now: ``op`` reading the user's tensors where it reads the inputs' own
        handles (the trace run is the user's eager call: an in-place change of an input, or
        its failure, is the user tensor's)."""
        users = self._users
        if users.keys().isdisjoint(op.inputs):
            return op, outputs
        inputs = tuple([users.get(i, i) for i in op.inputs])
        return Operator(op.id, op.name, op.param, inputs, op.outputs, op.span), outputs

    def _refuse_thread(self, op: Operator) -> None:
        """Another thread reads the function's inputs or what it made: that work is the
        function's, but only its own thread's operators are recorded, so a replay would give
        the trace-time value instead."""
        raise TraceError(
            f"dtorch.trace({self.name}): {op.name} at {_where(op)!r}, recorded by another thread, "
            "reads the traced function's tensors; a program records the operators of the "
            "thread that traces only, so the function's work must be recorded in that thread "
            "(not in a thread pool it submits to)"
        )

    def _refuse(self, op: Operator, reason: str) -> None:
        promise = getattr(op.param, "promise", None)
        if promise is not None:  # registered already: nothing will settle it now
            self.graph.executor.promises.pop(promise.name)
        raise TraceError(
            f"dtorch.trace({self.name}): the function {reason} at {_where(op)!r}; a program "
            "replays the same operators on new inputs, so nothing in it may depend on values or "
            "draw new random numbers. Move it out of the traced function (return the tensor "
            "and read it after the call; pass random tensors in as arguments)"
        )


def _where(op: Operator) -> Span:
    """The user's line of ``op`` (the caller's, where the operator has none)."""
    return op.span if op.span.line > 0 else caller_span(_OWN_FRAMES)


def build_spec(
    tracer: Tracer, inputs: list[Any], args: Tree, results: list[Any], result: Tree
) -> ProgramSpec:
    """The spec of what ``tracer`` kept: ``inputs`` and ``results`` are the tensor leaves of
    the argument tree ``args`` and of the result tree ``result``."""
    fresh = tracer.graph._operand_ids
    rename: dict[int, int] = {}
    placeholders: list[Operand] = []
    for tensor in inputs:
        operand = tensor._operand
        if operand.id not in rename:
            rename[operand.id] = next(fresh)
            placeholders.append(_renamed(operand, rename[operand.id]))
    made: list[Operand] = []
    for _, outputs in tracer.items:
        for operand in outputs:
            rename[operand.id] = next(fresh)
            made.append(_renamed(operand, rename[operand.id]))
    constants = _constants(tracer, rename, results)
    operators = tuple(_renamed_operator(op, rename) for op, _ in tracer.items)
    bound = tuple(rename[t._operand.id] for t in inputs)  # each input's placeholder
    body = SubGraphParam(
        operators,
        tuple(placeholders + made),
        bound,
        tuple(rename.get(t._operand.id, t._operand.id) for t in results),
        writes=_writes(operators, bound),
    )
    return ProgramSpec(
        tracer.name,
        body,
        tuple(t._operand for t in inputs),
        tuple(constants.values()),
        args,
        result,
        tuple(t._operand for t in results),
    )


def _renamed(operand: Operand, new_id: int) -> Operand:
    return Operand(new_id, operand.shape, operand.dtype, operand.mesh, operand.placements)


def _renamed_operator(op: Operator, rename: dict[int, int]) -> Operator:
    inputs = tuple(rename.get(i, i) for i in op.inputs)
    outputs = tuple(rename[o] for o in op.outputs)
    return Operator(op.id, op.name, op.param, inputs, outputs, op.span)


def _constants(tracer: Tracer, rename: dict[int, int], results: list[Any]) -> dict[int, Operand]:
    """Operands the operators read (or the function returns) that neither the inputs nor the
    operators made, in order of first use: the program's constants (pinned by the tracer)."""
    constants: dict[int, Operand] = {}
    for op, _ in tracer.items:
        for operand_id in op.inputs:
            if operand_id not in rename and operand_id not in constants:
                constants[operand_id] = tracer.seen.get(operand_id) or _handle_meta(
                    tracer, operand_id
                )
    for tensor in results:
        operand = tensor._operand
        if operand.id not in rename and operand.id not in constants:
            tracer.pin([operand.id])
            constants[operand.id] = operand
    return constants


def _handle_meta(tracer: Tracer, operand_id: int) -> Operand:
    """The metadata of a constant only a redistribution read (it asks no inference): from a
    live handle of it, found once, at trace time."""
    from dtorch.api.handle import TensorBase

    for obj in gc.get_objects():
        if (
            isinstance(obj, TensorBase)
            and obj._graph is tracer.graph
            and obj._operand.id == operand_id
        ):
            return obj._operand
    raise TraceError(
        f"dtorch.trace({tracer.name}): operand {operand_id}, read by the function, lost its "
        "last handle while the function ran; keep the tensors it reads alive"
    )


def _writes(operators: tuple[Operator, ...], placeholders: tuple[int, ...]) -> tuple[int, ...]:
    """Positions of the inputs an in-place operator changes (written back after each run)."""
    changed = {op.inputs[0] for op in operators if writes_first_input(op)}
    return tuple(i for i, p in enumerate(placeholders) if p in changed)
