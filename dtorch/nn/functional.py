"""``dtorch.nn.functional``: torch.nn.functional's forms of the operators dtorch has.

Example:
    >>> import dtorch
    >>> import dtorch.nn.functional as F
    >>> F.relu(dtorch.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtorch.api.ops.activations import (
    elu,
    gelu,
    glu,
    hardtanh,
    leaky_relu,
    log_softmax,
    relu6,
    silu,
    softmax,
)
from dtorch.api.ops.activations_more import (
    celu,
    hardshrink,
    hardsigmoid,
    hardswish,
    logsigmoid,
    mish,
    selu,
    softmin,
    softplus,
    softshrink,
    softsign,
    tanhshrink,
    threshold,
)
from dtorch.api.ops.attention import SdpaOption, scaled_dot_product_attention
from dtorch.api.ops.class_losses import cross_entropy, nll_loss, one_hot
from dtorch.api.ops.conv import conv2d
from dtorch.api.ops.conv_transpose import conv_transpose1d, conv_transpose2d, fold, unfold
from dtorch.api.ops.convert import written
from dtorch.api.ops.dropout import dropout
from dtorch.api.ops.elementwise import relu as _relu
from dtorch.api.ops.elementwise import sigmoid, tanh
from dtorch.api.ops.embedding import embedding
from dtorch.api.ops.fused import _apply_rotary_emb, _layer_norm_mul_add, _silu_linear_chunk
from dtorch.api.ops.linalg import linear
from dtorch.api.ops.losses import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    smooth_l1_loss,
)
from dtorch.api.ops.nn_more import (
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    dropout1d,
    dropout2d,
    dropout3d,
    instance_norm,
    pixel_shuffle,
    pixel_unshuffle,
    prelu,
)
from dtorch.api.ops.nn_more_losses import (
    cosine_embedding_loss,
    gaussian_nll_loss,
    hinge_embedding_loss,
    margin_ranking_loss,
    multilabel_soft_margin_loss,
    pairwise_distance,
    poisson_nll_loss,
    soft_margin_loss,
    triplet_margin_loss,
)
from dtorch.api.ops.norm import batch_norm, group_norm, layer_norm, rms_norm
from dtorch.api.ops.spatial import (
    adaptive_avg_pool2d,
    avg_pool2d,
    global_avg_pool2d,
    interpolate,
    max_pool2d,
    pad,
)
from dtorch.api.ops.spatial_1d import adaptive_avg_pool1d, avg_pool1d, conv1d, max_pool1d
from dtorch.api.ops.vector_norms import cosine_similarity, normalize

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.relu``; ``inplace=True`` changes ``input``'s shards and returns it."""
    return written(input, lambda: _relu(input), inplace)


__all__ = [
    "SdpaOption",
    "_apply_rotary_emb",
    "_layer_norm_mul_add",
    "_silu_linear_chunk",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "cosine_embedding_loss",
    "cosine_similarity",
    "cross_entropy",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "elu",
    "embedding",
    "fold",
    "gaussian_nll_loss",
    "gelu",
    "glu",
    "global_avg_pool2d",
    "group_norm",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "hinge_embedding_loss",
    "huber_loss",
    "instance_norm",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "logsigmoid",
    "margin_ranking_loss",
    "max_pool1d",
    "max_pool2d",
    "mish",
    "mse_loss",
    "multilabel_soft_margin_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "pairwise_distance",
    "pixel_shuffle",
    "pixel_unshuffle",
    "poisson_nll_loss",
    "prelu",
    "relu",
    "relu6",
    "rms_norm",
    "scaled_dot_product_attention",
    "selu",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "soft_margin_loss",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
    "triplet_margin_loss",
    "unfold",
]

#: The functional operators (DTorch's ``F._function_names``): every name above but the option
#: class, in ``__all__``'s order.
_function_names: tuple[str, ...] = tuple(name for name in __all__ if name != "SdpaOption")
