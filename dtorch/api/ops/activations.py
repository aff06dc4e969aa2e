"""torch.nn.functional's forms of the activations: ``leaky_relu``, ``elu``, ``silu`` and
``gelu`` (elementwise, shards kept, Partial refused), ``softmax`` and ``log_softmax``
(torch's ``dim``, ``_stacklevel``, ``dtype``); ``inplace=True`` changes ``input``'s shards
and returns it.

Example:
    >>> import dtorch
    >>> import dtorch.nn.functional as F
    >>> F.leaky_relu(dtorch.tensor([-2.0, 3.0]), 0.5).tolist()
    [-1.0, 3.0]
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from dtorch.api.ops import elementwise
from dtorch.api.ops import reduce as _reduce
from dtorch.api.record import record_one, tensor_arg
from dtorch.ir.opkind import ActivationKind
from dtorch.ir.params import ActivationParam

if TYPE_CHECKING:
    import torch

    from dtorch.api.tensor import Tensor


def _done(input: Tensor, out: Tensor, inplace: bool) -> Tensor:
    # torch's inplace=True: the result written into the input, which is returned
    return input.copy_(out) if inplace else out


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.leaky_relu``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.leaky_relu(dtorch.tensor([-100.0])).tolist()
        [-1.0]
    """
    param = ActivationParam(ActivationKind.LEAKY_RELU, alpha=float(negative_slope))
    return _done(input, record_one("leaky_relu", param, (input,)), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.elu``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.elu(dtorch.tensor([0.0, 2.0]), alpha=2.0).tolist()
        [0.0, 2.0]
    """
    param = ActivationParam(ActivationKind.ELU, alpha=float(alpha))
    return _done(input, record_one("elu", param, (input,)), inplace)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.silu``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.silu(dtorch.tensor([0.0])).tolist()
        [0.0]
    """
    return _done(input, elementwise.silu(input), inplace)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``torch.nn.functional.gelu``; ``approximate`` is ``'none'`` or ``'tanh'``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.gelu(dtorch.tensor([0.0]), approximate="tanh").tolist()
        [0.0]
    """
    return elementwise.gelu(input, approximate)


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
    return _reduce.softmax(input, _implicit_dim("softmax", input, dim, _stacklevel), dtype)


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
    return _reduce.log_softmax(input, _implicit_dim("log_softmax", input, dim, _stacklevel), dtype)


def _implicit_dim(name: str, input: Tensor, dim: int | None, stacklevel: int) -> int:
    """torch.nn.functional's ``_get_softmax_dim``: ``dim`` given, or the legacy implicit dim
    with torch's warning (``dtorch.softmax(x)`` and ``x.softmax()`` take it silently)."""
    if dim is None:
        warnings.warn(
            f"Implicit dimension choice for {name} has been deprecated. Change the call to "
            "include dim=X as an argument.",
            stacklevel=stacklevel,
        )
    return _reduce.implicit_dim(input, dim)
