"""The type registry: every serializable type once, under a stable tag, with its fields.

A ``NodeType`` says how the values of one Python type become columns (``explode``), which
codec writes each column (``fields``), and how decoded columns become values again
(``build``). Frozen dataclass records need only their tag: fields and codecs come from their
annotations (``record_type``). A ``TypeRegistry`` is an immutable table of node types, keyed
by exact Python type and by tag, with the order groups of them may be written in (``ranks``,
from the strongly connected components of what each type's fields may refer to).

Example:
    >>> from dtorch.ir.span import Span
    >>> registry = TypeRegistry.build([("ir.Span", Span)], [])
    >>> registry.by_tag["ir.Span"].field_names
    ('file', 'line', 'column')
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import keyword
import types
import typing
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from dtorch.errors import SerializationError
from dtorch.serialization.fields import (
    NATIVE_TYPES,
    AnyField,
    DtypeField,
    EnumField,
    FieldCodec,
    OptionalField,
    PrimField,
    RefField,
    TupleField,
)
from dtorch.serialization.rows import RowCodec, frozen_slots, row_codec

NoneType = type(None)


class _Required:
    """The default of a field that has none: data that lacks it cannot be read."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

#: What a typed scalar annotation accepts (``float`` takes int and bool, as typing does).
_PRIM_TYPES: Mapping[type, frozenset[type]] = {
    bool: frozenset({bool}),
    int: frozenset({int, bool}),
    float: frozenset({float, int, bool}),
    str: frozenset({str}),
    bytes: frozenset({bytes}),
    NoneType: frozenset({NoneType}),
}

Explode = Callable[[list[Any]], list[list[Any]]]
Build = Callable[[list[list[Any]], int], list[Any]]


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a node type: its name, its codec, and its default (or REQUIRED).

    ``formerly`` lists names older payloads gave this field (a record field's
    ``metadata={"formerly": (...)}``); they still decode into it.
    """

    name: str
    codec: FieldCodec
    default: Any = REQUIRED
    default_factory: Callable[[], Any] | None = None
    formerly: tuple[str, ...] = ()

    def missing_column(self, count: int) -> list[Any] | None:
        """The column older data that lacks this field stands for (None: it is required)."""
        if self.default_factory is not None:
            return [self.default_factory() for _ in range(count)]
        return None if self.default is REQUIRED else [self.default] * count


@dataclass(frozen=True, slots=True, eq=False)
class NodeType:
    """How one Python type is written: fields, values -> columns, columns -> values.

    ``field_names`` and ``child_fields`` (positions of the fields that may refer to other
    nodes) follow from ``fields``; they are kept because every payload asks for them.
    ``make`` builds one value from its field values, where that is a plain call (a record's
    class); ``by_attribute`` says that a value's fields are its attributes of the same names
    (or, a tuple, of these names: a DeviceMesh's ``device_type`` field is its ``device_kind``).
    From these two follow the type's compiled row codec (``rows``, see
    ``dtorch.serialization.rows``), which small groups are written and read with.
    """

    tag: str
    cls: type
    fields: tuple[Field, ...]
    explode: Explode
    build: Build
    make: Callable[..., Any] | None = None
    by_attribute: bool | tuple[str, ...] = False
    field_names: tuple[str, ...] = dataclasses.field(init=False)
    child_fields: tuple[int, ...] = dataclasses.field(init=False)
    rows: RowCodec | None = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        names = tuple(f.name for f in self.fields)
        children = tuple(i for i, f in enumerate(self.fields) if f.codec.has_children)
        codecs = [f.codec for f in self.fields]
        rows = row_codec(self.tag, codecs, names, self.by_attribute, self.make)
        object.__setattr__(self, "field_names", names)
        object.__setattr__(self, "child_fields", children)
        object.__setattr__(self, "rows", rows)

    def __repr__(self) -> str:
        return f"NodeType({self.tag})"


_EXPLODE_TEMPLATE = "def explode(objs):\n    return [{columns}]\n"
_COLUMN_TEMPLATE = "[o.{name} for o in objs]"
_LOOP_TEMPLATE = """def explode(objs):
    if len(objs) < LONG:
        return [{columns}]
    {lists} = {empties}
    {appends} = {methods}
    for o in objs:
{reads}
    return [{lists}]
"""
#: Past this many values of a record of at least ``_WIDE_EXPLODE`` fields (an operator), one
#: loop appending to every column beats a comprehension per column: it reads each value once,
#: and on long columns of wide records memory, not the interpreter, sets the pace (measured:
#: 100,000 operators 19 ms instead of 31; narrower records gain nothing).
_LONG_EXPLODE = 16384
_WIDE_EXPLODE = 6


def attribute_exploder(names: Sequence[str]) -> Explode:
    """``explode`` that reads the named attributes of every value, a column per name.

    ``[o.name for o in objs]`` runs about twice as fast as ``map(attrgetter("name"), objs)``:
    the interpreter specialises an attribute read written in the source to the slot it
    names. So the function is compiled from a fixed template when the registry is built (at
    import); past ``_LONG_EXPLODE`` values of a wide record it reads every field of a value
    in one loop instead, touching each value once rather than once per field. The only text
    substituted is field names of registered record classes - our own dataclass definitions
    - each checked to be a plain identifier, and the code runs with no builtins but ``len``:
    no payload, and nothing else from outside, ever reaches ``compile``.

    Example:
        >>> from dtorch.ir.span import Span
        >>> attribute_exploder(["file", "line"])([Span("a.py", 1), Span("b.py", 2)])
        [['a.py', 'b.py'], [1, 2]]
    """
    for name in names:
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
            raise SerializationError(f"field name {name!r} is not a plain identifier")
    namespace: dict[str, Any] = {}
    code = compile(_explode_source(names), f"<explode {names}>", "exec")
    helpers = {"__builtins__": {}, "len": len, "LONG": _LONG_EXPLODE}
    exec(code, helpers, namespace)  # a fixed template, see the docstring
    explode: Explode = namespace["explode"]
    return explode


def _explode_source(names: Sequence[str]) -> str:
    """The text of ``explode`` for the (checked) field ``names``."""
    columns = ", ".join(_COLUMN_TEMPLATE.format(name=n) for n in names)
    if len(names) < _WIDE_EXPLODE:
        return _EXPLODE_TEMPLATE.format(columns=columns)
    lists = [f"c{i}" for i in range(len(names))]
    appends = [f"a{i}" for i in range(len(names))]
    return _LOOP_TEMPLATE.format(
        columns=columns,
        lists=", ".join(lists),
        empties=", ".join("[]" for _ in names),
        appends=", ".join(appends),
        methods=", ".join(f"{c}.append" for c in lists),
        reads="\n".join(f"        {a}(o.{n})" for a, n in zip(appends, names, strict=True)),
    )


_FEW = 4


def slotted_builder(cls: type, names: Sequence[str]) -> Build:
    """``build`` for a dataclass. A frozen slotted one gets each slot set a column at a time
    (as the generated ``__init__`` would, without a Python call per record), then its
    ``__post_init__`` checks; any other is built by its ``__init__``, which for a plain
    slotted record is faster than the column passes (``rows.frozen_slots``)."""
    slots = frozen_slots(cls, names)
    if slots is None:
        return lambda columns, count: list(map(cls, *columns)) if columns else _repeat(cls, count)
    setters = [s.__set__ for s in slots]
    post_init = getattr(cls, "__post_init__", None)

    def build(columns: list[list[Any]], count: int) -> list[Any]:
        if count <= _FEW and columns:  # setting up the column passes costs more than it saves
            return list(map(cls, *columns))
        objs: list[Any] = list(map(object.__new__, itertools.repeat(cls, count)))
        for setter, column in zip(setters, columns, strict=True):
            deque(map(setter, objs, column), maxlen=0)
        if post_init is not None:
            deque(map(post_init, objs), maxlen=0)
        return objs

    return build


def _repeat(cls: type, count: int) -> list[Any]:
    return [cls() for _ in range(count)]


def record_type(
    tag: str, cls: type, codec_for: Callable[[Any], FieldCodec], hints: Mapping[str, Any]
) -> NodeType:
    """The node type of a frozen dataclass record, from its fields and their annotations."""
    fields = tuple(
        Field(f.name, codec_for(hints[f.name]), _default(f), _factory(f), _formerly(f))
        for f in dataclasses.fields(cls)
    )
    names = [f.name for f in fields]
    explode, build = attribute_exploder(names), slotted_builder(cls, names)
    return NodeType(tag, cls, fields, explode, build, make=cls, by_attribute=True)


# Renamed record fields keep their old names readable (see Field.formerly).
def _formerly(f: dataclasses.Field[Any]) -> tuple[str, ...]:
    return tuple(f.metadata.get("formerly", ()))


def _default(f: dataclasses.Field[Any]) -> Any:
    return REQUIRED if f.default is dataclasses.MISSING else f.default


def _factory(f: dataclasses.Field[Any]) -> Callable[[], Any] | None:
    factory = f.default_factory
    return None if factory is dataclasses.MISSING else factory


@dataclass(frozen=True, slots=True)
class TypeRegistry:
    """Every serializable type: by exact Python type (writing) and by tag (reading).

    ``families`` numbers groups of types that one typed field may refer to together (every
    param type, the three placements); the writer keeps one identity table per family, so
    a typed column of references needs one table, and tables stay small.

    ``ranks`` orders the types so that a field only refers to types of a lower rank, or of
    its own rank when that rank is in ``cyclic`` (types that may refer to each other, or to
    themselves: containers, sub-graphs, fused params). A payload writes its groups by rank
    and orders only the cyclic ranks by the references it holds. ``levels`` is a coarser
    order (a field only refers to lower levels, or its own rank): within a level a payload may
    put its types in any order, so it puts the small groups (shared meshes, spans) first,
    where their indices take the fewest bytes.
    """

    by_type: Mapping[type, NodeType]
    by_tag: Mapping[str, NodeType]
    families: Mapping[type, int]
    ranks: Mapping[NodeType, int]
    cyclic: frozenset[int]
    levels: Mapping[NodeType, int]  # 0 for types that refer to no other, else 1 + the highest
    #: A cache for the reader: the bindings of type tables it has read, by table (a table is
    #: the same for every batch of the same kinds of operators). It never changes a result.
    bindings: dict[Any, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(
        cls, records: Iterable[tuple[str, type]], specials: Iterable[NodeType]
    ) -> TypeRegistry:
        """A registry of dataclass ``records`` (tag, class) and hand-written ``specials``."""
        records, specials = list(records), list(specials)
        classes = [c for _, c in records] + [s.cls for s in specials]
        resolver = _AnnotationResolver(frozenset(classes))
        node_types = [
            record_type(tag, c, resolver.codec, resolver.hints(c)) for tag, c in records
        ] + specials
        return cls._index(node_types)

    @classmethod
    def _index(cls, node_types: list[NodeType]) -> TypeRegistry:
        by_type = {nt.cls: nt for nt in node_types}
        by_tag = {nt.tag: nt for nt in node_types}
        if len(by_type) != len(node_types) or len(by_tag) != len(node_types):
            raise SerializationError("a type or a tag is registered twice")
        ranks, cyclic, levels = _ranks(node_types)
        return cls(
            types.MappingProxyType(by_type),
            types.MappingProxyType(by_tag),
            types.MappingProxyType(_families(node_types)),
            types.MappingProxyType(ranks),
            cyclic,
            types.MappingProxyType(levels),
        )

    def node_type(self, cls: type, where: str) -> NodeType:
        """The node type of ``cls`` (SerializationError naming ``where`` if it has none)."""
        try:
            return self.by_type[cls]
        except KeyError:
            raise SerializationError(
                f"cannot serialize a value of type {cls.__module__}.{cls.__qualname__} "
                f"(found in {where}); serializable: registered dtorch records, torch.Tensor, "
                f"torch.Generator, torch.dtype, and list, tuple, dict, str, int, float, bool, "
                f"None, bytes"
            ) from None


def _families(node_types: list[NodeType]) -> dict[type, int]:
    """Union the classes each typed reference field accepts; number the resulting sets."""
    parent: dict[type, type] = {nt.cls: nt.cls for nt in node_types}

    def find(cls: type) -> type:
        while parent[cls] is not cls:
            parent[cls] = cls = parent[parent[cls]]
        return cls

    for node_type in node_types:
        for field in node_type.fields:
            first, *rest = field.codec.child_classes or (None,)
            for other in rest:
                parent[find(other)] = find(first)  # type: ignore[arg-type]
    numbers: dict[type, int] = {}
    return {cls: numbers.setdefault(find(cls), len(numbers)) for cls in parent}


def _ranks(
    node_types: list[NodeType],
) -> tuple[dict[NodeType, int], frozenset[int], dict[NodeType, int]]:
    """Each type's component in the graph of what its fields may refer to (children first),
    the components that hold a cycle, and each type's level."""
    edges = {nt: _targets(nt, node_types) for nt in node_types}
    components = strongly_connected(node_types, edges)
    ranks = {nt: rank for rank, component in enumerate(components) for nt in component}
    cyclic = frozenset(
        rank
        for rank, component in enumerate(components)
        if len(component) > 1 or component[0] in edges[component[0]]
    )
    levels: dict[NodeType, int] = {}
    for rank, component in enumerate(components):  # children first: their levels are known
        below = [levels[t] for nt in component for t in edges[nt] if ranks[t] != rank]
        levels.update(dict.fromkeys(component, 1 + max(below, default=-1)))
    return ranks, cyclic, levels


def _targets(node_type: NodeType, node_types: list[NodeType]) -> list[NodeType]:
    """The types ``node_type``'s fields may refer to (an untyped ``Any`` field: all)."""
    targets: list[NodeType] = []
    for field in node_type.fields:
        if not field.codec.has_children:
            continue
        classes = field.codec.child_classes
        # in the registry's order, not the set's (an address order): the same bytes in
        # every process
        targets.extend(nt for nt in node_types if classes is None or nt.cls in classes)
    return targets


@dataclass(frozen=True, slots=True)
class _AnnotationResolver:
    """Turns a record's field annotations into field codecs, given every registered class."""

    classes: frozenset[type]

    def hints(self, cls: type) -> dict[str, Any]:
        # Annotations are source text of our own modules; names under TYPE_CHECKING (e.g.
        # Operator's OpParam) are resolved against the registered classes and their bases.
        local = {c.__name__: c for c in self.classes for c in c.__mro__}
        return typing.get_type_hints(cls, localns=local)

    def codec(self, annotation: Any) -> FieldCodec:
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin is tuple:
            return self._tuple(annotation, args)
        if origin in (typing.Union, types.UnionType):
            return self._union(annotation, args)
        return self._single(annotation)

    def _tuple(self, annotation: Any, args: tuple[Any, ...]) -> FieldCodec:
        if len(args) != 2 or args[1] is not Ellipsis:
            raise SerializationError(
                f"unsupported field annotation {annotation!r}: use tuple[X, ...]"
            )
        return TupleField(self.codec(args[0]))

    def _union(self, annotation: Any, args: tuple[Any, ...]) -> FieldCodec:
        if all(a in _PRIM_TYPES for a in args):
            return PrimField(frozenset().union(*(_PRIM_TYPES[a] for a in args)))
        rest = [a for a in args if a is not NoneType]
        if len(rest) == 1:
            return OptionalField(self.codec(rest[0]))
        if all(a in _PRIM_TYPES or self._is_record(a) for a in args):
            allowed = frozenset().union(*(self._accepted(a) for a in args))
            return AnyField(allowed, " or ".join(sorted(t.__name__ for t in allowed)))
        raise SerializationError(f"unsupported field annotation {annotation!r}")

    def _accepted(self, annotation: Any) -> frozenset[type]:
        if annotation in _PRIM_TYPES:
            return _PRIM_TYPES[annotation]
        return self._subclasses(annotation)

    def _single(self, annotation: Any) -> FieldCodec:
        if annotation in _PRIM_TYPES:
            return PrimField(_PRIM_TYPES[annotation])
        if annotation is torch.dtype:
            return DtypeField()
        if isinstance(annotation, type) and issubclass(annotation, enum.IntEnum):
            return EnumField.of(annotation)
        if self._is_record(annotation):
            return RefField(self._subclasses(annotation), annotation.__name__)
        raise SerializationError(
            f"field annotation {annotation!r} names no registered type; register it first"
        )

    def _is_record(self, annotation: Any) -> bool:
        return isinstance(annotation, type) and bool(self._subclasses(annotation))

    def _subclasses(self, annotation: type) -> frozenset[type]:
        return frozenset(
            c for c in self.classes if issubclass(c, annotation) and c not in NATIVE_TYPES
        )


_N = TypeVar("_N", bound=Hashable)


def strongly_connected(nodes: Iterable[_N], edges: Mapping[_N, Iterable[_N]]) -> list[list[_N]]:
    """The components of the graph reachable from ``nodes``, each after every component it
    reaches (so children come first): Tarjan's algorithm, iterative. The registry ranks its
    types with it; the writer orders the types of a cyclic rank with it again.

    Example:
        >>> edges = {"a": ["b"], "b": ["a", "c"], "c": []}
        >>> [sorted(c) for c in strongly_connected(["a", "b", "c"], edges)]
        [['c'], ['a', 'b']]
    """
    index: dict[_N, int] = {}
    low: dict[_N, int] = {}
    stack: list[_N] = []
    on_stack: set[_N] = set()
    result: list[list[_N]] = []

    def enter(node: _N) -> list[Any]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        return [node, list(edges.get(node, ())), 0]

    for root in nodes:
        if root in index:
            continue
        work = [enter(root)]
        while work:
            frame = work[-1]
            node, children, position = frame
            if position < len(children):
                frame[2] = position + 1
                child = children[position]
                if child not in index:
                    work.append(enter(child))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                result.append(_pop_component(stack, on_stack, node))
    return result


def _pop_component(stack: list[_N], on_stack: set[_N], head: _N) -> list[_N]:
    component = []
    while True:
        node = stack.pop()
        on_stack.discard(node)
        component.append(node)
        if node is head:
            return component
