"""The 1-D forms of the image operators: ``conv1d``, ``max_pool1d``, ``avg_pool1d``,
``adaptive_avg_pool1d``, with torch.nn.functional's signatures.

Each one views its (N, C, L) or (C, L) input as an image of height one, (N, C, 1, L), runs the
2-D operator (Conv, Pooling) with a window of height one, and drops the height again; the
operator is recorded under the 1-D name, so its refusals name it (and show the shapes given,
in torch's 1-D words where torch refuses them). Placements are the 2-D
operator's (``dtorch.nn.functional.conv2d``, ``max_pool2d``...): a sharded batch stays sharded,
channels shard where conv2d allows it (in-channels with the weight's give Partial, the weight's
out-channels give output channels, grouped convs in whole groups), the linear ones keep
Partial. A sharded length is kept where every device holds whole windows of its chunk of the
output (a pointwise conv1d; a pooling whose stride is its kernel over aligned shards: see
``dtorch.ir.rules.spatial.local_window_dims``); any other (and a sharded kernel) is refused:
its windows would cross shard boundaries (a halo exchange, not implemented).

Example:
    >>> import dtorch
    >>> import dtorch.nn.functional as F
    >>> x = dtorch.arange(6.0).view(1, 1, 6)
    >>> F.conv1d(x, dtorch.ones(1, 1, 2)).tolist(), F.max_pool1d(x, 3).tolist()
    ([[[1.0, 3.0, 5.0, 7.0, 9.0]]], [[[2.0, 5.0]]])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as torch_f

from dtorch.api.dims import as_flag
from dtorch.api.ops.conv import conv_param
from dtorch.api.ops.spatial import pooling_param
from dtorch.api.record import record, record_one, tensor_arg, with_inputs
from dtorch.errors import ParamError, PlacementError, ShapeError, UnsupportedDtypeError
from dtorch.ir.dtypes import scalar_type_name
from dtorch.ir.opkind import OperatorFormat, PaddingType, PoolKind
from dtorch.ir.placement import Shard, format_placements

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

IntOrOne = int | Sequence[int]
_PADDINGS = {"same": PaddingType.SAME, "valid": PaddingType.VALID}
_TORCH_MAX_POOL: Any = torch_f.max_pool1d  # return_indices a bool here, not a Literal
_WINDOW = "its windows would cross shard boundaries (a halo exchange, not implemented)"
_SHARDS = "shards of the batch and channel dims"
#: What each operator accepts on a mesh dim, for the refusal of a sharded length.
_ACCEPTED = {
    "conv1d": f"Replicate, Partial, {_SHARDS} as conv2d takes them",
    "max_pool1d": f"Replicate, {_SHARDS}",
    "avg_pool1d": f"Replicate, Partial, {_SHARDS}",
    "adaptive_avg_pool1d": f"Replicate, Partial, {_SHARDS}",
}


def int_one(name: str, what: str, value: Any, low: int = 1) -> int:
    """``value`` (an int, or a sequence of one int, as torch's ``_single`` takes it) as an int
    of at least ``low``.

    Example:
        >>> int_one("conv1d", "stride", (2,)), int_one("conv1d", "stride", 3)
        (2, 3)
    """
    items = [value] if isinstance(value, (int, np.integer)) else value
    ok = isinstance(items, Sequence) and len(items) == 1
    if not ok or isinstance(items[0], bool) or not isinstance(items[0], (int, np.integer)):
        raise ParamError(f"{name}: {what} must be an int or a sequence of one int; got {value!r}")
    if items[0] < low:
        raise ParamError(f"{name}: {what} must be at least {low}; got {value!r}")
    return int(items[0])  # numpy integers as ints (the codec sends ints)


def _check_input(name: str, x: Tensor, dims: tuple[int, ...] = (2, 3)) -> None:
    # torch's 1-D operators take (C, L) or (N, C, L)
    tensor_arg(name, x)
    if x.ndim not in dims:
        shapes = " or ".join(("(C, L)", "(N, C, L)")[d - 2] for d in dims)
        raise ShapeError(f"{name}: needs a {shapes} input; got shape {list(x.shape)}")


def _refuse_length_shard(name: str, tensors: Sequence[tuple[str, Tensor]]) -> None:
    """PlacementError where a tensor's last dim (the length, or conv1d's kernel) is sharded
    (called once the 2-D operator refused the placements)."""
    for label, t in tensors:
        for m, p in enumerate(t.placements):
            if isinstance(p, Shard) and p.dim % t.ndim == t.ndim - 1:
                got = " x ".join(format_placements(u.placements) for _, u in tensors)
                raise PlacementError(
                    f"{name}: got {got} on mesh {tuple(t.device_mesh.shape)}; dim "
                    f"{t.ndim - 1} (the length of the {label}) is sharded on mesh dim {m}, and "
                    f"{_WINDOW}; accepted per mesh dimension: {_ACCEPTED[name]}; redistribute "
                    f"it to Replicate first"
                )


def _height_one(x: Tensor) -> Tensor:
    # (N, C, L) -> (N, C, 1, L): the 2-D operator's image of height one
    return x.unsqueeze(-2)


def _in_1d(
    name: str,
    record_2d: Callable[[], Any],
    given: Sequence[Tensor],
    torch_1d: Callable[..., Any],
    lengths: Sequence[tuple[str, Tensor]],
) -> Any:
    """``record_2d()``, whose shape refusals show the user's shapes (not the height-one ones
    recorded): torch's own 1-D refusal (``torch_1d`` of meta tensors of ``given``'s shapes)
    where the 2-D operator's torch refused, else the message with the shapes given; and whose
    placement refusal of a sharded length (of the ``lengths``) says so in 1-D words."""
    try:
        return record_2d()
    except PlacementError:
        _refuse_length_shard(name, lengths)
        raise
    except ShapeError as error:
        shapes = " x ".join(str(list(t.shape)) for t in given)
        why = _torch_refusal(torch_1d, given) if "torch refuses" in str(error) else None
        if why is not None:
            raise type(error)(f"{name}: torch refuses inputs {shapes}: {why}") from None
        text = str(error)
        for t in given:  # the height-one shape of each one given, in the message
            high = [*t.shape[:-1], 1, t.shape[-1]]
            text = text.replace(str(high), str(list(t.shape)))
        raise type(error)(text.replace("kH, kW", "kL")) from None


def _torch_refusal(torch_1d: Callable[..., Any], given: Sequence[Tensor]) -> str | None:
    # torch's 1-D function on meta tensors of the given shapes and dtypes
    try:
        torch_1d(*(torch.empty(t.shape, dtype=t.dtype, device="meta") for t in given))
    except (RuntimeError, ValueError) as error:
        return str(error)
    return None


def _padding(value: Any) -> tuple[PaddingType, tuple[int, int]]:
    # 'same' / 'valid', else one number (of the length; the height is not padded)
    if isinstance(value, str):
        kind = _PADDINGS.get(value)
        if kind is None:
            raise ParamError(f"conv1d: padding must be 'same', 'valid' or an int; got {value!r}")
        return kind, (0, 0)
    return PaddingType.EXPLICIT, (0, int_one("conv1d", "padding", value, low=0))


@with_inputs
def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrOne = 1,
    padding: str | IntOrOne = 0,
    dilation: IntOrOne = 1,
    groups: int = 1,
) -> Tensor:
    """``torch.nn.functional.conv1d`` of an (N, C, L) or (C, L) input with an
    (out_channels, in_channels / groups, kL) weight; ``padding`` is a number, ``"same"`` or
    ``"valid"``. Placements: conv2d's (see the module); the lengths must not be sharded.

    Example:
        >>> import dtorch
        >>> x = dtorch.ones(2, 3, 5)
        >>> dtorch.nn.functional.conv1d(x, dtorch.ones(4, 3, 3), padding="same")[0, 0].tolist()
        [6.0, 9.0, 9.0, 9.0, 6.0]
    """
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ParamError(f"conv1d: groups must be a positive int; got {groups!r}")
    _check_input("conv1d", input)
    tensor_arg("conv1d", weight, "weight")
    if weight.ndim != 3:
        raise ShapeError(f"conv1d: needs an (out_channels, in_channels / groups, kL) weight; "
                         f"got shape {list(weight.shape)}")  # fmt: skip
    padding_type, pads = _padding(padding)
    step, spread = int_one("conv1d", "stride", stride), int_one("conv1d", "dilation", dilation)
    param = conv_param(
        dilations=(1, spread),
        group=int(groups),
        kernel_size=(1, weight.shape[2]),
        padding_type=padding_type,
        pads=pads,
        strides=(1, step),
        format=OperatorFormat.NCHW,
    )
    pad_1d: Any = padding if isinstance(padding, str) else pads[1]  # torch's words for it
    inputs = (_height_one(input), weight.unsqueeze(2))
    given = (input, weight) if bias is None else (input, weight, bias)
    out = _in_1d(
        "conv1d",
        lambda: record_one("conv1d", param, inputs if bias is None else (*inputs, bias)),
        given,
        lambda x, w, b=None: torch_f.conv1d(x, w, b, step, pad_1d, spread, int(groups)),
        (("input", input), ("kernel", weight)),
    )
    return out.squeeze(-2)


def _window(
    name: str, kernel_size: IntOrOne, stride: IntOrOne | None, padding: IntOrOne
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """Kernel, stride (the kernel when None or empty, as torch) and padding as (1, n) pairs."""
    kernel = int_one(name, "kernel_size", kernel_size)
    empty = stride is None or (not isinstance(stride, (int, np.integer)) and len(stride) == 0)
    step = kernel if empty else int_one(name, "stride", stride)
    return (1, kernel), (1, step), (0, int_one(name, "padding", padding, low=0))


def max_pool1d(
    input: Tensor,
    kernel_size: IntOrOne,
    stride: IntOrOne | None = None,
    padding: IntOrOne = 0,
    dilation: IntOrOne = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """``torch.nn.functional.max_pool1d`` of an (N, C, L) or (C, L) input; with
    ``return_indices`` also the int64 position of every maximum along L. Without it, as in
    torch, floating-point inputs only (an UnsupportedDtypeError for integers and bools).

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[1.0, 3.0, 4.0, 2.0]])
        >>> out, idx = dtorch.nn.functional.max_pool1d(x, 2, return_indices=True)
        >>> out.tolist(), idx.tolist()
        ([[3.0, 4.0]], [[1, 2]])
    """
    _check_input("max_pool1d", input)
    kernel, strides, pads = _window("max_pool1d", kernel_size, stride, padding)
    dilations = (1, int_one("max_pool1d", "dilation", dilation))
    ceil = as_flag(ceil_mode, "max_pool1d", "ceil_mode")
    with_indices = bool(return_indices)  # torch's functional dispatches on its truth
    param = pooling_param(PoolKind.MAX, kernel, strides, pads, dilations, ceil,
                           return_indices=with_indices)  # fmt: skip
    if not with_indices and not input.dtype.is_floating_point:  # torch's kernel: floats only
        raise UnsupportedDtypeError(
            f'max_pool1d: "max_pool1d_impl" not implemented for '
            f"'{scalar_type_name(input.dtype)}' (as in torch); accepted: floating-point dtypes, "
            "or return_indices=True"
        )
    outs = _in_1d(
        "max_pool1d",
        lambda: record("max_pool1d", param, (_height_one(input),)),
        (input,),
        lambda t: _TORCH_MAX_POOL(
            t, kernel[1], strides[1], pads[1], dilations[1], ceil, with_indices
        ),
        (("input", input),),
    )
    if return_indices:
        return outs[0].squeeze(-2), outs[1].squeeze(-2)
    return outs[0].squeeze(-2)


def avg_pool1d(
    input: Tensor,
    kernel_size: IntOrOne,
    stride: IntOrOne | None = None,
    padding: IntOrOne = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """``torch.nn.functional.avg_pool1d`` of an (N, C, L) or (C, L) input.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[1.0, 3.0, 5.0]])
        >>> dtorch.nn.functional.avg_pool1d(x, 2, padding=1, count_include_pad=False).tolist()
        [[1.0, 4.0]]
    """
    _check_input("avg_pool1d", input)
    kernel, strides, pads = _window("avg_pool1d", kernel_size, stride, padding)
    ceil = as_flag(ceil_mode, "avg_pool1d", "ceil_mode")
    include = as_flag(count_include_pad, "avg_pool1d", "count_include_pad")
    param = pooling_param(PoolKind.AVG, kernel, strides, pads, ceil_mode=ceil,
                           count_include_pad=include)  # fmt: skip
    out = _in_1d(
        "avg_pool1d",
        lambda: record_one("avg_pool1d", param, (_height_one(input),)),
        (input,),
        lambda t: torch_f.avg_pool1d(t, kernel[1], strides[1], pads[1], ceil, include),
        (("input", input),),
    )
    return out.squeeze(-2)


def adaptive_avg_pool1d(input: Tensor, output_size: IntOrOne) -> Tensor:
    """``torch.nn.functional.adaptive_avg_pool1d``: the mean over ``output_size`` windows
    that cut the length of an (N, C, L) or (C, L) input (a size of 0: an empty output).

    Example:
        >>> import dtorch
        >>> x = dtorch.arange(6.0).view(1, 6)
        >>> dtorch.nn.functional.adaptive_avg_pool1d(x, 2).tolist()
        [[1.0, 4.0]]
    """
    _check_input("adaptive_avg_pool1d", input)
    size = int_one("adaptive_avg_pool1d", "output_size", output_size, low=0)
    param = pooling_param(PoolKind.ADAPTIVE_AVG, output_size=(1, size))
    out = _in_1d(
        "adaptive_avg_pool1d",
        lambda: record_one("adaptive_avg_pool1d", param, (_height_one(input),)),
        (input,),
        lambda t: torch_f.adaptive_avg_pool1d(t, size),
        (("input", input),),
    )
    return out.squeeze(-2)


__all__ = ["adaptive_avg_pool1d", "avg_pool1d", "conv1d", "max_pool1d"]
