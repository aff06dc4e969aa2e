"""Direct forms of the commonest local kernels: one torch callable of the input shards.

A compiled program body (``dtorch.runtime.plan``) runs thousands of small operators per call;
going through the general kernel (``kernel(ctx, device, inputs) -> [output]``: a param
lookup, a table lookup and a list per operator) costs as much as torch's own dispatch of a
small op. ``DIRECT`` maps a kind to a binder that, given the operator's param once at compile
time, returns the torch callable computing the single output from the input shards in order
(or None where the param needs the general kernel). The callable computes exactly what the
kind's local kernel in ``dtorch.kernels.local.elementwise`` computes: both read the tables
of ``dtorch.ir.rules.torch_ops``.

Example:
    >>> import torch
    >>> from dtorch.ir.opkind import BinaryKind
    >>> from dtorch.ir.params import BroadcastBinaryParam
    >>> from dtorch.ir.scalar import Scalar
    >>> sub = direct_form(BroadcastBinaryParam(BinaryKind.SUB, Scalar.of(1), scalar_first=True))
    >>> sub(torch.tensor([1.0, 5.0]))
    tensor([ 0., -4.])
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from dtorch.ir.opkind import ActivationKind, OpKind
from dtorch.ir.params import ActivationParam, BaseMathParam, BroadcastBinaryParam, OpParam
from dtorch.ir.rules.torch_ops import (
    ACTIVATION,
    BINARY,
    MATH,
    NUMBERED,
    OPERATORS,
    binary_with_alpha,
    binary_with_scalar,
)

#: A kernel's output from its input shards, in operand order.
Direct = Callable[..., torch.Tensor]


def _binary(param: BroadcastBinaryParam) -> Direct | None:
    if param.in_place:  # the general kernel writes the shard and returns it
        return None
    if param.scalar is None:
        if param.alpha is not None:
            return partial(binary_with_alpha, param.binary, alpha=param.alpha)
        return BINARY[param.binary]
    fn = OPERATORS.get(param.binary)
    if fn is None:  # the tensor-only functions take the scalar as a 0-d tensor
        return partial(
            binary_with_scalar, param.binary, scalar=param.scalar, scalar_first=param.scalar_first
        )
    value: Any = param.scalar.value
    if param.scalar_first:
        return partial(fn, value)
    return lambda x: fn(x, value)


def _math(param: BaseMathParam) -> Direct:
    return MATH[param.math]


def _activation(param: ActivationParam) -> Direct | None:
    if param.in_place:  # the general kernel writes the shard and returns it
        return None
    if param.activation is ActivationKind.RELU:
        return torch.relu
    numbered = NUMBERED.get(param.activation)
    if numbered is not None:
        return partial(_numbered, numbered, param.alpha, param.beta)
    return partial(_approximated, ACTIVATION[param.activation], param.approximate)


def _numbered(
    fn: Callable[[torch.Tensor, float, float], torch.Tensor], alpha: float, beta: float, x: Any
) -> Any:
    return fn(x, alpha, beta)


def _approximated(fn: Callable[[torch.Tensor, str], torch.Tensor], how: str, x: Any) -> Any:
    return fn(x, how)


#: OpKind -> binder of the param (each binder takes its kind's param class).
DIRECT: dict[OpKind, Callable[[Any], Direct | None]] = {
    OpKind.BroadcastBinary: _binary,
    OpKind.BaseMath: _math,
    OpKind.Activation: _activation,
}


def direct_form(param: OpParam) -> Direct | None:
    """The direct callable of an operator with ``param``; None where it has none."""
    binder = DIRECT.get(param.kind)
    return None if binder is None else binder(param)
