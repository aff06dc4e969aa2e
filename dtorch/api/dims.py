"""Dimension arguments: negative dims counted from the end; torch's IndexError (a DimError).

The IndexError names the operator (``op=``), the dim it got and the range it accepts; a dim
that is no int (a float, a str, a dict) is a TypeError saying what is accepted.

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

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import numpy as np

from dtorch.api.record import is_handle
from dtorch.errors import DimError, ParamError
from dtorch.ir.rules.base import norm_dim
from dtorch.ir.rules.ints import outside_int64

_F = TypeVar("_F", bound=Callable[..., Any])
#: torch's NumPy spellings of the dim parameters, accepted wherever torch has those parameters
_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}


def numpy_names(fn: _F) -> _F:
    """``fn`` taking ``axis=`` for ``dim=`` and ``keepdims=`` for ``keepdim=``, as torch's
    operators do (``x.sum(axis=1, keepdims=True)``).

    Example:
        >>> @numpy_names
        ... def total(t, dim=None, keepdim=False):
        ...     return dim, keepdim
        >>> total(None, axis=1, keepdims=True)
        (1, True)
    """

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs and ("axis" in kwargs or "keepdims" in kwargs):
            kwargs = _renamed(fn.__name__, kwargs)
        return fn(*args, **kwargs)

    return cast(_F, call)


def _renamed(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    renamed: dict[str, Any] = {}
    for key, value in kwargs.items():
        new = _NUMPY_NAMES.get(key, key)
        if new in renamed:
            raise TypeError(f"{name}() got multiple values for argument '{new}'")
        renamed[new] = value
    return renamed


def as_size(value: Any, name: str, what: str, accepted: str = "") -> int:
    """A size or count given to ``name``: an int (a numpy integer, a 0-d integer tensor) or a
    whole float, as dtorch always took; not a bool, which torch refuses as a size
    (``reshape((True, 6))``, ``split(True)``); anything else a TypeError naming ``what``.

    Example:
        >>> as_size(3.0, "reshape", "sizes")
        3
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if hasattr(value, "__index__") and not isinstance(value, (str, bytes, bool)):
        try:
            return int(value.__index__())
        except (TypeError, ValueError, RuntimeError):
            pass
    kind = "an int" if accepted else "ints"  # one count, or the items of a shape
    raise TypeError(
        f"{name}: {what} must be {kind}, got {value!r} ({type(value).__name__}); accepted: "
        f"{accepted or 'ints, or one tuple/list of ints'}"
    )


def as_int(name: str, what: str, value: Any) -> int:
    """An int argument: an int, or anything with ``__index__`` (a numpy integer, a 0-d
    integer tensor), as torch takes them; never a bool (TypeError naming ``what``).

    Example:
        >>> import numpy as np
        >>> as_int("topk", "k", np.int64(2))
        2
    """
    if isinstance(value, bool):
        raise TypeError(f"{name}: {what} must be an int, got a bool")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: {what} must be an int, got {type(value).__name__}") from None
    if outside_int64(number) is not None:  # torch's ints are int64
        raise ParamError(
            f"{name}: {what} {number} does not fit in int64 (torch: Overflow when unpacking "
            "long long)"
        )
    return number


def as_flag(value: Any, name: str, what: str) -> bool:
    """A flag given to ``name``: a bool (or a numpy bool); anything else a TypeError naming
    ``what``, as torch refuses ``keepdim=1``. Flags go into operator params, which the codec
    sends to worker processes as bools only.

    Example:
        >>> as_flag(True, "get_memory_stats", "reset_peak")
        True
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name}: {what} must be a bool, got {value!r} ({type(value).__name__})")


def _not_dims(op: str, dims: Any) -> TypeError:
    got = "a dtorch.Tensor" if is_handle(dims) else f"{dims!r} ({type(dims).__name__})"
    return TypeError(f"{op}: dim must be an int or a tuple/list of ints, got {got}")


def _index(op: str, dim: Any) -> int:
    # a numpy integer or a 0-d integer torch tensor counts, as in torch; a dtorch tensor would
    # have to read its value from the devices, so it is refused
    if is_handle(dim):
        raise TypeError(f"{op}: dim must be an int, got a dtorch.Tensor; pass int(t) instead")
    if isinstance(dim, (str, bytes, tuple, list, dict)) or not hasattr(dim, "__index__"):
        raise TypeError(f"{op}: dim must be an int, got {dim!r} ({type(dim).__name__})")
    try:
        return int(dim.__index__())
    except TypeError:  # a numpy array of one or more ints: numpy's words name no operator
        raise TypeError(f"{op}: dim must be an int, got {dim!r} ({type(dim).__name__})") from None


def _dim(dim: Any, ndim: int, op: str, needs_a_dim: bool = False) -> int:
    if isinstance(dim, bool):  # an int to Python, not to torch: sum(x, True) is refused there
        raise TypeError(f"{op}: dim must be an int, got {dim!r} (bool)")
    if not isinstance(dim, int):
        dim = _index(op, dim)
    if ndim == 0 and needs_a_dim:
        raise DimError(f"{op}: Dimension specified as {dim} but tensor has no dimensions")
    return norm_dim(op, dim, ndim)  # the rules' check: one message and error type for both


def normalize_dims(
    dims: Any, ndim: int, *, op: str = "dim argument", needs_a_dim: bool = False
) -> tuple[int, ...]:
    """Non-negative dims (IndexError naming ``op``, the bad dim and the accepted range;
    TypeError when ``dims`` is neither an int nor a sequence of ints). ``needs_a_dim``: a
    0-d tensor has no dim to name (``size``, ``unbind``: torch's IndexError); reductions,
    softmax and the like take dims -1 and 0 of a 0-d tensor, as in torch."""
    if isinstance(dims, int):
        return (_dim(dims, ndim, op, needs_a_dim),)
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence):
        if hasattr(dims, "__index__") and not is_handle(dims):
            return (_dim(dims, ndim, op, needs_a_dim),)  # a numpy integer, a 0-d torch int
        raise _not_dims(op, dims)
    return tuple([_dim(d, ndim, op, needs_a_dim) for d in dims])


def normalize_dim(dim: Any, ndim: int, *, op: str, needs_a_dim: bool = False) -> int:
    """One non-negative dim, for operators that take a single dim (TypeError for a tuple,
    a list or anything else that is no int; IndexError out of range; ``needs_a_dim`` as for
    ``normalize_dims``)."""
    return _dim(dim, ndim, op, needs_a_dim)


def keyword_form(
    name: str, arg: str, given: tuple[Any, ...], kw: dict[str, Any]
) -> tuple[Any, ...]:
    """``given`` (a method's varargs, ``*dims``), or torch's keyword form of them, ``arg=``
    (one sequence or int), as one entry; any other keyword refused as Python would.

    Example:
        >>> keyword_form("tile", "dims", (), {"dims": (2, 1)})
        ((2, 1),)
        >>> keyword_form("tile", "dims", (2,), {})
        (2,)
    """
    unknown = sorted(set(kw) - {arg})
    if unknown:
        raise TypeError(f"{name}() got an unexpected keyword argument {unknown[0]!r}")
    if arg not in kw:
        return given
    if given:
        raise TypeError(f"{name}() got multiple values for argument {arg!r}")
    return (kw[arg],)
