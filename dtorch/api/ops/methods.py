"""Tensor methods made from an operator's description, so that ``dtorch.api.tensor`` states
each in one line (``exp = unary(MathKind.EXP, "exp")``); the functions they make carry the
name torch gives the method.

Example:
    >>> import dtorch
    >>> from dtorch.ir.opkind import BinaryKind, MathKind
    >>> exp, rsub = unary(MathKind.EXP, "exp"), binary(BinaryKind.SUB, "sub", reflected=True)
    >>> exp.__name__, rsub(dtorch.tensor([1.0]), 3).tolist()
    ('exp', [2.0])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.ops.convert import cast as _cast
from dtorch.api.ops.elementwise import binary as _binary
from dtorch.api.ops.elementwise import unary as _unary
from dtorch.ir.opkind import BinaryKind, MathKind

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_F = Callable[..., Any]


def _named(method: _F, name: str) -> None:
    method.__name__ = method.__qualname__ = name


def unary(kind: MathKind, name: str) -> Callable[[Tensor], Tensor]:
    """The method ``name``: one ``kind`` operator on the tensor."""

    def method(self: Tensor) -> Tensor:
        return _unary(kind, name, self)

    _named(method, name)
    return method


def binary(
    kind: BinaryKind, name: str, *, reflected: bool = False
) -> Callable[[Tensor, Any], Tensor]:
    """The operator method of ``kind`` (``__add__``); ``reflected``: the tensor is the right
    operand (``__radd__``: ``2 + t``)."""

    def method(self: Tensor, other: Any) -> Tensor:
        return _binary(kind, name, self, other)

    def reflected_method(self: Tensor, other: Any) -> Tensor:
        return _binary(kind, name, other, self)

    made = reflected_method if reflected else method
    _named(made, f"r{name}" if reflected else name)  # the operator's name: "add", "radd"
    return made


def cast(dtype: torch.dtype, name: str) -> Callable[[Tensor], Tensor]:
    """The cast method ``name`` (``float``, ``long``, ...): the tensor in ``dtype``."""

    def method(self: Tensor) -> Tensor:
        return _cast(self, dtype)

    _named(method, name)
    return method
