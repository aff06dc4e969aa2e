"""Dimension arguments: negative dims counted from the end; torch's IndexError (a DimError).

The IndexError names the operator (``op=``), the dim it got and the range it accepts; a dim
that is no int (a float, a str, a dict) is a TypeError saying what is accepted. ``tensor_arg``
refuses a value that is no dtorch tensor where an operator takes one, with the message
``record`` gives (``dtorch.api.record.not_a_tensor``), before the operator reads its ``ndim``.

Example:
    >>> normalize_dims(-1, 3), normalize_dims((0, -2), 2)
    ((2,), (0, 0))
    >>> normalize_dims(3, 2, op="sum")
    Traceback (most recent call last):
    dtorch.errors.DimError: sum: dimension 3 is out of range for a 2-D tensor; accepted: -2 to 1
    >>> normalize_dims(1.5, 2, op="sum")
    Traceback (most recent call last):
    TypeError: sum: dim must be an int or a tuple/list of ints, got 1.5 (float)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dtorch.api.record import not_a_tensor
from dtorch.errors import DimError
from dtorch.ir.rules.base import norm_dim

#: Operators for which a 0-d tensor has no dimension to name (torch raises its IndexError);
#: reductions, softmax and the like accept dims -1 and 0 of a 0-d tensor, as in torch.
_NEEDS_A_DIM = frozenset({"size", "unbind"})


def tensor_arg(op: str, value: Any, label: str = "input 0") -> None:
    """TypeError naming ``op`` and ``label`` when ``value`` is no dtorch tensor (a str, None,
    a torch tensor, a numpy array): for operators that read its metadata before recording.
    Duck-typed as ``record`` is (dtorch.api.handle imports this module)."""
    if not hasattr(value, "_operand"):
        raise not_a_tensor(op, label, value)


def _not_dims(op: str, dims: Any) -> TypeError:
    got = "a dtorch.Tensor" if hasattr(dims, "_operand") else f"{dims!r} ({type(dims).__name__})"
    return TypeError(f"{op}: dim must be an int or a tuple/list of ints, got {got}")


def _index(op: str, dim: Any) -> int:
    # a numpy integer or a 0-d integer torch tensor counts, as in torch; a dtorch tensor would
    # have to read its value from the devices, so it is refused
    if hasattr(dim, "_operand"):
        raise TypeError(f"{op}: dim must be an int, got a dtorch.Tensor; pass int(t) instead")
    if isinstance(dim, (str, bytes, tuple, list, dict)) or not hasattr(dim, "__index__"):
        raise TypeError(f"{op}: dim must be an int, got {dim!r} ({type(dim).__name__})")
    return int(dim.__index__())


def _dim(dim: Any, ndim: int, op: str) -> int:
    if isinstance(dim, bool):  # an int to Python, not to torch: sum(x, True) is refused there
        raise TypeError(f"{op}: dim must be an int, got {dim!r} (bool)")
    if not isinstance(dim, int):
        dim = _index(op, dim)
    if ndim == 0 and op in _NEEDS_A_DIM:
        raise DimError(f"{op}: Dimension specified as {dim} but tensor has no dimensions")
    return norm_dim(op, dim, ndim)  # the rules' check: one message and error type for both


def normalize_dims(dims: Any, ndim: int, *, op: str = "dim argument") -> tuple[int, ...]:
    """Non-negative dims (IndexError naming ``op``, the bad dim and the accepted range;
    TypeError when ``dims`` is neither an int nor a tuple/list of ints)."""
    if isinstance(dims, int):
        return (_dim(dims, ndim, op),)
    if isinstance(dims, (tuple, list)):
        return tuple([_dim(d, ndim, op) for d in dims])
    if isinstance(dims, (str, bytes, dict)) or not isinstance(dims, Sequence):
        if hasattr(dims, "__index__") and not hasattr(dims, "_operand"):
            return (_dim(dims, ndim, op),)  # a numpy integer, a 0-d integer torch tensor
        raise _not_dims(op, dims)
    return tuple([_dim(d, ndim, op) for d in dims])


def normalize_dim(dim: Any, ndim: int, *, op: str) -> int:
    """One non-negative dim, for operators that take a single dim (TypeError for a tuple,
    a list or anything else that is no int; IndexError out of range)."""
    return _dim(dim, ndim, op)
