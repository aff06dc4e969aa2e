"""``dtorch.nn.modules``: the Module class and the layers, one concept per file (torch's
layout: ``module``, ``container``, ``container_params``, ``linear``, ``parallel_linear``,
``activation``, ``flatten``, ``conv``, ``pooling``, ``padding``, ``normalization``, ``sparse``,
``dropout``, ``sloped_activation``, ``activation_more``, ``loss``, ``nn_more`` (PReLU,
instance norms, channel dropouts, transposed convolutions), ``nn_more_spatial`` (pixel
shuffles, adaptive max pools, Unfold/Fold), ``nn_more_loss`` (more losses); ``state`` holds
``state_dict``, ``loading`` ``load_state_dict``, ``paths`` the dotted-path getters, ``hooks``
the forward hooks and the redistribution around ``forward``).

Example:
    >>> from dtorch.nn.modules.linear import Linear
    >>> from dtorch.nn.modules import Linear as Same
    >>> Linear is Same
    True
"""

from dtorch.nn.modules.activation import (
    GELU,
    Hardtanh,
    LogSoftmax,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
)
from dtorch.nn.modules.activation_more import (
    CELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    LogSigmoid,
    Mish,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanhshrink,
    Threshold,
)
from dtorch.nn.modules.container import ModuleDict, ModuleList, Sequential
from dtorch.nn.modules.container_params import ParameterDict, ParameterList
from dtorch.nn.modules.conv import Conv1d, Conv2d
from dtorch.nn.modules.dropout import Dropout
from dtorch.nn.modules.flatten import Flatten, Unflatten
from dtorch.nn.modules.linear import Identity, Linear
from dtorch.nn.modules.loading import load_safetensors
from dtorch.nn.modules.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from dtorch.nn.modules.module import Module
from dtorch.nn.modules.nn_more import (
    ConvTranspose1d,
    ConvTranspose2d,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    InstanceNorm1d,
    InstanceNorm2d,
    PairwiseDistance,
    PReLU,
)
from dtorch.nn.modules.nn_more_loss import (
    CosineEmbeddingLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    MarginRankingLoss,
    MultiLabelSoftMarginLoss,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginLoss,
)
from dtorch.nn.modules.nn_more_spatial import (
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    Fold,
    PixelShuffle,
    PixelUnshuffle,
    Unfold,
)
from dtorch.nn.modules.normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    LayerNorm,
    RMSNorm,
)
from dtorch.nn.modules.padding import (
    CircularPad1d,
    CircularPad2d,
    ConstantPad1d,
    ConstantPad2d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReplicationPad1d,
    ReplicationPad2d,
    ZeroPad1d,
    ZeroPad2d,
)
from dtorch.nn.modules.parallel_linear import (
    ColumnParallelLinear,
    ColumnParallelLinearWithReplicateInputOutput,
    ColumnParallelLinearWithReplicateOutput,
    ReplicateParallelLinear,
    RowParallelLinear,
    RowParallelLinearWithReplicateOutput,
)
from dtorch.nn.modules.pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    GlobalAvgPool2d,
    MaxPool1d,
    MaxPool2d,
)
from dtorch.nn.modules.sloped_activation import ELU, LeakyReLU
from dtorch.nn.modules.sparse import Embedding, EmbeddingWithReplicateOutput
from dtorch.nn.modules.state import IncompatibleKeys

__all__ = [
    "CELU",
    "ELU",
    "GELU",
    "GLU",
    "SELU",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AvgPool1d",
    "AvgPool2d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "CircularPad1d",
    "CircularPad2d",
    "ColumnParallelLinear",
    "ColumnParallelLinearWithReplicateInputOutput",
    "ColumnParallelLinearWithReplicateOutput",
    "ConstantPad1d",
    "ConstantPad2d",
    "Conv1d",
    "Conv2d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "CosineEmbeddingLoss",
    "CrossEntropyLoss",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "Embedding",
    "EmbeddingWithReplicateOutput",
    "Flatten",
    "Fold",
    "GaussianNLLLoss",
    "GlobalAvgPool2d",
    "GroupNorm",
    "Hardshrink",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "HingeEmbeddingLoss",
    "HuberLoss",
    "Identity",
    "IncompatibleKeys",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "KLDivLoss",
    "L1Loss",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSigmoid",
    "LogSoftmax",
    "MSELoss",
    "MarginRankingLoss",
    "MaxPool1d",
    "MaxPool2d",
    "Mish",
    "Module",
    "ModuleDict",
    "ModuleList",
    "MultiLabelSoftMarginLoss",
    "NLLLoss",
    "PReLU",
    "PairwiseDistance",
    "ParameterDict",
    "ParameterList",
    "PixelShuffle",
    "PixelUnshuffle",
    "PoissonNLLLoss",
    "RMSNorm",
    "ReLU",
    "ReLU6",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReplicateParallelLinear",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "RowParallelLinear",
    "RowParallelLinearWithReplicateOutput",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "SmoothL1Loss",
    "SoftMarginLoss",
    "Softmax",
    "Softmin",
    "Softplus",
    "Softshrink",
    "Softsign",
    "Tanh",
    "Tanhshrink",
    "Threshold",
    "TripletMarginLoss",
    "Unflatten",
    "Unfold",
    "ZeroPad1d",
    "ZeroPad2d",
    "load_safetensors",
]
