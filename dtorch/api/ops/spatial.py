"""Per-channel spatial operators: ``max_pool2d``, ``avg_pool2d``, ``adaptive_avg_pool2d``,
``global_avg_pool2d``, ``interpolate`` and ``pad``, with torch.nn.functional's signatures.

Layouts (``dtorch.ir.rules.spatial``): shards of the batch and channel dims (any dim ``pad``
leaves as it is) stay; a shard of a dim the operator acts on is refused; Partial stays Partial
for the linear ones (average pools, interpolate, pad except with a nonzero constant fill).

Example:
    >>> import dtorch
    >>> import dtorch.nn.functional as F
    >>> x = dtorch.arange(16.0).view(1, 1, 4, 4)
    >>> F.max_pool2d(x, 2).tolist(), F.avg_pool2d(x, 4).item()
    ([[[[5.0, 7.0], [13.0, 15.0]]]], 7.5)
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dtorch.api.dims import as_flag, as_int
from dtorch.api.ops.conv import IntOrPair, int_pair
from dtorch.api.ops.scalars import as_real
from dtorch.api.record import record, record_one, tensor_arg
from dtorch.errors import ParamError, ShapeError
from dtorch.ir.opkind import PoolKind
from dtorch.ir.params import InterpolateParam, PadParam, PoolingParam

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

#: One param object per distinct set of arguments (see ``dtorch.api.ops.conv``).
pooling_param = functools.lru_cache(maxsize=512, typed=True)(PoolingParam)


def _window(
    name: str, kernel_size: IntOrPair, stride: IntOrPair | None, padding: IntOrPair
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """Kernel, stride (the kernel when None or empty, as torch) and padding pairs."""
    kernel = int_pair(name, "kernel_size", kernel_size)
    # torch: None or an empty list means the kernel (a numpy integer is an int)
    empty = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    strides = kernel if empty else int_pair(name, "stride", stride)  # type: ignore[arg-type]
    return kernel, strides, int_pair(name, "padding", padding, low=0)


def max_pool2d(
    input: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """``torch.nn.functional.max_pool2d`` of a (N, C, H, W) or (C, H, W) input; with
    ``return_indices`` also the int64 index of every maximum in its (H, W) plane.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[[1.0, 3.0], [4.0, 2.0]]])
        >>> out, idx = dtorch.nn.functional.max_pool2d(x, 2, return_indices=True)
        >>> out.item(), idx.item()
        (4.0, 2)
    """
    kernel, strides, pads = _window("max_pool2d", kernel_size, stride, padding)
    dilations = int_pair("max_pool2d", "dilation", dilation)
    ceil = as_flag(ceil_mode, "max_pool2d", "ceil_mode")
    with_indices = bool(return_indices)  # torch's functional dispatches on its truth
    param = pooling_param(PoolKind.MAX, kernel, strides, pads, dilations, ceil,
                         return_indices=with_indices)  # fmt: skip
    if return_indices:
        values, indices = record("max_pool2d", param, (input,))
        return values, indices
    return record_one("max_pool2d", param, (input,))


def avg_pool2d(
    input: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """``torch.nn.functional.avg_pool2d`` of a (N, C, H, W) or (C, H, W) input.

    Example:
        >>> import dtorch
        >>> x = dtorch.ones(1, 1, 3, 3)
        >>> dtorch.nn.functional.avg_pool2d(x, 2, padding=1, count_include_pad=False).tolist()
        [[[[1.0, 1.0], [1.0, 1.0]]]]
    """
    kernel, strides, pads = _window("avg_pool2d", kernel_size, stride, padding)
    if isinstance(divisor_override, np.integer):  # torch takes numpy integers
        divisor_override = int(divisor_override)
    if divisor_override is not None and (not isinstance(divisor_override, int) or
                                         divisor_override < 1):  # fmt: skip
        raise ParamError(f"avg_pool2d: divisor_override must be a positive int or None; got "
                         f"{divisor_override!r}")  # fmt: skip
    ceil = as_flag(ceil_mode, "avg_pool2d", "ceil_mode")
    include = as_flag(count_include_pad, "avg_pool2d", "count_include_pad")
    param = pooling_param(
        PoolKind.AVG, kernel, strides, pads, ceil_mode=ceil, count_include_pad=include,
        divisor_override=divisor_override,
    )  # fmt: skip
    return record_one("avg_pool2d", param, (input,))


def adaptive_avg_pool2d(input: Tensor, output_size: int | Sequence[int | None]) -> Tensor:
    """``torch.nn.functional.adaptive_avg_pool2d``: ``output_size`` (H, W), an int for both,
    None in a place keeps that input size; a size of 0 gives an empty output, as torch.

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(8.0).view(1, 2, 4)
        >>> dtorch.nn.functional.adaptive_avg_pool2d(x, (1, None)).tolist()
        [[[2.0, 3.0, 4.0, 5.0]]]
    """
    tensor_arg("adaptive_avg_pool2d", input)
    sizes = [output_size] * 2 if isinstance(output_size, (int, np.integer)) else list(output_size)
    if len(sizes) != 2:
        raise ParamError(f"adaptive_avg_pool2d: output_size must be 2; got {output_size!r}")
    if input.ndim >= 2:  # None keeps the input's size there
        sizes = [input.shape[input.ndim - 2 + i] if s is None else s for i, s in enumerate(sizes)]
    if None in sizes:
        raise ParamError(f"adaptive_avg_pool2d: output_size must be an int or two ints or "
                         f"Nones; got {output_size!r}")  # fmt: skip
    pair = int_pair("adaptive_avg_pool2d", "output_size", sizes, low=0)  # type: ignore[arg-type]
    if input.ndim == 2 and pair == (1, 1):  # torch's 1x1 shortcut: a mean, before its dim check
        return input.mean((-1, -2), keepdim=True)
    param = pooling_param(PoolKind.ADAPTIVE_AVG, output_size=pair)
    return record_one("adaptive_avg_pool2d", param, (input,))


def global_avg_pool2d(input: Tensor) -> Tensor:
    """The mean of every (H, W) plane, kept as a 1 x 1 plane: ``adaptive_avg_pool2d(input, 1)``
    (dtorch's; the functional form of ``dtorch.nn.GlobalAvgPool2d``).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.global_avg_pool2d(dtorch.arange(4.0).view(1, 1, 2, 2)).tolist()
        [[[[1.5]]]]
    """
    return record_one("global_avg_pool2d", _GLOBAL, (input,))


_GLOBAL = PoolingParam(PoolKind.ADAPTIVE_AVG, output_size=(1, 1))


def interpolate(
    input: Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """``torch.nn.functional.interpolate`` of an (N, C, ...) input: every dim after the first
    two is resampled to ``size`` or by ``scale_factor`` (one of them), in any of torch's modes.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[[0.0, 2.0]]])
        >>> dtorch.nn.functional.interpolate(x, size=3, mode="linear", align_corners=True).tolist()
        [[[0.0, 1.0, 2.0]]]
    """
    tensor_arg("interpolate", input)
    n = max(input.ndim - 2, 1)
    sizes = None if size is None else _repeat(size, n, int)
    scales = None if scale_factor is None else _repeat(scale_factor, n, float)
    mode = str(mode) if isinstance(mode, str) else mode  # a numpy str as a str; else refused
    if mode != "area":  # torch's area mode is an adaptive average pool: an empty output is fine
        _check_output_sizes(input, sizes, scales)
    corners = None if align_corners is None else as_flag(align_corners, "interpolate",
                                                             "align_corners")  # fmt: skip
    param = InterpolateParam(sizes, scales, mode, corners, recompute_scale_factor,
                             as_flag(antialias, "interpolate", "antialias"))  # fmt: skip
    return record_one("interpolate", param, (input,))


def _check_output_sizes(
    input: Tensor, sizes: tuple[int, ...] | None, scales: tuple[float, ...] | None
) -> None:
    # torch's check of every mode (its meta kernels skip it for some, or divide by zero); an
    # empty spatial input is left to torch's own words on meta tensors
    given = input.shape[2:]
    if not all(given):
        return
    if scales is not None and len(scales) == len(given):
        sizes = tuple(math.floor(s * f) if math.isfinite(s * f) else 0
                      for s, f in zip(given, scales, strict=True))  # fmt: skip
    if sizes is not None and len(sizes) == len(given) and not all(s > 0 for s in sizes):
        raise ShapeError(
            f"interpolate: Input and output sizes should be greater than 0, but got input "
            f"{list(given)} output {list(sizes)}"
        )


def _repeat(value: object, n: int, kind: type[int] | type[float]) -> tuple[Any, ...]:
    # one number for every resampled dim, or one per dim (torch checks the count); a 0-d
    # torch tensor counts as its number, as in torch
    value = _item(value)
    items = [value] * n if isinstance(value, numbers.Real) else value
    if isinstance(items, (list, tuple)):
        items = [_item(v) for v in items]
    allowed = numbers.Integral if kind is int else numbers.Real  # numpy numbers too
    if (
        not isinstance(items, Sequence)
        or isinstance(items, str)
        or not all(isinstance(v, allowed) for v in items)
    ):
        what = "ints" if kind is int else "numbers"
        raise ParamError(f"interpolate: size and scale_factor take a number or a sequence of "
                         f"{what}; got {value!r}")  # fmt: skip
    return tuple(kind(v) for v in items)


def _item(value: Any) -> Any:
    return value.item() if isinstance(value, torch.Tensor) and value.ndim == 0 else value


def _pad_ints(pad: Any) -> tuple[int, ...]:
    # pad's sizes: ints (numpy integers, 0-d integer tensors: as torch), an even number
    try:
        pads = tuple(as_int("pad", "pad", p) for p in pad)
    except TypeError:
        pads = (0,)  # no sequence of ints: the error below
    if len(pads) % 2:
        raise ParamError(f"pad: pad must be an even number of ints; got {pad!r}")
    return pads


def pad(
    input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None
) -> Tensor:
    """``torch.nn.functional.pad``: ``pad`` is (left, right) of the last dim, then of the one
    before...; modes ``constant`` (any dims), ``reflect``, ``replicate``, ``circular``.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[1.0, 2.0]])
        >>> dtorch.nn.functional.pad(x, (1, 2), value=9.0).tolist()
        [[9.0, 1.0, 2.0, 9.0, 9.0]]
    """
    pads = _pad_ints(pad)
    param = PadParam(pads, mode, 0.0 if value is None else as_real("pad: value", value))
    return record_one("pad", param, (input,))
