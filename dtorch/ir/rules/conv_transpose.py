"""Rules of ConvTranspose (``conv_transpose1d/2d/3d``) and Fold (``fold``, col2im): torch's
own functions on every device's shards.

ConvTranspose: ``x`` is (N, C_in, *spatial) or unbatched (C_in, *spatial), ``w`` is (C_in,
C_out / groups, *kernel), ``b`` is (C_out,). Labels: ``i`` the batch dim of ``x``, or the
out-channels of ``w`` (its dim 1) and of ``b``, which are the output's channels; ``k`` the
in-channels of ``x`` and ``w`` (dim 0). Per mesh dim, with ``groups == 1``:

=============  =====  ======================================================
x x w (x b)    out    why
=============  =====  ======================================================
R R (R)        R
S(N) R (R)     S(N)   each device transposes its images
R S(1) (R|S)   S(C)   each device makes its out-channels (a Replicate bias is chunked)
S(C) S(0) (R)  P      each device sums over its in-channels; the owner adds a bias
P R (R)        P      the transposed convolution is linear in its input
R P (R)        P      and in its weight (a Partial bias beside a Partial output too)
=============  =====  ======================================================

With ``groups > 1`` only the batch shards and the Partial rows. A sharded spatial dim of
``x`` (or kernel dim of ``w``) is refused: each output element reads a window of inputs
that would cross shard boundaries.

Fold: ``x`` is (N, C * prod(kernel), L) or (C * prod(kernel), L): a sharded batch stays
sharded, a Partial stays Partial (fold is a sum of the blocks: linear); the block and
location dims must be whole.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import ConvTransposeParam
    >>> from dtorch.ir.placement import Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> x = Operand(1, (2, 4, 5, 5), torch.float32, mesh, (Shard(1),))
    >>> w = Operand(2, (4, 6, 3, 3), torch.float32, mesh, (Shard(0),))
    >>> out = conv_transpose_rule("conv_transpose2d", ConvTransposeParam(strides=(2, 2)), (x, w))
    >>> out.outputs[0].shape, out.outputs[0].placements
    ((2, 6, 11, 11), (Partial(sum),))
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from dtorch.errors import DtypeError, ShapeError, UnsupportedDtypeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import ConvTransposeParam, FoldParam, OpParam
from dtorch.ir.rules.base import Inference, Rule, all_replicate, replicated
from dtorch.ir.rules.signature import Labels, identity, one_output, signature

_K, _CO = 10_000, 10_001  # contracted labels: in-channels; a grouped conv's out-channels
_WINDOW = 10_100  # the first of the spatial and kernel dims' labels (never shared)
_HINT = (
    "the spatial dims of the input and the kernel dims of the weight must be whole "
    "(redistribute them to Replicate first): each output element reads a window of inputs"
)
_LEGEND = "i: the batch dim of x or the out-channels of w (dim 1) and b; k: the in-channels"
_ONE = signature(
    "R R -> R", "Si R -> Si", "R Si -> Si", "Sk Sk -> P", "P R -> P", "R P -> P",
    legend=_LEGEND, hint=_HINT,
)  # fmt: skip
_ONE_BIAS = signature(
    "R R R -> R", "Si R R -> Si", "R Si R -> Si", "R Si Si -> Si", "R R Si -> Si",
    "Sk Sk R -> P", "P R R -> P", "R P R -> P", "Sk Sk P -> P", "P R P -> P", "R P P -> P",
    legend=_LEGEND, hint=_HINT,
)  # fmt: skip
_GROUPED = signature(
    "R R -> R", "Si R -> Si", "P R -> P", "R P -> P",
    legend="i: the batch dim of x (with groups > 1 the channels must be whole)", hint=_HINT,
)  # fmt: skip
_GROUPED_BIAS = signature(
    "R R R -> R", "Si R R -> Si", "P R R -> P", "R P R -> P", "P R P -> P", "R P P -> P",
    legend="i: the batch dim of x (with groups > 1 the channels must be whole)", hint=_HINT,
)  # fmt: skip
_SIGNATURES = {
    (False, 2): _ONE, (False, 3): _ONE_BIAS, (True, 2): _GROUPED, (True, 3): _GROUPED_BIAS,
}  # fmt: skip
_FOLD = signature(
    "R -> R", "Si -> Si", "P -> P", legend="i: the batch dim",
    hint="the block and location dims must be whole (redistribute them to Replicate first)",
)  # fmt: skip
_TRANSPOSED: dict[int, Callable[..., torch.Tensor]] = {
    1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d,
}  # fmt: skip


def run_conv_transpose(
    param: ConvTransposeParam, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None
) -> torch.Tensor:
    """torch's transposed convolution of ``param`` (local shards, or meta tensors)."""
    fn = _TRANSPOSED[len(param.strides)]
    how = (param.strides, param.pads, param.output_pads, param.group, param.dilations)
    return fn(x, w, b, *how)


def run_fold(param: FoldParam, x: torch.Tensor) -> torch.Tensor:
    """torch's ``fold`` of ``param`` (a local shard, or a meta tensor)."""
    return F.fold(x, param.output_size, param.kernel_size, param.dilation, param.padding,
                  param.stride)  # fmt: skip


@functools.cache
def _refusal(kind: type, spatial: int, dtypes: tuple[torch.dtype, ...]) -> tuple[str, bool]:
    """torch's message when its CPU kernel refuses ``dtypes`` ('' if it takes them), and
    whether it said "not implemented" (no kernel for the dtype)."""
    try:
        if kind is FoldParam:
            run_fold(FoldParam(), torch.ones(1, 1, 1, dtype=dtypes[0]))
        else:
            ones = [torch.ones((1,) * (2 + spatial), dtype=d) for d in dtypes[:2]]
            bias = torch.ones(1, dtype=dtypes[2]) if len(dtypes) > 2 else None
            ones_, zeros_ = (1,) * spatial, (0,) * spatial
            param = ConvTransposeParam(ones_, zeros_, zeros_, ones_)
            run_conv_transpose(param, ones[0], ones[1], bias)
    except (RuntimeError, TypeError) as error:
        return str(error).strip().split("\n", 1)[0], isinstance(error, NotImplementedError)
    return "", False


def _check_dtypes(name: str, kind: type, spatial: int, inputs: tuple[Operand, ...]) -> None:
    message, missing = _refusal(kind, spatial, tuple(o.dtype for o in inputs))
    if message:
        error = UnsupportedDtypeError if missing else DtypeError
        raise error(f"{name}: {message}; accepted: one floating dtype for every input")


def _meta_shape(name: str, call: Callable[[], torch.Tensor]) -> tuple[int, ...]:
    """The output's shape from torch on meta tensors (its own shape checks)."""
    try:
        return tuple(call().shape)
    except (RuntimeError, ValueError) as error:
        raise ShapeError(f"{name}: {str(error).strip()}") from None


def _probe(param: ConvTransposeParam, inputs: tuple[Operand, ...]) -> torch.Tensor:
    """torch's output for these shapes, from its meta kernel; where that refuses an empty
    output (as torch's CPU kernel does on one thread, not on several), an empty output."""
    metas = [torch.empty(o.shape, dtype=o.dtype, device="meta") for o in inputs]
    try:
        return run_conv_transpose(param, metas[0], metas[1], metas[2] if metas[2:] else None)
    except RuntimeError:
        x, w = inputs[0], inputs[1]
        spatial = len(param.strides)
        how = zip(x.shape[-spatial:], w.shape[2:], param.strides, param.pads,
                  param.output_pads, param.dilations, strict=True)  # fmt: skip
        sizes = [(n - 1) * s - 2 * p + d * (k - 1) + o + 1 for n, k, s, p, o, d in how]
        if min(sizes) != 0:
            raise
        lead = x.shape[: -1 - spatial]
        return torch.empty((*lead, w.shape[1] * param.group, *sizes), device="meta")


def conv_transpose_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``conv_transpose{n}d``: torch's shape and dtype; placements from the module's table."""
    assert isinstance(param, ConvTransposeParam)
    x = inputs[0]
    spatial = len(param.strides)
    _check_dtypes(name, ConvTransposeParam, spatial, inputs)
    shape = _meta_shape(name, lambda: _probe(param, inputs))
    if all_replicate(inputs):
        return replicated(shape, x.dtype, len(x.placements))
    sig = _SIGNATURES[param.group > 1, len(inputs)]
    batched = x.ndim == spatial + 2
    out_channel = 1 if batched else 0
    channel = _CO if param.group > 1 else out_channel
    window = tuple(range(_WINDOW, _WINDOW + 2 * spatial))
    x_labels: Labels = ((0,) if batched else ()) + (_K, *window[:spatial])
    labels = (x_labels, (_K, channel, *window[spatial:]), (channel,))[: len(inputs)]
    return one_output(name, sig, inputs, labels, identity(len(shape)), shape, x.dtype)


def fold_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``fold``: torch's shape and dtype; a sharded batch or a Partial kept."""
    assert isinstance(param, FoldParam)
    (x,) = inputs
    _check_dtypes(name, FoldParam, 2, inputs)
    meta = torch.empty(x.shape, dtype=x.dtype, device="meta")
    shape = _meta_shape(name, lambda: run_fold(param, meta))
    if all_replicate(inputs):
        return replicated(shape, x.dtype, len(x.placements))
    batched = x.ndim == 3
    x_labels: Labels = ((0,) if batched else ()) + (_WINDOW, _WINDOW + 1)
    return one_output(name, _FOLD, inputs, (x_labels,), identity(len(shape)), shape, x.dtype)


RULES: dict[OpKind, Rule] = {
    OpKind.ConvTranspose: conv_transpose_rule,
    OpKind.Fold: fold_rule,
}
