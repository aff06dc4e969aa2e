"""``conv_transpose1d`` and ``conv_transpose2d`` (torch.nn.functional's, with ``stride``,
``padding``, ``output_padding``, ``groups`` and ``dilation``), compositions of dtorch's
operators around ``conv2d``; ``unfold`` (im2col: strided slices, stacked) and ``fold``
(col2im: a grouped transposed convolution with a one-hot weight).

A transposed convolution is a plain one over the input with ``stride - 1`` zeros put between
its rows and columns, padded by ``dilation * (kernel - 1) - padding`` on each side (plus
``output_padding`` at the end; a negative pad crops), with the weight flipped and its in and
out channels swapped within each group. The 1-D form runs the 2-D one on an image of height
one. Values match torch's within float tolerance (the sums run in another order).

Placements are those of the parts, ``conv2d``'s above all: a sharded batch stays sharded;
channels shard as ``conv2d`` takes them (input channels sharded like the weight's first dim
give Partial); a sharded spatial dim is refused, naming the operator (its windows would
cross shard boundaries). A Partial input (with a Replicate weight) stays Partial.

Example:
    >>> import dtorch
    >>> x, w = dtorch.ones(1, 1, 2, 2), dtorch.ones(1, 1, 2, 2)
    >>> dtorch.nn.functional.conv_transpose2d(x, w)[0, 0].tolist()
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from dtorch.api.create import beside
from dtorch.api.creation import zeros
from dtorch.api.ops.conv import IntOrPair, conv2d, int_pair
from dtorch.api.ops.shape import cat, stack
from dtorch.api.ops.spatial import pad
from dtorch.api.ops.spatial_1d import int_one
from dtorch.api.record import composite, tensor_arg
from dtorch.errors import DimError, ParamError, ShapeError
from dtorch.ir.rules.promotion import function_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

Pair = tuple[int, int]


def _spread(x: Tensor, dim: int, stride: int) -> Tensor:
    """``x`` with ``stride - 1`` zeros after every entry along ``dim`` (size ``n * stride``)."""
    if stride == 1:
        return x
    item = x.unsqueeze(dim + 1)
    shape = (*item.shape[: dim + 1], stride - 1, *item.shape[dim + 2 :])
    # laid out as ``item`` (the new dim is whole): cat keeps shards, and Partial (zeros sum to 0)
    gaps = zeros(shape, dtype=item.dtype, device_mesh=item.device_mesh,
                 placements=list(item.placements), graph=item.graph)  # fmt: skip
    both = cat([item, gaps], dim + 1)
    return both.reshape((*x.shape[:dim], x.shape[dim] * stride, *x.shape[dim + 1 :]))


def _flipped_weight(weight: Tensor, groups: int) -> Tensor:
    """(in, out / g, kH, kW) as the plain conv's (out, in / g, kH, kW), flipped in space."""
    c_in, per_group, kh, kw = weight.shape
    split = weight.reshape((groups, c_in // groups, per_group, kh, kw)).transpose(1, 2)
    return split.reshape((groups * per_group, c_in // groups, kh, kw)).flip((2, 3))


def _check(input: Tensor, weight: Tensor, groups: int, output_padding: Pair, how: tuple) -> None:
    # torch's checks, made before the composite's parts would refuse in their own words
    stride, dilation = how
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ParamError(f"conv_transpose2d: groups must be a positive int; got {groups!r}")
    if weight.ndim != 4 or input.ndim not in (3, 4):
        raise ShapeError(
            f"conv_transpose2d: needs a (N, C, H, W) or (C, H, W) input and a 4-D weight; got "
            f"input {list(input.shape)}, weight {list(weight.shape)}"
        )
    c_in = input.shape[-3]
    if weight.shape[0] != c_in or c_in % groups:
        raise ShapeError(
            f"conv_transpose2d: Given transposed=1, weight of size {list(weight.shape)}, "
            f"expected input{list(input.shape)} to have {weight.shape[0]} channels, but got "
            f"{c_in} channels instead (and groups={groups} to divide them)"
        )
    if any(op >= max(s, d) for op, s, d in zip(output_padding, stride, dilation, strict=True)):
        raise ParamError(f"conv_transpose2d: output padding must be smaller than either stride "
                         f"or dilation, but got output_padding {output_padding}, stride {stride}, "
                         f"dilation {dilation}")  # fmt: skip


def _transposed(x: Tensor, weight: Tensor, bias: Tensor | None, how: tuple, groups: int) -> Tensor:
    """The plain conv2d that is the transposed one (see the module)."""
    stride, padding, output_padding, dilation = how
    kh, kw = weight.shape[2:]
    spread = _spread(_spread(x, x.ndim - 2, stride[0]), x.ndim - 1, stride[1])
    edge = [d * (k - 1) - p for d, k, p in zip(dilation, (kh, kw), padding, strict=True)]
    # (left, right, top, bottom); the spread left stride - 1 zeros at the end already
    ends = [e + op - (s - 1) for e, op, s in zip(edge, output_padding, stride, strict=True)]
    padded = pad(spread, (edge[1], ends[1], edge[0], ends[0]))
    w = _flipped_weight(weight, groups)
    return conv2d(padded, w, bias, 1, 0, dilation, groups)


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
    _check(input, weight, groups, extra, (strides, dilations))
    return _transposed(input, weight, bias, (strides, pads, extra, dilations), groups)


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
    (C_in, C_out / groups, k) weight: the 2-D operator on an image of height one.

    Example:
        >>> import dtorch
        >>> x, w = dtorch.ones(1, 1, 3), dtorch.ones(1, 1, 2)
        >>> dtorch.nn.functional.conv_transpose1d(x, w, stride=2).tolist()
        [[[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]]
    """
    name = "conv_transpose1d"
    tensor_arg(name, input)
    tensor_arg(name, weight, "weight")
    if input.ndim not in (2, 3) or weight.ndim != 3:
        raise ShapeError(f"conv_transpose1d: needs a (N, C, L) or (C, L) input and a 3-D weight; "
                         f"got input {list(input.shape)}, weight {list(weight.shape)}")  # fmt: skip
    strides = (1, int_one(name, "stride", stride))
    dilations = (1, int_one(name, "dilation", dilation))
    pads = (0, int_one(name, "padding", padding, low=0))
    extra = (0, int_one(name, "output_padding", output_padding, low=0))
    x, w = input.unsqueeze(-2), weight.unsqueeze(-2)
    _check(x, w, groups, extra, (strides, dilations))
    return _transposed(x, w, bias, (strides, pads, extra, dilations), groups).squeeze(-2)


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
    input: the blocks summed into (N, C, H, W), H and W given by ``output_size``. Computed as
    a grouped ``conv_transpose2d`` with a one-hot weight (floating-point dtypes; values within
    float tolerance of torch's). A sharded batch stays, and dim 1 where its shards hold whole
    channels' blocks; a sharded L is refused.

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
    rows, cols = _check_fold(input, size, kernel, how)
    channels, count = input.shape[-2] // (kernel[0] * kernel[1]), kernel[0] * kernel[1]
    x = input.reshape((*input.shape[:-1], rows, cols))
    one_hot = (
        torch.eye(count, dtype=input.dtype).reshape(count, 1, *kernel).repeat(channels, 1, 1, 1)
    )
    dilation, padding, stride = how
    # the output_padding that reaches ``size``: what the last block's stride leaves over
    extra = tuple(_span(s, p, d, k) % st for s, p, d, k, st in
                  zip(size, padding, dilation, kernel, stride, strict=True))  # fmt: skip
    return _transposed(x, beside(input, one_hot), None, (stride, padding, extra, dilation),
                       channels)  # fmt: skip


def _check_fold(input: Tensor, size: Pair, kernel: Pair, how: tuple[Pair, Pair, Pair]) -> Pair:
    """The sliding blocks (rows, cols); torch's refusals of the input's sizes."""
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
    return rows, cols
