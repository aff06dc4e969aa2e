"""What every field codec shares: the write and read contexts, and column helpers.

A field codec works a column at a time (see ``dtorch.serialization.fields``): checking and
converting a column is a handful of C-level ``map``/``set`` calls over the whole column, not
Python work per value. The helpers here are those calls: exact-type checks that describe the
accepted values only on failure, splitting rows of tuples into one flat column and back, and
spotting columns that mostly repeat a few objects (a shared placements tuple, a shared span).

Example:
    >>> regroup([(1, 2), (3,)], ["a", "b", "c"])
    [('a', 'b'), ('c',)]
    >>> check_types([1, 2], frozenset({int}), "ints", ValueError)
"""

from __future__ import annotations

import itertools
import reprlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, overload

from dtorch.errors import DeserializationError
from dtorch.serialization.wire import aligned

NoneType = type(None)

#: Values written as themselves wherever any value may stand (everything else is a node).
NATIVE_TYPES: frozenset[type] = frozenset({NoneType, bool, int, float, str, bytes})

TUPLE = frozenset({tuple})
ARRAYS = frozenset({list, tuple})

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 3, 6, 6, 4
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = 48
_SHORT.repr_bytes = lambda value, level: repr(value[:48])  # type: ignore[attr-defined]


def show(value: object) -> str:
    """A short repr for messages: bounded in length and depth, whatever ``value`` holds."""
    return _SHORT.repr(value)


def names(types: Iterable[type]) -> str:
    """Sorted type names, for messages."""
    return ", ".join(sorted(t.__name__ for t in types))


class Walk(Protocol):
    """What writing a column needs beyond the column: numbers for the nodes it refers to
    (the writer finds and queues new ones), and room in the payload's data section."""

    def refs(
        self, kids: list[Any], classes: frozenset[type] | None, describe: Callable[[], str]
    ) -> Sequence[int]:
        """Provisional node numbers of ``kids`` (each of a type in ``classes``, or of any
        registered type if None; SerializationError naming ``describe()`` otherwise)."""
        ...

    def add_blob(self, data: memoryview) -> list[int]:
        """Place ``data`` in the data section: its ``[offset, size]``."""
        ...


@dataclass(slots=True)
class WriteContext:
    """The payload's data section as it is being laid out."""

    blobs: list[memoryview] = field(default_factory=list)
    blob_end: int = 0

    def add_blob(self, data: memoryview) -> list[int]:
        """Place ``data`` in the payload's data section (64-byte aligned): ``[offset, size]``."""
        offset = aligned(self.blob_end)
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
    claimed: int = 0  # bytes of the data section the ranges read so far take


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
        raise error(f"expected {label}, got {names(found - allowed)}")


def check_column(column: object, count: int) -> list[Any] | tuple[Any, ...]:
    """A wire column must be an array of ``count`` values."""
    if type(column) not in ARRAYS or len(column) != count:  # type: ignore[arg-type]
        raise DeserializationError(f"expected a column of {count} values, got {show(column)}")
    return column  # type: ignore[return-value]


def flatten(rows: Iterable[Iterable[Any]]) -> list[Any]:
    """The items of every row, in order, as one column."""
    return list(itertools.chain.from_iterable(rows))


_ZIP_WIDTH = 16  # longer rows (an operator list) are cut with islice, not a zip of iterators


def regroup(rows: list[Any], items: list[Any]) -> list[tuple[Any, ...]]:
    """``items`` (the flattened ``rows``, converted) split back into rows of the same lengths."""
    remaining = iter(items)
    lengths = set(map(len, rows))
    if len(lengths) == 1 and 0 < min(lengths) <= _ZIP_WIDTH:  # all short and as long
        return list(zip(*[remaining] * lengths.pop(), strict=False))
    return [tuple(itertools.islice(remaining, len(row))) for row in rows]


def lookup(table: list[Any], keys: Sequence[int]) -> list[Any]:
    """``table``'s entries at ``keys`` (a slice when the keys are a range)."""
    if type(keys) is range and keys.step == 1:
        return table[keys.start : keys.stop]
    if type(keys) is Repeated:  # the few distinct keys looked up, then spread
        return spread(keys.positions, lookup(table, keys.numbers))
    return list(map(table.__getitem__, keys))


def insert_nones(column: list[Any], present: list[Any]) -> list[Any]:
    """``column`` with its non-None values replaced, in order, by ``present``."""
    converted = iter(present)
    return [None if v is None else next(converted) for v in column]


#: Columns up to this long are not worth testing for repeated objects (callers on hot paths
#: compare against it first, sparing the call).
SHORT_COLUMN = 64
_WINDOW = 2 * SHORT_COLUMN  # the first values ``repeats`` looks at
_INDEX_FROM = 2 * _WINDOW  # ``index_repeats`` takes longer columns (measured)


def repeats(values: list[Any]) -> bool:
    """Whether the first values of a long column mostly repeat a few objects."""
    if len(values) <= SHORT_COLUMN:
        return False
    window = values[:_WINDOW]
    return len(set(map(id, window))) * 4 < len(window) * 3


def distinct_by_id(values: list[Any]) -> tuple[list[int] | None, list[Any]]:
    """``values`` without repeats of the same object, if it ``repeats`` (with the position of
    every value's object among them, for ``spread``); else ``(None, values)``."""
    if not repeats(values):
        return None, values
    found = index_repeats(values)
    return found if found is not None else _index_all(values)


def index_repeats(values: list[Any]) -> tuple[list[int], list[Any]] | None:
    """The distinct objects of a column that ``repeats``, first seen first, and the position
    of every value's object among them - if its first values hold every object it repeats.

    They usually do (a span per source line, a few meshes): then one pass over the column, a
    lookup per value in the small table of those first objects, finds every position. An
    object first seen later fails that lookup: None. None too for a column hardly longer
    than the first values, where a table of all its objects costs less.
    """
    if len(values) <= _INDEX_FROM:
        return None
    window = values[:_WINDOW]
    by_id = dict(zip(map(id, window), window, strict=True))
    slots = dict(zip(by_id, range(len(by_id)), strict=True))
    try:
        return list(map(slots.__getitem__, map(id, values))), list(by_id.values())
    except KeyError:  # an object first seen past the window
        return None


def _index_all(values: list[Any]) -> tuple[list[int], list[Any]]:
    """``index_repeats`` by a table of every object of the column."""
    ids = list(map(id, values))
    by_id = dict(zip(ids, values, strict=True))
    if len(by_id) == 1:  # one object throughout (a shared shape)
        return [0] * len(values), list(by_id.values())
    slots = dict(zip(by_id, range(len(by_id)), strict=True))
    return list(map(slots.__getitem__, ids)), list(by_id.values())


def spread(positions: list[int] | None, converted: list[Any]) -> list[Any]:
    """The converted value of every entry of a column, given ``converted`` for its distinct
    objects and the ``positions`` ``distinct_by_id`` found (None: no repeats were taken out,
    ``converted`` is the column's)."""
    if positions is None:
        return converted
    return list(map(converted.__getitem__, positions))


@dataclass(frozen=True, slots=True, eq=False)
class Repeated(Sequence[int]):
    """Node numbers of a column that repeats a few objects (``Walk.refs`` of spans, meshes):
    the ``numbers`` of its distinct objects and every value's ``positions`` among them.
    ``lookup`` renumbers the few distinct numbers and spreads them in one pass: the column's
    provisional numbers are never listed one by one."""

    positions: list[int]
    numbers: Sequence[int]

    def __len__(self) -> int:
        return len(self.positions)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self.numbers[p] for p in self.positions[index]]
        return self.numbers[self.positions[index]]


def distinct_rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]] | None:
    """The distinct rows, if they are hashable and at most half as many as the rows."""
    if len(rows) < 4:
        return None
    try:
        distinct = list(dict.fromkeys(rows))
    except TypeError:  # a row holds an array (a reference in an Any slot)
        return None
    return distinct if len(distinct) * 2 <= len(rows) else None
