"""The operator functions of the ``dtorch`` namespace (``dtorch.add(a, b)``, ...).

Where torch's function is the method with the tensor first, the function IS the method; the
others come from the operator modules.

Example:
    >>> import dtorch
    >>> dtorch.add(dtorch.ones(2), 1).tolist(), dtorch.stack([dtorch.ones(1)] * 2).shape
    ([2.0, 2.0], torch.Size([2, 1]))
"""

from __future__ import annotations

from dtorch.api.functions import concat, equal, nonzero
from dtorch.api.ops.elementwise import (
    add,
    clamp,
    div,
    eq,
    ge,
    gt,
    le,
    logical_and,
    logical_or,
    lt,
    masked_fill,
    masked_scatter,
    maximum,
    minimum,
    mul,
    ne,
    pow,
    relu,
    sigmoid,
    sub,
    tanh,
    where,
)
from dtorch.api.ops.linalg import einsum, matmul, outer
from dtorch.api.ops.reduce import all, any, argmax, argmin, max, mean, min, softmax, sum
from dtorch.api.ops.shape import (
    cat,
    chunk,
    flatten,
    permute,
    repeat_interleave,
    reshape,
    squeeze,
    stack,
    transpose,
    unbind,
    unsqueeze,
)
from dtorch.api.ops.take import index_select
from dtorch.api.tensor import Tensor

abs = Tensor.abs
neg = Tensor.neg
reciprocal = Tensor.reciprocal
exp = Tensor.exp
log = Tensor.log
log2 = Tensor.log2
log10 = Tensor.log10
isinf = Tensor.isinf
isnan = Tensor.isnan
square = Tensor.square
rsqrt = Tensor.rsqrt
sqrt = Tensor.sqrt
sin = Tensor.sin
asin = Tensor.asin
cos = Tensor.cos
floor = Tensor.floor
round = Tensor.round
clone = Tensor.clone
clip = clamp
greater, less, greater_equal, less_equal = gt, lt, ge, le

__all__ = [
    "abs", "add", "all", "any", "argmax", "argmin", "asin", "cat", "chunk", "clamp", "clip",
    "clone", "concat", "cos", "div", "einsum", "eq", "equal", "exp", "flatten", "floor", "ge",
    "greater", "greater_equal", "gt", "index_select", "isinf", "isnan", "le", "less",
    "less_equal", "log", "log10", "log2", "logical_and", "logical_or", "lt", "masked_fill",
    "masked_scatter", "matmul", "max", "maximum", "mean", "min", "minimum", "mul", "ne", "neg",
    "nonzero",
    "outer", "permute", "pow", "reciprocal", "relu", "repeat_interleave", "reshape", "round",
    "rsqrt", "sigmoid", "sin", "softmax", "sqrt", "square", "squeeze", "stack", "sub", "sum",
    "tanh", "transpose", "unbind", "unsqueeze", "where",
]  # fmt: skip
