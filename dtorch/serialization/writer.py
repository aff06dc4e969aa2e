"""serialize: any value built of registered types -> one payload.

Writing happens in three steps, each a pass over whole columns rather than a call per node:

1. *discover*: starting from the root, take every pending value of one type at once,
   explode it into field columns, and collect the records its fields refer to. A value is
   identified by ``id()``, so a record referenced twice becomes one node (identity sharing).
2. *order*: ``dtorch.serialization.order`` puts the nodes into groups so that every
   reference points backwards (and refuses reference cycles).
3. *emit*: number the nodes, encode each group's columns with the field codecs, and pack
   ``[types, groups, root]`` with MessagePack:

   * ``types``: ``[tag, [field name, ...]]`` per type used, so a reader can tell which fields
     the writer knew (fields it lacks take their defaults);
   * ``groups``: ``[type slot, count, [column, ...]]`` in decode order;
   * ``root``: the root value (a native value, or ``[node index]``).

Example:
    >>> from dtorch.ir.span import Span
    >>> span = Span("m.py", 3, 1)
    >>> payload = serialize_value((span, span))
    >>> payload[:4]
    b'DTSZ'
"""

from __future__ import annotations

import gc
import operator
from collections import deque
from collections.abc import Callable
from itertools import compress
from typing import Any, TypeVar

from dtorch.errors import SerializationError
from dtorch.serialization.catalog import DEFAULT_REGISTRY
from dtorch.serialization.fields import NATIVE_TYPES, WriteContext, repeats
from dtorch.serialization.order import Group, plan
from dtorch.serialization.registry import Field, NodeType, TypeRegistry
from dtorch.serialization.wire import DEFAULT_BACKEND, Backend, frame, pack

_T = TypeVar("_T")


def without_gc(work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)`` with the cyclic garbage collector paused (it would rescan the growing
    node table many times over). ``work``'s temporaries die when it returns, before the
    collector resumes, so only the value it returns is left for the next young collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return work(*args)
    finally:
        if enabled:
            gc.enable()


class _Discovery:
    """Step 1: every node reachable from the root, in batches per type.

    Every reference gets a fresh provisional number; ``setdefault`` on the identity table
    of the referenced type's family keeps the first one an object got, so a column of
    references is numbered (and its new objects found) with one dict operation per
    reference, at C speed.
    """

    __slots__ = ("batches", "count", "edges", "pending", "registry", "seen")

    def __init__(self, registry: TypeRegistry) -> None:
        self.registry = registry
        self.seen: dict[int, dict[int, int]] = {}  # family -> id -> provisional number
        self.count = 0
        self.pending: dict[NodeType, tuple[list[Any], list[int]]] = {}
        self.batches: dict[NodeType, list[Group]] = {}
        self.edges: dict[NodeType, set[NodeType]] = {}

    def run(self, root: Any) -> None:
        if type(root) not in NATIVE_TYPES:
            self.route([root], set(), "the value given to serialize")
        while self.pending:
            node_type, (objs, keys) = self.pending.popitem()
            self.visit(node_type, objs, keys)

    def visit(self, node_type: NodeType, objs: list[Any], keys: list[int]) -> None:
        columns = node_type.explode(objs)
        edges = self.edges.setdefault(node_type, set())
        refs: dict[int, list[int]] = {}
        for i in node_type.child_fields:
            field = node_type.fields[i]
            kids = _field_step(node_type, field, field.codec.children, columns[i])
            refs[i] = (
                self.route(kids, edges, f"{node_type.tag}.{field.name}", field) if kids else []
            )
        self.batches.setdefault(node_type, []).append(Group(node_type, objs, keys, columns, refs))

    def route(
        self, kids: list[Any], edges: set[NodeType], where: str, field: Field | None = None
    ) -> list[int]:
        """Number ``kids`` and queue the new ones under their types."""
        if not repeats(kids):
            return self.number(kids, edges, where, field)
        # Few values referenced many times (spans, meshes, placements): number the distinct
        # ones, then look every reference up in that small, cache-friendly table.
        ids = list(map(id, kids))
        distinct = list(dict(zip(ids, kids, strict=True)).values())
        numbers = self.number(distinct, edges, where, field)
        table = dict(zip(map(id, distinct), numbers, strict=True))
        return list(map(table.__getitem__, ids))

    def number(
        self, kids: list[Any], edges: set[NodeType], where: str, field: Field | None
    ) -> list[int]:
        """``route`` for one reference each: check, number, queue what is new."""
        types = list(map(type, kids))
        kinds = set(types)
        if field is not None:
            _check_kinds(field, kinds, where)
        targets = {cls: self.registry.node_type(cls, where) for cls in kinds}
        edges.update(targets.values())
        candidates = range(self.count, self.count + len(kids))
        self.count += len(kids)
        families = {self.registry.families[cls] for cls in kinds}
        if len(families) == 1:  # every typed column
            table = self.seen.setdefault(families.pop(), {})
            known = len(table)
            numbers = list(map(table.setdefault, map(id, kids), candidates))
            fresh = len(table) - known
        else:
            numbers, fresh = self.number_mixed(kids, types, candidates)
        if fresh == len(kids):  # all new and distinct: no need to pick them out
            self.queue(targets, kids, numbers, types)
        elif fresh:
            first = list(map(operator.eq, numbers, candidates))
            new = [list(compress(column, first)) for column in (kids, numbers, types)]
            self.queue(targets, *new)
        return numbers

    def number_mixed(
        self, kids: list[Any], types: list[type], candidates: range
    ) -> tuple[list[int], int]:
        """Numbers for an untyped column (container items), and how many were new."""
        tables = {cls: self.table(cls) for cls in set(types)}
        distinct = {id(t): t for t in tables.values()}.values()
        known = sum(map(len, distinct))
        numbers = [
            tables[t].setdefault(id(k), c) for k, t, c in zip(kids, types, candidates, strict=True)
        ]
        return numbers, sum(map(len, distinct)) - known

    def queue(
        self, targets: dict[type, NodeType], objs: list[Any], numbers: list[int], types: list[type]
    ) -> None:
        if len(targets) == 1:
            (target,) = targets.values()
            pending_objs, pending_numbers = self.pending.setdefault(target, ([], []))
            pending_objs.extend(objs)
            pending_numbers.extend(numbers)
            return
        # Several types (params of different kinds): send every value to its type's lists,
        # the append calls mapped at C speed.
        pending = {cls: self.pending.setdefault(t, ([], [])) for cls, t in targets.items()}
        obj_lists = {cls: lists[0] for cls, lists in pending.items()}
        number_lists = {cls: lists[1] for cls, lists in pending.items()}
        deque(map(list.append, map(obj_lists.__getitem__, types), objs), maxlen=0)
        deque(map(list.append, map(number_lists.__getitem__, types), numbers), maxlen=0)

    def table(self, cls: type) -> dict[int, int]:
        """The identity table of ``cls``'s family."""
        return self.seen.setdefault(self.registry.families[cls], {})

    def key_of(self, obj: Any) -> int:
        """The provisional number of a node."""
        return self.table(type(obj))[id(obj)]


def _check_kinds(field: Field, kinds: set[type], where: str) -> None:
    """The values a typed field refers to must be of the types it declares."""
    allowed = field.codec.child_classes
    if allowed is not None and not kinds <= allowed:
        bad = ", ".join(sorted(k.__name__ for k in kinds - allowed))
        raise SerializationError(f"{where}: expected {field.codec.describe()}, got {bad}")


def _field_step(node_type: NodeType, field: Field, step: Any, *args: Any) -> Any:
    """Run one field codec step, naming the field in its error."""
    try:
        return step(*args)
    except SerializationError as exc:
        raise SerializationError(f"{node_type.tag}.{field.name}: {exc}") from None


class _Emitter:
    """Step 3: renumber the nodes in group order, encode every group's columns."""

    __slots__ = ("ctx", "discovery", "header", "renumber", "slots")

    def __init__(self, discovery: _Discovery, groups: list[Group]) -> None:
        self.discovery = discovery
        self.renumber = [0] * discovery.count  # provisional number -> node index
        start = 0
        for group in groups:
            end = start + len(group.keys)
            deque(map(self.renumber.__setitem__, group.keys, range(start, end)), maxlen=0)
            start = end
        self.ctx = WriteContext()
        self.slots: dict[NodeType, int] = {}
        self.header: list[tuple[str, tuple[str, ...]]] = []

    def group(self, group: Group) -> tuple[int, int, list[list[Any]]]:
        node_type = group.node_type
        if node_type not in self.slots:
            self.slots[node_type] = len(self.header)
            self.header.append((node_type.tag, node_type.field_names))
        columns = group.columns if group.columns is not None else node_type.explode(group.objs)
        wire = [self.column(group, i, column) for i, column in enumerate(columns)]
        return self.slots[node_type], len(group.objs), wire

    def column(self, group: Group, i: int, column: list[Any]) -> list[Any]:
        field = group.node_type.fields[i]
        refs: list[int] = []
        if field.codec.has_children:
            numbers = group.refs[i] if group.refs is not None else self.numbers(field, column)
            refs = list(map(self.renumber.__getitem__, numbers))
        try:
            return field.codec.encode(column, refs, self.ctx)
        except SerializationError as exc:
            raise SerializationError(f"{group.node_type.tag}.{field.name}: {exc}") from None

    def numbers(self, field: Field, column: list[Any]) -> list[int]:
        return list(map(self.discovery.key_of, field.codec.children(column)))

    def root(self, root: Any) -> Any:
        if type(root) in NATIVE_TYPES:
            return root
        return (self.renumber[self.discovery.key_of(root)],)


def serialize_value(
    obj: Any, registry: TypeRegistry = DEFAULT_REGISTRY, backend: Backend = DEFAULT_BACKEND
) -> bytes:
    """``obj`` as one payload (the engine behind ``dtorch.serialization.serialize``)."""
    return without_gc(_serialize, obj, registry, backend)


def _serialize(obj: Any, registry: TypeRegistry, backend: Backend) -> bytes:
    discovery = _Discovery(registry)
    discovery.run(obj)
    groups = plan(discovery.batches, discovery.edges, discovery.key_of)
    emitter = _Emitter(discovery, groups)
    wire_groups = [emitter.group(group) for group in groups]
    document = pack(backend, (emitter.header, wire_groups, emitter.root(obj)))
    return b"".join(frame(document, emitter.ctx.blobs, emitter.ctx.blob_end))
