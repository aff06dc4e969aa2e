"""``embedding`` with torch.nn.functional's signature.

One Embedding operator (``dtorch.ir.rules.embedding``): ids sharded on any dim give an output
sharded on that dim; a weight sharded on the embedding dim gives Shard(-1); a weight sharded
on the vocab dim (Shard(0)) gives Partial, each device looking up its own row range and
writing zeros for the others (vocab-parallel, as DTensor); redistribute to Replicate to sum.

``max_norm`` renormalises the weight in place first, as torch's ``embedding_renorm_``, by
existing operators: the rows the ids name (``isin`` of the row numbers, the ids gathered to
Replicate), their ``norm_type``-norms, and one ``mul_`` of every row by its scale (1 for the
rows left alone). Each intermediate is placed as the weight's rows (Shard(0) where the weight
is, else Replicate), so the weight keeps its placements.

Example:
    >>> import dtorch
    >>> w = dtorch.arange(6.0).view(3, 2)
    >>> dtorch.nn.functional.embedding(dtorch.tensor([2, 0]), w).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dtorch.api.create import beside
from dtorch.api.creation import arange
from dtorch.api.ops.masked import where
from dtorch.api.ops.scalars import as_real
from dtorch.api.ops.search import isin
from dtorch.api.record import infer, named_as, record_one, tensor_arg
from dtorch.errors import DtypeError
from dtorch.ir.params import EmbeddingParam
from dtorch.ir.placement import Placement, Replicate

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

#: torch's guard against a zero norm in ``embedding_renorm_``'s scale.
_EPS = 1e-7


def embedding(
    input: Any,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """``torch.nn.functional.embedding``: the rows of ``weight`` at the ids ``input`` (a
    dtorch integer tensor on the weight's mesh, or a torch tensor, sent Replicate).
    ``padding_idx`` is checked and, as in torch's forward, changes no value;
    ``scale_grad_by_freq`` and ``sparse`` concern gradients only. With ``max_norm``, every
    row the ids name whose ``norm_type``-norm exceeds it is first scaled in place to
    ``max_norm / (norm + 1e-7)`` times itself (torch's ``embedding_renorm_``): the weight
    changes, and keeps its placements.

    Example:
        >>> import torch, dtorch
        >>> w = dtorch.ones(4, 3)
        >>> dtorch.nn.functional.embedding(torch.tensor([[0, 3]]), w, padding_idx=-1).shape
        torch.Size([1, 2, 3])
        >>> w = dtorch.tensor([[3.0, 4.0], [6.0, 8.0]])
        >>> dtorch.nn.functional.embedding(torch.tensor([0]), w, max_norm=1.0).tolist()
        [[0.6000000238418579, 0.800000011920929]]
        >>> w.tolist()  # row 1, not looked up, is left alone
        [[0.6000000238418579, 0.800000011920929], [6.0, 8.0]]
    """
    norm = check_max_norm("embedding", max_norm, norm_type)
    tensor_arg("embedding", weight, "weight")
    if isinstance(input, torch.Tensor):
        input = beside(weight, input)
    param = EmbeddingParam(padding_index(padding_idx, weight))
    if norm is not None:
        _renorm(input, weight, param, *norm)
    return record_one("embedding", param, (input, weight))


def padding_index(padding_idx: Any, weight: Tensor, name: str = "embedding") -> int | None:
    """A negative ``padding_idx`` counted from the end, as torch normalises it; one out of
    range is left as given, for the rule to refuse by the value the user wrote; not an
    integer (a bool, a float): torch's TypeError, naming ``name``.

    Example:
        >>> import dtorch
        >>> padding_index(-1, dtorch.zeros(5, 2)), padding_index(None, dtorch.zeros(5, 2))
        (4, None)
    """
    if padding_idx is None:
        return None
    if isinstance(padding_idx, (bool, np.bool_)) or not hasattr(padding_idx, "__index__"):
        raise TypeError(
            f"{name}: padding_idx must be an int or None, got {padding_idx!r} "
            f"({type(padding_idx).__name__})"
        )
    padding_idx = operator.index(padding_idx)  # a numpy or 0-d torch integer as an int
    rows = weight.shape[0] if weight.ndim == 2 else 0
    if -rows <= padding_idx < 0:
        return padding_idx + rows
    return padding_idx


def check_max_norm(where: str, max_norm: Any, norm_type: Any) -> tuple[float, float] | None:
    """``(max_norm, norm_type)`` as floats, or None without ``max_norm``; each must be a real
    number, as torch's ``embedding_renorm_`` takes (``norm_type`` is unread without it).

    Example:
        >>> check_max_norm("embedding", 1, 2), check_max_norm("embedding", None, "fro")
        ((1.0, 2.0), None)
    """
    if max_norm is None:
        return None
    return as_real(f"{where}: max_norm", max_norm), as_real(f"{where}: norm_type", norm_type)


def _renorm(ids: Any, weight: Tensor, param: EmbeddingParam, limit: float, p: float) -> None:
    """torch's ``embedding_renorm_`` before a lookup, once the lookup is known to be taken."""
    _check_lookup(ids, weight, param)  # a refused lookup must not have written the weight
    renorm_rows("embedding", ids, weight, limit, p)


def renorm_rows(name: str, ids: Tensor, weight: Tensor, limit: float, p: float) -> None:
    """torch's ``embedding_renorm_`` (``embedding``'s and ``embedding_bag``'s ``max_norm``):
    the rows ``ids`` name whose ``p``-norm exceeds ``limit`` scaled in place to
    ``limit / (norm + 1e-7)`` times themselves; the weight keeps its placements.

    Example:
        >>> import dtorch
        >>> w = dtorch.tensor([[3.0, 4.0], [6.0, 8.0]])
        >>> renorm_rows("embedding", dtorch.tensor([1]), w, 5.0, 2.0)
        >>> w.tolist()
        [[3.0, 4.0], [3.0, 4.0]]
    """
    if not (weight.dtype.is_floating_point or weight.dtype.is_complex):
        raise DtypeError(
            f"{name}: max_norm needs a floating point or complex weight, got "
            f"{weight.dtype}; accepted: max_norm=None for it, or cast the weight first"
        )
    with named_as(name):
        weight.mul_(_scales(ids, weight, limit, p).unsqueeze(1))


def _check_lookup(ids: Any, weight: Tensor, param: EmbeddingParam) -> None:
    # the lookup's own refusals (ids, placements, padding_idx); its rule caches the answer
    tensor_arg("embedding", ids, "input 0")
    infer("embedding", param, (ids, weight))


def _scales(ids: Tensor, weight: Tensor, limit: float, p: float) -> Tensor:
    """Per row of ``weight``: ``limit / (norm + 1e-7)`` where the ids name it and its norm
    exceeds ``limit``, else 1; in the weight's real dtype, placed as its rows."""
    rows = _row_placements(weight.placements)
    mesh = weight.device_mesh
    every = [Replicate()] * mesh.ndim  # each device must see every id that names its rows
    numbers = arange(weight.shape[0], device_mesh=mesh, placements=rows, graph=weight.graph)
    named = isin(numbers, ids.redistribute(placements=every))
    summed = [Replicate() if q.is_partial() else q for q in weight.placements]
    norms = weight.redistribute(placements=summed).norm(p=p, dim=1)
    wide = norms.double()  # torch compares and divides in double
    scale = where(named & (wide > limit), limit / (wide + _EPS), 1.0)
    return scale.to(norms.dtype)


def _row_placements(placements: list[Placement]) -> list[Placement]:
    # the weight's split of its rows: its own Shard(0) (split order kept), Replicate elsewhere
    return [q if q.is_shard(0) else Replicate() for q in placements]
