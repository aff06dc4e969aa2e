"""Search and counting: ``searchsorted bucketize isin histc bincount unique
unique_consecutive``.

``searchsorted``, ``bucketize`` and ``isin`` are one operator each (Search, Isin; rules in
``dtorch.ir.rules.search``) running torch's function on every device's shard of the values
beside the whole sorted sequence / boundaries / test elements: these must be Replicate (a
torch tensor or a number is made Replicate on the values' mesh), except that an N-D sorted
sequence may be sharded exactly as the values on a leading dim (a Replicate one is chunked
so on the devices). The values keep their placements; nothing moves. ``histc`` with
``min < max`` counts each shard and gives a Partial sum where the input is sharded (as
``sum``); with ``min == max`` (the default) it first reads the tensor's minimum and
maximum (two numbers: a wait). ``bincount``, ``unique`` and ``unique_consecutive`` have
shapes that depend on the values: they wait for the input, compute with torch on the
client, and return Replicate tensors on its mesh (as ``nonzero``). A Partial input is
refused by the first three and ``histc``.

Example:
    >>> import dtorch
    >>> t = dtorch.tensor([[1.0, 4.0], [2.5, 9.0]])
    >>> dtorch.bucketize(t, dtorch.tensor([2.0, 5.0])).tolist()
    [[0, 1], [1, 2]]
    >>> t.histc(bins=2, min=0, max=10).tolist(), dtorch.tensor([2, 2, 0]).bincount().tolist()
    ([3.0, 1.0], [1, 0, 2])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_flag, as_int
from dtorch.api.ops.scalars import as_real, is_scalar, python_number
from dtorch.api.record import is_handle, named_as, record_one, tensor_arg
from dtorch.errors import (
    DimError,
    DtypeError,
    ParamError,
    UnsupportedDtypeError,
)
from dtorch.ir.params import HistcParam, IsinParam, SearchParam
from dtorch.ir.rules.search import check_histc_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def _beside_tensor(name: str, what: str, value: Any, like: Tensor) -> Tensor:
    # a torch tensor or a number beside a dtorch operand: Replicate on its mesh; a number
    # takes the dtype torch's promotion gives it against ``like`` (a wrapped number)
    if is_handle(value):
        return value
    if isinstance(value, torch.Tensor):
        return beside(like, value)
    if is_scalar(value):
        number = python_number(value)
        dtype = torch.result_type(torch.empty(0, dtype=like.dtype), number)
        if isinstance(number, bool):  # a bool stays a bool (isin refuses it, as torch)
            dtype = torch.bool
        # made wide, then cast: an int too large for the dtype wraps, as torch's wrapped number
        wide = {bool: torch.bool, int: torch.int64, float: torch.float64}.get(type(number))
        return beside(like, torch.tensor(number, dtype=wide).to(dtype))
    raise TypeError(
        f"{name}: {what} must be a tensor (dtorch or torch) or a number; got {type(value).__name__}"
    )


def _pair(name: str, whats: tuple[str, str], a: Any, b: Any) -> tuple[Tensor, Tensor]:
    # both operands as dtorch tensors on one mesh: at least one must be dtorch's
    if is_handle(a):
        return a, _beside_tensor(name, whats[1], b, a)
    if is_handle(b):
        return _beside_tensor(name, whats[0], a, b), b
    raise TypeError(
        f"{name}: needs a dtorch tensor as {whats[0]} or {whats[1]}; got "
        f"{type(a).__name__} and {type(b).__name__}"
    )


def _side(right: Any, side: Any) -> bool:
    # torch's ``right``/``side`` pair as one flag (side="left" beside right=True refused)
    right = as_flag(right, "searchsorted", "right")
    if side is None:
        return right
    if side not in ("left", "right"):
        raise ParamError(
            f"searchsorted: side can only be 'left' or 'right'; got {side!r}; accepted: "
            "'left', 'right' or None"
        )
    if side == "left" and right:
        raise ParamError(
            "searchsorted: side and right can't be set to opposites: got side='left' while "
            "right=True; accepted: one of them, or both saying the same"
        )
    return side == "right"


def searchsorted(
    sorted_sequence: Any,
    input: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Any = None,
) -> Tensor:
    """``torch.searchsorted``: for each value in ``input``, the index at which it would go
    into its sorted row of ``sorted_sequence`` (1-D, or N-D with ``input``'s leading dims),
    after equal entries where ``right`` (or ``side="right"``); int64, or int32 with
    ``out_int32``. ``sorter``: int64 indices that sort an unsorted sequence. The result is
    placed as ``input``; the sequence (and ``sorter``) must be Replicate, or for an N-D
    sequence sharded as ``input`` on a leading dim (a Replicate one is chunked so there).

    Example:
        >>> import dtorch
        >>> seq = dtorch.tensor([1, 3, 5, 7])
        >>> dtorch.searchsorted(seq, dtorch.tensor([3, 6])).tolist()
        [1, 3]
        >>> dtorch.searchsorted(seq, dtorch.tensor([3, 6]), right=True).tolist()
        [2, 3]
    """
    seq, values = _pair("searchsorted", ("sorted_sequence", "input"), sorted_sequence, input)
    param = SearchParam(_side(right, side), as_flag(out_int32, "searchsorted", "out_int32"))
    if sorter is None:
        return record_one("searchsorted", param, (seq, values))
    order = _beside_tensor("searchsorted", "sorter", sorter, seq)
    return record_one("searchsorted", param, (seq, values, order))


def bucketize(
    input: Any, boundaries: Any, *, out_int32: bool = False, right: bool = False
) -> Tensor:
    """``torch.bucketize``: the index of the bucket of ``boundaries`` (1-D, sorted) each
    value of ``input`` falls in (``searchsorted(boundaries, input)``); ``right``: a value
    equal to a boundary goes to the bucket after it. ``boundaries`` must be Replicate (or a
    torch tensor); the result is placed as ``input``.

    Example:
        >>> import dtorch
        >>> dtorch.bucketize(dtorch.tensor([0.5, 2.0, 9.0]), dtorch.tensor([1.0, 2.0])).tolist()
        [0, 1, 2]
    """
    values, bounds = _pair("bucketize", ("input", "boundaries"), input, boundaries)
    if bounds.ndim != 1:
        raise ParamError(
            f"bucketize: boundaries tensor must be 1 dimension, but got dim({bounds.ndim}); "
            "accepted: a 1-D tensor (searchsorted takes N-D sorted rows)"
        )
    flag = as_flag(right, "bucketize", "right")
    param = SearchParam(flag, as_flag(out_int32, "bucketize", "out_int32"))
    return record_one("bucketize", param, (bounds, values))


def isin(
    elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False
) -> Tensor:
    """``torch.isin``: bool, whether each of ``elements`` is among ``test_elements``
    (``invert``: whether it is not). Either may be a number; ``test_elements`` must be
    Replicate (or a torch tensor or a number); the result is placed as ``elements``.

    Example:
        >>> import dtorch
        >>> dtorch.isin(dtorch.tensor([1, 2, 3, 4]), dtorch.tensor([2, 4])).tolist()
        [False, True, False, True]
    """
    values, test = _pair("isin", ("elements", "test_elements"), elements, test_elements)
    unique = as_flag(assume_unique, "isin", "assume_unique")
    param = IsinParam(unique, as_flag(invert, "isin", "invert"))
    return record_one("isin", param, (values, test))


def _histc_range(input: Tensor, low: float, high: float) -> tuple[float, float]:
    # torch's range: the data's where min == max, widened by one each way where still equal
    if low == high and input.numel():
        with named_as("histc"):
            low, high = input.min().item(), input.max().item()
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ParamError(f"histc: range of [{low}, {high}] is not finite; accepted: finite")
    if low == high:
        return low - 1, high + 1
    if low > high:
        raise ParamError(f"histc: max must be larger than min; got min={low}, max={high}")
    return low, high


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """``torch.histc``: the counts of ``input``'s entries in ``bins`` equal bins over
    ``[min, max]`` (entries outside ignored), in ``input``'s float dtype. With ``min ==
    max`` the range is the data's: its minimum and maximum are read first (a wait for two
    numbers). Where ``input`` is sharded the result is Partial (each device counts its
    shard, as ``sum``); a Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.histc(dtorch.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3).tolist()
        [0.0, 2.0, 1.0, 0.0]
    """
    tensor_arg("histc", input)
    count = as_int("histc", "bins", bins)
    if count <= 0:
        raise ParamError(f"histc: bins must be > 0, got {count}; accepted: a positive int")
    check_histc_dtype("histc", input.dtype)
    low, high = as_real("histc: min", min), as_real("histc: max", max)
    low, high = _histc_range(input, low, high)
    return record_one("histc", HistcParam(count, low, high), (input,))


#: torch's error classes, as the dtorch errors that derive from them (a wait's refusals).
_ERRORS: tuple[tuple[type[Exception], type[Exception]], ...] = (
    (NotImplementedError, UnsupportedDtypeError),
    (IndexError, DimError),
    (TypeError, DtypeError),
    (RuntimeError, ParamError),
    (ValueError, ParamError),
)


def _on_client(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    # torch's function on fetched values; its refusals re-raised as dtorch's, naming ``name``
    try:
        return fn(*args, **kwargs)
    except (NotImplementedError, IndexError, TypeError, RuntimeError, ValueError) as error:
        kind = next(ours for theirs, ours in _ERRORS if isinstance(error, theirs))
        raise kind(f"{name}: {str(error).strip().splitlines()[0]}") from error


def _fetched(value: Any) -> Any:
    # a dtorch tensor's full value (a wait); anything else as it is
    return value.to_torch() if is_handle(value) else value


def _results(like: Tensor, out: Any) -> Any:
    # torch's result(s) Replicate on ``like``'s mesh, a tuple kept a tuple
    if isinstance(out, tuple):
        return tuple(beside(like, o) for o in out)
    return beside(like, out)


def bincount(input: Tensor, weights: Any = None, minlength: int = 0) -> Tensor:
    """``torch.bincount``: how often each value of a 1-D non-negative integer ``input``
    occurs (summing ``weights`` instead where given), at least ``minlength`` long. The
    length depends on the values, so this waits for ``input`` (and ``weights``) and returns
    a Replicate tensor on its mesh.

    Example:
        >>> import dtorch
        >>> dtorch.bincount(dtorch.tensor([0, 3, 3]), minlength=5).tolist()
        [1, 0, 0, 2, 0]
    """
    tensor_arg("bincount", input)
    length = as_int("bincount", "minlength", minlength)
    out = _on_client(
        "bincount", torch.bincount, input.to_torch(), _fetched(weights), minlength=length
    )
    return beside(input, out)


def _unique_flags(name: str, inverse: Any, counts: Any, dim: Any) -> dict[str, Any]:
    # the keyword arguments both unique functions pass on to torch, checked
    return {
        "return_inverse": as_flag(inverse, name, "return_inverse"),
        "return_counts": as_flag(counts, name, "return_counts"),
        "dim": None if dim is None else as_int(name, "dim", dim),
    }


def unique(
    input: Tensor,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
) -> Any:
    """``torch.unique``: the distinct values of ``input`` (or distinct slices along
    ``dim``), with the inverse indices and the counts where asked (a tuple, as torch's).
    The shape depends on the values, so this waits for ``input`` and returns Replicate
    tensors on its mesh.

    Example:
        >>> import dtorch
        >>> values, counts = dtorch.tensor([3, 1, 3, 2]).unique(return_counts=True)
        >>> values.tolist(), counts.tolist()
        ([1, 2, 3], [1, 1, 2])
    """
    tensor_arg("unique", input)
    flags = _unique_flags("unique", return_inverse, return_counts, dim)
    flags["sorted"] = as_flag(sorted, "unique", "sorted")
    return _results(input, _on_client("unique", torch.unique, input.to_torch(), **flags))


def unique_consecutive(
    input: Tensor,
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
) -> Any:
    """``torch.unique_consecutive``: ``input`` with each run of equal consecutive values
    (or slices along ``dim``) kept once, with the inverse indices and the run lengths where
    asked. Waits for ``input`` and returns Replicate tensors on its mesh (as ``unique``).

    Example:
        >>> import dtorch
        >>> dtorch.unique_consecutive(dtorch.tensor([1, 1, 2, 2, 1])).tolist()
        [1, 2, 1]
    """
    tensor_arg("unique_consecutive", input)
    flags = _unique_flags("unique_consecutive", return_inverse, return_counts, dim)
    value = input.to_torch()
    return _results(
        input, _on_client("unique_consecutive", torch.unique_consecutive, value, **flags)
    )
