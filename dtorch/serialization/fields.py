"""Field codecs: how one field's column of values goes to the wire and back.

The codec works a column at a time: every record of one type is written as one list per field,
so checking and converting a field is a handful of C-level ``map``/``set`` calls over the
whole column instead of Python work per value. Each codec checks on the way out (a value of
the wrong type is a SerializationError naming it) and again on the way in (a corrupt payload
is a DeserializationError), so decoded records hold exactly the types they declare.

References to other records are integer indices into the payload's node table: a record
referenced twice is written once. Writing a column takes two steps: ``scan`` checks it,
converts what it can, and asks the writer (a ``Walk``) for provisional numbers of the nodes
it refers to; once the writer has ordered every node, ``emit`` swaps those numbers for final
node indices (only codecs with ``has_children`` have anything to swap). In an ``Any`` slot (a
union that holds records, a container item, the payload root) a reference is written as a
one-element array ``[index]``; native values (None, bool, int, float, str, bytes) are
written as themselves.

Example:
    >>> from dtorch.serialization.fields import PrimField, TupleField, ReadContext
    >>> ints = TupleField(PrimField(frozenset({int})))
    >>> ints.decode([[1, 2], []], ReadContext([]))
    [(1, 2), ()]
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from dtorch.errors import BadReferenceError, DeserializationError, SerializationError
from dtorch.ir.dtypes import CODE_TO_DTYPE, DTYPE_TO_CODE
from dtorch.serialization.columns import (
    ARRAYS,
    NATIVE_TYPES,
    SHORT_COLUMN,
    TUPLE,
    NoneType,
    ReadContext,
    Walk,
    WriteContext,
    check_types,
    distinct_by_id,
    distinct_rows,
    flatten,
    insert_nones,
    lookup,
    names,
    regroup,
    show,
    spread,
)

__all__ = [
    "NATIVE_TYPES",
    "AnyField",
    "BlobField",
    "DtypeField",
    "EnumField",
    "FieldCodec",
    "OptionalField",
    "PrimField",
    "ReadContext",
    "RefField",
    "TupleField",
    "Walk",
    "WriteContext",
    "decode_any",
]

_DTYPE = frozenset({torch.dtype})
_INT = frozenset({int})  # exact ints: bool is an int subclass, and 1.0 == True == 1


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
        """True when ``scan`` and ``decode`` only check: values are their own wire values."""
        ...

    def children(self, column: list[Any]) -> list[Any]:
        """The nodes a column refers to, in order."""
        ...

    def scan(self, column: list[Any], walk: Walk) -> Any:
        """Check the column and number the nodes it refers to: its wire values if the field
        has no children, else the state ``emit`` finishes."""
        ...

    def emit(self, state: Any, renumber: list[int]) -> list[Any]:
        """The wire values of a scanned column; ``renumber`` maps provisional numbers to node
        indices."""
        ...

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        """The column's values from its wire values (DeserializationError if corrupt)."""
        ...


@dataclass(frozen=True, slots=True)
class PrimField:
    """Native values of the given exact types (``float`` fields also take int, as typing does)."""

    types: frozenset[type]
    has_children: bool = False
    child_classes: frozenset[type] | None = None
    passthrough: bool = True

    def describe(self) -> str:
        return names(self.types)

    def children(self, column: list[Any]) -> list[Any]:
        return []

    def scan(self, column: list[Any], walk: Walk) -> Any:
        found = set(map(type, column))
        if not found <= self.types:
            raise SerializationError(f"expected {self.describe()}, got {names(found - self.types)}")
        return column

    def emit(self, state: Any, renumber: list[int]) -> list[Any]:
        return state

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        found = set(map(type, column))
        if not found <= self.types:
            raise DeserializationError(
                f"expected {self.describe()}, got {names(found - self.types)}"
            )
        return column  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class EnumField:
    """Members of one IntEnum, written as their integer values."""

    enum: type
    members: dict[int, Any] = field(compare=False, hash=False)
    values: dict[Any, int] = field(compare=False, hash=False)
    has_children: bool = False
    child_classes: frozenset[type] | None = None
    passthrough: bool = False

    @classmethod
    def of(cls, enum: type) -> EnumField:
        members = {int(m): m for m in enum}  # type: ignore[attr-defined]
        return cls(enum, members, {m: value for value, m in members.items()})

    def describe(self) -> str:
        return f"{self.enum.__name__} members"

    def children(self, column: list[Any]) -> list[Any]:
        return []

    def scan(self, column: list[Any], walk: Walk) -> Any:
        check_types(column, frozenset({self.enum}), self.describe, SerializationError)
        # Plain ints: a packer reads an enum's value in Python, ten times slower.
        return list(map(self.values.__getitem__, column))

    def emit(self, state: Any, renumber: list[int]) -> list[Any]:
        return state

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        try:
            if not set(map(type, column)) <= _INT:  # True and 1.0 would find member 1
                raise TypeError
            return list(map(self.members.__getitem__, column))
        except (KeyError, TypeError):
            bad = next(v for v in column if type(v) is not int or v not in self.members)
            raise DeserializationError(
                f"{show(bad)} is not a value of {self.enum.__name__}; accepted: "
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

    def scan(self, column: list[Any], walk: Walk) -> Any:
        try:  # only dtypes are keys of the table
            return list(map(DTYPE_TO_CODE.__getitem__, column))
        except (KeyError, TypeError):
            check_types(column, _DTYPE, "torch.dtype", SerializationError)
            bad = next(d for d in column if d not in DTYPE_TO_CODE)
            raise SerializationError(f"{bad} has no dtype code in dtorch.ir.dtypes") from None

    def emit(self, state: Any, renumber: list[int]) -> list[Any]:
        return state

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        try:
            if not set(map(type, column)) <= _INT:  # True == 1 would index the table
                raise TypeError
            return list(map(CODE_TO_DTYPE.__getitem__, column))
        except (KeyError, TypeError):
            bad = next(v for v in column if type(v) is not int or v not in CODE_TO_DTYPE)
            raise DeserializationError(
                f"dtype code {show(bad)} is not a dtype of this torch"
            ) from None


def resolve(column: list[Any] | tuple[Any, ...], nodes: list[Any]) -> list[Any]:
    """The decoded nodes a column of references names (each an index of an earlier node)."""
    try:
        if not set(map(type, column)) <= _INT:  # True would name node 1
            raise TypeError
        if column and min(column) < 0:  # a negative index would count from the end
            raise BadReferenceError(f"reference to node {min(column)}: indices start at 0")
        return list(map(nodes.__getitem__, column))
    except IndexError:
        bad = next(v for v in column if type(v) is not int or v >= len(nodes))
        raise BadReferenceError(
            f"reference to node {show(bad)}, but only nodes 0..{len(nodes) - 1} are decoded "
            f"before it (a reference must point to an earlier node)"
        ) from None
    except TypeError:
        raise DeserializationError(
            f"expected node references (ints), got {names(set(map(type, column)) - {int})}"
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

    def scan(self, column: list[Any], walk: Walk) -> Any:
        return walk.refs(column, self.classes, self.describe)

    def emit(self, state: Any, renumber: list[int]) -> list[Any]:
        return lookup(renumber, state)

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        values = resolve(column, ctx.nodes)
        found = set(map(type, values))
        if not found <= self.classes:
            raise DeserializationError(f"expected {self.label}, got {names(found - self.classes)}")
        return values


class _Wrapping:
    """What a codec around an ``inner`` one shares: it refers to the nodes ``inner`` refers
    to, and its wire values are never its values as they are (None, tuples to convert)."""

    __slots__ = ()
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


@dataclass(frozen=True, slots=True)
class OptionalField(_Wrapping):
    """None, or a value of the inner codec."""

    inner: FieldCodec

    def describe(self) -> str:
        return f"{self.inner.describe()} or None"

    def children(self, column: list[Any]) -> list[Any]:
        return self.inner.children([v for v in column if v is not None])

    def scan(self, column: list[Any], walk: Walk) -> Any:
        if NoneType not in set(map(type, column)):
            state = self.inner.scan(column, walk)
            return (None, state) if self.inner.has_children else state
        state = self.inner.scan([v for v in column if v is not None], walk)
        return (column, state) if self.inner.has_children else insert_nones(column, state)

    def emit(self, state: Any, renumber: list[int]) -> list[Any]:
        column, inner = state
        wire = self.inner.emit(inner, renumber)
        return wire if column is None else insert_nones(column, wire)

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        if NoneType not in set(map(type, column)):
            return self.inner.decode(column, ctx)
        present = self.inner.decode([v for v in column if v is not None], ctx)
        return insert_nones(list(column), present)


@dataclass(frozen=True, slots=True)
class TupleField(_Wrapping):
    """A tuple of any length whose items all use the inner codec."""

    inner: FieldCodec

    def describe(self) -> str:
        return f"tuple[{self.inner.describe()}, ...]"

    def children(self, column: list[Any]) -> list[Any]:
        _, rows = distinct_by_id(column)
        check_types(rows, TUPLE, self.describe, SerializationError)
        return self.inner.children(flatten(rows))

    def scan(self, column: list[Any], walk: Walk) -> Any:
        # A column often repeats the same tuple object (a shared placements tuple): scan
        # each once.
        positions, rows = distinct_by_id(column) if len(column) > SHORT_COLUMN else (None, column)
        if not set(map(type, rows)) <= TUPLE:
            check_types(rows, TUPLE, self.describe, SerializationError)
        if self.inner.passthrough:  # checks only: the tuples are their own wire values
            self.inner.scan(itertools.chain.from_iterable(rows), walk)  # type: ignore[arg-type]
            return column
        state = self.inner.scan(flatten(rows), walk)
        if self.inner.has_children:
            return positions, rows, state
        return spread(positions, regroup(rows, state))

    def emit(self, state: Any, renumber: list[int]) -> list[Any]:
        positions, rows, inner = state
        return spread(positions, regroup(rows, self.inner.emit(inner, renumber)))

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        kinds = set(map(type, column))
        if not kinds <= ARRAYS:
            raise DeserializationError(
                f"expected arrays of {self.inner.describe()}, got {names(kinds - ARRAYS)}"
            )
        # An unpacker that makes tuples already made the rows; others make lists.
        rows = list(column) if kinds <= TUPLE else list(map(tuple, column))
        if len(rows) == 1:  # one record's tuple (a batch's operator list): no regrouping
            return [tuple(self.inner.decode(rows[0], ctx))]
        if self.inner.passthrough:
            self.inner.decode(itertools.chain.from_iterable(rows), ctx)  # type: ignore[arg-type]
            return rows
        distinct = distinct_rows(rows) if self.inner.has_children else None
        if distinct is None:
            return regroup(rows, self.inner.decode(flatten(rows), ctx))
        # Rows of references repeat (an operand's placements): decode each distinct row once.
        # Equal rows then share one tuple, which is immutable.
        decoded = regroup(distinct, self.inner.decode(flatten(distinct), ctx))
        return list(map(dict(zip(distinct, decoded, strict=True)).__getitem__, rows))


@dataclass(frozen=True, slots=True)
class AnyField:
    """Native values as themselves, anything else (records, containers) as a node reference;
    ``classes`` (if set) are the exact types accepted."""

    classes: frozenset[type] | None = None
    label: str = "any value"
    has_children: bool = True
    passthrough: bool = False

    @property
    def child_classes(self) -> frozenset[type] | None:
        return None if self.classes is None else self.classes - NATIVE_TYPES

    def describe(self) -> str:
        return self.label

    def children(self, column: list[Any]) -> list[Any]:
        if self.classes is not None:
            check_types(column, self.classes, self.label, SerializationError)
        return [v for v in column if type(v) not in NATIVE_TYPES]

    def scan(self, column: list[Any], walk: Walk) -> Any:
        kinds = set(map(type, column))
        if self.classes is not None and not kinds <= self.classes:
            raise SerializationError(f"expected {self.label}, got {names(kinds - self.classes)}")
        if kinds <= NATIVE_TYPES:
            return column, None
        kids = [v for v in column if type(v) not in NATIVE_TYPES]
        return column, walk.refs(kids, None, self.describe)

    def emit(self, state: Any, renumber: list[int]) -> list[Any]:
        column, numbers = state
        if numbers is None:
            return column
        index = iter(lookup(renumber, numbers))
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
    if kind in ARRAYS and len(value) == 1:
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

    def scan(self, column: list[Any], walk: Walk) -> Any:
        return [walk.add_blob(view) for view in column]

    def emit(self, state: Any, renumber: list[int]) -> list[Any]:
        return state

    def decode(self, column: list[Any] | tuple[Any, ...], ctx: ReadContext) -> list[Any]:
        return [_blob(entry, ctx) for entry in column]


def _blob(entry: Any, ctx: ReadContext) -> memoryview | bytearray:
    """The bytes of one data range: a view of the payload (alias) or a private copy."""
    if type(entry) not in ARRAYS or len(entry) != 2:
        raise DeserializationError(f"expected a data range [offset, size], got {show(entry)}")
    check_types(entry, frozenset({int}), "a data range of ints", DeserializationError)
    offset, size = entry
    if offset < 0 or size < 0 or offset + size > ctx.data.nbytes:
        raise DeserializationError(
            f"data range [{offset}, {size}] lies outside the {ctx.data.nbytes}-byte data section"
        )
    ctx.claimed += size  # ranges may not overlap: past the section, some do (and copying
    if ctx.claimed > ctx.data.nbytes:  # them all first would allocate without bound)
        raise DeserializationError(
            f"the tensors of the payload claim more than its {ctx.data.nbytes}-byte data "
            "section: two of them share data bytes"
        )
    ctx.ranges.append((offset, size))
    view = ctx.data[offset : offset + size]
    return view if ctx.alias else bytearray(view)
