"""torch's aliases, stacking functions and small operators that are compositions of dtorch's
own: ``hstack``, ``vstack`` (``row_stack``), ``dstack``, ``column_stack``, ``fmax``, ``fmin``
(their own ``BinaryKind``), ``dist``, ``addr``, ``diagflat``, ``unravel_index``, the methods
``fill_diagonal_``, ``sum_to_size``, ``split_with_sizes``, ``get_device``, ``layout`` and the
in-place forms torch has and dtorch lacked (``ge_``, ``divide_``, ``cumsum_``, ...). Each
keeps the placements of the operators it is made of; none fetches a value.

Example:
    >>> import dtorch
    >>> dtorch.hstack([dtorch.tensor([1, 2]), dtorch.tensor([3])]).tolist()
    [1, 2, 3]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_int, keyword_form, normalize_dim
from dtorch.api.handle import TensorBase
from dtorch.api.ops.convert import cast
from dtorch.api.ops.elementwise import binary
from dtorch.api.ops.grid import atleast_1d, atleast_2d, atleast_3d
from dtorch.api.ops.index import index_put_
from dtorch.api.ops.index_more import diag
from dtorch.api.ops.linalg import outer
from dtorch.api.ops.reduce import sum as _sum
from dtorch.api.ops.scalars import is_scalar, python_number
from dtorch.api.ops.shape import cat, flatten, reshape, unsqueeze
from dtorch.api.ops.statistics import norm
from dtorch.api.record import tensor_arg
from dtorch.errors import DtypeError, ParamError, ShapeError
from dtorch.ir.opkind import BinaryKind

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


# --- stacking ---------------------------------------------------------------------------------
def _tensors(name: str, tensors: Any) -> list[Tensor]:
    """torch's tensor list: a non-empty list or tuple of dtorch tensors."""
    if isinstance(tensors, TensorBase) or not isinstance(tensors, (list, tuple)):
        raise TypeError(
            f"{name}(): argument 'tensors' must be a tuple or list of Tensors, "
            f"not {type(tensors).__name__}"
        )
    if not tensors:
        raise ShapeError(f"{name} expects a non-empty TensorList")
    for i, t in enumerate(tensors):
        tensor_arg(name, t, f"tensors[{i}]")
    return list(tensors)


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """``torch.hstack``: joined along dim 1 (along dim 0 when the first is 1-D or 0-d), 0-d
    tensors as 1 element; the placements are ``cat``'s.

    Example:
        >>> import dtorch
        >>> dtorch.hstack([dtorch.ones(2, 1), dtorch.zeros(2, 2)]).tolist()
        [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    """
    grown = [atleast_1d(t) for t in _tensors("hstack", tensors)]
    return cat(grown, 0 if grown[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """``torch.vstack`` (also ``row_stack``): joined along dim 0, 0-d and 1-D tensors as rows
    ``(1, n)``; the placements are ``cat``'s.

    Example:
        >>> import dtorch
        >>> dtorch.vstack([dtorch.tensor([1, 2]), dtorch.tensor([3, 4])]).tolist()
        [[1, 2], [3, 4]]
    """
    return cat([atleast_2d(t) for t in _tensors("vstack", tensors)], 0)


def row_stack(tensors: Sequence[Tensor]) -> Tensor:
    """``torch.row_stack``, an alias of ``vstack``.

    Example:
        >>> import dtorch
        >>> dtorch.row_stack([dtorch.tensor(1), dtorch.tensor(2)]).tolist()
        [[1], [2]]
    """
    return cat([atleast_2d(t) for t in _tensors("row_stack", tensors)], 0)


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """``torch.dstack``: joined along dim 2, each as ``atleast_3d`` makes it; the placements
    are ``cat``'s.

    Example:
        >>> import dtorch
        >>> dtorch.dstack([dtorch.tensor([1, 2]), dtorch.tensor([3, 4])]).tolist()
        [[[1, 3], [2, 4]]]
    """
    return cat([atleast_3d(t) for t in _tensors("dstack", tensors)], 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """``torch.column_stack``: joined along dim 1, 0-d and 1-D tensors as columns ``(n, 1)``;
    the placements are ``cat``'s.

    Example:
        >>> import dtorch
        >>> dtorch.column_stack([dtorch.tensor([1, 2]), dtorch.tensor([3, 4])]).tolist()
        [[1, 3], [2, 4]]
    """
    given = _tensors("column_stack", tensors)
    return cat([reshape(t, t.numel(), 1) if t.ndim <= 1 else t for t in given], 1)


# --- elementwise ------------------------------------------------------------------------------
def floor_divide(input: Any, other: Any) -> Tensor:
    """``torch.floor_divide``: ``input // other``, rounded down (``__floordiv__``); the shards
    are kept as ``div``'s.

    Example:
        >>> import dtorch
        >>> dtorch.floor_divide(dtorch.tensor([7, -7]), 2).tolist()
        [3, -4]
    """
    return binary(BinaryKind.FLOOR_DIV, "floor_divide", input, other)


def fmax(input: Tensor, other: Any) -> Tensor:
    """``torch.fmax``: the larger of the two, elementwise, where a NaN loses to a number (NaN
    only where both are); the shards are kept as ``maximum``'s (a Partial is refused).

    Example:
        >>> import dtorch
        >>> nan = float("nan")
        >>> dtorch.fmax(dtorch.tensor([1.0, nan]), dtorch.tensor([nan, 2.0])).tolist()
        [1.0, 2.0]
    """
    return binary(BinaryKind.FMAX, "fmax", input, other)


def fmin(input: Tensor, other: Any) -> Tensor:
    """``torch.fmin``: the smaller of the two, elementwise, where a NaN loses to a number;
    placements as ``fmax``'s.

    Example:
        >>> import dtorch
        >>> dtorch.fmin(dtorch.tensor([1.0, float("nan")]), dtorch.tensor([0.0, 2.0])).tolist()
        [0.0, 2.0]
    """
    return binary(BinaryKind.FMIN, "fmin", input, other)


def dist(input: Tensor, other: Tensor, p: Any = 2) -> Tensor:
    """``torch.dist``: the ``p``-norm of ``input - other`` (broadcast), a 0-d tensor, as
    ``norm(input - other, p)`` computes it (a sharded dim gives a Partial sum, reduced by
    ``norm``); floating inputs only, as torch's.

    Example:
        >>> import dtorch
        >>> dtorch.dist(dtorch.tensor([3.0, 0.0]), dtorch.tensor([0.0, 4.0])).item()
        5.0
    """
    tensor_arg("dist", input)
    tensor_arg("dist", other, "other")
    if isinstance(p, (TensorBase, str)) or not is_scalar(p):
        raise TypeError(f"dist(): argument 'p' must be Number, not {type(p).__name__}")
    difference = binary(BinaryKind.SUB, "dist", input, other)
    if not (difference.dtype.is_floating_point or difference.dtype.is_complex):
        raise DtypeError(
            f"dist: input dtype should be either floating point or complex, got "
            f"{difference.dtype}; accepted: floating or complex inputs"
        )
    return norm(difference, python_number(p))


def _outer_dtype(input: Tensor, vec1: Tensor, vec2: Tensor, beta: Any, alpha: Any) -> Any:
    """torch's checks and result dtype of ``addr`` (the three dtypes promoted, a 0-d input
    too: torch expands it first)."""
    for arg, vec in (("vec1", vec1), ("vec2", vec2)):
        if vec.ndim != 1:
            raise ShapeError(f"addr: Expected 1-D argument {arg}, but got {vec.ndim}-D")
    size = (int(vec1.shape[0]), int(vec2.shape[0]))
    if _broadcast(tuple(input.shape), size) != size:
        raise ShapeError(f"addr: input of shape {list(input.shape)} does not broadcast to "
                         f"{list(size)}")  # fmt: skip
    dtype = torch.promote_types(torch.promote_types(input.dtype, vec1.dtype), vec2.dtype)
    for arg, value in (("beta", beta), ("alpha", alpha)):
        if isinstance(value, bool) and dtype != torch.bool:
            raise DtypeError(f"Boolean {arg} only supported for Boolean results.")
        if isinstance(value, float) and not (dtype.is_floating_point or dtype.is_complex):
            raise DtypeError(f"For integral input tensors, argument {arg} must not be a "
                             "floating point number.")  # fmt: skip
    return dtype


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """torch's broadcast shape of ``a`` and ``b``, None where they do not broadcast."""
    try:
        return tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        return None


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``torch.addr``: ``beta * input + alpha * outer(vec1, vec2)``, ``input`` broadcast to
    ``(n, m)``, in torch's promoted dtype (bools: ``or`` of ``and``); ``beta=0`` ignores
    ``input`` (its NaNs too). The outer product is a broadcast ``mul``: a shard of ``vec1``
    shards the rows, of ``vec2`` the columns.

    Example:
        >>> import dtorch
        >>> v = dtorch.tensor([1.0, 2.0])
        >>> dtorch.addr(dtorch.ones(2, 2), v, v, beta=2).tolist()
        [[3.0, 4.0], [4.0, 6.0]]
    """
    for arg, t in (("input", input), ("vec1", vec1), ("vec2", vec2)):
        tensor_arg("addr", t, arg)
    if not all(is_scalar(v) and not isinstance(v, TensorBase) for v in (beta, alpha)):
        raise TypeError("addr: beta and alpha must be numbers (bool, int, float)")
    beta, alpha = python_number(beta), python_number(alpha)
    dtype = _outer_dtype(input, vec1, vec2, beta, alpha)
    x, a, b = (cast(t, dtype) for t in (input, vec1, vec2))
    out = binary(BinaryKind.MUL, "addr", unsqueeze(a, 1), unsqueeze(b, 0))
    if alpha != 1:
        out = binary(BinaryKind.MUL, "addr", out, alpha)
    if not beta:  # torch drops the input, NaNs and all
        return cast(out, dtype)
    scaled = x if beta == 1 else binary(BinaryKind.MUL, "addr", x, beta)
    return cast(binary(BinaryKind.ADD, "addr", scaled, out), dtype)


def ger(input: Tensor, vec2: Tensor) -> Tensor:
    """torch's ``ger``, the older name of ``outer``.

    Example:
        >>> import dtorch
        >>> dtorch.ger(dtorch.tensor([1, 2]), dtorch.tensor([3, 4])).tolist()
        [[3, 4], [6, 8]]
    """
    return outer(input, vec2)


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """``torch.diagflat``: ``input`` flattened, as the diagonal ``offset`` of a square matrix
    (``diag`` of the flattened tensor).

    Example:
        >>> import dtorch
        >>> dtorch.diagflat(dtorch.tensor([[1, 2]])).tolist()
        [[1, 0], [0, 2]]
    """
    tensor_arg("diagflat", input)
    return diag(flatten(input), as_int("diagflat", "offset", offset))


def unravel_index(indices: Tensor, shape: Any) -> tuple[Tensor, ...]:
    """``torch.unravel_index``: the coordinates in ``shape`` (an int or a sequence of ints) of
    the flat ``indices`` (an integer tensor), one int64 tensor per dim, by floor division and
    remainder (as torch's: no bounds check, a negative index counts back); each keeps the
    shards of ``indices``.

    Example:
        >>> import dtorch
        >>> [t.tolist() for t in dtorch.unravel_index(dtorch.tensor([5, 1]), (2, 3))]
        [[1, 0], [2, 1]]
    """
    tensor_arg("unravel_index", indices, "indices")
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype == torch.bool:
        raise DtypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    sizes = _unravel_shape(shape)
    rest, coords = cast(indices, torch.int64), []
    for size in reversed(sizes):
        coords.append(binary(BinaryKind.REMAINDER, "unravel_index", rest, size))
        rest = binary(BinaryKind.FLOOR_DIV, "unravel_index", rest, size)
    return tuple(reversed(coords))


def _unravel_shape(shape: Any) -> tuple[int, ...]:
    """``unravel_index``'s shape, checked as torch checks it (ints, none negative or zero)."""
    sizes = (shape,) if isinstance(shape, int) else tuple(shape)
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in sizes):
        raise TypeError(f"expected 'shape' sequence to only contain ints, but got {shape!r}")
    if any(s < 0 for s in sizes):
        raise ParamError(f"'shape' cannot have negative values, but got {sizes}")
    if 0 in sizes:  # torch's remainder by zero
        raise ParamError(f"unravel_index: shape {sizes} has a zero size; accepted: sizes >= 1")
    return sizes


# --- methods ----------------------------------------------------------------------------------
def fill_diagonal_(self: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
    """torch's ``fill_diagonal_``: ``fill_value`` written on the main diagonal (the entries
    whose indices are all equal; all dims of one size beyond 2-D); ``wrap``: a tall matrix's
    diagonal restarts every ``cols + 1`` rows. The positions are computed from the shape and
    written with ``index_put_`` (its placements). Returns the tensor.

    Example:
        >>> import dtorch
        >>> t = dtorch.zeros(2, 3, dtype=dtorch.int64)
        >>> t.fill_diagonal_(7) is t, t.tolist()
        (True, [[7, 0, 0], [0, 7, 0]])
    """
    shape = tuple(self.shape)
    if len(shape) < 2:
        raise ShapeError("fill_diagonal_: dimensions must larger than 1")
    if len(shape) > 2 and len(set(shape)) > 1:
        raise ShapeError(f"fill_diagonal_: all dimensions of input must be of equal length, "
                         f"got {list(shape)}")  # fmt: skip
    step = sum(torch.empty(shape, device="meta").stride())  # from one diagonal entry to the next
    end = self.numel() if wrap and len(shape) == 2 else min(shape) * step
    flat = torch.arange(0, min(end, self.numel()), step)
    if len(shape) == 2 and not wrap:
        flat = flat[: min(shape)]
    where = torch.unravel_index(flat, shape)
    index_put_(self, where, _fill(self, fill_value))
    return self


def _fill(self: Tensor, value: Any) -> Tensor:
    """``fill_diagonal_``'s value in the tensor's dtype (a number truncated, as torch's)."""
    if isinstance(value, TensorBase):
        return cast(value, self.dtype)  # type: ignore[arg-type]
    return beside(self, torch.tensor(python_number(value), dtype=self.dtype))


def sum_to_size(self: Tensor, *size: Any, **kw: Any) -> Tensor:
    """torch's ``sum_to_size``: summed down to ``size`` (ints, or one sequence), which must
    expand to the tensor's shape: the leading dims and those of size 1 in ``size`` are summed
    (``sum``'s placements and dtype); the tensor itself when nothing is summed.

    Example:
        >>> import dtorch
        >>> dtorch.ones(2, 3).sum_to_size(1, 3).tolist()
        [[2.0, 2.0, 2.0]]
    """
    size = keyword_form("sum_to_size", "size", size, kw)  # torch's sum_to_size(size=...)
    target = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
    if not size or not all(isinstance(s, int) for s in target):
        raise TypeError(f"sum_to_size: size must be ints or one sequence of ints, got {size}")
    shape, lead = tuple(self.shape), self.ndim - len(target)
    bad = lead < 0 or any(s not in (1, shape[lead + i]) for i, s in enumerate(target))
    if bad:
        raise ShapeError(f"size {{{list(target)}}} is not expandable to size {{{list(shape)}}}.")
    kept = [lead + i for i, s in enumerate(target) if s == 1 and shape[lead + i] != 1]
    if lead == 0 and not kept:
        return self
    out = _sum(self, tuple(kept), keepdim=True) if kept else self
    return _sum(out, tuple(range(lead))) if lead else out


def split_with_sizes(self: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """torch's ``split_with_sizes``: pieces of the given sizes along ``dim``, which must add up
    to its length; each a slice, as ``split`` makes it.

    Example:
        >>> import dtorch
        >>> [p.tolist() for p in dtorch.arange(5).split_with_sizes([2, 3])]
        [[0, 1], [2, 3, 4]]
    """
    if isinstance(split_sizes, (int, TensorBase)) or not isinstance(split_sizes, Sequence):
        raise TypeError(f"split_with_sizes(): argument 'split_sizes' must be tuple of ints, "
                        f"not {type(split_sizes).__name__}")  # fmt: skip
    sizes = [as_int("split_with_sizes", "split_sizes", s) for s in split_sizes]
    if self.ndim == 0:
        raise ShapeError("split_with_sizes: split expects at least a 1-dimensional tensor")
    length = self.shape[normalize_dim(dim, self.ndim, op="split_with_sizes")]
    if any(s < 0 for s in sizes) or sum(sizes) != length:
        raise ShapeError(
            f"split_with_sizes expects split_sizes to be non-negative and sum exactly to "
            f"{length} (input tensor's size at dimension {dim}), but got split_sizes={sizes}"
        )
    return self.split(sizes, dim)


def get_device(self: Tensor) -> int:
    """torch's ``get_device`` of a CPU tensor: -1 (dtorch values live on the mesh).

    Example:
        >>> import dtorch
        >>> dtorch.ones(2).get_device()
        -1
    """
    return -1


def layout(self: Tensor) -> torch.layout:
    """torch's ``layout``: ``torch.strided``, dtorch tensors are dense.

    Example:
        >>> import dtorch
        >>> dtorch.ones(2).layout
        torch.strided
    """
    return torch.strided
