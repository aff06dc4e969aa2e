"""``embedding`` with torch.nn.functional's signature.

One Embedding operator (``dtorch.ir.rules.embedding``): ids sharded on any dim give an output
sharded on that dim; a weight sharded on the embedding dim gives Shard(-1); a weight sharded
on the vocab dim (Shard(0)) gives Partial, each device looking up its own row range and
writing zeros for the rest (vocab-parallel, as DTensor); redistribute to Replicate to sum.

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
from dtorch.api.record import record_one, tensor_arg
from dtorch.errors import ParamError
from dtorch.ir.params import EmbeddingParam

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


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
    ``scale_grad_by_freq`` and ``sparse`` concern gradients only. ``max_norm`` (which
    renormalises the weight in place) is refused.

    Example:
        >>> import torch, dtorch
        >>> w = dtorch.ones(4, 3)
        >>> dtorch.nn.functional.embedding(torch.tensor([[0, 3]]), w, padding_idx=-1).shape
        torch.Size([1, 2, 3])
    """
    check_max_norm("embedding", max_norm)
    tensor_arg("embedding", weight, "weight")
    if isinstance(input, torch.Tensor):
        input = beside(weight, input)
    return record_one("embedding", EmbeddingParam(_padding(padding_idx, weight)), (input, weight))


def _padding(padding_idx: int | None, weight: Tensor) -> int | None:
    """A negative ``padding_idx`` counted from the end, as torch normalises it; one out of
    range is left as given, for the rule to refuse by the value the user wrote."""
    if padding_idx is None:
        return None
    if isinstance(padding_idx, (bool, np.bool_)) or not hasattr(padding_idx, "__index__"):
        raise TypeError(
            f"embedding: padding_idx must be an int or None, got {padding_idx!r} "
            f"({type(padding_idx).__name__})"
        )
    padding_idx = operator.index(padding_idx)  # a numpy or 0-d torch integer as an int
    rows = weight.shape[0] if weight.ndim == 2 else 0
    if -rows <= padding_idx < 0:
        return padding_idx + rows
    return padding_idx


def check_max_norm(where: str, max_norm: float | None) -> None:
    """Refuse ``max_norm``: torch renormalises the looked-up rows of the weight in place, a
    write dtorch does not make behind the user's back."""
    if max_norm is not None:
        raise ParamError(
            f"{where}: max_norm={max_norm} is not supported (it renormalises the weight in "
            f"place); accepted: max_norm=None. Renormalise the weight explicitly first"
        )
