"""Small builders shared by the rule tests."""

from __future__ import annotations

import torch

from dtorch.ir.mesh import DeviceMesh, init_device_mesh
from dtorch.ir.operator import Operand
from dtorch.ir.placement import Placement, Replicate

MESH2 = init_device_mesh("cpu", 2)
MESH22 = init_device_mesh("cpu", (2, 2))


def op(
    shape: tuple[int, ...],
    *placements: Placement,
    dtype: torch.dtype = torch.float32,
    mesh: DeviceMesh = MESH2,
    i: int = 1,
) -> Operand:
    """An operand of ``shape`` (all-Replicate unless placements are given)."""
    return Operand(i, shape, dtype, mesh, tuple(placements) or (Replicate(),) * mesh.ndim)
