"""assert_structural_equal: two values hold the same structure, field by field.

Records compare by their registered fields (a DeviceMesh by device type, shape, ids and
names), tensors by dtype, shape and bytes (so NaNs and -0.0 compare bit for bit), generators
by device and state, containers item by item, floats with NaN equal to NaN. Types must match
exactly. Values shared inside one structure are compared once. The walk is iterative, so deep
nesting is fine; a failure raises AssertionError with the path to the first difference.

With ``enable_auto_mapping=True`` operator ids, operand ids and operator names may differ
between the two sides, as long as each maps one to one, consistently across the whole
structure (the fields that hold them are listed in ``ID_FIELDS``).

Example:
    >>> assert_structural_equal({"a": [1, float("nan")]}, {"a": [1, float("nan")]})
    >>> assert_structural_equal((1, 2), (1, 3))
    Traceback (most recent call last):
    ...
    AssertionError: structures differ at root[1]: 2 != 3
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from dtorch.ir.operator import ExecuteBatch, Operand, Operator
from dtorch.ir.params import SubGraphParam
from dtorch.serialization.catalog import DEFAULT_REGISTRY
from dtorch.serialization.columns import NATIVE_TYPES, show
from dtorch.serialization.registry import TypeRegistry
from dtorch.serialization.tensors import tensor_bytes

#: Record fields holding ids, and the id space each belongs to.
ID_FIELDS: Mapping[tuple[type, str], str] = {
    (Operator, "id"): "operator id",
    (Operator, "name"): "operator name",
    (Operand, "id"): "operand id",
    (Operator, "inputs"): "operand id",
    (Operator, "outputs"): "operand id",
    (ExecuteBatch, "no_hold"): "operand id",
    (SubGraphParam, "inputs"): "operand id",
    (SubGraphParam, "outputs"): "operand id",
}

#: A path is a linked list of segments, rendered only when something differs.
Path = tuple[Any, str] | None


class _Different(Exception):
    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(path, detail)
        self.path, self.detail = path, detail


def _render(path: Path) -> str:
    parts = []
    while path is not None:
        path, segment = path
        parts.append(segment)
    return "root" + "".join(reversed(parts))


def _same_native(a: Any, b: Any) -> bool:
    if type(a) is float:
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


class _IdMap:
    """One id space: a one-to-one map from the left side's ids to the right side's."""

    __slots__ = ("backward", "forward")

    def __init__(self) -> None:
        self.forward: dict[Any, Any] = {}
        self.backward: dict[Any, Any] = {}

    def check(self, a: Any, b: Any) -> str | None:
        """None if ``a <-> b`` agrees with every pair seen before, else why not."""
        if self.forward.setdefault(a, b) != b:
            return (
                f"{show(a)} was mapped to {show(self.forward[a])} before, here it meets {show(b)}"
            )
        if self.backward.setdefault(b, a) != a:
            return f"{show(b)} was mapped from {show(self.backward[b])} before, here from {show(a)}"
        return None


class _Comparer:
    __slots__ = ("auto", "compared", "id_maps", "registry", "stack")

    def __init__(self, registry: TypeRegistry, auto: bool) -> None:
        self.registry, self.auto = registry, auto
        self.compared: set[tuple[int, int]] = set()
        self.id_maps: dict[str, _IdMap] = {}
        self.stack: list[tuple[Any, Any, Path, str | None]] = []

    def run(self, a: Any, b: Any) -> None:
        self.stack.append((a, b, None, None))
        while self.stack:
            a, b, path, space = self.stack.pop()
            if space is None or not self.auto:
                self.compare(a, b, path)
            else:
                self.ids(space, a, b, path)

    def push(self, pairs: list[tuple[Any, Any, Path, str | None]]) -> None:
        """Compare ``pairs`` next, the first one first; a pair with an id space holds ids."""
        self.stack.extend(reversed(pairs))

    def compare(self, a: Any, b: Any, path: Path) -> None:
        kind = type(a)
        if kind is not type(b):
            raise _Different(path, f"{kind.__name__} != {type(b).__name__}")
        if kind in NATIVE_TYPES:
            if not _same_native(a, b):
                raise _Different(path, f"{show(a)} != {show(b)}")
            return
        key = (id(a), id(b))
        if key in self.compared:
            return
        self.compared.add(key)
        _COMPARATORS.get(kind, _compare_other)(self, a, b, path)

    def ids(self, space: str, a: Any, b: Any, path: Path) -> None:
        """Check ids (an int or a tuple of them) against the one-to-one map of ``space``."""
        left, right = (a, b) if type(a) is tuple else ((a,), (b,))
        if type(left) is not type(right) or len(left) != len(right):
            raise _Different(path, f"{show(a)} != {show(b)}")
        id_map = self.id_maps.setdefault(space, _IdMap())
        for i, (x, y) in enumerate(zip(left, right, strict=True)):
            problem = id_map.check(x, y)
            if problem is not None:
                raise _Different(path, f"{space} {problem} (position {i})")


def _compare_sequences(c: _Comparer, a: Any, b: Any, path: Path) -> None:
    if len(a) != len(b):
        raise _Different(path, f"length {len(a)} != {len(b)}")
    c.push([(x, y, (path, f"[{i}]"), None) for i, (x, y) in enumerate(zip(a, b, strict=True))])


def _compare_dicts(c: _Comparer, a: dict[Any, Any], b: dict[Any, Any], path: Path) -> None:
    missing = [k for k in a if k not in b] + [k for k in b if k not in a]
    if missing:
        raise _Different(path, f"key {show(missing[0])} is on one side only")
    c.push([(a[k], b[k], (path, f"[{show(k)}]"), None) for k in a])


def _compare_tensors(c: _Comparer, a: torch.Tensor, b: torch.Tensor, path: Path) -> None:
    if a.dtype != b.dtype or a.shape != b.shape:
        raise _Different(path, f"tensor {a.dtype}{list(a.shape)} != {b.dtype}{list(b.shape)}")
    if tensor_bytes(a) != tensor_bytes(b):
        raise _Different(path, f"tensor values differ ({a.dtype}{list(a.shape)})")


def _compare_generators(c: _Comparer, a: torch.Generator, b: torch.Generator, path: Path) -> None:
    if a.device != b.device or not torch.equal(a.get_state(), b.get_state()):
        raise _Different(path, f"generator state differs ({a.device} / {b.device})")


def _compare_singletons(c: _Comparer, a: Any, b: Any, path: Path) -> None:
    if a is not b:
        raise _Different(path, f"{show(a)} != {show(b)}")


def _compare_other(c: _Comparer, a: Any, b: Any, path: Path) -> None:
    """Registered records field by field; enums and dtypes by identity; others by ==."""
    node_type = c.registry.by_type.get(type(a))
    if node_type is None or isinstance(a, enum.Enum):
        if not (a is b or a == b):
            raise _Different(path, f"{show(a)} != {show(b)}")
        return
    left, right = node_type.explode([a]), node_type.explode([b])
    c.push(
        [
            (x[0], y[0], (path, f".{field.name}"), ID_FIELDS.get((type(a), field.name)))
            for field, x, y in zip(node_type.fields, left, right, strict=True)
        ]
    )


_COMPARATORS: Mapping[type, Callable[[_Comparer, Any, Any, Path], None]] = {
    list: _compare_sequences,
    tuple: _compare_sequences,
    dict: _compare_dicts,
    torch.Tensor: _compare_tensors,
    torch.Generator: _compare_generators,
    torch.dtype: _compare_singletons,
}


def assert_structural_equal(a: Any, b: Any, enable_auto_mapping: bool = False) -> None:
    """Raise AssertionError, naming the path of the first difference, unless ``a`` and ``b``
    hold the same structure (see the module docstring).

    Example:
        >>> from dtorch.ir.params import MatmulParam
        >>> from dtorch.ir.operator import Operator
        >>> from dtorch.ir.span import Span
        >>> x = Operator(1, "mm", MatmulParam(), (10, 11), (12,), Span("m.py", 1))
        >>> y = Operator(5, "mm", MatmulParam(), (20, 21), (22,), Span("m.py", 1))
        >>> assert_structural_equal(x, y, enable_auto_mapping=True)
    """
    try:
        _Comparer(DEFAULT_REGISTRY, enable_auto_mapping).run(a, b)
    except _Different as difference:
        raise AssertionError(
            f"structures differ at {_render(difference.path)}: {difference.detail}"
        ) from None
