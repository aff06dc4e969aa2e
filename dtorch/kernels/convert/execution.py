"""One caller's run of one redistribution plan: the state every step executor reads.

A caller (a thread or a worker process) holds some of the devices of the operator. Each step
runs for every held device at once: a collective step calls the ThreadGroup of every 1-D line
of the mesh (devices that differ only along the step's mesh dim) that holds one of them. All
callers visit lines, and transfer pairs, in one global order (sorted device ids), so no caller
ever waits on a group that another caller will only reach later, and a caller holding several
devices of one group passes them all in one call instead of waiting on itself.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> from dtorch.ir.redistribute import plan_redistribute
    >>> mesh = init_device_mesh("cpu", (2, 2))
    >>> plan = plan_redistribute((4, 4), mesh, (Shard(0), Replicate()), mesh, (Shard(0), Shard(1)))
    >>> ex = Execution(plan, (0, 1, 2, 3), None, torch.float32)
    >>> ex.lines(mesh, 1), ex.spec(1, 3).shape
    (((0, 1), (2, 3)), (2, 2))
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from dtorch.errors import KernelError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.redistribute import RedistributePlan
from dtorch.ir.sharding import ShardSpec, device_shard

if TYPE_CHECKING:
    from dtorch.comm.group import ThreadGroup, ThreadGroupManager

#: One local tensor per device this caller holds in the current mesh.
Shards = dict[int, torch.Tensor]


@functools.lru_cache(maxsize=4096)  # every Convert kernel asks again, of the same few meshes
def _held(mesh: DeviceMesh, devices: tuple[int, ...]) -> tuple[int, ...]:
    mine = set(devices)
    return tuple(d for d in mesh.device_ids if d in mine)


@functools.lru_cache(maxsize=4096)
def _lines(
    mesh: DeviceMesh, mesh_dim: int, devices: tuple[int, ...]
) -> tuple[tuple[int, ...], ...]:
    found: list[tuple[int, ...]] = []
    covered: set[int] = set()
    for device in _held(mesh, devices):
        if device not in covered:
            found.append(mesh.group_of(device, mesh_dim))
            covered.update(found[-1])
    return tuple(sorted(found))


@dataclass(frozen=True, slots=True)
class Execution:
    """A plan, the devices this caller holds (of either mesh), its group manager, the dtype."""

    plan: RedistributePlan
    devices: tuple[int, ...]
    groups: ThreadGroupManager | None
    dtype: torch.dtype

    def spec(self, index: int, device: int) -> ShardSpec:
        """Where ``device``'s local value lies in ``plan.layouts[index]``."""
        mesh = self.plan.mesh_before(index)
        return device_shard(self.plan.shape, mesh, self.plan.layouts[index], device)

    def held(self, mesh: DeviceMesh) -> tuple[int, ...]:
        """The devices of ``mesh`` this caller holds, in mesh order."""
        return _held(mesh, self.devices)

    def lines(self, mesh: DeviceMesh, mesh_dim: int) -> tuple[tuple[int, ...], ...]:
        """The 1-D groups along ``mesh_dim`` that hold a device of this caller, sorted (each
        found once: a group per held device was quadratic in the devices of a line)."""
        return _lines(mesh, mesh_dim, self.devices)

    def empty(self, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
        """A fresh tensor of the plan's dtype; large CPU ones in the manager's recycled
        memory (``BufferPool``), so a step's output pays no page faults."""
        if self.groups is None:
            return torch.empty(shape, dtype=self.dtype, device=device)
        return self.groups.buffers.empty(shape, self.dtype, device)

    def group(self, device_kind: str, device_ids: tuple[int, ...]) -> ThreadGroup:
        """This caller's handle on the group of ``device_ids`` (ranks in that order)."""
        if self.groups is None:
            raise KernelError(
                f"redistribution needs a ThreadGroupManager for group {list(device_ids)}; "
                "the kernel context has none"
            )
        return self.groups.get_group(device_kind, device_ids, self.devices)
