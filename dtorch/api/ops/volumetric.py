"""The 3-D (volumetric) image operators: ``conv3d``, ``conv_transpose3d``, ``max_pool3d``,
``avg_pool3d``, ``adaptive_avg_pool3d``, ``adaptive_max_pool3d``, with torch.nn.functional's
signatures, over (N, C, D, H, W) or (C, D, H, W) inputs.

All but ``conv_transpose3d`` are compositions of dtorch's 2-D operators (no operator of their
own), so that both runners, the codec and every layout rule of ``conv2d`` and the Pooling
operator apply as they are; values match torch's within float tolerance (sums run in another
order):

* ``conv3d`` is a sum over the kernel's depth ``kd`` of one ``conv2d`` each: the (strided)
  depth slices that meet ``kd`` are laid one under the other along H (each padded to a
  multiple of the H stride), one conv2d convolves them all, and the rows whose windows cross
  two slices are dropped. No dim holding a shard is merged, so a batch sharded unevenly stays
  sharded.
* ``conv_transpose3d`` is the ConvTranspose operator of ``conv_transpose2d``
  (``dtorch.api.ops.conv_transpose``): torch's own function on every device's shards.
* the pools are separable: a window is a box, its maximum (mean, count) is that along W,
  then H, then D, each a 2-D pool with a window of width one over the volume viewed as
  (N, C, S, rest). Ties and NaNs pick the index torch's 3-D kernel picks (the first maximum
  in (d, h, w) order). An integer ``avg_pool3d`` sums exactly, then divides once, truncating
  as torch does.

Placements (those of the parts): a sharded batch stays sharded; channels shard as ``conv2d``
and the 2-D pools take them (conv input channels sharded like the weight's in-channels give
Partial, its out-channels give sharded output channels, grouped convs in whole groups); the
linear ones (conv with a Replicate weight, average pools) keep a Partial input Partial; max
pools refuse Partial. A sharded D, H or W (or a kernel dim of the weight) is refused, naming
the operator: its windows would cross shard boundaries (a halo exchange, not implemented).

Example:
    >>> import dtorch
    >>> import dtorch.nn.functional as F
    >>> x = dtorch.arange(8.0).view(1, 1, 2, 2, 2)
    >>> F.conv3d(x, dtorch.ones(1, 1, 2, 2, 2)).item(), F.max_pool3d(x, 2).item()
    (28.0, 7.0)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as torch_f

from dtorch.api.create import beside
from dtorch.api.dims import as_flag
from dtorch.api.ops.conv import conv2d
from dtorch.api.ops.conv_transpose import check_transposed, record_transposed
from dtorch.api.ops.masked import select
from dtorch.api.ops.nn_more import adaptive_max_pool2d
from dtorch.api.ops.spatial import adaptive_avg_pool2d, avg_pool2d, max_pool2d, pad
from dtorch.api.record import composite, tensor_arg
from dtorch.errors import DtypeError, ParamError, PlacementError, ShapeError
from dtorch.ir.params import ConvTransposeParam
from dtorch.ir.placement import Shard, format_placements
from dtorch.ir.rules.promotion import function_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

Triple = tuple[int, int, int]
IntOrTriple = int | Sequence[int]
#: pass(flat (N, C, S, rest)) -> values, or (values, flat indices)
Pass = Callable[["Tensor"], Any]
_WINDOW = "its windows would cross shard boundaries (a halo exchange, not implemented)"
_ACCEPTED = "Replicate, Partial (the linear ones), shards of the batch and channel dims"


def int_triple(name: str, what: str, value: Any, low: int = 1) -> Triple:
    """``value`` (an int, or one or three ints) as a (D, H, W) triple, each at least ``low``."""
    items = [value] if isinstance(value, (int, np.integer)) else value
    if not isinstance(items, (tuple, list)):  # torch takes an int or a tuple/list of ints
        raise TypeError(f"{name}: {what} must be an int or a tuple of three ints, each at least "
                        f"{low}; got {value!r}")  # fmt: skip
    items = list(items) * 3 if len(items) == 1 else list(items)
    ok = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= low
             for v in items)  # fmt: skip
    if len(items) != 3 or not ok:
        raise ParamError(f"{name}: {what} must be an int or a tuple of three ints, each at "
                         f"least {low}; got {value!r}")  # fmt: skip
    return int(items[0]), int(items[1]), int(items[2])


def _check_volume(name: str, x: Tensor) -> None:
    # torch's 3-D operators take (C, D, H, W) or (N, C, D, H, W)
    tensor_arg(name, x)
    if x.ndim not in (4, 5):
        raise ShapeError(f"{name}: needs a (C, D, H, W) or (N, C, D, H, W) input; got shape "
                         f"{list(x.shape)}")  # fmt: skip


def _refuse_volume_shards(name: str, tensors: Sequence[tuple[str, Tensor]]) -> None:
    """PlacementError where the last three dims (D, H, W, or the weight's kernel) of a tensor
    are sharded."""
    for label, t in tensors:
        for m, p in enumerate(t.placements):
            if isinstance(p, Shard) and p.dim % t.ndim >= t.ndim - 3:
                got = " x ".join(format_placements(u.placements) for _, u in tensors)
                raise PlacementError(
                    f"{name}: got {got} on mesh {tuple(t.device_mesh.shape)}; dim "
                    f"{p.dim % t.ndim} (a spatial dim of the {label}) is sharded on mesh dim "
                    f"{m}, and {_WINDOW}; accepted per mesh dimension: {_ACCEPTED}; "
                    f"redistribute it to Replicate first"
                )


def _batched(x: Tensor) -> Tensor:
    # an unbatched (C, D, H, W) volume as a batch of one
    return x.unsqueeze(0) if x.ndim == 4 else x


def _unbatched(out: Any, given: Tensor) -> Any:
    if given.ndim == 5:
        return out
    return tuple(o.squeeze(0) for o in out) if isinstance(out, tuple) else out.squeeze(0)


# --- conv3d -------------------------------------------------------------------------------------
def _conv_probe(a: torch.Tensor) -> torch.Tensor:
    return torch_f.conv3d(a.view(1, 1, 1, 1, 1), a.view(1, 1, 1, 1, 1))


def _check_conv(x: Tensor, weight: Tensor, bias: Tensor | None, groups: int) -> None:
    # torch's checks, made before the composite's parts would refuse in 2-D words
    if not isinstance(groups, (int, np.integer)) or isinstance(groups, bool) or groups < 1:
        raise ParamError(f"conv3d: groups must be a positive int; got {groups!r}")
    if weight.ndim != 5:
        raise ShapeError(f"conv3d: needs a 5-D weight (out_channels, in_channels / groups, kD, "
                         f"kH, kW); got {list(weight.shape)}")  # fmt: skip
    channels = x.shape[-4]
    if channels != weight.shape[1] * groups or weight.shape[0] % groups:
        raise ShapeError(
            f"conv3d: Given groups={groups}, weight of size {list(weight.shape)}, expected "
            f"input{list(x.shape)} to have {weight.shape[1] * groups} channels, but got "
            f"{channels} channels instead (and out_channels divisible by groups)"
        )
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ShapeError(f"conv3d: bias must be ({weight.shape[0]},) (out_channels); got "
                         f"{list(bias.shape)}")  # fmt: skip
    dtypes = {t.dtype for t in (x, weight, bias) if t is not None}
    if len(dtypes) > 1:
        raise DtypeError(f"conv3d: input, weight and bias must share one dtype; got "
                         f"{sorted(str(d) for d in dtypes)}")  # fmt: skip
    function_dtype("conv3d", _conv_probe, ((x.dtype, False),))


def _conv_pads(padding: Any, kernel: Triple, dilation: Triple, stride: Triple) -> list[tuple]:
    """(low, high) pads of D, H and W: numbers, or ``"same"`` (the odd one at the end, as
    torch) or ``"valid"``."""
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ParamError(f"conv3d: padding must be 'same', 'valid', an int or three ints; "
                             f"got {padding!r}")  # fmt: skip
        if padding == "valid":
            return [(0, 0)] * 3
        if stride != (1, 1, 1):
            raise ParamError("conv3d: padding='same' is not supported for strided convolutions")
        totals = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        return [(t // 2, t - t // 2) for t in totals]
    return [(p, p) for p in int_triple("conv3d", "padding", padding, low=0)]


def _out_sizes(name: str, x: Tensor, pads: list[tuple], kernel: Triple, how: tuple) -> Triple:
    """Output D, H, W (torch's refusal where one is below 1)."""
    stride, dilation = how
    sizes = [(s + lo + hi - d * (k - 1) - 1) // st + 1 for s, (lo, hi), k, d, st in
             zip(x.shape[-3:], pads, kernel, dilation, stride, strict=True)]  # fmt: skip
    if min(sizes) < 1:
        raise ShapeError(f"{name}: the padded input {list(x.shape)} (pads {pads}) is smaller "
                         f"than the dilated kernel {list(kernel)} (dilation {list(dilation)}); "
                         f"the output would be {sizes}")  # fmt: skip
    return sizes[0], sizes[1], sizes[2]


def _depth_term(
    xp: Tensor, w: Tensor, bias: Tensor | None, start: int, how: tuple, sizes: Triple
) -> Tensor:
    """conv2d of the depth slices ``start, start + sD, ...`` laid along H, with the kernel's
    depth slice ``w`` (O, C / g, kH, kW): the (N, O, Do, Ho, Wo) term of that depth."""
    (s_d, s_h, s_w), dilation, groups = how
    do, ho, _ = sizes
    n, c, _, hp, wp = xp.shape
    rows = xp[:, :, start : start + (do - 1) * s_d + 1 : s_d].reshape((n, c, do * hp, wp))
    tail = max(0, dilation[1] * (w.shape[2] - 1) + 1 - s_h)  # the last slice's windows
    rows = pad(rows, (0, 0, 0, tail)) if tail else rows
    out = conv2d(rows, w, bias, (s_h, s_w), 0, dilation[1:], groups)
    per_slice = out.reshape((n, out.shape[1], do, hp // s_h, out.shape[-1]))
    return per_slice[:, :, :, :ho]


def _conv3d(
    x: Tensor, weight: Tensor, bias: Tensor | None, pads: list[tuple], how: tuple
) -> Tensor:
    """The batched conv3d (see the module): the kernel's depth slices' conv2d terms, summed."""
    stride, dilation, _ = how
    kernel = (weight.shape[2], weight.shape[3], weight.shape[4])
    sizes = _out_sizes("conv3d", x, pads, kernel, (stride, dilation))
    h_padded = x.shape[3] + pads[1][0] + pads[1][1]
    extra = -h_padded % stride[1]  # every slice a multiple of the H stride tall
    sides = (*pads[2], pads[1][0], pads[1][1] + extra, *pads[0])
    xp = pad(x, sides) if any(sides) else x
    total = None
    for kd in range(weight.shape[2]):
        term = _depth_term(xp, weight[:, :, kd], bias if kd == 0 else None, kd * dilation[0],
                           how, sizes)  # fmt: skip
        total = term if total is None else total + term
    assert total is not None
    return total


@composite()
def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrTriple = 1,
    padding: str | IntOrTriple = 0,
    dilation: IntOrTriple = 1,
    groups: int = 1,
) -> Tensor:
    """``torch.nn.functional.conv3d`` of a (N, C, D, H, W) or (C, D, H, W) input with a
    (out, in / groups, kD, kH, kW) weight; ``padding`` is numbers, ``"same"`` or ``"valid"``.
    Placements: see the module.

    Example:
        >>> import dtorch
        >>> x = dtorch.ones(1, 2, 3, 4, 4)
        >>> dtorch.nn.functional.conv3d(x, dtorch.ones(4, 2, 2, 3, 3), padding=(0, 1, 1)).shape
        torch.Size([1, 4, 2, 4, 4])
    """
    _check_volume("conv3d", input)
    tensor_arg("conv3d", weight, "weight")
    _check_conv(input, weight, bias, groups)
    _refuse_volume_shards("conv3d", [("input", input), ("weight", weight)])
    kernel = (weight.shape[2], weight.shape[3], weight.shape[4])
    strides = int_triple("conv3d", "stride", stride)
    dilations = int_triple("conv3d", "dilation", dilation)
    pads = _conv_pads(padding, kernel, dilations, strides)
    out = _conv3d(_batched(input), weight, bias, pads, (strides, dilations, int(groups)))
    return _unbatched(out, input)


# --- conv_transpose3d ---------------------------------------------------------------------------
@composite()
def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrTriple = 1,
    padding: IntOrTriple = 0,
    output_padding: IntOrTriple = 0,
    groups: int = 1,
    dilation: IntOrTriple = 1,
) -> Tensor:
    """``torch.nn.functional.conv_transpose3d`` of a (N, C_in, D, H, W) or (C_in, D, H, W)
    input with a (C_in, C_out / groups, kD, kH, kW) weight. Placements: see the module.

    Example:
        >>> import dtorch
        >>> x = dtorch.ones(1, 2, 2, 3, 3)
        >>> dtorch.nn.functional.conv_transpose3d(x, dtorch.ones(2, 4, 2, 3, 3), stride=2).shape
        torch.Size([1, 4, 4, 7, 7])
    """
    name = "conv_transpose3d"
    _check_volume(name, input)
    tensor_arg(name, weight, "weight")
    strides, dilations = int_triple(name, "stride", stride), int_triple(name, "dilation", dilation)
    pads = int_triple(name, "padding", padding, low=0)
    extra = int_triple(name, "output_padding", output_padding, low=0)
    check_transposed(name, input, weight, groups, extra, (strides, dilations))
    param = ConvTransposeParam(strides, pads, extra, dilations, int(groups))
    return record_transposed(name, (input, weight, bias), param)


# --- separable pools ----------------------------------------------------------------------------
def _pass(x: Tensor, dim: int, pool: Pass) -> tuple[Tensor, Tensor | None]:
    """``pool`` along ``dim`` (2, 3 or 4) of the (N, C, D, H, W) ``x``, viewed as (N, C, S,
    rest) with ``dim`` as S; the values and (with indices) the index along ``dim``."""
    moved = x if dim == 2 else x.movedim(dim, 2)
    n, c, s, a, b = moved.shape
    out = pool(moved.reshape((n, c, s, a * b)))
    values, flat = out if isinstance(out, tuple) else (out, None)
    back = values.reshape((n, c, values.shape[2], a, b))
    back = back if dim == 2 else back.movedim(2, dim)
    if flat is None:
        return back, None
    where = (flat // (a * b)).reshape((n, c, values.shape[2], a, b))
    return back, where if dim == 2 else where.movedim(2, dim)


def _max_passes(
    x: Tensor, pools: tuple[Pass, Pass, Pass], indices: bool, windows: Windows | None = None
) -> Any:
    """The maximum over W, then H, then D; with ``indices`` the flat (d, h, w) index of each
    maximum in its (D, H, W) volume (each pass's choice gathered through the next).
    ``windows``: each axis's (kernel, stride, padding, dilation), where a window may hold no
    tap (``_starts``): its index is torch's, made of the windows' first taps."""
    v, iw = _pass(x, 4, pools[2])
    v, ih = _pass(v, 3, pools[1])
    v, i_d = _pass(v, 2, pools[0])
    if not indices:
        return v
    assert iw is not None and ih is not None and i_d is not None
    sizes = tuple(x.shape[2:])
    starts = None if windows is None else _starts(sizes, tuple(v.shape[2:]), windows)
    if starts is not None:  # a tap-less window's index is past the input: gather in range
        ih, i_d = ih.clamp(max=sizes[1] - 1), i_d.clamp(max=sizes[0] - 1)
    iw = iw.gather(3, ih).gather(2, i_d)
    ih = ih.gather(2, i_d)
    height, width = sizes[1], sizes[2]
    index = i_d * (height * width) + ih * width + iw
    if starts is None:
        return v, index
    empty, first = starts
    return v, select("max_pool3d", beside(index, empty), beside(index, first), index)


#: Per axis (D, H, W) of a max pool: kernel, stride, padding, dilation.
Windows = tuple[tuple[int, int, int, int], ...]


def _starts(
    sizes: tuple[int, ...], outs: tuple[int, ...], windows: Windows
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Where a window holds no tap (all in the padding), torch's index of it: its first taps
    (each start moved past the padding by whole dilations) as a flat (d, h, w) index; None
    where every window holds one (the usual case: nothing to add)."""
    axes = []
    for size, out, (k, s, p, d) in zip(sizes, outs, windows, strict=True):
        first = [_first_tap(o * s - p, d) for o in range(out)]
        ends = [min(o * s - p + (k - 1) * d + 1, size) for o in range(out)]
        holds_none = [f >= e for f, e in zip(first, ends, strict=True)]
        axes.append((torch.tensor(first), torch.tensor(holds_none)))
    (fd, ed), (fh, eh), (fw, ew) = axes
    empty = ed[:, None, None] | eh[None, :, None] | ew[None, None, :]
    if not bool(empty.any()):
        return None
    index = (fd[:, None, None] * sizes[1] + fh[None, :, None]) * sizes[2] + fw[None, None, :]
    return empty, index


def _first_tap(start: int, dilation: int) -> int:
    # torch's: a window starting in the padding moves by whole dilations into the input
    while start < 0:
        start += dilation
    return start


def _windowed(name: str, kernel_size: Any, stride: Any, padding: Any) -> tuple[Triple, ...]:
    """Kernel, stride (the kernel when None or empty, as torch) and padding triples."""
    kernel = int_triple(name, "kernel_size", kernel_size)
    empty = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    strides = kernel if empty else int_triple(name, "stride", stride)
    return kernel, strides, int_triple(name, "padding", padding, low=0)


def _max_probe(a: torch.Tensor) -> torch.Tensor:
    return torch_f.max_pool3d(a.view(1, 1, 1, 1), 1)


@composite()
def max_pool3d(
    input: Tensor,
    kernel_size: IntOrTriple,
    stride: IntOrTriple | None = None,
    padding: IntOrTriple = 0,
    dilation: IntOrTriple = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """``torch.nn.functional.max_pool3d`` of a (N, C, D, H, W) or (C, D, H, W) input; with
    ``return_indices`` also the int64 index of every maximum in its (D, H, W) volume.

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(8.0).view(1, 2, 2, 2)
        >>> out, idx = dtorch.nn.functional.max_pool3d(x, 2, return_indices=True)
        >>> out.item(), idx.item()
        (7.0, 7)
    """
    name = "max_pool3d"
    _check_volume(name, input)
    function_dtype(name, _max_probe, ((input.dtype, False),))
    kernel, strides, pads = _windowed(name, kernel_size, stride, padding)
    dilations = int_triple(name, "dilation", dilation)
    ceil = as_flag(ceil_mode, name, "ceil_mode")
    _refuse_volume_shards(name, [("input", input)])
    _check_pads(name, kernel, pads)
    with_indices = bool(return_indices)  # torch's functional dispatches on its truth
    windows = tuple(zip(kernel, strides, pads, dilations, strict=True))
    pools = tuple(_max_pool_pass(k, s, p, d, ceil, with_indices) for k, s, p, d in windows)
    out = _max_passes(_batched(input), pools, with_indices, windows)  # type: ignore[arg-type]
    return _unbatched(out, input)


def _check_pads(name: str, kernel: Triple, pads: Triple) -> None:
    # torch's 3-D check, in its words, before the 2-D passes would refuse in theirs
    if any(p > k // 2 for p, k in zip(pads, kernel, strict=True)):
        raise ParamError(f"{name}: pad should be smaller than or equal to half of kernel size, "
                         f"but got padding={list(pads)}, kernel_size={list(kernel)}")  # fmt: skip


def _max_pool_pass(k: int, s: int, p: int, d: int, ceil: bool, indices: bool) -> Pass:
    def pool(flat: Tensor) -> Any:
        return max_pool2d(flat, (k, 1), (s, 1), (p, 0), (d, 1), ceil, indices)

    return pool


def _avg_probe(a: torch.Tensor) -> torch.Tensor:
    return torch_f.avg_pool3d(a.view(1, 1, 1, 1), 1)


def _avg_pool_pass(k: int, s: int, p: int, ceil: bool, include: bool, summed: bool) -> Pass:
    def pool(flat: Tensor) -> Tensor:
        return avg_pool2d(flat, (k, 1), (s, 1), (p, 0), ceil, include, 1 if summed else None)

    return pool


def _divisor(x: Tensor, args: tuple) -> Tensor:
    """Every window's divisor, (D', H', W') Replicate: torch's own pool of ones (it depends
    on the sizes alone), its sum over the mean."""
    kernel, strides, pads, ceil, include = args
    ones = torch.ones((1, 1, *x.shape[-3:]), dtype=torch.float64)
    total = torch_f.avg_pool3d(ones, kernel, strides, pads, ceil, include, divisor_override=1)
    mean = torch_f.avg_pool3d(ones, kernel, strides, pads, ceil, include)
    return beside(x, (total / mean).round().to(torch.int64)[0, 0])


@composite()
def avg_pool3d(
    input: Tensor,
    kernel_size: IntOrTriple,
    stride: IntOrTriple | None = None,
    padding: IntOrTriple = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """``torch.nn.functional.avg_pool3d`` of a (N, C, D, H, W) or (C, D, H, W) input (integer
    dtypes too: summed exactly, divided once, truncated as torch).

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(8.0).view(1, 1, 2, 2, 2)
        >>> dtorch.nn.functional.avg_pool3d(x, 2).item()
        3.5
    """
    name = "avg_pool3d"
    _check_volume(name, input)
    function_dtype(name, _avg_probe, ((input.dtype, False),))
    kernel, strides, pads = _windowed(name, kernel_size, stride, padding)
    override = _override(divisor_override)
    ceil = as_flag(ceil_mode, name, "ceil_mode")
    include = as_flag(count_include_pad, name, "count_include_pad")
    _refuse_volume_shards(name, [("input", input)])
    _check_pads(name, kernel, pads)
    volume = input.shape[-3:]
    if any(n < k for n, k in zip(volume, kernel, strict=True)):  # torch's 3-D check, unpadded
        raise ShapeError(f"{name}: input image (T: {volume[0]} H: {volume[1]} W: {volume[2]}) "
                         f"smaller than kernel size (kT: {kernel[0]} kH: {kernel[1]} kW: "
                         f"{kernel[2]})")  # fmt: skip
    exact = input.dtype.is_floating_point or input.dtype.is_complex
    summed = override is not None or not exact
    pools = tuple(_avg_pool_pass(k, s, p, ceil, include, summed)
                  for k, s, p in zip(kernel, strides, pads, strict=True))  # fmt: skip
    out = _max_passes(_batched(input), pools, False)  # type: ignore[arg-type]
    if exact:
        out = out if override is None else out / override
    else:  # integer sums, divided once as torch's kernel divides (toward zero)
        by = override if override is not None else _divisor(input, (kernel, strides, pads, ceil,
                                                                        include))  # fmt: skip
        out = out.div(by, rounding_mode="trunc").to(input.dtype)
    return _unbatched(out, input)


def _override(value: Any) -> int | None:
    if isinstance(value, np.integer):  # torch takes numpy integers
        value = int(value)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ParamError(f"avg_pool3d: divisor_override must be a positive int or None; got "
                         f"{value!r}")  # fmt: skip
    return value


# --- adaptive pools -----------------------------------------------------------------------------
def _adaptive_sizes(name: str, x: Tensor, output_size: Any) -> Triple:
    """(D, H, W) of the output: an int for all three, or three (None keeps the input's)."""
    one = isinstance(output_size, (int, np.integer)) or output_size is None
    sizes = [output_size] * 3 if one else list(output_size)
    if len(sizes) != 3:
        raise ParamError(f"{name}: output_size must be an int or three ints or Nones; got "
                         f"{output_size!r}")  # fmt: skip
    sizes = [x.shape[x.ndim - 3 + i] if s is None else s for i, s in enumerate(sizes)]
    return int_triple(name, "output_size", sizes, low=0)


def _adaptive_avg_probe(a: torch.Tensor) -> torch.Tensor:
    return torch_f.adaptive_avg_pool3d(a.view(1, 1, 1, 1), 1)


def _adaptive_max_probe(a: torch.Tensor) -> torch.Tensor:
    return torch_f.adaptive_max_pool3d(a.view(1, 1, 1, 1), 1)


def _adaptive_pass(size: int, maximum: bool, indices: bool) -> Pass:
    def pool(flat: Tensor) -> Any:
        if maximum:
            return adaptive_max_pool2d(flat, (size, flat.shape[-1]), indices)
        return adaptive_avg_pool2d(flat, (size, flat.shape[-1]))

    return pool


@composite()
def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """``torch.nn.functional.adaptive_avg_pool3d``: ``output_size`` (D, H, W), an int for all
    three, None in a place keeps that input size.

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(8.0).view(1, 2, 2, 2)
        >>> dtorch.nn.functional.adaptive_avg_pool3d(x, (1, None, 1)).tolist()
        [[[[2.5], [4.5]]]]
    """
    name = "adaptive_avg_pool3d"
    _check_volume(name, input)
    function_dtype(name, _adaptive_avg_probe, ((input.dtype, False),))
    sizes = _adaptive_sizes(name, input, output_size)
    _refuse_volume_shards(name, [("input", input)])
    pools = tuple(_adaptive_pass(s, False, False) for s in sizes)
    return _unbatched(_max_passes(_batched(input), pools, False), input)  # type: ignore[arg-type]


@composite()
def adaptive_max_pool3d(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    """``torch.nn.functional.adaptive_max_pool3d`` (None in ``output_size`` keeps that size);
    with ``return_indices`` also the int64 index of every maximum in its (D, H, W) volume.

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(8.0).view(1, 2, 2, 2)
        >>> out, idx = dtorch.nn.functional.adaptive_max_pool3d(x, (2, 1, 1), True)
        >>> out.flatten().tolist(), idx.flatten().tolist()
        ([3.0, 7.0], [3, 7])
    """
    name = "adaptive_max_pool3d"
    _check_volume(name, input)
    function_dtype(name, _adaptive_max_probe, ((input.dtype, False),))
    sizes = _adaptive_sizes(name, input, output_size)
    _refuse_volume_shards(name, [("input", input)])
    with_indices = bool(return_indices)
    pools = tuple(_adaptive_pass(s, True, with_indices) for s in sizes)
    return _unbatched(_max_passes(_batched(input), pools, with_indices), input)  # type: ignore[arg-type]


__all__ = [
    "adaptive_avg_pool3d",
    "adaptive_max_pool3d",
    "avg_pool3d",
    "conv3d",
    "conv_transpose3d",
    "int_triple",
    "max_pool3d",
]
