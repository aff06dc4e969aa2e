"""The redistribute planner: pure, cached, testable without devices.

``plan_redistribute(shape, src_mesh, src, dst_mesh, dst)`` returns a ``RedistributePlan``
whose ``steps`` each name their collective and mesh dim; ``collective_counts(plan)`` counts
them the way PyTorch's CommDebugMode would. The Convert kernel executes plans step by step.

Example:
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.placement import Shard, Replicate, Partial
    >>> mesh = init_device_mesh("cpu", (2, 2))
    >>> plan = plan_redistribute((8, 8), mesh, (Partial(), Shard(0)), mesh, (Replicate(),) * 2)
    >>> collective_counts(plan)
    {'all_gather': 1, 'all_reduce': 1}
"""

from dtorch.ir.redistribute.planner import plan_redistribute, same_mesh
from dtorch.ir.redistribute.steps import (
    TRANSFER_TYPES,
    AllGather,
    AllReduce,
    AllToAll,
    Gather,
    LocalChunk,
    Move,
    RedistributePlan,
    ReduceScatter,
    Scatter,
    SendRecv,
    ShardToPartial,
    Step,
    Transfer,
    ZeroNonOwner,
    collective_counts,
)

__all__ = [
    "TRANSFER_TYPES",
    "AllGather",
    "AllReduce",
    "AllToAll",
    "Gather",
    "LocalChunk",
    "Move",
    "RedistributePlan",
    "ReduceScatter",
    "Scatter",
    "SendRecv",
    "ShardToPartial",
    "Step",
    "Transfer",
    "ZeroNonOwner",
    "collective_counts",
    "plan_redistribute",
    "same_mesh",
]
