"""Rules of ViewPlacements (``t.view([placements])``): the local shards read under new
placements; and of ViewDtype (``t.view(dtype)``): their bits read as another dtype.

No data moves: every device keeps its local tensor, and the output is what those local
tensors make under the new placements (a Replicate read as Partial sums to n times the value,
a Partial read as Replicate shows one device's partial value). The global shape is rebuilt
from the local shapes; the view is refused when they cannot be the ``torch.chunk`` pieces of
one global shape under the new placements. Marked inputs (``Shard(d,
sub_split_coordinates=...)``) are accepted: read as a plain ``Shard(d)`` they drop the mark,
which is allowed only where every device's local size is the plain chunk size.

ViewDtype is torch's ``Tensor.view(dtype)``: every device reads its own shard's bits, so any
placement works except Partial (the bits of the parts do not add up to the bits of the sum).
Where the element size differs the last dim grows or shrinks by the ratio, as in torch; then
every device must hold that whole dim, so a shard of it is refused too.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.params import ViewDtypeParam, ViewPlacementsParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> x = Operand(1, (4, 3), torch.float32, init_device_mesh("cpu", 2), (Shard(0),))
    >>> view_placements_rule("view", ViewPlacementsParam((Shard(1),)), (x,)).outputs[0].shape
    (2, 6)
    >>> view_dtype_rule("view", ViewDtypeParam(torch.int16), (x,)).outputs[0]
    OutputMeta(shape=(4, 6), dtype=torch.int16, placements=(Shard(dim=0),))
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from dtorch.errors import DtypeError, PlacementError, ShapeError
from dtorch.ir.dtypes import PLAIN_DTYPES, SUB_BYTE_DTYPES
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import OpParam, ViewDtypeParam, ViewPlacementsParam
from dtorch.ir.placement import Placement, Shard, format_placements
from dtorch.ir.rules.base import Inference, OutputMeta, Rule, all_replicate, replicated
from dtorch.ir.rules.signature import elementwise, fresh_labels, identity, one_output, signature
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


_BITS_HINT = (
    "the bits of a Partial's parts do not add up to the bits of the sum: redistribute it to "
    "Replicate first"
)
_SAME_SIZE = elementwise(1, hint=_BITS_HINT)
_RESIZED = signature(
    "R -> R", "Si -> Si",
    legend="i: a dim other than the last, whose size changes with the element size",
    hint=f"redistribute the last dim to Replicate first; {_BITS_HINT}",
)  # fmt: skip


def view_dtype_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``view(dtype)``: every device's bits read as ``param.dtype`` (see the module)."""
    assert isinstance(param, ViewDtypeParam)
    (x,) = inputs
    dtype = param.dtype
    _check_viewable(name, x.dtype, dtype)
    if dtype == x.dtype:  # nothing reinterpreted: a Partial stays the same sum
        return Inference((OutputMeta(x.shape, dtype, x.placements),))
    shape = dtype_view_shape(name, x.shape, x.dtype, dtype)
    if all_replicate(inputs):
        return replicated(shape, dtype, len(x.placements))
    labels = identity(x.ndim)
    if x.dtype.itemsize == dtype.itemsize:
        return one_output(name, _SAME_SIZE, inputs, (labels,), labels, shape, dtype)
    resized = fresh_labels(x.ndim, (x.ndim - 1,))  # the last dim is not the input's
    return one_output(name, _RESIZED, inputs, (labels,), resized, shape, dtype)


def dtype_view_shape(name: str, shape: Shape, src: torch.dtype, dst: torch.dtype) -> Shape:
    """The shape of torch's ``view(dst)`` of a ``src`` tensor of ``shape``, with torch's errors.

    Example:
        >>> dtype_view_shape("view", (2, 4), torch.float32, torch.int64)
        (2, 2)
    """
    old, new = src.itemsize, dst.itemsize
    if old == new:
        return shape
    if not shape:
        raise ShapeError(
            f"{name}: a 0-d tensor cannot be viewed as {dst} from {src} (different element "
            "sizes change the last dim's size)"
        )
    last = shape[-1]
    if old > new:
        return (*shape[:-1], last * (old // new))
    if last % (new // old):
        raise ShapeError(
            f"{name}: the last dim's size must be divisible by {new // old} to view {src} as "
            f"{dst} (different element sizes), but got {last}"
        )
    return (*shape[:-1], last // (new // old))


# Dtypes whose elements a device can hold and read back: not quantized, not under a byte.
def _check_viewable(name: str, src: torch.dtype, dst: torch.dtype) -> None:
    if dst not in PLAIN_DTYPES or dst in SUB_BYTE_DTYPES:
        raise DtypeError(
            f"{name}: cannot view a {src} tensor as {dst}; accepted: dtypes of one byte or more "
            "that are not quantized"
        )


RULES: dict[OpKind, Rule] = {
    OpKind.ViewPlacements: view_placements_rule,
    OpKind.ViewDtype: view_dtype_rule,
}
