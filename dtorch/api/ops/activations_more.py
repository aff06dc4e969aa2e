"""torch.nn.functional's remaining activations: ``softplus``, ``logsigmoid``, ``hardswish``,
``hardsigmoid``, ``mish``, ``selu``, ``celu``, ``softsign``, ``tanhshrink``, ``hardshrink``,
``softshrink``, ``threshold`` (one Activation operator each: shards and Replicate kept,
Partial refused, torch's dtype and number refusals; ``inplace=True`` changes ``input``'s
shards and returns it) and ``softmin`` (``softmax`` of ``-input``: the dim must not be
sharded). Each local kernel is torch's own function, so the values are torch's.

Example:
    >>> import dtorch
    >>> import dtorch.nn.functional as F
    >>> F.hardshrink(dtorch.tensor([-1.0, 0.25, 2.0])).tolist()
    [-1.0, 0.0, 2.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.dims import normalize_dim
from dtorch.api.ops import elementwise
from dtorch.api.ops import reduce as _reduce
from dtorch.api.ops.activations import softmax_dim
from dtorch.api.ops.convert import activated
from dtorch.api.ops.scalars import is_scalar, not_a_number, python_number
from dtorch.api.record import record_one, tensor_arg
from dtorch.ir.opkind import ActivationKind, MathKind
from dtorch.ir.params import ActivationParam

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def _number(name: str, label: str, value: Any) -> float:
    # torch takes a real number (a 0-d tensor too) where its signature says float
    if not is_scalar(value):
        raise not_a_number(f"{name}: {label}", value)
    return float(python_number(value))


def _activation(
    name: str,
    kind: ActivationKind,
    input: Tensor,
    inplace: bool = False,
    alpha: float = 0.0,
    beta: float = 0.0,
) -> Tensor:
    """One Activation operator of ``kind`` with the numbers of its param."""
    param = ActivationParam(kind, alpha=alpha, beta=beta)
    return activated(name, param, input, inplace, 2)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``torch.nn.functional.softplus``: ``log(1 + exp(beta * x)) / beta``, ``x`` where
    ``beta * x > threshold``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.softplus(dtorch.tensor([0.0, 30.0])).tolist()
        [0.6931471824645996, 30.0]
    """
    alpha, beta = _number("softplus", "beta", beta), _number("softplus", "threshold", threshold)
    return _activation("softplus", ActivationKind.SOFTPLUS, input, alpha=alpha, beta=beta)


def logsigmoid(input: Tensor) -> Tensor:
    """``torch.nn.functional.logsigmoid``: ``log(sigmoid(x))``, computed stably.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.logsigmoid(dtorch.tensor([0.0])).tolist()
        [-0.6931471824645996]
    """
    return _activation("logsigmoid", ActivationKind.LOGSIGMOID, input)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.hardswish``: ``x * relu6(x + 3) / 6``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.hardswish(dtorch.tensor([-4.0, 0.0, 4.0])).tolist()
        [-0.0, 0.0, 4.0]
    """
    return _activation("hardswish", ActivationKind.HARDSWISH, input, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.hardsigmoid``: ``relu6(x + 3) / 6``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.hardsigmoid(dtorch.tensor([-4.0, 0.0, 4.0])).tolist()
        [0.0, 0.5, 1.0]
    """
    return _activation("hardsigmoid", ActivationKind.HARDSIGMOID, input, inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.mish``: ``x * tanh(softplus(x))``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.mish(dtorch.tensor([0.0])).tolist()
        [0.0]
    """
    return _activation("mish", ActivationKind.MISH, input, inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.selu`` (also ``dtorch.selu``): ``scale * elu(x, alpha)`` with
    torch's fixed ``scale`` and ``alpha``.

    Example:
        >>> import dtorch
        >>> dtorch.selu(dtorch.tensor([0.0, 1.0], dtype=dtorch.float64)).tolist()
        [0.0, 1.0507009873554805]
    """
    return _activation("selu", ActivationKind.SELU, input, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.celu`` (also ``dtorch.celu``): ``max(0, x) + min(0, alpha *
    (exp(x / alpha) - 1))``; ``alpha=0`` is refused as torch refuses it.

    Example:
        >>> import dtorch
        >>> dtorch.celu(dtorch.tensor([0.0, 2.0]), alpha=2.0).tolist()
        [0.0, 2.0]
    """
    number = _number("celu", "alpha", alpha)
    return _activation("celu", ActivationKind.CELU, input, inplace, alpha=number)


def softsign(input: Tensor) -> Tensor:
    """``torch.nn.functional.softsign``: ``x / (1 + |x|)`` (an integer tensor gives floats).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.softsign(dtorch.tensor([-1.0, 3.0])).tolist()
        [-0.5, 0.75]
    """
    return _activation("softsign", ActivationKind.SOFTSIGN, input)


def tanhshrink(input: Tensor) -> Tensor:
    """``torch.nn.functional.tanhshrink``: ``x - tanh(x)`` (an integer tensor gives floats).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.tanhshrink(dtorch.tensor([0.0])).tolist()
        [0.0]
    """
    return _activation("tanhshrink", ActivationKind.TANHSHRINK, input)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``torch.nn.functional.hardshrink`` (also ``dtorch.hardshrink`` and the method): ``x``
    where ``|x| > lambd``, else 0.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([-1.0, 0.25]).hardshrink(0.5).tolist()
        [-1.0, 0.0]
    """
    number = _number("hardshrink", "lambd", lambd)
    return _activation("hardshrink", ActivationKind.HARDSHRINK, input, alpha=number)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``torch.nn.functional.softshrink``: ``x - lambd`` above ``lambd``, ``x + lambd`` below
    ``-lambd``, else 0; a negative ``lambd`` is refused as torch refuses it.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.softshrink(dtorch.tensor([-1.0, 0.25, 2.0])).tolist()
        [-0.5, 0.0, 1.5]
    """
    number = _number("softshrink", "lambd", lambd)
    return _activation("softshrink", ActivationKind.SOFTSHRINK, input, alpha=number)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.threshold`` (also ``dtorch.threshold``): ``x`` where
    ``x > threshold``, else ``value``; an integer tensor stays integer (torch casts the
    numbers to its dtype).

    Example:
        >>> import dtorch
        >>> dtorch.threshold(dtorch.tensor([0.5, 2.0]), 1.0, -1.0).tolist()
        [-1.0, 2.0]
    """
    low, fill = _number("threshold", "threshold", threshold), _number("threshold", "value", value)
    return _activation("threshold", ActivationKind.THRESHOLD, input, inplace, alpha=low, beta=fill)


def softmin(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: torch.dtype | None = None
) -> Tensor:
    """``torch.nn.functional.softmin``: ``softmax(-input, dim, dtype=dtype)``, as torch
    computes it; ``dim=None`` as ``softmax`` (torch's legacy implicit dim, with its warning).
    Every shard stays, as ``softmax``'s (a sharded softmin dim is reduced across the devices).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.softmin(dtorch.zeros(1, 2), dim=1).tolist()
        [[0.5, 0.5]]
    """
    tensor_arg("softmin", input)
    d = normalize_dim(softmax_dim("softmin", input, dim, _stacklevel), input.ndim, op="softmin")
    negated = elementwise.unary(MathKind.NEG, "softmin", input)
    param = _reduce.softmax_param(negated, d, False, _reduce._dtype("softmin", dtype))
    return record_one("softmin", param, (negated,))
