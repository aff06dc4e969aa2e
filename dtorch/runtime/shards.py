"""ShardTable: one stream's local shards by operand and device, with memory accounting.

Accounting counts each torch storage once however many views of it are held, so a view or a
reshape costs nothing and the bytes come back when the last operand using a storage is freed.

Example:
    >>> import torch
    >>> table = ShardTable()
    >>> table.put(7, 0, torch.zeros(4))
    >>> table.put(8, 0, table.get(7, 0).view(2, 2))    # a view: same storage, no new bytes
    >>> table.stats(0)
    (16, 16)
    >>> table.free([7, 8]); table.stats(0)
    (0, 16)
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from dtorch.kernels.promises import KernelFailure

Shard = torch.Tensor | KernelFailure


class ShardTable:
    """operand id -> {device id: tensor or KernelFailure}, plus bytes held per device."""

    __slots__ = ("_allocated", "_peak", "_storages", "_values")

    def __init__(self) -> None:
        self._values: dict[int, dict[int, Shard]] = {}
        self._storages: dict[tuple[int, int], list[int]] = {}  # (device, ptr) -> [refs, nbytes]
        self._allocated: dict[int, int] = {}
        self._peak: dict[int, int] = {}

    def get(self, operand: int, device: int) -> Shard:
        return self._values[operand][device]

    def put(self, operand: int, device: int, value: Shard) -> None:
        shards = self._values.get(operand)
        if shards is None:
            shards = self._values[operand] = {}
        old = shards.get(device)
        shards[device] = value
        if isinstance(value, torch.Tensor):
            self._hold(device, value)
        if isinstance(old, torch.Tensor):
            self._release(device, old)

    def free(self, operands: Iterable[int]) -> None:
        """Drop every shard of ``operands`` (ids this stream never held are ignored)."""
        for operand in operands:
            shards = self._values.pop(operand, None)
            if shards:
                for device, value in shards.items():
                    if isinstance(value, torch.Tensor):
                        self._release(device, value)

    def stats(self, device: int) -> tuple[int, int]:
        """(bytes held now, peak bytes since the last reset) on ``device``."""
        return self._allocated.get(device, 0), self._peak.get(device, 0)

    def devices(self) -> list[int]:
        """Devices that ever held a shard here."""
        return list(self._allocated)

    def reset_peak(self, device: int) -> None:
        self._peak[device] = self._allocated.get(device, 0)

    def operand_count(self) -> int:
        return len(self._values)

    def _hold(self, device: int, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = (device, storage.data_ptr())
        entry = self._storages.get(key)
        if entry is not None:
            entry[0] += 1
            return
        nbytes = storage.nbytes()
        self._storages[key] = [1, nbytes]
        allocated = self._allocated.get(device, 0) + nbytes
        self._allocated[device] = allocated
        if allocated > self._peak.get(device, 0):
            self._peak[device] = allocated

    def _release(self, device: int, tensor: torch.Tensor) -> None:
        key = (device, tensor.untyped_storage().data_ptr())
        entry = self._storages.get(key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            del self._storages[key]
            self._allocated[device] -= entry[1]
