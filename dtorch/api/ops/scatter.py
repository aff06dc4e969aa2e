"""Writing along one dim, gather's inverses: ``scatter scatter_add scatter_reduce index_add``
and their in-place forms (``scatter_`` ...).

Each is one operator on the devices (Scatter or IndexAdd), equal to torch on the full
tensors; the in-place forms write the result back into the tensor (``assign``), so every
alias and view sees it. Layouts (``dtorch.ir.rules.scatter``): the scattered dim must not be
sharded; another dim may be, alike in the input, the index and the source (of one size on
that dim); a Partial input stays Partial under the sums (``scatter_add``, ``index_add``,
``scatter_reduce("sum")``) of a Partial source. Anything else is refused with a
PlacementError that says what to redistribute. A torch index or source is distributed
beside the input: chunked like the input where it has its size, Partial (its value on the
first device) where the input is, else Replicate.

Example:
    >>> import dtorch
    >>> x = dtorch.zeros(2, 4)
    >>> index = dtorch.tensor([[0, 1, 0, 1]])
    >>> x.scatter(0, index, dtorch.ones(1, 4)).tolist()
    [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]]
    >>> x.index_add(1, dtorch.tensor([3, 3]), dtorch.ones(2, 2), alpha=2).tolist()
    [[0.0, 0.0, 0.0, 4.0], [0.0, 0.0, 0.0, 4.0]]
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import distribute
from dtorch.api.dims import as_flag, normalize_dim
from dtorch.api.handle import is_tensor
from dtorch.api.ops.convert import assign, writer
from dtorch.api.ops.scalars import as_scalar, is_scalar
from dtorch.api.record import record_one, tensor_arg
from dtorch.errors import ParamError, ShapeError
from dtorch.ir.opkind import ScatterReduceKind
from dtorch.ir.params import IndexAddParam, ScatterParam
from dtorch.ir.placement import Placement, Replicate, Shard

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_ABSENT: Any = object()  # scatter's src or value not given

#: ``scatter(reduce=)``'s names (torch's deprecated form) and ``scatter_reduce``'s.
_LEGACY = {"add": ScatterReduceKind.SUM, "multiply": ScatterReduceKind.PROD}
_REDUCES = {
    "sum": ScatterReduceKind.SUM,
    "prod": ScatterReduceKind.PROD,
    "mean": ScatterReduceKind.MEAN,
    "amax": ScatterReduceKind.AMAX,
    "amin": ScatterReduceKind.AMIN,
    "max": ScatterReduceKind.AMAX,  # torch takes these two as well
    "min": ScatterReduceKind.AMIN,
}
_DEPRECATED = (
    "The reduce argument of torch.scatter with Tensor src is deprecated and will be removed in "
    "a future PyTorch release. Use torch.scatter_reduce instead for more reduction options."
)


def scatter(
    input: Tensor,
    dim: int,
    index: Any,
    src: Any = _ABSENT,
    *,
    value: Any = _ABSENT,
    reduce: str | None = None,
) -> Tensor:
    """``torch.scatter``: a copy of ``input`` where ``out[index[i][j]][j] = src[i][j]`` for
    ``dim`` 0 (likewise for the other dims); ``src`` is a tensor of ``input``'s dtype or a
    number (also ``value=``), ``index`` an int64 (or int32) tensor with as many dims, no
    larger than ``src`` nor than ``input`` off ``dim``. ``reduce="add"`` or ``"multiply"``
    (torch's deprecated form: it warns, as torch does, for a tensor ``src``) combines instead
    of overwriting. Where an index repeats, torch writes one of the values (which one is not
    specified); so does dtorch.

    Example:
        >>> import dtorch
        >>> x = dtorch.zeros(3, 2)
        >>> dtorch.scatter(x, 0, dtorch.tensor([[2, 0]]), dtorch.tensor([[5.0, 6.0]])).tolist()
        [[0.0, 6.0], [0.0, 0.0], [5.0, 0.0]]
        >>> x.scatter(1, dtorch.tensor([[1], [0], [1]]), 7.0).tolist()
        [[0.0, 7.0], [7.0, 0.0], [0.0, 7.0]]
    """
    kind = _legacy_reduce(reduce)
    d, ids = _index(input, index, "scatter", dim)
    if (src is _ABSENT) == (value is _ABSENT):
        raise TypeError("scatter: give src (a tensor or a number) or value=, not both nor neither")
    if value is not _ABSENT or (is_scalar(src) and not isinstance(src, torch.Tensor)):
        number = _number(src if value is _ABSENT else value)
        return record_one("scatter", ScatterParam(d, kind, value=number), (input, ids))
    if kind is not ScatterReduceKind.NONE:
        warnings.warn(_DEPRECATED, UserWarning, stacklevel=2)
    source = _source(input, src, "scatter", "src", d)
    return record_one("scatter", ScatterParam(d, kind), (input, ids, source))


def scatter_add(input: Tensor, dim: int, index: Any, src: Any) -> Tensor:
    """``torch.scatter_add``: a copy of ``input`` with ``src[i][j]`` added to
    ``out[index[i][j]][j]`` for ``dim`` 0 (likewise for the other dims); repeated indices
    add up (floats in an order of their own: equal to torch's within rounding). Index and
    ``src`` as ``scatter``'s.

    Example:
        >>> import dtorch
        >>> index, src = dtorch.tensor([0, 2, 0, 0]), dtorch.tensor([1.0, 2.0, 3.0, 4.0])
        >>> dtorch.scatter_add(dtorch.zeros(3), 0, index, src).tolist()
        [8.0, 0.0, 2.0]
    """
    return _reduced("scatter_add", input, dim, index, src, ScatterReduceKind.SUM, True)


def scatter_reduce(
    input: Tensor, dim: int, index: Any, src: Any, reduce: str, *, include_self: bool = True
) -> Tensor:
    """``torch.scatter_reduce``: ``src``'s entries combined into a copy of ``input`` at
    ``index`` along ``dim`` by ``reduce`` (``"sum"``, ``"prod"``, ``"mean"``, ``"amax"``,
    ``"amin"``), with ``input``'s own entry among them when ``include_self`` (entries that
    no index names keep ``input``'s value). Index and ``src`` as ``scatter``'s.

    Example:
        >>> import dtorch
        >>> x, index = dtorch.tensor([1.0, 1.0]), dtorch.tensor([0, 0, 1])
        >>> src = dtorch.tensor([4.0, 2.0, 6.0])
        >>> x.scatter_reduce(0, index, src, "amax").tolist()
        [4.0, 6.0]
        >>> dtorch.scatter_reduce(x, 0, index, src, "mean", include_self=False).tolist()
        [3.0, 6.0]
    """
    if not isinstance(reduce, str) or reduce not in _REDUCES:
        raise ParamError(
            "scatter_reduce: reduce argument must be either sum, prod, mean, amax or amin, "
            f"got {reduce}"
        )
    kind = _REDUCES[reduce]
    include = as_flag(include_self, "scatter_reduce", "include_self")
    return _reduced("scatter_reduce", input, dim, index, src, kind, include)


def index_add(input: Tensor, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Tensor:
    """``torch.index_add``: a copy of ``input`` with ``alpha * source[i]`` added to
    ``input[index[i]]`` along ``dim``: ``index`` an int64 (or int32) vector, ``source``
    shaped as ``input`` with ``dim`` of the index's length and of ``input``'s dtype;
    repeated indices add up.

    Example:
        >>> import dtorch
        >>> x = dtorch.ones(3, 2)
        >>> dtorch.index_add(x, 0, dtorch.tensor([2, 0, 2]), dtorch.ones(3, 2), alpha=10).tolist()
        [[11.0, 11.0], [1.0, 1.0], [21.0, 21.0]]
    """
    tensor_arg("index_add", input)
    d = normalize_dim(dim, input.ndim, op="index_add")
    _in_range(index, input, d, "index_add", index_add=True)
    ids = _index_tensor(input, index, "index_add", None)
    source = _source(input, source, "index_add", "source", d)
    param = IndexAddParam(d, None if _is_one(alpha) else as_scalar(alpha))
    return record_one("index_add", param, (input, ids, source))


@writer
def scatter_(
    input: Tensor,
    dim: int,
    index: Any,
    src: Any = _ABSENT,
    *,
    value: Any = _ABSENT,
    reduce: str | None = None,
) -> Tensor:
    """``scatter`` in place: the result written into ``input`` (every alias and view sees
    it); returns ``input``.

    Example:
        >>> import dtorch
        >>> x = dtorch.zeros(4)
        >>> x.scatter_(0, dtorch.tensor([3, 1]), 9.0) is x, x.tolist()
        (True, [0.0, 9.0, 0.0, 9.0])
    """
    return assign("scatter_", input, scatter(input, dim, index, src, value=value, reduce=reduce))


@writer
def scatter_add_(input: Tensor, dim: int, index: Any, src: Any) -> Tensor:
    """``scatter_add`` in place: the result written into ``input``; returns ``input``.

    Example:
        >>> import dtorch
        >>> x = dtorch.zeros(2, dtype=dtorch.int64)
        >>> _ = x.scatter_add_(0, dtorch.tensor([1, 1, 0]), dtorch.tensor([1, 2, 3]))
        >>> x.tolist()
        [3, 3]
    """
    return assign("scatter_add_", input, scatter_add(input, dim, index, src))


@writer
def scatter_reduce_(
    input: Tensor, dim: int, index: Any, src: Any, reduce: str, *, include_self: bool = True
) -> Tensor:
    """``scatter_reduce`` in place: the result written into ``input``; returns ``input``.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([2, 3])
        >>> _ = x.scatter_reduce_(0, dtorch.tensor([0, 0]), dtorch.tensor([4, 5]), "prod")
        >>> x.tolist()
        [40, 3]
    """
    result = scatter_reduce(input, dim, index, src, reduce, include_self=include_self)
    return assign("scatter_reduce_", input, result)


@writer
def index_add_(input: Tensor, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Tensor:
    """``index_add`` in place: the result written into ``input``; returns ``input``.

    Example:
        >>> import dtorch
        >>> x = dtorch.zeros(3)
        >>> _ = x.index_add_(0, dtorch.tensor([0, 0]), dtorch.tensor([1.0, 2.0]))
        >>> x.tolist()
        [3.0, 0.0, 0.0]
    """
    return assign("index_add_", input, index_add(input, dim, index, source, alpha=alpha))


def _reduced(
    name: str, input: Tensor, dim: int, index: Any, src: Any, kind: ScatterReduceKind, own: bool
) -> Tensor:
    """A Scatter with a tensor ``src`` reduced by ``kind`` (``own``: include_self)."""
    d, ids = _index(input, index, name, dim)
    source = _source(input, src, name, "src", d)
    return record_one(name, ScatterParam(d, kind, include_self=own), (input, ids, source))


def _index(input: Tensor, index: Any, name: str, dim: Any) -> tuple[int, Tensor]:
    """scatter's dim, normalised, and its index as a dtorch tensor."""
    tensor_arg(name, input)
    d = normalize_dim(dim, input.ndim, op=name)
    _in_range(index, input, d, name)
    return d, _index_tensor(input, index, name, d)


def _in_range(index: Any, input: Tensor, d: int, name: str, index_add: bool = False) -> None:
    """A torch index's values checked at the call, as torch checks them before it writes (an
    in-place form leaves its target as it was); a dtorch one's fail when the value is read."""
    if not isinstance(index, torch.Tensor) or index.numel() == 0 or index.is_floating_point():
        return  # a dtype torch refuses: the rule's words
    size = input.shape[d] if input.ndim else 1
    bad = index[(index < 0) | (index >= size)]
    if not bad.numel():
        return
    if index_add:  # torch's IndexError there, a RuntimeError for the scatters
        raise IndexError(f"index_add: index out of range in self ({int(bad[0])} for size {size})")
    raise ShapeError(
        f"{name}: index {int(bad[0])} is out of bounds for dimension {d} with size {size}"
    )


def _index_tensor(input: Tensor, index: Any, name: str, dim: int | None) -> Tensor:
    """``index`` as a dtorch tensor: a torch one distributed beside ``input`` (Replicate for
    ``dim`` None, index_add's vector)."""
    if isinstance(index, torch.Tensor):
        return _beside(input, index, dim, partial=False)
    if not is_tensor(index):
        raise TypeError(
            f"{name}: index must be a dtorch.Tensor (or a torch.Tensor) of int64, got "
            f"{type(index).__name__}"
        )
    ids: Tensor = index
    return ids


def _source(input: Tensor, src: Any, name: str, label: str, dim: int) -> Tensor:
    if isinstance(src, torch.Tensor):
        return _beside(input, src, dim, partial=True)
    if not is_tensor(src):
        raise TypeError(f"{name}: {label} must be a dtorch.Tensor, got {type(src).__name__}")
    source: Tensor = src
    return source


def _beside(input: Tensor, value: torch.Tensor, dim: int | None, *, partial: bool) -> Tensor:
    """A torch ``value`` on ``input``'s mesh: per mesh dim, chunked as ``input`` where it
    shards another dim than ``dim`` of one size in both, Partial where ``input`` is (and
    ``partial``), else Replicate (so the operator's rule takes it where it can)."""
    placements = [_beside_placement(p, input, value, dim, partial) for p in input.placements]
    graph, mesh = input.graph, input.device_mesh
    return distribute(type(input), value, graph=graph, device_mesh=mesh, placements=placements)


def _beside_placement(
    p: Placement, input: Tensor, value: torch.Tensor, dim: int | None, partial: bool
) -> Placement:
    if p.is_partial():
        return p if partial else Replicate()
    if not isinstance(p, Shard) or dim is None or p.dim == dim or value.ndim != input.ndim:
        return Replicate()
    return p if value.shape[p.dim] == input.shape[p.dim] else Replicate()


def _legacy_reduce(reduce: str | None) -> ScatterReduceKind:
    if reduce is None:
        return ScatterReduceKind.NONE
    if reduce not in _LEGACY:
        raise ParamError("scatter: reduce argument must be either add or multiply.")
    return _LEGACY[reduce]


def _number(value: Any) -> Any:
    """scatter's number: a Python or numpy number, or a 0-d torch tensor (torch's value=)."""
    if is_tensor(value):
        raise TypeError("scatter: value must be a number, got a dtorch.Tensor; use src= for it")
    return as_scalar(value)


def _is_one(alpha: Any) -> bool:
    return type(alpha) is int and alpha == 1
