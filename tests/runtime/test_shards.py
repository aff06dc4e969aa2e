"""ShardTable's byte accounting against an oracle: the bytes of the distinct torch storages held.

Random programs put fresh tensors, views of held ones, the very same tensor under a second
operand, overwrites and failure markers on two devices, and free operands in random order; after
every step the table's (allocated, peak) must equal what the held storages really occupy.
"""

from __future__ import annotations

import random

import pytest
import torch

from dtorch.ir.report import Failure
from dtorch.runtime.shards import KernelFailure, ShardTable

DEVICES = (0, 1)


def _held_bytes(table: ShardTable, device: int) -> int:
    """Oracle: bytes of the distinct storages of the tensors held on ``device``."""
    storages = {}
    for shards in table._values.values():
        value = shards.get(device)
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def _step(table: ShardTable, rng: random.Random, next_id: list[int]) -> tuple[int, int]:
    """One random change; returns its device and the bytes momentarily held there during it
    (an overwrite holds the new tensor before it lets the old one go; else 0)."""
    device = rng.choice(DEVICES)
    held = [o for o, shards in table._values.items() if device in shards]
    choice = rng.random()
    if choice < 0.3 or not held:
        value: torch.Tensor | KernelFailure = torch.zeros(rng.randint(1, 64))
    elif choice < 0.5:  # a view of a held tensor
        source = table.get(rng.choice(held), device)
        value = source.view(-1)[:1] if isinstance(source, torch.Tensor) else source
    elif choice < 0.65:  # the very same tensor under a second operand
        value = table.get(rng.choice(held), device)
    elif choice < 0.75:  # a failure marker
        value = KernelFailure(Failure(1, "op", device, "KernelError", "boom"))
    elif choice < 0.85:  # overwrite a held operand (in-place kernels)
        fresh = torch.ones(rng.randint(1, 64))
        transient = _held_bytes(table, device) + fresh.nbytes
        table.put(rng.choice(held), device, fresh)
        return device, transient
    else:
        table.free(rng.sample(held, rng.randint(1, len(held))))
        return device, 0
    next_id[0] += 1
    table.put(next_id[0], device, value)
    return device, 0


@pytest.mark.parametrize("seed", range(20))
def test_allocated_and_peak_match_the_storages_held(seed: int) -> None:
    rng = random.Random(seed)
    table = ShardTable()
    next_id = [0]
    peaks = dict.fromkeys(DEVICES, 0)
    for _ in range(300):
        changed, transient = _step(table, rng, next_id)
        for device in DEVICES:
            allocated = table.stats(device)[0]
            expected = _held_bytes(table, device)
            peaks[device] = max(peaks[device], expected, transient if device == changed else 0)
            assert allocated == expected
        assert [table.stats(d)[1] for d in DEVICES] == [peaks[d] for d in DEVICES]
    table.free(list(table._values))
    assert all(table.stats(device)[0] == 0 for device in DEVICES)


def test_a_tensor_held_twice_counts_once_until_both_go() -> None:
    table = ShardTable()
    value = torch.zeros(10)
    table.put(1, 0, value)
    table.put(2, 0, value)
    table.put(3, 0, value.view(2, 5))
    assert table.stats(0) == (40, 40)
    table.free([1])
    table.free([3])
    assert table.stats(0) == (40, 40)
    table.free([2])
    assert table.stats(0) == (0, 40)
    table.reset_peak(0)
    assert table.stats(0) == (0, 0)
