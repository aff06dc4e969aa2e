"""Every collective against the torch oracle, with callers as threads of this process.

Layouts: one thread per rank, several ranks per thread (interleaved and in blocks), and all
ranks on one thread (no store, no waiting), for world sizes 1 to 8, even and uneven shards.
"""

from __future__ import annotations

import pytest
import torch
from group_harness import run_cases_on_threads
from group_reference import all_reduce_case, check_outputs, standard_cases

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


@pytest.mark.parametrize("layout", [[[0], [1], [2]], [[0, 3], [1, 4], [2]]], ids=["3x1", "5on3"])
@pytest.mark.parametrize("op", ["sum", "avg", "max"])
def test_large_all_reduce_over_many_callers(layout: list[list[int]], op: str) -> None:
    """Large tensors and >= 3 callers take the reduce-scatter + all-gather path (uneven chunks
    of the flattened tensor); every rank must still get the same, exact reduction."""
    world = sum(len(c) for c in layout)
    gen = torch.Generator().manual_seed(world)
    case = all_reduce_case(world, (521, 509), op, torch.float64, gen)
    (outputs,) = run_cases_on_threads(layout, [case])
    check_outputs(case, outputs)
    first = outputs[0]
    assert all(torch.equal(first, out) for out in outputs.values())


def test_collectives_on_one_caller_move_nothing_already_on_its_device() -> None:
    """``Tensor.to`` of a tensor already on the device returns it, but releases the GIL on
    the way, which a thread-mode kernel stream must then win back from the other threads:
    the collectives of one caller leave such tensors alone (and still match torch)."""
    from torch.overrides import TorchFunctionMode

    from dtorch.comm.group import CommTopology, ThreadGroupManager
    from dtorch.comm.group.reduce_op import ReduceOp

    moved: list[object] = []

    class Moves(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if func is torch.Tensor.to:
                moved.append(args[0])
            return func(*args, **(kwargs or {}))

    inputs = {r: torch.arange(6.0) * (r + 1) for r in range(3)}
    with ThreadGroupManager(CommTopology.threads([[0, 1, 2]])) as groups:
        group = groups.get_group("cpu", (0, 1, 2), (0, 1, 2))
        with Moves():
            summed = group.all_reduce(inputs, ReduceOp.SUM)
            first = group.broadcast(inputs, 1)
    assert moved == []
    for r in range(3):
        torch.testing.assert_close(summed[r], torch.arange(6.0) * 6)
        torch.testing.assert_close(first[r], inputs[1])
