"""Miscellaneous forms of ``torch.nn.functional``, compositions of dtorch's operators: the
in-place activations (``relu_``, ``elu_``, ``leaky_relu_``, ``hardtanh_``, ``selu_``,
``celu_``, ``threshold_``), ``rrelu``/``rrelu_``, ``alpha_dropout``,
``feature_alpha_dropout``, the ``*_with_indices`` pooling aliases, ``upsample``,
``upsample_nearest``, ``upsample_bilinear``, ``channel_shuffle``, ``bilinear`` and ``pdist``.

Placements follow the parts. The activations and dropouts are elementwise: any shard stays,
Partial is refused (not linear). ``channel_shuffle`` is a reshape, a transpose and a reshape:
batch and spatial shards stay, a sharded channel dim is refused by the reshape (naming the
operator) unless its shards hold whole groups. ``bilinear``'s batch dims shard freely (a
sharded feature dim of an input gives a Partial sum, as ``matmul``'s). ``pdist`` gathers a
row-sharded input first (every pair of rows meets) and holds an (N, N, M) difference.

``rrelu`` in eval mode is ``leaky_relu`` with the mean slope ``(lower + upper) / 2``, as
torch's. In training mode torch draws one uniform slope per non-positive element, in order:
the number of draws depends on the values, so ``rrelu(..., training=True)`` waits for the
input, runs torch's own function on the full tensor (torch's default generator, bit for bit)
and returns it with the input's shards (Replicate where the input is Partial).

The alpha dropouts match torch bit for bit (``torch.manual_seed(s)`` then torch's function):
torch draws a Bernoulli ``keep`` mask as ``dropout`` draws its mask (of the input's shape, or
(N, C, 1, ...) for the feature form) and returns ``input * (keep * a) + b`` with ``a``, ``b``
from ``p`` and SELU's alpha; the mask here is ``dropout`` of ones (its exact draws).

Example:
    >>> import dtorch
    >>> import dtorch.nn.functional as F
    >>> F.channel_shuffle(dtorch.arange(4.0).view(1, 4, 1), 2).flatten().tolist()
    [0.0, 2.0, 1.0, 3.0]
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from dtorch.api.create import beside
from dtorch.api.dims import as_flag
from dtorch.api.ops.activations import elu, hardtanh, leaky_relu
from dtorch.api.ops.activations_more import celu, selu, threshold
from dtorch.api.ops.convert import activated, written
from dtorch.api.ops.dropout import dropout, probability
from dtorch.api.ops.linalg import matmul
from dtorch.api.ops.nn_more import adaptive_max_pool1d, adaptive_max_pool2d
from dtorch.api.ops.scalars import as_real
from dtorch.api.ops.spatial import interpolate, max_pool2d
from dtorch.api.ops.spatial_1d import max_pool1d
from dtorch.api.ops.statistics import norm
from dtorch.api.ops.volumetric import adaptive_max_pool3d, max_pool3d
from dtorch.api.record import composite, tensor_arg
from dtorch.errors import DtypeError, ParamError, ShapeError, UnsupportedDtypeError
from dtorch.ir.opkind import ActivationKind
from dtorch.ir.params import ActivationParam
from dtorch.ir.placement import Replicate, Shard
from dtorch.ir.rules.promotion import function_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_SELU_ALPHA = 1.7580993408473766  # ATen's alpha_dropout: -selu's scale * alpha
_RELU = ActivationParam(ActivationKind.RELU)


# --- in-place activations -----------------------------------------------------------------------
@composite()
def relu_(input: Tensor) -> Tensor:
    """``torch.nn.functional.relu_``: ``relu`` written into ``input``, which is returned.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([-1.0, 2.0])
        >>> dtorch.nn.functional.relu_(t) is t, t.tolist()
        (True, [0.0, 2.0])
    """
    tensor_arg("relu_", input)
    return activated("relu_", _RELU, input, True)


@composite()
def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``torch.nn.functional.elu_``: ``elu`` in place.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.elu_(dtorch.tensor([0.0, 2.0])).tolist()
        [0.0, 2.0]
    """
    return elu(input, alpha, inplace=True)


@composite()
def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``torch.nn.functional.leaky_relu_``: ``leaky_relu`` in place.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.leaky_relu_(dtorch.tensor([-2.0, 2.0]), 0.5).tolist()
        [-1.0, 2.0]
    """
    return leaky_relu(input, negative_slope, inplace=True)


@composite()
def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """``torch.nn.functional.hardtanh_``: ``hardtanh`` in place.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.hardtanh_(dtorch.tensor([-2.0, 0.5, 2.0])).tolist()
        [-1.0, 0.5, 1.0]
    """
    return hardtanh(input, min_val, max_val, inplace=True)


@composite()
def selu_(input: Tensor) -> Tensor:
    """``torch.nn.functional.selu_``: ``selu`` in place.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.selu_(dtorch.tensor([0.0])).tolist()
        [0.0]
    """
    return selu(input, inplace=True)


@composite()
def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``torch.nn.functional.celu_``: ``celu`` in place.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.celu_(dtorch.tensor([0.0, 1.0])).tolist()
        [0.0, 1.0]
    """
    return celu(input, alpha, inplace=True)


@composite()
def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """``torch.nn.functional.threshold_``: ``threshold`` in place.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.threshold_(dtorch.tensor([0.5, 2.0]), 1.0, -1.0).tolist()
        [-1.0, 2.0]
    """
    return _threshold(input, threshold, value, inplace=True)


_threshold = threshold  # the function, shadowed by threshold_'s parameter of that name


# --- rrelu --------------------------------------------------------------------------------------
@composite()
def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    inplace: bool = False,
) -> Tensor:
    """``torch.nn.functional.rrelu``: in eval mode ``leaky_relu`` with slope ``(lower +
    upper) / 2``; in training mode one random slope in [lower, upper] per non-positive
    element, drawn by torch's own function from its default generator: that mode waits for
    the input (see the module docstring).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.rrelu(dtorch.tensor([-3.0, 1.0]), 0.5, 1.5).tolist()
        [-3.0, 1.0]
    """
    tensor_arg("rrelu", input)
    low, high = as_real("rrelu: lower", lower), as_real("rrelu: upper", upper)
    if low > high:  # ATen's check, in either mode
        raise ParamError(f"rrelu: Lower bound should be less than or equal to the upper bound; "
                         f"got lower={low}, upper={high}")  # fmt: skip
    inplace = as_flag(inplace, "rrelu", "inplace")
    if not as_flag(training, "rrelu", "training"):
        return leaky_relu(input, (low + high) / 2, inplace)
    return written(input, lambda: _drawn_rrelu(input, low, high), inplace)


@composite()
def rrelu_(
    input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False
) -> Tensor:
    """``torch.nn.functional.rrelu_``: ``rrelu`` in place.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.rrelu_(dtorch.tensor([-2.0]), 0.5, 0.5).tolist()
        [-1.0]
    """
    return rrelu(input, lower, upper, training, inplace=True)


def _drawn_rrelu(input: Tensor, lower: float, upper: float) -> Tensor:
    # the draws follow the values: torch's function on the fetched tensor, then re-sharded
    if not input.dtype.is_floating_point:
        raise UnsupportedDtypeError(f"rrelu: training mode takes a floating point input; got "
                                    f"{input.dtype}")  # fmt: skip
    out = beside(input, F.rrelu(input.to_torch(), lower, upper, training=True))
    keep = [p if isinstance(p, Shard) else Replicate() for p in input.placements]
    return out.redistribute(placements=keep)


# --- alpha dropouts -----------------------------------------------------------------------------
def _alpha_dropout(name: str, input: Tensor, p: float, training: bool, inplace: bool) -> Tensor:
    """ATen's alpha dropout of ``input`` (``name`` says whether per feature map)."""
    p = probability(name, p)
    tensor_arg(name, input)
    feature = name == "feature_alpha_dropout"
    if not as_flag(training, name, "training") or p == 0.0 or input.numel() == 0:
        return input  # before the rank check, as torch's (which checks only when it draws)
    if feature and input.ndim < 2:
        raise ShapeError("Feature dropout requires at least 2 dimensions in the input")
    inplace = as_flag(inplace, name, "inplace")
    if p == 1.0:  # torch's: input times a zero, no draws
        return written(input, lambda: input * 0, inplace)
    return written(input, lambda: _alpha_noise(input, p, feature), inplace)


def _alpha_noise(input: Tensor, p: float, feature: bool) -> Tensor:
    # ATen's steps, in its order (b from the 0/1 mask, then the mask scaled by a)
    shape = (*input.shape[:2], *[1] * (input.ndim - 2)) if feature else tuple(input.shape)
    keep = (dropout(input.new_ones(shape), p) != 0).to(input.dtype)
    a = 1.0 / math.sqrt((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p))
    b = (keep + -1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
    return input * (keep * a) + b


@composite()
def alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """``torch.nn.functional.alpha_dropout``: dropout that keeps SELU's mean and variance
    (torch's draws, bit for bit); the input itself when not ``training``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.alpha_dropout(dtorch.ones(2), 0.5).tolist()
        [1.0, 1.0]
    """
    return _alpha_dropout("alpha_dropout", input, p, training, inplace)


@composite()
def feature_alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """``torch.nn.functional.feature_alpha_dropout``: ``alpha_dropout`` of whole channels
    (one draw per (n, c)).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.feature_alpha_dropout(dtorch.ones(1, 2), 0.5).tolist()
        [[1.0, 1.0]]
    """
    return _alpha_dropout("feature_alpha_dropout", input, p, training, inplace)


# --- pooling aliases ----------------------------------------------------------------------------
@composite()
def max_pool1d_with_indices(
    input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
    ceil_mode: bool = False, return_indices: bool = False,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """``torch.nn.functional.max_pool1d_with_indices``: ``max_pool1d`` with its indices
    (whatever ``return_indices`` says, as torch's).

    Example:
        >>> import dtorch
        >>> out, idx = dtorch.nn.functional.max_pool1d_with_indices(dtorch.tensor([[1.0, 3.0]]), 2)
        >>> out.tolist(), idx.tolist()
        ([[3.0]], [[1]])
    """
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)  # type: ignore[return-value]


@composite()
def max_pool2d_with_indices(
    input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
    ceil_mode: bool = False, return_indices: bool = False,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """``torch.nn.functional.max_pool2d_with_indices``: ``max_pool2d`` with its indices.

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(4.0).view(1, 2, 2)
        >>> dtorch.nn.functional.max_pool2d_with_indices(x, 2)[1].tolist()
        [[[3]]]
    """
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)  # type: ignore[return-value]


@composite()
def adaptive_max_pool1d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> tuple[Tensor, Tensor]:
    """``torch.nn.functional.adaptive_max_pool1d_with_indices``: with its indices.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[1.0, 4.0, 2.0]])
        >>> dtorch.nn.functional.adaptive_max_pool1d_with_indices(x, 1)[1].tolist()
        [[1]]
    """
    return adaptive_max_pool1d(input, output_size, True)  # type: ignore[return-value]


@composite()
def adaptive_max_pool2d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> tuple[Tensor, Tensor]:
    """``torch.nn.functional.adaptive_max_pool2d_with_indices``: with its indices.

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(4.0).view(1, 2, 2)
        >>> dtorch.nn.functional.adaptive_max_pool2d_with_indices(x, 1)[1].tolist()
        [[[3]]]
    """
    return adaptive_max_pool2d(input, output_size, True)  # type: ignore[return-value]


@composite()
def max_pool3d_with_indices(
    input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
    ceil_mode: bool = False, return_indices: bool = False,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """``torch.nn.functional.max_pool3d_with_indices``: ``max_pool3d`` with its indices
    (torch's ``max_pool3d(..., return_indices=True)`` calls it).

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(8.0).view(1, 2, 2, 2)
        >>> dtorch.nn.functional.max_pool3d_with_indices(x, 2)[1].tolist()
        [[[[7]]]]
    """
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)  # type: ignore[return-value]


@composite()
def adaptive_max_pool3d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> tuple[Tensor, Tensor]:
    """``torch.nn.functional.adaptive_max_pool3d_with_indices``: with its indices.

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(8.0).view(1, 2, 2, 2)
        >>> dtorch.nn.functional.adaptive_max_pool3d_with_indices(x, 1)[1].tolist()
        [[[[7]]]]
    """
    return adaptive_max_pool3d(input, output_size, True)  # type: ignore[return-value]


# --- upsampling ---------------------------------------------------------------------------------
def _deprecated(name: str) -> None:
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` "
                  f"instead.", stacklevel=3)  # fmt: skip


def upsample(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
) -> Tensor:
    """``torch.nn.functional.upsample`` (deprecated, with torch's warning): ``interpolate``.

    Example:
        >>> import warnings, dtorch
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     dtorch.nn.functional.upsample(dtorch.ones(1, 1, 2), scale_factor=2).shape
        torch.Size([1, 1, 4])
    """
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """``torch.nn.functional.upsample_nearest`` (deprecated): ``interpolate``, nearest.

    Example:
        >>> import warnings, dtorch
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     dtorch.nn.functional.upsample_nearest(dtorch.ones(1, 1, 2), 3).shape
        torch.Size([1, 1, 3])
    """
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """``torch.nn.functional.upsample_bilinear`` (deprecated): ``interpolate``, bilinear
    with ``align_corners=True``.

    Example:
        >>> import warnings, dtorch
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     x = dtorch.tensor([[[[0.0, 2.0]]]])
        ...     dtorch.nn.functional.upsample_bilinear(x, (1, 3)).flatten().tolist()
        [0.0, 1.0, 2.0]
    """
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# --- channel shuffle ----------------------------------------------------------------------------
@composite()
def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """``torch.nn.functional.channel_shuffle``: the C channels of (N, C, *) taken as
    ``groups`` rows of C / groups and read column by column.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.channel_shuffle(dtorch.ones(2, 6, 3), 3).shape
        torch.Size([2, 6, 3])
    """
    tensor_arg("channel_shuffle", input)
    if input.ndim < 3:
        raise ShapeError(f"channel_shuffle expects input to have at least 3 dimensions, but got "
                         f"input with {input.ndim} dimension(s)")  # fmt: skip
    g = _positive_int("channel_shuffle", "groups", groups)
    n, c, *rest = input.shape
    if c % g:
        raise ShapeError(f"Number of channels must be divisible by groups. Got {c} channels "
                         f"and {g} groups.")  # fmt: skip
    split = input.reshape((n, g, c // g, *rest))
    return split.transpose(1, 2).reshape(tuple(input.shape))


def _positive_int(name: str, what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: {what} must be an int; got {type(value).__name__}")
    if value <= 0:
        raise ParamError(f"Number of groups to divide channels in must be positive. Value of "
                         f"{what}:{value}")  # fmt: skip
    return value


# --- bilinear -----------------------------------------------------------------------------------
def _bilinear_probe(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # one-element probes, shaped as bilinear takes them
    return F.bilinear(a.reshape(1, 1), b.reshape(1, 1), w.reshape(1, 1, 1))


def _check_bilinear(x1: Tensor, x2: Tensor, weight: Tensor, bias: Tensor | None) -> None:
    # torch's checks of _trilinear's operands, in its words
    if x1.ndim != x2.ndim:
        raise ShapeError(f"bilinear(): input dimensions do not match: got {x1.ndim} and "
                         f"{x2.ndim}")  # fmt: skip
    if x1.shape[:-1] != x2.shape[:-1]:
        raise ShapeError(f"bilinear(): input batch dimensions do not match: got "
                         f"{list(x1.shape)} and {list(x2.shape)}")  # fmt: skip
    if weight.ndim != 3 or x1.shape[-1] != weight.shape[1] or x2.shape[-1] != weight.shape[2]:
        raise ShapeError(f"bilinear(): weight of shape {list(weight.shape)} does not match "
                         f"input1 {list(x1.shape)} and input2 {list(x2.shape)}: expected "
                         f"(out, input1.size(-1), input2.size(-1))")  # fmt: skip
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != weight.shape[0]):
        raise ShapeError(f"bilinear(): bias size does not match weight size: got "
                         f"{list(bias.shape)} but weight.size(0) = {weight.shape[0]}")  # fmt: skip


@composite()
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``torch.nn.functional.bilinear``: ``y[..., o] = x1 @ weight[o] @ x2 + bias[o]``.

    Example:
        >>> import dtorch
        >>> x = dtorch.ones(2, 3)
        >>> dtorch.nn.functional.bilinear(x, dtorch.ones(2, 4), dtorch.ones(5, 3, 4)).shape
        torch.Size([2, 5])
    """
    for label, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        tensor_arg("bilinear", t, label)
    _check_bilinear(input1, input2, weight, bias)
    function_dtype("bilinear", _bilinear_probe,
                   tuple((t.dtype, False) for t in (input1, input2, weight)))  # fmt: skip
    out_f, in1, in2 = weight.shape
    flat = weight.permute((1, 0, 2)).reshape((in1, out_f * in2))  # x1 against every weight
    left = matmul(input1, flat).reshape((*input1.shape[:-1], out_f, in2))
    out = (left * input2.unsqueeze(-2)).sum(-1)
    return out if bias is None else out + bias


# --- pdist --------------------------------------------------------------------------------------
def _pdist_probe(a: torch.Tensor) -> torch.Tensor:
    return F.pdist(a.reshape(1, 1).expand(2, 1))  # two rows: one row never reaches the kernel


@composite()
def pdist(input: Tensor, p: float = 2) -> Tensor:
    """``torch.nn.functional.pdist``: the p-norm distance of every pair of rows i < j of an
    (N, M) input, in row-major order: N * (N - 1) / 2 values.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.pdist(dtorch.tensor([[0.0, 0.0], [3.0, 4.0]])).tolist()
        [5.0]
    """
    tensor_arg("pdist", input)
    if input.ndim != 2:
        raise ShapeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.dtype.is_floating_point:
        raise DtypeError(f"pdist only supports floating-point dtypes; got {input.dtype}")
    function_dtype("pdist", _pdist_probe, ((input.dtype, False),))  # no half precision kernel
    p_ = as_real("pdist: p", p)
    if p_ < 0:
        raise ParamError(f"pdist only supports non-negative p values; got {p_}")
    n = input.shape[0]
    rows = [Replicate() if pl == Shard(0) else pl for pl in input.placements]
    x = input.redistribute(placements=rows) if rows != list(input.placements) else input
    dist = norm(x.unsqueeze(1) - x.unsqueeze(0), p_, dim=-1)
    i, j = torch.triu_indices(n, n, 1)
    return dist.reshape(n * n).index_select(0, beside(input, i * n + j))
