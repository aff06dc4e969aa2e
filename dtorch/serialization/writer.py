"""serialize: any value built of registered types -> one payload.

Writing happens in three steps, each a pass over whole columns rather than a call per node:

1. *discover*: starting from the root, take every pending value of one type at once,
   explode it into field columns and ``scan`` each column with its field codec: a check,
   the conversion to wire values, and provisional numbers for the records it refers to. A
   value is identified by ``id()``, so a record referenced twice becomes one node (identity
   sharing); the records seen for the first time are queued under their types.
2. *order*: ``dtorch.serialization.order`` puts the nodes into groups so that every
   reference points backwards (and refuses reference cycles).
3. *emit*: number the nodes in group order, swap the provisional numbers of every reference
   column for node indices, and pack ``[types, groups, root]`` with MessagePack:

   * ``types``: ``[tag, [field name, ...]]`` per type used, so a reader can tell which fields
     the writer knew (fields it lacks take their defaults);
   * ``groups``: ``[type slot, count, [column, ...]]`` in decode order;
   * ``root``: the root value (a native value, or ``[node index]``).

Small values of plain records - such as the wire batch of up to 64 operators, see
``rowwriter.ROOT_LIMIT`` - are written by the row writer (``dtorch.serialization.rowwriter``)
instead, in the same format: its per-record compiled checks cost less than the calls per
column here when most types have one or two records.

Example:
    >>> from dtorch.ir.span import Span
    >>> span = Span("m.py", 3, 1)
    >>> payload = serialize_value((span, span))
    >>> payload[:4]
    b'DTSZ'
"""

from __future__ import annotations

import gc
import itertools
import operator
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from itertools import compress
from typing import Any, TypeVar

from dtorch.errors import SerializationError
from dtorch.serialization.catalog import DEFAULT_REGISTRY
from dtorch.serialization.columns import (
    NATIVE_TYPES,
    SHORT_COLUMN,
    Repeated,
    WriteContext,
    index_repeats,
    names,
    repeats,
)
from dtorch.serialization.order import Batch, Group, plan
from dtorch.serialization.registry import NodeType, TypeRegistry
from dtorch.serialization.rowwriter import rows_payload
from dtorch.serialization.wire import DEFAULT_BACKEND, Backend, frame, pack

_T = TypeVar("_T")
_SORT_DISTINCT = 8192  # columns this long are checked for repeats by sorting their ids
_SEVERAL = 6  # columns of several types up to this length are numbered value by value
_ONE_BYTE = 128  # MessagePack writes ints below this in one byte
_Chunk = tuple[list[Any], Sequence[int]]


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


def scan_columns(node_type: NodeType, columns: Sequence[list[Any]], walk: _Discovery) -> list[Any]:
    """Every field codec's ``scan`` of its column, naming the field in errors."""
    states = []
    for field, column in zip(node_type.fields, columns, strict=True):
        try:
            states.append(field.codec.scan(column, walk))
        except SerializationError as exc:
            raise SerializationError(f"{node_type.tag}.{field.name}: {exc}") from None
    return states


class _Discovery:
    """Step 1: every node reachable from the root, in batches per type (the ``Walk`` that
    field codecs number their references with).

    A reference gets a fresh provisional number; ``setdefault`` on the identity table of the
    referenced type's family keeps the first number an object got, so a column of references
    is numbered, and its new objects found, with one dict operation per reference at C speed.
    """

    __slots__ = (
        "batches",
        "count",
        "ctx",
        "edges",
        "families",
        "here",
        "lazy",
        "pending",
        "registry",
        "tables",
        "where",
    )

    def __init__(self, registry: TypeRegistry) -> None:
        self.registry = registry
        self.families: dict[int, dict[int, int]] = {}  # family -> id -> provisional number
        self.tables: dict[type, dict[int, int]] = {}  # class -> its family's table
        # id(table) -> nodes numbered but not yet entered in that (empty) table: a family
        # referenced by one column (an operator list, operator params) never needs its table
        self.lazy: dict[int, list[_Chunk]] = {}
        self.count = 0
        self.pending: dict[NodeType, list[_Chunk]] = {}
        self.batches: dict[NodeType, list[Batch]] = {}
        self.edges: dict[NodeType, set[NodeType]] = {}
        self.here: set[NodeType] = set()  # the types the batch being scanned refers to
        self.ctx = WriteContext()
        self.where = "the value given to serialize"

    def run(self, root: Any) -> None:
        if type(root) not in NATIVE_TYPES:
            self.refs([root], None, _any_value)
        pending, batches, edges = self.pending, self.batches, self.edges
        while pending:
            node_type, chunks = pending.popitem()
            objs, keys = chunks[0] if len(chunks) == 1 else _join(chunks)
            here = self.here = set()
            self.where = node_type.tag
            states = scan_columns(node_type, node_type.explode(objs), self)
            edges.setdefault(node_type, set()).update(here)
            batches.setdefault(node_type, []).append(Batch(node_type, objs, keys, states, here))

    def add_blob(self, data: memoryview) -> list[int]:
        return self.ctx.add_blob(data)

    def refs(
        self, kids: list[Any], classes: frozenset[type] | None, describe: Callable[[], str]
    ) -> Sequence[int]:
        if len(kids) == 1:
            return [self.ref(kids[0], classes, describe)]
        if len(kids) > SHORT_COLUMN and repeats(kids):
            return self.refs_repeated(kids, classes, describe)
        kinds = set(map(type, kids))
        if classes is not None and not kinds <= classes:
            raise SerializationError(f"expected {describe()}, got {names(kinds - classes)}")
        if len(kinds) != 1:
            if len(kids) <= _SEVERAL:  # cheaper one by one than split by type
                return [self.ref(kid, None, describe) for kid in kids]
            return self.refs_of_several(kids, kinds) if kinds else []
        (cls,) = kinds
        target = self.registry.by_type.get(cls) or self.target(cls)
        self.here.add(target)
        table = self.tables.get(cls)
        if table is None:
            table = self.table(cls)
        numbers, new = self.number(kids, table)
        if new is not None:
            self.pending.setdefault(target, []).append(new)
        return numbers

    def ref(self, kid: Any, classes: frozenset[type] | None, describe: Callable[[], str]) -> int:
        """``refs`` of one value (a root, a singleton group's field), without the column
        machinery."""
        cls = type(kid)
        if classes is not None and cls not in classes:
            raise SerializationError(f"expected {describe()}, got {cls.__name__}")
        target = self.registry.by_type.get(cls) or self.target(cls)
        self.here.add(target)
        table = self.tables.get(cls)
        if table is None:
            table = self.table(cls)
        if id(table) in self.lazy:
            self.enter(table)
        number = table.get(id(kid))
        if number is None:
            number = table[id(kid)] = self.count
            self.count += 1
            self.pending.setdefault(target, []).append(([kid], [number]))
        return number

    def refs_repeated(
        self, kids: list[Any], classes: frozenset[type] | None, describe: Callable[[], str]
    ) -> Sequence[int]:
        """``refs`` for a column that mostly repeats a few objects (spans, meshes): number
        the distinct ones; each reference is renumbered from them when it is emitted."""
        found = index_repeats(kids)
        if found is None:  # an object first seen late, or a short column: a full table
            ids = list(map(id, kids))
            by_id = dict(zip(ids, kids, strict=True))
            numbers = self.refs(list(by_id.values()), classes, describe)
            return list(map(dict(zip(by_id, numbers, strict=True)).__getitem__, ids))
        positions, distinct = found
        return Repeated(positions, self.refs(distinct, classes, describe))

    def number(self, kids: list[Any], table: dict[int, int]) -> tuple[Sequence[int], _Chunk | None]:
        """Numbers for ``kids`` (one family), and the new ones with their numbers, if any."""
        base, known = self.count, len(table)
        self.count = base + len(kids)
        candidates = range(base, self.count)
        if not known and id(table) not in self.lazy and _distinct(kids):
            self.lazy[id(table)] = [(kids, candidates)]  # the first column of its family
            return candidates, (kids, candidates)
        if id(table) in self.lazy:
            self.enter(table)
            known = len(table)
        numbers = list(map(table.setdefault, map(id, kids), candidates))
        fresh = len(table) - known
        if fresh == len(kids):  # all new and distinct: their numbers are the candidates
            return candidates, (kids, candidates)
        if not fresh:
            return numbers, None
        first = list(map(operator.eq, numbers, candidates))
        return numbers, (list(compress(kids, first)), list(compress(numbers, first)))

    def refs_of_several(self, kids: list[Any], kinds: set[type]) -> Sequence[int]:
        """``refs`` for a column of several types: every param kind, or container items."""
        by_type = self.registry.by_type
        targets = {cls: by_type.get(cls) or self.target(cls) for cls in kinds}
        self.here.update(targets.values())
        tables = {id(t): t for t in map(self.table, kinds)}
        if len(tables) > 1:
            return self.number_mixed(kids, targets)
        numbers, new = self.number(kids, tables.popitem()[1])
        if new is not None:
            self.queue(new, targets)
        return numbers

    def number_mixed(self, kids: list[Any], targets: dict[type, NodeType]) -> list[int]:
        """Numbers for a column whose types lie in several families (container items): each
        family's part numbered as one column, the numbers put back in the column's order."""
        families: dict[int, tuple[dict[int, int], list[_Chunk]]] = {}
        for cls, part in _split(kids, range(len(kids))).items():
            table = self.table(cls)
            families.setdefault(id(table), (table, []))[1].append(part)
        numbers = [0] * len(kids)
        for table, parts in families.values():
            objs, positions = parts[0] if len(parts) == 1 else _join(parts)
            found, new = self.number(objs, table)
            deque(map(operator.setitem, itertools.repeat(numbers), positions, found), maxlen=0)
            if new is not None:
                self.queue(new, targets)
        return numbers

    def queue(self, new: _Chunk, targets: dict[type, NodeType]) -> None:
        """Queue new nodes of several types under their types."""
        for cls, chunk in _split(*new).items():
            self.pending.setdefault(targets[cls], []).append(chunk)

    def target(self, cls: type) -> NodeType:
        """The node type of ``cls`` (SerializationError if it has none)."""
        return self.registry.node_type(cls, self.where)

    def table(self, cls: type) -> dict[int, int]:
        """The identity table of ``cls``'s family."""
        table = self.tables.get(cls)
        if table is None:
            family = self.registry.families[cls]
            table = self.tables[cls] = self.families.setdefault(family, {})
        return table

    def enter(self, table: dict[int, int]) -> None:
        """Enter the nodes numbered lazily for ``table``'s family into it."""
        for objs, keys in self.lazy.pop(id(table), ()):
            table.update(zip(map(id, objs), keys, strict=True))

    def key_of(self, obj: Any) -> int:
        """The provisional number of a node."""
        table = self.tables[type(obj)]
        self.enter(table)
        return table[id(obj)]


def _split(objs: list[Any], keys: Sequence[int]) -> Mapping[type, _Chunk]:
    """New nodes of several types, with their numbers, split by type."""
    if len(objs) <= SHORT_COLUMN:  # a Python loop beats setting up the C-speed maps
        parts: dict[type, tuple[list[Any], list[int]]] = {}
        for obj, key in zip(objs, keys, strict=True):
            part = parts.get(type(obj))
            if part is None:
                part = parts[type(obj)] = ([], [])
            part[0].append(obj)
            part[1].append(key)
        return parts
    types = list(map(type, objs))
    # first-seen order, not a set's (an address order): the same bytes in every process
    obj_lists: dict[type, list[Any]] = {cls: [] for cls in dict.fromkeys(types)}
    key_lists: dict[type, list[int]] = {cls: [] for cls in obj_lists}
    # the appends mapped at C speed, each value to its type's list
    deque(map(list.append, map(obj_lists.__getitem__, types), objs), maxlen=0)
    deque(map(list.append, map(key_lists.__getitem__, types), keys), maxlen=0)
    return {cls: (obj_lists[cls], key_lists[cls]) for cls in obj_lists}


def _distinct(objs: list[Any]) -> bool:
    """Whether no object appears twice in ``objs``. On long columns sorting the ids beats a
    set of them (a set of 100,000 ids misses the cache on most inserts): objects made one
    after another have rising ids, which timsort takes as a few runs, and comparing
    neighbours reads memory in order."""
    if len(objs) < _SORT_DISTINCT:
        return len(set(map(id, objs))) == len(objs)
    ids = sorted(map(id, objs))
    return not any(map(operator.eq, ids, itertools.islice(ids, 1, None)))


def _any_value() -> str:
    return "any value"


def _join(chunks: list[_Chunk]) -> _Chunk:
    objs = list(itertools.chain.from_iterable(c[0] for c in chunks))
    return objs, list(itertools.chain.from_iterable(c[1] for c in chunks))


class _Emitter:
    """Step 3: number the nodes in group order and write every group's wire columns. A group
    refers only to earlier groups, so its references are renumbered once those are placed."""

    __slots__ = ("discovery", "header", "renumber", "slots", "start")

    def __init__(self, discovery: _Discovery) -> None:
        self.discovery = discovery
        self.renumber = [0] * discovery.count  # provisional number -> node index
        self.start = 0
        self.slots: dict[NodeType, int] = {}
        self.header: list[tuple[str, tuple[str, ...]]] = []

    def place(self, keys: Sequence[int]) -> None:
        start = self.start
        end = self.start = start + len(keys)
        if type(keys) is range:  # a batch of new nodes: a slice
            self.renumber[keys.start : keys.stop] = range(start, end)
        else:
            # operator.setitem, not the bound __setitem__ (a slot wrapper, which packs its
            # arguments into a tuple on every call): about 40% faster on long batches
            renumber = itertools.repeat(self.renumber)
            deque(map(operator.setitem, renumber, keys, range(start, end)), maxlen=0)

    def group(self, group: Group) -> tuple[int, int, list[Any]]:
        node_type = group[0].node_type
        slot = self.slots.get(node_type)
        if slot is None:
            slot = self.slots[node_type] = len(self.header)
            self.header.append((node_type.tag, node_type.field_names))
        for batch in group:
            self.place(batch.keys)
        if len(group) == 1:
            return slot, len(group[0].objs), self.wire(group[0])
        wires = [self.wire(batch) for batch in group]
        columns = [list(itertools.chain.from_iterable(parts)) for parts in zip(*wires, strict=True)]
        return slot, sum(len(batch.objs) for batch in group), columns

    def wire(self, batch: Batch) -> list[Any]:
        node_type = batch.node_type
        states = batch.states
        if states is None:
            states = scan_columns(node_type, node_type.explode(batch.objs), self.discovery)
        if not node_type.child_fields:
            return states
        wire = states.copy()
        fields = node_type.fields
        for i in node_type.child_fields:
            wire[i] = fields[i].codec.emit(states[i], self.renumber)
        return wire

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
    payload = rows_payload(obj, registry, backend)  # small values: a record at a time
    return payload if payload is not None else columns_payload(obj, registry, backend)


def columns_payload(obj: Any, registry: TypeRegistry, backend: Backend = DEFAULT_BACKEND) -> bytes:
    """``obj`` as a payload written a column at a time: any value (the writer of large ones,
    and of everything the row writer leaves to it).

    Example:
        >>> from dtorch.serialization.catalog import DEFAULT_REGISTRY
        >>> columns_payload([1, 2], DEFAULT_REGISTRY) == serialize_value([1, 2])
        True
    """
    discovery = _Discovery(registry)
    discovery.run(obj)
    small = discovery.count < _ONE_BYTE
    groups = plan(discovery.batches, discovery.edges, discovery.key_of, registry, small)
    emitter = _Emitter(discovery)
    wire_groups = [emitter.group(group) for group in groups]
    document = pack(backend, (emitter.header, wire_groups, emitter.root(obj)))
    return b"".join(frame(document, discovery.ctx.blobs, discovery.ctx.blob_end))
