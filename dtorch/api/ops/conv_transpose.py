"""``conv_transpose1d`` and ``conv_transpose2d`` (torch.nn.functional's, with ``stride``,
``padding``, ``output_padding``, ``groups`` and ``dilation``) and ``fold`` (col2im): one
operator each running torch's own function on every device's shards (rules in
``dtorch.ir.rules.conv_transpose``: values, NaN and infinities are torch's); ``unfold``
(im2col): strided slices of the input, stacked.

Placements: a sharded batch stays sharded; without groups, out-channels shard through the
weight's dim 1 and in-channels sharded on the input and the weight's dim 0 give Partial; a
Partial input (with a Replicate weight) or weight stays Partial; a sharded spatial dim is
refused, naming the operator (its windows would cross shard boundaries). ``fold`` keeps a
sharded batch and a Partial.

Example:
    >>> import dtorch
    >>> x, w = dtorch.ones(1, 1, 2, 2), dtorch.ones(1, 1, 2, 2)
    >>> dtorch.nn.functional.conv_transpose2d(x, w)[0, 0].tolist()
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from dtorch.api.ops.conv import IntOrPair, int_pair
from dtorch.api.ops.shape import stack
from dtorch.api.ops.spatial import pad
from dtorch.api.ops.spatial_1d import int_one
from dtorch.api.record import composite, record_one, tensor_arg
from dtorch.errors import DimError, ParamError, ShapeError
from dtorch.ir.params import ConvTransposeParam, FoldParam
from dtorch.ir.rules.promotion import function_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

Pair = tuple[int, int]


def check_transposed(
    name: str, input: Tensor, weight: Tensor, groups: int, output_padding: tuple, how: tuple
) -> None:
    """torch's checks of the arguments its meta kernel does not make, naming the function."""
    stride, dilation = how
    spatial = len(stride)
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups < 1:
        raise ParamError(f"{name}: groups must be a positive int; got {groups!r}")
    if weight.ndim != spatial + 2 or input.ndim not in (spatial + 1, spatial + 2):
        raise ShapeError(
            f"{name}: needs a (N, C, *spatial) or (C, *spatial) input of {spatial} spatial dims "
            f"and a {spatial + 2}-D weight; got input {list(input.shape)}, weight "
            f"{list(weight.shape)}"
        )
    c_in = input.shape[-1 - spatial]
    if weight.shape[0] != c_in or c_in % groups:
        raise ShapeError(
            f"{name}: Given transposed=1, weight of size {list(weight.shape)}, expected "
            f"input{list(input.shape)} to have {weight.shape[0]} channels, but got {c_in} "
            f"channels instead (and groups={groups} to divide them)"
        )
    if any(op >= max(s, d) for op, s, d in zip(output_padding, stride, dilation, strict=True)):
        raise ParamError(f"{name}: output padding must be smaller than either stride or "
                         f"dilation, but got output_padding {output_padding}, stride {stride}, "
                         f"dilation {dilation}")  # fmt: skip


def record_transposed(name: str, inputs: tuple[Any, ...], param: ConvTransposeParam) -> Tensor:
    """The operator; a given bias must be a dtorch tensor beside the input."""
    x, w, bias = inputs
    if bias is None:
        return record_one(name, param, (x, w))
    tensor_arg(name, bias, "bias")
    return record_one(name, param, (x, w, bias))


@composite()
def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    output_padding: IntOrPair = 0,
    groups: int = 1,
    dilation: IntOrPair = 1,
) -> Tensor:
    """``torch.nn.functional.conv_transpose2d`` of a (N, C_in, H, W) or (C_in, H, W) input
    with a (C_in, C_out / groups, kH, kW) weight. Placements: see the module.

    Example:
        >>> import dtorch
        >>> x = dtorch.ones(1, 2, 3, 3)
        >>> dtorch.nn.functional.conv_transpose2d(x, dtorch.ones(2, 4, 3, 3), stride=2).shape
        torch.Size([1, 4, 7, 7])
    """
    tensor_arg("conv_transpose2d", input)
    tensor_arg("conv_transpose2d", weight, "weight")
    name = "conv_transpose2d"
    strides, dilations = int_pair(name, "stride", stride), int_pair(name, "dilation", dilation)
    pads = int_pair(name, "padding", padding, low=0)
    extra = int_pair(name, "output_padding", output_padding, low=0)
    check_transposed(name, input, weight, groups, extra, (strides, dilations))
    param = ConvTransposeParam(strides, pads, extra, dilations, int(groups))
    return record_transposed(name, (input, weight, bias), param)


@composite()
def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """``torch.nn.functional.conv_transpose1d`` of a (N, C_in, L) or (C_in, L) input with a
    (C_in, C_out / groups, k) weight. Placements: see the module.

    Example:
        >>> import dtorch
        >>> x, w = dtorch.ones(1, 1, 3), dtorch.ones(1, 1, 2)
        >>> dtorch.nn.functional.conv_transpose1d(x, w, stride=2).tolist()
        [[[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]]
    """
    name = "conv_transpose1d"
    tensor_arg(name, input)
    tensor_arg(name, weight, "weight")
    strides = (int_one(name, "stride", stride),)
    dilations = (int_one(name, "dilation", dilation),)
    pads = (int_one(name, "padding", padding, low=0),)
    extra = (int_one(name, "output_padding", output_padding, low=0),)
    check_transposed(name, input, weight, groups, extra, (strides, dilations))
    param = ConvTransposeParam(strides, pads, extra, dilations, int(groups))
    return record_transposed(name, (input, weight, bias), param)


# --- unfold (im2col) and fold (col2im) ----------------------------------------------------------
def _unfold_probe(a: torch.Tensor) -> torch.Tensor:
    return F.unfold(a.view(1, 1, 1, 1), 1)


def _fold_probe(a: torch.Tensor) -> torch.Tensor:
    return F.fold(a.view(1, 1, 1), 1, 1)


def _span(size: int, pad: int, dilation: int, kernel: int) -> int:
    # how far a block's first element can move: the padded size less the dilated kernel
    return size + 2 * pad - dilation * (kernel - 1) - 1


def _blocks(name: str, size: Pair, kernel: Pair, how: tuple[Pair, Pair, Pair]) -> Pair:
    """The number of sliding blocks along H and W (torch's refusal where one is below 1)."""
    dilation, padding, stride = how
    spans = [_span(*v) for v in zip(size, padding, dilation, kernel, strict=True)]
    counts = [span // st + 1 for span, st in zip(spans, stride, strict=True)]
    if min(counts) < 1:
        raise ShapeError(
            f"{name}: Given input with spatial size {tuple(size)}, kernel_size={kernel}, "
            f"dilation={dilation}, padding={padding}, calculated shape of the array of sliding "
            f"blocks as {tuple(counts)}, but its components must be at least one."
        )
    return counts[0], counts[1]


def _window_args(name: str, kernel_size: Any, dilation: Any, padding: Any, stride: Any) -> tuple:
    return (
        int_pair(name, "kernel_size", kernel_size),
        (int_pair(name, "dilation", dilation), int_pair(name, "padding", padding, low=0),
         int_pair(name, "stride", stride)),
    )  # fmt: skip


@composite()
def unfold(
    input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> Tensor:
    """``torch.nn.functional.unfold`` (im2col) of a (N, C, H, W) or (C, H, W) input: every
    sliding block's values, (N, C * kH * kW, L). Exact: strided slices of the zero-padded
    input, stacked. A sharded batch or channel dim stays; H and W must be whole.

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(4.0).view(1, 1, 2, 2)
        >>> dtorch.nn.functional.unfold(x, 2).tolist()
        [[[0.0], [1.0], [2.0], [3.0]]]
    """
    tensor_arg("unfold", input)
    if input.ndim not in (3, 4):  # an IndexError as torch's (it reads a dim that is not there)
        raise DimError(f"unfold: Expected 3D or 4D (batch mode) tensor for input with possibly "
                         f"0 batch size and non-zero dimensions for input, but got: "
                         f"{list(input.shape)}")  # fmt: skip
    function_dtype("unfold", _unfold_probe, ((input.dtype, False),))
    kernel, (dilation, padding, stride) = _window_args("unfold", kernel_size, dilation, padding,
                                                       stride)  # fmt: skip
    rows, cols = _blocks(
        "unfold", (input.shape[-2], input.shape[-1]), kernel, (dilation, padding, stride)
    )
    x = pad(input, (padding[1], padding[1], padding[0], padding[0])) if any(padding) else input
    lead = (slice(None),) * (input.ndim - 2)
    pieces = [
        x[(*lead, slice(i * dilation[0], i * dilation[0] + (rows - 1) * stride[0] + 1, stride[0]),
           slice(j * dilation[1], j * dilation[1] + (cols - 1) * stride[1] + 1, stride[1]))]
        for i in range(kernel[0]) for j in range(kernel[1])
    ]  # fmt: skip
    blocks = stack(pieces, input.ndim - 2)  # (*, C, kH * kW, rows, cols): torch's order
    shape = (*input.shape[:-3], input.shape[-3] * kernel[0] * kernel[1], rows * cols)
    return blocks.reshape(shape)


@composite()
def fold(
    input: Tensor,
    output_size: Any,
    kernel_size: Any,
    dilation: Any = 1,
    padding: Any = 0,
    stride: Any = 1,
) -> Tensor:
    """``torch.nn.functional.fold`` (col2im) of a (N, C * kH * kW, L) or (C * kH * kW, L)
    input: the blocks summed into (N, C, H, W), H and W given by ``output_size``: torch's own
    on every device's shard. A sharded batch and a Partial stay; the block and location dims
    must be whole.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.fold(dtorch.ones(1, 4, 4), 3, 2).tolist()
        [[[[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]]]
    """
    tensor_arg("fold", input)
    if input.ndim not in (2, 3):
        raise ShapeError(f"fold: Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                         f"batch size and non-zero dimensions for input, but got: "
                         f"{list(input.shape)}")  # fmt: skip
    function_dtype("fold", _fold_probe, ((input.dtype, False),))
    size = int_pair("fold", "output_size", output_size)
    kernel, how = _window_args("fold", kernel_size, dilation, padding, stride)
    _check_fold(input, size, kernel, how)
    dilation, padding, stride = how
    return record_one("fold", FoldParam(size, kernel, dilation, padding, stride), (input,))


def _check_fold(input: Tensor, size: Pair, kernel: Pair, how: tuple[Pair, Pair, Pair]) -> None:
    """torch's refusals of the input's sizes (the sliding blocks' count)."""
    per_block = kernel[0] * kernel[1]
    if input.shape[-2] % per_block:
        raise ShapeError(
            f"fold: Expected size of input's dimension 1 to be divisible by the product of "
            f"kernel_size, but got input.size(1)={input.shape[-2]} and kernel_size={kernel}."
        )
    rows, cols = _blocks("fold", size, kernel, how)
    if input.shape[-1] != rows * cols:
        dilation, padding, stride = how
        raise ShapeError(
            f"fold: Given output_size={size}, kernel_size={kernel}, dilation={dilation}, "
            f"padding={padding}, stride={stride}, expected size of input's dimension 2 to match "
            f"the calculated number of sliding blocks {rows} * {cols} = {rows * cols}, but got "
            f"input.size(2)={input.shape[-1]}."
        )
