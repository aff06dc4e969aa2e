"""Decode order: children before parents, one group of columns per type where possible.

The payload is a list of groups, each holding nodes of one type, in an order where every
reference points to an earlier group. The types of a payload form a graph (an Operator
refers to params and spans, an Operand to meshes and placements); its strongly connected
components, children first, give that order for all types that do not refer back to
themselves, and each such type becomes one group. Types that do (a list holding lists, a
SubGraph param holding operators) are ordered node by node: each node's height (1 + the
highest of its children in the same component) picks its group, and a node met again while
its own children are being visited is a reference cycle, refused with SerializationError.
Everything here is iterative: no recursion limit, however deep the values nest.

Example:
    >>> from dtorch.serialization.catalog import DEFAULT_REGISTRY
    >>> lst = DEFAULT_REGISTRY.by_type[list]
    >>> inner = [1]
    >>> found = {lst: [Group(lst, [[inner], inner], [0, 1])]}
    >>> [g.objs for g in plan(found, {lst: {lst}}, key_of=lambda obj: 0)]
    [[[1]], [[[1]]]]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dtorch.errors import SerializationError
from dtorch.serialization.registry import NodeType

_ON_PATH = -1


@dataclass(frozen=True, slots=True)
class Group:
    """Nodes of one type written together, with what discovery already knows about them.

    ``keys`` are the nodes' provisional numbers (the writer renumbers them in group order);
    ``columns`` their exploded fields and ``refs`` (per child field) the provisional numbers
    of the nodes each child column refers to, or None where they must be worked out again.
    """

    node_type: NodeType
    objs: list[Any]
    keys: list[int]
    columns: list[list[Any]] | None = None
    refs: dict[int, list[int]] | None = None


def plan(
    batches: Mapping[NodeType, list[Group]],
    edges: Mapping[NodeType, set[NodeType]],
    key_of: Callable[[Any], int],
) -> list[Group]:
    """The groups of a payload in decode order (see the module docstring); ``batches`` are
    discovery's groups per type and ``key_of`` gives any node's provisional number."""
    groups: list[Group] = []
    for component in strongly_connected(list(batches), edges):
        only = component[0]
        if len(component) == 1 and only not in edges.get(only, ()):
            groups.append(_whole(only, batches[only]))
        else:
            groups.extend(_layered(component, batches, key_of))
    return groups


def _chain(parts: Iterable[list[Any]]) -> list[Any]:
    return list(itertools.chain.from_iterable(parts))


def _whole(node_type: NodeType, batches: list[Group]) -> Group:
    """One group of every node of a type, joining discovery's batches."""
    if len(batches) == 1:
        return batches[0]
    columns = [_chain(c) for c in zip(*(b.columns or () for b in batches), strict=True)]
    refs = {i: _chain(b.refs[i] for b in batches if b.refs) for i in node_type.child_fields}
    return Group(
        node_type,
        _chain(b.objs for b in batches),
        _chain(b.keys for b in batches),
        columns,
        refs,
    )


def strongly_connected(
    nodes: list[NodeType], edges: Mapping[NodeType, Iterable[NodeType]]
) -> list[list[NodeType]]:
    """Tarjan's strongly connected components, each after every component it reaches."""
    index: dict[NodeType, int] = {}
    low: dict[NodeType, int] = {}
    stack: list[NodeType] = []
    on_stack: set[NodeType] = set()
    result: list[list[NodeType]] = []

    def enter(node: NodeType) -> list[Any]:
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


def _pop_component(
    stack: list[NodeType], on_stack: set[NodeType], head: NodeType
) -> list[NodeType]:
    component = []
    while True:
        node = stack.pop()
        on_stack.discard(node)
        component.append(node)
        if node is head:
            return component


def _layered(
    component: list[NodeType],
    batches: Mapping[NodeType, list[Group]],
    key_of: Callable[[Any], int],
) -> list[Group]:
    """Groups of a self-referring component, by node height (children first)."""
    by_class = {nt.cls: nt for nt in component}
    objs = [o for nt in component for batch in batches[nt] for o in batch.objs]
    heights = _heights(objs, by_class)
    buckets: dict[tuple[int, NodeType], list[Any]] = {}
    for obj in objs:
        buckets.setdefault((heights[id(obj)], by_class[type(obj)]), []).append(obj)
    ordered = sorted(buckets.items(), key=lambda item: item[0][0])
    return [Group(nt, members, list(map(key_of, members))) for (_, nt), members in ordered]


def _kids(obj: Any, by_class: Mapping[type, NodeType]) -> list[Any]:
    """Children of ``obj`` that lie in the same component."""
    node_type = by_class[type(obj)]
    columns = node_type.explode([obj])
    kids = []
    for i in node_type.child_fields:
        kids.extend(node_type.fields[i].codec.children(columns[i]))
    return [k for k in kids if type(k) in by_class]


def _heights(objs: list[Any], by_class: Mapping[type, NodeType]) -> dict[int, int]:
    """Height of every node (iterative depth-first walk); a cycle raises SerializationError."""
    heights: dict[int, int] = {}
    for start in objs:
        if id(start) in heights:
            continue
        heights[id(start)] = _ON_PATH
        path: list[list[Any]] = [[start, _kids(start, by_class), 0]]
        while path:
            entry = path[-1]
            obj, kids, position = entry
            if position == len(kids):
                path.pop()
                heights[id(obj)] = 1 + max((heights[id(k)] for k in kids), default=-1)
                continue
            entry[2] = position + 1
            kid = kids[position]
            seen = heights.get(id(kid))
            if seen == _ON_PATH:
                raise _cycle_error(path, kid)
            if seen is None:
                heights[id(kid)] = _ON_PATH
                path.append([kid, _kids(kid, by_class), 0])
    return heights


def _cycle_error(path: list[list[Any]], kid: Any) -> SerializationError:
    start = next(i for i, entry in enumerate(path) if entry[0] is kid)
    names = [type(entry[0]).__name__ for entry in path[start:]] + [type(kid).__name__]
    return SerializationError(
        f"cannot serialize a reference cycle: {' -> '.join(names)} (a value that contains "
        f"itself has no finite encoding)"
    )
