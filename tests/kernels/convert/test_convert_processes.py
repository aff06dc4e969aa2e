"""convert_kernel in process mode: one spawned process per device, so every group of more
than one device runs on torch.distributed (Gloo), and transfers use two-process groups."""

from __future__ import annotations

import pytest
import torch

from dtorch.comm.namespace import CommNamespace
from dtorch.ir.mesh import DeviceMesh, init_device_mesh
from dtorch.ir.placement import Partial, Placement, Replicate, Shard, normalize_placements
from tests.kernels.convert.convert_workers import ConvertJob, mesh_data, placement_data, run_job
from tests.process_pool import Job, ProcessPool
from tests.sharding_oracle import check_layout, distribute

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def pool(process_pool: ProcessPool) -> ProcessPool:
    """The session's shared worker pool (tests/conftest.py): one process per device."""
    return process_pool


MESH1 = init_device_mesh("cpu", 4)
MESH2 = init_device_mesh("cpu", (2, 2))
PAIR_A, PAIR_B = DeviceMesh("cpu", [0, 1]), DeviceMesh("cpu", [2, 3])
R, P = Replicate(), Partial()

CASES = [
    (MESH1, (Shard(0),), MESH1, (Shard(1),)),
    (MESH1, (P,), MESH1, (R,)),
    (MESH1, (P,), MESH1, (Shard(0),)),
    (MESH2, (Shard(0), Shard(1)), MESH2, (R, R)),
    (MESH2, (Shard(0), Shard(0)), MESH2, (Shard(1), Shard(1))),
    (MESH2, (P, Shard(0)), MESH2, (Shard(1), P)),
    (PAIR_A, (Shard(0),), PAIR_B, (Shard(1),)),
    (PAIR_A, (P,), PAIR_B, (P,)),
    (DeviceMesh("cpu", 0), (R,), MESH1, (Shard(0),)),
    (MESH1, (Shard(1),), DeviceMesh("cpu", 3), (R,)),
]


@pytest.mark.parametrize(("a", "src", "b", "dst"), CASES, ids=repr)
def test_process_mode_matches_torch(
    pool: ProcessPool,
    tmp_path: object,
    a: DeviceMesh,
    src: tuple[Placement, ...],
    b: DeviceMesh,
    dst: tuple[Placement, ...],
) -> None:
    shape = (7, 5)
    gen = torch.Generator().manual_seed(1)
    full = torch.randint(-100, 100, shape, generator=gen)
    src_n = normalize_placements(src, a.ndim, 2)
    dst_n = normalize_placements(dst, b.ndim, 2)
    shards = distribute(full, a, src_n, gen)
    devices = sorted(set(a.device_ids) | set(b.device_ids))
    namespace = CommNamespace.create().instance_id
    jobs = [
        ConvertJob(
            namespace,
            [[d] for d in devices],
            [d],
            shape,
            (mesh_data(a), placement_data(src_n)),
            (mesh_data(b), placement_data(dst_n)),
            {d: shards[d]} if d in shards else {},
            str(tmp_path),
        )
        for d in devices
    ]
    outputs: dict[int, list[torch.Tensor]] = {}
    for result in pool.start([Job(run_job, (job,)) for job in jobs]).results():
        outputs.update(result)
    check_layout(full, b, dst_n, {d: v[0] for d, v in outputs.items() if v})
