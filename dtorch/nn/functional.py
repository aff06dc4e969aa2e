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
from dtorch.api.ops.convert import activated
from dtorch.api.ops.dropout import dropout
from dtorch.api.ops.elementwise import sigmoid, tanh
from dtorch.api.ops.embedding import embedding
from dtorch.api.ops.embedding_bag import embedding_bag
from dtorch.api.ops.fused import _apply_rotary_emb, _layer_norm_mul_add, _silu_linear_chunk
from dtorch.api.ops.grid_sample import affine_grid, grid_sample
from dtorch.api.ops.gumbel import gumbel_softmax
from dtorch.api.ops.linalg import linear
from dtorch.api.ops.linear_losses import linear_cross_entropy
from dtorch.api.ops.losses import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    smooth_l1_loss,
)
from dtorch.api.ops.mha import multi_head_attention_forward
from dtorch.api.ops.nn_misc import (
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d_with_indices,
    alpha_dropout,
    bilinear,
    celu_,
    channel_shuffle,
    elu_,
    feature_alpha_dropout,
    hardtanh_,
    leaky_relu_,
    max_pool1d_with_indices,
    max_pool2d_with_indices,
    max_pool3d_with_indices,
    pdist,
    relu_,
    rrelu,
    rrelu_,
    selu_,
    threshold_,
    upsample,
    upsample_bilinear,
    upsample_nearest,
)
from dtorch.api.ops.nn_misc_losses import (
    multi_margin_loss,
    multilabel_margin_loss,
    triplet_margin_with_distance_loss,
)
from dtorch.api.ops.nn_misc_pool import (
    local_response_norm,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
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
from dtorch.api.ops.volumetric import (
    adaptive_avg_pool3d,
    adaptive_max_pool3d,
    avg_pool3d,
    conv3d,
    conv_transpose3d,
    max_pool3d,
)
from dtorch.ir.opkind import ActivationKind
from dtorch.ir.params import ActivationParam

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_RELU = ActivationParam(ActivationKind.RELU)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.relu``; ``inplace=True`` changes ``input``'s shards and returns it."""
    return activated("relu", _RELU, input, inplace)


__all__ = [
    "SdpaOption",
    "_apply_rotary_emb",
    "_layer_norm_mul_add",
    "_silu_linear_chunk",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices",
    "adaptive_max_pool3d",
    "alpha_dropout",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "batch_norm",
    "bilinear",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "celu_",
    "channel_shuffle",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "cosine_embedding_loss",
    "cosine_similarity",
    "cross_entropy",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "elu",
    "elu_",
    "embedding",
    "embedding_bag",
    "grid_sample",
    "affine_grid",
    "linear_cross_entropy",
    "gumbel_softmax",
    "feature_alpha_dropout",
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
    "hardtanh_",
    "hinge_embedding_loss",
    "huber_loss",
    "instance_norm",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "leaky_relu_",
    "linear",
    "local_response_norm",
    "log_softmax",
    "logsigmoid",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "margin_ranking_loss",
    "max_pool1d",
    "max_pool1d_with_indices",
    "max_pool2d",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "max_pool3d",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "mish",
    "mse_loss",
    "multi_head_attention_forward",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "pairwise_distance",
    "pdist",
    "pixel_shuffle",
    "pixel_unshuffle",
    "poisson_nll_loss",
    "prelu",
    "relu",
    "relu6",
    "relu_",
    "rms_norm",
    "rrelu",
    "rrelu_",
    "scaled_dot_product_attention",
    "selu",
    "selu_",
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
    "threshold_",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
    "unfold",
    "upsample",
    "upsample_bilinear",
    "upsample_nearest",
]

#: The functional operators (DTorch's ``F._function_names``): every name above but the option
#: class, in ``__all__``'s order.
_function_names: tuple[str, ...] = tuple(name for name in __all__ if name != "SdpaOption")
