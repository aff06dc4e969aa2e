"""Rule of ViewPlacements (``t.view([placements])``): the local shards read under new placements.

No data moves: every device keeps its local tensor, and the output is what those local
tensors make under the new placements (a Replicate read as Partial sums to n times the value,
a Partial read as Replicate shows one device's partial value). The global shape is rebuilt
from the local shapes; the view is refused when they cannot be the ``torch.chunk`` pieces of
one global shape under the new placements. Marked inputs (``Shard(d,
sub_split_coordinates=...)``) are accepted: read as a plain ``Shard(d)`` they drop the mark,
which is allowed only where every device's local size is the plain chunk size.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.params import ViewPlacementsParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> x = Operand(1, (4, 3), torch.float32, init_device_mesh("cpu", 2), (Shard(0),))
    >>> view_placements_rule("view", ViewPlacementsParam((Shard(1),)), (x,)).outputs[0].shape
    (2, 6)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from dtorch.errors import PlacementError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import OpParam, ViewPlacementsParam
from dtorch.ir.placement import Placement, Shard, format_placements
from dtorch.ir.rules.base import Inference, OutputMeta, Rule
from dtorch.ir.sharding import local_shape_and_offset
from dtorch.ir.subsplit import check_unmarked

Shape = tuple[int, ...]


def view_placements_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """The same local shards under ``param.placements``, with the global shape they make."""
    assert isinstance(param, ViewPlacementsParam)
    (x,) = inputs
    new = param.placements
    check_unmarked(name, new, "a target placement")  # a mark is made by cat, not declared
    locals_ = _local_shapes(x.shape, x.mesh.shape, x.placements)
    shape = _global_shape(x.mesh.shape, new, locals_, len(x.shape))
    if _local_shapes(shape, x.mesh.shape, new) != locals_:
        _refuse(name, x, new, locals_)
    return Inference((OutputMeta(shape, x.dtype, new),))


# Every device's local shape, keyed by its mesh coordinate.
def _local_shapes(
    shape: Sequence[int], mesh_shape: Shape, placements: Sequence[Placement]
) -> dict[Shape, Shape]:
    coords = itertools.product(*(range(n) for n in mesh_shape))
    return {c: local_shape_and_offset(shape, mesh_shape, placements, c)[0] for c in coords}


# The candidate global shape: per dim, the local sizes summed along the mesh dims sharding it
# (other mesh dims at coordinate 0); the caller checks that it gives back every local shape.
def _global_shape(
    mesh_shape: Shape, new: Sequence[Placement], locals_: dict[Shape, Shape], ndim: int
) -> Shape:
    return tuple(_global_size(mesh_shape, new, locals_, d) for d in range(ndim))


# One dim of the candidate global shape.
def _global_size(
    mesh_shape: Shape, new: Sequence[Placement], locals_: dict[Shape, Shape], dim: int
) -> int:
    sharding = [isinstance(p, Shard) and p.dim == dim for p in new]
    return sum(
        local[dim]
        for coord, local in locals_.items()
        if all(c == 0 or s for c, s in zip(coord, sharding, strict=True))
    )


# The local shapes are not the chunks of one global shape under the new placements.
def _refuse(name: str, x: Operand, new: tuple[Placement, ...], locals_: dict[Shape, Shape]) -> None:
    shapes = sorted({list(s).__repr__() for s in locals_.values()})
    raise PlacementError(
        f"{name}: cannot view a tensor of shape {list(x.shape)} placed "
        f"{format_placements(x.placements)} (local shapes {', '.join(shapes)}) as "
        f"{format_placements(new)}: the local shapes are not the torch.chunk pieces of one "
        f"global shape under those placements; accepted: placements under which every device's "
        f"local shape is its chunk (use redistribute(placements=...) to move data)"
    )


RULES: dict[OpKind, Rule] = {
    OpKind.ViewPlacements: view_placements_rule,
}
