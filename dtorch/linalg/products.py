"""torch.linalg's products and views: ``matmul``, ``multi_dot``, ``vecdot``, ``cross`` and
``diagonal``, as compositions of dtorch operators (their layouts are those operators': see
``dtorch.matmul``, ``dtorch.roll``, ``dtorch.diagonal``).

Example:
    >>> import dtorch
    >>> x = dtorch.tensor([[1.0, 0.0, 0.0]])
    >>> dtorch.linalg.cross(x, dtorch.tensor([[0.0, 1.0, 0.0]])).tolist()
    [[0.0, 0.0, 1.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dtorch.api.dims import as_int
from dtorch.api.ops import grid_more
from dtorch.api.ops import index_more as _im
from dtorch.api.ops.linalg import matmul
from dtorch.api.record import composite, tensor_arg
from dtorch.errors import DtypeError, ShapeError

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

__all__ = ["cross", "diagonal", "matmul", "multi_dot", "vecdot"]


@composite("linalg.multi_dot")
def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """``torch.linalg.multi_dot``: the product of two or more matrices, left to right (the
    first may be a 1-D row vector, the last a 1-D column vector); one dtype.

    Example:
        >>> import dtorch
        >>> m = dtorch.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> dtorch.linalg.multi_dot([dtorch.ones(2), m, dtorch.ones(2)]).item()
        10.0
    """
    name = "multi_dot()"
    items = list(tensors)
    if len(items) < 2:
        raise ShapeError(f"{name}: expected at least 2 tensors but got {len(items)}")
    for i, t in enumerate(items):
        tensor_arg("linalg.multi_dot", t, f"tensor {i}")
        if t.dtype != items[0].dtype:
            raise DtypeError(f"{name}: all tensors must have the same dtype, got {t.dtype} "
                             f"at {i} and {items[0].dtype} at 0")  # fmt: skip
    _check_ranks(name, items)
    row, col = items[0].ndim == 1, items[-1].ndim == 1
    out = items[0].unsqueeze(0) if row else items[0]
    for t in items[1:-1]:
        out = matmul(out, t)
    out = matmul(out, items[-1].unsqueeze(-1) if col else items[-1])
    out = out.squeeze(-1) if col else out
    return out.squeeze(0) if row else out


def _check_ranks(name: str, items: list[Tensor]) -> None:
    # the ends 1-D or 2-D, the others 2-D, as torch's
    for i, t in enumerate(items):
        end = i in (0, len(items) - 1)
        if not (t.ndim == 2 or (end and t.ndim == 1)):
            which = "first" if i == 0 else "last" if end else f"{i}"
            want = "1D or 2D" if end else "2D"
            raise ShapeError(f"{name}: the {which} tensor must be {want} but got {t.ndim}D")


@composite("linalg.vecdot")
def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """``torch.linalg.vecdot``: the dot product of the vectors along ``dim`` (the inputs
    broadcast; floating tensors of one dtype; complex ones are not available).

    Example:
        >>> import dtorch
        >>> dtorch.linalg.vecdot(dtorch.tensor([[1.0, 2.0]]), dtorch.tensor([3.0, 4.0])).tolist()
        [11.0]
    """
    name = "linalg.vecdot"
    tensor_arg(name, x, "x")
    tensor_arg(name, y, "y")
    if x.dtype != y.dtype:
        raise DtypeError(f"{name}: Expected x and y to have the same dtype, but found x of type "
                         f"{x.dtype} and y of type {y.dtype} instead")  # fmt: skip
    if not x.dtype.is_floating_point:
        raise DtypeError(f"{name}: Expected a floating point tensor as input. Got {x.dtype}; "
                         f"accepted: the floating dtypes")  # fmt: skip
    return (x * y).sum(as_int(name, "dim", dim))


@composite("linalg.cross")
def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """``torch.linalg.cross``: ``dtorch.cross`` along ``dim`` (the last by default): the
    cross product of the 3-vectors there, of inputs with one number of dims that broadcast.

    Example:
        >>> import dtorch
        >>> a, b = dtorch.tensor([0, 1, 0]), dtorch.tensor([0, 0, 1])
        >>> dtorch.linalg.cross(a, b).tolist()
        [1, 0, 0]
    """
    return grid_more.cross(input, other, as_int("linalg.cross", "dim", dim))


@composite("linalg.diagonal")
def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """``torch.linalg.diagonal``: ``dtorch.diagonal`` with the last two dims by default.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.diagonal(dtorch.tensor([[[1, 2], [3, 4]]])).tolist()
        [[1, 4]]
    """
    tensor_arg("linalg.diagonal", A)
    return _im.diagonal(A, offset, dim1, dim2)
