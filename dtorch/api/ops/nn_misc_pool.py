"""Pooling-like forms of ``torch.nn.functional``, compositions of dtorch's operators:
``lp_pool1d``, ``lp_pool2d``, ``lp_pool3d``, ``local_response_norm``, ``max_unpool1d``,
``max_unpool2d`` and ``max_unpool3d``.

``lp_pool*`` follow torch's Python steps (``avg_pool`` of ``x ** p``, times the window size,
to the ``1 / p``; ``max_pool`` of ``|x|`` for an infinite ``p``), so their placements are the
pools': batch and channel shards stay, a sharded spatial dim only where every device holds
whole windows. ``local_response_norm`` averages ``x ** 2`` over a window of channels as torch
does (``avg_pool2d`` of a zero-padded (N, 1, C, rest) view, which is torch's ``avg_pool3d``
with a window of one over the trailing dims): the batch dim shards; a sharded channel dim is
refused (its windows cross shards). ``max_unpool*`` scatter the values into zeros of the
output's size at their indices: batch and channel shards stay, sharded spatial dims are
refused; an index out of range fails on the devices (at the fetch), as torch's does at the call.

Example:
    >>> import dtorch
    >>> import dtorch.nn.functional as F
    >>> F.lp_pool1d(dtorch.tensor([[3.0, 4.0]]), 2, 2).tolist()
    [[5.0]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.nn.functional as F

from dtorch.api.ops.conv import int_pair
from dtorch.api.ops.elementwise import relu
from dtorch.api.ops.scalars import as_real, is_scalar, python_number
from dtorch.api.ops.spatial import avg_pool2d, max_pool2d, pad
from dtorch.api.ops.spatial_1d import avg_pool1d, int_one, max_pool1d
from dtorch.api.ops.volumetric import avg_pool3d, int_triple, max_pool3d
from dtorch.api.record import composite, tensor_arg
from dtorch.errors import DtypeError, ShapeError
from dtorch.ir.placement import Replicate, Shard
from dtorch.ir.rules.promotion import function_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


# --- power-average pools ------------------------------------------------------------------------
def _power(name: str, norm_type: Any) -> float | int:
    """``norm_type`` as torch uses it: an int stays an int (``x ** 2`` of an integer tensor
    stays integral, so torch's integer average truncates), anything else a float."""
    p = python_number(norm_type) if is_scalar(norm_type) else None
    if type(p) is int:
        return p
    return as_real(f"{name}: norm_type", norm_type)


def _lp(out: Tensor, norm_type: float, count: int) -> Tensor:
    # torch's: sign(out) * relu(|out|) (a negative average of odd powers kept), scaled back
    return (out.sign() * relu(out.abs())).mul(count).pow(1.0 / norm_type)


@composite()
def lp_pool1d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
    ceil_mode: bool = False,
) -> Tensor:  # fmt: skip
    """``torch.nn.functional.lp_pool1d``: ``(sum over each window of x ** p) ** (1 / p)``
    of an (N, C, L) or (C, L) input.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.lp_pool1d(dtorch.tensor([[1.0, 1.0, 2.0, 2.0]]), 1, 2).tolist()
        [[2.0, 4.0]]
    """
    tensor_arg("lp_pool1d", input)
    p = _power("lp_pool1d", norm_type)
    if math.isinf(p):  # torch's: the largest (or smallest) magnitude
        sign = 1 if p > 0 else -1
        peak = max_pool1d(sign * input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        return sign * cast("Tensor", peak)  # without return_indices: one tensor
    k = int_one("lp_pool1d", "kernel_size", kernel_size)
    out = avg_pool1d(input.pow(p), kernel_size, stride, 0, ceil_mode)
    return _lp(out, p, k)


@composite()
def lp_pool2d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
    ceil_mode: bool = False,
) -> Tensor:  # fmt: skip
    """``torch.nn.functional.lp_pool2d``: the power-average pool of an (N, C, H, W) or
    (C, H, W) input.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.lp_pool2d(dtorch.ones(1, 2, 2), 2, 2).tolist()
        [[[2.0]]]
    """
    tensor_arg("lp_pool2d", input)
    p = _power("lp_pool2d", norm_type)
    if math.isinf(p):
        sign = 1 if p > 0 else -1
        peak = max_pool2d(sign * input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        return sign * cast("Tensor", peak)  # without return_indices: one tensor
    kh, kw = int_pair("lp_pool2d", "kernel_size", kernel_size)
    out = avg_pool2d(input.pow(p), kernel_size, stride, 0, ceil_mode)
    return _lp(out, p, kh * kw)


@composite()
def lp_pool3d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
    ceil_mode: bool = False,
) -> Tensor:  # fmt: skip
    """``torch.nn.functional.lp_pool3d``: the power-average pool of an (N, C, D, H, W) or
    (C, D, H, W) input.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.lp_pool3d(dtorch.ones(1, 2, 2, 2), 1, 2).tolist()
        [[[[8.0]]]]
    """
    tensor_arg("lp_pool3d", input)
    p = _power("lp_pool3d", norm_type)
    if math.isinf(p):
        sign = 1 if p > 0 else -1
        peak = max_pool3d(sign * input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        return sign * cast("Tensor", peak)  # without return_indices: one tensor
    kd, kh, kw = int_triple("lp_pool3d", "kernel_size", kernel_size)
    out = avg_pool3d(input.pow(p), kernel_size, stride, 0, ceil_mode)
    return _lp(out, p, kd * kh * kw)


# --- local response norm ------------------------------------------------------------------------
def _lrn_probe(a: torch.Tensor) -> torch.Tensor:
    return F.local_response_norm(a.reshape(1, 1, 1, 1), 1)


def _lrn_probe_3d(a: torch.Tensor) -> torch.Tensor:
    return F.local_response_norm(a.reshape(1, 1, 1), 1)


@composite()
def local_response_norm(
    input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Tensor:
    """``torch.nn.functional.local_response_norm``: ``x / (k + alpha * mean(x ** 2 over
    size neighbouring channels)) ** beta`` of an (N, C, *) input (at least 3 dims).

    Example:
        >>> import dtorch
        >>> x = dtorch.ones(1, 2, 1)
        >>> dtorch.nn.functional.local_response_norm(x, 2, alpha=1.0, beta=1.0).flatten().tolist()
        [0.6666666865348816, 0.5]
    """
    tensor_arg("local_response_norm", input)
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} "
                         f"dimensions)")  # fmt: skip
    size = int_one("local_response_norm", "size", size)
    probe = _lrn_probe if input.ndim > 3 else _lrn_probe_3d  # torch's 4-D form pools in 3-D
    function_dtype("local_response_norm", probe, ((input.dtype, False),))
    if input.numel() == 0:
        return input
    n, c = input.shape[:2]
    square = (input * input).reshape((n, 1, c, math.prod(input.shape[2:])))
    padded = pad(square, (0, 0, size // 2, (size - 1) // 2))
    div = avg_pool2d(padded, (size, 1), stride=1).reshape(tuple(input.shape))
    return input / div.mul(alpha).add(k).pow(beta)


# --- max unpools --------------------------------------------------------------------------------
def _default_sizes(
    input: Tensor, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int]
) -> list[int]:
    last = input.shape[input.ndim - len(kernel) :]
    return [
        (n - 1) * s + k - 2 * p for n, k, s, p in zip(last, kernel, stride, padding, strict=True)
    ]


def _unpool_sizes(
    input: Tensor, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
    output_size: Any,
) -> list[int]:  # fmt: skip
    """torch's ``_unpool_output_size``: the default sizes, or ``output_size`` (optionally with
    the two leading dims) within a stride of them."""
    default = _default_sizes(input, kernel, stride, padding)
    if output_size is None:
        sizes = default
    else:
        sizes = [int(s) for s in output_size]
        sizes = sizes[2:] if len(sizes) == len(kernel) + 2 else sizes
        if len(sizes) != len(kernel):
            raise ValueError(f"output_size should be a sequence containing {len(kernel)} or "
                             f"{len(kernel) + 2} elements, but it has a length of "
                             f"'{len(sizes)}'")  # fmt: skip
        for d, (want, base, s) in enumerate(zip(sizes, default, stride, strict=True)):
            if not base - s < want < base + s:
                raise ValueError(f'invalid output_size "{list(output_size)}" (dim {d} must be '
                                 f"between {base - s} and {base + s})")  # fmt: skip
    for d, s in enumerate(sizes):
        if s < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial "
                             f"dimensions, but got output_size[{d}]={s}")  # fmt: skip
    return sizes


def _check_unpool(name: str, input: Tensor, indices: Any, ranks: tuple[int, int]) -> None:
    tensor_arg(name, input)
    tensor_arg(name, indices, "indices")
    if input.ndim not in ranks:
        raise ShapeError(f"{name}: Expected {ranks[0]}D or {ranks[1]}D input, but got input "
                         f"of shape {list(input.shape)}")  # fmt: skip
    if indices.dtype != torch.int64:
        raise DtypeError(f"{name}: elements in indices should be type int64 but got: "
                         f"{indices.dtype}")  # fmt: skip
    if indices.shape != input.shape:
        raise ShapeError(f"{name}: Expected shape of indices to be same as that of the input "
                         f"tensor ({list(input.shape)}) but got indices tensor with shape: "
                         f"{list(indices.shape)}")  # fmt: skip


def _scattered(input: Tensor, indices: Tensor, sizes: list[int]) -> Tensor:
    """Zeros of the output's shape, each value written at its index in its flat plane."""
    k = len(sizes)
    lead = tuple(input.shape[: input.ndim - k])
    keep = [p if isinstance(p, Shard) and p.dim < len(lead) else Replicate()
            for p in input.placements]  # fmt: skip
    zeros = input.new_zeros((*lead, math.prod(sizes))).redistribute(placements=keep)
    flat = zeros.scatter(-1, indices.flatten(len(lead)), input.flatten(len(lead)))
    return flat.reshape((*lead, *sizes))


@composite()
def max_unpool1d(
    input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
    output_size: Any = None,
) -> Tensor:  # fmt: skip
    """``torch.nn.functional.max_unpool1d``: the inverse of ``max_pool1d`` given its indices
    (zeros where no maximum came from), of an (N, C, L) or (C, L) input.

    Example:
        >>> import dtorch
        >>> x, i = dtorch.tensor([[5.0]]), dtorch.tensor([[1]])
        >>> dtorch.nn.functional.max_unpool1d(x, i, 2).tolist()
        [[0.0, 5.0]]
    """
    _check_unpool("max_unpool1d", input, indices, (2, 3))
    k = int_one("max_unpool1d", "kernel_size", kernel_size)
    s = k if stride is None else int_one("max_unpool1d", "stride", stride)
    p = int_one("max_unpool1d", "padding", padding, low=0)
    one = None if output_size is None else _as_list(output_size)
    return _scattered(input, indices, _unpool_sizes(input, [k], [s], [p], one))


@composite()
def max_unpool2d(
    input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
    output_size: Any = None,
) -> Tensor:  # fmt: skip
    """``torch.nn.functional.max_unpool2d``: the inverse of ``max_pool2d`` given its indices,
    of an (N, C, H, W) or (C, H, W) input.

    Example:
        >>> import dtorch
        >>> x, i = dtorch.tensor([[[5.0]]]), dtorch.tensor([[[3]]])
        >>> dtorch.nn.functional.max_unpool2d(x, i, 2).tolist()
        [[[0.0, 0.0], [0.0, 5.0]]]
    """
    _check_unpool("max_unpool2d", input, indices, (3, 4))
    k = int_pair("max_unpool2d", "kernel_size", kernel_size)
    s = k if stride is None else int_pair("max_unpool2d", "stride", stride)
    p = int_pair("max_unpool2d", "padding", padding, low=0)
    size = None if output_size is None else _as_list(output_size)
    return _scattered(input, indices, _unpool_sizes(input, k, s, p, size))


@composite()
def max_unpool3d(
    input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
    output_size: Any = None,
) -> Tensor:  # fmt: skip
    """``torch.nn.functional.max_unpool3d``: the inverse of ``max_pool3d`` given its indices,
    of an (N, C, D, H, W) or (C, D, H, W) input.

    Example:
        >>> import dtorch
        >>> x, i = dtorch.tensor([[[[5.0]]]]), dtorch.tensor([[[[7]]]])
        >>> dtorch.nn.functional.max_unpool3d(x, i, 2).flatten().tolist()
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0]
    """
    _check_unpool("max_unpool3d", input, indices, (4, 5))
    k = int_triple("max_unpool3d", "kernel_size", kernel_size)
    s = k if stride is None else int_triple("max_unpool3d", "stride", stride)
    p = int_triple("max_unpool3d", "padding", padding, low=0)
    size = None if output_size is None else _as_list(output_size)
    return _scattered(input, indices, _unpool_sizes(input, k, s, p, size))


def _as_list(value: Any) -> list[int]:
    # torch's _single: an int stands for a one-element size
    return [value] if isinstance(value, int) else list(value)
