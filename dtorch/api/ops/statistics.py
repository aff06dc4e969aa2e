"""Statistics composed of the reduce and elementwise operators, with torch's signatures:
``var std var_mean std_mean logsumexp norm count_nonzero nansum nanmean``.

Being compositions, they take their placements from the operators they record: a shard of a
dim that is not reduced stays a shard (at its new index without ``keepdim``). Over a sharded
reduced dim, ``var``, ``var_mean``, ``count_nonzero`` and ``nansum`` give Partial sums as
``sum``/``mean`` do; ``std``, ``std_mean``, ``norm`` and ``nanmean`` need the full sums
before their last step (a square root, a power, a division by a count), so they make them
Replicate with one all-reduce (as ``batch_norm``'s training statistics do). ``var`` first
makes the mean Replicate the same way, to subtract it. ``logsumexp`` and ``norm`` with
``p=±inf`` take a maximum (``amax``), which combines the devices' blocks over a sharded
reduced dim (Replicate there); every function refuses a Partial input (none is linear).

16-bit floats accumulate in float32 and are cast back, as torch's kernels do; their
``var``/``var_mean`` sums are made Replicate before that cast (rounding each Partial part
to 16 bits on its own would not give torch's value).

Example:
    >>> import torch, dtorch
    >>> t = dtorch.tensor([[1.0, 3.0], [2.0, 6.0]])
    >>> t.var(1).tolist(), t.std(dim=0, correction=0).tolist()
    ([2.0, 8.0], [0.5, 1.5])
    >>> round(t.logsumexp((0, 1)).item(), 4), t.norm(p=1).item(), t.count_nonzero().item()
    (6.0722, 12.0, 4)
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import torch

from dtorch.api.dims import as_flag, normalize_dims, numpy_names
from dtorch.api.ops.reduce import reduce
from dtorch.api.record import named_as, tensor_arg
from dtorch.api.redistribute import sum_partials
from dtorch.errors import (
    DtypeError,
    ParamError,
    PlacementError,
    ShapeError,
    UnsupportedDtypeError,
)
from dtorch.ir.dtypes import as_dtype
from dtorch.ir.opkind import ReduceKind
from dtorch.ir.placement import Partial, format_placements
from dtorch.ir.rules.promotion import cast_is_linear
from dtorch.ir.rules.reduce import reduce_dims

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


_F = TypeVar("_F", bound=Callable[..., Any])


#: The operators that read a positional bool as the legacy ``unbiased`` flag.
_UNBIASED = frozenset({"var", "std", "var_mean", "std_mean"})


def named_refusals(fn: _F) -> _F:
    """Refusals of the operators ``fn`` records name ``fn`` first (``var: mean: ...``): the
    user called ``var``, which records a ``mean``."""
    prefix = fn.__name__
    first = next(iter(inspect.signature(fn).parameters))  # ``input``, or ``x1``

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        tensor_arg(prefix, args[0] if args else kwargs.get(first))  # not str.dtype's error
        if type(kwargs.get("dim")) is bool:  # only a positional bool is var's unbiased flag
            legacy = f"; a bool is var's and std's unbiased flag positionally ({prefix}(t, True))"
            raise TypeError(
                f"{prefix}: dim must be an int or a tuple of ints, got {kwargs['dim']} (bool)"
                + (legacy if prefix in _UNBIASED else "")
            )
        with named_as(prefix):
            return fn(*args, **kwargs)

    return run  # type: ignore[return-value]


def _refuse_partial(name: str, t: Tensor) -> None:
    """None of these is linear: a Partial input is refused before anything is recorded."""
    if any(isinstance(p, Partial) for p in t.placements):
        raise PlacementError(
            f"{name}: got {format_placements(t.placements)} on mesh "
            f"{tuple(t.device_mesh.shape)}; accepted per mesh dimension: R or S(d) of any dim "
            f"d, not P ({name} is not linear). Redistribute the Partial mesh dims first"
        )


def _dims(name: str, t: Tensor, dim: int | Sequence[int] | None) -> tuple[int, ...]:
    """The reduced dims, normalised: every dim for None or ``()`` (torch's convention)."""
    given = None if dim is None else normalize_dims(dim, t.ndim, op=name)
    return reduce_dims(name, given, t.ndim)


def _count(t: Tensor, dims: tuple[int, ...]) -> int:
    return math.prod(t.shape[d] for d in dims)


def _narrowed(t: Tensor, dtype: torch.dtype) -> Tensor:
    """``t`` cast to ``dtype``; a Partial is summed first where the cast is not linear (a
    float32 sum of float16 inputs: each part rounded to float16 on its own is not torch's)."""
    return (t if cast_is_linear(t.dtype, dtype) else sum_partials(t)).to(dtype)


def _accumulating(t: Tensor) -> Tensor:
    """16-bit floats computed in float32 (torch accumulates them so too)."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def _refuse_real_only(name: str, t: Tensor, dtype: Any) -> None:
    """torch's nansum (which nanmean calls) has no complex version: a complex input is its
    RuntimeError, a complex ``dtype=`` of a float input its NotImplementedError (an integer
    or bool one, which holds no NaN, is summed as ``sum`` sums it)."""
    if t.dtype.is_complex:
        raise DtypeError(f"{name}: nansum on CPU does not support complex inputs")
    if isinstance(dtype, torch.dtype) and dtype.is_complex and t.dtype.is_floating_point:
        raise UnsupportedDtypeError(f'{name}: "nansum_cpu" not implemented for {dtype}')


def _inexact(t: Tensor) -> bool:
    return t.dtype.is_floating_point or t.dtype.is_complex


def _correction(name: str, dim: Any, unbiased: Any, correction: Any) -> tuple[Any, float]:
    """torch's overloads: ``(dim, unbiased, keepdim)``, ``(unbiased)`` alone, or
    ``(dim, *, correction)``; Bessel's correction (1) by default."""
    if isinstance(dim, bool):  # var(t, True): the legacy unbiased flag in the dim position
        if unbiased is not None:
            raise TypeError(f"{name}: unbiased given twice (a bool as dim is the unbiased flag)")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}: give unbiased or correction, not both")
    if unbiased is not None:
        return dim, 1.0 if as_flag(unbiased, name, "unbiased") else 0.0
    if correction is None:
        return dim, 1.0
    if isinstance(correction, bool) or not isinstance(correction, numbers.Real):
        raise TypeError(f"{name}: correction must be a number, got {type(correction).__name__}")
    return dim, float(correction)


class _Moments(NamedTuple):
    variance: Tensor  # at the working precision, shaped by keepdim
    partial_mean: Tensor  # keepdim=True, Partial over sharded reduced dims
    mean: Tensor  # the same, all-reduced (what the variance is centred on)
    work: Tensor  # the input at the working precision
    dims: tuple[int, ...]  # the reduced dims


def _widened(t: Tensor) -> Tensor:
    """``t`` in double precision on a CPU mesh, as torch's CPU std accumulates: a float32
    standard deviation above about 1.8e19 is finite, though its variance is not."""
    if t.device_mesh.device_kind != "cpu" or t.dtype in (torch.float64, torch.complex128):
        return _accumulating(t)
    return t.to(torch.complex128 if t.dtype.is_complex else torch.float64)


def _moments(
    name: str,
    t: Tensor,
    dim: Any,
    unbiased: Any,
    keepdim: bool,
    correction: Any,
    wide: bool = False,
) -> _Moments:
    """The variance over ``dim`` and what went into it (the mean outputs reuse it);
    ``wide``: computed in double precision on the CPU (``_widened``), for a square root."""
    keepdim = as_flag(keepdim, name, "keepdim")
    dim, ddof = _correction(name, dim, unbiased, correction)
    if not _inexact(t):
        raise DtypeError(
            f"{name}: std and var only support floating point and complex dtypes, got "
            f"{t.dtype}; cast first (e.g. t.float())"
        )
    _refuse_partial(name, t)
    dims = _dims(name, t, dim)
    work = _widened(t) if wide else _accumulating(t)
    partial_mean = work.mean(dims, keepdim=True)
    mean = sum_partials(partial_mean)
    centered = work - mean
    squares = centered.abs().square() if t.dtype.is_complex else centered * centered
    total = squares.sum(dims, keepdim=keepdim)
    divisor = max(0.0, _count(t, dims) - ddof)
    if divisor == 0:  # torch's nan or inf: a Partial sum is never divided by 0 (refused)
        total = sum_partials(total)
    return _Moments(total / divisor, partial_mean, mean, work, dims)


def _real(dtype: torch.dtype) -> torch.dtype:
    return dtype.to_real() if dtype.is_complex else dtype


@numpy_names  # outermost: named_refusals reads the renamed dim
@named_refusals
def var(
    input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
    correction: Any = None,
) -> Tensor:  # fmt: skip
    """torch's ``var``: over ``dim`` (None or ``()``: every dim), divided by ``N - correction``
    (``unbiased=False`` is ``correction=0``). Floating and complex inputs only.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([1.0, 2.0, 3.0, 4.0]).var(unbiased=False).item()
        1.25
    """
    variance = _moments("var", input, dim, unbiased, keepdim, correction)[0]
    return _narrowed(variance, _real(input.dtype))


@numpy_names  # outermost: named_refusals reads the renamed dim
@named_refusals
def std(
    input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
    correction: Any = None,
) -> Tensor:  # fmt: skip
    """The square root of ``var`` (Replicate over sharded reduced dims: one all-reduce).

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([[1.0, 3.0], [2.0, 6.0]])
        >>> dtorch.std(t, dim=1, correction=0).tolist()
        [1.0, 2.0]
    """
    variance = _moments("std", input, dim, unbiased, keepdim, correction, wide=True)[0]
    return sum_partials(variance).sqrt().to(_real(input.dtype))


@numpy_names  # outermost: named_refusals reads the renamed dim
@named_refusals
def var_mean(
    input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
    correction: Any = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """``(var, mean)`` as torch's ``var_mean``; both Partial over sharded reduced dims.

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> t = dtorch.arange(4.0, device_mesh=mesh, placements=[dtorch.Shard(0)])
        >>> v, m = dtorch.var_mean(t)
        >>> v.placements, round(v.item(), 4), m.item()
        ([Partial(sum)], 1.6667, 1.5)
    """
    moments = _moments("var_mean", input, dim, unbiased, keepdim, correction)
    # without keepdim, one more (local) mean drops the reduced dims
    mean = moments.partial_mean if keepdim else moments.work.mean(moments.dims)
    return _narrowed(moments.variance, _real(input.dtype)), _narrowed(mean, input.dtype)


@numpy_names  # outermost: named_refusals reads the renamed dim
@named_refusals
def std_mean(
    input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
    correction: Any = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """``(std, mean)`` as torch's ``std_mean``; both Replicate over sharded reduced dims.

    Example:
        >>> import dtorch
        >>> s, m = dtorch.std_mean(dtorch.tensor([[1.0, 3.0], [2.0, 6.0]]), dim=0, correction=0)
        >>> s.tolist(), m.tolist()
        ([0.5, 1.5], [1.5, 4.5])
    """
    moments = _moments("std_mean", input, dim, unbiased, keepdim, correction, wide=True)
    mean = moments.mean if keepdim else sum_partials(moments.work.mean(moments.dims))
    deviation = sum_partials(moments.variance).sqrt()
    return deviation.to(_real(input.dtype)), mean.to(input.dtype)


@numpy_names  # outermost: named_refusals reads the renamed dim
@named_refusals
def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` over ``dim``, shifted by the maximum so that it neither overflows
    nor underflows (an infinite maximum shifts by 0); integers give the default float dtype.
    Over a sharded dim, the devices combine their blocks' maxima (a SplitReduce) and then
    their sums (one all-reduce each, one number per row); a Partial input is refused.

    Example:
        >>> import dtorch
        >>> round(dtorch.tensor([1000.0, 1000.0]).logsumexp(0).item(), 2)
        1000.69
    """
    keepdim = as_flag(keepdim, "logsumexp", "keepdim")
    if dim is None:  # torch's signature: dim is required, a tuple of ints
        raise TypeError("logsumexp(): argument 'dim' must be an int or a tuple of ints, not None")
    _refuse_partial("logsumexp", input)
    x = input if _inexact(input) else input.to(torch.get_default_dtype())
    dims = _dims("logsumexp", x, dim)
    work = _accumulating(x)
    if _count(x, dims) == 0:  # log(0) = -inf; a maximum over nothing does not exist
        return sum_partials(work.exp().sum(dims, keepdim=keepdim)).log().to(x.dtype)
    peak = reduce(ReduceKind.MAX, "logsumexp", work, dims, True)
    peak = peak.masked_fill(peak.isinf(), 0)
    total = sum_partials((work - peak).exp().sum(dims, keepdim=keepdim)).log()
    return (total + (peak if keepdim else peak.squeeze(dims))).to(x.dtype)


def _order(p: Any) -> float:
    """``p`` of ``norm`` as a number: 'fro' is 2; other words are refused ('nuc', the nuclear
    norm, is ``dtorch.norm``'s: ``dtorch.linalg.older.norm`` takes it before this one)."""
    if isinstance(p, str):
        if p == "fro":
            return 2.0
        raise ParamError(
            f"norm: p={p!r} is not supported; accepted: 'fro', 'nuc', inf, -inf or any number"
        )
    if isinstance(p, bool) or not isinstance(p, numbers.Real):  # numpy numbers too
        raise TypeError(f"norm: p must be 'fro', 'nuc' or a number, got {type(p).__name__}")
    return float(p)


@named_refusals
def norm(
    input: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False,
    dtype: torch.dtype | None = None,
) -> Tensor:  # fmt: skip
    """torch's ``norm`` as a vector norm over ``dim`` (None: every dim): ``p`` 'fro' or 2,
    1, inf (the largest magnitude), -inf (the smallest), 0 (the count of non-zeros) or any
    other number (``sum(|x|**p) ** (1/p)``); ``dtype`` (floating) computes and returns in it.
    ``dtorch.norm`` and ``Tensor.norm`` are ``dtorch.linalg.older.norm``: this, and 'nuc'.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([[3.0, -4.0], [0.0, 1.0]])
        >>> t.norm(dim=1).tolist(), dtorch.norm(t, float("inf")).item()
        ([5.0, 1.0], 4.0)
    """
    order = _order(p)
    if not _inexact(input):  # dtype= does not help: torch refuses these too
        raise DtypeError(
            f"norm: expected a floating point or complex tensor as input, got {input.dtype}; "
            f"cast first (e.g. t.float())"
        )
    dtype = None if dtype is None else as_dtype("norm", dtype)
    if dtype is not None and torch.promote_types(input.dtype, dtype) != dtype:
        raise DtypeError(
            f"norm: the dtype of the input ({input.dtype}) should be convertible without "
            f"narrowing to the specified dtype ({dtype})"
        )
    _refuse_partial("norm", input)
    x = input if dtype is None else input.to(dtype)
    dims = _dims("norm", x, dim)
    if p == "fro" and dim is not None and 2 < len(dims) == len(normalize_dims(dim, x.ndim)):
        # torch's matrix norm then; dim=() is every dim, a vector norm
        raise ParamError(f"norm: p='fro' takes at most 2 dims, got dim={dim}")
    out = _vector_norm(_accumulating(x).abs(), order, dims, as_flag(keepdim, "norm", "keepdim"))
    return out.to(_real(x.dtype))


def _vector_norm(size: Tensor, order: float, dims: tuple[int, ...], keepdim: bool) -> Tensor:
    """The ``order``-norm of the magnitudes ``size`` over ``dims``."""
    if _count(size, dims) == 0 and (math.isinf(order) or order < 0):  # no identity value
        raise ShapeError(
            f"norm: cannot compute the {order} norm over an empty dim because the operation "
            f"does not have an identity (shape {list(size.shape)}, dims {dims})"
        )
    if math.isinf(order):
        kind = ReduceKind.MAX if order > 0 else ReduceKind.MIN
        return reduce(kind, "norm", size, dims, keepdim)
    if order == 0:
        powers = (size != 0).to(size.dtype)
    else:
        powers = size if order == 1 else size * size if order == 2 else size**order
    total = sum_partials(powers.sum(dims, keepdim=keepdim))
    if order in (0.0, 1.0):
        return total
    return total.sqrt() if order == 2 else total ** (1.0 / order)


@numpy_names  # outermost: named_refusals reads the renamed dim
@named_refusals
def count_nonzero(input: Tensor, dim: Any = None) -> Tensor:
    """The number of non-zero values over ``dim`` (None or ``()``: every dim), int64.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([[0, 2], [3, 0]]).count_nonzero(0).tolist()
        [1, 1]
    """
    _refuse_partial("count_nonzero", input)
    dims = _dims("count_nonzero", input, dim)
    return reduce(ReduceKind.SUM, "count_nonzero", input != 0, dims)


@numpy_names  # outermost: named_refusals reads the renamed dim
@named_refusals
def nansum(
    input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> Tensor:
    """``sum`` treating NaN as 0 (integers and bools have none: their plain sum).

    Example:
        >>> import dtorch
        >>> dtorch.tensor([1.0, float("nan"), 2.0]).nansum().item()
        3.0
    """
    _refuse_real_only("nansum", input, dtype)
    _refuse_partial("nansum", input)
    x = input.masked_fill(input.isnan(), 0) if _inexact(input) else input
    return reduce(ReduceKind.SUM, "nansum", x, dim, keepdim, dtype)


@numpy_names  # outermost: named_refusals reads the renamed dim
@named_refusals
def nanmean(
    input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> Tensor:
    """``mean`` of the values that are not NaN (floating inputs only: torch's has no complex
    version); Replicate over sharded reduced dims (the sums are all-reduced before the
    division).

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([[1.0, float("nan")], [2.0, 4.0]])
        >>> dtorch.nanmean(t, dim=1).tolist(), dtorch.nanmean(t).item()
        ([1.0, 3.0], 2.3333332538604736)
    """
    _refuse_real_only("nanmean", input, dtype)
    if not _inexact(input):
        raise DtypeError(
            f"nanmean(): expected input to have floating point or complex dtype but got "
            f"{input.dtype}; cast first (e.g. t.float())"
        )
    dtype = None if dtype is None else as_dtype("nanmean", dtype)
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        raise DtypeError(
            f"nanmean(): could not infer output dtype. Optional dtype must be either a "
            f"floating point or complex dtype. Got: {dtype}"
        )
    _refuse_partial("nanmean", input)
    missing = input.isnan()
    total = reduce(ReduceKind.SUM, "nanmean", input.masked_fill(missing, 0), dim, keepdim, dtype)
    count = reduce(ReduceKind.SUM, "nanmean", missing.logical_not(), dim, keepdim)
    return sum_partials(total) / sum_partials(count)
