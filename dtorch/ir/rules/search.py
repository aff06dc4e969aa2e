"""Rules of Search (``searchsorted``, ``bucketize``), Isin (``isin``) and Histc (``histc``).

Search and Isin look each value up in a whole table (the sorted sequence, the test
elements), so the table is Replicate on every mesh dim and the values keep their layout:
each device runs torch's function on its shard, no communication. An N-D sorted sequence
holds one sorted row per leading index of the values, so on a mesh dim where the values
shard a leading dim the sequence is sharded alike (``Shard(d)`` both; a Replicate sequence
is chunked so on the devices, no communication); it is Replicate wherever the values are
Replicate or shard their last dim. ``sorter`` is laid out as the
sequence. A Partial anywhere is refused (a lookup of a sum is not the sum of lookups).

Histc counts each shard's entries into the same ``bins``: the tensor's histogram is the sum
of the shards', so the result is Partial on the mesh dims that shard the input (as ``sum``
over a sharded dim) and Replicate on the others; a Partial input is refused.

Dtypes torch refuses are learned by running torch's function once per dtype combination on
one element, and refused with torch's message.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import HistcParam, SearchParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> seq = Operand(1, (5,), torch.float32, mesh, (Replicate(),))
    >>> x = Operand(2, (4, 6), torch.float32, mesh, (Shard(1),))
    >>> search_rule("searchsorted", SearchParam(), (seq, x)).outputs[0]
    OutputMeta(shape=(4, 6), dtype=torch.int64, placements=(Shard(dim=1),))
    >>> histc_rule("histc", HistcParam(3, 0.0, 1.0), (x,)).outputs[0].placements
    (Partial(sum),)
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from dtorch.errors import DtypeError, PlacementError, ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import HistcParam, IsinParam, OpParam, SearchParam
from dtorch.ir.placement import Partial, Placement, Replicate, Shard, format_placements
from dtorch.ir.rules.base import Inference, OutputMeta, Rule, describe_inputs
from dtorch.ir.rules.promotion import refusal, refused


@functools.cache
def _refusal(probe: Callable[[], object]) -> str:
    """torch's message when ``probe`` (torch's function on one element) fails, else ''."""
    try:
        probe()
    except (RuntimeError, TypeError) as error:
        return refusal(error, str(error).strip().split("\n", 1)[0])
    return ""


def _check_dtypes(name: str, probe: Callable[[], object], dtype: torch.dtype) -> None:
    message = _refusal(probe)
    if message:
        refused(name, dtype, message)


@functools.cache
def _search_probe(seq: torch.dtype, values: torch.dtype) -> Callable[[], object]:
    # one cached thunk per dtype pair, so ``_refusal``'s cache keys on the pair
    return lambda: torch.searchsorted(torch.ones(1, dtype=seq), torch.ones(1, dtype=values))


@functools.cache
def _isin_probe(elements: torch.dtype, test: torch.dtype) -> Callable[[], object]:
    return lambda: torch.isin(torch.ones(1, dtype=elements), torch.ones(1, dtype=test))


@functools.cache
def _histc_probe(dtype: torch.dtype) -> Callable[[], object]:
    return lambda: torch.histc(torch.ones(1, dtype=dtype), 1, 0, 2)


def check_histc_dtype(name: str, dtype: torch.dtype) -> None:
    """Refuse a dtype torch's ``histc`` has no kernel for (before any value is read)."""
    _check_dtypes(name, _histc_probe(dtype), dtype)


def _no_partial(name: str, inputs: tuple[Operand, ...]) -> None:
    # a lookup or a count of a sum is not the sum of the lookups or counts
    if any(isinstance(p, Partial) for o in inputs for p in o.placements):
        raise PlacementError(
            f"{name}: got {describe_inputs(inputs)}, a Partial among them; accepted: Shard or "
            "Replicate inputs. Redistribute the Partial to Replicate (or a Shard) first"
        )


def _check_search_shapes(name: str, seq: Operand, values: Operand) -> None:
    if not seq.shape:
        raise ShapeError(
            f"{name}: the sorted sequence (boundaries) is 0-d; accepted: 1 or more dims"
        )
    if seq.ndim > 1 and (values.ndim != seq.ndim or values.shape[:-1] != seq.shape[:-1]):
        raise ShapeError(
            f"{name}: an N-D sorted sequence of shape {list(seq.shape)} needs values with the "
            f"same leading dims {list(seq.shape[:-1])}; got values of shape {list(values.shape)}"
            "; accepted: a 1-D sequence, or one whose first N-1 dims are the values'"
        )


def _check_sorter(name: str, inputs: tuple[Operand, ...]) -> None:
    seq, _, sorter = inputs
    if sorter.shape != seq.shape:
        raise ShapeError(
            f"{name}: sorter of shape {list(sorter.shape)} for a sorted sequence of shape "
            f"{list(seq.shape)}; accepted: the sequence's shape"
        )
    if sorter.dtype != torch.int64:
        raise DtypeError(f"{name}: sorter must be int64 (torch.long); got {sorter.dtype}")
    if sorter.placements != seq.placements:
        raise PlacementError(
            f"{name}: got {describe_inputs(inputs)}: the sorter (the third) is laid out "
            "unlike the sorted sequence (the first); accepted: the sequence's placements. "
            "Redistribute the sorter first"
        )


def _wanted(last: int, pv: Placement, nd: bool) -> Placement:
    """The sorted sequence's (test elements') placement beside values placed ``pv`` on one
    mesh dim: whole per row (see the module)."""
    if nd and isinstance(pv, Shard) and pv.dim != last:
        return pv  # the values' rows are split: the sequence's rows alike
    return Replicate()


def _fits(have: Placement, wanted: Placement) -> bool:
    # as wanted, or Replicate where a Shard is wanted (chunked on the device: no communication)
    return have == wanted or (isinstance(have, Replicate) and isinstance(wanted, Shard))


def _check_table(
    name: str, roles: tuple[str, str], values: Operand, table: Operand, nd: bool = False
) -> tuple[Placement, ...]:
    """The table's placements beside ``values`` (see the module); a PlacementError if it
    cannot have them without moving data."""
    wanted = tuple(_wanted(values.ndim - 1, pv, nd) for pv in values.placements)
    if not all(_fits(h, w) for h, w in zip(table.placements, wanted, strict=True)):
        raise PlacementError(
            f"{name}: got {roles[0]} {values.describe()} and {roles[1]} {table.describe()}; "
            f"accepted there: {format_placements(wanted)} (a whole table beside each value: "
            "Replicate, or for an N-D sequence the values' Shard of a leading dim). "
            f"Redistribute the {roles[1]} first"
        )
    return wanted


def search_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``searchsorted(seq, values[, sorter])``: int64 (or int32) indices of values' shape,
    placed as the values."""
    assert isinstance(param, SearchParam)
    seq, values, *sorter = inputs
    _no_partial(name, inputs)
    _check_search_shapes(name, seq, values)
    if sorter:
        _check_sorter(name, inputs)
    _check_dtypes(name, _search_probe(seq.dtype, values.dtype), values.dtype)
    wanted = _check_table(name, ("values", "sorted sequence"), values, seq, seq.ndim > 1)
    dtype = torch.int32 if param.out_int32 else torch.int64
    out = (OutputMeta(values.shape, dtype, values.placements),)
    if wanted == seq.placements:
        return Inference(out)
    return Inference(out, (wanted, None, *(wanted for _ in sorter)))  # Replicate rows chunked


def isin_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``isin(elements, test_elements)``: bool of elements' shape, placed as the elements."""
    assert isinstance(param, IsinParam)
    elements, test = inputs
    _no_partial(name, inputs)
    _check_dtypes(name, _isin_probe(elements.dtype, test.dtype), elements.dtype)
    _check_table(name, ("elements", "test elements"), elements, test)
    return Inference((OutputMeta(elements.shape, torch.bool, elements.placements),))


def histc_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``histc(bins, min, max)``: ``(bins,)`` of the input's dtype, Partial where sharded."""
    assert isinstance(param, HistcParam)
    (x,) = inputs
    _no_partial(name, inputs)
    check_histc_dtype(name, x.dtype)
    placements = tuple(Partial() if isinstance(p, Shard) else p for p in x.placements)
    return Inference((OutputMeta((param.bins,), x.dtype, placements),))


RULES: dict[OpKind, Rule] = {
    OpKind.Search: search_rule,
    OpKind.Isin: isin_rule,
    OpKind.Histc: histc_rule,
}
