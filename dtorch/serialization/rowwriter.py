"""The row writer: a payload written a record at a time, for small values such as wire batches.

The column writer (``dtorch.serialization.writer``) spends a few Python calls per type and per
column, which a batch of a few operators - some 15 types, most with one or two records - pays
in full. This writer walks the records breadth-first instead, turning each into a row with
its type's compiled ``scan`` (``dtorch.serialization.rows``), then numbers the nodes type by
type in the registry's rank order and writes each type's rows, references swapped for node
indices by ``emit``, as one group. The payload is the same format the column writer writes
(the same node per distinct record, the same groups), read by the same reader.

It writes only what it can write exactly: records of types with a row codec, without data
blobs, whose types do not refer to themselves in this payload (the registry's ranks then
order every reference backwards). For anything else - a tensor, a container, a nested
FuseParam, a value its checks refuse - it returns None, and the caller writes the value with
the column writer, which also names whatever is wrong with it.

Example:
    >>> from dtorch.ir.span import Span
    >>> from dtorch.serialization.catalog import DEFAULT_REGISTRY
    >>> from dtorch.serialization.writer import columns_payload
    >>> span = Span("m.py", 3, 1)
    >>> rows_payload(span, DEFAULT_REGISTRY) == columns_payload(span, DEFAULT_REGISTRY)
    True
    >>> rows_payload([span], DEFAULT_REGISTRY) is None  # a list: the column writer's
    True
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from dtorch.serialization.registry import NodeType, TypeRegistry
from dtorch.serialization.rows import Scan
from dtorch.serialization.wire import DEFAULT_BACKEND, Backend, frame, pack

_ONE_BYTE = 128  # MessagePack writes ints below this in one byte
_Found = tuple[NodeType, Scan, list[Any], list[tuple[Any, ...]]]


#: The row writer takes a value whose root refers to at most this many records directly (a
#: batch of up to 64 operators with their operands): past that the column writer is faster
#: (benchmarks/serialization.py), and the root alone tells, before any other work is done.
ROOT_LIMIT = 128
#: ... and that holds at most this many nodes in all (a bound for any other shape).
NODE_LIMIT = 1024


def rows_payload(
    obj: Any,
    registry: TypeRegistry,
    backend: Backend = DEFAULT_BACKEND,
    limits: tuple[int, int] = (ROOT_LIMIT, NODE_LIMIT),
) -> bytes | None:
    """``obj`` as a payload written a record at a time, or None where the column writer must
    write it (see the module docstring), or where its root refers to more than ``limits[0]``
    records or it holds more than ``limits[1]`` nodes."""
    node_type = registry.by_type.get(type(obj))
    rows = None if node_type is None else node_type.rows
    if rows is None or rows.scan is None or rows.fanout(obj) > limits[0]:
        return None
    finder = _Finder(registry)
    found = finder.run(obj, limits[1])
    if found is None:
        return None
    order = sorted(found.values(), key=_order_key(registry, finder.count))
    nodes = list(itertools.chain.from_iterable(entry[2] for entry in order))
    index = dict(zip(map(id, nodes), range(len(nodes)), strict=True))
    header = [(node_type.tag, node_type.field_names) for node_type, _, _, _ in order]
    lookup = index.__getitem__
    groups = [_group(slot, entry, index, lookup) for slot, entry in enumerate(order)]
    return b"".join(frame(pack(backend, (header, groups, (index[id(obj)],))), [], 0))


class _Finder:
    """Every record reachable from a root with its scanned row, by class."""

    __slots__ = ("count", "cyclic", "found", "registry")

    def __init__(self, registry: TypeRegistry) -> None:
        self.registry = registry
        self.found: dict[type, _Found] = {}
        self.cyclic: set[int] = set()  # the cyclic ranks of the types found
        self.count = 0  # the records found

    def run(self, root: Any, limit: int) -> dict[type, _Found] | None:
        """The records found (None: a value this writer does not write, or more than
        ``limit`` of them)."""
        work = [root]
        seen = {id(root)}  # the records in ``work``: each is entered once
        push, found = work.append, self.found
        try:
            for item in work:  # the records scanned append theirs: a list iterator sees them
                if len(work) > limit:
                    return None
                entry = found.get(type(item))
                if entry is None:
                    entry = self.entry(type(item))
                entry[2].append(item)
                entry[3].append(entry[1](item, seen, push))
        except Exception:  # an unregistered type, a value the checks refuse: the column writer's
            return None
        self.count = len(work)
        return found

    def entry(self, cls: type) -> _Found:
        """A new type's entry; LookupError for a type this writer does not write: one without
        a row scan, or one that the registry's ranks alone would not put after every record it
        refers to (a type that can refer to its own kind, or a second type of a cyclic rank)."""
        registry = self.registry
        node_type = registry.by_type[cls]
        rows = node_type.rows
        if rows is None or rows.scan is None:
            raise LookupError(node_type.tag)
        rank = registry.ranks[node_type]
        if rank in registry.cyclic:
            if rank in self.cyclic or _refers_to_itself(node_type):
                raise LookupError(node_type.tag)
            self.cyclic.add(rank)
        entry = self.found[cls] = node_type, rows.scan, [], []
        return entry


def _refers_to_itself(node_type: NodeType) -> bool:
    for field in node_type.fields:
        classes = field.codec.child_classes if field.codec.has_children else frozenset()
        if classes is None or node_type.cls in classes:
            return True
    return False


def _order_key(registry: TypeRegistry, count: int) -> Callable[[_Found], Any]:
    """The column writer's group order: by rank while every index of the ``count`` nodes fits
    one byte; else by level, then fewest nodes first, so shared records take small indices."""
    ranks, levels = registry.ranks, registry.levels
    if count < _ONE_BYTE:
        return lambda entry: ranks[entry[0]]

    def key(entry: _Found) -> tuple[int, ...]:
        node_type = entry[0]
        size = 0 if ranks[node_type] in registry.cyclic else len(entry[2])
        return levels[node_type], size, ranks[node_type]

    return key


def _group(
    slot: int, entry: _Found, index: dict[int, int], lookup: Callable[[int], int]
) -> tuple[int, int, list[Any]]:
    node_type, _, objs, rows = entry
    columns = list(zip(*rows, strict=True))
    emit = node_type.rows.emit if node_type.rows is not None else None
    return slot, len(objs), columns if emit is None else emit(columns, index, lookup)
