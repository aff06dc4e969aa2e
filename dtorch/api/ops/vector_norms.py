"""torch.nn.functional's operators made of vector norms: ``normalize`` and
``cosine_similarity``, compositions of ``norm``, ``clamp``, division, product and ``sum``.

Placements are those of the parts: a shard of a dim that is not reduced stays; over a sharded
reduced dim the norms are all-reduced to Replicate (``norm`` takes a square root of the full
sum), so ``normalize`` keeps the input's shards and ``cosine_similarity``, whose last step is
a ``sum`` over that dim, gives Partial. A Partial input is refused (a norm is not linear).

Example:
    >>> import dtorch
    >>> import dtorch.nn.functional as F
    >>> F.normalize(dtorch.tensor([[0.0, 2.0], [3.0, 4.0]])).tolist()
    [[0.0, 1.0], [0.6000000238418579, 0.800000011920929]]
    >>> F.cosine_similarity(dtorch.tensor([[1.0, 0.0]]), dtorch.tensor([[1.0, 1.0]])).tolist()
    [0.7071067690849304]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import normalize_dim
from dtorch.api.handle import is_tensor
from dtorch.api.ops.clamp import clamp
from dtorch.api.ops.convert import cast
from dtorch.api.ops.scalars import as_real
from dtorch.api.ops.shape import expand
from dtorch.api.ops.statistics import named_refusals, norm
from dtorch.api.record import with_inputs
from dtorch.errors import DtypeError, ParamError, ShapeError
from dtorch.ir.rules.elementwise import broadcast_or_reason

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


@named_refusals
def normalize(
    input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None
) -> Tensor:
    """``torch.nn.functional.normalize``: ``input / max(norm_p(input, dim), eps)``, the
    ``p``-norm over ``dim`` (kept) clamped below by ``eps``; floating-point tensors only.

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.normalize(dtorch.tensor([[1.0, -3.0]]), p=1).tolist()
        [[0.25, -0.75]]
    """
    if out is not None:
        raise TypeError("normalize: out= is not supported (dtorch tensors are values)")
    denominator = clamp(norm(input, p, dim, keepdim=True), min=eps)
    return input / denominator


@with_inputs
@named_refusals
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``torch.nn.functional.cosine_similarity``, torch's formula: the sum over ``dim`` of
    ``(x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps))`` (each divided by its clamped 2-norm
    first), ``x1`` and ``x2`` broadcast together and cast to their common floating dtype.

    Example:
        >>> import dtorch
        >>> a, b = dtorch.tensor([[1.0, 2.0]]), dtorch.tensor([[2.0, 4.0]])
        >>> round(dtorch.nn.functional.cosine_similarity(a, b).item(), 6)
        1.0
    """
    x1, x2 = _common(x1, x2)
    d = normalize_dim(dim, x1.ndim, op="cosine_similarity")
    eps = as_real("cosine_similarity: eps", eps)
    if not eps >= 0:  # torch's check (NaN too)
        raise ParamError(f"cosine_similarity: eps must be non-negative, got: {eps}")
    a, b = (x / clamp(norm(x, 2, d, keepdim=True), min=eps) for x in (x1, x2))
    return (a * b).sum(d)


def _common(x1: Any, x2: Any) -> tuple[Tensor, Tensor]:
    """Both operands as dtorch tensors of their common floating dtype and broadcast shape."""
    if not is_tensor(x1):
        raise TypeError(f"cosine_similarity: x1 must be a dtorch.Tensor, got {type(x1).__name__}")
    y1: Tensor = x1
    y2: Tensor = beside(y1, x2) if isinstance(x2, torch.Tensor) else x2
    if not is_tensor(y2):
        raise TypeError(f"cosine_similarity: x2 must be a dtorch.Tensor, got {type(x2).__name__}")
    dtype = torch.promote_types(y1.dtype, y2.dtype)
    if not dtype.is_floating_point:
        raise DtypeError(f"expected common dtype to be floating point, yet common dtype is {dtype}")
    shape = broadcast_or_reason((tuple(y1.shape), tuple(y2.shape)))
    if not isinstance(shape, tuple):
        raise ShapeError(f"x1 of shape {list(y1.shape)} and x2 of shape {list(y2.shape)}: {shape}")
    return tuple(_shaped(cast(y, dtype), shape) for y in (y1, y2))  # type: ignore[return-value]


def _shaped(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    return t if tuple(t.shape) == shape else expand(t, shape)
