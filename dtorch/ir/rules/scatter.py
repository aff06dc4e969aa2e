"""Rules of Scatter and IndexAdd: gather's inverses, which write entries into a copy of ``x``
along one dim (the scattered dim ``d``). The output has ``x``'s shape, dtype and placements.

Scatter (inputs x x index x src, or x x index with a number; torch's checks first: an int64
or int32 index with as many dims as ``x`` and ``src``, no larger than ``src`` anywhere nor
than ``x`` apart from ``d``; ``src`` of ``x``'s dtype). Per mesh dim:

* R x R x R -> R;
* S(i) x S(i) x S(i) -> S(i), ``i`` another dim of one size in all three (a smaller index
  would be chunked differently from ``x``: refused);
* the sums (SUM: ``scatter_add``, ``scatter_reduce("sum")``, ``scatter(reduce="add")``):
  P x R x P -> P, since the result is linear in ``x`` and ``src`` together (with or without
  ``include_self``); and, with ``include_self``, P x S(d) x S(d) -> P (index and src of one
  size on ``d``): each device adds its block of ``src`` into its part of ``x``;
* anything else is refused: ``d`` sharded elsewhere, ``x`` sharded where index and src are
  not (or the reverse), a Partial index, a Partial under an overwrite, a product, a mean,
  amax or amin, a Replicate ``x`` with a Partial ``src`` (``x`` would be counted once per
  device) or the reverse. With a number instead of ``src``, the first two rows alone.

IndexAdd (inputs x x index x source; ``index`` a vector, ``source`` shaped as ``x`` with
``d`` of the index's length): R x R x R -> R; S(i) x R x S(i) -> S(i) (``i`` another dim,
of one size in ``x`` and ``source`` by torch's rule); S(d) x R x R -> S(d) (each device adds
the slices whose index falls in its own rows, as a vocab-parallel lookup picks its ids);
P x R x P -> P (``x + alpha * added`` is linear); P x S(0) x S(d) -> P (each device adds its
slices).

An empty index writes nothing: every layout is accepted and kept. Index values are checked
by the kernels (an out-of-range index fails on the devices, where its value is read).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.opkind import ScatterReduceKind
    >>> from dtorch.ir.params import ScatterParam
    >>> from dtorch.ir.placement import Partial, Replicate, Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> x = Operand(1, (4, 6), torch.float32, mesh, (Shard(0),))
    >>> i = Operand(2, (4, 3), torch.int64, mesh, (Shard(0),))
    >>> s = Operand(3, (4, 3), torch.float32, mesh, (Shard(0),))
    >>> scatter_rule("scatter", ScatterParam(1), (x, i, s)).outputs[0]
    OutputMeta(shape=(4, 6), dtype=torch.float32, placements=(Shard(dim=0),))
    >>> p = Operand(4, (4, 6), torch.float32, mesh, (Partial(),))
    >>> q = Operand(5, (4, 3), torch.float32, mesh, (Partial(),))
    >>> r = Operand(6, (4, 3), torch.int64, mesh, (Replicate(),))
    >>> add = ScatterParam(1, ScatterReduceKind.SUM)
    >>> scatter_rule("scatter_add", add, (p, r, q)).outputs[0].placements
    (Partial(sum),)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import torch

from dtorch.errors import DtypeError, ParamError, ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind, ScatterReduceKind
from dtorch.ir.params import IndexAddParam, OpParam, ScatterParam
from dtorch.ir.placement import Partial, Placement, Replicate, Shard, short_text
from dtorch.ir.rules.base import Inference, OutputMeta, Rule, norm_dim
from dtorch.ir.rules.gather import INDEX_DTYPES
from dtorch.ir.rules.promotion import refusal, refused
from dtorch.ir.rules.signature import Signature, reject

_LEGEND = "x x index x src; d: the scattered dim; i: another dim, of one size in all three"
_HINT = (
    "redistribute the scattered dim to Replicate, and the other dims alike in the input, the "
    "index and src, first"
)
_WRITE = "R x R x R -> R, S(i) x S(i) x S(i) -> S(i)"
#: What each form accepts on one mesh dim (the text refusals show).
_SCATTER = Signature({}, _WRITE, legend=_LEGEND, hint=_HINT)
_SUM = Signature({}, f"{_WRITE}, P x R x P -> P", legend=_LEGEND, hint=_HINT)
_ADD = Signature({}, f"{_WRITE}, P x R x P -> P, P x S(d) x S(d) -> P", legend=_LEGEND, hint=_HINT)
_VALUE = Signature(
    {}, "R x R -> R, S(i) x S(i) -> S(i)",
    legend="x x index; d: the scattered dim; i: another dim, of one size in both", hint=_HINT,
)  # fmt: skip
_INDEX_ADD = Signature(
    {}, "R x R x R -> R, S(i) x R x S(i) -> S(i), P x R x P -> P, P x S(0) x S(d) -> P",
    legend="x x index x source; d: the dim added along; i: another dim",
    hint="redistribute the dim added along to Replicate, and the other dims of the input and "
    "the source alike, first",
)  # fmt: skip

#: torch's name of each reduction (``scatter_reduce``'s; a number's ``scatter(reduce=)``).
REDUCE_NAMES: dict[ScatterReduceKind, str] = {
    ScatterReduceKind.SUM: "sum",
    ScatterReduceKind.PROD: "prod",
    ScatterReduceKind.MEAN: "mean",
    ScatterReduceKind.AMAX: "amax",
    ScatterReduceKind.AMIN: "amin",
}
VALUE_REDUCE_NAMES: dict[ScatterReduceKind, str] = {
    ScatterReduceKind.SUM: "add",
    ScatterReduceKind.PROD: "multiply",
}


def scatter_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``torch.scatter``/``scatter_add``/``scatter_reduce`` of ``x`` (see the module)."""
    assert isinstance(param, ScatterParam)
    x, index, *rest = inputs
    src = rest[0] if rest else None
    dim = _check_scatter(name, param, x, index, src)
    if not math.prod(index.shape):
        return _unchanged(x)
    sig = _scatter_signature(param, src)
    return _placed(name, sig, inputs, dim, lambda m: _scattered(param, dim, inputs, m))


def index_add_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``torch.index_add(x, dim, index, source, alpha)`` (see the module)."""
    assert isinstance(param, IndexAddParam)
    x, index, source = inputs
    dim = _check_index_add(name, x, index, source, param.dim)
    if not math.prod(index.shape):
        return _unchanged(x)
    return _placed(name, _INDEX_ADD, inputs, dim, lambda m: _index_added(dim, inputs, m))


def _unchanged(x: Operand) -> Inference:
    # an empty index writes nothing: every device keeps its part of x
    return Inference((OutputMeta(x.shape, x.dtype, x.placements),))


def _placed(
    name: str,
    sig: Signature,
    inputs: Sequence[Operand],
    dim: int,
    per_mesh_dim: Callable[[int], Placement | None],
) -> Inference:
    """The output: ``x``'s shape and dtype, the placement ``per_mesh_dim`` gives on each mesh
    dim (None: the signature's refusal, naming that mesh dim and why)."""
    placements = []
    for m in range(inputs[0].mesh.ndim):
        out = per_mesh_dim(m)
        if out is None:
            raise reject(name, sig, inputs, _why(inputs, m, dim))
        placements.append(out)
    x = inputs[0]
    return Inference((OutputMeta(x.shape, x.dtype, tuple(placements)),))


def _why(inputs: Sequence[Operand], m: int, dim: int) -> str:
    """The detail of a refusal on mesh dim ``m``: its row, and the likeliest reason."""
    row = [o.placements[m] for o in inputs]
    got = f"mesh dim {m} is {' x '.join(short_text(p) for p in row)}"
    if isinstance(row[0], Shard) and row[0].dim == dim:
        return f"{got}: the input's scattered dim {dim} is sharded there"
    if any(p.__class__ is Partial for p in row):
        return (
            f"{got}: a Partial is kept only by the sums, of a Partial input and a Partial (or "
            "a scattered-dim sharded) source, never in the index"
        )
    return f"{got}: the input, the index and the source must be sharded alike there (one size)"


def _scatter_signature(param: ScatterParam, src: Operand | None) -> Signature:
    if src is None:
        return _VALUE
    if param.reduce is not ScatterReduceKind.SUM:
        return _SCATTER
    return _ADD if param.include_self else _SUM


def _scattered(
    param: ScatterParam, dim: int, inputs: Sequence[Operand], m: int
) -> Placement | None:
    """Scatter's output placement on mesh dim ``m`` (None: refused; see the module)."""
    row = [o.placements[m] for o in inputs]
    px = row[0]
    if all(p.__class__ is Replicate for p in row):
        return px
    if isinstance(px, Shard):
        size = inputs[0].shape[px.dim]
        same = all(p == px and o.shape[px.dim] == size for p, o in zip(row, inputs, strict=True))
        return px if px.dim != dim and same else None
    if px.__class__ is not Partial or len(row) < 3 or param.reduce is not ScatterReduceKind.SUM:
        return None
    _, pi, ps = row
    if pi.__class__ is Replicate and ps.__class__ is Partial:
        return px
    index, src = inputs[1], inputs[2]
    blocks = pi == ps == Shard(dim) and index.shape[dim] == src.shape[dim]
    return px if blocks and param.include_self else None


def _index_added(dim: int, inputs: Sequence[Operand], m: int) -> Placement | None:
    """IndexAdd's output placement on mesh dim ``m`` (None: refused; see the module)."""
    px, pi, ps = (o.placements[m] for o in inputs)
    if isinstance(px, Shard) and px.dim == dim:  # each device adds the slices of its rows
        return px if pi.__class__ is Replicate and ps.__class__ is Replicate else None
    if isinstance(px, Shard):
        return px if pi.__class__ is Replicate and ps == px else None
    if px.__class__ is Replicate:
        return px if pi.__class__ is Replicate and ps.__class__ is Replicate else None
    if px.__class__ is not Partial or (ps.__class__ is not Partial and ps != Shard(dim)):
        return None
    slices = isinstance(ps, Shard) and pi == Shard(0)
    return px if (pi.__class__ is Replicate and ps.__class__ is Partial) or slices else None


def _check_scatter(
    name: str, param: ScatterParam, x: Operand, index: Operand, src: Operand | None
) -> int:
    """torch's checks of scatter's arguments (dtypes first, as torch); the dim, normalised."""
    if index.dtype not in INDEX_DTYPES:
        raise DtypeError(f"{name}: Expected dtype int32/int64 for index; got {index.dtype}")
    if src is not None and src.dtype != x.dtype:
        raise DtypeError(
            f"{name}: Expected self.dtype to be equal to src.dtype; got {x.dtype} and {src.dtype}"
        )
    _check_param(name, param, src)
    _check_reduce_dtype(name, param.reduce, param.include_self, x.dtype)
    dim = norm_dim(name, param.dim, x.ndim)
    if math.prod(index.shape):
        _check_scatter_shapes(name, dim, x, index, src)
    return dim


def _check_param(name: str, param: ScatterParam, src: Operand | None) -> None:
    """A number comes alone or with ``add``/``multiply``; a tensor ``src`` without a number."""
    if src is None and param.value is None:
        raise ParamError(f"{name}: needs src: a tensor or a number (value)")
    if src is not None and param.value is not None:
        raise ParamError(f"{name}: got both a src tensor and a number; accepted: one of them")
    number = param.reduce is ScatterReduceKind.NONE or param.reduce in VALUE_REDUCE_NAMES
    if src is None and not (number and param.include_self):
        raise ParamError(
            f"{name}: a number is scattered with reduce add or multiply (or none); got "
            f"{param.reduce.name.lower()} with include_self={param.include_self}"
        )


def _check_scatter_shapes(
    name: str, dim: int, x: Operand, index: Operand, src: Operand | None
) -> None:
    """torch's shape checks of a non-empty index (a 0-d tensor counts as one of size 1)."""
    rank = max(index.ndim, 1)
    for what, t in (("self", x), ("src", src)):
        if t is not None and max(t.ndim, 1) != rank:
            raise ShapeError(
                f"{name}: Index tensor must have the same number of dimensions as {what} tensor "
                f"({list(index.shape)} and {list(t.shape)})"
            )
    sizes = [_sizes(t) for t in (x, index, src or index)]
    over_x = any(i > s for d, (s, i) in enumerate(zip(sizes[0], sizes[1], strict=True)) if d != dim)
    if over_x or any(i > s for i, s in zip(sizes[1], sizes[2], strict=True)):
        last = f" and to be no larger size than src {list(src.shape)}" if src is not None else ""
        raise ShapeError(
            f"{name}: Expected index {list(index.shape)} to be no larger than self "
            f"{list(x.shape)} apart from dimension {dim}{last}"
        )


def _sizes(t: Operand) -> tuple[int, ...]:
    return t.shape or (1,)


def _check_index_add(name: str, x: Operand, index: Operand, source: Operand, dim: int) -> int:
    """torch's checks of index_add's arguments, in torch's order; the dim, normalised."""
    dim = norm_dim(name, dim, x.ndim)
    if index.ndim > 1:
        raise ShapeError(
            f"{name}: Index is supposed to be a vector, but got dim: {index.ndim} with size: "
            f"{list(index.shape)}"
        )
    if index.dtype not in INDEX_DTYPES:
        raise DtypeError(f"{name}: Expected dtype int32/int64 for index but got: {index.dtype}")
    if source.dtype != x.dtype:
        raise DtypeError(
            f"{name}: self ({x.dtype}) and source ({source.dtype}) must have the same scalar type"
        )
    _check_add_dtype(name, x.dtype)
    if dim and dim >= source.ndim:
        raise ShapeError(
            f"{name}: Indexing dim {dim} is out of bounds of the source tensor with dim "
            f"{source.ndim}"
        )
    count, wanted = math.prod(index.shape), source.shape[dim] if source.ndim else 1
    if count != wanted:
        raise ShapeError(
            f"{name}: Number of indices ({count}) should be equal to source.size(dim): "
            f"({wanted}), for dim: {dim}"
        )
    rest = [s.shape[:dim] + s.shape[dim + 1 :] for s in (x, source)]
    if (source.ndim or x.ndim) and (x.ndim != source.ndim or rest[0] != rest[1]):
        raise ShapeError(
            f"{name}: source tensor shape must match self tensor shape, excluding the specified "
            f"dimension. Got self.shape = {list(x.shape)} source.shape = {list(source.shape)}"
        )
    return dim


def _check_reduce_dtype(
    name: str, reduce: ScatterReduceKind, include_self: bool, dtype: torch.dtype
) -> None:
    message = _reduce_refusal(reduce, include_self, dtype)
    if message:
        refused(name, dtype, message)


def _check_add_dtype(name: str, dtype: torch.dtype) -> None:
    message = _add_refusal(dtype)
    if message:
        refused(name, dtype, message)


@functools.cache
def _reduce_refusal(reduce: ScatterReduceKind, include_self: bool, dtype: torch.dtype) -> str:
    """torch's message when its scatter of ``reduce`` refuses ``dtype`` ('' when it takes it)."""
    x, index = torch.zeros(1, dtype=dtype), torch.zeros(1, dtype=torch.int64)
    if reduce is ScatterReduceKind.NONE:
        return _refusal(lambda: torch.scatter(x, 0, index, x))
    how = REDUCE_NAMES[reduce]
    return _refusal(lambda: torch.scatter_reduce(x, 0, index, x, how, include_self=include_self))


@functools.cache
def _add_refusal(dtype: torch.dtype) -> str:
    """torch's message when its index_add refuses ``dtype`` ('' when it takes it)."""
    x, index = torch.zeros(1, dtype=dtype), torch.zeros(1, dtype=torch.int64)
    return _refusal(lambda: torch.index_add(x, 0, index, x))


def _refusal(probe: Callable[[], object]) -> str:
    # marked Unimplemented where torch has no kernel (NotImplementedError), for ``refused``
    try:
        probe()
    except (RuntimeError, TypeError, NotImplementedError) as error:
        return refusal(error, str(error).strip().split("\n", 1)[0])
    return ""


RULES: dict[OpKind, Rule] = {
    OpKind.Scatter: scatter_rule,
    OpKind.IndexAdd: index_add_rule,
}
