"""Selection and ordering along dims: ``sort argsort msort topk flip fliplr flipud gather
take_along_dim``.

``sort`` and ``topk`` return torch's named tuples (``torch.return_types.sort``/``topk``)
holding dtorch tensors: ``.values`` and int64 ``.indices``. Layouts
(``dtorch.ir.rules.order``): along a sharded dim ``sort``, ``argsort`` and ``msort`` gather
the dim's blocks inside the operator and each device keeps its block of the sorted dim (the
input's placements stay), and ``topk`` picks from every device's block's top ``k``
(Replicate there); the flipped dim must not be sharded (redistribute it to Replicate
first); ``gather`` along a sharded dim of its input gives Partial; the other dims keep their
shards; only ``flip`` (and ``gather``'s input, under a Replicate index) keep Partial.

Example:
    >>> import dtorch
    >>> t = dtorch.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    >>> t.sort(dim=1).indices.tolist(), t.topk(1).values.tolist()
    ([[1, 2, 0], [0, 2, 1]], [[3.0], [5.0]])
    >>> t.flip(0).tolist(), t.gather(1, dtorch.tensor([[2], [0]])).tolist()
    ([[0.0, 5.0, 4.0], [3.0, 1.0, 2.0]], [[2.0], [0.0]])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_flag, as_int, normalize_dim, numpy_names
from dtorch.api.handle import is_tensor
from dtorch.api.ops.reduce import splits
from dtorch.api.ops.shape import expand, flatten, sizes
from dtorch.api.ops.statistics import named_refusals
from dtorch.api.record import record, record_one, tensor_arg
from dtorch.errors import DtypeError, PlacementError, ShapeError
from dtorch.ir.params import (
    FlipParam,
    GatherParam,
    OpParam,
    SortParam,
    SplitSortParam,
    SplitTopKParam,
    TopKParam,
)
from dtorch.ir.placement import Placement, Replicate, Shard

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def _dim(name: str, t: Tensor, dim: Any) -> int:
    # one int dim (torch takes no list here), normalised
    tensor_arg(name, t)
    return normalize_dim(as_int(name, "dim", dim), t.ndim, op=name)


def _sort_flags(name: str, descending: Any, stable: Any) -> tuple[bool, bool]:
    # bools only, as torch's (``stable=None`` is torch's default too)
    steady = False if stable is None else as_flag(stable, name, "stable")
    return as_flag(descending, name, "descending"), steady


def _sort_param(name: str, t: Tensor, dim: Any, descending: Any, stable: Any) -> OpParam:
    # a Sort; a SplitSort where a mesh dim shards the sorted dim (the devices gather it)
    along, flags = _dim(name, t, dim), _sort_flags(name, descending, stable)
    return SplitSortParam(along, *flags) if splits(t, (along,)) else SortParam(along, *flags)


@numpy_names
def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
    """``torch.sort``: ``(values, indices)`` along ``dim`` as ``torch.return_types.sort``.
    Along a sharded ``dim`` the devices gather its blocks and each keeps its block of the
    sorted dim (the input's placements stay; each device holds the whole dim meanwhile). A
    Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.sort(dtorch.tensor([2, 0, 1]), descending=True).values.tolist()
        [2, 1, 0]
    """
    param = _sort_param("sort", input, dim, descending, stable)
    values, indices = record("sort", param, (input,))
    return torch.return_types.sort((values, indices))  # type: ignore[arg-type]  # dtorch tensors


@numpy_names
def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """``torch.argsort``: the indices of ``sort`` (one Sort operator).

    Example:
        >>> import dtorch
        >>> dtorch.argsort(dtorch.tensor([2.0, 0.5, 1.0])).tolist()
        [1, 2, 0]
    """
    param = _sort_param("argsort", input, dim, descending, stable)
    return record("argsort", param, (input,))[1]


def msort(input: Tensor) -> Tensor:
    """``torch.msort``: the values of ``sort`` along dim 0.

    Example:
        >>> import dtorch
        >>> dtorch.msort(dtorch.tensor([[3, 1], [2, 4], [1, 0]])).tolist()
        [[1, 0], [2, 1], [3, 4]]
    """
    return record("msort", _sort_param("msort", input, 0, False, False), (input,))[0]


@numpy_names
def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
    """``torch.topk``: the ``k`` largest (``largest=False``: smallest) entries along ``dim``
    and their indices, as ``torch.return_types.topk``; ``k`` from 0 to the dim's size.
    Along a sharded dim each device finds its block's top ``k`` and the devices pick from
    them (``k`` numbers per row and device move; Replicate there), values sorted whatever
    ``sorted`` says, of equal values the smallest indices. A Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.topk(dtorch.tensor([1.0, 4.0, 2.0]), 2).indices.tolist()
        [1, 2]
    """
    flags = as_flag(largest, "topk", "largest"), as_flag(sorted, "topk", "sorted")
    count, along = as_int("topk", "k", k), _dim("topk", input, dim)
    param: OpParam = TopKParam(count, along, *flags)
    if splits(input, (along,)):  # the top entries of every device's block, picked from
        param = SplitTopKParam(count, along, flags[0])
    values, indices = record("topk", param, (input,))
    return torch.return_types.topk((values, indices))  # type: ignore[arg-type]  # dtorch tensors


def flip(input: Tensor, *order: Any, dims: Any = None) -> Tensor:
    """``torch.flip(input, dims)`` (also ``t.flip(0, 1)``, ``t.flip((0, 1))``,
    ``t.flip(dims=...)``): the entries of every dim of ``dims`` in reverse order.

    Example:
        >>> import dtorch
        >>> dtorch.flip(dtorch.tensor([[1, 2], [3, 4]]), (0, 1)).tolist()
        [[4, 3], [2, 1]]
    """
    if dims is None and not order:
        raise TypeError('flip() missing 1 required positional arguments: "dims"')
    tensor_arg("flip", input)
    wanted = sizes(order if dims is None else (dims,), "flip", "dims")
    normal = tuple(normalize_dim(d, input.ndim, op="flip") for d in wanted)
    if len(set(normal)) != len(normal):
        twice = next(d for d in normal if normal.count(d) > 1)
        raise ShapeError(
            f"flip: dim {twice} appears multiple times in the list of dims {list(wanted)}; "
            "accepted: each dim at most once"
        )
    return record_one("flip", FlipParam(normal), (input,))


def fliplr(input: Tensor) -> Tensor:
    """``torch.fliplr``: dim 1 reversed (a tensor of at least 2 dims; as ``flip``, dim 1
    must not be sharded, a Partial stays Partial).

    Example:
        >>> import dtorch
        >>> dtorch.fliplr(dtorch.tensor([[1, 2, 3], [4, 5, 6]])).tolist()
        [[3, 2, 1], [6, 5, 4]]
    """
    tensor_arg("fliplr", input)
    if input.ndim < 2:
        raise ShapeError(f"fliplr: Input must be >= 2-d; got a {input.ndim}-D tensor")
    return record_one("fliplr", FlipParam((1,)), (input,))


def flipud(input: Tensor) -> Tensor:
    """``torch.flipud``: dim 0 reversed (a tensor of at least 1 dim; as ``flip``, dim 0
    must not be sharded, a Partial stays Partial).

    Example:
        >>> import dtorch
        >>> dtorch.flipud(dtorch.tensor([[1, 2, 3], [4, 5, 6]])).tolist()
        [[4, 5, 6], [1, 2, 3]]
    """
    tensor_arg("flipud", input)
    if input.ndim < 1:
        raise ShapeError(f"flipud: Input must be >= 1-d; got a {input.ndim}-D tensor")
    return record_one("flipud", FlipParam((0,)), (input,))


@numpy_names
def gather(input: Tensor, dim: int, index: Any, *, sparse_grad: bool = False) -> Tensor:
    """``torch.gather``: ``out[i][j] = input[index[i][j]][j]`` for ``dim`` 0 (likewise for
    the other dims); ``index`` is an int64 (or int32) tensor with as many dims as ``input``,
    no larger on the other dims; the output has its shape. A torch ``index`` is sent
    Replicate on ``input``'s mesh. ``sparse_grad`` only concerns gradients, which dtorch
    does not compute: it is accepted for torch's signature and has no effect.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[1, 2], [3, 4]])
        >>> dtorch.gather(x, 1, dtorch.tensor([[0, 0], [1, 0]])).tolist()
        [[1, 1], [4, 3]]
    """
    tensor_arg("gather", input)
    d = normalize_dim(dim, input.ndim, op="gather")
    return record_one("gather", GatherParam(d), (input, _index_arg("gather", input, index)))


@named_refusals
@numpy_names
def take_along_dim(input: Tensor, indices: Any, dim: int | None = None) -> Tensor:
    """torch's ``take_along_dim``: ``gather(dim, indices)`` after ``input`` and ``indices``
    (int64, as many dims) are broadcast to each other on every dim but ``dim``; with
    ``dim=None`` both are flattened first. One Gather operator with ``gather``'s placements
    (the gathered dim of the input unsharded, the others sharded alike in both, a Partial
    input under a Replicate index stays Partial), except that where one side shards another
    dim and the other is Replicate, the Replicate side is first chunked to match (a local
    slice, no communication); a torch ``indices`` is sent Replicate.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[10, 30, 20], [60, 40, 50]])
        >>> dtorch.take_along_dim(x, x.argmax(1, keepdim=True), 1).tolist()
        [[30], [60]]
        >>> x.take_along_dim(dtorch.tensor([5, 0])).tolist()
        [50, 10]
    """
    index = _indices(input, indices)
    if dim is None:
        return record_one("take_along_dim", GatherParam(0), (flatten(input), flatten(index)))
    if index.ndim != input.ndim:
        raise ShapeError(
            "torch.take_along_dim(): input and indices should have the same number of "
            f"dimensions, but got {input.ndim} dimensions for input, and {index.ndim} "
            "dimensions for indices"
        )
    d = normalize_dim(dim, input.ndim, op="take_along_dim")
    shape = _broadcast_but(tuple(input.shape), tuple(index.shape), d)
    x = _expanded(input, (*shape[:d], input.shape[d], *shape[d + 1 :]))
    index = _expanded(index, shape)
    partial = any(p.is_partial() for p in index.placements)  # Gather's refusal names it
    if input.shape[d] and not partial:  # torch 2.13 wraps every index modulo the dim's size
        index = index % input.shape[d]
    return gather_aligned(x, index, d)


def gather_aligned(x: Tensor, index: Tensor, dim: int, name: str = "take_along_dim") -> Tensor:
    """The Gather of ``x`` and ``index`` as they are, else with the Replicate sides aligned
    (``_aligned``), recorded as ``name``; a refusal names the placements the caller gave."""
    try:
        return record_one(name, GatherParam(dim), (x, index))
    except PlacementError as refused:
        ax, ai = _aligned(x, index, dim)
        if ax is x and ai is index:
            raise
        try:
            return record_one(name, GatherParam(dim), (ax, ai))
        except PlacementError:
            raise refused from None


def _index_arg(op: str, input: Tensor, index: Any, what: str = "index") -> Tensor:
    """``index`` as a dtorch tensor: a torch one sent Replicate beside ``input``; TypeError
    for anything else."""
    if isinstance(index, torch.Tensor):
        return beside(input, index)
    if not is_tensor(index):
        raise TypeError(
            f"{op}: {what} must be a dtorch.Tensor (or a torch.Tensor) of int64, got "
            f"{type(index).__name__}"
        )
    found: Tensor = index
    return found


def _indices(input: Tensor, indices: Any) -> Tensor:
    index = _index_arg("take_along_dim", input, indices, "indices")
    if index.dtype != torch.int64:
        raise DtypeError(
            f"torch.take_along_dim(): dtype of indices should be Long but got {index.dtype}"
        )
    return index


def _broadcast_but(x: tuple[int, ...], index: tuple[int, ...], dim: int) -> tuple[int, ...]:
    """The indices' broadcast shape: ``x``'s dim ``dim`` taken from ``index``."""
    try:
        return tuple(torch.broadcast_shapes(x[:dim] + index[dim : dim + 1] + x[dim + 1 :], index))
    except RuntimeError as error:
        raise ShapeError(f"take_along_dim: {error}") from None


def _aligned(x: Tensor, index: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    """Each Replicate side chunked like the other side's shard of a dim other than ``dim``,
    mesh dim by mesh dim (the two have one size there), so gather's ``S(d) x S(d)`` applies."""
    px: list[Placement] = list(x.placements)
    pi: list[Placement] = list(index.placements)
    for m, (a, b) in enumerate(zip(px, pi, strict=True)):
        if isinstance(b, Replicate) and _other_shard(a, dim):
            pi[m] = a
        elif isinstance(a, Replicate) and _other_shard(b, dim):
            px[m] = b
    return _placed(x, px), _placed(index, pi)


def _other_shard(p: Placement, dim: int) -> bool:
    return isinstance(p, Shard) and p.dim != dim


def _placed(t: Tensor, placements: list[Placement]) -> Tensor:
    return t if placements == list(t.placements) else t.redistribute(placements=placements)


def _expanded(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    return t if tuple(t.shape) == shape else expand(t, shape)
