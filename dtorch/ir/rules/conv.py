"""The Conv rule: ``conv2d(x, w[, b])`` of a 3-D or 4-D image, NCHW or NHWC.

Labels: ``i`` the batch dim of ``x``, or the out-channels of ``w`` (dim 0) and of ``b``, which
are the output's channels; ``k`` the in-channels of ``x`` and of ``w`` (dim 1). Per mesh dim,
with ``groups == 1``:

=============  =====  ======================================================
x x w (x b)    out    why
=============  =====  ======================================================
R R (R)        R
S(N) R (R)     S(N)   each device convolves its images
R S(0) (R|S)   S(C)   each device makes its out-channels (a Replicate bias is chunked)
R R S(0)       S(C)   the weight is chunked like the bias
S(C) S(1) (R)  P      each device sums over its in-channels; the owner adds a bias
P R (R)        P      conv is linear in its input (the owner adds a bias)
R P (R)        P      and in its weight
S(C) S(1) P    P      (and the rows above) a Partial bias: every device adds its piece
P R P, R P P
=============  =====  ======================================================

With ``groups > 1`` the in-channels of ``x`` are the label of the out-channels (a group's
inputs make that group's outputs): any R/S(i) mix is accepted (a Replicate operand is chunked
to match) as long as every device then holds whole groups, and the same groups, of ``x``'s
channels and ``w``'s out-channels (a depthwise conv always does); plus the P rows above.
A sharded H or W of ``x`` stays a shard of the output where every device's windows lie in
its shard and make its chunk of the output (``spatial.local_window_dims``: a 1x1 kernel, say);
any other sharded spatial dim (and kH, kW of ``w``) is refused: its windows would cross shard
boundaries (a halo exchange, not implemented).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import ConvParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> x = Operand(1, (2, 4, 8, 8), torch.float32, mesh, (Shard(1),))
    >>> w = Operand(2, (6, 4, 3, 3), torch.float32, mesh, (Shard(1),))
    >>> out = conv_rule("conv2d", ConvParam(kernel_size=(3, 3)), (x, w)).outputs[0]
    >>> out.shape, out.placements
    ((2, 6, 6, 6), (Partial(sum),))
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

import torch

from dtorch.errors import DtypeError, ShapeError, UnsupportedDtypeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OperatorFormat, OpKind, PaddingType
from dtorch.ir.params import ConvParam, OpParam
from dtorch.ir.placement import Placement, Shard
from dtorch.ir.rules.base import Inference, Rule, all_replicate, replicated
from dtorch.ir.rules.image_ops import channel_dim, conv_full, meta_outputs, spatial_dims
from dtorch.ir.rules.signature import (
    Labels,
    Signature,
    elementwise,
    identity,
    one_output,
    reject,
    signature,
)
from dtorch.ir.rules.spatial import (
    WindowShape,
    local_window_dims,
    refuse_window_shards,
    window_shape,
)
from dtorch.ir.sharding import local_shape_and_offset

_K, _KH, _KW, _H, _W = 10_000, 10_001, 10_002, 10_003, 10_004  # contracted labels
_BIAS_HINT = "A Partial output adds a Replicate bias once (on the partial owner)"
_LEGEND = "i: the batch dim of x or the out-channels of w and b; k: the in-channels of x and w"
_GROUPED_LEGEND = (
    "i: the batch dim of x, or x's channels with the out-channels of w and b, in whole groups"
)
_CONV = signature(
    "R R -> R", "Si R -> Si", "R Si -> Si", "Sk Sk -> P", "P R -> P", "R P -> P", legend=_LEGEND,
)  # fmt: skip
_CONV_BIAS = signature(
    "R R R -> R", "Si R R -> Si", "R Si R -> Si", "R Si Si -> Si", "R R Si -> Si",
    "Sk Sk R -> P", "P R R -> P", "R P R -> P", "Sk Sk P -> P", "P R P -> P", "R P P -> P",
    legend=_LEGEND, hint=_BIAS_HINT,
)  # fmt: skip
_GROUPED = elementwise(2, ["P R -> P", "R P -> P"], legend=_GROUPED_LEGEND)
_GROUPED_BIAS = elementwise(
    3,
    ["P R R -> P", "R P R -> P", "P R P -> P", "R P P -> P"],
    legend=_GROUPED_LEGEND,
    hint=_BIAS_HINT,
)
#: (grouped, input count) -> signature.
_SIGNATURES = {
    (False, 2): _CONV, (False, 3): _CONV_BIAS, (True, 2): _GROUPED, (True, 3): _GROUPED_BIAS,
}  # fmt: skip


def conv_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``conv2d``: shapes and dtype from torch, placements from the module's table."""
    assert isinstance(param, ConvParam)
    x = inputs[0]
    _check_dtypes(name, inputs)
    if x.ndim not in (3, 4):
        raise ShapeError(f"{name}: needs a 3-D (C, H, W) or 4-D (N, C, H, W) input; got "
                         f"{list(x.shape)}")  # fmt: skip
    _check_shapes(name, inputs, param)
    ((shape, dtype),) = meta_outputs(name, conv_full, param, inputs)
    if all_replicate(inputs):
        return replicated(shape, dtype, len(x.placements))
    grouped = param.group > 1
    sig = _SIGNATURES[grouped, len(inputs)]
    spatial = spatial_dims(x.ndim, param.format)
    kept = local_window_dims(x, spatial, _windows(param, inputs[1].shape))
    windows = ((0, [d for d in spatial if d not in kept], "a spatial dim of the input"),
               (1, (2, 3), "a kernel dim of the weight"))  # fmt: skip
    refuse_window_shards(name, sig, inputs, windows)
    labels = _labels(x.ndim, param.format, grouped, kept)[: len(inputs)]
    inference = one_output(name, sig, inputs, labels, identity(len(shape)), shape, dtype)
    if grouped:
        _check_groups(name, sig, inputs, inference, param)
    return inference


def _check_dtypes(name: str, inputs: tuple[Operand, ...]) -> None:
    # torch's CPU conv takes one dtype (not bool) for all three; its meta kernel does not check
    dtypes = [o.dtype for o in inputs]
    if len(set(dtypes)) > 1 or dtypes[0] == torch.bool:
        got = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        # a bool input has no kernel (NotImplementedError), unless a bias of another dtype
        # fails torch's input-bias check first
        no_kernel = dtypes[0] == torch.bool and all(d == torch.bool for d in dtypes[2:])
        kind = UnsupportedDtypeError if no_kernel else DtypeError
        raise kind(f"{name}: input, weight and bias must share one dtype, not bool; got {got}")


def _check_shapes(name: str, inputs: tuple[Operand, ...], param: ConvParam) -> None:
    # torch's meta kernels skip some of the checks its CPU kernels make
    x, w, *bias = inputs
    channels = x.shape[channel_dim(x.ndim, param.format)]
    fits = w.ndim == 4 and w.shape[0] % param.group == 0 and channels == w.shape[1] * param.group
    if not fits or (bias and bias[0].shape != w.shape[:1]):
        got = " x ".join(str(list(o.shape)) for o in inputs)
        raise ShapeError(
            f"{name}: inputs {got} with groups={param.group} do not fit; accepted: a weight "
            f"(out_channels, in_channels / groups, kH, kW) with out_channels divisible by "
            f"groups and the input's {channels} channels = in_channels, and a bias "
            f"(out_channels,)"
        )


@functools.cache
def _windows(param: ConvParam, w: tuple[int, ...]) -> tuple[WindowShape, ...]:
    """The windows along H and W (padding "same" pads all but a window of one element)."""
    shapes = []
    for i in (0, 1):
        span, stride, pad = window_shape(i, w[2:], param.strides, param.pads, param.dilations)
        if param.padding_type is not PaddingType.EXPLICIT:
            pad = span - 1 if param.padding_type is PaddingType.SAME else 0
        shapes.append((span, stride, pad))
    return tuple(shapes)


def _labels(
    ndim: int, fmt: OperatorFormat, grouped: bool, kept: Sequence[int] = ()
) -> tuple[Labels, Labels, Labels]:
    """Labels of x, w and b; the output's labels are its dim indices (which x's spatial dims
    in ``kept`` share: their shards stay, see ``local_window_dims``)."""
    out_channel = channel_dim(ndim, fmt)
    x = list(identity(ndim))
    h, w = spatial_dims(ndim, fmt)
    x[h], x[w] = (h if h in kept else _H), (w if w in kept else _W)
    x[out_channel] = out_channel if grouped else _K
    return tuple(x), (out_channel, _K, _KH, _KW), (out_channel,)


def _check_groups(
    name: str, sig: Signature, inputs: tuple[Operand, ...], inference: Inference, param: ConvParam
) -> None:
    """Every device must hold whole groups of x's channels and the same groups of w's."""
    x, w = inputs[0], inputs[1]
    cx = channel_dim(x.ndim, param.format)
    px, pw = inference.input_placement(0, x), inference.input_placement(1, w)
    if not any(isinstance(p, Shard) and p.dim == cx for p in px):
        return
    per_in, per_out = x.shape[cx] // param.group, w.shape[0] // param.group
    for coord in itertools.product(*map(range, x.mesh.shape)):
        held_x = _channels(x.shape, x.mesh.shape, px, coord, cx, per_in)
        if held_x is None or held_x != _channels(w.shape, w.mesh.shape, pw, coord, 0, per_out):
            raise reject_groups(name, sig, inputs, param.group, coord)


def _channels(
    shape: tuple[int, ...],
    mesh_shape: tuple[int, ...],
    placements: tuple[Placement, ...],
    coord: tuple[int, ...],
    dim: int,
    per_group: int,
) -> tuple[int, int] | None:
    """(first group, group count) of the channels one device holds; None if not whole groups."""
    local, offset = local_shape_and_offset(shape, mesh_shape, placements, coord)
    if local[dim] % per_group or offset[dim] % per_group:
        return None
    return offset[dim] // per_group if local[dim] else 0, local[dim] // per_group


def reject_groups(
    name: str, sig: Signature, inputs: tuple[Operand, ...], groups: int, coord: tuple[int, ...]
) -> Exception:
    """The PlacementError of channel shards that split a group (or pair different groups)."""
    detail = (
        f"with groups={groups} every device must hold whole groups of the input's channels and "
        f"the same groups of the weight's out-channels, and the device at mesh coordinate "
        f"{coord} does not; shard the channels over a device count that divides the groups, "
        f"or redistribute them to Replicate"
    )
    return reject(name, sig, inputs, detail)


RULES: dict[OpKind, Rule] = {OpKind.Conv: conv_rule}
