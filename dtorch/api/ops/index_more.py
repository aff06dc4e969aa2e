"""Diagonals and indexing composed of dtorch's operators: ``diagonal``, ``diag``,
``diag_embed``, ``trace``, ``index_fill``, ``index_copy``, ``index_reduce``, ``take``,
``aminmax``.

Each checks torch's shapes, dtypes and (for a torch index) index values at the call, and
records its parts under its own name, so a refusal names what the user called. Layouts:

* ``diagonal`` (``diag`` of a matrix, ``trace``) is a Gather of each row's entry: the two
  dims it reads are redistributed to Replicate where sharded (a choice, as ``index_select``
  makes: an all-gather along them keeps the data on the devices); the other dims keep their
  shards and a Partial stays Partial. It returns a copy, where torch returns a view.
* ``diag_embed`` (``diag`` of a vector) fills a ``masked_fill`` of the values broadcast
  over the new dims: a shard of the input's last dim stays a shard of the result's first new
  dim (with ``offset`` 0), a Partial stays Partial.
* ``index_fill`` is a ``masked_fill`` along ``dim`` (any shards, a Partial with the number 0);
  ``index_copy`` and ``index_reduce`` a Scatter (``dim`` unsharded; another sharded dim
  shards ``source`` alike, a Replicate ``source`` is chunked to match); ``take`` an
  ``index_select`` of the flattened tensor, made Replicate first; ``aminmax`` two reductions
  (``amin``'s and ``amax``'s placements: a sharded reduced dim gives Replicate).

Example:
    >>> import dtorch
    >>> m = dtorch.arange(9).reshape(3, 3)
    >>> m.diagonal().tolist(), m.diagonal(1).tolist(), m.trace().item()
    ([0, 4, 8], [1, 5], 12)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_flag, as_int, normalize_dim, numpy_names
from dtorch.api.handle import TensorBase, is_tensor
from dtorch.api.ops.convert import assign, cast, writer
from dtorch.api.ops.elementwise import binary
from dtorch.api.ops.masked import select
from dtorch.api.ops.order import gather_aligned
from dtorch.api.ops.reduce import reduce
from dtorch.api.ops.scalars import as_scalar, is_scalar, python_number
from dtorch.api.ops.shape import expand, movedim, reshape, squeeze, unsqueeze
from dtorch.api.ops.take import put
from dtorch.api.ops.take import take as take_along
from dtorch.api.record import named_as, record, record_one
from dtorch.errors import (
    DimError,
    DtypeError,
    ParamError,
    PlacementError,
    ShapeError,
    UnsupportedDtypeError,
)
from dtorch.ir.opkind import BinaryKind, MaskedKind, ReduceKind, ScatterReduceKind
from dtorch.ir.params import MaskedParam, ScatterParam
from dtorch.ir.placement import Placement, Replicate, Shard

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def _tensor(name: str, value: Any, arg: str = "input") -> Tensor:
    if not isinstance(value, TensorBase):
        raise TypeError(f"{name}: {arg} must be a dtorch.Tensor, got {type(value).__name__}")
    return value  # type: ignore[return-value]


def _offset(name: str, offset: Any) -> int:
    # an int of int64 (a numpy integer too), as torch takes it
    return as_int(name, "offset", offset)


def _unsharded(t: Tensor, dims: tuple[int, ...]) -> Tensor:
    """``t`` with its shards of ``dims`` gathered (Replicate on those mesh dims)."""
    placements: list[Placement] = [
        Replicate() if isinstance(p, Shard) and p.dim in dims else p for p in t.placements
    ]
    return t if placements == list(t.placements) else t.redistribute(placements=placements)


# --- diagonals ------------------------------------------------------------------------------
def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """``torch.diagonal``: the entries ``input[i, i + offset]`` of the matrices over ``dim1``
    and ``dim2`` (``offset`` > 0 above the main diagonal, < 0 below), in a last dim, the
    other dims kept in order. A copy (torch's is a view: writing into it does not reach
    ``input``); placements as the module says.

    Example:
        >>> import dtorch
        >>> t = dtorch.arange(12).reshape(3, 4)
        >>> t.diagonal().tolist(), dtorch.diagonal(t, -1).tolist(), t.diagonal(2).tolist()
        ([0, 5, 10], [4, 9], [2, 7])
    """
    return _diagonal("diagonal", _tensor("diagonal", input), offset, dim1, dim2)


def _diagonal(name: str, x: Tensor, offset: Any, dim1: Any, dim2: Any) -> Tensor:
    k = _offset(name, offset)
    d1, d2 = normalize_dim(dim1, x.ndim, op=name), normalize_dim(dim2, x.ndim, op=name)
    if d1 == d2:
        raise ShapeError(f"{name}: diagonal dimensions cannot be identical {dim1}, {dim2}")
    if k < 0:  # below the diagonal: above it in the matrices' transposes
        d1, d2, k = d2, d1, -k
    length = max(min(x.shape[d1], x.shape[d2] - k), 0)
    moved = movedim(_unsharded(x, (d1, d2)), (d1, d2), (-2, -1))
    batch = tuple(moved.shape[:-2])
    column = beside(x, (torch.arange(length) + k).reshape(length, 1))
    index = expand(column, (*batch, length, 1))  # row i reads column i + k
    return squeeze(gather_aligned(moved, index, moved.ndim - 1, name), -1)


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """``torch.diag_embed``: each vector of ``input``'s last dim written on the diagonal
    ``offset`` of a square matrix (zeros elsewhere), over the new dims ``dim1`` and ``dim2``
    of the result (one more dim than ``input``).

    Example:
        >>> import dtorch
        >>> dtorch.diag_embed(dtorch.tensor([[1, 2], [3, 4]])).tolist()
        [[[1, 0], [0, 2]], [[3, 0], [0, 4]]]
        >>> dtorch.diag_embed(dtorch.tensor([1.0, 2.0]), offset=-1).tolist()
        [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0]]
    """
    return _embed("diag_embed", _tensor("diag_embed", input), offset, dim1, dim2)


def _embed(name: str, x: Tensor, offset: Any, dim1: Any, dim2: Any) -> Tensor:
    k = _offset(name, offset)
    if x.ndim == 0:
        raise ShapeError(f"{name}: expected a tensor of at least 1 dim, got a 0-d tensor")
    d1, d2 = normalize_dim(dim1, x.ndim + 1, op=name), normalize_dim(dim2, x.ndim + 1, op=name)
    if d1 == d2:
        raise ShapeError(f"{name}: diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = int(x.shape[-1])
    m = n + abs(k)
    square = (*x.shape[:-1], m, m)
    if n == 0:
        return movedim(x.new_zeros(square), (-2, -1), (d1, d2))
    values = x
    if k:  # the vector at length m (its entries past n fall off the diagonal)
        positions = torch.arange(m).clamp(max=n - 1)
        values = take_along(_unsharded(x, (x.ndim - 1,)), x.ndim - 1, positions, name, False)
    values = unsqueeze(values, -1 if k >= 0 else -2)  # row i holds v[i] (k < 0: column j)
    count = beside(x, torch.arange(m))
    gap = binary(BinaryKind.SUB, name, unsqueeze(count, 0), unsqueeze(count, 1))  # j - i
    off = binary(BinaryKind.NE, name, gap, k)
    out = record(name, MaskedParam(MaskedKind.FILL, as_scalar(0)), (expand(values, square), off))[0]
    return movedim(out, (-2, -1), (d1, d2))


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """``torch.diag``: of a vector, the square matrix with it on the diagonal ``diagonal``
    (``diag_embed``); of a matrix, its diagonal ``diagonal`` as a vector (``diagonal``).

    Example:
        >>> import dtorch
        >>> dtorch.diag(dtorch.tensor([1, 2]), 1).tolist()
        [[0, 1, 0], [0, 0, 2], [0, 0, 0]]
        >>> dtorch.diag(dtorch.tensor([[1, 2], [3, 4]])).tolist()
        [1, 4]
    """
    x = _tensor("diag", input)
    if x.ndim == 1:
        return _embed("diag", x, diagonal, 0, 1)
    if x.ndim == 2:
        return _diagonal("diag", x, diagonal, 0, 1)
    raise ShapeError(f"diag: diag(): Supports 1D or 2D tensors. Got {x.ndim}D")


def trace(input: Tensor) -> Tensor:
    """``torch.trace`` (the method ``Tensor.trace``; ``dtorch.trace`` traces programs): the sum
    of a matrix's main diagonal, int64 for integer matrices; bools are refused, as in torch.

    Example:
        >>> import dtorch
        >>> dtorch.arange(6).reshape(2, 3).trace().item()
        4
    """
    x = _tensor("trace", input)
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
    if x.dtype == torch.bool:
        raise UnsupportedDtypeError("trace: \"trace\" not implemented for 'Bool'; cast first")
    return reduce(ReduceKind.SUM, "trace", _diagonal("trace", x, 0, 0, 1))


# --- indexing -----------------------------------------------------------------------------
def _index(name: str, x: Tensor, index: Any, dim: int, wrap: bool) -> Tensor:
    """``index`` (a 0-d or 1-D int64 tensor, dtorch or torch) as a 1-D dtorch tensor on
    ``x``'s mesh; a torch one's values checked here (negatives wrap where ``wrap``)."""
    if not (isinstance(index, torch.Tensor) or is_tensor(index)):
        raise TypeError(f"{name}: index must be a tensor of int64, got {type(index).__name__}")
    if index.dtype != torch.int64:
        raise DtypeError(f"{name}: Expected a long tensor for index, but got {index.dtype}")
    if index.ndim > 1:
        raise IndexError(f"{name}: Index should have dimension 1 or 0 (got {index.ndim})")
    if is_tensor(index) and index.device_mesh != x.device_mesh:
        index = index.to_torch()
    if isinstance(index, torch.Tensor):
        _check_bounds(name, index, dim, int(x.shape[dim]), wrap)
        return beside(x, index.reshape(-1))
    found: Tensor = index
    return reshape(found, -1) if found.ndim == 0 else found


def _check_bounds(name: str, index: torch.Tensor, dim: int, size: int, wrap: bool) -> None:
    flat = index.reshape(-1)
    bad = flat[(flat < (-size if wrap else 0)) | (flat >= size)]
    if bad.numel():
        raise IndexError(
            f"{name}: index {int(bad[0])} is out of bounds for dimension {dim} with size {size}"
        )


def _one_dim(x: Tensor) -> Tensor:
    # torch indexes a 0-d tensor as one of one element (dim 0 or -1, index 0)
    return x if x.ndim else reshape(x, (1,))


def index_fill(input: Tensor, dim: int, index: Any, value: Any) -> Tensor:
    """``torch.index_fill``: a copy of ``input`` with ``value`` (a number or a 0-d tensor) at
    the positions ``index`` (int64, 0-d or 1-D; negatives count from the end) along ``dim``
    (a 0-d ``input`` is one of one element, as in torch). A ``masked_fill`` along ``dim``: any
    shards stay; a Partial stays with the number 0. A number ``input``'s dtype cannot hold (300
    for int8) is refused as torch refuses it; a dtorch 0-d value stays on the devices (no
    fetch: it also traces) and is cast there as ``to`` casts, wrapping where torch refuses.

    Example:
        >>> import dtorch
        >>> x = dtorch.zeros(2, 3)
        >>> dtorch.index_fill(x, 1, dtorch.tensor([0, -1]), 7.0).tolist()
        [[7.0, 0.0, 7.0], [7.0, 0.0, 7.0]]
    """
    given = _tensor("index_fill", input)
    x = _one_dim(given)
    d = normalize_dim(dim, given.ndim, op="index_fill")
    if getattr(index, "dtype", torch.int64) != torch.int64:  # torch's class for index_fill
        raise IndexError(f"index_fill: Expected dtype int64 for index, got {index.dtype}")
    ids = _index("index_fill", x, index, d, wrap=True)
    hits = beside(x, torch.zeros(int(x.shape[d]), dtype=torch.bool))
    put(hits, 0, ids, True)
    mask = reshape(hits, tuple(-1 if i == d else 1 for i in range(x.ndim)))
    out = _filled(x, mask, value)
    return out if given.ndim else reshape(out, ())


def _filled(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    """``x`` with ``value`` where ``mask`` holds; a number (or torch 0-d tensor) ``x``'s dtype
    cannot hold is refused as torch refuses it."""
    if is_tensor(value):
        if value.ndim:
            raise ParamError(
                "index_fill: index_fill_ only supports a 0-dimensional value tensor, but got "
                f"tensor with {value.ndim} dimension(s)."
            )
        if value.dtype.is_complex and not x.dtype.is_complex:  # torch's, whatever the value
            raise ParamError(
                "index_fill: index_fill_(): Converting complex Scalar to non-complex type is "
                f"not supported (a complex value tensor for a {x.dtype} tensor); accepted: "
                "value.real, or a complex input"
            )
        return select("index_fill", mask, cast(value, x.dtype), x)
    if isinstance(value, torch.Tensor) and value.ndim == 0:
        value = value.item()
    if not is_scalar(value):
        raise TypeError(f"index_fill: value must be a number or a 0-d tensor, got {value!r}")
    number = python_number(value)  # one it cannot hold: the masked_fill rule's refusal
    return record("index_fill", MaskedParam(MaskedKind.FILL, as_scalar(number)), (x, mask))[0]


def index_copy(input: Tensor, dim: int, index: Any, source: Tensor) -> Tensor:
    """``torch.index_copy``: a copy of ``input`` whose slices ``index[i]`` (int64, 0-d or 1-D,
    each in range) along ``dim`` are ``source``'s slices ``i`` (``source`` of ``input``'s
    dtype and shape, but the index's length along ``dim``). Where an index repeats, one of
    the slices is written (torch does not say which either). A 0-d ``input`` is one of one
    element, a 0-d ``source`` one slice, as in torch. A Scatter: placements as the module says.

    Example:
        >>> import dtorch
        >>> x = dtorch.zeros(3, 2)
        >>> dtorch.index_copy(x, 0, dtorch.tensor([2, 0]), dtorch.ones(2, 2)).tolist()
        [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    """
    name = "index_copy"
    given, src = _tensor(name, input), _tensor(name, source, "source")
    d = normalize_dim(dim, given.ndim, op=name)
    return _slices_scattered(name, given, d, index, src, ScatterParam(d))


#: index_reduce's reductions, as Scatter's.
_INDEX_REDUCE = {
    "prod": ScatterReduceKind.PROD,
    "mean": ScatterReduceKind.MEAN,
    "amax": ScatterReduceKind.AMAX,
    "amin": ScatterReduceKind.AMIN,
}


def index_reduce(
    input: Tensor, dim: int, index: Any, source: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """``torch.index_reduce``: a copy of ``input`` whose slices ``index[i]`` along ``dim``
    are reduced (``reduce``: ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``) with
    ``source``'s slices ``i``, and with their own values where ``include_self``; the checks
    of ``index_copy``, an int32 index taken too. torch's ``scatter_reduce`` of the index
    spread over the slices (one Scatter): placements as the module says. A float16/bfloat16
    ``mean`` may differ from torch's ``index_reduce`` by an ulp (the two kernels round apart).

    Example:
        >>> import dtorch
        >>> x = dtorch.ones(3, 2)
        >>> src = dtorch.tensor([[2.0, 3.0], [4.0, 5.0]])
        >>> dtorch.index_reduce(x, 0, dtorch.tensor([2, 2]), src, "prod").tolist()
        [[1.0, 1.0], [1.0, 1.0], [8.0, 15.0]]
    """
    name = "index_reduce"
    if not isinstance(reduce, str):
        raise TypeError(f"{name}(): argument 'reduce' must be str, not {type(reduce).__name__}")
    kind = _INDEX_REDUCE.get(reduce)
    if kind is None:
        raise ParamError(
            f"{name}: Expected reduce to be one of prod, mean, amax or amin but got {reduce}."
        )
    given, src = _tensor(name, input), _tensor(name, source, "source")
    if given.dtype.is_complex or given.dtype == torch.bool:
        raise UnsupportedDtypeError(
            f'{name}: "index_reduce_func_cpu" not implemented for {given.dtype}; accepted: '
            "real floating-point and integer tensors"
        )
    d = normalize_dim(dim, given.ndim, op=name)
    if isinstance(index, torch.Tensor) or is_tensor(index):
        if index.dtype not in (torch.int32, torch.int64):
            raise DtypeError(f"{name}: Expected dtype int32/int64 for index but got: {index.dtype}")
        index = index.long()
    param = ScatterParam(d, kind, as_flag(include_self, name, "include_self"))
    return _slices_scattered(name, given, d, index, src, param)


def _slices_scattered(
    name: str, given: Tensor, d: int, index: Any, src: Tensor, param: ScatterParam
) -> Tensor:
    """index_copy's and index_reduce's Scatter of ``src``'s slices to ``index`` along ``d``,
    after torch's checks of both."""
    x = _one_dim(given)
    ids = _index(name, x, index, d, wrap=False)
    _check_copy(name, given, src, d, int(ids.shape[0]))
    if not src.ndim:  # a 0-d source is the one slice of a one-element index
        src = reshape(src, (1,) * x.ndim)
    with named_as(name, "expand"):
        out = _scattered(name, x, ids, src, param)
    return out if given.ndim else reshape(out, ())


def _scattered(name: str, x: Tensor, ids: Tensor, src: Tensor, param: ScatterParam) -> Tensor:
    """The Scatter of ``src``'s slices to ``ids`` along ``param.dim``; a Replicate ``index``
    or ``source`` is chunked like ``x`` where ``x`` shards another dim."""
    d = param.dim
    shaped = reshape(ids, tuple(-1 if i == d else 1 for i in range(x.ndim)))
    spread = expand(shaped, tuple(src.shape))
    try:
        return record_one(name, param, (x, spread, src))
    except PlacementError as refused:
        index, values = _like(spread, x, d), _like(src, x, d)
        if index is spread and values is src:
            raise
        try:
            return record_one(name, param, (x, index, values))
        except PlacementError:
            raise refused from None


#: The class torch raises for a count of indices other than the source's (by function).
_COUNT_ERRORS: dict[str, type[Exception]] = {"index_copy": IndexError, "index_reduce": ShapeError}


def _check_copy(name: str, x: Tensor, src: Tensor, d: int, count: int) -> None:
    # torch's refusals of index_copy's (index_reduce's) source, in its order (a 0-d tensor
    # is a "scalar")
    if not src.ndim and count != 1:
        raise IndexError(
            f"{name}: When source is scalar, index should have one element (got {count})"
        )
    if src.ndim != x.ndim and src.ndim and x.ndim:
        raise IndexError(
            f"{name}: When source and destination are not scalars, their dimensionality must "
            f"match. Source dimensionality ({src.ndim}), destination dimensionality ({x.ndim})"
        )
    if src.dtype != x.dtype:
        raise DtypeError(
            f"{name}: self and source expected to have the same dtype, but got (self) "
            f"{x.dtype} and (source) {src.dtype}"
        )
    kept, given = (list(t.shape[:d]) + list(t.shape[d + 1 :]) for t in (x, src))
    if kept != given:
        raise ShapeError(
            f"{name}: Source/destination tensor must have same slice shapes. Destination "
            f"slice shape: {kept} and source slice shape: {given} (dim {d} left out)"
        )
    if src.ndim and src.shape[d] != count:
        raise _COUNT_ERRORS[name](
            f"{name}: Number of indices ({count}) should be equal to source.size(dim) "
            f"({src.shape[d]})"
        )


def _like(t: Tensor, x: Tensor, d: int) -> Tensor:
    """``t`` chunked like ``x`` where ``x`` shards another dim than ``d`` and ``t`` is
    Replicate (a local slice, no communication)."""
    placements = [
        p if isinstance(q, Replicate) and isinstance(p, Shard) and p.dim != d else q
        for p, q in zip(x.placements, t.placements, strict=True)
    ]
    return t if placements == list(t.placements) else t.redistribute(placements=placements)


def masked_select(input: Tensor, mask: Any) -> Tensor:
    """``torch.masked_select``: the entries of ``input`` where ``mask`` (a bool tensor that
    broadcasts with ``input``) holds, as a 1-D tensor in row-major order. Its length depends
    on the mask's values: it is the boolean-mask index ``input[mask]`` of the two broadcast,
    computed as that one is (a Replicate result).

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[1, 2], [3, 4]])
        >>> dtorch.masked_select(x, x > 2).tolist(), x.masked_select(x[0] > 1).tolist()
        ([3, 4], [2, 4])
    """
    x = _tensor("masked_select", input)
    if not (isinstance(mask, torch.Tensor) or is_tensor(mask)):
        raise TypeError(f"masked_select: mask must be a bool tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise DtypeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype}")
    try:
        shape = tuple(torch.broadcast_shapes(tuple(x.shape), tuple(mask.shape)))
    except RuntimeError as error:
        raise ShapeError(f"masked_select: {error}") from None
    if isinstance(mask, torch.Tensor):
        mask = beside(x, mask)
    with named_as("masked_select", "expand"):
        return expand(x, shape)[expand(mask, shape)]


def take(input: Tensor, index: Any) -> Tensor:
    """``torch.take``: the entries of ``input`` read as a flat (row-major) tensor at
    ``index`` (int64, any shape, negatives count from the end); the result has ``index``'s
    shape. ``input`` is made Replicate first (any entry may be read), then one
    ``index_select``; the result is sharded where the (flattened) index is.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[1, 2, 3], [4, 5, 6]])
        >>> dtorch.take(x, dtorch.tensor([[0, -1], [4, 2]])).tolist()
        [[1, 6], [5, 3]]
    """
    x = _tensor("take", input)
    if not (isinstance(index, torch.Tensor) or is_tensor(index)):
        raise TypeError(f"take: index must be a tensor of int64, got {type(index).__name__}")
    if index.dtype != torch.int64:
        raise DtypeError(f"take: Expected a long tensor for index, but got {index.dtype}")
    if is_tensor(index) and index.device_mesh != x.device_mesh:
        index = index.to_torch()
    size = x.numel()
    if isinstance(index, torch.Tensor):
        flat = index.reshape(-1)
        bad = flat[(flat < -size) | (flat >= size)]
        if bad.numel():
            raise IndexError(
                f"take: out of range: tried to access index {int(bad[0])} on a tensor of "
                f"{size} elements."
            )
        index = beside(x, index)
    shape = tuple(index.shape)
    with named_as("take", "reshape"):
        flat_ids = reshape(_unsharded(index, tuple(range(1, index.ndim))), -1)
        flat_x = reshape(_unsharded(x, tuple(range(x.ndim))), -1)
        return reshape(take_along(flat_x, 0, flat_ids, "take"), shape)


@numpy_names
def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False) -> Any:
    """``torch.aminmax``: ``torch.return_types.aminmax`` of the smallest (``min``) and
    largest (``max``) entries over ``dim`` (an int; None: every entry), as ``amin`` and
    ``amax`` compute them (a sharded reduced dim combined across its devices: Replicate
    there). An empty reduced dim is refused.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([[3, 1], [2, 4]])
        >>> r = dtorch.aminmax(t, dim=1)
        >>> r.min.tolist(), r.max.tolist(), t.aminmax().max.item()
        ([1, 2], [3, 4], 4)
    """
    x = _tensor("aminmax", input)
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int)):
        raise TypeError(f"aminmax: argument 'dim' must be int, not {type(dim).__name__}")
    d = None if dim is None else normalize_dim(dim, x.ndim, op="aminmax")
    empty = x.numel() == 0 if d is None else x.ndim > 0 and x.shape[d] == 0
    if empty and d is not None:  # torch's class: an IndexError over an empty dim
        raise DimError(f"aminmax: Expected reduction dim {dim} to have non-zero size.")
    if empty:
        raise ParamError(
            "aminmax: cannot compute aminmax over an empty dimension as the operation has "
            "no identity"
        )
    dims = None if d is None or x.ndim == 0 else d
    low = reduce(ReduceKind.MIN, "aminmax", x, dims, keepdim)
    high = reduce(ReduceKind.MAX, "aminmax", x, dims, keepdim)
    return torch.return_types.aminmax((low, high))  # type: ignore[arg-type]  # dtorch tensors


@writer
def index_fill_(input: Tensor, dim: int, index: Any, value: Any) -> Tensor:
    """``index_fill`` in place: the result written into ``input``; returns ``input``.

    Example:
        >>> import dtorch
        >>> x = dtorch.zeros(3)
        >>> x.index_fill_(0, dtorch.tensor([1]), 5.0) is x, x.tolist()
        (True, [0.0, 5.0, 0.0])
    """
    return assign("index_fill_", input, index_fill(input, dim, index, value))


@writer
def index_reduce_(
    input: Tensor, dim: int, index: Any, source: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """``index_reduce`` in place: the result written into ``input``; returns ``input``.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([1.0, 5.0])
        >>> _ = x.index_reduce_(0, dtorch.tensor([0]), dtorch.tensor([3.0]), "amax")
        >>> x.tolist()
        [3.0, 5.0]
    """
    out = index_reduce(input, dim, index, source, reduce, include_self=include_self)
    return assign("index_reduce_", input, out)


@writer
def index_copy_(input: Tensor, dim: int, index: Any, source: Tensor) -> Tensor:
    """``index_copy`` in place: the result written into ``input``; returns ``input``.

    Example:
        >>> import dtorch
        >>> x = dtorch.zeros(3)
        >>> _ = x.index_copy_(0, dtorch.tensor([2]), dtorch.tensor([4.0]))
        >>> x.tolist()
        [0.0, 0.0, 4.0]
    """
    return assign("index_copy_", input, index_copy(input, dim, index, source))
