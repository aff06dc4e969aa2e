"""DeviceHost: the kernel streams of one process and the routing of batches onto them.

Devices are logical: device ``d`` belongs to party ``d % parties``, so a mesh of 432 CPU
devices runs on a bounded number of streams. A host runs the parties ``first ..
first + count - 1`` as its streams: thread mode has one host running every party, process mode
one host per worker process running its own party (and skipping the operators of devices it
does not hold; every worker receives every batch). For each operator the host sends one item
to each of its streams that holds one of the operator's devices, carrying the operand metadata
the kernels need (it keeps the metadata of live operands; a batch's no-hold ids leave after
it).

Example:
    >>> from dtorch.runtime.board import LocalFailureBoard
    >>> from dtorch.runtime.handlers import StreamServices
    >>> from dtorch.runtime.reports import ReportQueue
    >>> services = StreamServices(None, LocalFailureBoard(), ReportQueue(), False)
    >>> host = DeviceHost(PartyLayout(parties=4, first=1, count=2), services, "doc")
    >>> [s.party for s in host.streams], host.layout.party_of(5), host.layout.party_of(4)
    ([1, 2], 1, 0)
    >>> host.close(timeout=5.0)
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any

from dtorch.errors import GraphError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import SubGraphParam
from dtorch.kernels.base import KernelContext
from dtorch.kernels.table import LOCAL_KERNELS
from dtorch.runtime.gc_policy import exiting
from dtorch.runtime.handlers import EVERY_STREAM_KINDS, StreamServices
from dtorch.runtime.shards import failure_of
from dtorch.runtime.stream import FAIL, FREE, PROGRESS, RESET, KernelStream
from dtorch.runtime.subgraph import CompiledBody, compile_body, plan_item

Route = tuple[tuple[int, tuple[int, ...]], ...]  # (local stream index, its devices), per stream

#: Mesh objects whose routes are kept by id (each entry keeps its mesh alive).
MESH_ROUTES_LIMIT = 1024
#: Released operands whose metadata a host keeps (at least; at most twice as many): an
#: operator read one of them on the client before another thread's rebind released it.
RELEASED_METAS = 4096


#: How long a host whose start failed waits for each stream it had started to stop.
_START_FAILED_JOIN_S = 5.0
#: How often a close waiting for its streams looks whether the interpreter began to exit.
_EXIT_POLL_S = 0.1


def forget_oldest(released: dict[int, Any]) -> None:
    """Keep the last ``RELEASED_METAS`` to twice as many released operands: past that, the
    oldest half goes (``released`` is in release order, as a dict keeps its keys).

    Example:
        >>> released = {i: None for i in range(2 * RELEASED_METAS + 1)}
        >>> forget_oldest(released); len(released), next(iter(released)) == RELEASED_METAS + 1
        (4096, True)
    """
    if len(released) > 2 * RELEASED_METAS:
        for operand_id in list(itertools.islice(released, len(released) - RELEASED_METAS)):
            del released[operand_id]


@dataclass(frozen=True, slots=True)
class PartyLayout:
    """``parties`` parties in all; this host runs ``count`` of them, from ``first``."""

    parties: int
    first: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.parties < 1 or self.count < 1 or not 0 <= self.first <= self.parties - self.count:
            raise GraphError(f"{self} is not a layout: need 0 <= first < first+count <= parties")

    def party_of(self, device: int) -> int:
        return device % self.parties

    def describe(self, party: int) -> str:
        """Which devices ``party`` holds, in words: the ids it takes on any mesh (a party
        hosts every device id that is ``party`` modulo the parties, of whatever mesh).

        Example:
            >>> PartyLayout(2).describe(1)
            'devices 1, 3, 5, ... (the ids that are 1 modulo 2)'
        """
        if self.parties == 1:
            return "every device"
        step = self.parties
        first = f"devices {party}, {party + step}, {party + 2 * step}, ..."
        return f"{first} (the ids that are {party} modulo {step})"


class DeviceHost:
    """Streams for the parties of ``layout`` this process runs; see the module docstring.

    ``inline``: the streams run their items in the thread that hands them the batch (a
    worker process's main thread) instead of threads of their own. ``threads``: torch's
    intra-op threads in each stream thread (None: torch's default).
    """

    def __init__(
        self,
        layout: PartyLayout,
        services: StreamServices,
        name: str,
        *,
        inline: bool = False,
        threads: int | None = None,
    ) -> None:
        self.layout = layout
        self.services = services
        self.streams: list[KernelStream] = []
        try:
            for p in range(layout.first, layout.first + layout.count):
                label = f"{name}-stream-{p}"
                stream = KernelStream(label, services, p, inline=inline, threads=threads)
                self.streams.append(stream)
        except BaseException:  # out of threads, say: the streams started so far stop again
            for stream in self.streams:
                stream.ask_to_stop()
            for stream in self.streams:
                stream.join(_START_FAILED_JOIN_S)
            raise
        self._metas: dict[int, Operand] = {}
        #: the metadata of the last released operands, oldest first: an operator another
        #: thread queued after a rebind released its input fails instead (``_read_released``)
        self._released: dict[int, Operand | None] = {}
        self._reread: list[int] = []  # ids of them read again in the batch at hand
        self._routes: dict[frozenset[DeviceMesh], Route] = {}
        self._mesh_routes: dict[int, tuple[Route, DeviceMesh]] = {}
        self._programs: dict[int, CompiledBody] = {}  # traced programs' bodies, by name (an
        # id of the operand ids: released when the program goes, see ``_add_frees``)
        self._used = [False] * layout.count  # per stream: has it ever been sent an operator
        self._closed = False

    def execute(self, batch: ExecuteBatch, progress: int = 0, carried: bool = False) -> None:
        """Hand ``batch`` to the streams; with ``progress``, each reports once it is done.
        ``carried``: the batch carries the metadata of the operands its operators read (a
        worker's), a released one's too (``_read_released`` then fails what reads it)."""
        metas = self._metas
        for operand in batch.operands:
            metas[operand.id] = operand
        released = self._released
        if carried and released:
            for operand in batch.operands:
                if operand.id in released:  # read after its release: see _read_released
                    released[operand.id] = operand
                    del metas[operand.id]
        items: list[list[object]] = [[] for _ in self.streams]
        groups = self.services.groups
        meta, mesh_routes = metas.__getitem__, self._mesh_routes
        for op in batch.operators:  # the per-operator loop: no method call per op
            # Tuples by index for the usual arities: tuple(map(...)) costs three times as much
            # (and a comprehension builds a function object in Python 3.11).
            i, o = op.inputs, op.outputs
            try:  # free unless raised (Python 3.11)
                if len(i) == 2:
                    ins: tuple[Operand, ...] = (metas[i[0]], metas[i[1]])
                elif len(i) == 1:
                    ins = (metas[i[0]],)
                else:
                    ins = tuple(map(meta, i))
            except KeyError:
                ins = self._read_released(op, items)
            outs = (metas[o[0]],) if len(o) == 1 else tuple(map(meta, o))
            kind = op.param.kind
            if kind in EVERY_STREAM_KINDS:
                if kind is OpKind.SubGraph:
                    self._call(op, items)
                    continue
                for stream_items in items:
                    stream_items.append(KernelContext(op, ins, outs, (), groups))
                continue
            # A kind with a local kernel has every operand on one mesh (the rules refuse
            # others, and outputs take the inputs' mesh): its route is that mesh's, found by
            # the mesh object's id. Group kernels and handlers may span meshes.
            entry = mesh_routes.get(id((outs or ins)[0].mesh)) if kind in LOCAL_KERNELS else None
            route = entry[0] if entry is not None else self._route(ins, outs)
            for index, devices in route:
                items[index].append(KernelContext(op, ins, outs, devices, groups))
        no_hold = batch.no_hold
        if self._reread:  # released again (see ``_read_released``)
            no_hold += tuple(self._reread)
            self._reread.clear()
        self._finish_batch(no_hold, progress, items)

    def _read_released(self, op: Operator, items: list[list[object]]) -> tuple[Operand, ...]:
        """The inputs of ``op``, one of which was released before it came: another thread
        rebound the tensor (``t.data = other``) between reading it and queueing ``op``. Its
        metadata comes back from the recently released, its shards become a failure that
        names ``op`` (so ``op``, its dependents and its fetches fail, and the graph goes on),
        and it is released again after this batch. Long gone, the graph cannot go on."""
        metas = self._metas
        for operand_id in op.inputs:
            if operand_id in metas:
                continue
            meta = self._released.get(operand_id)
            if meta is None:
                raise GraphError(
                    f"{op.describe()} reads operand {operand_id}, which was released long "
                    f"before it came (another thread rebound the tensor it read: t.data = ...)"
                )
            metas[operand_id] = meta
            self._reread.append(operand_id)
            error = GraphError(
                f"its input {operand_id} was released before it ran: another thread rebound "
                f"the tensor it read (t.data = other) while this operator was being recorded"
            )
            for index, devices in self._route((meta,), ()):
                items[index].append(
                    (FAIL, (operand_id, devices, failure_of(op, devices[0], error)))
                )
        return tuple(metas[i] for i in op.inputs)

    def _call(self, op: Operator, items: list[list[object]]) -> None:
        """A traced program's call: its body's items for each stream (compiled and cached
        when the body comes with it; ``dtorch.runtime.subgraph``)."""
        param: SubGraphParam = op.param  # type: ignore[assignment]
        if not param.by_name:  # the first call: it carries the body, however empty
            self._programs[param.program] = compile_body(
                param, self._metas, len(self.streams), self._route, self.services.groups
            )
        body = self._programs.get(param.program)
        if body is None:
            raise GraphError(f"{op.describe()} names program {param.program}, never sent here")
        for index, stream_items in enumerate(items):
            stream_items.append(plan_item(body, op, index))

    def skip(self, no_hold: tuple[int, ...], progress: int = 0) -> None:
        """A batch with nothing for these streams: only its frees and its progress report."""
        self._finish_batch(no_hold, progress, [[] for _ in self.streams])

    def _finish_batch(
        self, no_hold: tuple[int, ...], progress: int, items: list[list[object]]
    ) -> None:
        used = self._used
        for index, stream_items in enumerate(items):
            if stream_items:
                used[index] = True
        if no_hold:
            self._add_frees(no_hold, items)
        for stream, stream_items in zip(self.streams, items, strict=True):
            if progress:
                stream_items.append((PROGRESS, progress))
            if stream_items:
                stream.push(stream_items)

    def _add_frees(self, no_hold: tuple[int, ...], items: list[list[object]]) -> None:
        """Free ``no_hold`` after the batch on every stream that ever ran an operator (the
        others hold nothing, and are not woken for every batch), and forget their metadata.
        A released id may name a program: its compiled body goes (the streams' queued calls
        hold what they run)."""
        for stream_items, used in zip(items, self._used, strict=True):
            if used:
                stream_items.append((FREE, no_hold))
        metas, programs, released = self._metas, self._programs, self._released
        for operand_id in no_hold:  # its metadata (None where this host never had it)
            released[operand_id] = metas.pop(operand_id, None)
        forget_oldest(released)
        if programs:
            for operand_id in no_hold:
                programs.pop(operand_id, None)

    def _route(self, ins: tuple[Operand, ...], outs: tuple[Operand, ...]) -> Route:
        first = (outs or ins)[0].mesh
        for operand in ins:
            if operand.mesh is not first:
                return self._route_meshes(ins + outs)
        for operand in outs:
            if operand.mesh is not first:
                return self._route_meshes(ins + outs)
        # One mesh object: keyed by its id (hashing a mesh costs a Python call); the entry
        # keeps the mesh alive, so the id cannot name another mesh meanwhile.
        entry = self._mesh_routes.get(id(first))
        if entry is None:
            if len(self._mesh_routes) >= MESH_ROUTES_LIMIT:  # meshes made in a loop
                self._mesh_routes.clear()
            entry = self._mesh_routes[id(first)] = (self._route_meshes(ins + outs), first)
        return entry[0]

    def _route_meshes(self, operands: tuple[Operand, ...]) -> Route:
        """The route of operands on several meshes (or on equal meshes that are not one
        object), by the set of meshes."""
        key = frozenset(o.mesh for o in operands)
        route = self._routes.get(key)
        if route is None:
            if len(self._routes) >= MESH_ROUTES_LIMIT:
                self._routes.clear()
            route = self._routes[key] = self._build_route(operands)
        return route

    def _build_route(self, operands: tuple[Operand, ...]) -> Route:
        devices = sorted({d for o in operands for d in o.mesh.device_ids})
        layout = self.layout
        per_stream = [
            tuple(d for d in devices if layout.party_of(d) == layout.first + i)
            for i in range(layout.count)
        ]
        return tuple((i, ds) for i, ds in enumerate(per_stream) if ds)

    def reset(self, timeout: float) -> None:
        """Drop every shard, failure and operand of the graph that used this host (after its
        queued work): the host serves a new graph next. Its collective groups outlive the
        graph (a worker pool's), so they are repaired too, once every stream is idle: a
        collective that failed in that graph leaves nothing that could reach the next one."""
        events = [threading.Event() for _ in self.streams]
        for stream, event in zip(self.streams, events, strict=True):
            stream.push([(RESET, event)])
        deadline = time.monotonic() + timeout  # one budget for every stream
        for stream, event in zip(self.streams, events, strict=True):
            if not event.wait(max(deadline - time.monotonic(), 0)):
                raise GraphError(f"stream {stream.name} did not finish its work within {timeout} s")
        groups = self.services.groups
        if groups is not None:
            groups.reset()
        self._metas.clear()
        self._released.clear()
        self._routes.clear()
        self._mesh_routes.clear()
        self._programs.clear()
        self._used = [False] * self.layout.count

    def _drop_queued(self) -> None:
        """Every stream drops what it has not started (its current kernel runs to its end)
        and stops after it; the collectives in flight are abandoned (a peer's part was
        dropped: nobody waits for it)."""
        for stream in self.streams:
            stream.discard_queued()  # a stop asked before goes too: asked again
            stream.ask_to_stop()
        groups = self.services.groups
        if groups is not None:
            groups.abandon("the graph was closed as the interpreter exits")

    def _join_streams(self, deadline: float, discarded: bool) -> list[str]:
        """The names of the streams still running at ``deadline``. Should the interpreter
        begin to exit meanwhile (a close the collector began on a thread of its own, which
        the exit waits for), what they have queued is dropped then, as a close at exit drops
        it: kernels still running as the interpreter tears down abort the process."""
        while True:
            if not discarded and exiting():
                discarded = True
                self._drop_queued()
            running = [s for s in self.streams if not s.join(0.0)]
            if not running or time.monotonic() >= deadline:
                return [s.name for s in running]
            running[0].join(min(_EXIT_POLL_S, max(deadline - time.monotonic(), 0.0)))

    def close(self, timeout: float, discard: bool = False) -> None:
        """Stop every stream (after its queued work; with ``discard``, after its current
        kernel, the collectives in flight aborted); GraphError naming those that hang. A
        close that did not finish (interrupted, or timed out) can be called again: it goes on
        (with ``discard`` as the interpreter exits, when the streams must stop at once)."""
        if self._closed:
            return
        if discard:
            self._drop_queued()
        else:
            for stream in self.streams:  # every stream winds down at once, not one after another
                stream.ask_to_stop()
        stuck = self._join_streams(time.monotonic() + timeout, discard)
        if stuck:
            raise GraphError(f"streams {stuck} did not stop within {timeout} s")
        self._closed = True
