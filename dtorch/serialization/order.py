"""Decode order: children before parents, one group of columns per type where possible.

The payload is a list of groups, each holding nodes of one type, in an order where every
reference points to an earlier group. The registry ranks every type once (``TypeRegistry.
ranks``: a field refers only to lower ranks, or to its own rank when that rank is cyclic), so
most of a payload's types are ordered by one sort. The types of a cyclic rank (containers,
sub-graphs, fused params) are ordered by the references this payload holds: their strongly
connected components, children first, and each type that does not refer back to itself
becomes one group. Types that do (a list holding lists, a SubGraph param holding operators)
are ordered node by node: each node's height (1 + the highest of its children in the same
component) picks its group, and a node met again while its own children are being visited
is a reference cycle, refused with SerializationError. Everything here is iterative: no
recursion limit, however deep the values nest.

Example:
    >>> from dtorch.serialization.catalog import DEFAULT_REGISTRY
    >>> lst = DEFAULT_REGISTRY.by_type[list]
    >>> inner = [1]
    >>> found = {lst: [Batch(lst, [[inner], inner], [0, 1], None)]}
    >>> groups = plan(found, {lst: {lst}}, lambda obj: 0, DEFAULT_REGISTRY)
    >>> [[batch.objs for batch in group] for group in groups]
    [[[[1]]], [[[[1]]]]]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dtorch.errors import SerializationError
from dtorch.serialization.registry import NodeType, TypeRegistry, strongly_connected

_ON_PATH = -1


@dataclass(slots=True, eq=False)
class Batch:
    """Nodes of one type, with what discovery already knows about them.

    ``keys`` are the nodes' provisional numbers (the writer renumbers them in group order);
    ``states`` the scanned field columns (``FieldCodec.scan``), or None where the nodes were
    regrouped and must be scanned again; ``refers`` the types the nodes refer to (None:
    not known).
    """

    node_type: NodeType
    objs: list[Any]
    keys: Sequence[int]
    states: list[Any] | None
    refers: set[NodeType] | None = None


#: The batches written as one group (all of one type), in order.
Group = list[Batch]


def plan(
    batches: Mapping[NodeType, list[Batch]],
    edges: Mapping[NodeType, set[NodeType]],
    key_of: Callable[[Any], int],
    registry: TypeRegistry,
    small: bool = True,
) -> list[Group]:
    """The groups of a payload in decode order (see the module docstring); ``batches`` are
    discovery's batches per type, ``edges`` the types each type's nodes refer to, and
    ``key_of`` gives any node's provisional number. Unless ``small`` (every node index fits
    a one-byte MessagePack int whatever the order), small groups go first."""
    ranks = registry.ranks
    ordered = sorted(batches, key=ranks.__getitem__ if small else _by_size(batches, registry))
    cyclic = [nt for nt in ordered if ranks[nt] in registry.cyclic]
    if _alone(cyclic, ranks, edges):  # the usual payload: one sort is the whole plan
        return list(map(batches.__getitem__, ordered))
    groups: list[Group] = []
    for rank, present in itertools.groupby(ordered, ranks.get):
        if rank in registry.cyclic:
            groups.extend(_cyclic(list(present), batches, edges, key_of))
        else:
            groups.extend(batches[node_type] for node_type in present)
    return groups


def _by_size(
    batches: Mapping[NodeType, list[Batch]], registry: TypeRegistry
) -> Callable[[NodeType], tuple[int, int, int]]:
    """A sort key: level, then fewest nodes first (cyclic ranks first, kept together), then
    rank - an order as valid as the ranks, in which shared types take small indices."""

    def key(node_type: NodeType) -> tuple[int, int, int]:
        rank = registry.ranks[node_type]
        size = 0 if rank in registry.cyclic else sum(len(b.objs) for b in batches[node_type])
        return registry.levels[node_type], size, rank

    return key


def _alone(
    cyclic: list[NodeType], ranks: Mapping[NodeType, int], edges: Mapping[NodeType, set[NodeType]]
) -> bool:
    """Whether each type of a cyclic rank is the only one of its rank present, and refers to
    no node of its own type (then the rank needs no ordering of its own)."""
    if len({ranks[nt] for nt in cyclic}) != len(cyclic):
        return False
    return not any(nt in edges.get(nt, ()) for nt in cyclic)


def _cyclic(
    present: list[NodeType],
    batches: Mapping[NodeType, list[Batch]],
    edges: Mapping[NodeType, set[NodeType]],
    key_of: Callable[[Any], int],
) -> list[Group]:
    """Groups of the types of one cyclic rank, by the references this payload holds."""
    if len(present) == 1 and present[0] not in edges.get(present[0], ()):
        return [batches[present[0]]]  # alone in its rank here, and not referring to itself
    # each type's targets in ``present``'s order, not their set's (an address order): the
    # same bytes in every process
    inner = {nt: [t for t in present if t in edges.get(nt, ())] for nt in present}
    groups: list[Group] = []
    for component in strongly_connected(present, inner):
        only = component[0]
        if len(component) == 1 and only not in inner[only]:
            groups.append(batches[only])
        else:
            groups.extend(_layered(component, batches, key_of))
    return groups


def _layered(
    component: list[NodeType],
    batches: Mapping[NodeType, list[Batch]],
    key_of: Callable[[Any], int],
) -> list[Group]:
    """Groups of a self-referring component, by node height (children first). A batch that
    refers to no type of the component (the inner lists of a list of lists) is of height 0
    as a whole: it keeps its scanned columns, and only the other nodes are walked."""
    by_class = {nt.cls: nt for nt in component}
    heights: dict[int, int] = {}
    leaves: dict[NodeType, Group] = {}
    rest: list[Any] = []
    for node_type in component:
        for batch in batches[node_type]:
            if batch.refers is not None and batch.refers.isdisjoint(by_class.values()):
                heights.update(dict.fromkeys(map(id, batch.objs), 0))
                leaves.setdefault(node_type, []).append(batch)
            else:
                rest.extend(batch.objs)
    _heights(rest, by_class, heights)
    buckets: dict[tuple[int, NodeType], list[Any]] = {}
    for obj in rest:
        buckets.setdefault((heights[id(obj)], by_class[type(obj)]), []).append(obj)
    ordered = sorted(buckets.items(), key=lambda item: item[0][0])
    walked = [[Batch(nt, nodes, list(map(key_of, nodes)), None)] for (_, nt), nodes in ordered]
    return list(leaves.values()) + walked


def _kids(obj: Any, by_class: Mapping[type, NodeType]) -> list[Any]:
    """Children of ``obj`` that lie in the same component."""
    node_type = by_class[type(obj)]
    columns = node_type.explode([obj])
    kids = []
    for i in node_type.child_fields:
        kids.extend(node_type.fields[i].codec.children(columns[i]))
    return [k for k in kids if type(k) in by_class]


def _heights(objs: list[Any], by_class: Mapping[type, NodeType], heights: dict[int, int]) -> None:
    """Enter the height of every node in ``heights``, which holds those already known
    (iterative depth-first walk); a cycle raises SerializationError."""
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


def _cycle_error(path: list[list[Any]], kid: Any) -> SerializationError:
    start = next(i for i, entry in enumerate(path) if entry[0] is kid)
    names = [type(entry[0]).__name__ for entry in path[start:]] + [type(kid).__name__]
    return SerializationError(
        f"cannot serialize a reference cycle: {' -> '.join(names)} (a value that contains "
        f"itself has no finite encoding)"
    )
