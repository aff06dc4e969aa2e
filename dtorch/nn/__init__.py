"""dtorch.nn: neural-network building blocks on dtorch tensors: ``Module``, ``Parameter``,
``Buffer``, the containers, the layers (tensor-parallel Linears included) and
``functional``.

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
    >>> model(dtorch.randn(3, 4)).shape
    torch.Size([3, 2])
"""

from dtorch.nn import functional
from dtorch.nn.modules import (
    GELU,
    AdaptiveAvgPool2d,
    AvgPool2d,
    ColumnParallelLinear,
    ColumnParallelLinearWithReplicateInputOutput,
    ColumnParallelLinearWithReplicateOutput,
    Conv2d,
    Flatten,
    GlobalAvgPool2d,
    Identity,
    Linear,
    MaxPool2d,
    Module,
    ModuleDict,
    ModuleList,
    ReLU,
    ReplicateParallelLinear,
    RowParallelLinear,
    RowParallelLinearWithReplicateOutput,
    Sequential,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
    load_safetensors,
)
from dtorch.nn.parameter import Buffer, Parameter

__all__ = [
    "GELU",
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "Buffer",
    "ColumnParallelLinear",
    "ColumnParallelLinearWithReplicateInputOutput",
    "ColumnParallelLinearWithReplicateOutput",
    "Conv2d",
    "Flatten",
    "GlobalAvgPool2d",
    "Identity",
    "Linear",
    "MaxPool2d",
    "Module",
    "ModuleDict",
    "ModuleList",
    "Parameter",
    "ReLU",
    "ReplicateParallelLinear",
    "RowParallelLinear",
    "RowParallelLinearWithReplicateOutput",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Tanh",
    "functional",
    "load_safetensors",
]
