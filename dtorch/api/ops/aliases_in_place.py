"""The in-place forms torch has and dtorch lacked: the comparisons (``ge_``, ``less_``,
...), ``logical_and_``, ``logical_or_``, ``cumsum_``, ``cumprod_``, ``addr_`` and the aliases
``divide_``, ``multiply_``, ``subtract_``, ``not_equal_``, ``absolute_``, ``arcsin_``. Each
is its operator's result written back into the tensor as ``methods.in_place`` writes it (in
the tensor's placements; a result dtype that does not cast back is refused).

Example:
    >>> import dtorch
    >>> t = dtorch.tensor([1.0, 5.0])
    >>> t.ge_(2) is t, t.tolist()
    (True, [0.0, 1.0])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.ops import methods as _mk
from dtorch.api.ops.aliases_more import addr
from dtorch.api.ops.elementwise import eq, ge, gt, le, logical_and, logical_or, lt, ne
from dtorch.api.ops.reduce import cumprod, cumsum
from dtorch.errors import DtypeError

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

#: The in-place methods made here with ``methods.in_place`` and given an example, for doctest.
__test__: dict[str, Callable[..., Any]] = {}


def _in_place(name: str, method: Callable[..., Any], example: str, args: str, result: str,
              *, elementwise: bool = True) -> Callable[..., Any]:  # fmt: skip
    """``methods.in_place``'s method ``name`` with an example (for doctest, here)."""
    made = _mk.in_place(name, method, elementwise)
    made.__doc__ = (
        f"{made.__doc__}\nExample:\n    >>> import dtorch\n"
        f"    >>> t = dtorch.tensor({example})\n"
        f"    >>> t.{name}({args}) is t, t.tolist()\n    (True, {result})\n"
    )
    __test__[name] = made
    return made


_CMP = "[1.0, 2.0, 3.0]"
eq_ = _in_place("eq_", eq, _CMP, "2", "[0.0, 1.0, 0.0]")
ne_ = _in_place("ne_", ne, _CMP, "2", "[1.0, 0.0, 1.0]")
not_equal_ = _in_place("not_equal_", ne, _CMP, "2", "[1.0, 0.0, 1.0]")
ge_ = _in_place("ge_", ge, _CMP, "2", "[0.0, 1.0, 1.0]")
greater_equal_ = _in_place("greater_equal_", ge, _CMP, "2", "[0.0, 1.0, 1.0]")
gt_ = _in_place("gt_", gt, _CMP, "2", "[0.0, 0.0, 1.0]")
greater_ = _in_place("greater_", gt, _CMP, "2", "[0.0, 0.0, 1.0]")
le_ = _in_place("le_", le, _CMP, "2", "[1.0, 1.0, 0.0]")
less_equal_ = _in_place("less_equal_", le, _CMP, "2", "[1.0, 1.0, 0.0]")
lt_ = _in_place("lt_", lt, _CMP, "2", "[1.0, 0.0, 0.0]")
less_ = _in_place("less_", lt, _CMP, "2", "[1.0, 0.0, 0.0]")
logical_and_ = _in_place("logical_and_", logical_and, "[0, 1, 2]", "dtorch.tensor([1, 1, 0])",
                         "[0, 1, 0]")  # fmt: skip
logical_or_ = _in_place("logical_or_", logical_or, "[0, 1, 2]", "dtorch.tensor([0, 0, 0])",
                        "[0, 1, 1]")  # fmt: skip
addr_ = _in_place("addr_", addr, "[[1, 1]]", "dtorch.tensor([2]), dtorch.tensor([1, 2])",
                  "[[3, 5]]", elementwise=False)  # fmt: skip


def _no_dtype(name: str, self: Tensor, dtype: Any) -> None:
    """torch's in-place scans refuse a ``dtype`` other than the tensor's."""
    if dtype is not None and dtype != self.dtype:
        raise DtypeError(f"{name}: Bad in-place call: input tensor dtype {self.dtype} and "
                         f"output tensor dtype {dtype} should match")  # fmt: skip


_cumsum = _mk.in_place("cumsum_", cumsum, elementwise=False)
_cumprod = _mk.in_place("cumprod_", cumprod, elementwise=False)


def cumsum_(self: Tensor, dim: int, *, dtype: torch.dtype | None = None) -> Tensor:
    """torch's ``cumsum_``: the running sums along ``dim`` written back (``cumsum``'s
    placements); ``dtype`` only the tensor's own. Returns the tensor.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([1, 2, 3])
        >>> t.cumsum_(0) is t, t.tolist()
        (True, [1, 3, 6])
    """
    _no_dtype("cumsum_", self, dtype)
    return _cumsum(self, dim)


def cumprod_(self: Tensor, dim: int, *, dtype: torch.dtype | None = None) -> Tensor:
    """torch's ``cumprod_``: the running products along ``dim`` written back (``cumprod``'s
    placements); ``dtype`` only the tensor's own. Returns the tensor.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([1, 2, 3])
        >>> t.cumprod_(0) is t, t.tolist()
        (True, [1, 2, 6])
    """
    _no_dtype("cumprod_", self, dtype)
    return _cumprod(self, dim)


def divide_(self: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """torch's ``divide_``, ``div_`` by another name.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([5.0, -5.0])
        >>> t.divide_(2, rounding_mode="trunc") is t, t.tolist()
        (True, [2.0, -2.0])
    """
    return self.div_(other, rounding_mode=rounding_mode)


def multiply_(self: Tensor, other: Any) -> Tensor:
    """torch's ``multiply_``, ``mul_`` by another name.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([1, 2])
        >>> t.multiply_(3) is t, t.tolist()
        (True, [3, 6])
    """
    return self.mul_(other)


def subtract_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    """torch's ``subtract_``, ``sub_`` by another name.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([1, 2])
        >>> t.subtract_(1, alpha=2) is t, t.tolist()
        (True, [-1, 0])
    """
    return self.sub_(other, alpha=alpha)


def absolute_(self: Tensor) -> Tensor:
    """torch's ``absolute_``, ``abs_`` by another name.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([-1, 2])
        >>> t.absolute_() is t, t.tolist()
        (True, [1, 2])
    """
    return self.abs_()


def arcsin_(self: Tensor) -> Tensor:
    """torch's ``arcsin_``, ``asin_`` by another name.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([0.0])
        >>> t.arcsin_() is t, t.tolist()
        (True, [0.0])
    """
    return self.asin_()
