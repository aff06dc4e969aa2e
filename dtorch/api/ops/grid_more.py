"""Products, distances, statistics and scatters composed of dtorch's operators: ``cross``,
``cdist``, ``cov``, ``corrcoef`` and the out-of-place ``select_scatter``, ``slice_scatter``,
``diagonal_scatter`` (the second half of ``dtorch.api.ops.grid``'s family).

Layouts:

* ``cross`` gathers the dim it works along (Replicate on it where sharded, a Partial
  summed); the other dims keep their shards.
* ``cdist`` makes ``x2`` Replicate and gathers ``x1``'s last dim (Partials summed):
  ``x1``'s rows and batch dims keep their shards. It forms every difference (memory
  ``B * P * R * M``).
* ``cov`` and ``corrcoef`` make their input Replicate first and return Replicate.
* the scatters are a ``where`` of ``input`` and ``src`` spread over the slot (an
  ``index_select`` of ``src``, gathered along that dim): ``input``'s shards stay, a Partial is
  refused as ``where`` refuses it.

Example:
    >>> import dtorch
    >>> dtorch.cross(dtorch.tensor([0, 1, 0]), dtorch.tensor([0, 0, 1]), dim=0).tolist()
    [1, 0, 0]
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

import dtorch.api.ops.math_more as _mm
from dtorch.api.create import beside
from dtorch.api.dims import as_int, normalize_dim
from dtorch.api.ops.grid import grid_tensor, shape_list
from dtorch.api.ops.masked import where
from dtorch.api.ops.shape import cat
from dtorch.api.record import named_as
from dtorch.api.redistribute import gathered, replicated
from dtorch.errors import DimError, DtypeError, ParamError, ShapeError, UnsupportedDtypeError

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """``torch.cross``: the cross product of 3-vectors along ``dim`` (None: the first dim of
    size 3, with torch's warning), of tensors of as many dims broadcast together. That dim is
    gathered first where sharded (a Partial summed); the others keep their shards.

    Example:
        >>> import dtorch
        >>> dtorch.cross(dtorch.tensor([1, 0, 0]), dtorch.tensor([0, 1, 0]), dim=0).tolist()
        [0, 0, 1]
    """
    a, b = grid_tensor("cross", input), grid_tensor("cross", other, "other")
    if a.ndim != b.ndim:
        raise ShapeError("linalg.cross: inputs must have the same number of dimensions.")
    if torch.bool in (a.dtype, b.dtype):
        raise UnsupportedDtypeError("\"cross\" not implemented for 'Bool'; accepted: numbers")
    if a.dtype != b.dtype:  # torch's kernel takes one dtype (no promotion)
        raise DtypeError(f"cross: expected one dtype for both inputs, got {a.dtype} and "
                         f"{b.dtype}; cast one first")  # fmt: skip
    try:
        shape = torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError as error:
        raise ShapeError(f"cross: {error}") from None
    d = _cross_dim(a, b, shape, dim)
    with named_as("cross"):
        x, y = (gathered(t.expand(shape), (d,), partial=True) for t in (a, b))
        u = [x.narrow(d, i, 1) for i in range(3)]
        v = [y.narrow(d, i, 1) for i in range(3)]
        parts = [
            u[(i + 1) % 3] * v[(i + 2) % 3] - u[(i + 2) % 3] * v[(i + 1) % 3] for i in range(3)
        ]
        return cat(parts, d)


def _cross_dim(a: Tensor, b: Tensor, shape: Sequence[int], dim: Any) -> int:
    if dim is None:
        warnings.warn(
            "Using torch.cross without specifying the dim arg is deprecated.\nPlease either "
            "pass the dim explicitly or simply use torch.linalg.cross.",
            UserWarning,
            stacklevel=3,
        )
        found = [i for i, n in enumerate(a.shape) if n == 3]  # input's own sizes, as torch
        if not found:
            raise ShapeError("no dimension of size 3 in input")
        dim = found[0]
    d = normalize_dim(dim, len(shape), op="cross")
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise ShapeError(
            f"linalg.cross: inputs dimension {d} must have length 3. Got {a.shape[d]} and "
            f"{b.shape[d]}"
        )
    return d


_COMPUTE_MODES = (
    "use_mm_for_euclid_dist_if_necessary",
    "use_mm_for_euclid_dist",
    "donot_use_mm_for_euclid_dist",
)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str = _COMPUTE_MODES[0]) -> Tensor:
    """``torch.cdist``: the ``p``-norm distances between each row of ``x1`` (``..., P, M``)
    and of ``x2`` (``..., R, M``), batch dims broadcast. Computed from the differences
    whichever ``compute_mode`` (accepted and checked): as torch's "donot_use_mm" mode.
    ``x2`` is made Replicate and ``x1``'s last dim gathered; ``x1``'s rows and batch dims
    keep their shards.

    Example:
        >>> import dtorch
        >>> dtorch.cdist(dtorch.tensor([[0.0, 0.0]]), dtorch.tensor([[3.0, 4.0]])).tolist()
        [[5.0]]
    """
    a, b = grid_tensor("cdist", x1, "x1"), grid_tensor("cdist", x2, "x2")
    if isinstance(p, torch.Tensor) and p.ndim == 0:  # torch takes a 0-d tensor too
        p = p.item()
    _check_cdist(a, b, p, compute_mode)
    order = float(p)
    with named_as("cdist"):
        diff = (
            gathered(a, (a.ndim - 1,), partial=True).unsqueeze(-2) - replicated(b).unsqueeze(-3)
        ).abs()
        if order == 0:  # torch's count: min(ceil(|d|), 1), so a NaN difference gives NaN
            return diff.ceil().clamp(max=1).sum(-1)
        if math.isinf(order):  # torch's running maximum from 0 passes NaN differences over
            return where(diff.isnan(), 0, diff).amax(-1) if diff.shape[-1] else diff.sum(-1)
        if order == 1:
            return diff.sum(-1)
        if order == 2:
            return (diff * diff).sum(-1).sqrt()
        return diff.pow(order).sum(-1).pow(1 / order)


def _check_cdist(a: Tensor, b: Tensor, p: Any, mode: Any) -> None:
    for name, t in (("X1", a), ("X2", b)):
        if t.ndim < 2:
            raise ShapeError(f"cdist only supports at least 2D tensors, {name} got: {t.ndim}D")
        if not t.dtype.is_floating_point:
            raise DtypeError(
                f"cdist only supports floating-point dtypes, {name} got: {t.dtype}; "
                "accepted: floating-point dtypes"
            )
    if a.dtype != b.dtype:
        raise DtypeError(f"cdist: expected x1 and x2 of one dtype, got {a.dtype} and {b.dtype}")
    if a.dtype in (torch.float16, torch.bfloat16):  # torch's CPU kernel has none
        raise UnsupportedDtypeError(f'"cdist" not implemented for {a.dtype}; accepted: '
                                    "float32, float64")  # fmt: skip
    if a.shape[-1] != b.shape[-1]:
        raise ShapeError(
            f"X1 and X2 must have the same number of columns. X1: {a.shape[-1]} X2: {b.shape[-1]}"
        )
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not p >= 0:
        raise ParamError(f"cdist only supports non-negative p values, got {p}")
    if mode not in _COMPUTE_MODES:
        raise ParamError(
            f"{mode} is not a valid value for compute_mode; accepted: {_COMPUTE_MODES}"
        )


# --- statistics -----------------------------------------------------------------------------
def cov(
    input: Tensor, *, correction: int = 1, fweights: Any = None, aweights: Any = None
) -> Tensor:
    """``torch.cov``: the covariance of the variables (rows) of ``input`` (1-D: one
    variable) over the observations (columns), with ``fweights`` (integral counts) and
    ``aweights`` (float weights) per observation. Made Replicate first; waits for given
    weights to check them non-negative, as torch does.

    Example:
        >>> import dtorch
        >>> dtorch.cov(dtorch.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).tolist()
        [[1.0, -1.0], [-1.0, 1.0]]
    """
    x = grid_tensor("cov", input)
    if x.ndim > 2:
        raise ShapeError(
            "cov(): expected input to have two or fewer dimensions but got an input with "
            f"{x.ndim} dimensions"
        )
    if x.dtype == torch.bool:
        raise DtypeError("cov(): bool dtype is not supported for input")
    if isinstance(correction, bool) or not isinstance(correction, int):
        raise TypeError(
            f"cov(): argument 'correction' must be int, not {type(correction).__name__}"
        )
    n = x.shape[-1] if x.ndim else 1
    fw = _weights(x, fweights, "fweights", n)
    aw = _weights(x, aweights, "aweights", n)
    with named_as("cov"):
        both = fw if aw is None else (aw if fw is None else fw * aw)
        if both is not None and both.sum().item() == 0:  # torch's check of the sum: a wait
            raise ParamError("cov(): weights sum to zero, can't be normalized")
        return _covariance(x, correction, fw, aw)


def _weights(x: Tensor, w: Any, label: str, n: int) -> Tensor | None:
    if w is None:
        return None
    w = beside(x, w) if isinstance(w, torch.Tensor) else grid_tensor("cov", w, label)
    integral = label == "fweights"
    if w.ndim > 1:
        raise ShapeError(f"cov(): expected {label} to have one or fewer dimensions")
    if (w.numel() if w.ndim else 1) != n:
        raise ShapeError(
            f"cov(): expected {label} to have the same numel as there are observations in the "
            f"input but got {w.numel()} != {n}"
        )
    if integral == w.dtype.is_floating_point or w.dtype == torch.bool:
        kind = "integral" if integral else "floating point"
        raise DtypeError(f"cov(): expected {label} to have {kind} dtype but got {w.dtype}")
    if bool((w.to_torch() < 0).any()):  # torch's value check: a wait
        raise ParamError(f"cov(): {label} cannot be negative")
    return replicated(w)


def _covariance(x: Tensor, correction: int, fw: Tensor | None, aw: Tensor | None) -> Tensor:
    dtype = (
        x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else torch.get_default_dtype()
    )
    v = replicated(x).to(dtype)
    v = v.reshape(1, -1) if v.ndim < 2 else v
    w = fw if aw is None else (aw if fw is None else fw * aw)
    if w is None:
        total: Any = v.shape[1]
        mean = v.mean(1, keepdim=True)
    else:
        total = w.sum()
        mean = (v * w).sum(1, keepdim=True) / total
    factor = _norm_factor(total, correction, w, aw)
    centred = v - mean
    weighted = centred if w is None else centred * w
    return (weighted @ centred.mH / factor).squeeze()  # X X^H: conjugated where complex


def _norm_factor(total: Any, correction: int, w: Tensor | None, aw: Tensor | None) -> Any:
    if w is None:
        factor = total - correction
        if factor <= 0:
            warnings.warn("cov(): degrees of freedom is <= 0", UserWarning, stacklevel=5)
            return 0
        return factor
    if correction == 0:
        return total
    factor = total - correction if aw is None else total - correction * (w * aw).sum() / total
    return factor.clamp(min=0)


def corrcoef(input: Tensor) -> Tensor:
    """``torch.corrcoef``: the Pearson correlation coefficients of ``input``'s rows (its
    ``cov`` normalised by the standard deviations, clipped to [-1, 1], each part of a
    complex one); Replicate.

    Example:
        >>> import dtorch
        >>> dtorch.corrcoef(dtorch.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).tolist()
        [[1.0, -1.0], [-1.0, 1.0]]
    """
    with named_as("corrcoef"):
        c = cov(grid_tensor("corrcoef", input))
        if c.ndim == 0:
            return c / c
        diagonal = c.diagonal()
        std = (diagonal.real if c.dtype.is_complex else diagonal).sqrt()
        c = c / std[:, None] / std[None, :]
        if c.dtype.is_complex:  # torch clips each part (a complex number has no order)
            return _mm.complex(c.real.clamp(-1, 1), c.imag.clamp(-1, 1))
        return c.clamp(-1, 1)


# --- scatters -------------------------------------------------------------------------------
def _slot_check(src: Tensor, slot: Sequence[int]) -> None:
    if tuple(src.shape) != tuple(slot):
        raise ShapeError(
            "expected src to have a size equal to the slice of self. src size = "
            f"{shape_list(src.shape)}, slice size = {shape_list(slot)}"
        )


def _mask(x: Tensor, dims: Sequence[int], mask: torch.Tensor) -> Tensor:
    """``mask`` (over ``dims`` of ``x``) as a Replicate tensor broadcastable to ``x``."""
    shape = [x.shape[d] if d in dims else 1 for d in range(x.ndim)]
    return beside(x, mask.reshape(shape))


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """``torch.select_scatter``: a copy of ``input`` with ``src`` written at ``index`` of
    ``dim`` (``src`` cast to ``input``'s dtype).

    Example:
        >>> import dtorch
        >>> dtorch.zeros(2, 2).select_scatter(dtorch.ones(2), 0, 1).tolist()
        [[0.0, 0.0], [1.0, 1.0]]
    """
    x, s = grid_tensor("select_scatter", input), grid_tensor("select_scatter", src, "src")
    if not x.ndim:
        raise DimError("select_scatter: select() cannot be applied to a 0-dim tensor.")
    d = normalize_dim(dim, x.ndim, op="select_scatter")
    i = as_int("select_scatter", "index", index)
    if not -x.shape[d] <= i < x.shape[d]:
        raise DimError(f"select_scatter: index {i} out of range for dim {d} of size {x.shape[d]}")
    _slot_check(s, x.shape[:d] + x.shape[d + 1 :])
    hit = torch.arange(x.shape[d]) == i % x.shape[d]
    with named_as("select_scatter"):
        return where(_mask(x, (d,), hit), s.to(x.dtype).unsqueeze(d), x)


def slice_scatter(
    input: Tensor,
    src: Tensor,
    dim: int = 0,
    start: int | None = None,
    end: int | None = None,
    step: int = 1,
) -> Tensor:
    """``torch.slice_scatter``: a copy of ``input`` with ``src`` written at
    ``[start:end:step]`` of ``dim`` (``src`` cast to ``input``'s dtype).

    Example:
        >>> import dtorch
        >>> dtorch.zeros(4).slice_scatter(dtorch.ones(2), start=1, step=2).tolist()
        [0.0, 1.0, 0.0, 1.0]
    """
    x, s = grid_tensor("slice_scatter", input), grid_tensor("slice_scatter", src, "src")
    if not x.ndim:
        raise DimError("slice_scatter: slice() cannot be applied to a 0-dim tensor.")
    d = normalize_dim(dim, x.ndim, op="slice_scatter")
    stride = as_int("slice_scatter", "step", step)
    if stride <= 0:
        raise ParamError("slice step must be positive")
    picked = torch.arange(x.shape[d])[slice(start, end, stride)]
    _slot_check(s, (*x.shape[:d], len(picked), *x.shape[d + 1 :]))
    if not len(picked):
        return x.clone()
    where_from = torch.zeros(x.shape[d], dtype=torch.int64)
    where_from[picked] = torch.arange(len(picked))  # position -> its row of src
    hit = torch.zeros(x.shape[d], dtype=torch.bool)
    hit[picked] = True
    with named_as("slice_scatter"):
        spread = gathered(s, (d,), partial=True).to(x.dtype).index_select(d, beside(x, where_from))
        return where(_mask(x, (d,), hit), spread, x)


def diagonal_scatter(
    input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1
) -> Tensor:
    """``torch.diagonal_scatter``: a copy of ``input`` with ``src`` written on its
    ``diagonal(offset, dim1, dim2)`` (``src``'s last dim along the diagonal).

    Example:
        >>> import dtorch
        >>> dtorch.zeros(2, 2).diagonal_scatter(dtorch.ones(2)).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    x, s = grid_tensor("diagonal_scatter", input), grid_tensor("diagonal_scatter", src, "src")
    k = as_int("diagonal_scatter", "offset", offset)
    a = normalize_dim(dim1, x.ndim, op="diagonal_scatter")
    b = normalize_dim(dim2, x.ndim, op="diagonal_scatter")
    if a == b:
        raise ShapeError(
            f"diagonal_scatter: diagonal dimensions cannot be identical {dim1}, {dim2}"
        )
    rows, cols = torch.arange(x.shape[a])[:, None], torch.arange(x.shape[b])[None, :]
    hit = cols - rows == k
    length = int(hit.sum())
    rest = [n for i, n in enumerate(x.shape) if i not in (a, b)]
    _slot_check(s, (*rest, length))
    if not length:
        return x.clone()
    along = (rows if k >= 0 else cols).expand(hit.shape).clamp(max=length - 1)
    with named_as("diagonal_scatter"):
        flat = (
            gathered(s, (s.ndim - 1,), partial=True)
            .to(x.dtype)
            .index_select(-1, beside(x, along.reshape(-1)))
        )
        spread = flat.unflatten(-1, hit.shape).movedim((-2, -1), (a, b))
        full = hit if a < b else hit.T
        return where(_mask(x, (a, b), full), spread, x)
