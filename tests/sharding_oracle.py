"""The sharding oracle of the redistribute tests: a full tensor cut into per-device locals, and
per-device locals checked against the full tensor, with ``dtorch.ir.sharding`` and plain torch.

Partial mesh dims split each value into random integer summands, so the check (the sum over
the Partial mesh dims equals the full tensor's box) is exact for integer dtypes. Used by the
plan interpreter (tests/ir) and by the Convert kernel tests (tests/kernels/convert).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement
from dtorch.ir.sharding import device_shard

Locals = dict[int, torch.Tensor]


#: The box of the full tensor that ``device`` holds under ``placements`` on ``mesh``.
spec = device_shard


def distribute(
    full: torch.Tensor, mesh: DeviceMesh, placements: Sequence[Placement], gen: torch.Generator
) -> Locals:
    """Each device's shard of ``full``; Partial mesh dims split values into random summands."""
    out = {d: full[spec(full.shape, mesh, placements, d).slices()].clone() for d in mesh.device_ids}
    for m, p in enumerate(placements):
        if p.is_partial():
            _split_summands(out, mesh, m, gen)
    return out


def _split_summands(out: Locals, mesh: DeviceMesh, m: int, gen: torch.Generator) -> None:
    # the first device of each group along mesh dim m keeps the value minus the others' noise
    for d in mesh.device_ids:
        if mesh.coordinate_of(d)[m] != 0:
            continue
        for other in list(mesh.group_of(d, m))[1:]:
            out[other] = torch.randint(-50, 50, out[d].shape, generator=gen).to(out[d].dtype)
            out[d] = out[d] - out[other]


def check_layout(
    full: torch.Tensor, mesh: DeviceMesh, placements: Sequence[Placement], got: Locals
) -> None:
    """Shapes and dtype match the layout; the sum over Partial mesh dims equals the full
    tensor's box on every device of the Partial groups' first coordinate."""
    partial = [m for m, p in enumerate(placements) if p.is_partial()]
    for d in mesh.device_ids:
        s = spec(full.shape, mesh, placements, d)
        assert tuple(got[d].shape) == s.shape and got[d].dtype == full.dtype, (d, got[d], s)
        coord = mesh.coordinate_of(d)
        if any(coord[m] for m in partial):
            continue
        total = torch.zeros(s.shape, dtype=full.dtype)
        for point in itertools.product(*(range(mesh.shape[m]) for m in partial)):
            c = list(coord)
            for m, v in zip(partial, point, strict=True):
                c[m] = v
            total += got[mesh.device_at(c)]
        assert torch.equal(total, full[s.slices()]), (d, placements, total, full[s.slices()])
