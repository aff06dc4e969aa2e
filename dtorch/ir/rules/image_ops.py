"""The torch calls of the image operators (Conv, Pooling, Interpolate, Pad), read by two users.

The rules run them once on meta tensors of the inputs' shapes, to learn the output shapes and
dtypes and torch's own refusals (``meta_outputs``); the local kernels run them on the shards
(``dtorch.kernels.local.image``). One function per kind means that the shape a rule promises
is the shape a kernel produces, and that dtorch accepts exactly the arguments torch accepts.

Conv's weight is ``(out_channels, in_channels / groups, kH, kW)`` in both formats; with
``OperatorFormat.NHWC`` the input and output hold their channels last.

Example:
    >>> import torch
    >>> from dtorch.ir.opkind import PoolKind
    >>> from dtorch.ir.params import PoolingParam
    >>> x = torch.arange(16.0).view(1, 4, 4)
    >>> pool(PoolingParam(PoolKind.MAX, (2, 2), (2, 2)), x).tolist()
    [[[5.0, 7.0], [13.0, 15.0]]]
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from dtorch.errors import ParamError, ShapeError, UnsupportedShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OperatorFormat, PaddingType, PoolKind
from dtorch.ir.params import ConvParam, InterpolateParam, OpParam, PadParam, PoolingParam
from dtorch.ir.rules.promotion import Unimplemented, refusal

Outputs = torch.Tensor | tuple[torch.Tensor, ...]
Meta = tuple[tuple[int, ...], torch.dtype]
_PADDING_TEXT = {PaddingType.SAME: "same", PaddingType.VALID: "valid"}


def channel_dim(ndim: int, fmt: OperatorFormat) -> int:
    """The channel dim of a 3-D (C, H, W) or 4-D (N, C, H, W) image in ``fmt``."""
    return ndim - 1 if fmt is OperatorFormat.NHWC else ndim - 3


def spatial_dims(ndim: int, fmt: OperatorFormat = OperatorFormat.NCHW) -> tuple[int, int]:
    """The (H, W) dims of a 3-D or 4-D image in ``fmt``."""
    last = ndim - 2 if fmt is OperatorFormat.NHWC else ndim - 1
    return last - 1, last


def conv(
    param: ConvParam, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, groups: int
) -> torch.Tensor:
    """``F.conv2d`` in the param's format, with ``groups`` (a shard's local group count)."""
    nhwc = param.format is OperatorFormat.NHWC
    padding: str | tuple[int, ...] = _PADDING_TEXT.get(param.padding_type, param.pads)
    x = x.movedim(-1, -3) if nhwc else x
    out = F.conv2d(x, w, b, param.strides, padding, param.dilations, groups)
    return out.movedim(-3, -1).contiguous() if nhwc else out


def conv_full(
    param: OpParam, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None
) -> torch.Tensor:
    """The convolution of the full tensors (every group)."""
    assert isinstance(param, ConvParam)
    return conv(param, x, w, b, param.group)


def pool(param: OpParam, x: torch.Tensor) -> Outputs:
    """Max, average or adaptive average pooling of ``x`` (values, and indices on request)."""
    assert isinstance(param, PoolingParam)
    call = _POOLS.get(param.pool)
    if call is None:
        raise ParamError(f"pooling: {param.pool.name} pooling has no kernel; accepted: MAX, AVG, "
                         f"ADAPTIVE_AVG")  # fmt: skip
    return call(param, x)


# the torch call of each pooling kind, with the param's fields in torch's argument order
def _max(param: PoolingParam, x: torch.Tensor) -> Outputs:
    args = (x, param.kernel_size, param.strides, param.pads, param.dilations, param.ceil_mode)
    if param.return_indices:
        return F.max_pool2d_with_indices(*args, return_indices=True)
    return F.max_pool2d(*args)


def _avg(param: PoolingParam, x: torch.Tensor) -> Outputs:
    return F.avg_pool2d(
        x, param.kernel_size, param.strides, param.pads, param.ceil_mode,
        param.count_include_pad, param.divisor_override,
    )  # fmt: skip


def _adaptive_avg(param: PoolingParam, x: torch.Tensor) -> Outputs:
    return F.adaptive_avg_pool2d(x, (param.output_size[0], param.output_size[1]))


def _adaptive_max(param: PoolingParam, x: torch.Tensor) -> Outputs:
    # whole planes only (adaptive windows follow the whole size): the indices are global
    size = (param.output_size[0], param.output_size[1])
    return F.adaptive_max_pool2d(x, size, return_indices=param.return_indices)  # type: ignore[call-overload]


_POOLS: dict[PoolKind, Callable[[PoolingParam, torch.Tensor], Outputs]] = {
    PoolKind.MAX: _max,
    PoolKind.AVG: _avg,
    PoolKind.ADAPTIVE_AVG: _adaptive_avg,
    PoolKind.ADAPTIVE_MAX: _adaptive_max,
}


def interpolate(param: OpParam, x: torch.Tensor) -> torch.Tensor:
    """``F.interpolate`` with the param's size or scale factor, mode and options."""
    assert isinstance(param, InterpolateParam)
    size = list(param.size) if param.size is not None else None
    scale = list(param.scale_factor) if param.scale_factor is not None else None
    return F.interpolate(
        x, size, scale, param.mode, param.align_corners, param.recompute_scale_factor,
        param.antialias,
    )  # fmt: skip


def pad(param: OpParam, x: torch.Tensor) -> torch.Tensor:
    """``F.pad``; only constant mode takes a fill value (torch refuses one elsewhere)."""
    assert isinstance(param, PadParam)
    value = param.value if param.mode == "constant" or param.value else None
    return F.pad(x, list(param.pads), param.mode, value)


def meta_outputs(
    name: str, call: Callable[..., Outputs], param: OpParam, inputs: Sequence[Operand]
) -> tuple[Meta, ...]:
    """Shape and dtype of every output of ``call(param, *inputs)``, from torch on meta tensors
    (on empty CPU tensors where an input is empty, see ``_device``; cached); torch's refusal
    becomes a ShapeError naming the operator and the shapes."""
    specs = tuple((o.shape, o.dtype) for o in inputs)
    answer = _meta(call, param, specs, _field_types(param))
    if isinstance(answer, str):
        kind = UnsupportedShapeError if isinstance(answer, Unimplemented) else ShapeError
        raise kind(f"{name}: {answer}")
    return answer


#: The most elements the inputs and the outputs of a call with an empty input may hold for
#: the call to run on the CPU (see ``_meta``).
_REAL_LIMIT = 1 << 24


def _field_types(param: OpParam) -> tuple[object, ...]:
    """The types of ``param``'s values (of a tuple's items too), part of ``_meta``'s key: equal
    values of other types (True, 1, numpy's 1) may be torch's answer apart (one refused)."""
    kind: type = type(param)
    values = (getattr(param, name) for name in _field_names(kind))
    return tuple(tuple(map(type, v)) if type(v) is tuple else type(v) for v in values)


@functools.cache
def _field_names(kind: type) -> tuple[str, ...]:
    # once per param type, not on every recorded call (a third of the key's cost)
    return tuple(f.name for f in dataclasses.fields(kind))


@functools.lru_cache(maxsize=1024)
def _meta(
    call: Callable[..., Outputs],
    param: OpParam,
    specs: tuple[tuple[Any, torch.dtype], ...],
    types: tuple[object, ...] = (),
) -> tuple[Meta, ...] | str:
    """The call on meta tensors of ``specs``; where an input is empty, on empty CPU tensors
    too: the meta kernels skip checks the CPU kernels make of empty dims (adaptive pooling of
    an empty height) and refuse empty inputs those take (an empty batch to interpolate).
    Nothing is computed there, but outputs are made (``pad`` of an empty input fills all of
    its output): only inputs and meta outputs of at most ``_REAL_LIMIT`` elements go.
    ``types`` keys the cache only (``_field_types``)."""
    # a refusal is returned, not raised, so that lru_cache remembers it too
    answer = _run(call, param, specs, "meta")
    if not any(0 in shape for shape, _ in specs) or not _small(specs, answer):
        return answer
    return _run(call, param, specs, "cpu")


def _small(specs: tuple[tuple[Any, torch.dtype], ...], answer: tuple[Meta, ...] | str) -> bool:
    outputs = () if isinstance(answer, str) else answer
    return sum(math.prod(shape) for shape, _ in (*specs, *outputs)) <= _REAL_LIMIT


def _run(
    call: Callable[..., Outputs],
    param: OpParam,
    specs: tuple[tuple[Any, torch.dtype], ...],
    device: str,
) -> tuple[Meta, ...] | str:
    tensors = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in specs]
    try:
        out = call(param, *tensors)
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError) as error:
        shapes = " x ".join(str(list(shape)) for shape, _ in specs)
        return refusal(error, f"torch refuses inputs {shapes}: {error}")
    outs = out if isinstance(out, tuple) else (out,)
    return tuple((tuple(o.shape), o.dtype) for o in outs)
