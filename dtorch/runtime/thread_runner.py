"""ThreadRunner: devices as KernelStream threads of this process (thread mode).

Devices are logical: device ``d`` runs on stream ``d % num_streams``, so a mesh of 432 CPU
devices runs on a bounded number of threads. For each operator the runner sends one item to
every stream that holds one of its devices, carrying the operand metadata the kernels need
(the runner keeps the metadata of live operands; the no-hold ids of a batch leave after it).

Example:
    >>> runner = ThreadRunner(num_streams=2)
    >>> runner.stream_count
    2
    >>> runner.close(timeout=5.0)
"""

from __future__ import annotations

import torch

import dtorch.kernels.convert
import dtorch.kernels.create  # noqa: F401 - registers the Create kernel
from dtorch.comm.group import CommTopology, ThreadGroupManager
from dtorch.comm.namespace import CommNamespace
from dtorch.errors import GraphError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch, Operand
from dtorch.kernels.base import KernelContext
from dtorch.kernels.promises import KernelFailure, PromiseTable
from dtorch.kernels.table import LOCAL_KERNELS
from dtorch.options import GlobalOption
from dtorch.runtime.handlers import EVERY_STREAM_KINDS, StreamServices
from dtorch.runtime.stream import FREE, KernelStream

Route = tuple[tuple[int, tuple[int, ...]], ...]  # (stream index, its devices), per stream

#: Mesh objects whose routes are kept by id (each entry keeps its mesh alive).
MESH_ROUTES_LIMIT = 1024


class ThreadRunner:
    """Runs every device's kernels on ``num_streams`` threads of this process."""

    def __init__(self, num_streams: int = 2, name: str = "dtorch") -> None:
        if num_streams < 1:
            raise GraphError(f"a thread runner needs at least one stream, got {num_streams}")
        self._promises = PromiseTable()
        failed: dict[int, KernelFailure] = {}
        # a namespace of its own: two graphs of one process must not share group stores
        self._groups = ThreadGroupManager(
            CommTopology.striped(num_streams), namespace=CommNamespace.create()
        )
        services = StreamServices(self._promises, self._groups, failed, _validate())
        self._streams = [KernelStream(f"{name}-stream-{i}", services) for i in range(num_streams)]
        self._metas: dict[int, Operand] = {}
        self._routes: dict[frozenset[DeviceMesh], Route] = {}
        self._mesh_routes: dict[int, tuple[Route, DeviceMesh]] = {}
        self._used = [False] * num_streams  # per stream: has it ever been sent an operator
        self._closed = False

    @property
    def promises(self) -> PromiseTable:
        return self._promises

    @property
    def stream_count(self) -> int:
        return len(self._streams)

    @property
    def streams(self) -> list[KernelStream]:
        return self._streams

    def satisfy(self, mesh: DeviceMesh) -> bool:
        return satisfy(mesh)

    def execute(self, batch: ExecuteBatch) -> None:
        metas = self._metas
        for operand in batch.operands:
            metas[operand.id] = operand
        items: list[list[object]] = [[] for _ in self._streams]
        groups, promises = self._groups, self._promises
        meta, mesh_routes = metas.__getitem__, self._mesh_routes
        for op in batch.operators:  # the per-operator loop: no method call per op
            # Tuples by index for the usual arities: tuple(map(...)) costs three times as much
            # (and a comprehension builds a function object in Python 3.11).
            i, o = op.inputs, op.outputs
            if len(i) == 2:
                ins: tuple[Operand, ...] = (metas[i[0]], metas[i[1]])
            elif len(i) == 1:
                ins = (metas[i[0]],)
            else:
                ins = tuple(map(meta, i))
            outs = (metas[o[0]],) if len(o) == 1 else tuple(map(meta, o))
            kind = op.param.kind
            if kind in EVERY_STREAM_KINDS:
                for stream_items in items:
                    stream_items.append(KernelContext(op, ins, outs, (), groups, promises))
                continue
            # A kind with a local kernel has every operand on one mesh (the rules refuse
            # others, and outputs take the inputs' mesh): its route is that mesh's, found by
            # the mesh object's id. Group kernels and handlers may span meshes.
            entry = mesh_routes.get(id((outs or ins)[0].mesh)) if kind in LOCAL_KERNELS else None
            route = entry[0] if entry is not None else self._route(ins, outs)
            for index, devices in route:
                items[index].append(KernelContext(op, ins, outs, devices, groups, promises))
        used = self._used
        for index, stream_items in enumerate(items):
            if stream_items:
                used[index] = True
        if batch.no_hold:
            self._add_frees(batch.no_hold, items)
        for stream, stream_items in zip(self._streams, items, strict=True):
            if stream_items:
                stream.push(stream_items)

    def _add_frees(self, no_hold: tuple[int, ...], items: list[list[object]]) -> None:
        """Free ``no_hold`` after the batch on every stream that ever ran an operator (the
        others hold nothing, and are not woken for every batch), and forget their metadata."""
        for stream_items, used in zip(items, self._used, strict=True):
            if used:
                stream_items.append((FREE, no_hold))
        for operand_id in no_hold:
            self._metas.pop(operand_id, None)

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
            route = self._routes[key] = self._build_route(operands)
        return route

    def _build_route(self, operands: tuple[Operand, ...]) -> Route:
        devices = sorted({d for o in operands for d in o.mesh.device_ids})
        count = len(self._streams)
        per_stream = [tuple(d for d in devices if d % count == i) for i in range(count)]
        return tuple((i, ds) for i, ds in enumerate(per_stream) if ds)

    def close(self, timeout: float) -> None:
        if self._closed:
            return
        self._closed = True
        stuck = [s.name for s in self._streams if not s.stop(timeout)]
        self._groups.close()
        self._promises.fail_all(GraphError("the graph was closed before this value was computed"))
        if stuck:
            raise GraphError(f"streams {stuck} did not stop within {timeout} s")


def satisfy(mesh: DeviceMesh) -> bool:
    """CPU meshes are logical (always runnable); CUDA ids must exist (or be emulated)."""
    if mesh.device_type == "cpu":
        return True
    if not torch.cuda.is_available():
        return False
    if GlobalOption.get_dtensor_in_same_device():
        limit = GlobalOption.get_num_gpu_when_enable_dtensor_in_same_device()
    else:
        limit = torch.cuda.device_count()
    return max(mesh.device_ids) < limit


def _validate() -> bool:
    return GlobalOption.get_validate_kernel_input_output()
