"""``dtorch.memory_stats``: what ``Graph.get_memory_stats`` returns.

dtorch counts the bytes of the shards each device holds (its own tally, the same on CPU and
CUDA): ``memory_allocated`` is what is held now, ``max_memory_allocated`` the peak since the last
``reset_peak``. dtorch has no caching allocator of its own, so ``memory_reserved`` and
``max_memory_reserved`` equal the allocated figures.

Example:
    >>> import dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2)
    >>> t = dtorch.ones(4, device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> stats = dtorch.default_graph.get_memory_stats(mesh)
    >>> stats.find(1).memory_allocated >= 8
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class MemoryStat:
    """Bytes of one device (see the module docstring for what each figure counts)."""

    device_index: int
    memory_allocated: int
    max_memory_allocated: int

    @property
    def memory_reserved(self) -> int:
        return self.memory_allocated

    @property
    def max_memory_reserved(self) -> int:
        return self.max_memory_allocated


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """The ``MemoryStat`` of each device asked for, in device order."""

    stats: tuple[MemoryStat, ...]

    def find(self, device_index: int | torch.device) -> MemoryStat:
        """The stat of ``device_index`` (or of a ``torch.device``: ``cpu`` is device 0, as
        ``Tensor.device`` prints it); KeyError naming the devices there are."""
        if isinstance(device_index, torch.device):
            device_index = device_index.index or 0
        for stat in self.stats:
            if stat.device_index == device_index:
                return stat
        indices = [stat.device_index for stat in self.stats]
        raise KeyError(f"get_memory_stats has no device {device_index!r}; devices: {indices}")

    def __iter__(self) -> Iterator[MemoryStat]:
        return iter(self.stats)

    def __len__(self) -> int:
        return len(self.stats)


__all__ = ["MemoryStat", "MemoryStats"]
