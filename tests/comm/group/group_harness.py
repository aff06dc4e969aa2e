"""Run collectives the way the runtime does: one call per caller, for all the ranks it holds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from group_reference import Case

from dtorch.comm.group import CommTopology, ThreadGroup, ThreadGroupManager
from dtorch.comm.namespace import CommNamespace
from tests.thread_runner import on_threads

#: The collectives under test, by the name the oracle cases use.
COLLECTIVES: dict[str, Callable[..., Any]] = {
    "all_reduce": ThreadGroup.all_reduce,
    "all_gather": ThreadGroup.all_gather,
    "all_gather_into_list": ThreadGroup.all_gather_into_list,
    "reduce_scatter": ThreadGroup.reduce_scatter,
    "all_to_all": ThreadGroup.all_to_all,
    "replicate_to_shard": ThreadGroup.replicate_to_shard,
    "broadcast": ThreadGroup.broadcast,
}


def call(group: ThreadGroup, case: Case, held: Sequence[int]) -> dict[int, Any]:
    """Run ``case`` for the ranks ``held`` by one caller."""
    inputs = {r: case.inputs[r] for r in held}
    return COLLECTIVES[case.collective](group, inputs, **case.kwargs)


def device_ids(world: int) -> list[int]:
    """Device ids that differ from the ranks (descending, with gaps) to test the mapping."""
    return [100 - 7 * r for r in range(world)]


def layout_devices(layout: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """The device ids of a group whose callers hold the ranks of ``layout`` (one list per
    caller), and each caller's device ids."""
    ids = device_ids(sum(len(c) for c in layout))
    return ids, [[ids[r] for r in caller] for caller in layout]


def run_cases_on_threads(layout: Sequence[Sequence[int]], cases: Sequence[Case]) -> list[dict]:
    """Every case on a group of ``sum(len(c))`` ranks whose callers are threads."""
    ids, callers = layout_devices(layout)
    topology = CommTopology.threads(callers)
    with ThreadGroupManager(topology, namespace=CommNamespace.create()) as manager:

        def caller(held: Sequence[int]) -> list[dict[int, Any]]:
            group = manager.get_group("cpu", ids, [ids[r] for r in held])
            assert group.ranks == tuple(held)
            return [call(group, case, held) for case in cases]

        per_caller = on_threads(layout, caller)
    return [merge(per_caller, i) for i in range(len(cases))]


def merge(per_caller: Sequence[Sequence[dict[int, Any]]], index: int) -> dict[int, Any]:
    """One case's outputs of all callers, as one ``{rank: output}``."""
    merged: dict[int, Any] = {}
    for outputs in per_caller:
        merged.update(outputs[index])
    return merged
