"""Field codecs: how one field's column of values goes to the wire and back.

The codec works a column at a time: every record of one type is written as one list per field,
so checking and converting a field is a handful of C-level ``map``/``set`` calls over the
whole column instead of Python work per value. Each codec checks on the way out (a value of
the wrong type is a SerializationError naming it) and again on the way in (a corrupt payload
is a DeserializationError), so decoded records hold exactly the types they declare.

References to other records are integer indices into the payload's node table: a record
referenced twice is written once. The writer finds the nodes a column refers to with
``children`` and hands their indices back to ``encode`` in the same order. In an ``Any``
slot (a union that holds records, a container item, the payload root) a reference is written
as a one-element array ``[index]``; native values (None, bool, int, float, str, bytes) are
written as themselves.

Example:
    >>> from dtorch.serialization.fields import PrimField, TupleField, ReadContext
    >>> ints = TupleField(PrimField(frozenset({int})))
    >>> ints.decode([[1, 2], []], ReadContext([]))
    [(1, 2), ()]
"""

from __future__ import annotations

import itertools
import reprlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from dtorch.errors import (
    BadReferenceError,
    DeserializationError,
    SerializationError,
)
from dtorch.ir.dtypes import CODE_TO_DTYPE, DTYPE_TO_CODE

NoneType = type(None)

#: Values written as themselves wherever any value may stand (everything else is a node).
NATIVE_TYPES: frozenset[type] = frozenset({NoneType, bool, int, float, str, bytes})

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 3, 6, 6, 4
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = 48
_SHORT.repr_bytes = lambda value, level: repr(value[:48])  # type: ignore[attr-defined]


def show(value: object) -> str:
    """A short repr for messages: bounded in length and depth, whatever ``value`` holds."""
    return _SHORT.repr(value)


_INT = frozenset({int})
_TUPLE = frozenset({tuple})
_ARRAYS = frozenset({list, tuple})


@dataclass(slots=True)
class WriteContext:
    """What encoding a column needs beyond its references: the payload's data section."""

    blobs: list[memoryview] = field(default_factory=list)
    blob_end: int = 0

    def add_blob(self, data: memoryview) -> list[int]:
        """Place ``data`` in the payload's data section (64-byte aligned): ``[offset, size]``."""
        offset = -(-self.blob_end // 64) * 64
        self.blobs.append(data)
        self.blob_end = offset + data.nbytes
        return [offset, data.nbytes]


@dataclass(slots=True)
class ReadContext:
    """What decoding a column needs: the nodes built so far, and the payload's data section."""

    nodes: list[Any]
    data: memoryview = field(default_factory=lambda: memoryview(b""))
    alias: bool = False
    ranges: list[tuple[int, int]] = field(default_factory=list)


class FieldCodec(Protocol):
    """Writes one field's column of values and reads it back (see the module docstring)."""

    @property
    def has_children(self) -> bool:
        """True when the field can hold references to other nodes."""
        ...

    def describe(self) -> str:
        """The accepted values, for error messages."""
        ...

    @property
    def child_classes(self) -> frozenset[type] | None:
        """The exact types ``children`` may return (None: any registered type)."""
        ...

    @property
    def passthrough(self) -> bool:
        """True when ``encode`` and ``decode`` only check: values are their own wire values."""
        ...

    def children(self, column: list[Any]) -> list[Any]:
        """The nodes a column refers to, in order (the writer checks their types against
        ``child_classes``)."""
        ...

    def encode(self, column: list[Any], refs: list[int], ctx: WriteContext) -> list[Any]:
        """The column's wire values; ``refs`` are the node indices of ``children(column)``."""
        ...

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        """The column's values from its wire values (DeserializationError if corrupt)."""
        ...


def _names(types: Iterable[type]) -> str:
    return ", ".join(sorted(t.__name__ for t in types))


def check_types(
    values: Iterable[Any],
    allowed: frozenset[type],
    what: str | Callable[[], str],
    error: type[Exception],
) -> None:
    """Raise ``error`` unless every value's exact type is in ``allowed``; ``what`` describes
    the accepted values (a callable is only called on failure: describing costs)."""
    found = set(map(type, values))
    if not found <= allowed:
        label = what if isinstance(what, str) else what()
        raise error(f"expected {label}, got {_names(found - allowed)}")


def check_column(column: object, count: int) -> list[Any] | tuple[Any, ...]:
    """A wire column must be an array of ``count`` values."""
    if type(column) not in _ARRAYS or len(column) != count:  # type: ignore[arg-type]
        raise DeserializationError(f"expected a column of {count} values, got {show(column)}")
    return column  # type: ignore[return-value]


def check_indices(column: list[Any] | tuple[Any, ...], size: int) -> None:
    """Every value is an int index of an already decoded node."""
    if not column:
        return
    check_types(column, _INT, "node references (ints)", DeserializationError)
    low, high = min(column), max(column)
    if low < 0 or high >= size:
        raise BadReferenceError(
            f"reference to node {low if low < 0 else high}, but only nodes 0..{size - 1} are "
            f"decoded before it (a reference must point to an earlier node)"
        )


@dataclass(frozen=True, slots=True)
class PrimField:
    """Native values of the given exact types (``float`` fields also take int, as typing does)."""

    types: frozenset[type]
    has_children: bool = False
    child_classes: frozenset[type] | None = None
    passthrough: bool = True

    def describe(self) -> str:
        return _names(self.types)

    def children(self, column: list[Any]) -> list[Any]:
        return []

    def encode(self, column: list[Any], refs: list[int], ctx: WriteContext) -> list[Any]:
        check_types(column, self.types, self.describe, SerializationError)
        return column

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        check_types(column, self.types, self.describe, DeserializationError)
        return column  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class EnumField:
    """Members of one IntEnum, written as their integer values."""

    enum: type
    members: dict[int, Any] = field(compare=False, hash=False)
    has_children: bool = False
    child_classes: frozenset[type] | None = None
    passthrough: bool = False

    @classmethod
    def of(cls, enum: type) -> EnumField:
        return cls(enum, {int(m): m for m in enum})  # type: ignore[attr-defined]

    def describe(self) -> str:
        return f"{self.enum.__name__} members"

    def children(self, column: list[Any]) -> list[Any]:
        return []

    def encode(self, column: list[Any], refs: list[int], ctx: WriteContext) -> list[Any]:
        check_types(column, frozenset({self.enum}), self.describe, SerializationError)
        return list(map(int, column))  # plain ints: packers read an enum's value in Python

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        check_types(column, _INT, lambda: f"{self.describe()} (ints)", DeserializationError)
        try:
            return list(map(self.members.__getitem__, column))
        except KeyError as exc:
            raise DeserializationError(
                f"{exc.args[0]} is not a value of {self.enum.__name__}; accepted: "
                f"{sorted(self.members)}"
            ) from None


@dataclass(frozen=True, slots=True)
class DtypeField:
    """torch dtypes, written as their stable codes (``dtorch.ir.dtypes``)."""

    has_children: bool = False
    child_classes: frozenset[type] | None = None
    passthrough: bool = False

    def describe(self) -> str:
        return "torch.dtype"

    def children(self, column: list[Any]) -> list[Any]:
        return []

    def encode(self, column: list[Any], refs: list[int], ctx: WriteContext) -> list[Any]:
        check_types(column, frozenset({torch.dtype}), "torch.dtype", SerializationError)
        return list(map(DTYPE_TO_CODE.__getitem__, column))

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        check_types(column, _INT, "dtype codes (ints)", DeserializationError)
        try:
            return list(map(CODE_TO_DTYPE.__getitem__, column))
        except KeyError as exc:
            raise DeserializationError(
                f"dtype code {exc.args[0]} is not a dtype of this torch"
            ) from None


@dataclass(frozen=True, slots=True)
class RefField:
    """A reference to another node whose exact type is one of ``classes``."""

    classes: frozenset[type]
    label: str
    has_children: bool = True
    passthrough: bool = False

    @property
    def child_classes(self) -> frozenset[type] | None:
        return self.classes

    def describe(self) -> str:
        return self.label

    def children(self, column: list[Any]) -> list[Any]:
        return column

    def encode(self, column: list[Any], refs: list[int], ctx: WriteContext) -> list[Any]:
        return refs

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        check_indices(column, len(ctx.nodes))
        values = list(map(ctx.nodes.__getitem__, column))
        check_types(values, self.classes, self.label, DeserializationError)
        return values


@dataclass(frozen=True, slots=True)
class OptionalField:
    """None, or a value of the inner codec."""

    inner: FieldCodec

    @property
    def has_children(self) -> bool:
        return self.inner.has_children

    @property
    def child_classes(self) -> frozenset[type] | None:
        return self.inner.child_classes

    @property
    def passthrough(self) -> bool:
        return False

    def describe(self) -> str:
        return f"{self.inner.describe()} or None"

    def children(self, column: list[Any]) -> list[Any]:
        return self.inner.children([v for v in column if v is not None])

    def encode(self, column: list[Any], refs: list[int], ctx: WriteContext) -> list[Any]:
        return _apply_present(column, lambda present: self.inner.encode(present, refs, ctx))

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        return _apply_present(list(column), lambda present: self.inner.decode(present, ctx))


def _apply_present(column: list[Any], convert: Callable[[list[Any]], list[Any]]) -> list[Any]:
    """``convert`` the values that are not None, keeping the Nones in place."""
    if NoneType not in set(map(type, column)):
        return convert(column)
    converted = iter(convert([v for v in column if v is not None]))
    return [None if v is None else next(converted) for v in column]


@dataclass(frozen=True, slots=True)
class TupleField:
    """A tuple of any length whose items all use the inner codec."""

    inner: FieldCodec

    @property
    def has_children(self) -> bool:
        return self.inner.has_children

    @property
    def child_classes(self) -> frozenset[type] | None:
        return self.inner.child_classes

    @property
    def passthrough(self) -> bool:
        return False

    def describe(self) -> str:
        return f"tuple[{self.inner.describe()}, ...]"

    def children(self, column: list[Any]) -> list[Any]:
        rows = distinct_objects(column)
        check_types(rows, _TUPLE, self.describe, SerializationError)
        return self.inner.children(list(itertools.chain.from_iterable(rows)))

    def encode(self, column: list[Any], refs: list[int], ctx: WriteContext) -> list[Any]:
        if self.inner.passthrough:  # checks only: the tuples are their own wire values
            check_types(column, _TUPLE, self.describe, SerializationError)
            self.inner.encode(itertools.chain.from_iterable(column), refs, ctx)  # type: ignore[arg-type]
            return column
        # A column often repeats the same tuple object (a shared placements tuple): encode
        # each once, as children() numbered each once.
        rows = distinct_objects(column)
        flat = list(itertools.chain.from_iterable(rows))
        encoded = regroup(rows, self.inner.encode(flat, refs, ctx))
        if rows is column:
            return encoded
        return list(
            map(dict(zip(map(id, rows), encoded, strict=True)).__getitem__, map(id, column))
        )

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        kinds = set(map(type, column))
        if not kinds <= _ARRAYS:
            raise DeserializationError(
                f"expected arrays of {self.inner.describe()}, got {_names(kinds - _ARRAYS)}"
            )
        # An unpacker that makes tuples already made the rows; others make lists.
        rows = list(column) if kinds <= _TUPLE else list(map(tuple, column))
        if self.inner.passthrough:
            self.inner.decode(itertools.chain.from_iterable(rows), ctx)  # type: ignore[arg-type]
            return rows
        distinct = _distinct(rows) if self.inner.has_children else None
        if distinct is None:
            return regroup(rows, self.inner.decode(list(itertools.chain.from_iterable(rows)), ctx))
        # Rows of references repeat (an operand's placements): decode each distinct row once.
        # Equal rows then share one tuple, which is immutable.
        flat = list(itertools.chain.from_iterable(distinct))
        decoded = regroup(distinct, self.inner.decode(flat, ctx))
        return list(map(dict(zip(distinct, decoded, strict=True)).__getitem__, rows))


def regroup(rows: list[Any], items: list[Any]) -> list[tuple[Any, ...]]:
    """``items`` (the flattened ``rows``, converted) split back into rows of the same lengths."""
    remaining = iter(items)
    lengths = set(map(len, rows))
    if len(lengths) == 1 and 0 not in lengths:  # all as long: regroup at C speed
        return list(zip(*[remaining] * lengths.pop(), strict=False))
    return [tuple(itertools.islice(remaining, len(row))) for row in rows]


_WINDOW = 256


def repeats(values: list[Any]) -> bool:
    """Whether the first values of a long column mostly repeat a few objects."""
    if len(values) <= _WINDOW // 4:
        return False
    window = values[:_WINDOW]
    return len(set(map(id, window))) * 4 < len(window) * 3


def distinct_objects(values: list[Any]) -> list[Any]:
    """``values`` without repeats of the same object, if it ``repeats``; else ``values``."""
    if not repeats(values):
        return values
    return list(dict(zip(map(id, values), values, strict=True)).values())


def _distinct(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]] | None:
    """The distinct rows, if they are hashable and at most half as many as the rows."""
    if len(rows) < 4:
        return None
    try:
        distinct = list(dict.fromkeys(rows))
    except TypeError:  # a row holds an array (a reference in an Any slot)
        return None
    return distinct if len(distinct) * 2 <= len(rows) else None


@dataclass(frozen=True, slots=True)
class AnyField:
    """Native values as themselves, anything else (records, containers) as a node reference;
    ``classes`` (if set) are the exact types accepted."""

    classes: frozenset[type] | None = None
    label: str = "any value"
    has_children: bool = True
    child_classes: frozenset[type] | None = None  # children() checks the whole column
    passthrough: bool = False

    def describe(self) -> str:
        return self.label

    def children(self, column: list[Any]) -> list[Any]:
        if self.classes is not None:
            check_types(column, self.classes, self.label, SerializationError)
        return [v for v in column if type(v) not in NATIVE_TYPES]

    def encode(self, column: list[Any], refs: list[int], ctx: WriteContext) -> list[Any]:
        index = iter(refs)
        return [v if type(v) in NATIVE_TYPES else (next(index),) for v in column]

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        nodes = ctx.nodes
        values = [v if type(v) in NATIVE_TYPES else decode_any(v, nodes) for v in column]
        if self.classes is not None:
            check_types(values, self.classes, self.label, DeserializationError)
        return values


def decode_any(value: Any, nodes: list[Any]) -> Any:
    """One ``Any`` slot's value: a native value, or ``[index]`` naming a decoded node."""
    kind = type(value)
    if kind in NATIVE_TYPES:
        return value
    if kind in _ARRAYS and len(value) == 1:
        index = value[0]
        if type(index) is int and 0 <= index < len(nodes):
            return nodes[index]
        raise BadReferenceError(
            f"reference {show(index)} does not name one of the {len(nodes)} nodes decoded before it"
        )
    raise DeserializationError(
        f"expected a native value or a node reference [index], got {show(value)}"
    )


@dataclass(frozen=True, slots=True)
class BlobField:
    """Raw bytes placed in the payload's data section (tensor storage): ``[offset, size]``."""

    has_children: bool = False
    child_classes: frozenset[type] | None = None
    passthrough: bool = False

    def describe(self) -> str:
        return "a data section range [offset, size]"

    def children(self, column: list[Any]) -> list[Any]:
        return []

    def encode(self, column: list[Any], refs: list[int], ctx: WriteContext) -> list[Any]:
        return [ctx.add_blob(view) for view in column]

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        return [_blob(entry, ctx) for entry in column]


def _blob(entry: Any, ctx: ReadContext) -> memoryview | bytearray:
    """The bytes of one data range: a view of the payload (alias) or a private copy."""
    if type(entry) not in _ARRAYS or len(entry) != 2:
        raise DeserializationError(f"expected a data range [offset, size], got {show(entry)}")
    check_types(entry, _INT, "a data range of ints", DeserializationError)
    offset, size = entry
    if offset < 0 or size < 0 or offset + size > ctx.data.nbytes:
        raise DeserializationError(
            f"data range [{offset}, {size}] lies outside the {ctx.data.nbytes}-byte data section"
        )
    ctx.ranges.append((offset, size))
    view = ctx.data[offset : offset + size]
    return view if ctx.alias else bytearray(view)
