"""Row codecs: one record at a time, each type's checks compiled into one function.

The column codecs (``dtorch.serialization.fields``) pay a few Python calls per column and per
group. For the small payloads of the wire (a batch of a few operators: some 15 types, most with
one or two records) those calls are the whole cost, so every row-capable node type also gets
three functions, compiled when the registry is built from its field codecs:

* ``scan(obj, seen, push)``: the record's field values as a row, checked and converted the
  way the column codecs' ``scan`` does it; the records it refers to are left in the row as
  themselves, and those whose ``id`` is not in the set ``seen`` yet are entered there and
  handed to ``push``;
* ``emit(columns, index, lookup)``: the columns of such rows with every referred record
  replaced by its node index (``index`` maps ``id(record)`` to it; ``lookup`` is
  ``index.__getitem__``); None for types that refer to no record;
* ``make(columns, count, nodes)``: the records of a group's wire columns, each row checked the
  way the column codecs' ``decode`` does it (``nodes``: the payload's nodes decoded so far).

Each function raises ``Unfit`` (or whatever a failed lookup raises) on any value it does not
accept, and callers then take the column path on the same data, which raises the error that
names the field. So a row codec only has to be as strict as the column codecs, never as
helpful. The accepted codec shapes are tables keyed by codec class (``_SCANS``, ``_MAKES``;
``_emit`` for the few that hold references); a type with a field of any other shape (a data
blob, a tuple of tuples) gets no row functions, and tensors, generators and containers, whose
values are not plain records, get none either: they are always written and read by columns.

The generated source comes from fixed templates per codec class. The only text substituted is
field names of registered record classes (checked to be plain identifiers, see
``attribute_exploder``) and generated local names; constants are passed in by name, never
written into the source, and the code runs without builtins beyond the few it is given.
Nothing from a payload ever reaches ``compile``.

Example:
    >>> from dtorch.serialization.catalog import DEFAULT_REGISTRY
    >>> from dtorch.ir.span import Span
    >>> span_rows = DEFAULT_REGISTRY.by_type[Span].rows
    >>> span_rows.scan(Span("m.py", 3, 1), set(), None)
    ('m.py', 3, 1)
    >>> span_rows.make((("m.py",), (3,), (1,)), 1, [])
    [m.py:3:1]
"""

from __future__ import annotations

import itertools
import keyword
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dtorch.ir.dtypes import CODE_TO_DTYPE, DTYPE_TO_CODE
from dtorch.serialization.columns import NATIVE_TYPES, NoneType, regroup
from dtorch.serialization.fields import (
    AnyField,
    DtypeField,
    EnumField,
    FieldCodec,
    OptionalField,
    PrimField,
    RefField,
    TupleField,
    decode_any,
)


class Unfit(Exception):
    """A value a row codec does not take: the caller takes the column path instead."""


class _Unsupported(Exception):
    """A field codec of a shape no row template covers."""


Scan = Callable[[Any, Any, Any], tuple[Any, ...]]
Emit = Callable[[Sequence[Any], dict[int, int], Callable[[int], int]], list[Any]]
Make = Callable[[Sequence[Any], int, list[Any]], list[Any]]


@dataclass(frozen=True, slots=True)
class RowCodec:
    """The compiled row functions of one node type (see the module docstring); ``scan`` and
    ``emit`` are None where values are not plain records (the type is then written by
    columns only)."""

    scan: Scan | None
    emit: Emit | None
    make: Make | None
    fans: tuple[str, ...] = ()  # the fields that hold a tuple of records (a batch's operators)

    def fanout(self, obj: Any) -> int:
        """How many records ``obj``'s tuple fields refer to (0 if they are not tuples: the
        scan then refuses them)."""
        try:
            return sum(len(getattr(obj, name)) for name in self.fans)
        except TypeError:
            return 0


#: Names every generated function may use besides its constants.
_HELPERS: dict[str, Any] = {
    "type": type,
    "tuple": tuple,
    "list": list,
    "map": map,
    "id": id,
    "min": min,
    "int": int,
    "F": Unfit,
    "N": NATIVE_TYPES,
    "D": decode_any,
    "INTS": frozenset({int}),
    "zip": zip,
    "len": len,
    "range": range,
    "NEW": object.__new__,
    "NONE": frozenset({NoneType}),
    "CHAIN": itertools.chain.from_iterable,
    "REGROUP": regroup,
}


class _Source:
    """The lines of one generated function and the constants they name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}

    def const(self, value: Any) -> str:
        name = f"K{len(self.consts)}"
        self.consts[name] = value
        return name

    def add(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def compile(self, name: str, signature: str, label: str) -> Callable[..., Any]:
        text = f"def {name}({signature}):\n" + "\n".join(self.lines) + "\n"
        namespace: dict[str, Any] = {"__builtins__": {}, **_HELPERS, **self.consts}
        exec(compile(text, f"<{name} {label}>", "exec"), namespace)  # see the module docstring
        function: Callable[..., Any] = namespace[name]
        return function


def _unwrap(codec: FieldCodec, kinds: tuple[type, ...]) -> Any:
    if type(codec) not in kinds:
        raise _Unsupported(type(codec).__name__)
    return codec


# --- scan: write-side checks, the records referred to handed on ----------------------------


def _push(v: str, depth: int, src: _Source) -> None:
    src.add(depth, f"if id({v}) not in seen:")
    src.add(depth + 1, f"seen.add(id({v}))")
    src.add(depth + 1, f"push({v})")


def _scan_prim(codec: Any, v: str, depth: int, src: _Source) -> None:
    src.add(depth, f"if type({v}) not in {src.const(codec.types)}: raise F")


def _scan_enum(codec: Any, v: str, depth: int, src: _Source) -> None:
    src.add(depth, f"if type({v}) is not {src.const(codec.enum)}: raise F")
    src.add(depth, f"{v} = {src.const(codec.values)}[{v}]")


def _scan_dtype(codec: Any, v: str, depth: int, src: _Source) -> None:
    src.add(depth, f"{v} = {src.const(DTYPE_TO_CODE)}[{v}]")


def _scan_ref(codec: Any, v: str, depth: int, src: _Source) -> None:
    src.add(depth, f"if type({v}) not in {src.const(codec.classes)}: raise F")
    _push(v, depth, src)


def _scan_any(codec: Any, v: str, depth: int, src: _Source) -> None:
    if codec.classes is not None:
        src.add(depth, f"if type({v}) not in {src.const(codec.classes)}: raise F")
    src.add(depth, f"if type({v}) not in N:")
    _push(v, depth + 1, src)


def _scan_optional(codec: Any, v: str, depth: int, src: _Source) -> None:
    src.add(depth, f"if {v} is not None:")
    _scan(codec.inner, v, depth + 1, src)


def _scan_tuple(codec: Any, v: str, depth: int, src: _Source) -> None:
    inner = _unwrap(codec.inner, (PrimField, RefField, AnyField))
    allowed = inner.types if type(inner) is PrimField else inner.classes
    if allowed is None:
        src.add(depth, f"if type({v}) is not tuple: raise F")
    else:
        check = f"not {src.const(allowed)}.issuperset(map(type, {v}))"
        src.add(depth, f"if type({v}) is not tuple or {check}: raise F")
    if type(inner) is RefField:
        src.add(depth, f"for x in {v}:")
        _push("x", depth + 1, src)
    elif type(inner) is AnyField:
        src.add(depth, f"for x in {v}:")
        src.add(depth + 1, "if type(x) not in N:")
        _push("x", depth + 2, src)


_SCANS: dict[type, Callable[[Any, str, int, _Source], None]] = {
    PrimField: _scan_prim,
    EnumField: _scan_enum,
    DtypeField: _scan_dtype,
    RefField: _scan_ref,
    AnyField: _scan_any,
    OptionalField: _scan_optional,
    TupleField: _scan_tuple,
}


def _scan(codec: FieldCodec, v: str, depth: int, src: _Source) -> None:
    _SCANS[type(_unwrap(codec, tuple(_SCANS)))](codec, v, depth, src)


# --- emit: referred records -> node indices ------------------------------------------------


def _emit(codec: Any, v: str) -> str:
    kind = type(codec)
    if not codec.has_children:
        return v
    if kind is RefField:
        return f"index[id({v})]"
    if kind is AnyField:
        return f"({v} if type({v}) in N else (index[id({v})],))"
    if kind is OptionalField:
        return f"(None if {v} is None else {_emit(codec.inner, v)})"
    if kind is TupleField and type(codec.inner) is RefField:
        return f"tuple(map(lookup, map(id, {v})))"
    if kind is TupleField and type(codec.inner) is AnyField:
        return f"tuple([y if type(y) in N else (index[id(y)],) for y in {v}])"
    raise _Unsupported(kind.__name__)


def _emit_column(codec: Any, column: str) -> str:
    kind = type(codec)
    if not codec.has_children:
        return column
    if kind is RefField:  # the usual reference column, at C speed
        return f"list(map(lookup, map(id, {column})))"
    rows = f"[{_emit(codec, 'v')} for v in {column}]"
    if kind is TupleField and type(codec.inner) is RefField:  # many rows: flattened, mapped, cut
        flat = f"REGROUP({column}, list(map(lookup, map(id, CHAIN({column})))))"
        return f"({rows} if len({column}) < 8 else {flat})"
    if kind is OptionalField:  # often None throughout (a Create param's generator)
        return f"({column} if NONE.issuperset(map(type, {column})) else {rows})"
    return rows


# --- make: read-side checks and conversions -------------------------------------------------


def _make_prim(codec: Any, v: str, depth: int, src: _Source) -> None:
    src.add(depth, f"if type({v}) not in {src.const(codec.types)}: raise F")


def _make_enum(codec: Any, v: str, depth: int, src: _Source) -> None:
    src.add(depth, f"if type({v}) is not int: raise F")  # True and 1.0 would find member 1
    src.add(depth, f"{v} = {src.const(codec.members)}[{v}]")


def _make_dtype(codec: Any, v: str, depth: int, src: _Source) -> None:
    src.add(depth, f"if type({v}) is not int: raise F")  # True == 1 would index the table
    src.add(depth, f"{v} = {src.const(CODE_TO_DTYPE)}[{v}]")


def _make_ref(codec: Any, v: str, depth: int, src: _Source) -> None:
    src.add(depth, f"if type({v}) is not int or {v} < 0: raise F")
    src.add(depth, f"{v} = nodes[{v}]")
    src.add(depth, f"if type({v}) not in {src.const(codec.classes)}: raise F")


def _make_any(codec: Any, v: str, depth: int, src: _Source) -> None:
    src.add(depth, f"if type({v}) not in N: {v} = D({v}, nodes)")
    if codec.classes is not None:
        src.add(depth, f"if type({v}) not in {src.const(codec.classes)}: raise F")


def _make_optional(codec: Any, v: str, depth: int, src: _Source) -> None:
    src.add(depth, f"if {v} is not None:")
    _make(codec.inner, v, depth + 1, src)


def _make_tuple(codec: Any, v: str, depth: int, src: _Source) -> None:
    inner = _unwrap(codec.inner, (PrimField, RefField, AnyField))
    kind = type(inner)
    if kind is PrimField:
        check = f"not {src.const(inner.types)}.issuperset(map(type, {v}))"
        src.add(depth, f"if type({v}) is not tuple or {check}: raise F")
        return
    if kind is RefField:
        check = f"not INTS.issuperset(map(type, {v})) or ({v} and min({v}) < 0)"
        src.add(depth, f"if type({v}) is not tuple or {check}: raise F")
        src.add(depth, f"{v} = tuple(map(nodes.__getitem__, {v}))")
    else:
        src.add(depth, f"if type({v}) is not tuple: raise F")
        src.add(depth, f"{v} = tuple([x if type(x) in N else D(x, nodes) for x in {v}])")
    if inner.classes is not None:
        check = f"not {src.const(inner.classes)}.issuperset(map(type, {v}))"
        src.add(depth, f"if {check}: raise F")


_MAKES: dict[type, Callable[[Any, str, int, _Source], None]] = {
    PrimField: _make_prim,
    EnumField: _make_enum,
    DtypeField: _make_dtype,
    RefField: _make_ref,
    AnyField: _make_any,
    OptionalField: _make_optional,
    TupleField: _make_tuple,
}


def _make(codec: FieldCodec, v: str, depth: int, src: _Source) -> None:
    _MAKES[type(_unwrap(codec, tuple(_MAKES)))](codec, v, depth, src)


# --- whole functions ------------------------------------------------------------------------


def _locals(count: int) -> list[str]:
    return [f"v{i}" for i in range(count)]


def _unpack(names: list[str], row: str) -> str:
    return f"{', '.join(names)}, = {row}" if names else f"if {row}: raise F"


def _row(names: list[str]) -> str:
    return f"({', '.join(names)},)" if names else "()"


def _compile_scan(label: str, attributes: Sequence[str], codecs: Sequence[FieldCodec]) -> Scan:
    """``scan`` for records whose fields are the named attributes."""
    for name in attributes:
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
            raise _Unsupported(f"field name {name!r} is not a plain identifier")
    src = _Source()
    names = _locals(len(codecs))
    for v, attribute in zip(names, attributes, strict=True):
        src.add(1, f"{v} = obj.{attribute}")
    for v, codec in zip(names, codecs, strict=True):
        _scan(codec, v, 1, src)
    src.add(1, f"return {_row(names)}")
    scan: Scan = src.compile("scan", "obj, seen, push", label)
    return scan


def _compile_emit(label: str, codecs: Sequence[FieldCodec]) -> Emit | None:
    """``emit`` (None when no field refers to records)."""
    if not any(codec.has_children for codec in codecs):
        return None
    src = _Source()
    columns = [f"c{i}" for i in range(len(codecs))]
    src.add(1, _unpack(columns, "columns"))
    values = [_emit_column(codec, c) for c, codec in zip(columns, codecs, strict=True)]
    src.add(1, f"return [{', '.join(values)}]")
    emit: Emit = src.compile("emit", "columns, index, lookup", label)
    return emit


def _compile_make(
    label: str, codecs: Sequence[FieldCodec], build: Callable[..., Any], names: Sequence[str]
) -> Make:
    """``make``: check a group's columns, then check, convert and build each row."""
    src = _Source()
    values = _locals(len(codecs))
    columns = [f"c{i}" for i in range(len(codecs))]
    if not codecs:
        src.add(1, "if columns: raise F")
        src.add(1, f"return [{src.const(build)}() for _ in range(count)]")
        return src.compile("make", "columns, count, nodes", label)
    src.add(1, _unpack(columns, "columns"))
    for column in columns:
        src.add(1, f"if type({column}) is not tuple or len({column}) != count: raise F")
    src.add(1, "built = []")
    src.add(1, "append = built.append")
    src.add(1, f"for {', '.join(values)}, in zip({', '.join(columns)}):")
    for v, codec in zip(values, codecs, strict=True):
        _make(codec, v, 2, src)
    _construct(build, names, values, src)
    src.add(1, "return built")
    make: Make = src.compile("make", "columns, count, nodes", label)
    return make


def frozen_slots(cls: Any, names: Sequence[str]) -> list[Any] | None:
    """The slot descriptors of ``names`` when ``cls`` is a frozen slotted class (its own
    ``__setattr__`` refuses writes): setting them one by one, then running ``__post_init__``,
    builds what ``__init__`` builds at half the cost, since a frozen ``__init__`` assigns each
    field through ``object.__setattr__``. None otherwise (a plain ``__init__`` is faster).

    Example:
        >>> from dtorch.ir.span import Span
        >>> from dtorch.ir.operator import Operator
        >>> len(frozen_slots(Span, ["file", "line", "column"]))
        3
        >>> frozen_slots(Operator, ["id"]) is None  # not frozen: its __init__ is cheap
        True
    """
    if not isinstance(cls, type) or "__setattr__" not in vars(cls):
        return None
    slots = [getattr(cls, name, None) for name in names]
    if not all(isinstance(slot, types.MemberDescriptorType) for slot in slots):
        return None
    return slots


def _construct(
    build: Callable[..., Any], names: Sequence[str], values: list[str], src: _Source
) -> None:
    """Append ``build(*values)`` (slot by slot for a frozen record, see ``frozen_slots``)."""
    slots = frozen_slots(build, names)
    if slots is None:
        src.add(2, f"append({src.const(build)}({', '.join(values)}))")
        return
    src.add(2, f"o = NEW({src.const(build)})")
    for slot, v in zip(slots, values, strict=True):
        src.add(2, f"{src.const(slot.__set__)}(o, {v})")
    post_init = getattr(build, "__post_init__", None)
    if post_init is not None:
        src.add(2, f"{src.const(post_init)}(o)")
    src.add(2, "append(o)")


def row_codec(
    label: str,
    codecs: Sequence[FieldCodec],
    names: Sequence[str],
    by_attribute: bool | Sequence[str],
    build: Callable[..., Any] | None,
) -> RowCodec | None:
    """The row codec of a node type with fields ``names``: ``by_attribute`` says the fields
    are attributes of its values (a sequence: of those names), ``build`` makes a value from
    field values (None: values are built by columns only). None when no function applies.

    Example:
        >>> from dtorch.serialization.fields import PrimField
        >>> ints = PrimField(frozenset({int}))
        >>> pair = row_codec("pair", [ints, ints], ["a", "b"], False, lambda a, b: (a, b))
        >>> pair.scan is None, pair.make(((1, 2), (3, 4)), 2, [])
        (True, [(1, 3), (2, 4)])
    """
    attributes = (names if by_attribute is True else by_attribute) if by_attribute else None
    try:
        make = None if build is None else _compile_make(label, codecs, build, names)
    except _Unsupported:
        make = None
    try:
        scan = None if attributes is None else _compile_scan(label, attributes, codecs)
        emit = None if attributes is None else _compile_emit(label, codecs)
    except _Unsupported:
        scan = emit = None
    if make is None and scan is None:
        return None
    fans = tuple(
        name
        for name, codec in zip(names, codecs, strict=True)
        if type(codec) is TupleField and codec.has_children
    )
    return RowCodec(scan, emit, make, fans)
