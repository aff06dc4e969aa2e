"""Graph: an independent eager graph with its own controller thread and runner.

Every ``Tensor`` belongs to one graph; operators record into their inputs' graph. Each thread
has a default graph (``Graph.default_graph()``, also ``dtorch.default_graph()``), created on
first use. A graph's threads stop when the graph is closed or garbage collected.

Example:
    >>> import dtorch
    >>> g = dtorch.Graph()
    >>> with g.device_mesh_guard(dtorch.init_device_mesh("cpu", 2)):
    ...     t = dtorch.ones(4, graph=g)
    >>> t.placements, t.to_torch().tolist()
    ([Replicate()], [1.0, 1.0, 1.0, 1.0])
    >>> g.sync()
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NoReturn, SupportsIndex, TypeVar

import torch

from dtorch.api.dims import as_flag
from dtorch.api.future import VoidFutureCollect, make_void_future, memory_stats_future
from dtorch.api.graph_option import GraphOption
from dtorch.errors import GraphError, MeshError, raised_anew
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import MemoryKind
from dtorch.ir.params import MemoryParam, OpParam, SyncParam
from dtorch.ir.rules.cache import InferenceCache
from dtorch.ir.span import Span
from dtorch.memory_stats import MemoryStat, MemoryStats
from dtorch.runtime.executor import Executor
from dtorch.runtime.factory import make_runner
from dtorch.runtime.gc_policy import collected

if TYPE_CHECKING:
    pass

#: Seconds a closing graph gives its threads to finish queued work.
CLOSE_TIMEOUT = 30.0
#: What a second close() waits beyond that for the first one to end (its pool's stop).
_CLOSE_LOCK_MARGIN = 15.0


def _check_dtype(dtype: object) -> None:
    """GraphError unless ``dtype`` can be a default dtype (a floating torch.dtype)."""
    if not isinstance(dtype, torch.dtype):
        raise GraphError(f"default_dtype must be a torch.dtype, got {dtype!r}")
    if not dtype.is_floating_point:  # torch.set_default_dtype refuses them too
        raise GraphError(
            f"default_dtype must be a floating dtype (float32, float64, float16, bfloat16), "
            f"got {dtype}"
        )


_V = TypeVar("_V")


class _GuardStack(Generic[_V]):
    """One kind of guard override on a graph (``dtype_guard``, ``device_mesh_guard``),
    innermost last, in a context variable: each thread, and each asyncio task (a copy of
    its creator's), has its own, so a guard held across an ``await`` is not another task's."""

    def __init__(self, name: str) -> None:
        self._var: contextvars.ContextVar[tuple[_V, ...]] = contextvars.ContextVar(name)

    def top(self) -> _V | None:
        stack = self._var.get(())
        return stack[-1] if stack else None

    def replace_top(self, value: _V) -> bool:
        """Make ``value`` the innermost override, if there is one (False: none)."""
        stack = self._var.get(())
        if stack:
            self._var.set((*stack[:-1], value))
        return bool(stack)

    @contextmanager
    def pushed(self, value: _V) -> Iterator[_V]:
        prior = self._var.get(())
        token = self._var.set((*prior, value))
        try:
            yield value
        finally:  # also drops an inner guard a generator left open
            try:
                self._var.reset(token)
            except ValueError:  # left in another context than entered: the same end
                self._var.set(prior)


_LIVE: weakref.WeakSet[Graph] = weakref.WeakSet()  # the graphs a forked child must refuse


class _ForkHook:
    """The after-fork hook's one registration: with the first graph, not at import (a program
    that never makes a graph forks untouched)."""

    lock = threading.Lock()
    registered = False


def _watch_forks(graph: Graph) -> None:
    """Note ``graph`` for the after-fork hook; register that hook with the first graph."""
    _LIVE.add(graph)
    if _ForkHook.registered:
        return
    with _ForkHook.lock:
        if not _ForkHook.registered:
            os.register_at_fork(after_in_child=_refuse_inherited)
            _ForkHook.registered = True


def _refuse_inherited() -> None:
    """In a forked child: break every graph inherited from the parent, whose threads did not
    come along, so that its next operator or fetch raises at once (not after the comm
    timeout); mark it closed, so that the child's default graph is a new one of its own."""
    for graph in list(_LIVE):
        graph._close_lock = threading.RLock()  # a parent's thread closing it held the old one
        graph._writes = threading.RLock()
        if graph._finalizer.detach() is None:  # closed in the parent already
            continue
        graph.executor.refuse_inherited(  # no lock: a parent's thread may have held one
            GraphError(
                f"this graph belongs to process {graph._pid}; a forked child must create its "
                "own Graph"
            )
        )
    _LIVE.clear()


def mesh_of(spec: DeviceMesh | str | torch.device) -> DeviceMesh:
    """A mesh from a mesh, a device type (``"cpu"``) or a device (``"cuda:1"``)."""
    if isinstance(spec, DeviceMesh):
        return spec
    try:  # a string as it is: torch.device would wrap an index past 127 ('cpu:300')
        return DeviceMesh(spec if isinstance(spec, str) else torch.device(spec))
    except (RuntimeError, TypeError, MeshError) as error:
        raise MeshError(
            f"{spec!r} is not a mesh or a device; accepted: a DeviceMesh, 'cpu', 'cuda', "
            "'cuda:N', 'cpu:N' or a torch.device"
        ) from error


class Graph:
    """An eager graph: records operators from any thread, runs them asynchronously."""

    #: The modules called in each thread where a trace runs, by thread id (``dtorch.trace``
    #: lists them; a program checks their train/eval modes at every call). Empty otherwise,
    #: which ``nn.Module.__call__`` reads first: a call pays nothing more when none runs.
    traced_module_calls: ClassVar[dict[int, list[Any]]] = {}

    _ids = itertools.count()  # graph ids: unique in this process

    def __init__(self, option: GraphOption | None = None) -> None:
        if option is not None and not isinstance(option, GraphOption):
            raise GraphError(
                f"Graph(option=...) takes a GraphOption or None, got {type(option).__name__} "
                f"{option!r}; e.g. Graph(GraphOption(per_device_per_process=True))"
            )
        self._option = option or GraphOption()
        self._id = next(Graph._ids)
        self._name = ""
        self._operator_ids = itertools.count(1)
        self._operand_ids = itertools.count(1)
        self._promise_ids = itertools.count(1)
        self._default_mesh = DeviceMesh("cpu")
        self._default_dtype = torch.float32
        # each thread's (each task's) guard overrides: one guard is not graph-wide
        self._dtype_guards: _GuardStack[torch.dtype] = _GuardStack("dtorch-dtype-guards")
        self._mesh_guards: _GuardStack[DeviceMesh] = _GuardStack("dtorch-mesh-guards")
        self._inferences = InferenceCache()  # rule answers, reused across a loop's iterations
        self.runner = make_runner(self._option, name=f"dtorch-g{self._id}")
        try:
            self.executor = Executor(self.runner, name=f"dtorch-g{self._id}")
        except BaseException:  # its threads did not start: the runner's stop again
            self.runner.close(CLOSE_TIMEOUT, discard=True)
            raise
        self._pid = os.getpid()  # the process whose threads run it (a forked child's refusal)
        self._closing = False  # close() was called (it may have been interrupted)
        # a second thread's close waits for the first's; the same thread's (a signal handler's,
        # a callback's) goes on: the finalizer, detached already, tells it there is nothing left
        self._close_lock = threading.RLock()
        # held while a thread records a write into a tensor (``convert.writer``): an in-place
        # operator reads the tensor and writes it back as two operators, and another
        # thread's write recorded between them would be lost
        self._writes = threading.RLock()
        self._finalizer = self._finalize_when_collected()
        _watch_forks(self)

    def _finalize_when_collected(self) -> weakref.finalize:
        """The close that runs when the graph is collected or the interpreter exits."""
        close = functools.partial(self.executor.close, CLOSE_TIMEOUT)
        here = self.executor.joins_this_thread
        return weakref.finalize(self, collected, close, self._pid, here)

    # --- identity and defaults --------------------------------------------------------------
    @staticmethod
    def default_graph() -> Graph:
        """The calling thread's default graph (created on first use)."""
        graph: Graph | None = getattr(_THREAD, "graph", None)
        if graph is None or graph.closed:
            graph = _THREAD.graph = Graph()
        return graph

    @contextmanager
    def as_default(self) -> Iterator[Graph]:
        """Within the block, this graph is the calling thread's default graph: tensors made
        without ``graph=`` and ``dtorch.nn`` layers are built on it (torch's
        ``tf.Graph.as_default`` pattern). The previous default is restored after the block,
        also when it raises; other threads are not affected.

        Example:
            >>> import dtorch
            >>> g = dtorch.Graph()
            >>> with g.as_default():
            ...     layer = dtorch.nn.Linear(2, 3)
            ...     inside = dtorch.Graph.default_graph()
            >>> inside is g, layer.weight.graph is g, dtorch.Graph.default_graph() is g
            (True, True, False)
            >>> g.close()
        """
        if self.closed:
            raise GraphError(f"Graph {self._id} is closed; it cannot become the default graph")
        previous = getattr(_THREAD, "graph", None)
        _THREAD.graph = self
        try:
            yield self
        finally:
            _THREAD.graph = previous

    @property
    def id(self) -> int:
        return self._id

    def set_name(self, name: str) -> None:
        """Name this graph (for the program's own bookkeeping; '' until set)."""
        if not isinstance(name, str):
            raise GraphError(f"Graph.set_name takes a str, got {type(name).__name__}")
        self._name = name

    def get_name(self) -> str:
        """The name given by ``set_name`` ('' when none)."""
        return self._name

    def _set_default_dtype(self, dtype: torch.dtype) -> None:
        """DTorch's setter of ``default_dtype``."""
        self.default_dtype = dtype

    @property
    def option(self) -> GraphOption:
        return self._option

    @property
    def closed(self) -> bool:
        return self._closing or not self._finalizer.alive

    @property
    def default_device_mesh(self) -> DeviceMesh:
        """The calling thread's innermost ``device_mesh_guard`` mesh, else the graph's own."""
        mesh = self._mesh_guards.top()
        return self._default_mesh if mesh is None else mesh

    @default_device_mesh.setter
    def default_device_mesh(self, mesh: DeviceMesh | str | torch.device) -> None:
        # inside this thread's guard it changes that guard's mesh, which ends with the block
        if not self._mesh_guards.replace_top(mesh_of(mesh)):
            self._default_mesh = mesh_of(mesh)

    @property
    def default_dtype(self) -> torch.dtype:
        """The calling thread's innermost ``dtype_guard`` dtype, else the graph's own."""
        dtype = self._dtype_guards.top()
        return self._default_dtype if dtype is None else dtype

    @default_dtype.setter
    def default_dtype(self, dtype: torch.dtype) -> None:
        _check_dtype(dtype)
        # inside this thread's guard it changes that guard's dtype, which ends with the block
        if not self._dtype_guards.replace_top(dtype):
            self._default_dtype = dtype

    @contextmanager
    def device_mesh_guard(self, mesh: DeviceMesh | str | torch.device) -> Iterator[DeviceMesh]:
        """Within the block, tensors this thread (this asyncio task) creates without a mesh or
        device use ``mesh`` (other threads and tasks keep theirs)."""
        with self._mesh_guards.pushed(mesh_of(mesh)) as pushed:
            yield pushed

    @contextmanager
    def dtype_guard(self, dtype: torch.dtype | None) -> Iterator[torch.dtype]:
        """Within the block, floating tensors this thread (this asyncio task) creates without a
        dtype use ``dtype`` (None: float32; other threads and tasks keep theirs)."""
        dtype = torch.float32 if dtype is None else dtype
        _check_dtype(dtype)
        with self._dtype_guards.pushed(dtype) as pushed:
            yield pushed

    def satisfy(self, mesh: DeviceMesh | str | torch.device) -> bool:
        """Whether this graph can run operators on ``mesh`` on this machine (a device, such
        as ``"cuda:1"``, stands for its one-device mesh); False once it is closed."""
        return not self.closed and self.runner.satisfy(mesh_of(mesh))

    def require(self, mesh: DeviceMesh, op: str) -> None:
        """Refuse at the call a mesh this graph cannot run on, as torch's ``.cuda()`` raises
        at once without CUDA (otherwise the first kernel would fail, at the value's fetch)."""
        if mesh.device_kind != "cpu" and not self.runner.satisfy(mesh):
            raise MeshError(
                f"{op}: this graph cannot run on {mesh!r} here (torch.cuda.is_available() is "
                f"{torch.cuda.is_available()}, {torch.cuda.device_count()} GPUs; a process "
                "graph has one GPU per worker); accepted: a mesh for which graph.satisfy(mesh) "
                "is True, such as a 'cpu' mesh"
            )

    # --- recording (used by dtorch.api) -----------------------------------------------------
    def new_operator_id(self) -> int:
        return next(self._operator_ids)

    def new_promise_name(self) -> str:
        return f"g{self._id}.p{next(self._promise_ids)}"

    @contextmanager
    def promise_name(self) -> Iterator[str]:
        """A fresh promise name for a block that registers a promise under it and records
        the operator that settles it: should the block raise before that operator is queued
        (a Ctrl-C), the registration goes too, since nothing would settle it."""
        name = self.new_promise_name()
        try:
            yield name
        except BaseException:
            self.executor.promises.pop(name)
            raise

    def submit(self, op: Operator, outputs: tuple[Operand, ...]) -> None:
        self.executor.submit((op, outputs))

    def record_system(
        self, name: str, param: OpParam, span: Span, inputs: tuple[int, ...] = ()
    ) -> None:
        """Record an operator without outputs that settles a promise (Sync, Memory: every
        stream sees it; GetTensor: the streams of its one input)."""
        op_id = self.new_operator_id()
        self.submit(Operator(op_id, f"{name}_{op_id}", param, inputs, (), span), ())

    # --- synchronisation and memory ---------------------------------------------------------
    def sync_future(self) -> VoidFutureCollect:
        """A future that completes when every operator recorded so far has run; it fails with
        the first kernel failure since the previous sync that no future has raised already
        (a failure the user caught from ``to_torch()`` is not raised again here)."""
        broken = self.executor.broken
        if broken is not None:  # a worker died: every later sync raises why
            raise raised_anew(broken)
        with self.promise_name() as name:
            handle, future, waiting = make_void_future(self, name)
            self.record_system("sync", SyncParam(handle), Span.unknown())
        return VoidFutureCollect([future], waiting)

    def sync(self) -> None:
        """Wait until every operator recorded so far has run; raise the first kernel failure
        since the previous sync that no future has raised already (naming the operator and
        the user's line)."""
        self.sync_future().get()

    def empty_cache(self) -> None:
        """Release cached device memory (CUDA caching allocator; a no-op on CPU)."""
        self.record_system("empty_cache", MemoryParam(MemoryKind.EMPTY_CACHE), Span.unknown())
        self.sync()

    def get_memory_stats(
        self, device_mesh: DeviceMesh | str | torch.device | None = None, reset_peak: bool = False
    ) -> MemoryStats:
        """Bytes of shards held per device (``dtorch.memory_stats``), for the devices of
        ``device_mesh`` (a mesh, or a device string/``torch.device`` as a one-device mesh; every
        device used so far when None); ``reset_peak`` starts the peaks again from now. A wait
        that times out (``FutureTimeoutError``) names the workers that have not answered."""
        mesh = None if device_mesh is None else _stats_mesh(device_mesh)
        if mesh is not None:  # a mesh of another kind has no rows here; the CPU's would answer
            self.require(mesh, "get_memory_stats")
        reset_peak = as_flag(reset_peak, "get_memory_stats", "reset_peak")
        with self.promise_name() as name:
            handle, future = memory_stats_future(self, name)
            param = MemoryParam(MemoryKind.STATS, reset_peak, handle)
            self.record_system("memory_stats", param, Span.unknown())
        rows = {d: MemoryStat(d, a, p) for d, a, p in future.get().tolist()}
        devices = sorted(rows) if mesh is None else mesh.device_ids
        return MemoryStats(tuple(rows.get(d, MemoryStat(d, 0, 0)) for d in devices))

    def close(self) -> None:
        """Run what is queued, then stop this graph's threads; later recording raises. A
        close interrupted (Ctrl-C) is taken up again by the next ``close()``, the collector
        or the interpreter's exit (which drops what is still queued): threads left running
        as the interpreter tears down would abort it. A second thread's ``close()`` returns
        once the first one's has (or raises as it did not finish)."""
        if self.executor.joins_this_thread():  # a callback on a thread the close joins
            return self._close_here()
        if not self._close_lock.acquire(timeout=CLOSE_TIMEOUT + _CLOSE_LOCK_MARGIN):
            raise GraphError(
                f"Graph {self._id}: another thread's close() did not finish within "
                f"{CLOSE_TIMEOUT + _CLOSE_LOCK_MARGIN:g} s"
            )
        try:
            self._close_here()
        finally:
            self._close_lock.release()

    def _close_here(self) -> None:
        if self._finalizer.detach() is None:  # closed already (or closing in this thread)
            return
        self._closing = True
        try:
            self.executor.close(CLOSE_TIMEOUT)  # here and now, whatever thread this is
        except BaseException as error:  # Ctrl-C: the rest of the close is taken up later (not
            if not isinstance(error, Exception):  # threads that did not stop in time: a retry
                self._finalizer = self._finalize_when_collected()  # would wait as long)
            raise

    def __enter__(self) -> Graph:
        """``with Graph(...) as g:`` closes ``g`` when the block ends, also when it raises
        (as ``close()``: what is queued runs first). It does not make ``g`` the default graph:
        ``as_default()`` does that.

        Example:
            >>> import dtorch
            >>> with dtorch.Graph() as g:
            ...     total = dtorch.ones(3, graph=g).sum().item()
            >>> total, g.closed
            (3.0, True)
        """
        if self.closed:
            raise GraphError(f"Graph {self._id} is closed; it cannot be entered again")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __copy__(self) -> Graph:
        """A graph is a runtime (threads, workers), shared like a device: a copy is itself,
        so ``copy.deepcopy`` of a model or a tensor keeps their graph."""
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Graph:
        return self

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        raise TypeError("a dtorch.Graph cannot be pickled: it is a running runtime, not data")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _DefaultGraph):  # dtorch.default_graph stands for a Graph
            other = other()
        return self is other

    def __hash__(self) -> int:
        return hash(self._id)

    def __repr__(self) -> str:
        return f"Graph(id={self._id}, default_device_mesh={self.default_device_mesh!r})"

    def __str__(self) -> str:
        return f"dtorch.Graph with id: {self._id}"


def _stats_mesh(spec: object) -> DeviceMesh:
    # get_memory_stats names itself in the error, which mesh_of cannot
    try:
        return mesh_of(spec)  # type: ignore[arg-type]
    except MeshError as error:
        raise MeshError(f"get_memory_stats(device_mesh=...): {error}") from None


_THREAD = threading.local()  # the calling thread's default graph (API: Graph.default_graph())


class _DefaultGraph:
    """``dtorch.default_graph``: the calling thread's default graph, looked up at each use.

    Attribute access goes to ``Graph.default_graph()`` of the thread that uses it (nothing is
    made at import), and calling it returns that Graph.

    Example:
        >>> import dtorch
        >>> dtorch.default_graph() is dtorch.Graph.default_graph()
        True
        >>> dtorch.default_graph.id == dtorch.Graph.default_graph().id
        True
        >>> dtorch.default_graph == dtorch.Graph.default_graph() == dtorch.default_graph
        True
        >>> isinstance(dtorch.default_graph, dtorch.Graph)
        True
    """

    __slots__ = ()

    @property  # type: ignore[misc]  # a property where object's __class__ is an attribute
    def __class__(self) -> type:
        """Graph: ``isinstance(dtorch.default_graph, dtorch.Graph)`` holds, as in DTorch, where
        a Graph stands there (``type()`` still tells the proxy)."""
        return Graph

    def __call__(self) -> Graph:
        return Graph.default_graph()

    def __getattr__(self, name: str) -> object:
        return getattr(Graph.default_graph(), name)

    def __setattr__(self, name: str, value: object) -> None:
        setattr(Graph.default_graph(), name, value)  # ``default_graph.default_dtype = ...``

    # Compared and hashed as the Graph it stands for: ``dtorch.default_graph == g``.
    def __eq__(self, other: object) -> bool:
        return Graph.default_graph() == other

    def __hash__(self) -> int:
        return hash(Graph.default_graph())

    def __repr__(self) -> str:
        return "dtorch.default_graph (the calling thread's default Graph)"


default_graph = _DefaultGraph()


def resolved(graph: Graph | None) -> Graph | None:
    """``graph``, or the Graph ``dtorch.default_graph`` stands for when it is that object
    (so ``graph=dtorch.default_graph`` works wherever a Graph is taken)."""
    return Graph.default_graph() if isinstance(graph, _DefaultGraph) else graph
