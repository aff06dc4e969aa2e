"""``dtorch.nn.functional``: torch.nn.functional's forms of the operators dtorch has.

Example:
    >>> import dtorch
    >>> import dtorch.nn.functional as F
    >>> F.relu(dtorch.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtorch.api.ops.attention import SdpaOption, scaled_dot_product_attention
from dtorch.api.ops.conv import conv2d
from dtorch.api.ops.elementwise import gelu, sigmoid, silu, tanh
from dtorch.api.ops.elementwise import relu as _relu
from dtorch.api.ops.fused import _apply_rotary_emb, _layer_norm_mul_add, _silu_linear_chunk
from dtorch.api.ops.linalg import linear
from dtorch.api.ops.reduce import log_softmax
from dtorch.api.ops.reduce import softmax as _softmax
from dtorch.api.ops.spatial import (
    adaptive_avg_pool2d,
    avg_pool2d,
    global_avg_pool2d,
    interpolate,
    max_pool2d,
    pad,
)

if TYPE_CHECKING:
    import torch

    from dtorch.api.tensor import Tensor


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.relu``; ``inplace=True`` changes ``input``'s shards and returns it."""
    out = _relu(input)
    return input.copy_(out) if inplace else out


def softmax(input: Tensor, dim: int, dtype: torch.dtype | None = None) -> Tensor:
    """``torch.nn.functional.softmax`` (``dim`` is required, as torch recommends)."""
    return _softmax(input, dim, dtype)


__all__ = [
    "SdpaOption",
    "_apply_rotary_emb",
    "_layer_norm_mul_add",
    "_silu_linear_chunk",
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "conv2d",
    "gelu",
    "global_avg_pool2d",
    "interpolate",
    "linear",
    "log_softmax",
    "max_pool2d",
    "pad",
    "relu",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "softmax",
    "tanh",
]
