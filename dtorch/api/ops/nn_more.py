"""More per-channel operators of ``torch.nn.functional``: ``pixel_shuffle``,
``pixel_unshuffle``, ``prelu``, ``instance_norm``, ``dropout1d``, ``dropout2d`` and
``dropout3d``, compositions of dtorch's operators; ``adaptive_max_pool1d`` and
``adaptive_max_pool2d``, the Pooling operator's ADAPTIVE_MAX kind (torch's own function on
every device's whole planes).

Placements follow the parts. ``pixel_shuffle``/``pixel_unshuffle`` are a reshape, a permute
and a reshape: leading (batch) dims shard freely, a sharded channel dim stays sharded where
its shards hold whole groups of ``factor ** 2`` channels; other layouts are refused by the
reshape (naming the operator). The adaptive max pools keep batch and channel shards and
refuse a sharded spatial dim (its windows follow the whole size) and Partial (not linear).
``prelu`` and the channel dropouts are elementwise: any shard stays; Partial is refused (not
linear). ``instance_norm`` keeps every shard: statistics over
a sharded spatial dim are summed across the mesh first, as ``batch_norm``'s are.

The channel dropouts match torch bit for bit (``torch.manual_seed(s)`` then torch's
function): torch draws one Bernoulli mask of shape (N, C, 1, ...) scaled by ``1 / (1 - p)``
and multiplies; here that mask is ``dropout`` of ones of that shape (``dropout``'s own exact
draws, see ``dtorch.api.ops.dropout``), times the input.

Example:
    >>> import dtorch
    >>> import dtorch.nn.functional as F
    >>> F.pixel_shuffle(dtorch.arange(4.0).view(1, 4, 1, 1), 2).tolist()
    [[[[0.0, 1.0], [2.0, 3.0]]]]
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from dtorch.api.dims import as_flag, as_int
from dtorch.api.ops.conv import int_pair
from dtorch.api.ops.convert import written
from dtorch.api.ops.dropout import dropout, probability
from dtorch.api.ops.masked import select
from dtorch.api.ops.scalars import as_real
from dtorch.api.ops.spatial import pooling_param
from dtorch.api.ops.spatial_1d import int_one
from dtorch.api.record import composite, record, record_one, tensor_arg, with_inputs
from dtorch.api.redistribute import sum_partials
from dtorch.errors import DtypeError, ParamError, ShapeError, UnsupportedDtypeError
from dtorch.ir.opkind import PoolKind
from dtorch.ir.rules.promotion import function_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


# --- pixel shuffles -----------------------------------------------------------------------------
def _factor(name: str, what: str, value: Any) -> int:
    factor = as_int(name, what, value)
    if factor <= 0:
        raise ParamError(f"{name} expects a positive {what}, but got {factor}")
    return factor


def _check_image(name: str, input: Any) -> None:
    tensor_arg(name, input)
    if input.ndim < 3:
        raise ShapeError(f"{name} expects input to have at least 3 dimensions, but got input "
                         f"with {input.ndim} dimension(s)")  # fmt: skip


@composite()
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``torch.nn.functional.pixel_shuffle``: (*, C * r ** 2, H, W) to (*, C, H * r, W * r).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.pixel_shuffle(dtorch.ones(2, 8, 3, 3), 2).shape
        torch.Size([2, 2, 6, 6])
    """
    _check_image("pixel_shuffle", input)
    r = _factor("pixel_shuffle", "upscale_factor", upscale_factor)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ShapeError(
            f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the "
            f"square of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}"
        )
    n = len(lead)
    split = input.reshape((*lead, c // (r * r), r, r, h, w))
    moved = split.permute((*range(n), n, n + 3, n + 1, n + 4, n + 2))
    return moved.reshape((*lead, c // (r * r), h * r, w * r))


@composite()
def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``torch.nn.functional.pixel_unshuffle``: (*, C, H * r, W * r) to (*, C * r ** 2, H, W).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.pixel_unshuffle(dtorch.ones(2, 2, 6, 6), 2).shape
        torch.Size([2, 8, 3, 3])
    """
    _check_image("pixel_unshuffle", input)
    r = _factor("pixel_unshuffle", "downscale_factor", downscale_factor)
    *lead, c, h, w = input.shape
    for label, size, d in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise ShapeError(f"pixel_unshuffle expects {label} to be divisible by "
                             f"downscale_factor, but input.size({d})={size} is not divisible by "
                             f"{r}")  # fmt: skip
    n = len(lead)
    split = input.reshape((*lead, c, h // r, r, w // r, r))
    moved = split.permute((*range(n), n, n + 2, n + 4, n + 1, n + 3))
    return moved.reshape((*lead, c * r * r, h // r, w // r))


# --- prelu --------------------------------------------------------------------------------------
def _prelu_probe(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.prelu(a, w)


def _check_prelu(input: Tensor, weight: Tensor) -> None:
    # torch's checks: a 0-d or 1-D weight of 1 or C (input.size(1)) numbers, input's dtype
    if weight.ndim > 1:
        raise ShapeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                         f"ndim = {weight.ndim}")  # fmt: skip
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() != 1 and weight.numel() != channels:
        raise ShapeError(
            f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
            f"{weight.numel()} and channel size = {channels}."
        )
    if weight.dtype != input.dtype:
        raise DtypeError(f"prelu: Type promoting not supported. Got "
                         f"{_type_name(input.dtype)} and {_type_name(weight.dtype)}")  # fmt: skip


def _type_name(dtype: torch.dtype) -> str:
    return torch.empty((), dtype=dtype).type().split(".")[-1].replace("Tensor", "")


@composite()
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``torch.nn.functional.prelu``: ``input`` where positive, else ``weight * input``, one
    weight for all or one per channel (dim 1).

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[-2.0, 3.0]])
        >>> dtorch.nn.functional.prelu(x, dtorch.tensor([0.5, 0.25])).tolist()
        [[-1.0, 3.0]]
    """
    tensor_arg("prelu", input)
    tensor_arg("prelu", weight, "weight")
    _check_prelu(input, weight)
    function_dtype("prelu", _prelu_probe, ((input.dtype, False), (weight.dtype, False)))
    if weight.numel() == 1:
        slope = weight.reshape(())
    else:  # one per channel, broadcast over the dims after it
        slope = weight.reshape((weight.numel(), *[1] * (input.ndim - 2)))
    return select("prelu", input > 0, input, slope * input)


# --- instance norm ------------------------------------------------------------------------------
def _per_channel(v: Tensor, x: Tensor) -> Tensor:
    # a (C,) vector as (C, 1, ...): broadcast over the spatial dims, in x's dtype
    return v.reshape((x.shape[1], *[1] * (x.ndim - 2))).to(x.dtype)


def _instance_stats(
    x: Tensor, running_mean: Tensor | None, running_var: Tensor | None, momentum: float
) -> tuple[Tensor, Tensor]:
    """Mean and biased variance of every (n, c) plane, kept (N, C, 1, ...), the running ones
    (if given) updated; a refusal of a single-value plane as torch's."""
    count = math.prod(x.shape[2:])
    if count == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"{list(x.shape)}")  # fmt: skip
    dims = tuple(range(2, x.ndim))
    mean = sum_partials(x.mean(dims, keepdim=True))  # a sharded spatial dim: summed here
    centered = x - mean
    var = sum_partials((centered * centered).mean(dims, keepdim=True))
    flat = (x.shape[0], x.shape[1])
    if running_mean is not None:
        _update_running(running_mean, mean.reshape(flat), momentum)
    if running_var is not None:  # torch's running variance is the unbiased one
        _update_running(running_var, var.reshape(flat) * (count / (count - 1)), momentum)
    return mean, var


def _update_running(running: Tensor, batch: Tensor, momentum: float) -> None:
    """``running`` (C,) moved towards the batch's mean over N of ``batch`` (N, C), in place."""
    new = running * (1 - momentum) + sum_partials(batch.mean(0)) * momentum
    if list(new.placements) != list(running.placements):
        new = new.redistribute(placements=list(running.placements))
    running.copy_(new.to(running.dtype))


@composite()
def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """``torch.nn.functional.instance_norm`` of an (N, C, *) input: each (n, c) plane
    normalized by its own mean and biased variance (``use_input_stats``; the running ones,
    given, are updated in place with the batch's mean of them, unbiased variance), else by
    ``running_mean``/``running_var``; then ``* weight + bias`` per channel.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[[1.0, 3.0]]])
        >>> dtorch.nn.functional.instance_norm(x, eps=0.0).tolist()
        [[[-1.0, 1.0]]]
    """
    tensor_arg("instance_norm", input)
    eps_ = as_real("instance_norm: eps", eps)
    if input.ndim < 2:
        raise ShapeError(f"instance_norm: needs an (N, C, *) input; got shape {list(input.shape)}")
    if not input.dtype.is_floating_point:  # torch's kernel is batch_norm's: floating only
        raise UnsupportedDtypeError(f'instance_norm: "batch_norm" not implemented for '
                                    f"{input.dtype}; accepted: floating dtypes")  # fmt: skip
    if (running_mean is None) != (running_var is None):
        raise ParamError("instance_norm: running_mean and running_var must either both be None "
                         "or neither be None")  # fmt: skip
    if as_flag(use_input_stats, "instance_norm", "use_input_stats"):
        m = as_real("instance_norm: momentum", momentum)
        mean, var = _instance_stats(input, running_mean, running_var, m)
    elif running_mean is None or running_var is None:
        raise ParamError("Expected running_mean and running_var to be defined when "
                         "use_input_stats is false")  # fmt: skip
    else:
        mean, var = _per_channel(running_mean, input), _per_channel(running_var, input)
    out = (input - mean) * (var + eps_).rsqrt()
    out = out if weight is None else out * _per_channel(weight, input)
    return out if bias is None else out + _per_channel(bias, input)


# --- adaptive max pools -------------------------------------------------------------------------
def _adaptive_sizes(name: str, x: Tensor, output_size: Any) -> tuple[int, int]:
    """(H, W) of the output: an int for both, or two (None keeps the input's size)."""
    one = isinstance(output_size, (int, np.integer)) or output_size is None
    sizes = [output_size] * 2 if one else list(output_size)
    if len(sizes) != 2:
        raise ParamError(f"{name}: output_size must be an int or two; got {output_size!r}")
    sizes = [x.shape[x.ndim - 2 + i] if s is None else s for i, s in enumerate(sizes)]
    return int_pair(name, "output_size", sizes, low=0)


def _adaptive_max(name: str, x: Tensor, size: tuple[int, int], indices: bool) -> Any:
    param = pooling_param(PoolKind.ADAPTIVE_MAX, output_size=size, return_indices=indices)
    if indices:
        values, where = record(name, param, (x,))
        return values, where
    return record_one(name, param, (x,))


@with_inputs
def adaptive_max_pool2d(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    """``torch.nn.functional.adaptive_max_pool2d`` of a (N, C, H, W) or (C, H, W) input (None
    in ``output_size`` keeps that size); with ``return_indices`` also the int64 index of every
    maximum in its (H, W) plane. Batch and channel shards stay; H and W must be whole.

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(16.0).view(1, 4, 4)
        >>> dtorch.nn.functional.adaptive_max_pool2d(x, 2).tolist()
        [[[5.0, 7.0], [13.0, 15.0]]]
    """
    name = "adaptive_max_pool2d"
    tensor_arg(name, input)
    if input.ndim not in (3, 4):
        raise ShapeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: "
                         f"{list(input.shape)}")  # fmt: skip
    size = _adaptive_sizes(name, input, output_size)
    return _adaptive_max(name, input, size, bool(return_indices))


@with_inputs
def adaptive_max_pool1d(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    """``torch.nn.functional.adaptive_max_pool1d`` of a (N, C, L) or (C, L) input: the 2-D
    operator on an image of height one. Batch and channel shards stay; L must be whole.

    Example:
        >>> import dtorch
        >>> out, idx = dtorch.nn.functional.adaptive_max_pool1d(
        ...     dtorch.tensor([[1.0, 4.0, 2.0]]), 1, return_indices=True)
        >>> out.tolist(), idx.tolist()
        ([[4.0]], [[1]])
    """
    name = "adaptive_max_pool1d"
    tensor_arg(name, input)
    if input.ndim not in (2, 3):
        raise ShapeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor "
                         f"for argument #1 'self' (while checking arguments for "
                         f"adaptive_max_pool1d)")  # fmt: skip
    length = int_one(name, "output_size", output_size, low=0)
    out = _adaptive_max(name, input.unsqueeze(-2), (1, length), bool(return_indices))
    if isinstance(out, tuple):
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


# --- channel dropouts ---------------------------------------------------------------------------
_DIMS = {"dropout1d": (2, 3), "dropout2d": (3, 4), "dropout3d": (4, 5)}


def _channel_dropout(
    name: str, input: Tensor, p: float, training: bool, inplace: bool, batched: bool
) -> Tensor:
    """``input`` times a mask of shape (N, C, 1, ...) (``batched``; else (C, 1, ...)): ones
    dropped as ``dropout`` drops them, torch's feature noise bit for bit."""
    p = probability(name, p)
    tensor_arg(name, input)
    if not as_flag(training, name, "training") or p == 0.0 or input.numel() == 0:
        return input
    lead = 2 if batched else 1
    shape = (*input.shape[:lead], *[1] * (input.ndim - lead))
    mask = dropout(input.new_ones(shape), p)
    return written(input, lambda: input * mask, as_flag(inplace, name, "inplace"))


def _check_dims(name: str, input: Any) -> None:
    tensor_arg(name, input)
    low, high = _DIMS[name]
    if input.ndim not in (low, high):
        raise ShapeError(
            f"{name}: Expected {low}D or {high}D input, but received a {input.ndim}D input. "
            f"Note that {name} exists to provide channel-wise dropout on inputs with "
            f"{low - 1} spatial dimension{'s' if low > 2 else ''}, a channel dimension, and an "
            f"optional batch dimension (i.e. {low}D or {high}D inputs)."
        )


def dropout1d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """``torch.nn.functional.dropout1d``: whole channels of an (N, C, L) or (C, L) input
    zeroed with probability ``p``, the others scaled by ``1 / (1 - p)`` (torch's draws).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.dropout1d(dtorch.ones(2, 3), 1.0).tolist()
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """
    _check_dims("dropout1d", input)
    return _channel_dropout("dropout1d", input, p, training, inplace, input.ndim == 3)


def dropout2d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """``torch.nn.functional.dropout2d``: whole channels of an (N, C, H, W) input zeroed with
    probability ``p`` (a 3-D input is taken as (N, C, L), with torch's warning).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.dropout2d(dtorch.ones(1, 2, 2, 2), 0.0).sum().item()
        8.0
    """
    tensor_arg("dropout2d", input)
    if input.ndim not in (3, 4):
        warnings.warn(_DROPOUT2D_NDIM.format(input.ndim), stacklevel=2)
    if input.ndim == 3:
        warnings.warn(_DROPOUT2D_3D, stacklevel=2)
    if input.ndim < 2:  # torch's feature noise needs a channel dim
        raise ShapeError("Feature dropout requires at least 2 dimensions in the input")
    return _channel_dropout("dropout2d", input, p, training, inplace, True)


def dropout3d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """``torch.nn.functional.dropout3d``: whole channels of an (N, C, D, H, W) or (C, D, H, W)
    input zeroed with probability ``p``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.dropout3d(dtorch.ones(1, 2, 1, 1, 1), 1.0).sum().item()
        0.0
    """
    tensor_arg("dropout3d", input)
    if input.ndim not in (4, 5):
        warnings.warn(_DROPOUT3D_NDIM.format(input.ndim), stacklevel=2)
    if input.ndim < 1:  # unsqueezed, as torch's: still under the 2 dims its noise needs
        raise ShapeError("Feature dropout requires at least 2 dimensions in the input")
    return _channel_dropout("dropout3d", input, p, training, inplace, input.ndim == 5)


_DROPOUT2D_NDIM = (
    "dropout2d: Received a {}-D input to dropout2d, which is deprecated and will result in an "
    "error in a future release. To retain the behavior and silence this warning, please use "
    "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with "
    "2 spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
    "inputs)."
)
_DROPOUT2D_3D = (
    "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
    "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
    "This behavior will change in a future release to interpret the input as one without a "
    "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
    "please switch to using dropout1d instead."
)
_DROPOUT3D_NDIM = (
    "dropout3d: Received a {}-D input to dropout3d, which is deprecated and will result in an "
    "error in a future release. To retain the behavior and silence this warning, please use "
    "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with "
    "3 spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
    "inputs)."
)
