"""Helpers of the layer tests: the dp meshes (even, uneven, 2-D beside tp, 3-D with a size-1
dim) and the batch layout on them.

Example:
    >>> import dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    >>> batch_on_dp(mesh)
    [Shard(dim=0), Replicate()]
"""

from __future__ import annotations

import dtorch

#: (mesh shape, dim names): the batch goes on "dp".
DP_MESHES: list[tuple[tuple[int, ...], tuple[str, ...]]] = [
    ((2,), ("dp",)),
    ((3,), ("dp",)),
    ((2, 2), ("dp", "tp")),
    ((2, 1, 2), ("tp", "pp", "dp")),
]


def batch_on_dp(mesh: dtorch.DeviceMesh) -> list[dtorch.Placement]:
    """The batch (dim 0) sharded on the mesh's "dp" dim, Replicate on the others."""
    return [dtorch.Shard(0) if name == "dp" else dtorch.Replicate() for name in mesh.dim_names]
