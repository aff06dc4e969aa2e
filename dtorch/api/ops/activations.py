"""torch.nn.functional's forms of the activations: ``leaky_relu``, ``elu``, ``silu``,
``gelu``, ``hardtanh`` and ``relu6`` (elementwise, shards kept, Partial refused), ``glu``
(halves of a dim that must not be sharded), ``softmax`` and ``log_softmax`` (torch's ``dim``,
``_stacklevel``, ``dtype``); ``inplace=True`` changes ``input``'s shards and returns it.

Example:
    >>> import dtorch
    >>> import dtorch.nn.functional as F
    >>> F.leaky_relu(dtorch.tensor([-2.0, 3.0]), 0.5).tolist()
    [-1.0, 3.0]
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import torch

from dtorch.api.dims import normalize_dim
from dtorch.api.ops import elementwise
from dtorch.api.ops import reduce as _reduce
from dtorch.api.ops.basic_index import slice_along
from dtorch.api.ops.clamp import clamp
from dtorch.api.ops.convert import activated
from dtorch.api.ops.scalars import as_real
from dtorch.api.ops.statistics import named_refusals
from dtorch.api.record import tensor_arg
from dtorch.errors import DtypeError, ParamError, ShapeError, UnsupportedDtypeError
from dtorch.ir.opkind import ActivationKind, BinaryKind
from dtorch.ir.params import ActivationParam

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_SILU = ActivationParam(ActivationKind.SILU)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.leaky_relu``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.leaky_relu(dtorch.tensor([-100.0])).tolist()
        [-1.0]
    """
    slope = as_real("leaky_relu: negative_slope", negative_slope)
    param = ActivationParam(ActivationKind.LEAKY_RELU, alpha=slope)
    return activated("leaky_relu", param, input, inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.elu``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.elu(dtorch.tensor([0.0, 2.0]), alpha=2.0).tolist()
        [0.0, 2.0]
    """
    param = ActivationParam(ActivationKind.ELU, alpha=as_real("elu: alpha", alpha))
    return activated("elu", param, input, inplace)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.silu``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.silu(dtorch.tensor([0.0])).tolist()
        [0.0]
    """
    return activated("silu", _SILU, input, inplace)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``torch.nn.functional.gelu``; ``approximate`` is ``'none'`` or ``'tanh'``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.gelu(dtorch.tensor([0.0]), approximate="tanh").tolist()
        [0.0]
    """
    return elementwise.gelu(input, approximate)


@named_refusals
def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """``torch.nn.functional.hardtanh``: ``input`` clamped to ``[min_val, max_val]``; an
    integer tensor stays integer (the bounds truncated, as torch's kernel casts them).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.hardtanh(dtorch.tensor([-2.0, 0.5, 3.0])).tolist()
        [-1.0, 0.5, 1.0]
    """
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _hardtanh(input, min_val, max_val, inplace)


def _hardtanh(input: Tensor, min_val: float, max_val: float, inplace: bool) -> Tensor:
    low, high = _bounds(input.dtype, min_val, max_val)
    if inplace:  # one Clamp writing the shards, where it fits (``clamp_``)
        return input.clamp_(low, high)
    return clamp(input, low, high)


def _bounds(dtype: torch.dtype, low: float, high: float) -> tuple[float, float]:
    """The bounds as torch's hardtanh kernel applies them to ``dtype`` (refusals: torch's)."""
    if dtype == torch.bool:
        raise DtypeError("Bool inputs not supported for hardtanh")
    if dtype.is_floating_point or dtype.is_complex:
        return low, high
    if not dtype.is_signed and (low < 0 or high < 0):
        raise ParamError("cannot do hardtanh on an unsigned type with negative limits")
    return int(low), int(high)


@named_refusals
def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.relu6``: ``hardtanh(input, 0, 6)``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.relu6(dtorch.tensor([-1.0, 3.0, 7.0])).tolist()
        [0.0, 3.0, 6.0]
    """
    return _hardtanh(input, 0.0, 6.0, inplace)


@named_refusals
def glu(input: Tensor, dim: int = -1) -> Tensor:
    """``torch.nn.functional.glu``: ``a * sigmoid(b)`` where ``a`` and ``b`` are the halves
    of ``input`` along ``dim`` (of even size). The other dims keep their shards; a sharded
    ``dim`` only where both halves stay chunked over the same devices (else a
    PlacementError: redistribute it); a Partial is refused (``sigmoid`` is not linear).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.glu(dtorch.tensor([[2.0, 0.0]])).tolist()
        [[1.0]]
    """
    if not input.ndim:
        raise ShapeError("glu does not support scalars because halving size must be even")
    d = normalize_dim(dim, input.ndim, op="glu")
    size = input.shape[d]
    if size % 2:
        raise ShapeError(f"Halving dimension must be even, but dimension {d} is size {size}")
    if not input.dtype.is_floating_point:
        raise UnsupportedDtypeError(f'"glu_cpu" not implemented for {input.dtype}; cast first')
    a, b = (
        slice_along("glu", input, d, 0, size // 2),
        slice_along("glu", input, d, size // 2, size // 2),
    )
    return elementwise.binary(BinaryKind.MUL, "glu", a, elementwise.sigmoid(b))


def softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: torch.dtype | None = None
) -> Tensor:
    """``torch.nn.functional.softmax``; ``dim=None`` is torch's legacy implicit dim (0 for
    0-, 1- and 3-D inputs, else 1) with torch's deprecation warning, ``_stacklevel`` frames up.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.softmax(dtorch.zeros(2, 2), dim=-1).tolist()
        [[0.5, 0.5], [0.5, 0.5]]
    """
    tensor_arg("softmax", input)
    return _reduce.softmax(input, softmax_dim("softmax", input, dim, _stacklevel), dtype)


def log_softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: torch.dtype | None = None
) -> Tensor:
    """``torch.nn.functional.log_softmax`` (``dim=None`` as ``softmax``).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.log_softmax(dtorch.zeros(1, 1), 1).tolist()
        [[0.0]]
    """
    tensor_arg("log_softmax", input)
    return _reduce.log_softmax(input, softmax_dim("log_softmax", input, dim, _stacklevel), dtype)


def softmax_dim(name: str, input: Tensor, dim: int | None, stacklevel: int) -> int:
    """torch.nn.functional's ``_get_softmax_dim``: ``dim`` given, or the legacy implicit dim
    with torch's warning (``dtorch.softmax(x)`` and ``x.softmax()`` take it silently)."""
    if dim is None:
        warnings.warn(
            f"Implicit dimension choice for {name} has been deprecated. Change the call to "
            "include dim=X as an argument.",
            stacklevel=stacklevel,
        )
    return _reduce.implicit_dim(input, dim)
