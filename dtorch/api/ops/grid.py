"""Shapes and geometry composed of dtorch's operators: ``broadcast_tensors``, ``meshgrid``,
``atleast_1d/2d/3d``, ``ravel``, ``hsplit``/``vsplit``/``dsplit``, ``rot90``,
``cartesian_prod``, ``block_diag``, ``tril_indices``/``triu_indices`` and ``unfold``
(``cross``, ``cdist``, ``cov``, ``corrcoef`` and the scatters: ``grid_more``).

Each checks torch's shapes, dtypes and arguments at the call and records its parts under its
own name (a refusal names what the user called). Layouts:

* ``broadcast_tensors``, ``meshgrid``, ``atleast_*``, ``ravel`` and the splits are views and
  slices (``expand``, ``reshape``, ``tensor_split``): their placements and refusals.
* ``rot90`` is ``flip`` and ``transpose``: a flipped dim is gathered first where sharded (a
  flip moves data between devices), the other shards move with the transpose, a Partial
  stays Partial. ``cartesian_prod`` is a ``meshgrid`` and a ``stack``.
* ``block_diag`` makes its inputs Replicate first (small matrices) and returns Replicate.
* ``unfold`` gathers the dim it unfolds (Replicate on it where sharded); the other dims keep
  their shards, a Partial stays Partial (an ``index_select`` is linear).
* ``tril_indices``/``triu_indices`` are computed on the client and distributed as
  ``dtorch.eye`` is.

Example:
    >>> import dtorch
    >>> a, b = dtorch.meshgrid(dtorch.arange(2), dtorch.arange(3), indexing="ij")
    >>> b.tolist(), dtorch.arange(4).reshape(2, 2).rot90().tolist()
    ([[0, 1, 2], [0, 1, 2]], [[1, 3], [0, 2]])
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_int, normalize_dim
from dtorch.api.handle import TensorBase
from dtorch.api.ops.slices import tensor_split
from dtorch.api.record import named_as
from dtorch.api.redistribute import gathered, replicated
from dtorch.errors import DtypeError, ParamError, ShapeError, UnsupportedDtypeError

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def grid_tensor(name: str, value: Any, arg: str = "input") -> Tensor:
    if not isinstance(value, TensorBase):
        raise TypeError(f"{name}: {arg} must be a dtorch.Tensor, got {type(value).__name__}")
    return value  # type: ignore[return-value]


def _listed(name: str, tensors: tuple[Any, ...]) -> list[Tensor]:
    """The tensors given one by one or as one list/tuple, as torch takes them."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    return [grid_tensor(name, t, f"tensor {i}") for i, t in enumerate(tensors)]


def shape_list(shape: Sequence[int]) -> str:
    return str(list(shape))


# --- broadcasting and grids -----------------------------------------------------------------
def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """``torch.broadcast_tensors``: each tensor expanded to the shapes' broadcast (views, as
    ``expand``: shards stay, a broadcast dim is Replicate).

    Example:
        >>> import dtorch
        >>> a, b = dtorch.broadcast_tensors(dtorch.arange(3), dtorch.zeros(2, 1))
        >>> a.shape, b.shape
        (torch.Size([2, 3]), torch.Size([2, 3]))
    """
    ts = _listed("broadcast_tensors", tensors)
    try:
        shape = torch.broadcast_shapes(*(t.shape for t in ts))
    except RuntimeError as error:
        raise ShapeError(f"broadcast_tensors: {error}") from None
    with named_as("broadcast_tensors", "expand"):
        return tuple(t.expand(shape) for t in ts)


def meshgrid(*tensors: Tensor, indexing: str | None = None) -> tuple[Tensor, ...]:
    """``torch.meshgrid``: grids of 0-d or 1-D tensors of one dtype, ``indexing`` ``"ij"``
    (the default, with torch's warning when not given) or ``"xy"`` (the first two dims
    swapped). Each grid is an ``expand`` of a view.

    Example:
        >>> import dtorch
        >>> x, y = dtorch.meshgrid(dtorch.arange(2), dtorch.arange(3), indexing="xy")
        >>> x.shape, x[0].tolist()
        (torch.Size([3, 2]), [0, 1])
    """
    ts = _listed("meshgrid", tensors)
    mode = _indexing(indexing)
    if not ts:
        raise ParamError("meshgrid expects a non-empty TensorList")
    for t in ts:
        if t.ndim > 1:
            raise ShapeError(f"torch.meshgrid: Expected 0D or 1D tensor, got shape {list(t.shape)}")
        if t.dtype != ts[0].dtype:
            raise DtypeError("meshgrid expects all tensors to have the same dtype")
    order = list(range(len(ts)))
    if mode == "xy" and len(ts) > 1:  # x varies along the grid's columns
        order[0], order[1] = 1, 0
    shape = [0] * len(ts)
    for i, t in zip(order, ts, strict=True):
        shape[i] = t.numel()
    with named_as("meshgrid"):
        return tuple(_along(t, i, len(ts)).expand(shape) for i, t in zip(order, ts, strict=True))


def _indexing(indexing: Any) -> str:
    if indexing is None:  # torch's default, with its warning
        warnings.warn(
            "torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
            "argument.",
            UserWarning,
            stacklevel=3,
        )
        return "ij"
    if indexing not in ("ij", "xy"):
        raise ParamError(
            f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}'
        )
    return str(indexing)


def _along(t: Tensor, dim: int, ndim: int) -> Tensor:
    """``t`` (0-d or 1-D) as an ``ndim``-D view with its values along ``dim``."""
    return t.reshape([-1 if d == dim else 1 for d in range(ndim)])


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """``torch.cartesian_prod``: every tuple of one element of each 1-D tensor, one row each
    (a single tensor is returned as it is, as torch does).

    Example:
        >>> import dtorch
        >>> dtorch.cartesian_prod(dtorch.tensor([1, 2]), dtorch.tensor([3, 4])).tolist()
        [[1, 3], [1, 4], [2, 3], [2, 4]]
    """
    ts = _listed("cartesian_prod", tensors)
    for t in ts:
        if t.ndim != 1:
            raise ShapeError(f"cartesian_prod: Expect a 1D vector, but got shape {list(t.shape)}")
    if len(ts) == 1:
        return ts[0]
    grids = meshgrid(*ts, indexing="ij")
    with named_as("cartesian_prod"):
        from dtorch.api.ops.shape import stack

        return stack([g.reshape(-1) for g in grids], 1)


# --- at least n dims, ravel, splits ---------------------------------------------------------
def _atleast(name: str, tensors: tuple[Any, ...], grow: Any) -> Any:
    one = len(tensors) == 1 and not isinstance(tensors[0], (list, tuple))
    ts = [grow(t) for t in _listed(name, tensors)]
    return ts[0] if one else tuple(ts)


def atleast_1d(*tensors: Tensor) -> Any:
    """``torch.atleast_1d``: a 0-d tensor as 1 element, others as they are; several tensors
    (or a list) give a tuple.

    Example:
        >>> import dtorch
        >>> dtorch.atleast_1d(dtorch.tensor(5)).shape
        torch.Size([1])
    """
    return _atleast("atleast_1d", tensors, lambda t: t.reshape(1) if t.ndim == 0 else t)


def atleast_2d(*tensors: Tensor) -> Any:
    """``torch.atleast_2d``: fewer than 2 dims become a row ``(1, n)``.

    Example:
        >>> import dtorch
        >>> [t.shape for t in dtorch.atleast_2d(dtorch.tensor(5), dtorch.arange(3))]
        [torch.Size([1, 1]), torch.Size([1, 3])]
    """
    return _atleast("atleast_2d", tensors, lambda t: t.reshape(1, -1) if t.ndim < 2 else t)


def atleast_3d(*tensors: Tensor) -> Any:
    """``torch.atleast_3d``: 0-d as ``(1, 1, 1)``, 1-D ``(n,)`` as ``(1, n, 1)``, 2-D
    ``(m, n)`` as ``(m, n, 1)``.

    Example:
        >>> import dtorch
        >>> dtorch.atleast_3d(dtorch.ones(2, 3)).shape
        torch.Size([2, 3, 1])
    """
    return _atleast("atleast_3d", tensors, _grow_3d)


def _grow_3d(t: Tensor) -> Tensor:
    if t.ndim == 0:
        return t.reshape(1, 1, 1)
    if t.ndim == 1:
        return t.reshape(1, -1, 1)
    return t.unsqueeze(-1) if t.ndim == 2 else t


def ravel(input: Tensor) -> Tensor:
    """``torch.ravel``: the elements as one dim (``reshape(-1)``).

    Example:
        >>> import dtorch
        >>> dtorch.ravel(dtorch.arange(4).reshape(2, 2)).tolist()
        [0, 1, 2, 3]
    """
    with named_as("ravel", "reshape"):
        return grid_tensor("ravel", input).reshape(-1)


def _split(name: str, input: Any, given: Any, dim: int, least: int) -> tuple[Tensor, ...]:
    x = grid_tensor(name, input)
    if x.ndim < least:
        raise ShapeError(
            f"torch.{name} requires a tensor with at least {least} dimension, but got a tensor "
            f"with {x.ndim} dimensions!"
        )
    d = dim if x.ndim > 1 or name != "hsplit" else 0
    if isinstance(given, (torch.Tensor, TensorBase)):  # torch takes an int or int indices
        raise TypeError(f"{name}: indices_or_sections must be an int or a list of ints, got a "
                        "tensor")  # fmt: skip
    if not isinstance(given, (list, tuple, torch.Size)):
        sections = as_int(name, "sections", given)
        if sections <= 0 or x.shape[d] % sections:
            raise ShapeError(
                f"torch.{name} attempted to split along dimension {d}, but the size of the "
                f"dimension {x.shape[d]} is not divisible by the split_size {sections}!"
            )
        given = sections
    with named_as(name, "tensor_split"):
        return tensor_split(x, given, d)


def hsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """``torch.hsplit``: ``tensor_split`` along dim 1 (dim 0 of a 1-D tensor); an int must
    divide that dim.

    Example:
        >>> import dtorch
        >>> [p.tolist() for p in dtorch.arange(4).reshape(1, 4).hsplit(2)]
        [[[0, 1]], [[2, 3]]]
    """
    return _split("hsplit", input, indices_or_sections, 1, 1)


def vsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """``torch.vsplit``: ``tensor_split`` along dim 0 of a tensor of 2 dims or more.

    Example:
        >>> import dtorch
        >>> [p.shape[0] for p in dtorch.ones(4, 2).vsplit([1])]
        [1, 3]
    """
    return _split("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """``torch.dsplit``: ``tensor_split`` along dim 2 of a tensor of 3 dims or more.

    Example:
        >>> import dtorch
        >>> [p.shape for p in dtorch.dsplit(dtorch.ones(1, 1, 4), 2)]
        [torch.Size([1, 1, 2]), torch.Size([1, 1, 2])]
    """
    return _split("dsplit", input, indices_or_sections, 2, 3)


def split_method(split: Callable[[Tensor, Any], tuple[Tensor, ...]]) -> Callable[..., Any]:
    """``split`` as torch's Tensor method: ``x.hsplit(2)``, ``x.hsplit([1, 2])`` or the indices
    one by one, ``x.hsplit(1, 2)``."""

    @functools.wraps(split)
    def method(self: Tensor, *indices_or_sections: Any) -> tuple[Tensor, ...]:
        given = indices_or_sections
        return split(self, given[0] if len(given) == 1 else list(given))

    return method


# --- geometry -------------------------------------------------------------------------------
def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """``torch.rot90``: rotated ``k`` times by 90 degrees from ``dims[0]`` towards
    ``dims[1]`` (a ``flip`` and a ``transpose``; ``k % 4 == 0`` gives a copy). A flipped
    dim is gathered first where sharded.

    Example:
        >>> import dtorch
        >>> dtorch.rot90(dtorch.tensor([[1, 2], [3, 4]]), 2).tolist()
        [[4, 3], [2, 1]]
    """
    x = grid_tensor("rot90", input)
    dims = list(dims)
    if len(dims) != 2:
        raise ParamError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.ndim < 2:
        raise ShapeError(f"expected total dims >= 2, but got total dims = {x.ndim}")
    a, b = (normalize_dim(d, x.ndim, op="rot90") for d in dims)
    if a == b:
        raise ParamError(
            f"expected rotation dims to be different, but got dim0 = {a} and dim1 = {b}"
        )
    turns = as_int("rot90", "k", k) % 4
    flipped = {0: (), 1: (b,), 2: (a, b), 3: (a,)}[turns]
    with named_as("rot90"):
        y = gathered(x, flipped).flip(flipped) if flipped else x.clone()
        return y.transpose(a, b) if turns % 2 else y


def block_diag(*tensors: Tensor) -> Tensor:
    """``torch.block_diag``: the tensors (0-d as ``(1, 1)``, 1-D as a row) on the diagonal of
    a matrix of zeros, in their promoted dtype. Gathers its inputs: the result is Replicate.
    At least one tensor (torch's empty result would name no mesh).

    Example:
        >>> import dtorch
        >>> dtorch.block_diag(dtorch.tensor([[1, 2]]), dtorch.tensor(3)).tolist()
        [[1, 2, 0], [0, 0, 3]]
    """
    ts = _listed("block_diag", tensors)
    if not ts:
        raise ParamError("block_diag: expected at least one tensor; accepted: 1 or more")
    for i, t in enumerate(ts):
        if t.ndim > 2:
            raise ShapeError(
                f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} "
                f"has {t.ndim} dimensions"
            )
    # torch's result type: a 0-d tensor ranks below the others (one element per probe)
    dtype = torch.block_diag(*(torch.zeros([1] * t.ndim, dtype=t.dtype) for t in ts)).dtype
    with named_as("block_diag"):
        blocks = [replicated(t.reshape(1, -1) if t.ndim < 2 else t).to(dtype) for t in ts]
        return _diagonal_blocks(blocks, dtype)


def _diagonal_blocks(blocks: list[Tensor], dtype: torch.dtype) -> Tensor:
    from dtorch.api.ops.shape import cat

    width, start, rows = sum(b.shape[1] for b in blocks), 0, []
    for b in blocks:
        r, c = b.shape
        left = b.new_zeros(r, start, dtype=dtype)
        right = b.new_zeros(r, width - start - c, dtype=dtype)
        rows.append(cat([left, b, right], 1))
        start += c
    return cat(rows, 0)


def tril_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = torch.long, **kw: Any
) -> Tensor:
    """``torch.tril_indices``: the ``(2, N)`` coordinates of the lower triangle of a
    ``row`` x ``col`` matrix (``offset`` as ``tril``'s ``diagonal``), computed on the client
    and distributed as ``dtorch.eye`` (``device_mesh=``, ``placements=``, ``graph=``).

    Example:
        >>> import dtorch
        >>> dtorch.tril_indices(2, 2).tolist()
        [[0, 1, 1], [0, 0, 1]]
    """
    return _indices("tril_indices", torch.tril_indices, row, col, offset, dtype, kw)


def triu_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = torch.long, **kw: Any
) -> Tensor:
    """``torch.triu_indices``: the upper triangle's coordinates, as ``tril_indices``.

    Example:
        >>> import dtorch
        >>> dtorch.triu_indices(2, 3, 1).tolist()
        [[0, 0, 1], [1, 2, 2]]
    """
    return _indices("triu_indices", torch.triu_indices, row, col, offset, dtype, kw)


def _indices(name: str, fn: Any, row: Any, col: Any, offset: Any, dtype: Any, kw: Any) -> Tensor:
    from dtorch.api.create import distribute
    from dtorch.api.tensor import Tensor

    r, c, k = as_int(name, "row", row), as_int(name, "col", col), as_int(name, "offset", offset)
    try:  # torch's checks of the arguments, at the call
        value = fn(r, c, k, dtype=dtype)
    except NotImplementedError as error:
        raise UnsupportedDtypeError(f"{name}: {error}; accepted: integer dtypes") from None
    except RuntimeError as error:
        raise ParamError(f"{name}: {error}") from None
    return distribute(Tensor, value, **kw)


def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """``Tensor.unfold``: the windows of ``size`` elements every ``step`` along
    ``dimension``, that dim counting the windows and a new last dim holding each. A copy (an
    ``index_select``; torch's is a view): the unfolded dim is gathered first where sharded,
    the other dims keep their shards.

    Example:
        >>> import dtorch
        >>> dtorch.arange(5).unfold(0, 2, 2).tolist()
        [[0, 1], [2, 3]]
    """
    x = grid_tensor("unfold", input)
    d = normalize_dim(dimension, max(x.ndim, 1), op="unfold")
    n = x.shape[d] if x.ndim else 1
    width, stride = as_int("unfold", "size", size), as_int("unfold", "step", step)
    if width < 0:
        raise ShapeError(f"unfold: size is {width} but must be >= 0")
    if width > n:
        raise ShapeError(f"maximum size for tensor at dimension {d} is {n} but size is {width}")
    if stride <= 0:
        raise ParamError(f"step is {stride} but must be > 0")
    count = (n - width) // stride + 1
    index = (torch.arange(count) * stride)[:, None] + torch.arange(width)
    with named_as("unfold"):
        if not x.ndim:  # torch's window of a 0-d tensor: its one element (or none), in 1 dim
            return x.reshape(1).narrow(0, 0, width)
        picked = gathered(x, (d,)).index_select(d, beside(x, index.reshape(-1)))
        return picked.unflatten(d, (count, width)).movedim(d + 1, -1)
