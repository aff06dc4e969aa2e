"""``dtorch.nn.modules``: the Module class and the layers, one concept per file (torch's
layout: ``module``, ``container``, ``container_params``, ``linear``, ``parallel_linear``,
``activation``, ``flatten``, ``conv``, ``pooling``, ``padding``, ``normalization``, ``sparse``,
``dropout``, ``sloped_activation``, ``activation_more``, ``loss``; ``state`` holds
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
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "EmbeddingWithReplicateOutput",
    "Flatten",
    "GlobalAvgPool2d",
    "GroupNorm",
    "Hardshrink",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "HuberLoss",
    "Identity",
    "IncompatibleKeys",
    "KLDivLoss",
    "L1Loss",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSigmoid",
    "LogSoftmax",
    "MSELoss",
    "MaxPool1d",
    "MaxPool2d",
    "Mish",
    "Module",
    "ModuleDict",
    "ModuleList",
    "NLLLoss",
    "ParameterDict",
    "ParameterList",
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
    "Softmax",
    "Softmin",
    "Softplus",
    "Softshrink",
    "Softsign",
    "Tanh",
    "Tanhshrink",
    "Threshold",
    "Unflatten",
    "ZeroPad1d",
    "ZeroPad2d",
    "load_safetensors",
]
