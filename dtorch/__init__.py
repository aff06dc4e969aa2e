"""dtorch: a single-controller, eager-graph distributed tensor runtime for PyTorch.

Write ordinary PyTorch-style code against ``dtorch.Tensor``, add a ``DeviceMesh`` and
placements, and the same program runs sharded over many devices.

Example:
    >>> import torch, dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 4)
    >>> x = dtorch.from_torch(torch.arange(8.0), device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> (x * 2).sum().item()
    56.0
"""

from torch import (
    Generator,
    Size,
    bfloat16,
    bool,
    device,
    double,
    dtype,
    finfo,
    float,
    float16,
    float32,
    float64,
    half,
    iinfo,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    short,
    uint8,
)

from dtorch import tensor  # the module path; callable as dtorch.tensor(data, ...)
from dtorch.api.creation import (
    arange,
    empty,
    empty_like,
    from_numpy,
    from_torch,
    full,
    full_like,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    zeros,
    zeros_like,
)
from dtorch.api.future import TensorFuture, VoidFutureCollect
from dtorch.api.graph import Graph, GraphOption, default_graph
from dtorch.api.namespace import (
    abs,
    add,
    all,
    any,
    argmax,
    argmin,
    asin,
    cat,
    chunk,
    clamp,
    clip,
    clone,
    concat,
    cos,
    div,
    einsum,
    eq,
    equal,
    exp,
    flatten,
    floor,
    ge,
    greater,
    greater_equal,
    gt,
    index_select,
    isinf,
    isnan,
    le,
    less,
    less_equal,
    log,
    log2,
    log10,
    logical_and,
    logical_or,
    lt,
    masked_fill,
    masked_scatter,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mul,
    ne,
    neg,
    nonzero,
    outer,
    permute,
    pow,
    reciprocal,
    relu,
    repeat_interleave,
    reshape,
    round,
    rsqrt,
    sigmoid,
    sin,
    softmax,
    sqrt,
    square,
    squeeze,
    stack,
    sub,
    sum,
    tanh,
    transpose,
    unbind,
    unsqueeze,
    where,
)
from dtorch.api.redistribute import tensors_redistribute_by_dict
from dtorch.api.tensor import TYPED as _TYPED
from dtorch.api.tensor import Tensor
from dtorch.distributed_spec import get_default_device_mesh
from dtorch.errors import DeserializationError, DTorchError
from dtorch.ir.mesh import DeviceMesh, init_device_mesh
from dtorch.ir.placement import Partial, Placement, Replicate, Shard
from dtorch.memory_stats import MemoryStat, MemoryStats
from dtorch.options import GlobalOption
from dtorch.serialization import (
    assert_structural_equal,
    deserialize,
    deserialize_from_file,
    serialize,
    serialize_to_file,
)

FloatTensor = _TYPED["FloatTensor"]
DoubleTensor = _TYPED["DoubleTensor"]
HalfTensor = _TYPED["HalfTensor"]
BFloat16Tensor = _TYPED["BFloat16Tensor"]
ByteTensor = _TYPED["ByteTensor"]
CharTensor = _TYPED["CharTensor"]
ShortTensor = _TYPED["ShortTensor"]
IntTensor = _TYPED["IntTensor"]
LongTensor = _TYPED["LongTensor"]
BoolTensor = _TYPED["BoolTensor"]


def _version() -> str:
    """The installed distribution's version (pyproject's ``version``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dtorch")
    except PackageNotFoundError:  # a source tree that is not installed
        return "0.1.0"


__version__ = _version()

__all__ = [
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DTorchError",
    "DeserializationError",
    "DeviceMesh",
    "DoubleTensor",
    "FloatTensor",
    "Generator",
    "GlobalOption",
    "Graph",
    "GraphOption",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "MemoryStat",
    "MemoryStats",
    "Partial",
    "Placement",
    "Replicate",
    "Shard",
    "ShortTensor",
    "Size",
    "Tensor",
    "TensorFuture",
    "VoidFutureCollect",
    "abs",
    "add",
    "all",
    "any",
    "arange",
    "argmax",
    "argmin",
    "asin",
    "assert_structural_equal",
    "bfloat16",
    "bool",
    "cat",
    "chunk",
    "clamp",
    "clip",
    "clone",
    "concat",
    "cos",
    "cuda",
    "default_graph",
    "deserialize",
    "deserialize_from_file",
    "device",
    "div",
    "double",
    "dtype",
    "einsum",
    "empty",
    "empty_like",
    "eq",
    "equal",
    "exp",
    "finfo",
    "flatten",
    "float",
    "float16",
    "float32",
    "float64",
    "floor",
    "from_numpy",
    "from_torch",
    "full",
    "full_like",
    "ge",
    "get_default_device_mesh",
    "greater",
    "greater_equal",
    "gt",
    "half",
    "iinfo",
    "index_select",
    "init_device_mesh",
    "int",
    "int16",
    "int32",
    "int64",
    "int8",
    "isinf",
    "isnan",
    "le",
    "less",
    "less_equal",
    "log",
    "log10",
    "log2",
    "logical_and",
    "logical_or",
    "long",
    "lt",
    "masked_fill",
    "masked_scatter",
    "matmul",
    "max",
    "maximum",
    "mean",
    "memory_stats",
    "min",
    "minimum",
    "mul",
    "ne",
    "neg",
    "nn",
    "nonzero",
    "ones",
    "ones_like",
    "outer",
    "permute",
    "pow",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "reciprocal",
    "relu",
    "repeat_interleave",
    "reshape",
    "round",
    "rsqrt",
    "serialize",
    "serialize_to_file",
    "short",
    "sigmoid",
    "sin",
    "softmax",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "sub",
    "sum",
    "tanh",
    "tensor",
    "tensors_redistribute_by_dict",
    "transpose",
    "type",
    "uint8",
    "unbind",
    "unsqueeze",
    "where",
    "zeros",
    "zeros_like",
]

# isort: split
# After dtorch.api is complete: dtorch.nn.functional imports its operators.
from dtorch import cuda, memory_stats, nn, type  # noqa: E402 - after dtorch.api, see above

# Last, once everything dtorch needs is imported: see dtorch.runtime.gc_policy for why.
from dtorch.runtime.gc_policy import freeze_at_import as _freeze_at_import  # noqa: E402

_freeze_at_import()
