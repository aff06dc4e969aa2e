"""InferenceCache: ``infer`` answers remembered per operator param and input metadata.

A loop records the same operators on operands of the same shapes, dtypes, meshes and
placements again and again; running the rule each time costs more than the rest of recording.
Rules are pure functions of the param, the inputs' metadata and torch's default dtype (scalar
promotion), so an answer can be reused whenever those are the same.

The first key holds ``id()`` of the param, the mesh and the placements tuple, not their
values: hashing and comparing those dataclasses would cost most of what the cache saves when
a loop records the very same param objects. The entry keeps those objects alive, so an id in
a live key always names the object it was taken from. Outputs' placements come from the
cached answer, so in a loop the next operator's inputs carry the very objects of the key.

Most callers make a new param per call (``x.transpose(1, 2)`` in a model's forward), which
the identity key always misses; a second table keys the param by value. A value key is
strict, so that equal-comparing values of different types never share an answer: every
number carries its type (``True``, ``1`` and ``1.0`` differ, and so do two IntEnums of equal
value), a float is keyed by its bits (``-0.0`` is not ``0.0``; NaN is itself), records by
their fields; whatever else (a mesh, a tensor, a generator) by identity, kept alive by the
entry's param. The tables are cleared when they reach ``limit`` entries; errors are never
cached (the rule raises again).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.opkind import MathKind
    >>> from dtorch.ir.params import BaseMathParam
    >>> from dtorch.ir.placement import Shard
    >>> cache = InferenceCache()
    >>> x = Operand(1, (4,), torch.float32, init_device_mesh("cpu", 2), (Shard(0),))
    >>> neg = BaseMathParam(MathKind.NEG)
    >>> cache.infer("neg", neg, (x,)) is cache.infer("neg", neg, (x,))
    True
    >>> len(cache)
    1
"""

from __future__ import annotations

import dataclasses
import enum
import operator
from collections.abc import Callable
from typing import Any

import torch

from dtorch.ir.operator import Operand
from dtorch.ir.params import OpParam
from dtorch.ir.rules.base import Inference
from dtorch.ir.rules.registry import infer as infer_uncached

_default_dtype = torch.get_default_dtype


class InferenceCache:
    """Remembered ``infer`` answers (see the module docstring); one per graph."""

    __slots__ = ("_by_value", "_entries", "_fields", "_flat", "_limit")

    def __init__(self, limit: int = 4096) -> None:
        if limit < 1:
            raise ValueError(f"an InferenceCache needs a limit of at least 1 entry, got {limit}")
        # key -> (answer, the objects whose ids the key holds)
        self._entries: dict[tuple[Any, ...], tuple[Inference, tuple[Any, ...]]] = {}
        self._by_value: dict[tuple[Any, ...], tuple[Inference, tuple[Any, ...]]] = {}
        # class -> the getter of its keyed fields (None: keyed by identity)
        self._fields: dict[type, Callable[[Any], tuple[Any, ...]] | None] = {}
        self._flat: set[type] = set(_PLAIN)  # field types a key holds as they are
        self._limit = limit

    def __len__(self) -> int:
        return len(self._entries)

    def infer(self, name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
        """``dtorch.ir.rules.infer(name, param, inputs)``, from the table when it can be."""
        # The usual arities without a loop: this is the per-operator hot path.
        if len(inputs) == 2:  # binary operators
            a, b = inputs
            layout: tuple[Any, ...] = (
                _default_dtype(),
                a.shape, a.dtype, id(a.mesh), id(a.placements),
                b.shape, b.dtype, id(b.mesh), id(b.placements),
            )  # fmt: skip
        elif len(inputs) == 1:  # unary operators and views
            x = inputs[0]
            layout = (_default_dtype(), x.shape, x.dtype, id(x.mesh), id(x.placements))
        else:
            layout = _layout(inputs)
        key = (id(param), layout)
        entry = self._entries.get(key)
        if entry is not None:
            return entry[0]
        by_value = (self._strict(param), _value_layout(inputs))
        entry = self._by_value.get(by_value)
        if entry is not None:
            return entry[0]
        answer = infer_uncached(name, param, inputs)
        if len(self._entries) >= self._limit:
            self._entries.clear()
            self._by_value.clear()
        self._entries[key] = self._by_value[by_value] = (answer, _held(param, inputs))
        return answer

    def _strict(self, value: Any) -> Any:
        """``value``'s strict value key (see the module docstring). A record whose fields
        are all flat (ints, bools, str, None, dtypes, enum members: equal only within a
        type) is keyed by its field values and their types, at C speed; others field by
        field."""
        cls = type(value)
        if cls in _PLAIN:
            return cls, value
        if cls is float:
            return float, value.hex()
        if cls is tuple:
            return tuple, *map(self._strict, value)
        if isinstance(value, enum.Enum):
            return cls, value.value
        fields = self._fields[cls] if cls in self._fields else self._fields_of(cls)
        if fields is None:
            return cls, id(value)
        values = fields(value)
        types = tuple(map(type, values))
        if self._flat.issuperset(types) or self._all_flat(types):
            return cls, values, types
        return cls, *map(self._strict, values)

    def _all_flat(self, types: tuple[type, ...]) -> bool:
        """Whether ``types`` are flat, enum classes noted as such when first met."""
        enums = [t for t in types if t not in self._flat and issubclass(t, enum.Enum)]
        self._flat.update(enums)
        return self._flat.issuperset(types)

    def _fields_of(self, cls: type) -> Callable[[Any], tuple[Any, ...]] | None:
        """The field values' getter of a frozen dataclass compared by value; None for
        anything else."""
        params = getattr(cls, "__dataclass_params__", None)
        fields: Callable[[Any], tuple[Any, ...]] | None = None
        if params is not None and params.frozen and params.eq:
            names = tuple(f.name for f in dataclasses.fields(cls))
            fields = (lambda v: ()) if not names else _getter(names)
        self._fields[cls] = fields
        return fields


_PLAIN: frozenset[type] = frozenset({int, bool, str, type(None), torch.dtype})


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A tuple of the named attributes (``attrgetter`` of one name gives the value alone)."""
    if len(names) == 1:
        (name,) = names
        return lambda v: (getattr(v, name),)
    return operator.attrgetter(*names)


def _layout(inputs: tuple[Operand, ...], placements: Callable[[Any], Any] = id) -> tuple[Any, ...]:
    """The inputs' metadata as a key, the placements tuples by ``placements`` (identity)."""
    key: list[Any] = [_default_dtype()]
    for o in inputs:
        key += (o.shape, o.dtype, id(o.mesh), placements(o.placements))
    return tuple(key)


def _value_layout(inputs: tuple[Operand, ...]) -> tuple[Any, ...]:
    """The inputs' metadata with placements by value (validated records of ints: equal is
    strict enough), for a param met by value."""
    return _layout(inputs, _itself)


def _itself(value: Any) -> Any:
    return value


def _held(param: OpParam, inputs: tuple[Operand, ...]) -> tuple[Any, ...]:
    """The objects a key names by id: kept alive by the entry so no id is reused meanwhile."""
    return (param, *[o.mesh for o in inputs], *[o.placements for o in inputs])
