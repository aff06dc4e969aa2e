"""Operators made of slices of one dim (``getitem`` operators recorded under the name the user
called): ``select``, ``tensor_split`` and ``diff``.

Placements are a slice's: the other dims keep their shards and a Partial stays Partial (a
slice is linear, and so is ``diff``'s subtraction). An integer index of a sharded dim
(``select``) is refused, as ``t[i]`` is; a slice of a sharded dim only where its result is
still chunked over the same devices (else a PlacementError that says to redistribute that
dim first), as ``split`` and ``narrow`` do.

Example:
    >>> import dtorch
    >>> t = dtorch.arange(6).view(2, 3)
    >>> t.select(1, -1).tolist(), [p.shape[1] for p in t.tensor_split(2, dim=1)]
    ([2, 5], [2, 1])
    >>> dtorch.diff(dtorch.tensor([1, 4, 9, 16])).tolist()
    [3, 5, 7]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_int, normalize_dim, numpy_names
from dtorch.api.handle import is_tensor
from dtorch.api.ops.basic_index import normalize_index, slice_along, sliced
from dtorch.api.ops.elementwise import binary
from dtorch.api.ops.shape import cat
from dtorch.api.record import named_as, tensor_arg, with_inputs
from dtorch.errors import DtypeError, ParamError, ShapeError
from dtorch.ir.opkind import BinaryKind

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


@numpy_names
def select(input: Tensor, dim: int, index: Any) -> Tensor:
    """torch's ``select``: the slice of ``dim`` at ``index`` (negative: from the end), with
    ``dim`` removed; the same as ``t[(:,) * dim, index]``. A sharded ``dim`` is refused,
    as that integer index is (redistribute it to Replicate first).

    Example:
        >>> import dtorch
        >>> dtorch.select(dtorch.arange(6).view(2, 3), 0, 1).tolist()
        [3, 4, 5]
    """
    tensor_arg("select", input)
    if not input.ndim:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")  # torch's words
    d = normalize_dim(dim, input.ndim, op="select")
    i = as_int("select", "index", index)
    size = input.shape[d]
    if not -size <= i < size:
        raise IndexError(
            f"select(): index {i} out of range for tensor of size {list(input.shape)} at "
            f"dimension {d}"
        )
    entries = normalize_index((slice(None),) * d + (i,), input.shape, "select")
    return sliced("select", input, entries)


@numpy_names
def tensor_split(
    input: Tensor,
    indices_or_sections: Any = None,
    dim: int = 0,
    *,
    sections: Any = None,
    indices: Any = None,
) -> tuple[Tensor, ...]:
    """torch's ``tensor_split``: ``sections`` (an int) pieces along ``dim``, the first
    ``size % sections`` one longer, or the pieces between the ``indices`` (a list, read as
    Python slice bounds: ``[2, 5]`` gives ``[:2]``, ``[2:5]``, ``[5:]``). An int64 tensor
    (0-d: sections, 1-D: indices) is read on the client. Each piece is a slice.

    Example:
        >>> import dtorch
        >>> [p.tolist() for p in dtorch.tensor_split(dtorch.arange(7), 3)]
        [[0, 1, 2], [3, 4], [5, 6]]
        >>> [p.tolist() for p in dtorch.arange(5).tensor_split([1, 3])]
        [[0], [1, 2], [3, 4]]
    """
    tensor_arg("tensor_split", input)
    given = _split_arg(indices_or_sections, sections, indices)
    if not input.ndim:
        raise ShapeError(
            "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims"
        )
    d = normalize_dim(dim, input.ndim, op="tensor_split")
    size = input.shape[d]
    bounds = _section_bounds(size, given) if isinstance(given, int) else _index_bounds(given)
    pieces = (slice(a, b).indices(size)[:2] for a, b in bounds)
    return tuple(slice_along("tensor_split", input, d, a, max(0, b - a)) for a, b in pieces)


def _split_arg(either: Any, sections: Any, indices: Any) -> int | list[int]:
    """The one argument given, as sections (an int) or indices (a list of ints)."""
    given = [v for v in (either, sections, indices) if v is not None]
    if len(given) != 1:
        raise TypeError(
            "tensor_split: give exactly one of indices_or_sections, sections= or indices="
        )
    value = given[0]
    if isinstance(value, torch.Tensor) or is_tensor(value):
        value = _tensor_arg(value)
    if isinstance(value, (list, tuple, torch.Size)):
        return [as_int("tensor_split", "an index", v) for v in value]
    return as_int("tensor_split", "sections", value)


def _tensor_arg(value: Any) -> int | list[int]:
    # torch's checks of a tensor argument, then its values (fetched: a dtorch tensor waits)
    if value.dtype != torch.int64:
        raise DtypeError(
            "tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
            f"{value.dtype}"
        )
    if value.ndim > 1:
        raise ShapeError(
            "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
            f"one-dimensional tensor, but got a tensor with {value.ndim} dims"
        )
    listed: int | list[int] = value.tolist()
    return listed


#: The most sections ``tensor_split`` makes: each is an operator and a tensor (a million take
#: seconds to record), where torch makes views; torch itself fails to allocate 2**40.
MAX_SECTIONS = 1 << 20


def _section_bounds(size: int, sections: int) -> list[tuple[int, int]]:
    if sections <= 0:
        raise ParamError(f"number of sections must be larger than 0, got {sections}")
    if sections > MAX_SECTIONS:
        raise ParamError(
            f"tensor_split: {sections} sections of a dim of {size} would make {sections} "
            f"tensors; accepted: at most {MAX_SECTIONS:,} sections"
        )
    small, extra = divmod(size, sections)
    ends = [(i + 1) * small + min(i + 1, extra) for i in range(sections)]
    return list(zip([0, *ends[:-1]], ends, strict=True))


def _index_bounds(indices: list[int]) -> list[tuple[int | None, int | None]]:
    return list(zip([None, *indices], [*indices, None], strict=True))


@numpy_names
@with_inputs  # a refusal of a slice of the joined tensor names the call's tensors
def diff(
    input: Tensor, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None
) -> Tensor:
    """torch's ``diff``: the ``n``-th forward difference along ``dim``
    (``out[i] = x[i + 1] - x[i]``, ``!=`` for bools), of ``input`` with ``prepend`` and
    ``append`` (tensors, same dims and shape but along ``dim``) joined to it first. Made of
    slices and a subtraction: a shard of another dim stays, a Partial stays Partial (it is
    linear), a sharded ``dim`` is refused where its slices are not chunks (redistribute it).

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([1, 3, 6, 10])
        >>> dtorch.diff(x, n=2).tolist(), x.diff(prepend=dtorch.tensor([0])).tolist()
        ([1, 1], [1, 2, 3, 4])
    """
    tensor_arg("diff", input)
    if not input.ndim:
        raise ShapeError("diff expects input to be at least one-dimensional")
    n = as_int("diff", "n", n)
    if n < 0:
        raise ParamError(f"order must be non-negative but got {n}")
    d = normalize_dim(dim, input.ndim, op="diff")
    if n == 0:  # torch's result: a copy of input, prepend and append checked, never joined
        _joined(input, d, prepend, append, join=False)
        return input.clone()
    x = _joined(input, d, prepend, append)  # checks prepend and append, as torch does first
    kind = BinaryKind.NE if x.dtype == torch.bool else BinaryKind.SUB
    for _ in range(n):
        size = x.shape[d]
        if size == 0:
            break
        x = binary(
            kind,
            "diff",
            slice_along("diff", x, d, 1, size - 1),
            slice_along("diff", x, d, 0, size - 1),
        )
    return x


def _joined(input: Tensor, dim: int, prepend: Any, append: Any, join: bool = True) -> Tensor:
    """``prepend``, ``input``, ``append`` concatenated along ``dim`` (torch's checks first;
    without ``join``, the checks alone)."""
    parts = [_part(input, dim, p, "prepend") for p in (prepend,) if p is not None]
    parts += [input] + [_part(input, dim, a, "append") for a in (append,) if a is not None]
    if len(parts) == 1 or not join:
        return input
    with named_as("diff"):  # a refusal of the cat names the function called
        return cat(parts, dim)


def _part(input: Tensor, dim: int, value: Any, label: str) -> Tensor:
    if isinstance(value, torch.Tensor):
        value = beside(input, value)
    elif not is_tensor(value):
        raise TypeError(f"diff(): argument '{label}' must be Tensor, not {type(value).__name__}")
    if value.ndim != input.ndim:
        raise ShapeError("diff expects prepend or append to be the same dimension as input")
    for i, (a, b) in enumerate(zip(input.shape, value.shape, strict=True)):
        if i != dim and a != b:
            raise ShapeError(
                "diff expects the shape of tensor to prepend or append to match that of input "
                f"except along the differencing dimension; input.size({i}) = {a}, but got "
                f"tensor.size({i}) = {b}"
            )
    part: Tensor = value
    return part
