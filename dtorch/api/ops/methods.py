"""Tensor methods made from an operator's description, so that ``dtorch.api.tensor`` states
each in one line (``exp = unary(MathKind.EXP, "exp")``, ``exp_ = in_place("exp_", exp)``);
the functions they make carry the name torch gives the method.

Example:
    >>> import dtorch
    >>> from dtorch.ir.opkind import BinaryKind, MathKind
    >>> exp, rsub = unary(MathKind.EXP, "exp"), binary(BinaryKind.SUB, "sub", reflected=True)
    >>> exp.__name__, rsub(dtorch.tensor([1.0]), 3).tolist()
    ('exp', [2.0])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import torch

from dtorch.api.handle import TensorBase
from dtorch.api.ops.convert import assign
from dtorch.api.ops.convert import cast as _cast
from dtorch.api.ops.elementwise import binary as _binary
from dtorch.api.ops.elementwise import unary as _unary
from dtorch.errors import DtypeError, PlacementError, ShapeError
from dtorch.ir.opkind import BinaryKind, MathKind

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_F = Callable[..., Any]
_P = ParamSpec("_P")
_T = TypeVar("_T", bound=TensorBase)


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


def in_place(
    name: str, method: Callable[Concatenate[_T, _P], Any]
) -> Callable[Concatenate[_T, _P], _T]:
    """torch's in-place ``name`` of an operator ``method``: its result written back into the
    tensor with ``assign``, as ``add_`` does (every alias and view sees it; a result dtype
    that does not cast back, ``exp_`` of an integer tensor, is refused); returns the tensor.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([1.0, 4.0])
        >>> sqrt_ = in_place("sqrt_", dtorch.Tensor.sqrt)
        >>> sqrt_(t) is t, t.tolist()
        (True, [1.0, 2.0])
    """

    base = f"{method.__name__}: "

    @functools.wraps(method)
    def run(self: _T, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            result = method(self, *args, **kwargs)
        except (DtypeError, PlacementError, ShapeError) as error:  # named as the user called it
            text = str(error)
            if not text.startswith(base):
                raise
            raise type(error)(f"{name}: {text.removeprefix(base)}") from None
        assign(name, self, result)  # type: ignore[arg-type]
        return self

    run.__name__, run.__qualname__ = name, f"Tensor.{name}"
    return run
