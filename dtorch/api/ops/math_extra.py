"""More torch math functions, composed of dtorch operators: ``quantile``, ``nanquantile``,
``histogram``, ``argwhere``, ``combinations``, ``renorm``, ``vander``, ``logaddexp2``,
``polygamma``, ``mvlgamma``, ``frexp`` and ``put`` (the trapezoid rules are
``dtorch.api.ops.trapezoid``).

Each follows torch's formula on the full tensor (its dtypes and refusals, raised at the call
naming the function). Where ``quantile`` works along a dim that is sharded, that dim is
gathered first (a Replicate on the mesh dims that shard it; other shards stay); ``put`` makes
its input Replicate first, as ``take`` does. Results whose shape depends on the values
(``argwhere``, ``histogram``) wait for the input, compute with torch and come back Replicate
on its mesh, as ``nonzero`` does.

Example:
    >>> import dtorch
    >>> t = dtorch.tensor([[1.0, 2.0], [3.0, 5.0]])
    >>> dtorch.quantile(t, 0.5, dim=1).tolist(), dtorch.argwhere(t > 2).tolist()
    ([1.5, 4.0], [[1, 0], [1, 1]])
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_flag, as_int, normalize_dim
from dtorch.api.ops import composite as _cm
from dtorch.api.ops.convert import cast
from dtorch.api.ops.elementwise import binary, unary
from dtorch.api.ops.masked import select
from dtorch.api.ops.scalars import as_real, is_scalar
from dtorch.api.record import composite, is_handle, tensor_arg
from dtorch.api.redistribute import gathered, replicated
from dtorch.errors import DtypeError, ParamError, ShapeError
from dtorch.ir.opkind import BinaryKind, MathKind
from dtorch.ir.rules.promotion import function_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_MODES = ("linear", "lower", "higher", "midpoint", "nearest")
_HALVES = (torch.float16, torch.bfloat16)


def _fetched(value: Any) -> Any:
    # a dtorch tensor's full value (a wait); anything else as it is
    return value.to_torch() if is_handle(value) else value


# --- quantile -------------------------------------------------------------------------------


def _q_values(name: str, x: Tensor, q: Any) -> torch.Tensor:
    """``q`` as a torch tensor of ``x``'s dtype (a dtorch ``q`` is fetched: a wait), checked
    as torch checks it."""
    if is_scalar(q) and not isinstance(q, torch.Tensor):
        value = torch.tensor(as_real(f"{name}: q", q), dtype=x.dtype)
    elif isinstance(q, torch.Tensor) or is_handle(q):
        value = _fetched(q)
        if value.dtype != x.dtype:
            raise DtypeError(f"{name}() q tensor must be same dtype as the input tensor")
    else:
        raise TypeError(f"{name}: q must be a float or a tensor, got {type(q).__name__}")
    if value.ndim > 1:
        raise ShapeError(f"{name}() q must be a scalar or 1D tensor")
    if not bool(((value >= 0) & (value <= 1)).all()):
        raise ParamError(f"{name}() q values must be in the range [0, 1]; got {value.tolist()}")
    return value


def _check_quantile(name: str, x: Any, interpolation: Any) -> None:
    tensor_arg(name, x)
    if x.dtype not in (torch.float32, torch.float64):
        raise DtypeError(f"{name}() input tensor must be either float or double dtype")
    if x.numel() == 0:
        raise ParamError(f"{name}() input tensor must be non-empty")
    if interpolation not in _MODES:
        raise ParamError(
            f"{name}() interpolation must be one of linear, lower, higher, midpoint or "
            f"nearest, but got {interpolation}"
        )


def _ranks(x: Tensor, q: torch.Tensor, ignore_nan: bool) -> Tensor:
    """torch's ranks of ``q`` in each sorted row of ``x`` (its last dim): ``q * (n - 1)``,
    the last index where a row holds a NaN; over the non-NaN entries for ``nanquantile``."""
    n, nan = x.shape[-1], x.isnan()
    if ignore_nan:
        counts = nan.logical_not().sum(-1, keepdim=True)
        ranks = binary(BinaryKind.MUL, "nanquantile", beside(x, q.flatten()), counts - 1)
        return select("nanquantile", ranks < 0, 0.0, ranks)
    last = beside(x, q.flatten() * (n - 1))
    return select("quantile", nan.any(-1, keepdim=True), float(n - 1), last)


def _interpolate(x: Tensor, ranks: Tensor, mode: str) -> Tensor:
    """The values at ``ranks`` of the sorted rows of ``x``, interpolated as ``mode`` says."""
    adjust = {"lower": MathKind.FLOOR, "higher": MathKind.CEIL, "nearest": MathKind.ROUND}
    if mode in adjust:
        ranks = unary(adjust[mode], "quantile", ranks)
    below = cast(ranks, torch.int64)
    values = x.gather(-1, below)
    if mode not in ("linear", "midpoint"):
        return values
    weights = ranks - below if mode == "linear" else ranks * 0 + 0.5
    above = x.gather(-1, cast(ranks.ceil(), torch.int64))
    return _cm.lerp(values, above, weights)


def _quantile(name: str, input: Any, q: Any, dim: Any, keepdim: Any, interpolation: Any) -> Tensor:
    _check_quantile(name, input, interpolation)
    keep = as_flag(keepdim, name, "keepdim")
    qs = _q_values(name, input, q)
    if dim is None:
        x = gathered(input, range(input.ndim)).reshape(-1)
    else:
        d = normalize_dim(as_int(name, "dim", dim), input.ndim, op=name)
        x = gathered(input, (d,)).movedim(d, -1) if input.ndim else input.reshape(1)
    rows = gathered(x, (x.ndim - 1,)).sort(-1).values
    out = _interpolate(rows, _ranks(rows, qs, name == "nanquantile"), interpolation)
    out = out.movedim(-1, 0)  # (q, *the kept dims)
    if dim is None:
        out = out.reshape(qs.numel(), *[1] * (input.ndim if keep else 0))
    elif keep and input.ndim:  # views that keep any shard (a reshape refuses uneven ones)
        out = out.unsqueeze(d + 1)
    return out.squeeze(0) if qs.ndim == 0 else out


@composite()
def quantile(
    input: Tensor, q: Any, dim: Any = None, keepdim: bool = False, *, interpolation: str = "linear"
) -> Tensor:
    """``torch.quantile``: the ``q``-th quantiles (a float, or a 1-D tensor of ``input``'s
    dtype: its quantiles along a new first dim) of each row along ``dim`` (None: every
    entry), interpolated as ``interpolation`` says; float32 and float64 only; a row holding
    a NaN gives NaN. It sorts along ``dim``, gathered first where it is sharded (other
    shards stay); a Partial ``input`` is refused; a dtorch ``q`` is fetched (a wait).

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[0.0, 1.0, 2.0, 3.0]])
        >>> dtorch.quantile(x, dtorch.tensor([0.25, 0.5]), dim=1).tolist()
        [[0.75], [1.5]]
    """
    return _quantile("quantile", input, q, dim, keepdim, interpolation)


@composite()
def nanquantile(
    input: Tensor, q: Any, dim: Any = None, keepdim: bool = False, *, interpolation: str = "linear"
) -> Tensor:
    """``torch.nanquantile``: ``quantile`` over the entries that are not NaN (NaN where a
    row has none); the same arguments and placements as ``quantile``.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([1.0, float("nan"), 3.0])
        >>> dtorch.nanquantile(x, 0.5).item(), x.quantile(0.5).item() != 0
        (2.0, True)
    """
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation)


# --- values that decide shapes: wait, compute with torch, Replicate -------------------------


def histogram(
    input: Tensor,
    bins: Any = 100,
    *,
    range: Any = None,
    weight: Any = None,
    density: bool = False,
) -> Any:
    """``torch.histogram``: ``(hist, bin_edges)`` of ``input``'s entries in ``bins`` (an int,
    or a 1-D tensor of increasing edges), over ``range`` (default: the data's), each entry
    counted ``weight`` times where given, normalised where ``density``; float dtypes only, as
    torch's. It waits for ``input`` (and a dtorch ``bins``/``weight``) and computes with
    torch; both results come back Replicate on ``input``'s mesh.

    Example:
        >>> import dtorch
        >>> h = dtorch.histogram(dtorch.tensor([1.0, 2.0, 1.0]), bins=2, range=(0.0, 2.0))
        >>> h.hist.tolist(), h.bin_edges.tolist()
        ([0.0, 3.0], [0.0, 1.0, 2.0])
    """
    from dtorch.api.ops.search import _on_client

    tensor_arg("histogram", input)
    edges = _fetched(bins)
    kwargs: dict[str, Any] = {"weight": _fetched(weight), "density": density}
    if range is not None:  # torch refuses it beside a tensor of edges
        kwargs["range"] = range
    out = _on_client("histogram", torch.histogram, input.to_torch(), edges, **kwargs)
    hist, bin_edges = (beside(input, t) for t in out)
    return torch.return_types.histogram((hist, bin_edges))  # type: ignore[arg-type]


def argwhere(input: Tensor) -> Tensor:
    """``torch.argwhere``: the indices of the non-zero entries, one row each
    (``nonzero``'s layout). The shape depends on the values, so this waits for ``input``;
    the result is Replicate on its mesh.

    Example:
        >>> import dtorch
        >>> dtorch.argwhere(dtorch.tensor([[0, 1], [2, 0]])).tolist()
        [[0, 1], [1, 0]]
    """
    tensor_arg("argwhere", input)
    return beside(input, torch.argwhere(input.to_torch()))


# --- index tables built on the client, values read on the devices ---------------------------


@composite()
def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """``torch.combinations``: the length-``r`` combinations of a 1-D ``input``'s entries
    (with repeats where ``with_replacement``), one row each, as ``itertools.combinations``.
    The rows' indices depend on the length only; the entries are read with one
    ``index_select`` (``input`` is gathered first where sharded).

    Example:
        >>> import dtorch
        >>> dtorch.combinations(dtorch.tensor([1, 2, 3])).tolist()
        [[1, 2], [1, 3], [2, 3]]
    """
    tensor_arg("combinations", input)
    count = as_int("combinations", "r", r)
    if input.ndim != 1:
        raise ShapeError(f"combinations: Expect a 1D vector, but got shape {list(input.shape)}")
    if count < 0:
        raise ParamError(f"combinations: Expect a non-negative number, but got {count}")
    again = as_flag(with_replacement, "combinations", "with_replacement")
    ids = torch.combinations(torch.arange(input.shape[0]), count, again)
    picked = gathered(input, (0,)).index_select(0, beside(input, ids.reshape(-1)))
    return picked.reshape(ids.shape)


@composite()
def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """``torch.vander``: the Vandermonde matrix of a 1-D ``x``: ``N`` columns (default
    ``len(x)``) of its powers, decreasing unless ``increasing``, made by ``cumprod`` as
    torch makes it; integers and bools give int64. A shard of ``x`` stays a shard of rows.

    Example:
        >>> import dtorch
        >>> dtorch.vander(dtorch.tensor([1, 2, 3]), N=3).tolist()
        [[1, 1, 1], [4, 2, 1], [9, 3, 1]]
    """
    tensor_arg("vander", x)
    if x.ndim != 1:
        raise ShapeError("vander: x must be a one-dimensional tensor.")
    cols = x.shape[0] if N is None else as_int("vander", "N", N)
    if cols < 0:
        raise ParamError(f"vander: N must be non-negative, got {cols}")
    dtype = torch.promote_types(x.dtype, torch.int64)
    column = cast(x, dtype).unsqueeze(1)
    parts = [column**0]  # ones placed as x (``x * 0`` would keep NaN and infinities)
    if cols > 1:
        parts.append(column.expand(x.shape[0], cols - 1).cumprod(1))
    from dtorch.api.ops.shape import cat

    out = cat(parts, 1)[:, :cols]
    return out if increasing else out.flip(1)


# --- elementwise formulas -------------------------------------------------------------------


@composite()
def renorm(input: Tensor, p: Any, dim: int, maxnorm: Any) -> Tensor:
    """``torch.renorm``: each slice of ``input`` along ``dim`` (the sub-tensor at one
    index of it) whose ``p``-norm exceeds ``maxnorm`` scaled down to norm ``maxnorm``
    (``maxnorm / (norm + 1e-7)``, torch's factor); at least 2-D, floating or complex dtypes
    (the moduli's norms). The norms are all-reduced where other dims are sharded (as
    ``norm``); a Partial is refused.

    Example:
        >>> import dtorch
        >>> dtorch.renorm(dtorch.tensor([[3.0, 4.0], [0.3, 0.4]]), 2, 0, 1.0).tolist()
        [[0.6000000238418579, 0.800000011920929], [0.30000001192092896, 0.4000000059604645]]
    """
    tensor_arg("renorm", input)
    order, limit = as_real("renorm: p", p), as_real("renorm: maxnorm", maxnorm)
    if not order > 0:  # NaN too, as torch
        raise ParamError(f"renorm: non-positive-norm not supported (p={order}); accepted: p > 0")
    if not limit >= 0:
        raise ParamError(f"renorm: expected maxnorm to be >= 0 but got {limit}")
    if input.ndim < 2:
        raise ShapeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise DtypeError(f"renorm: expected a floating point input, got {input.dtype}")
    d = normalize_dim(dim, input.ndim, op="renorm")
    others = [i for i in range(input.ndim) if i != d]
    from dtorch.linalg import vector_norm

    magnitude = input.abs() if input.dtype.is_complex else input  # a complex one's moduli
    work = torch.float32 if magnitude.dtype in _HALVES else magnitude.dtype
    norm = vector_norm(magnitude, order, others, keepdim=True, dtype=work)
    factor = select("renorm", norm > limit, limit / (norm + 1e-7), 1.0)
    return input * cast(factor, magnitude.dtype)


@composite()
def logaddexp2(input: Any, other: Any) -> Tensor:
    """``log2(2 ** input + 2 ** other)`` without overflow, as torch computes it:
    ``max + log1p(2 ** -|input - other|) / ln 2``, and ``input`` where both are the same
    infinity; floating dtypes (torch has no integer kernel).

    Example:
        >>> import dtorch
        >>> dtorch.logaddexp2(dtorch.tensor([1.0]), dtorch.tensor([1.0])).item()
        2.0
    """
    a, b = _cm.tensor_operands("logaddexp2", input, other)
    dtype = function_dtype("logaddexp2", torch.logaddexp2, (_cm.probe_spec(a), _cm.probe_spec(b)))
    work = _cm.work_dtype(dtype)
    a, b = cast(a, work), cast(b, work)
    gap = (a - b).abs().neg()
    out = a.maximum(b) + unary(MathKind.EXP2, "logaddexp2", gap).log1p() * (1 / math.log(2))
    same_infinity = a.isinf().logical_and(a == b)
    return cast(select("logaddexp2", same_infinity, a, out), dtype)


@composite()
def mvlgamma(input: Tensor, p: int) -> Tensor:
    """``torch.mvlgamma``: the multivariate log-gamma of dimension ``p`` (>= 1),
    ``sum(lgamma(input - i / 2) for i < p) + p (p - 1) / 4 log(pi)``, as torch sums it;
    integers give the default float. torch checks no domain here (nor does dtorch).

    Example:
        >>> import dtorch
        >>> round(dtorch.mvlgamma(dtorch.tensor([2.5]), 2).item(), 4)
        0.857
    """
    tensor_arg("mvlgamma", input)
    dims = as_int("mvlgamma", "p", p)
    if dims < 1:
        raise ParamError(f"mvlgamma: p has to be greater than or equal to 1, got {dims}")
    if input.dtype == torch.bool:
        raise DtypeError("mvlgamma: The input tensor may not be a boolean tensor.")
    dtype = input.dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        dtype = torch.get_default_dtype()
    steps = torch.arange(-dims * 0.5 + 0.5, 0.5, 0.5, dtype=dtype)
    args = cast(input, dtype).unsqueeze(-1) + beside(input, steps)
    return args.lgamma().sum(-1) + dims * (dims - 1) * math.log(math.pi) * 0.25


@composite()
def polygamma(n: int, input: Tensor) -> Tensor:
    """``torch.polygamma``: the ``n``-th derivative of the digamma function (``n >= 0``;
    ``n = 0`` is ``digamma``); integers give the default float.

    Example:
        >>> import dtorch
        >>> round(dtorch.polygamma(1, dtorch.tensor([1.0])).item(), 4)
        1.6449
    """
    tensor_arg("polygamma", input)
    order = as_int("polygamma", "n", n)
    if order < 0:
        raise ParamError(f"polygamma(n, x) does not support negative n (got {order})")
    if order in (0, 1):  # torch's digamma and trigamma kernels
        return unary(MathKind.TRIGAMMA if order else MathKind.DIGAMMA, "polygamma", input)
    # torch's own formula for n >= 2: n! as exp(lgamma(n + 1)), infinite past a double's range
    size = math.exp(math.lgamma(order + 1)) if order <= 170 else math.inf
    scale = size if order % 2 else -size
    if input.dtype not in _HALVES:
        return binary(BinaryKind.ZETA, "polygamma", float(order + 1), input) * scale
    wide = cast(input, torch.float32)  # torch's zeta has no half kernel; its polygamma's opmath
    out = binary(BinaryKind.ZETA, "polygamma", float(order + 1), wide) * scale
    return cast(out, input.dtype)


def polygamma_method(self: Tensor, n: int) -> Tensor:
    """``Tensor.polygamma(n)``: ``dtorch.polygamma(n, self)``.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([1.0]).polygamma(0).item() < 0
        True
    """
    return polygamma(n, self)


@composite()
def frexp(input: Tensor) -> Any:
    """``torch.frexp``: ``(mantissa, exponent)`` with ``input = mantissa * 2 ** exponent``,
    ``0.5 <= |mantissa| < 1`` (0, infinities and NaN: themselves and exponent 0); floating
    dtypes only; the exponent is int32.

    Example:
        >>> import dtorch
        >>> m, e = dtorch.frexp(dtorch.tensor([8.0, -3.0, 0.0]))
        >>> m.tolist(), e.tolist()
        ([0.5, -0.75, 0.0], [4, 2, 0])
    """
    tensor_arg("frexp", input)
    if not input.dtype.is_floating_point:
        raise DtypeError(
            f"frexp: torch.frexp() only supports floating-point dtypes, got {input.dtype}"
        )
    x = cast(input, torch.float64 if input.dtype == torch.float64 else torch.float32)
    regular = x.isfinite().logical_and(x != 0)
    guess = select("frexp", regular, x.abs().log2().floor() + 1, 0.0)
    exponent = cast(guess, torch.int32)
    mantissa = _scaled(x, exponent)
    # log2 may round across a power of 2: one step back (0, infinities and NaN stay)
    small = regular.logical_and(mantissa.abs() < 0.5)
    large = regular.logical_and(mantissa.abs() >= 1)
    mantissa = select(
        "frexp", small, mantissa * 2, select("frexp", large, mantissa * 0.5, mantissa)
    )
    exponent = exponent - cast(small, torch.int32) + cast(large, torch.int32)
    return torch.return_types.frexp((cast(mantissa, input.dtype), exponent))  # type: ignore[arg-type]


def _scaled(x: Tensor, exponent: Tensor) -> Tensor:
    # ``x * 2 ** -exponent`` in two halves: ``2 ** 149`` alone overflows float32
    half = exponent.div(2, rounding_mode="floor")
    return binary(
        BinaryKind.LDEXP, "frexp", binary(BinaryKind.LDEXP, "frexp", x, -half), half - exponent
    )


# --- flat writes ----------------------------------------------------------------------------


def _check_put(input: Tensor, index: Any, source: Any) -> None:
    tensor_arg("put", input)
    for label, value in (("index", index), ("source", source)):
        if not (isinstance(value, torch.Tensor) or is_handle(value)):
            raise TypeError(f"put: {label} must be a tensor, got {type(value).__name__}")
    if index.dtype != torch.int64:
        raise DtypeError(f"put_(): Expected a long tensor for index, but got {index.dtype}")
    if source.dtype != input.dtype:
        raise DtypeError(
            f"put_(): self and source expected to have the same dtype, but got self.dtype = "
            f"{input.dtype} and source.dtype = {source.dtype}"
        )
    if index.numel() != source.numel():
        raise ShapeError(
            "put_(): Expected source and index to have the same number of elements, but got "
            f"source.numel() = {source.numel()}, index.numel() = {index.numel()}"
        )
    if isinstance(index, torch.Tensor) and index.numel():
        size = input.numel()
        bad = index[(index >= size) | (index < -size)]
        if bad.numel():
            raise IndexError(
                f"put: out of range: tried to access index {int(bad[0])} on a tensor of "
                f"{size} elements."
            )


@composite()
def put(input: Tensor, index: Any, source: Any, accumulate: bool = False) -> Tensor:
    """``torch.put``: a copy of ``input`` with ``source``'s entries written at ``index``
    (int64, negatives from the end) of ``input`` read as flat (row-major), added there
    where ``accumulate``. ``input`` is made Replicate first (any entry may be written), as
    ``take`` reads it; an out-of-range dtorch ``index`` fails when the value is fetched.

    Example:
        >>> import dtorch, torch
        >>> x = dtorch.zeros(2, 2)
        >>> dtorch.put(x, torch.tensor([3, 0]), torch.tensor([5.0, 6.0])).tolist()
        [[6.0, 0.0], [0.0, 5.0]]
    """
    _check_put(input, index, source)
    add = as_flag(accumulate, "put", "accumulate")
    index, source = (
        beside(input, v) if isinstance(v, torch.Tensor) else v for v in (index, source)
    )
    index, source, flat = (replicated(t) for t in (index, source, input))
    flat = flat.reshape(-1)
    if not index.numel():
        return flat.reshape(input.shape).clone()
    from dtorch.api.ops.index import index_put

    out = index_put(flat, (index.reshape(-1),), source.reshape(-1), accumulate=add)
    return out.reshape(input.shape)
