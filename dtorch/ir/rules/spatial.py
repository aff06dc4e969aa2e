"""Rules of the per-channel spatial operators: Pooling, Interpolate, Pad.

They act on each image and each channel alone, so a shard of the batch or the channels stays
a shard of the output; a shard of a dim they slide windows over or resample (pad: a dim they
pad) is refused, since its windows would cross shard boundaries (a halo exchange, not
implemented), unless each device holds whole windows that make its chunk of the output (max
and average pooling without padding or ``ceil_mode``: ``local_window_dims``). Partial stays
Partial where the operator is linear in its input. Per mesh dim:

=====================  ==========  =====================================================
operator               x -> out    Partial
=====================  ==========  =====================================================
max_pool2d             R, S(i)     refused: a max of sums is not a sum of maxima
avg_pool2d,            R, S(i), P  kept: a window mean is linear (with ``ceil_mode`` and
adaptive_avg_pool2d                ``count_include_pad`` too: the divisor depends on the
                                   window only)
interpolate            R, S(i), P  kept: every mode is a fixed linear filter (the average
                                   pools and interpolate of integers round: refused)
pad                    R, S(i), P  kept for reflect, replicate, circular (they copy values)
                                   and a zero fill; refused for a nonzero constant fill
=====================  ==========  =====================================================

``i`` is a dim the operator does not act on: the batch and channel dims of a pooling (the dims
before the last two), of an interpolation (dims 0 and 1), any dim that ``pad`` leaves as it is.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import PadParam
    >>> from dtorch.ir.placement import Partial, Shard
    >>> x = Operand(1, (2, 3, 5), torch.float32, init_device_mesh("cpu", (2, 2)),
    ...             (Shard(1), Partial()))
    >>> pad_rule("pad", PadParam((1, 2), "reflect"), (x,)).outputs[0]
    OutputMeta(shape=(2, 3, 8), dtype=torch.float32, placements=(Shard(dim=1), Partial(sum)))
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence

import torch

from dtorch.errors import ShapeError, UnsupportedDtypeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind, PoolKind
from dtorch.ir.params import InterpolateParam, OpParam, PadParam, PoolingParam
from dtorch.ir.placement import Placement, Shard
from dtorch.ir.rules.base import Inference, OutputMeta, Rule
from dtorch.ir.rules.image_ops import interpolate, meta_outputs, pad, pool
from dtorch.ir.rules.signature import Signature, fresh_labels, one_input, reject, signature
from dtorch.ir.sharding import local_shape_and_offset

_WINDOW = "its windows would cross shard boundaries (a halo exchange, not implemented)"
_LINEAR = signature("R -> R", "Si -> Si", "P -> P", legend="i: a batch or channel dim")
_MAX = signature(
    "R -> R", "Si -> Si", legend="i: a batch or channel dim",
    hint="max pooling is not linear: reduce a Partial input (redistribute to Replicate) first",
)  # fmt: skip
_ROUNDING = signature(
    "R -> R", "Si -> Si", legend="i: a batch or channel dim",
    hint="an integer average or interpolation rounds, which is not linear: reduce a Partial "
    "input first",
)  # fmt: skip
_PAD_LINEAR = signature("R -> R", "Si -> Si", "P -> P", legend="i: a dim that is not padded")
_PAD_FILL = signature(
    "R -> R", "Si -> Si", legend="i: a dim that is not padded",
    hint="a nonzero constant fill is not linear: reduce a Partial input first",
)  # fmt: skip

#: One window of the refusal check: (input index, its dims the operator acts on, their name).
Window = tuple[int, Sequence[int], str]


def refuse_window_shards(
    name: str, sig: Signature, inputs: Sequence[Operand], windows: Sequence[Window]
) -> None:
    """PlacementError when an input is sharded on a dim the operator slides windows over."""
    for index, dims, what in windows:
        for m, p in enumerate(inputs[index].placements):
            if isinstance(p, Shard) and p.dim in dims:
                detail = (
                    f"dim {p.dim} ({what}) is sharded on mesh dim {m}, and {_WINDOW}; "
                    f"redistribute it to Replicate first"
                )
                raise reject(name, sig, inputs, detail)


#: A window along one dim: (span = dilation * (kernel - 1) + 1, stride, padding).
WindowShape = tuple[int, int, int]


def local_window_dims(
    x: Operand, dims: Sequence[int], windows: Sequence[WindowShape]
) -> tuple[int, ...]:
    """The dims of ``dims`` that are sharded and whose windows lie within every device's shard,
    making exactly its chunk of the output: shards the operator keeps, with no halo exchange
    (a 1x1 convolution, a pooling whose stride is its kernel over shards of whole windows).

    Example:
        >>> import torch
        >>> from dtorch.ir.mesh import init_device_mesh
        >>> x = Operand(1, (1, 8, 8), torch.float32, init_device_mesh("cpu", 2), (Shard(1),))
        >>> local_window_dims(x, (1, 2), ((2, 2, 0), (2, 2, 0))), local_window_dims(
        ...     x, (1, 2), ((3, 2, 0), (2, 2, 0)))
        ((1,), ())
    """
    sharded = {p.dim for p in x.placements if isinstance(p, Shard)}
    return tuple(
        d
        for d, window in zip(dims, windows, strict=True)
        if d in sharded and _stays_local(x.shape, x.mesh.shape, x.placements, d, window)
    )


@functools.lru_cache(maxsize=1024)
def _stays_local(
    shape: tuple[int, ...],
    mesh_shape: tuple[int, ...],
    placements: tuple[Placement, ...],
    dim: int,
    window: WindowShape,
) -> bool:
    # no padding; every shard empty or at least a window wide, starting on a window's start;
    # and the windows a shard makes are the output's chunk of that device
    span, stride, pad = window
    if pad or shape[dim] < span:
        return False
    out = (*shape[:dim], (shape[dim] - span) // stride + 1, *shape[dim + 1 :])
    for coordinate in itertools.product(*map(range, mesh_shape)):
        local, offset = local_shape_and_offset(shape, mesh_shape, placements, coordinate)
        size, start = local[dim], offset[dim]
        made = (size - span) // stride + 1 if size >= span else 0
        out_local, out_offset = local_shape_and_offset(out, mesh_shape, placements, coordinate)
        aligned = not made or start == out_offset[dim] * stride
        if 0 < size < span or made != out_local[dim] or not aligned:
            return False
    return True


def _per_channel(
    name: str,
    sig: Signature,
    x: Operand,
    acted: Sequence[int],
    metas: Sequence[OutputMeta],
    kept: Sequence[int] = (),
) -> Inference:
    """Placements of an operator that acts on the ``acted`` dims of ``x`` and keeps the rest
    (and the shards of the ``kept`` dims among them: see ``local_window_dims``)."""
    moving = tuple(d for d in acted if d not in kept)
    refuse_window_shards(name, sig, (x,), ((0, moving, "a spatial dim"),))
    labels = fresh_labels(x.ndim, moving)
    return one_input(name, sig, x, labels, metas)


def check_dtype(name: str, dtype: torch.dtype, ok: bool, accepted: str) -> None:
    """UnsupportedDtypeError (torch's NotImplementedError) naming the operator where torch's
    CPU kernel has no ``dtype`` version (its meta kernel accepts every dtype)."""
    if not ok:
        raise UnsupportedDtypeError(f"{name}: no kernel for {dtype}; accepted: {accepted}")


def _metas(name: str, call: object, param: OpParam, x: Operand) -> list[OutputMeta]:
    # output shapes and dtypes from torch; the placements come from the signature afterwards
    found = meta_outputs(name, call, param, (x,))  # type: ignore[arg-type]
    return [OutputMeta(shape, dtype, ()) for shape, dtype in found]


def _linear(x: Operand) -> Signature:
    # integer means and interpolations round: only floating-point ones are linear
    return _LINEAR if x.dtype.is_floating_point else _ROUNDING


#: The dtypes torch's CPU pooling kernels take, per kind.
_POOL_DTYPES: dict[PoolKind, tuple[Callable[[torch.dtype], bool], str]] = {
    PoolKind.MAX: (lambda d: d != torch.bool and not d.is_complex, "real dtypes but bool"),
    PoolKind.AVG: (
        lambda d: d.is_floating_point or d == torch.int64,
        "floating-point dtypes and int64",
    ),
    PoolKind.ADAPTIVE_AVG: (lambda d: d.is_floating_point, "floating-point dtypes"),
    PoolKind.ADAPTIVE_MAX: (lambda d: d.is_floating_point, "floating-point dtypes"),
}


def pooling_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """Max, average and adaptive average pooling of a 3-D or 4-D image."""
    assert isinstance(param, PoolingParam)
    (x,) = inputs
    if x.ndim not in (3, 4):
        raise ShapeError(f"{name}: needs a 3-D (C, H, W) or 4-D (N, C, H, W) input; got "
                         f"{list(x.shape)}")  # fmt: skip
    ok, accepted = _POOL_DTYPES[param.pool]
    check_dtype(name, x.dtype, ok(x.dtype), accepted)
    metas = _metas(name, pool, param, x)
    sig = _MAX if param.pool in (PoolKind.MAX, PoolKind.ADAPTIVE_MAX) else _linear(x)
    spatial = (x.ndim - 2, x.ndim - 1)
    kept = local_window_dims(x, spatial, _pool_windows(param)) if _windowed(param) else ()
    return _per_channel(name, sig, x, spatial, metas, kept)


def _windowed(param: PoolingParam) -> bool:
    # a pooling of fixed windows that a shard can run alone (max's indices are made global by
    # the kernel; ceil_mode's last window may be cut; adaptive windows follow the whole size)
    return param.pool in (PoolKind.AVG, PoolKind.MAX) and not param.ceil_mode


def _pool_windows(param: PoolingParam) -> tuple[WindowShape, ...]:
    strides = param.strides or param.kernel_size  # torch's default stride
    return tuple(
        window_shape(i, param.kernel_size, strides, param.pads, param.dilations) for i in (0, 1)
    )


def window_shape(
    i: int,
    kernel: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
) -> WindowShape:
    """Spatial dim ``i``'s window from sizes of one or two elements, as torch reads them.

    Example:
        >>> window_shape(1, (3, 1), (2,), (0,), (1, 1))
        (1, 2, 0)
    """

    def at(values: Sequence[int]) -> int:
        return values[i] if len(values) > 1 else values[0]

    return at(dilations) * (at(kernel) - 1) + 1, at(strides), at(pads)


#: The interpolation modes torch's CPU kernels have a uint8 version of.
_UINT8_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic")


def interpolate_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``interpolate`` of an (N, C, ...) tensor: it resamples every dim after the first two."""
    assert isinstance(param, InterpolateParam)
    (x,) = inputs
    ok = x.dtype.is_floating_point or (x.dtype == torch.uint8 and param.mode in _UINT8_MODES)
    check_dtype(name, x.dtype, ok, f"floating-point dtypes, and uint8 in modes {_UINT8_MODES}")
    metas = _metas(name, interpolate, param, x)
    return _per_channel(name, _linear(x), x, tuple(range(2, x.ndim)), metas)


def pad_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``pad``: the dims with a nonzero pad are acted on, the others are free."""
    assert isinstance(param, PadParam)
    (x,) = inputs
    if param.mode in ("reflect", "replicate"):
        check_dtype(name, x.dtype, x.dtype != torch.bool, "every dtype but bool")
    metas = _metas(name, pad, param, x)
    pairs = zip(param.pads[0::2], param.pads[1::2], strict=False)
    acted = [x.ndim - 1 - i for i, (lo, hi) in enumerate(pairs) if lo or hi]
    linear = param.mode != "constant" or param.value == 0
    return _per_channel(name, _PAD_LINEAR if linear else _PAD_FILL, x, acted, metas)


RULES: dict[OpKind, Rule] = {
    OpKind.Pooling: pooling_rule,
    OpKind.Interpolate: interpolate_rule,
    OpKind.Pad: pad_rule,
}
