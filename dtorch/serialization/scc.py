"""Strongly connected components of a small directed graph (Tarjan's algorithm, iterative).

The codec orders types so that every reference points backwards: the registry ranks all
registered types once by their components (children first), and the writer splits the few
types whose component is cyclic again by the references one payload actually holds.

Example:
    >>> edges = {"a": ["b"], "b": ["a", "c"], "c": []}
    >>> [sorted(c) for c in strongly_connected(["a", "b", "c"], edges)]
    [['c'], ['a', 'b']]
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, TypeVar

_N = TypeVar("_N", bound=Hashable)


def strongly_connected(nodes: Iterable[_N], edges: Mapping[_N, Iterable[_N]]) -> list[list[_N]]:
    """The components of the graph reachable from ``nodes``, each after every component it
    reaches (so children come first)."""
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
