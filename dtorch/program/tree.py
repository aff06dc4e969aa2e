"""Trees: the structure of a program's arguments and results, as plain data.

A traced function takes and returns any nesting of tuples, lists and dicts whose leaves are
dtorch tensors or plain values. ``flatten`` splits such an object into a ``Tree`` (its
structure, with each tensor leaf replaced by its position) and the list of tensors;
``unflatten`` puts tensors back into a tree. A tree is nested tuples of strings, ints and
plain values only, so it compares by value, hashes, and is written to a program file as it is:

* ``("T", i)``: the i-th tensor
* ``("V", value)``: a plain value (None, bool, int, float, str), fixed at trace time
* ``("tuple", (trees...))``, ``("list", (trees...))``
* ``("dict", (keys...), (trees...))``: keys are str or int, in insertion order
* ``("result", name, (trees...))``: torch's named tuple ``torch.return_types.<name>`` (what
  ``max(dim)``, ``sort``, ``topk``, ``linalg.qr``, ... return), looked up by its name in
  ``RESULT_TYPES``, a table of torch's own types (a file names one; it imports nothing)

Example:
    >>> tree, leaves = flatten(((1, "a"), {"k": [2.5]}), lambda x: False)
    >>> tree
    ('tuple', (('tuple', (('V', 1), ('V', 'a'))), ('dict', ('k',), (('list', (('V', 2.5),)),))))
    >>> unflatten(tree, [])
    ((1, 'a'), {'k': [2.5]})
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Sequence
from typing import Any

import torch

from dtorch.errors import TraceError
from dtorch.ir.scalar import same_float

Tree = tuple[Any, ...]

#: Leaf values a tree keeps (compared at replay, written to files).
PLAIN = (type(None), bool, int, float, str)

#: torch's named tuples by name (``max``, ``sort``, ``linalg_qr``, ...): the result types a
#: tree may hold; a name read from a file is looked up here, never imported.
RESULT_TYPES: dict[str, type] = {
    name: kind
    for name in torch.return_types.__all__
    if isinstance(kind := getattr(torch.return_types, name), type) and hasattr(kind, "n_fields")
}
_RESULT_NAMES: dict[type, str] = {kind: name for name, kind in RESULT_TYPES.items()}

#: Deepest nesting accepted (a file's tree is data: no recursion without a bound).
MAX_DEPTH = 64

#: Shows a node of a file's tree in messages: a few levels and items (a full ``repr`` of a
#: deep tree would recurse without a bound).
_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxtuple, _BRIEF.maxstring, _BRIEF.maxother = 3, 4, 40, 40


def flatten(
    obj: Any, is_tensor: Callable[[Any], bool], where: str = "argument"
) -> tuple[Tree, list[Any]]:
    """``obj``'s tree and its tensor leaves, in order (TraceError for other leaves)."""
    leaves: list[Any] = []
    return _flatten(obj, is_tensor, leaves, where, 0), leaves


def _flatten(
    obj: Any, is_tensor: Callable[[Any], bool], leaves: list[Any], where: str, depth: int
) -> Tree:
    if depth > MAX_DEPTH:
        raise TraceError(f"{where} nests deeper than {MAX_DEPTH} levels")
    if is_tensor(obj):
        leaves.append(obj)
        return ("T", len(leaves) - 1)
    if isinstance(obj, PLAIN) and type(obj) in PLAIN:
        return ("V", obj)
    if type(obj) in (tuple, list):
        kids = tuple(
            _flatten(x, is_tensor, leaves, f"{where}[{i}]", depth + 1) for i, x in enumerate(obj)
        )
        return (type(obj).__name__, kids)
    if type(obj) in _RESULT_NAMES:  # torch's named tuple: its fields, by position
        kids = tuple(
            _flatten(x, is_tensor, leaves, f"{where}[{i}]", depth + 1) for i, x in enumerate(obj)
        )
        return ("result", _RESULT_NAMES[type(obj)], kids)
    if type(obj) is dict:
        keys = tuple(obj)
        for key in keys:
            if type(key) not in (str, int):
                raise TraceError(f"{where}: dict keys must be str or int, got {type(key).__name__}")
        kids = tuple(
            _flatten(obj[k], is_tensor, leaves, f"{where}[{k!r}]", depth + 1) for k in keys
        )
        return ("dict", keys, kids)
    raise TraceError(
        f"{where} is a {type(obj).__module__}.{type(obj).__name__}: a program's arguments and "
        "results are dtorch tensors, None, bool, int, float or str, nested in tuples, lists, "
        "dicts and torch's named result tuples (convert torch tensors with dtorch.from_torch "
        "first)"
    )


def unflatten(tree: Tree, tensors: Sequence[Any]) -> Any:
    """The object ``tree`` describes, with ``tensors`` at its tensor leaves."""
    tag = tree[0]
    if tag == "T":
        return tensors[tree[1]]
    if tag == "V":
        return tree[1]
    if tag == "tuple":
        return tuple(unflatten(kid, tensors) for kid in tree[1])
    if tag == "list":
        return [unflatten(kid, tensors) for kid in tree[1]]
    if tag == "result":
        return RESULT_TYPES[tree[1]](tuple(unflatten(kid, tensors) for kid in tree[2]))
    return {key: unflatten(kid, tensors) for key, kid in zip(tree[1], tree[2], strict=True)}


def same_value(a: object, b: object) -> bool:
    """Whether plain values ``a`` and ``b`` are one value: of one type and equal, NaN equal
    to NaN, 0.0 not -0.0 (2, 2.0 and True are three values: they make other results).

    Example:
        >>> same_value(2, 2.0), same_value(float("nan"), float("nan")), same_value(0.0, -0.0)
        (False, True, False)
    """
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and isinstance(b, float):
        return same_float(a, b)
    return a == b


def has_values(tree: Tree) -> bool:
    """Whether ``tree`` holds plain values (a call must then be compared leaf by leaf:
    ``==`` on trees takes 2 for 2.0 and never NaN for NaN)."""
    tag = tree[0]
    if tag == "V":
        return True
    return tag != "T" and any(has_values(kid) for kid in tree[-1])


def difference(expected: Tree, got: Tree, where: str = "arguments") -> str | None:
    """Where ``got`` departs from ``expected`` in words (None: the same structure and
    plain values, by ``same_value``), for the error of a replay with other arguments."""
    if expected[0] != got[0]:
        return f"{where}: traced with {_kind(expected)}, called with {_kind(got)}"
    tag = expected[0]
    if tag == "V":
        if same_value(expected[1], got[1]):
            return None
        return (
            f"{where}: traced with {_typed(expected[1])}, called with {_typed(got[1])} "
            "(values that are not tensors are fixed when the program is traced)"
        )
    if tag == "T":
        return None if expected == got else f"{where}: traced with {expected}, called with {got}"
    if tag == "result" and expected[1] != got[1]:
        return f"{where}: traced with torch.return_types.{expected[1]}, called with {got[1]}"
    if tag == "dict" and expected[1] != got[1]:
        return (
            f"{where}: traced with keys {list(expected[1])}, called with {list(got[1])} (a "
            "dict's keys are matched in order: the function may iterate them)"
        )
    kids_e, kids_g = expected[-1], got[-1]
    if len(kids_e) != len(kids_g):
        return f"{where}: traced with {len(kids_e)} items, called with {len(kids_g)}"
    labels = expected[1] if tag == "dict" else range(len(kids_e))
    for label, e, g in zip(labels, kids_e, kids_g, strict=True):
        found = difference(e, g, f"{where}[{label!r}]")
        if found is not None:
            return found
    return None


def _typed(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def _kind(tree: Tree) -> str:
    if tree[0] == "T":
        return "a tensor"
    if tree[0] == "V":
        return repr(tree[1])
    if tree[0] == "result":
        return f"a torch.return_types.{tree[1]}"
    return f"a {tree[0]}"


def check_tree(tree: Any, tensors: int, depth: int = 0) -> None:
    """Raise ValueError unless ``tree`` (read from a file) is a well-formed tree whose tensor
    leaves index ``range(tensors)``. A decoded tree may share equal nodes (the codec shares
    equal tuples); the walk counts a shared node at each use, which the codec bounds (a
    tuple's items counted through its shared inner tuples: ``dtorch.serialization.reader``),
    so a tree of 2**60 nodes in a few kilobytes never gets here."""
    if depth > MAX_DEPTH:
        raise ValueError(f"the tree nests deeper than {MAX_DEPTH} levels")
    if type(tree) is not tuple or not tree:
        raise ValueError(f"not a tree node: {_brief(tree)}")
    tag = tree[0]
    if tag == "T":
        if len(tree) != 2 or type(tree[1]) is not int or not 0 <= tree[1] < tensors:
            raise ValueError(f"tensor leaf {_brief(tree)} out of range (there are {tensors})")
    elif tag == "V":
        if len(tree) != 2 or type(tree[1]) not in PLAIN:
            raise ValueError(f"bad value leaf {_brief(tree)}")
    elif tag in ("tuple", "list") and len(tree) == 2 and type(tree[1]) is tuple:
        for kid in tree[1]:
            check_tree(kid, tensors, depth + 1)
    elif tag == "result" and len(tree) == 3 and type(tree[2]) is tuple:
        kind = RESULT_TYPES.get(tree[1]) if type(tree[1]) is str else None
        if kind is None or len(tree[2]) != kind.n_fields:  # type: ignore[attr-defined]
            raise ValueError(f"bad named-tuple node {_brief(tree)}")
        for kid in tree[2]:
            check_tree(kid, tensors, depth + 1)
    elif tag == "dict" and len(tree) == 3 and type(tree[1]) is tuple and type(tree[2]) is tuple:
        if len(tree[1]) != len(tree[2]) or any(type(k) not in (str, int) for k in tree[1]):
            raise ValueError(f"bad dict node {_brief(tree)}")
        for kid in tree[2]:
            check_tree(kid, tensors, depth + 1)
    else:
        raise ValueError(f"unknown tree node {_brief(tree)}")


def _brief(node: Any) -> str:
    """``node`` in a message: a few levels and items of it, at most 80 characters."""
    return f"{_BRIEF.repr(node):.80}"
