"""``grid_sample`` and ``affine_grid`` with torch.nn.functional's signatures (a spatial
transformer: ``grid_sample(x, affine_grid(theta, x.shape))``).

``grid_sample`` is one GridSample operator (``dtorch.ir.rules.grid_sample``): the batch, the
input's channels or the grid's output points may be sharded, and a Partial input gives a
Partial; the input's spatial dims are whole on every device. ``affine_grid`` is torch's own
arithmetic (its ``affine_grid_generator``): the base grid of ``size``, the same for every
batch entry, computed on the client as torch computes it and sent Replicate, times each
``theta`` by one ``bmm``, so a batch of ``theta`` sharded on the batch gives a grid sharded
alike (each ``theta`` whole on its device: a shard of its matrix dims or a Partial is
refused). torch's warnings (``align_corners`` left None) and checks come first, in its words.

Example:
    >>> import torch, dtorch
    >>> theta = dtorch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])  # the identity
    >>> x = dtorch.arange(4.0).reshape(1, 1, 2, 2)
    >>> grid = dtorch.nn.functional.affine_grid(theta, (1, 1, 2, 2), align_corners=False)
    >>> dtorch.nn.functional.grid_sample(x, grid, align_corners=False).tolist()
    [[[[0.0, 1.0], [2.0, 3.0]]]]
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_flag, as_size
from dtorch.api.ops.shape import expand, reshape, transpose
from dtorch.api.record import named_as, record_one, tensor_arg
from dtorch.errors import (
    ParamError,
    PlacementError,
    ShapeError,
    UnsupportedDtypeError,
    UnsupportedShapeError,
)
from dtorch.ir.params import GridSampleParam
from dtorch.ir.placement import Shard, format_placements

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_DEFAULT_CHANGED = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since "
    "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
    "documentation of grid_sample for details."
)


def _corners(align_corners: bool | None, name: str) -> bool:
    # torch's warning for None (then False), with the user's line
    if align_corners is None:
        warnings.warn(_DEFAULT_CHANGED, UserWarning, stacklevel=3)
        return False
    return as_flag(align_corners, name, "align_corners")


def grid_sample(
    input: Tensor,
    grid: Any,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> Tensor:
    """``torch.nn.functional.grid_sample``: ``input`` (N, C, H, W) or (N, C, D, H, W) sampled
    at the points of ``grid`` (N, H_out, W_out, 2) or (N, D_out, H_out, W_out, 3), coordinates
    in [-1, 1]; ``mode`` ``bilinear``, ``nearest`` or ``bicubic`` (4-D only), ``padding_mode``
    ``zeros``, ``border`` or ``reflection``. A torch ``grid`` is sent Replicate.

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(4.0).reshape(1, 1, 2, 2)
        >>> centre = dtorch.zeros(1, 1, 1, 2)
        >>> dtorch.nn.functional.grid_sample(x, centre, align_corners=False).tolist()
        [[[[1.5]]]]
    """
    name = "grid_sample"
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ParamError(
            "nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or "
            f"'bicubic', but got: '{mode}'"
        )
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ParamError(
            "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
            f"'reflection', but got: '{padding_mode}'"
        )
    corners = _corners(align_corners, name)
    tensor_arg(name, input)
    if isinstance(grid, torch.Tensor):
        grid = beside(input, grid)
    tensor_arg(name, grid, "grid")
    return record_one(name, GridSampleParam(mode, padding_mode, corners), (input, grid))


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: bool | None = None) -> Tensor:
    """``torch.nn.functional.affine_grid``: the sampling grid of the affine maps ``theta``
    (N, 2, 3) for an output ``size`` (N, C, H, W), or (N, 3, 4) for (N, C, D, H, W): each
    output point's [-1, 1] coordinates times its batch entry's ``theta``.

    Example:
        >>> import dtorch
        >>> theta = dtorch.tensor([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.5]]])
        >>> dtorch.nn.functional.affine_grid(theta, (1, 1, 1, 2), align_corners=True).tolist()
        [[[[-2.0, 0.5], [2.0, 0.5]]]]
    """
    name = "affine_grid"
    corners = _corners(align_corners, name)
    tensor_arg(name, theta, "theta")
    sizes = [as_size(s, name, "size") for s in size]
    _check_affine(theta, sizes, corners)
    _check_theta_placements(theta)
    spatial = sizes[2:]
    base = _base_grid(spatial, corners, theta.dtype)  # (1, points, k + 1)
    with named_as(name):
        n = sizes[0]
        points = expand(beside(theta, base), (n, *base.shape[1:]))
        grid = points.bmm(transpose(theta, 1, 2))
        return reshape(grid, (n, *spatial, len(spatial)))


def _check_affine(theta: Tensor, size: list[int], corners: bool) -> None:
    """torch's checks of ``affine_grid``'s arguments, in its order and words."""
    if not theta.is_floating_point():
        raise ParamError(f"Expected theta to have floating point type, but got {theta.dtype}")
    if len(size) not in (4, 5):
        raise UnsupportedShapeError(
            "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
            f"respectively. Got size {size}."
        )
    k = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[-2:]) != (k, k + 1):
        raise ShapeError(
            f"Expected a batch of {k}D affine matrices of shape Nx{k}x{k + 1} for size {size}. "
            f"Got {theta.shape}."
        )
    if corners and min(size[2:]) == 1:
        warnings.warn(
            "Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
            "align_corners=True. This is not an intended use case of affine_grid. See the "
            "documentation of affine_grid for details.",
            UserWarning,
            stacklevel=3,
        )
    elif min(size) <= 0:
        raise ParamError(f"Expected non-zero, positive output size. Got {size}")
    if min(size[2:]) == 1 and theta.dtype in (torch.float16, torch.bfloat16):
        raise UnsupportedDtypeError(  # torch's CPU kernel makes that axis of one point in it
            f'affine_grid: "tensor_cpu" not implemented for {theta.dtype} (a spatial size of '
            "1); accepted: float32 or float64 theta there"
        )
    if theta.shape[0] != size[0]:
        raise ShapeError(
            f"affine_grid: Expected a batch of {theta.shape[0]} for size {size}; theta's "
            "batch must be the size's first entry"
        )


def _check_theta_placements(theta: Tensor) -> None:
    """Each ``theta`` whole on every device (its batch may be sharded): the grid is torch's
    ``bmm`` of it, bit for bit, only where no device sums parts of its products."""
    for p in theta.placements:
        if p.is_partial() or (isinstance(p, Shard) and p.dim != 0):
            raise PlacementError(
                f"affine_grid: got theta {format_placements(theta.placements)}; accepted: its "
                "batch (dim 0) sharded, or Replicate. Redistribute its matrix dims (and a "
                "Partial) to Replicate first"
            )


def _steps(count: int, corners: bool, dtype: torch.dtype) -> torch.Tensor:
    # torch's linspace_from_neg_one: [-1, 1], pulled in by (n - 1) / n without align_corners
    if count <= 1:
        return torch.tensor(0, dtype=dtype)
    line = torch.linspace(-1, 1, count, dtype=dtype)
    return line if corners else line * (count - 1) / count


def _base_grid(spatial: list[int], corners: bool, dtype: torch.dtype) -> torch.Tensor:
    """torch's base grid (make_base_grid_4D/5D) of one batch entry, flattened to (1, points,
    k + 1): x along the last dim, then y, then z, and a column of ones."""
    base = torch.empty((*spatial, len(spatial) + 1), dtype=dtype)
    for axis, count in enumerate(reversed(spatial)):  # W first, as torch fills them
        line = _steps(count, corners, dtype)
        base.select(-1, axis).copy_(line.reshape(count if count > 1 else 1, *[1] * axis))
    base.select(-1, len(spatial)).fill_(1)
    return base.reshape(1, -1, len(spatial) + 1)
