"""``conv2d``: 2-D convolution of dtorch images, NCHW or NHWC.

Layouts (``dtorch.ir.rules.conv``): a sharded batch stays sharded; input channels sharded like
the weight's in-channels give a Partial output; a weight sharded on its out-channels gives
output channels sharded; a grouped or depthwise conv shards its channels where every device
holds whole groups; a Partial input or weight (with the other Replicate) gives Partial. A
sharded spatial dim is refused (its windows would cross shard boundaries).

Example:
    >>> import dtorch
    >>> x, w = dtorch.ones(1, 2, 4, 4), dtorch.ones(3, 2, 3, 3)
    >>> dtorch.nn.functional.conv2d(x, w, padding="same")[0, 0].tolist()[0]
    [8.0, 12.0, 12.0, 8.0]
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from dtorch.api.record import record_one, tensor_arg, with_inputs
from dtorch.errors import ParamError
from dtorch.ir.opkind import OperatorFormat, PaddingType
from dtorch.ir.params import ConvParam
from dtorch.type import OperatorFormat as PublicFormat
from dtorch.type import PaddingType as PublicPadding

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

IntOrPair = int | Sequence[int]
_FORMATS = {"nchw": OperatorFormat.NCHW, "nhwc": OperatorFormat.NHWC}
#: One param object per distinct set of arguments: a model's loop then records operators whose
#: param is the very object the graph's inference cache saw before (it keys on identity).
conv_param = functools.lru_cache(maxsize=512, typed=True)(ConvParam)
_PADDINGS = {"same": PaddingType.SAME, "valid": PaddingType.VALID}


def int_pair(name: str, what: str, value: IntOrPair, low: int = 1) -> tuple[int, int]:
    """``value`` (an int, or one or two ints) as an (H, W) pair, each at least ``low``."""
    if isinstance(value, (int, np.integer)):
        items = [value]
    elif isinstance(value, (tuple, list)):
        items = list(value)
    else:  # torch takes an int or a tuple/list of ints
        raise TypeError(
            f"{name}: {what} must be an int or a pair of ints, each at least {low}; got {value!r}"
        )
    if len(items) == 1:
        items *= 2
    if len(items) != 2 or not all(isinstance(v, (int, np.integer)) and v >= low for v in items):
        raise ParamError(
            f"{name}: {what} must be an int or a pair of ints, each at least {low}; got {value!r}"
        )
    return int(items[0]), int(items[1])  # numpy integers as ints (the codec sends ints)


def operator_format(name: str, value: object) -> OperatorFormat:
    """An image layout given as ``"nchw"``/``"nhwc"`` or a ``dtorch.type.OperatorFormat``."""
    if isinstance(value, OperatorFormat):
        return value
    text = value.value if isinstance(value, PublicFormat) else value
    found = _FORMATS.get(text.lower()) if isinstance(text, str) else None
    if found is None:
        raise ParamError(f"{name}: format must be 'nchw' or 'nhwc'; got {value!r}")
    return found


def _padding(value: str | PublicPadding | IntOrPair) -> tuple[PaddingType, tuple[int, int]]:
    # 'same' / 'valid' (text or dtorch.type.PaddingType), else explicit numbers
    text = value.value if isinstance(value, PublicPadding) else value
    if isinstance(text, str):
        kind = _PADDINGS.get(text)
        if kind is None:
            raise ParamError(f"conv2d: padding must be 'same', 'valid', an int or a pair of "
                             f"ints; got {value!r}")  # fmt: skip
        return kind, (0, 0)
    return PaddingType.EXPLICIT, int_pair("conv2d", "padding", text, low=0)


@with_inputs
def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrPair = 1,
    padding: str | PublicPadding | IntOrPair = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
    *,
    format: str | PublicFormat | OperatorFormat = "nchw",
) -> Tensor:
    """``torch.nn.functional.conv2d`` of a (N, C, H, W) or (C, H, W) input, or of (N, H, W,
    C) / (H, W, C) with ``format="nhwc"`` (the weight is (out, in / groups, kH, kW) in both);
    ``padding`` is numbers, ``"same"`` or ``"valid"``. Placements: see the module.

    Example:
        >>> import dtorch
        >>> x = dtorch.ones(1, 3, 3, 2)  # NHWC
        >>> dtorch.nn.functional.conv2d(x, dtorch.ones(4, 2, 2, 2), format="nhwc").shape
        torch.Size([1, 2, 2, 4])
    """
    if not isinstance(groups, int) or groups < 1:
        raise ParamError(f"conv2d: groups must be a positive int; got {groups!r}")
    tensor_arg("conv2d", input)
    tensor_arg("conv2d", weight, "weight")
    padding_type, pads = _padding(padding)
    param = conv_param(
        dilations=int_pair("conv2d", "dilation", dilation),
        group=groups,
        kernel_size=tuple(weight.shape[2:]),
        padding_type=padding_type,
        pads=pads,
        strides=int_pair("conv2d", "stride", stride),
        format=operator_format("conv2d", format),
    )
    return record_one("conv2d", param, (input, weight) if bias is None else (input, weight, bias))
