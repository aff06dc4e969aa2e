"""What one spawned process does in the process-mode convert tests: convert_kernel as one
caller, run by the shared pool (``tests/process_pool.py``).

Jobs carry plain data (ids, shapes, placement codes, tensors), rebuilt into meshes and
operands in the worker, so nothing but tensors and builtins crosses the queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

#: A mesh as plain data: (device kind, shape, row-major ids).
MeshData = tuple[str, tuple[int, ...], tuple[int, ...]]
#: A placement as plain data: ("R",), ("P",) or ("S", dim, split_order).
PlacementData = tuple[Any, ...]


@dataclass
class ConvertJob:
    """One process's share of a Convert: its devices, the layouts, its input shards."""

    namespace: str
    callers: list[list[int]]
    held: list[int]
    shape: tuple[int, ...]
    src: tuple[MeshData, tuple[PlacementData, ...]]
    dst: tuple[MeshData, tuple[PlacementData, ...]]
    inputs: dict[int, torch.Tensor]
    rendezvous_dir: str
    timeout_s: float = 20.0


def mesh_data(mesh: Any) -> MeshData:
    return (mesh.device_type, tuple(mesh.shape), tuple(mesh.device_ids))


def placement_data(placements: Any) -> tuple[PlacementData, ...]:
    out: list[PlacementData] = []
    for p in placements:
        if p.is_shard():
            out.append(("S", p.dim, p.split_order))
        else:
            out.append(("P",) if p.is_partial() else ("R",))
    return tuple(out)


def _layout(data: tuple[MeshData, tuple[PlacementData, ...]]) -> tuple[Any, tuple[Any, ...]]:
    from dtorch.ir.mesh import DeviceMesh
    from dtorch.ir.placement import Partial, Replicate, Shard

    kind, shape, ids = data[0]
    codes: dict[str, type[Replicate] | type[Partial]] = {"R": Replicate, "P": Partial}
    placements = tuple(Shard(p[1], p[2]) if p[0] == "S" else codes[p[0]]() for p in data[1])
    return DeviceMesh.from_ids(kind, shape, ids), placements


def run_job(job: ConvertJob) -> dict[int, list[torch.Tensor]]:
    """convert_kernel for this process's devices, with a process-mode group manager."""
    from dtorch.comm.group import CommTopology, ThreadGroupManager
    from dtorch.comm.namespace import CommNamespace
    from dtorch.kernels.base import KernelContext
    from dtorch.kernels.convert import convert_kernel
    from dtorch.options import GlobalOption
    from tests.kernels.convert.convert_harness import convert_context

    op, a, b = convert_context(job.shape, torch.int64, _layout(job.src), _layout(job.dst))
    with (
        GlobalOption.override(comm_timeout_second=job.timeout_s),
        ThreadGroupManager(
            CommTopology.processes_holding(job.callers),
            namespace=CommNamespace(job.namespace),
            rendezvous_dir=job.rendezvous_dir,
        ) as manager,
    ):
        ctx = KernelContext(op, (a,), (b,), tuple(job.held), manager)
        inputs = {d: [job.inputs[d]] if d in job.inputs else [] for d in job.held}
        return convert_kernel(ctx, inputs)
