"""The trapezoid rules, composed of dtorch operators: ``trapezoid`` (and its alias ``trapz``)
and ``cumulative_trapezoid``, along one dim, with unit, scalar (``dx``) or tensor (``x``)
spacing, as torch's (its dtypes and refusals, raised at the call naming the function).
The dim they integrate along is gathered first where it is sharded (Replicate on the mesh
dims that shard it; the other shards stay).

Example:
    >>> import dtorch
    >>> t = dtorch.tensor([[1.0, 2.0], [3.0, 5.0]])
    >>> dtorch.trapezoid(t).tolist(), dtorch.cumulative_trapezoid(t, dx=2.0).tolist()
    ([1.5, 4.0], [[3.0], [8.0]])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import normalize_dim
from dtorch.api.ops.convert import cast
from dtorch.api.ops.scalars import as_real, is_scalar
from dtorch.api.record import composite, is_handle, tensor_arg
from dtorch.api.redistribute import gathered
from dtorch.errors import DtypeError, ParamError, ShapeError

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def _spacing(name: str, x: Any, dx: Any) -> Any:
    # torch's two forms: sample points ``x`` or a real spacing ``dx`` (1 where neither)
    if x is not None and dx is not None:
        raise TypeError(f"{name}: give x or dx, not both (torch's two forms)")
    if x is None:
        if dx is not None and (isinstance(dx, (bool, complex)) or not is_scalar(dx)):
            raise ParamError(f"{name}: Currently, we only support dx as a real number.")
        return 1.0 if dx is None else as_real(f"{name}: dx", dx)
    if isinstance(x, torch.Tensor):
        return x
    if not is_handle(x):
        raise TypeError(f"{name}: x must be a tensor, got {type(x).__name__}")
    return x


def _check_y(name: str, y: Any) -> None:
    tensor_arg(name, y)
    if y.dtype == torch.bool:
        raise DtypeError(f"{name}: received a bool input for `y`, but bool is not supported")


def _x_steps(name: str, y: Tensor, x: Any, d: int) -> Tensor:
    """``x``'s differences along ``d`` shaped to broadcast with ``y``'s, as torch views a
    1-D ``x`` along ``dim`` and pads a shorter one on the left."""
    if isinstance(x, torch.Tensor):
        x = beside(y, x)
    if x.dtype == torch.bool:
        raise DtypeError(f"{name}: received a bool input for `x`, but bool is not supported")
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise ShapeError(f"{name}: There must be one `x` value for each sample point")
        x = x.reshape([x.shape[0] if i == d else 1 for i in range(y.ndim)])
    elif x.ndim < y.ndim:
        x = x.reshape([1] * (y.ndim - x.ndim) + list(x.shape))
    x = gathered(x, (d,))
    return x.diff(dim=d)


def _pairs(y: Tensor, d: int) -> Tensor:
    # ``y[i] + y[i + 1]`` along ``d``: the trapezoids' parallel sides
    n = y.shape[d]
    return y.narrow(d, 0, n - 1) + y.narrow(d, 1, n - 1)


def _empty_except(y: Tensor, d: int) -> Tensor:
    # torch's result of an empty dim: zeros of ``y``'s dtype and shape without it
    return cast(y.sum(d), y.dtype)


@composite()
def trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """``torch.trapezoid``: the trapezoid rule along ``dim``, with sample points ``x`` (a
    tensor: 1-D along ``dim``, or broadcasting with ``y``) or a constant spacing ``dx``
    (default 1); torch's formulas and dtypes (integers give the default float). A sharded
    ``dim`` is gathered first; other shards stay.

    Example:
        >>> import dtorch
        >>> y = dtorch.tensor([1.0, 2.0, 4.0])
        >>> dtorch.trapezoid(y).item(), dtorch.trapezoid(y, dtorch.tensor([0.0, 1.0, 3.0])).item()
        (4.5, 7.5)
    """
    tensor_arg("trapezoid", y)
    step = _spacing("trapezoid", x, dx)
    d = normalize_dim(dim, y.ndim, op="trapezoid", needs_a_dim=True)
    if y.shape[d] == 0:  # torch's zeros, before its check of the dtype (a bool too)
        return _empty_except(y, d)
    _check_y("trapezoid", y)
    y = gathered(y, (d,))
    if isinstance(step, float):
        ends = y.select(d, 0) + y.select(d, -1)
        return (y.sum(d) - ends * 0.5) * step
    return (_pairs(y, d) * _x_steps("trapezoid", y, step, d)).sum(d) / 2.0


@composite()
def trapz(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """``torch.trapz``: ``trapezoid`` (torch's older name, the same forms).

    Example:
        >>> import dtorch
        >>> dtorch.trapz(dtorch.tensor([1.0, 2.0, 4.0]), dx=2.0).item()
        9.0
    """
    return trapezoid(y, x, dx=dx, dim=dim)


@composite()
def cumulative_trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """``torch.cumulative_trapezoid``: the running trapezoid rule along ``dim`` (one entry
    fewer than ``y`` there), with ``x`` or ``dx`` as ``trapezoid``; a ``cumsum`` of the
    trapezoids. A sharded ``dim`` is gathered first; other shards stay.

    Example:
        >>> import dtorch
        >>> dtorch.cumulative_trapezoid(dtorch.tensor([1.0, 2.0, 4.0])).tolist()
        [1.5, 4.5]
    """
    _check_y("cumulative_trapezoid", y)
    step = _spacing("cumulative_trapezoid", x, dx)
    d = normalize_dim(dim, y.ndim, op="cumulative_trapezoid", needs_a_dim=True)
    y = gathered(y, (d,))
    if y.shape[d] == 0:
        return y.narrow(d, 0, 0) * 1.0 if isinstance(step, float) else _x_product(y, step, d)
    if isinstance(step, float):
        return (_pairs(y, d) * (step / 2.0)).cumsum(d)
    return (_pairs(y, d) * _x_steps("cumulative_trapezoid", y, step, d)).cumsum(d) / 2.0


def _x_product(y: Tensor, x: Any, d: int) -> Tensor:
    # an empty ``dim`` with sample points: torch's empty result (its dtype promoted with x's)
    steps = _x_steps("cumulative_trapezoid", y, x, d)
    return (y.narrow(d, 0, 0) * steps.narrow(d, 0, 0)).cumsum(d) / 2.0
