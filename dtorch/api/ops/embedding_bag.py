"""``embedding_bag`` with torch.nn.functional's signature: one EmbeddingBag operator.

Bags of rows of ``weight`` reduced by ``mode`` (``"sum"``, ``"mean"`` or ``"max"``): the rows
of 2-D ids, or the runs of 1-D ids that ``offsets`` start. Layouts
(``dtorch.ir.rules.embedding_bag``): the bags of 2-D ids sharded (data parallel) give an
output sharded alike, a weight split on its embedding dim gives Shard(1), and a weight split on
its vocab (a sharded embedding table) gives a Partial for ``sum`` and ``mean``; the values are
torch's own ``embedding_bag`` wherever each device holds whole bags and whole rows. torch
tensors (ids, offsets, per-sample weights) are sent Replicate. ``max_norm`` renormalises the
rows the ids name in place first, as ``embedding`` does; ``scale_grad_by_freq`` and ``sparse``
concern gradients only.

Example:
    >>> import torch, dtorch
    >>> w = dtorch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> ids, offsets = torch.tensor([0, 2, 1]), torch.tensor([0, 2])
    >>> dtorch.nn.functional.embedding_bag(ids, w, offsets, mode="sum").tolist()
    [[6.0, 8.0], [3.0, 4.0]]
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_flag
from dtorch.api.ops.embedding import check_max_norm, padding_index, renorm_rows
from dtorch.api.record import record_one, tensor_arg
from dtorch.errors import ParamError, ShapeError, UnsupportedShapeError
from dtorch.ir.params import EmbeddingBagParam
from dtorch.ir.rules.embedding_bag import check_offsets

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_NAME = "embedding_bag"


def embedding_bag(
    input: Any,
    weight: Any,
    offsets: Any = None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Any = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """``torch.nn.functional.embedding_bag``: each bag's rows of ``weight`` summed,
    averaged or maximised (``mode``), the ``padding_idx`` entries left out (an empty bag is
    zeros); ``per_sample_weights`` (``mode="sum"`` only) scale each entry. See the module doc
    for the layouts.

    Example:
        >>> import torch, dtorch
        >>> w = dtorch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        >>> dtorch.nn.functional.embedding_bag(torch.tensor([[0, 2], [1, 1]]), w).tolist()
        [[3.0, 4.0], [3.0, 4.0]]
    """
    input, weight = _ordered(input, weight)
    tensor_arg(_NAME, weight, "weight")
    offsets_arg = offsets
    ids, offsets, psw = (_beside(weight, t) for t in (input, offsets, per_sample_weights))
    _check_shapes(ids, weight, offsets, psw)
    if mode not in ("sum", "mean", "max"):
        raise ParamError(f"{_NAME}: mode has to be one of sum, mean or max; got {mode!r}")
    if psw is not None and mode != "sum":
        raise UnsupportedShapeError(
            f"{_NAME}: per_sample_weights was not None. per_sample_weights is only supported "
            f"for mode='sum' (got mode='{mode}'); accepted: mode='sum', or no weights"
        )
    last = as_flag(include_last_offset, _NAME, "include_last_offset")
    if isinstance(offsets_arg, torch.Tensor):  # a torch one's values are checked now
        check_offsets(offsets_arg, ids.numel(), last)
    pad = padding_index(padding_idx, weight, _NAME)
    param = EmbeddingBagParam(mode, pad, last, offsets is not None, psw is not None)
    norm = check_max_norm(_NAME, max_norm, norm_type)
    if norm is not None:
        renorm_rows(_NAME, ids, weight, *norm)
    inputs = tuple(t for t in (ids, weight, offsets, psw) if t is not None)
    return record_one(_NAME, param, inputs)


def _ordered(input: Any, weight: Any) -> tuple[Any, Any]:
    # torch's legacy order (weight, input): taken with torch's warning
    if (
        getattr(weight, "dtype", None) in (torch.int64, torch.int32)
        and getattr(input, "dtype", torch.int64).is_floating_point
    ):
        warnings.warn(
            "Argument order of nn.functional.embedding_bag was changed. Usage "
            "`embedding_bag(weight, input, ...)` is deprecated, and should now be "
            "`embedding_bag(input, weight, ...)`.",
            stacklevel=3,
        )
        return weight, input
    return input, weight


def _beside(weight: Tensor, value: Any) -> Any:
    # a torch tensor argument as a Replicate operand on the weight's mesh
    return beside(weight, value) if isinstance(value, torch.Tensor) else value


def _check_shapes(ids: Any, weight: Tensor, offsets: Any, psw: Any) -> None:
    """torch's checks, in its order and words (ValueError), before any dtype check."""
    tensor_arg(_NAME, ids, "input")
    if psw is not None and tuple(psw.shape) != tuple(ids.shape):
        raise ShapeError(
            f"{_NAME}: If per_sample_weights ({tuple(psw.shape)}) is not None, then it must "
            f"have the same shape as the input ({tuple(ids.shape)})"
        )
    if weight.ndim != 2:
        raise ShapeError(
            f"{_NAME}: weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}"
        )
    if ids.ndim == 2 and offsets is not None:
        raise ShapeError(
            f"{_NAME}: if input is 2D, then offsets has to be None, as input is treated as a "
            "mini-batch of fixed length sequences"
        )
    if ids.ndim == 2 and ids.shape[1] == 0:  # torch's arange of the offsets by that step
        raise ShapeError(f"{_NAME}: step must be nonzero (2-D input of bags of length 0)")
    if ids.ndim == 1 and (offsets is None or offsets.ndim != 1):
        got = "None" if offsets is None else f"a {offsets.ndim}-D tensor"
        raise ShapeError(f"{_NAME}: offsets has to be a 1D Tensor but got {got}")
    if ids.ndim not in (1, 2):
        raise ShapeError(
            f"{_NAME}: input has to be 1D or 2D Tensor, but got Tensor of dimension {ids.ndim}"
        )
