"""Rule of GridSample: ``grid_sample(input, grid)``, the input sampled at the grid's points.

``input`` is (N, C, *spatial) and ``grid`` (N, *out, k) with ``k`` the number of spatial dims
(2 or 3); the output is (N, C, *out). Each output element reads the input's whole spatial
extent at the point its grid entry names, so per mesh dim:

* R x R -> R;
* the batch sharded in both (or in one, the other chunked to match) -> Shard(0);
* the input's channels sharded, grid R -> Shard(1);
* the grid's output points sharded, input R -> those dims sharded in the output;
* input Partial x grid R -> Partial (the sample is linear in the input's values);
* the input's spatial dims, the grid's coordinate dim or a Partial grid: refused.

Shapes and dtypes are torch's, from its own ``grid_sampler`` on meta tensors; the dtypes its CPU
kernels refuse (integers, complex) are learned by running it once on tiny tensors.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import GridSampleParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> x = Operand(1, (2, 3, 8, 8), torch.float32, mesh, (Shard(1),))
    >>> grid = Operand(2, (2, 5, 6, 2), torch.float32, mesh, (Replicate(),))
    >>> grid_sample_rule("grid_sample", GridSampleParam(), (x, grid)).outputs[0]
    OutputMeta(shape=(2, 3, 5, 6), dtype=torch.float32, placements=(Shard(dim=1),))
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from dtorch.errors import DtypeError, ShapeError, UnsupportedDtypeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import GridSampleParam, OpParam
from dtorch.ir.rules.base import Inference, Rule, all_replicate, replicated
from dtorch.ir.rules.image_ops import meta_outputs
from dtorch.ir.rules.signature import Labels, one_output, signature

_SIG = signature(
    "R R -> R", "Si Si -> Si", "Si R -> Si", "R Si -> Si", "P R -> P",
    legend="input x grid; i: the batch, the input's channels or the grid's output points; "
    "k: the input's spatial dims, the grid's coordinates",
    hint="redistribute the input's spatial dims and the grid's last dim to Replicate first: "
    "every point may read anywhere in the input",
)  # fmt: skip


def run_grid_sample(param: GridSampleParam, x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """torch's ``grid_sample`` of ``param`` (on local blocks, or meta tensors).

    Example:
        >>> image, centre = torch.arange(4.0).reshape(1, 1, 2, 2), torch.zeros(1, 1, 1, 2)
        >>> run_grid_sample(GridSampleParam(), image, centre).item()
        1.5
    """
    return F.grid_sample(
        x, grid, mode=param.mode, padding_mode=param.padding_mode,
        align_corners=param.align_corners,
    )  # fmt: skip


@functools.cache
def _refusal(param: GridSampleParam, ndim: int, dtype: torch.dtype) -> str:
    """torch's CPU kernel's refusal of ``dtype`` ('' if it takes it): meta tensors take
    every dtype."""
    spatial = (2,) * (ndim - 2)
    try:
        run_grid_sample(
            param, torch.ones(1, 1, *spatial, dtype=dtype),
            torch.zeros(1, *spatial, ndim - 2, dtype=dtype),
        )  # fmt: skip
    except (RuntimeError, NotImplementedError) as error:
        return str(error).split("\n", 1)[0]
    return ""


def grid_sample_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``grid_sample(input, grid)``: see the module doc."""
    assert isinstance(param, GridSampleParam)
    x, grid = inputs
    if x.ndim == grid.ndim and x.ndim and grid.ndim and x.shape[0] != grid.shape[0]:
        raise ShapeError(  # torch's CPU check (its meta kernel fails in a reshape instead)
            f"{name}: grid_sampler(): expected grid and input to have same batch size, but got "
            f"input with sizes {list(x.shape)} and grid with sizes {list(grid.shape)}"
        )
    if x.ndim == grid.ndim and x.ndim in (4, 5) and grid.shape[-1] != x.ndim - 2:
        raise ShapeError(  # torch's CPU check (its meta decomposition asserts instead)
            f"{name}: grid_sampler(): expected grid to have size {x.ndim - 2} in last dimension, "
            f"but got grid with sizes {list(grid.shape)}"
        )
    if x.dtype != grid.dtype:  # torch's CPU kernel's check (its meta kernel takes both)
        raise DtypeError(
            f"{name}: the input and the grid must have one dtype, got {x.dtype} and "
            f"{grid.dtype} (torch: expected scalar type of the input); accepted: the grid cast "
            "to the input's dtype"
        )
    ((shape, dtype),) = meta_outputs(name, run_grid_sample, param, inputs)
    refused = _refusal(param, x.ndim, x.dtype) if x.ndim in (4, 5) else ""
    if refused:
        raise UnsupportedDtypeError(
            f"{name}: {refused}; accepted: float16, bfloat16, float32, float64 input and grid"
        )
    if all_replicate(inputs):
        return replicated(shape, dtype, len(x.placements))
    spatial = x.ndim - 2
    in_labels: Labels = (0, 1, *(-1 - d for d in range(spatial)))
    grid_labels: Labels = (0, *(2 + d for d in range(spatial)), -10)
    out_labels: Labels = tuple(range(x.ndim))
    return one_output(name, _SIG, inputs, (in_labels, grid_labels), out_labels, shape, dtype)


RULES: dict[OpKind, Rule] = {OpKind.GridSample: grid_sample_rule}
