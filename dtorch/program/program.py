"""Program: a traced computation bound to its graph, replayed as one operator.

``dtorch.trace(fn, *args, **kwargs)`` runs ``fn`` once (an ordinary eager call: its
operators run) and returns a ``Program``. Calling the program checks the new arguments
against the traced ones (the same structure and plain values; tensors of the same shape,
dtype, mesh and placements), allocates its result tensors and records one SubGraph operator:
the controller and each worker get one message however many operators the body has, and the
devices run the body they cached when it was first sent. The program holds its constants
(tensors the function read without computing them, such as weights) on the devices while it
lives.

Example:
    >>> import dtorch
    >>> w = dtorch.ones(3)
    >>> program = dtorch.trace(lambda x: (x * w).relu() + 1, dtorch.zeros(3))
    >>> program(dtorch.arange(-1.0, 2.0)).tolist()
    [1.0, 1.0, 2.0]
    >>> len(program)
    3
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dtorch.api.graph import Graph
from dtorch.api.handle import TensorBase
from dtorch.api.record import _OWN_FRAMES, graph_of
from dtorch.api.tensor import Tensor
from dtorch.errors import GraphError, TraceError
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.params import SubGraphParam
from dtorch.ir.span import caller_span, readable_path
from dtorch.program.remap import renamed_constants
from dtorch.program.spec import ProgramSpec
from dtorch.program.summary import plural
from dtorch.program.trace import Tracer, build_spec
from dtorch.program.tree import difference, flatten, has_values, unflatten


def _is_tensor(value: object) -> bool:
    return isinstance(value, TensorBase)


class Program:
    """A traced computation on one graph; call it like the function it was traced from.

    Built by ``dtorch.trace`` (or ``dtorch.load_program``), not directly. ``spec`` is its
    data (``dtorch.program.spec.ProgramSpec``); ``graph`` the graph it runs on.
    """

    def __init__(self, graph: Graph, spec: ProgramSpec) -> None:
        """Bind ``spec`` to ``graph``, whose executor holds pins on its constants already
        (the tracer's or the loader's): the program owns them from now on."""
        self.graph = graph
        self.spec = spec
        # The body's name in the devices' caches: a fresh operand id, released when the
        # program goes, as an operand's is, so that the devices drop the compiled body.
        self._constant_ids = tuple(o.id for o in spec.constants)
        self._alias = _aliases(spec.body.inputs)
        self._same_results = _aliases(spec.body.outputs)  # one tensor returned twice
        self._keywords: tuple[Any, ...] = spec.args[1][1][1]  # the traced keyword names
        self._since = graph.executor.rebind_count  # rebinds before this are not its concern
        self._values = has_values(spec.args)  # plain values: compared leaf by leaf
        self._modes: tuple[Callable[[], tuple[bool, ...]], tuple[bool, ...]] | None = None
        self._key: list[int] = [0]  # the body's name (one box: the finalizer reads it too)
        self._sending = threading.Lock()  # the body's name and whether it was sent
        self._name(spec.body, self._constant_ids)
        weakref.finalize(self, _release, graph.executor, self._constant_ids, self._key)

    def _name(self, body: SubGraphParam, reading: tuple[int, ...]) -> None:
        """Give ``body`` (reading the constants ``reading``) a fresh name, to be sent first."""
        key = self._key[0] = next(self.graph._operand_ids)
        self._sent = False
        self._first = dataclasses.replace(body, program=key)
        self._named = SubGraphParam((), program=key, by_name=True)
        self._reading = reading

    def __len__(self) -> int:
        """How many operators one call runs."""
        return len(self.spec.body.operators)

    def __repr__(self) -> str:
        spec = self.spec
        return (
            f"Program({spec.name}: {plural(len(self), 'operator')}, "
            f"{plural(len(spec.inputs), 'input')}, {plural(len(spec.constants), 'constant')}, "
            f"{plural(len(spec.results), 'result')})"
        )

    def save(self, path: Any) -> None:
        """Write the program and its constants' values to ``path`` (``dtorch.load_program``)."""
        from dtorch.program.files import save_program  # files.py imports this module

        save_program(self, path)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the program on new arguments; returns what the function returned, with new
        tensors (not yet computed, as any operator's results)."""
        if kwargs and tuple(kwargs) != self._keywords and self.spec.any_keyword_order:
            kwargs = _in_order(kwargs, self._keywords)  # named parameters: a mapping
        tree, tensors = flatten((args, kwargs), _is_tensor)
        spec = self.spec
        if tree != spec.args or self._values:
            wrong = _call_difference(spec.args, tree)
            if wrong is not None:
                raise TraceError(f"{spec.name}: {wrong}")
        if self._modes is not None:
            self._check_modes()
        self._check(tensors)
        graph = self.graph
        ids = graph._operand_ids
        outputs = tuple(
            [Operand(next(ids), r.shape, r.dtype, r.mesh, r.placements) for r in spec.results]
        )
        op_id = graph.new_operator_id()
        span = caller_span(_OWN_FRAMES)
        # one call at a time from here to the send: a call from another thread may rename the
        # body (a constant rebound), and a by-name call must follow its body's first send
        with self._sending:
            inputs = tuple([t._operand.id for t in tensors]) + self._current_constant_ids()
            param = self._named if self._sent else self._first
            op = Operator(
                op_id, f"{spec.name}_{op_id}", param, inputs, tuple([o.id for o in outputs]),
                span,
            )  # fmt: skip
            try:
                graph.executor.submit((op, outputs))
            except KeyboardInterrupt:  # while waiting for room: queued (see record.emit_one)
                self._sent = True
                [Tensor._wrap(graph, o) for o in outputs]
                raise
            self._sent = True
        handles = [Tensor._wrap(graph, o) for o in outputs]
        for index, first in self._same_results:  # the same handle, as the function returned
            handles[index] = handles[first]
        return unflatten(spec.result, handles)

    def _check_modes(self) -> None:
        """TraceError if a traced module's train/eval mode changed: the body holds the
        operators of the traced mode (BatchNorm's batch statistics, dropout or not)."""
        modes, traced = self._modes  # type: ignore[misc]
        if modes() != traced:
            raise TraceError(
                f"{self.spec.name}: a module's train/eval mode changed since it was traced "
                "(.train() or .eval()), and the program replays the traced mode's operators: "
                "trace again in the new mode"
            )

    def _current_constant_ids(self) -> tuple[int, ...]:
        """The constants' ids, following handles rebound since the trace (``t.data = other``:
        the program reads ``other`` from then on, as eager code reading ``t`` would)."""
        executor = self.graph.executor
        rebound, ambiguous = executor.rebound, executor.ambiguous
        untouched = not rebound or rebound.keys().isdisjoint(self._constant_ids)
        if untouched and (not ambiguous or ambiguous.keys().isdisjoint(self._constant_ids)):
            return self._constant_ids
        ids = tuple([c.id for c in self.current_constants()])
        if ids != self._reading:  # the cached body reads the constants by id: a new body
            self.graph.executor.release(self._key[0])  # the devices drop the old one
            rename = dict(zip(self._constant_ids, ids, strict=True))
            self._name(renamed_constants(self.spec.body, rename), ids)
        return ids

    def current_constants(self) -> tuple[Operand, ...]:
        """The values the program reads as its constants now: the traced ones, or what their
        handles were rebound to since (TraceError where that is unlike the traced value)."""
        executor = self.graph.executor
        rebound, ambiguous = executor.rebound, executor.ambiguous
        name = self.spec.name
        since = self._since
        return tuple(
            [
                _followed(name, i, c, rebound, ambiguous, since)
                for i, c in enumerate(self.spec.constants)
            ]
        )

    def _check(self, tensors: list[Any]) -> None:
        """TraceError naming the first tensor argument unlike the traced one."""
        for index, (tensor, traced) in enumerate(zip(tensors, self.spec.inputs, strict=True)):
            operand = tensor._operand
            if tensor._graph is not self.graph:
                raise TraceError(
                    f"{self.spec.name}: tensor argument {index} belongs to graph "
                    f"{tensor._graph.id}; the program runs on graph {self.graph.id}"
                )
            if (
                operand.shape != traced.shape
                or operand.dtype != traced.dtype
                or operand.placements != traced.placements
                or operand.mesh != traced.mesh
            ):
                raise TraceError(
                    f"{self.spec.name}: tensor argument {index} is {operand.describe()}, but "
                    f"the program was traced with {traced.describe()}{_meshes(operand, traced)} "
                    "(trace it again for other shapes, dtypes, meshes or placements)"
                )
        for index, first in self._alias:
            if tensors[index]._operand.id != tensors[first]._operand.id:
                raise TraceError(
                    f"{self.spec.name}: tensor arguments {first} and {index} were one tensor "
                    "when the program was traced; pass one tensor for both again"
                )

    def summary(self) -> str:
        """A fixed-width table of what one call runs: a row per operator (name, kind, what it
        reads, output shapes, dtypes, meshes and placements, the user line) and, for each
        redistribution, the collectives it issues; see ``dtorch.program.summary``.

        Example:
            >>> import dtorch
            >>> mesh = dtorch.init_device_mesh("cpu", 2)
            >>> x = dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Shard(0)])
            >>> program = dtorch.trace(lambda t: t.redistribute(mesh, [dtorch.Replicate()]), x)
            >>> print(program.summary().splitlines()[1])
            collectives per call: all_gather 1
        """
        from dtorch.program.summary import summary  # loaded when a picture is asked for

        return summary(self.spec)

    def to_dot(self) -> str:
        """Graphviz DOT text of the program's data flow (inputs, constants, operators,
        results; redistributions labelled with their collectives); needs nothing installed.
        See ``dtorch.program.picture``.

        Example:
            >>> import dtorch
            >>> program = dtorch.trace(lambda t: t.relu(), dtorch.zeros(3))
            >>> print(program.to_dot().splitlines()[0])
            digraph "<lambda>" {
        """
        from dtorch.program.picture import to_dot  # loaded when a picture is asked for

        return to_dot(self.spec)

    def render(self, path: str | os.PathLike[str], format: str | None = None) -> Path:
        """Write the picture to ``path`` as SVG, PNG or PDF (format from the suffix unless
        given; ``.dot`` writes the DOT text) with Graphviz's ``dot`` program; without it,
        GraphvizMissingError says what to install. Returns the path written.

        Example:
            >>> import dtorch
            >>> program = dtorch.trace(lambda t: t.relu(), dtorch.zeros(3))
            >>> program.render("program.png", format="bmp")
            Traceback (most recent call last):
            ...
            ValueError: render: unknown format 'bmp'; one of dot, eps, gif, ...
        """
        from dtorch.program.picture import render  # loaded when a picture is asked for

        return render(self.spec, path, format)


def _release(executor: Any, constant_ids: tuple[int, ...], key: list[int]) -> None:
    """A program went: unpin its constants, and release its name, which makes the devices
    drop its compiled body (after the calls queued before)."""
    executor.unpin(constant_ids)
    executor.release(key[0])


def _followed(
    name: str, index: int, traced: Operand, rebound: dict[int, Any], ambiguous: dict[int, int],
    since: int,
) -> Operand:  # fmt: skip
    """Constant ``index`` after the rebinds of its handles (``Executor.rebind``) made since
    the program read it (the executor's ``rebind_count`` was ``since``)."""
    operand = traced
    while True:
        if ambiguous.get(operand.id, 0) > since:
            raise TraceError(
                f"{name}: constant {index} ({traced.describe()}) had several handles (an alias: "
                "detach(), .data, a Parameter of a tensor still held) and one of them was "
                "rebound (t.data = other); eager code reading another one would read the old "
                "value, and the program cannot tell which it read: trace again"
            )
        if operand.id not in rebound:
            break
        new = rebound[operand.id]
        if new is None:
            raise TraceError(
                f"{name}: constant {index} ({traced.describe()}) was rebound to a tensor of "
                "another graph (t.data = other); the program runs on its own graph: rebind "
                "it to a tensor of that graph, or trace again"
            )
        operand = new
    if operand is not traced and not _same_layout(operand, traced):
        raise TraceError(
            f"{name}: constant {index} was rebound (t.data = other) to {operand.describe()}"
            f"{_meshes(operand, traced)}, but the program was traced with "
            f"{traced.describe()}; rebind it to a tensor like the traced one, or trace again"
        )
    return operand


def _same_layout(a: Operand, b: Operand) -> bool:
    return (a.shape, a.dtype, a.placements, a.mesh) == (b.shape, b.dtype, b.placements, b.mesh)


def _call_difference(traced: Any, called: Any) -> str | None:
    """``difference`` of the (args, kwargs) trees, naming positional and keyword arguments."""
    if len(traced[1]) != 2 or len(called[1]) != 2:  # not (args, kwargs): the generic words
        return difference(traced, called)
    (args, kwargs), (new_args, new_kwargs) = traced[1], called[1]
    wrong = difference(args, new_args, "positional arguments")
    if wrong is None:
        return difference(kwargs, new_kwargs, "keyword arguments")
    moved = [k for k in new_kwargs[1] if k not in kwargs[1]]  # p(t=x) of a traced p(x)
    if moved and len(new_args[1]) < len(args[1]):
        wrong += f" ({moved} given by keyword, traced as positional arguments: pass them so)"
    return wrong


def _module_modes(
    fn: Callable[..., Any], called: list[Any]
) -> Callable[[], tuple[bool, ...]] | None:
    """The train/eval flags of every module ``fn`` is (or is a bound method of) and of every
    module ``called`` during the trace, with their submodules, read through the module
    protocol (``modules()``, ``training``); None if there is none. The modules are listed
    once, at the trace: a call reads their flags only."""
    owner = getattr(fn, "__self__", fn)
    found: dict[int, Any] = {}
    for module in {id(m): m for m in (owner, *called)}.values():  # one walk per module
        walk = getattr(module, "modules", None)
        if callable(walk):
            found.update((id(m), m) for m in walk())
    if not found:
        return None
    # from each instance's dict, where modules keep the flag: reading the attribute would
    # go through dtorch's training descriptor, three times the cost, for every submodule
    states = [vars(m) for m in found.values()]
    return lambda: tuple([bool(state.get("training", False)) for state in states])


def _takes_any_keywords(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` has a ``**kwargs`` parameter (which it may iterate in call order); a
    module's are its ``forward``'s (``__call__`` takes any)."""
    forward = getattr(fn, "forward", None)
    target = forward if callable(forward) and not inspect.isroutine(fn) else fn
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # no signature to read: take it as named parameters
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _in_order(kwargs: dict[str, Any], keywords: tuple[Any, ...]) -> dict[str, Any]:
    """``kwargs`` in the traced order of ``keywords`` when they are the same names (a call
    names its keyword arguments in any order); else as they are, for the refusal."""
    if kwargs.keys() != set(keywords):
        return kwargs
    return {key: kwargs[key] for key in keywords}


def _meshes(operand: Operand, traced: Operand) -> str:
    """The two meshes in full where they differ (``describe`` shows a mesh's shape alone,
    and meshes of one shape differ in their devices or dim names), and the placements in
    full where only what ``describe`` leaves out differs (a ``cat``'s sub-split mark)."""
    if operand.mesh != traced.mesh:
        return f"; its mesh is {operand.mesh!r}, the traced one {traced.mesh!r}"
    if operand.placements != traced.placements and operand.describe() == traced.describe():
        return (
            f"; its placements are {list(operand.placements)}, the traced {list(traced.placements)}"
        )
    return ""


def _aliases(placeholders: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """(position, first position) for inputs (results) traced as the same tensor as an
    earlier one."""
    first: dict[int, int] = {}
    pairs = []
    for index, placeholder in enumerate(placeholders):
        if placeholder in first:
            pairs.append((index, first[placeholder]))
        else:
            first[placeholder] = index
    return tuple(pairs)


def trace(fn: Callable[..., Any], *example_args: Any, **example_kwargs: Any) -> Program:
    """Run ``fn(*example_args, **example_kwargs)`` once and return it as a ``Program``.

    The program's inputs are the dtorch tensors among the arguments (any nesting of tuples,
    lists and dicts; other leaves must be None, bool, int, float or str and are fixed), its
    results the tensors ``fn`` returns, its constants the tensors ``fn`` reads without
    computing them (``fn`` gets handles of its own for its input tensors, so that a tensor
    passed in and also read from its closure is an input and a constant). A function that
    reads a value (``item()``, ``tolist()``, a Python condition on a tensor), calls
    ``sync()`` or draws random numbers is refused (TraceError naming the line). ``fn``'s
    operators run once, as an eager call. A program refuses calls once the train/eval mode
    of a module differs from the one it had when the trace ended: the module traced (or
    whose method was), and every module ``fn`` called, with their submodules.

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> x = dtorch.ones(4, 2, device_mesh=mesh, placements=[dtorch.Shard(0)])
        >>> program = dtorch.trace(lambda t, scale=2.0: {"y": t.sum(1) * scale}, x)
        >>> program(x)["y"].tolist()
        [4.0, 4.0, 4.0, 4.0]
    """
    if not callable(fn):
        raise TypeError(f"dtorch.trace: expected a callable, got {type(fn).__name__}")
    name = readable_path(getattr(fn, "__qualname__", None) or type(fn).__name__)  # any str
    args, inputs = flatten((example_args, example_kwargs), _is_tensor)
    graph = graph_of(f"dtorch.trace({name})", inputs) if inputs else Graph.default_graph()
    tracer = Tracer(graph, name, inputs)
    own = tracer.inputs  # handles of their own: a closure's read of an input is a constant
    own_args, own_kwargs = unflatten(args, own)
    rebinds = graph.executor.rebinds_here()  # a rebind inside fn (this thread's): refused
    try:
        with tracer:
            returned = fn(*own_args, **own_kwargs)
        if graph.executor.rebinds_here() != rebinds:
            raise TraceError(
                f"dtorch.trace({name}): the function rebinds a tensor (t.data = other) at "
                f"{graph.executor.last_rebind_here()!r}, which a program cannot replay; rebind "
                "outside the traced function, or change the values in place (t.copy_(other))"
            )
        result, results = flatten(returned, _is_tensor, "the result")
        for tensor in results:
            if tensor._graph is not graph:
                raise TraceError(
                    f"dtorch.trace({name}): a result belongs to another graph than the one "
                    "traced (its tensor arguments', or without any the thread's default "
                    "graph); trace under `with graph.as_default():` the graph it computes on"
                )
        spec = build_spec(tracer, own, args, results, result)
    except BaseException:
        tracer.release_pins()
        raise
    finally:
        with contextlib.suppress(GraphError):  # a broken graph runs nothing any more
            tracer.bind_inputs()
    spec = dataclasses.replace(spec, any_keyword_order=not _takes_any_keywords(fn))
    program = Program(graph, spec)
    modes = _module_modes(fn, tracer.modules)
    if modes is not None:
        program._modes = (modes, modes())
    return program
