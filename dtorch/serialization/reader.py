"""deserialize: one payload -> the value it holds, or a DeserializationError.

Reading mirrors writing (``dtorch.serialization.writer``): check the frame, unpack the
MessagePack document, bind each ``[tag, field names]`` entry to a registered type, then build
the groups in order, appending every built value to the node table that later references
index. A group of up to ``_ROWS_UP_TO`` records of this version's layout is built a record at
a time by its type's compiled row decoder (``dtorch.serialization.rows``); a larger one, one
of an older layout, or one with any value the row decoder does not take, a column at a time
by the field codecs, which name what is wrong. Any input - random, truncated, bit-flipped,
with absurd lengths or deep nesting - ends in a value or a DeserializationError (or one of
its subclasses):

* the frame's sizes must add up to the input's size exactly, before anything is unpacked;
* MessagePack's own size checks refuse declared lengths longer than the input, and its
  nesting limit refuses deep nesting (nothing here recurses); nesting through references,
  a level per node, is bounded too: tuples (which hash and compare recursively in C) at most
  ``MAX_NESTING`` deep, and lists and dicts are safe at any depth (their recursion is checked);
  so is a tuple's size counted through shared inner tuples (a few hundred bytes of tuples
  that each refer twice to the one before would make 2**64 items for a hash to walk);
* the node table may not declare more nodes than the document has bytes (every node is
  referenced at least once, and a reference takes at least a byte);
* every column is checked for shape and exact value types before use, every reference must
  point to an earlier node of an accepted type, and data ranges must lie in the data section
  without overlapping.

Example:
    >>> from dtorch.serialization.writer import serialize_value
    >>> deserialize_value(serialize_value({"a": (1, 2.5, None)}))
    {'a': (1, 2.5, None)}
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dtorch.errors import (
    DeserializationError,
    DTorchError,
    MissingFieldError,
    UnknownTypeError,
)
from dtorch.serialization.catalog import DEFAULT_REGISTRY
from dtorch.serialization.columns import ARRAYS, ReadContext, check_column, show
from dtorch.serialization.fields import decode_any
from dtorch.serialization.registry import Field, NodeType, TypeRegistry
from dtorch.serialization.rows import Make
from dtorch.serialization.wire import DEFAULT_BACKEND, Backend, unframe, unpack
from dtorch.serialization.writer import without_gc


@dataclass(slots=True, eq=False)
class _Bound:
    """A registered type bound to the field names one payload wrote for it."""

    node_type: NodeType
    width: int  # number of columns the payload holds per group of this type
    positions: tuple[int | None, ...] | None  # per field: its column, or None (default);
    # None for all: the payload wrote every field, in order (the writer of this version)
    make: Make | None = None  # the compiled row decoder, for this version's layout only


def _current(node_type: NodeType) -> _Bound:
    rows = node_type.rows
    make = rows.make if rows is not None else None
    return _Bound(node_type, len(node_type.fields), None, make)


def _array(value: Any, what: str, size: int | None = None) -> list[Any] | tuple[Any, ...]:
    if type(value) not in ARRAYS or (size is not None and len(value) != size):
        wanted = "an array" if size is None else f"an array of {size}"
        raise DeserializationError(f"{what} must be {wanted}, got {show(value)}")
    return value


def _int(value: Any, what: str, low: int, high: int) -> int:
    if type(value) is not int or not low <= value < high:
        raise DeserializationError(f"{what} must be an int in {low}..{high - 1}, got {show(value)}")
    return value


def byte_view(data: Any) -> memoryview:
    """``data`` as a flat byte view (DeserializationError if it is not bytes-like)."""
    try:
        return memoryview(data).cast("B")
    except TypeError:
        raise DeserializationError(
            f"expected the payload as bytes, bytearray or memoryview, got {type(data).__name__}"
        ) from None


def _bind(entry: Any, by_tag: Mapping[str, NodeType]) -> _Bound:
    tag, names = _array(entry, "a type entry [tag, field names]", 2)
    node_type = by_tag.get(tag) if type(tag) is str else None
    if node_type is not None and names == node_type.field_names:  # this version's layout
        return _current(node_type)
    if type(tag) is not str:
        raise DeserializationError(f"a type tag must be a string, got {show(tag)}")
    if node_type is None:
        raise UnknownTypeError(f"unknown type tag {show(tag)}: this dtorch has no such type")
    names = _array(names, f"the field names of {tag}")
    known = node_type.field_names
    if tuple(names) == known:  # an unpacker that makes lists
        return _current(node_type)
    position = {name: i for i, name in enumerate(names) if type(name) is str}
    position = _renamed(position, node_type)
    unknown = [n for n in position if n not in known]
    if unknown or len(position) != len(names):
        raise DeserializationError(
            f"{tag} has no fields {show(unknown)} (or names one twice); its fields: {known}"
        )
    positions = tuple(position.get(f.name) for f in node_type.fields)
    for field, at in zip(node_type.fields, positions, strict=True):
        if at is None and field.missing_column(0) is None:
            raise MissingFieldError(
                f"{tag} data lacks the field {field.name!r}, which has no default"
            )
    return _Bound(node_type, len(names), positions)


# A field's former name in older data reads as the field (Field.formerly).
def _renamed(position: dict[str, int], node_type: NodeType) -> dict[str, int]:
    old = {o: f.name for f in node_type.fields for o in f.formerly}
    out = {old.get(name, name): at for name, at in position.items()}
    return out if len(out) == len(position) else position


#: Deepest nesting of tuples a payload may build (Python's own recursion limit: a deeper
#: value could not even be printed).
MAX_NESTING = 1000
#: A tuple may hold this many items per byte of its payload (plus the floor), counting an
#: inner tuple's items each time it is referred to: tuples sharing inner tuples could
#: otherwise make a few hundred bytes into 2**64 items that a hash walks one by one.
_WEIGHT_PER_BYTE = 64
_WEIGHT_FLOOR = 1 << 20
_ROWS_UP_TO = 32  # larger groups build faster a column at a time (benchmarks/serialization.py)
_BINDINGS_KEPT = 256  # type tables whose bindings a registry keeps


def _bind_all(header: Any, registry: TypeRegistry) -> list[_Bound]:
    """The bound types of a type table; the bindings of a table read before come from the
    registry's cache (bindings are immutable, and a table only binds one way). Only tables of
    at most one entry per registered type are kept, so the cache stays small whatever the
    input."""
    try:
        bound: list[_Bound] | None = registry.bindings.get(header)
        keep = True
    except TypeError:  # a table holding maps (or an unpacker's lists) is no key
        bound, keep = None, False
    if bound is None:
        bound = [_bind(entry, registry.by_tag) for entry in _array(header, "the type table")]
        keep = keep and len(bound) <= len(registry.by_tag)
        if keep and len(registry.bindings) < _BINDINGS_KEPT:
            registry.bindings[header] = bound
    return bound


class _Reader:
    """Builds the groups of one payload in order."""

    __slots__ = ("bound", "budget", "ctx", "depths", "rows", "weight_limit", "weights")

    def __init__(self, bound: list[_Bound], ctx: ReadContext, budget: int, rows: bool) -> None:
        self.bound, self.ctx, self.budget, self.rows = bound, ctx, budget, rows
        self.depths: dict[int, int] = {}  # id of a tuple holding tuples -> its nesting depth
        self.weights: dict[int, int] = {}  # id of a tuple holding tuples -> its items, all told
        self.weight_limit = _WEIGHT_PER_BYTE * budget + _WEIGHT_FLOOR

    def run(self, groups: Any) -> None:
        """Build every group, in order."""
        nodes = self.ctx.nodes
        for entry in _array(groups, "the group list"):
            bound, count, columns = self.open(entry)
            built = self.build(bound, count, columns)
            if bound.node_type.cls is tuple:
                self.nest(built)
            nodes.extend(built)

    def build(self, bound: _Bound, count: int, columns: Sequence[Any]) -> list[Any]:
        """One group's values. A group in this version's layout goes through its compiled
        row decoder; any value that does not fit it sends the group down the column path,
        which decodes it again and names what is wrong."""
        make = bound.make if self.rows else None
        if make is not None and count <= _ROWS_UP_TO:
            try:
                return make(columns, count, self.ctx.nodes)
            except Exception:
                pass
        return self.columns(bound.node_type, count, columns)

    def columns(self, node_type: NodeType, count: int, columns: Sequence[Any]) -> list[Any]:
        """Build a group a column at a time, naming the field of any error."""
        values = []
        for field, column in zip(node_type.fields, columns, strict=True):
            if type(column) is _Defaults:  # a field the payload lacks: values, not wire values
                values.append(column.values)
                continue
            try:
                if type(column) not in ARRAYS or len(column) != count:
                    check_column(column, count)
                values.append(field.codec.decode(column, self.ctx))
            except DeserializationError as exc:
                raise type(exc)(f"{node_type.tag}.{field.name}: {exc}") from None
        return _build(node_type, values, count)

    def nest(self, tuples: list[tuple[Any, ...]]) -> None:
        """Refuse tuples nested deeper than ``MAX_NESTING`` through references (each level a
        node of its own): hashing or comparing one recurses in C, past any stack."""
        if not any(type(item) is tuple for item in itertools.chain.from_iterable(tuples)):
            return  # no tuple in a tuple: every one is one level deep (the common case)
        depths, weights = self.depths, self.weights
        for value in tuples:
            inner = [item for item in value if type(item) is tuple]
            if not inner:
                continue
            depth = depths[id(value)] = 1 + max(depths.get(id(item), 1) for item in inner)
            if depth > MAX_NESTING:
                raise DeserializationError(
                    f"tuples nested {depth} deep; at most {MAX_NESTING} levels are accepted"
                )
            weight = len(value) + sum(weights.get(id(item), len(item)) for item in inner)
            if weight > self.weight_limit:
                raise DeserializationError(
                    f"a tuple holding {weight} items, counting those of its inner tuples as "
                    f"often as it refers to them; at most {self.weight_limit} for this payload "
                    "(hashing or comparing it walks them all)"
                )
            weights[id(value)] = weight

    def open(self, entry: Any) -> tuple[_Bound, int, Sequence[Any]]:
        """A group's bound type, its node count, and its columns (one per registered field,
        defaults standing in for those the payload lacks)."""
        if type(entry) not in ARRAYS or len(entry) != 3:
            raise DeserializationError(f"a group must be [type, count, columns], got {show(entry)}")
        slot, count, columns = entry
        if type(slot) is not int or not 0 <= slot < len(self.bound):
            _int(slot, "a group's type slot", 0, len(self.bound))
        if type(count) is not int or not 0 <= count <= self.budget:
            _int(count, "a group's node count", 0, self.budget + 1)
        self.budget -= count
        bound = self.bound[slot]
        if type(columns) not in ARRAYS or len(columns) != bound.width:
            _array(columns, f"the columns of {bound.node_type.tag}", bound.width)
        if bound.positions is None:
            return bound, count, columns
        fields = bound.node_type.fields
        return (
            bound,
            count,
            [_column(f, at, columns, count) for f, at in zip(fields, bound.positions, strict=True)],
        )


@dataclass(frozen=True, slots=True)
class _Defaults:
    """The column of a field a payload lacks: its default values, decoded already."""

    values: list[Any]


def _column(field: Field, at: int | None, columns: Any, count: int) -> Any:
    """The column of ``field``: the payload's, or its default for data that lacks it (a
    required field cannot be missing here: ``_bind`` refused the payload)."""
    if at is not None:
        return columns[at]
    defaults = field.missing_column(count)
    assert defaults is not None
    return _Defaults(defaults)


def _build(node_type: NodeType, values: list[list[Any]], count: int) -> list[Any]:
    try:
        return node_type.build(values, count)
    except DeserializationError:
        raise
    except (DTorchError, ValueError, TypeError, RuntimeError, OverflowError) as exc:
        raise DeserializationError(f"invalid {node_type.tag} in payload: {exc!s:.300}") from None


def _check_disjoint(ranges: list[tuple[int, int]]) -> None:
    end = 0
    for offset, size in sorted(r for r in ranges if r[1]):
        if offset < end:
            raise DeserializationError("two tensors of the payload share data bytes")
        end = offset + size


def _document(view: memoryview, backend: Backend) -> tuple[Any, Any, Any, memoryview, int]:
    """Header, groups, root, data section, and the document's size."""
    _, document_view, section = unframe(view)
    document = unpack(backend, document_view)
    header, groups, root = _array(document, "a payload document [types, groups, root]", 3)
    return header, groups, root, section, document_view.nbytes


def deserialize_value(
    data: Any,
    *,
    alias_tensors: bool = False,
    registry: TypeRegistry = DEFAULT_REGISTRY,
    backend: Backend = DEFAULT_BACKEND,
    rows: bool = True,
) -> Any:
    """The value of one payload (the engine behind ``dtorch.serialization.deserialize``);
    ``rows=False`` builds every group a column at a time (for tests: either way gives the
    same values and the same errors)."""
    view = byte_view(data)
    alias = alias_tensors and not view.readonly
    return without_gc(_deserialize, view, alias, registry, backend, rows)


def _deserialize(
    view: memoryview, alias: bool, registry: TypeRegistry, backend: Backend, rows: bool
) -> Any:
    header, groups, root, section, budget = _document(view, backend)
    bound = _bind_all(header, registry)
    ctx = ReadContext([], section, alias)
    _Reader(bound, ctx, budget, rows).run(groups)
    _check_disjoint(ctx.ranges)
    return decode_any(root, ctx.nodes)


def node_counts(data: Any, backend: Backend = DEFAULT_BACKEND) -> Counter[str]:
    """How many nodes of each type tag a payload holds (for tests and benchmarks).

    Example:
        >>> from dtorch.serialization.writer import serialize_value
        >>> from dtorch.ir.span import Span
        >>> span = Span("m.py", 3, 1)
        >>> sorted(node_counts(serialize_value([span, span])).items())
        [('ir.Span', 1), ('py.list', 1)]
    """
    header, groups, _, _, _ = _document(byte_view(data), backend)
    tags = [_array(entry, "a type entry", 2)[0] for entry in _array(header, "the type table")]
    counts: Counter[str] = Counter()
    for entry in _array(groups, "the group list"):
        slot, count, _ = _array(entry, "a group", 3)
        counts[tags[_int(slot, "a group's type slot", 0, len(tags))]] += count
    return counts
