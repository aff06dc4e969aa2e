"""Every collective against the torch oracle, with callers as threads of this process.

Layouts: one thread per rank, several ranks per thread (interleaved and in blocks), and all
ranks on one thread (no store, no waiting), for world sizes 1 to 8, even and uneven shards.
"""

from __future__ import annotations

import pytest
from group_harness import run_cases_on_threads
from group_reference import check_outputs, standard_cases

pytestmark = pytest.mark.timeout(60)


def _layouts() -> list[tuple[str, list[list[int]]]]:
    layouts = []
    for world in range(1, 9):
        layouts.append((f"one-thread-per-rank-{world}", [[r] for r in range(world)]))
        layouts.append((f"all-on-one-thread-{world}", [list(range(world))]))
    layouts += [
        ("8-on-3-threads-interleaved", [[0, 3, 6], [1, 4, 7], [2, 5]]),
        ("8-on-3-threads-blocks", [[0, 1, 2], [3, 4, 5], [6, 7]]),
        ("5-on-2-threads", [[0, 1, 4], [2, 3]]),
        ("3-on-2-threads", [[1], [0, 2]]),
    ]
    return layouts


@pytest.mark.parametrize(("name", "layout"), _layouts(), ids=[n for n, _ in _layouts()])
def test_every_collective_matches_torch(name: str, layout: list[list[int]]) -> None:
    world = sum(len(c) for c in layout)
    cases = standard_cases(world)
    results = run_cases_on_threads(layout, cases)
    for case, outputs in zip(cases, results, strict=True):
        check_outputs(case, outputs)


def test_outputs_are_fresh_tensors_never_inputs_or_shared() -> None:
    layout = [[0, 2], [1]]
    cases = standard_cases(3, seed=5)
    results = run_cases_on_threads(layout, cases)
    for case, outputs in zip(cases, results, strict=True):
        seen: set[int] = set()
        for out in outputs.values():
            for tensor in out if isinstance(out, list) else [out]:
                if tensor.numel() == 0:
                    continue
                pointer = tensor.untyped_storage().data_ptr()
                assert pointer not in seen, f"{case.collective}: two ranks share an output"
                assert all(pointer != x.untyped_storage().data_ptr() for x in case.inputs)
                seen.add(pointer)
