"""``torch.gradient``: the derivative of a sampled function along each asked dim, by central
differences inside and one-sided differences of ``edge_order`` 1 or 2 at the two ends, with a
uniform spacing (a number per dim) or sample coordinates (a 1-D tensor per dim).

Each derivative is composed of dtorch's operators in torch's own arithmetic, step for step
(torch's C++ ``gradient``: the same slices, products, quotients and their order), so values
equal torch's bit for bit. Layouts: a dim the derivative is taken along must be whole on every
device (its slices shift by one element: a shard there is refused, redistribute it first);
the other dims keep their shards, and a Partial stays Partial (differences are linear), but
with coordinates and ``edge_order=1``: torch divides the end differences by a coordinate
difference, and dtorch refuses a Partial divided by a tensor.
Coordinates are Replicate operands (torch tensors are taken as constants); a spacing given as
a 0-d tensor is read as its number, as torch reads it (a dtorch one waits for its value).

Example:
    >>> import dtorch
    >>> (d,) = dtorch.gradient(dtorch.tensor([1.0, 2.0, 4.0, 8.0]))
    >>> d.tolist()
    [1.0, 1.5, 3.0, 4.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_int, normalize_dims
from dtorch.api.handle import is_tensor
from dtorch.api.ops.basic_index import slice_along
from dtorch.api.ops.shape import cat, reshape
from dtorch.api.record import named_as, tensor_arg
from dtorch.errors import DtypeError, ParamError, PlacementError, ShapeError
from dtorch.ir.placement import Shard, format_placements

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_NAME = "gradient"


def gradient(input: Tensor, *, spacing: Any = 1, dim: Any = None, edge_order: int = 1) -> Any:
    """``torch.gradient(input, spacing=1, dim=None, edge_order=1)``: one derivative per dim
    (every dim by default), as a tuple; see the module doc for the layouts.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[1.0, 2.0, 4.0], [2.0, 5.0, 11.0]])
        >>> [d.tolist() for d in dtorch.gradient(x, spacing=2.0, dim=1)]
        [[[0.5, 0.75, 1.0], [1.5, 2.25, 3.0]]]
    """
    tensor_arg(_NAME, input)
    if input.dtype == torch.uint8:
        raise DtypeError("torch.gradient does not support uint8 input.")
    dims = tuple(range(input.ndim)) if dim is None else _dims(input, dim)
    order = as_int(_NAME, "edge_order", edge_order)
    if order not in (1, 2):
        raise ParamError("torch.gradient only supports edge_order=1 and edge_order=2.")
    steps = _spacings(input, spacing, dims, dim is None)
    for d in dims:
        _check_dim(input, d, order)
    with named_as(_NAME):
        return tuple(
            _derivative(input, d, step, order) for d, step in zip(dims, steps, strict=True)
        )


def _dims(input: Tensor, dim: Any) -> tuple[int, ...]:
    dims = normalize_dims(dim, input.ndim, op=_NAME)
    repeated = next((d for i, d in enumerate(dims) if d in dims[:i]), None)
    if repeated is not None:
        raise ShapeError(f"{_NAME}: dim {repeated} appears multiple times in the list of dims")
    return dims


def _spacings(input: Tensor, spacing: Any, dims: tuple[int, ...], every: bool) -> list[Any]:
    """One spacing per dim: one number for all (a 0-d tensor read as its number), a number
    each, or a 1-D tensor of coordinates each, with torch's refusals of the other forms."""
    if _is_number(spacing):
        return [_number(spacing)] * len(dims)
    if isinstance(spacing, (str, bytes)) or not isinstance(spacing, Sequence):
        raise TypeError(
            f"{_NAME}: spacing must be a number, a sequence of numbers or a sequence of 1-D "
            f"tensors, got {type(spacing).__name__}"
        )
    if len(spacing) != len(dims):
        raise ShapeError(_length_message(input, len(spacing), len(dims), every))
    numbers = [isinstance(s, (int, float)) for s in spacing]  # in a list, 0-d tensors are not
    if all(numbers):
        return list(spacing)
    if any(numbers) or not all(_is_coordinates(s) for s in spacing):
        raise TypeError(
            f"{_NAME}: spacing's items must be all numbers or all 1-D tensors, got "
            f"{[type(s).__name__ for s in spacing]}"
        )
    return [_coordinates(input, s) for s in spacing]


def _length_message(input: Tensor, given: int, wanted: int, every: bool) -> str:
    if every:
        return (
            "torch.gradient expected spacing to be unspecified, a scalar, or a list of length "
            f"equal to 'self.dim() = {input.ndim}', since dim argument was not given, but got "
            f"a list of length {given}"
        )
    return (
        "torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
        "arguments to have the same length, but got a spacing argument of length "
        f"{given} and a dim argument of length {wanted}."
    )


def _is_number(value: Any) -> bool:
    # a Python number or a 0-d tensor (torch reads one as its number)
    if isinstance(value, (int, float)):
        return True
    return (isinstance(value, torch.Tensor) or is_tensor(value)) and value.ndim == 0


def _number(value: Any) -> Any:
    return value.item() if isinstance(value, torch.Tensor) or is_tensor(value) else value


def _is_coordinates(value: Any) -> bool:
    return isinstance(value, torch.Tensor) or is_tensor(value)


def _coordinates(input: Tensor, value: Any) -> Tensor:
    """A dim's sample coordinates as a Replicate dtorch operand beside ``input``."""
    if value.ndim != 1:
        raise ShapeError(
            "torch.gradient expected each element of spacing to have one dimension, but got "
            f"an element with {value.ndim} dimensions!"
        )
    if isinstance(value, torch.Tensor):
        return beside(input, value)
    return value


def _check_dim(input: Tensor, d: int, order: int) -> None:
    if input.shape[d] < order + 1:
        raise ShapeError("torch.gradient expected each dimension size to be at least edge_order+1")
    if any(isinstance(p, Shard) and p.dim == d for p in input.placements):
        raise PlacementError(
            f"{_NAME}: got {format_placements(input.placements)}, which shards dim {d}, a dim "
            "the derivative is taken along; accepted: that dim whole on every device (Replicate "
            "or Partial there; the other dims may be sharded). Redistribute it first"
        )


def _derivative(x: Tensor, d: int, step: Any, order: int) -> Tensor:
    def part(start: int, stop: int | None = None) -> Tensor:  # torch's at::slice(x, d, ...)
        length = x.shape[d]
        begin, end = start % length if start < 0 else start, length if stop is None else stop
        end = end % length if end < 0 else end
        return slice_along(_NAME, x, d, begin, end - begin)

    if isinstance(step, (int, float)):
        return _uniform(part, d, step, order)
    return _sampled(part, x.ndim, d, step, order)


def _uniform(part: Any, d: int, h: Any, order: int) -> Tensor:
    """torch's ``gradient_helper_float`` of a number spacing, in its order of operations."""
    center = (part(2) - part(0, -2)) / h
    if order == 1:
        first = (part(1, 2) - part(0, 1)) / h
        last = (part(-1) - part(-2, -1)) / h
    else:
        first = (part(0, 1) * -1.5 + part(1, 2) * 2 - part(2, 3) * 0.5) / h
        last = (part(-3, -2) * 0.5 + part(-2, -1) * -2 + part(-1) * 1.5) / h
    return cat([first, center / 2, last], d)


def _sampled(part: Any, ndim: int, d: int, coords: Tensor, order: int) -> Tensor:
    """torch's ``gradient_helper_float`` of coordinates, in its order of operations."""
    dx = coords.diff(1, 0)
    dx1, dx2 = dx[:-1], dx[1:]
    shape = tuple(-1 if i == d else 1 for i in range(ndim))
    a = reshape(-dx2 / (dx1 * (dx1 + dx2)), shape)
    b = reshape((dx2 - dx1) / (dx1 * dx2), shape)
    c = reshape(dx1 / (dx2 * (dx1 + dx2)), shape)
    center = a * part(0, -2) + b * part(1, -1) + c * part(2)
    if order == 1:  # dx may hold one difference only (a dim of 2)
        first = (part(1, 2) - part(0, 1)) / dx[0]
        last = (part(-1) - part(-2, -1)) / dx[-1]
    else:
        h0, h1, hl, hk = dx[0], dx[1], dx[-1], dx[-2]
        first = (
            -(2.0 * h0 + h1) / (h0 * (h0 + h1)) * part(0, 1)
            + (h0 + h1) / (h0 * h1) * part(1, 2)
            + (-h0) / (h1 * (h0 + h1)) * part(2, 3)
        )
        last = (
            hl / (hk * (hl + hk)) * part(-3, -2)
            + -(hl + hk) / (hl * hk) * part(-2, -1)
            + (2 * hl + hk) / (hl * (hl + hk)) * part(-1)
        )
    return cat([first, center, last], d)
