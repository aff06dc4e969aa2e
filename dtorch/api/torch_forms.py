"""The ``dtorch.*`` forms of the nn operators, with torch's top-level signatures.

``torch.embedding``, ``torch.batch_norm``, ``torch.dropout``, ``torch.layer_norm`` and
``torch.group_norm`` differ from their ``torch.nn.functional`` namesakes (argument order,
trailing backend flags, ``train`` for ``training``); ``dtorch.<name>`` takes torch's top-level
form, so code written against ``torch.<name>`` runs unchanged, and calls the functional one.
``conv2d``, ``max_pool2d`` and ``rms_norm`` have one form in torch and are plain aliases.

Example:
    >>> import dtorch
    >>> w = dtorch.arange(6.0).view(3, 2)
    >>> dtorch.embedding(w, dtorch.tensor([2, 0])).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    >>> dtorch.dropout(dtorch.ones(2), 0.5, False).tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dtorch.api.handle import TensorBase
from dtorch.api.ops import dropout as _dropout
from dtorch.api.ops import embedding as _embedding
from dtorch.api.ops import norm as _norm

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def embedding(
    weight: Tensor,
    indices: Any,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """``torch.embedding(weight, indices)``: rows of ``weight`` (note the order: the functional
    form is ``F.embedding(input, weight)``). ``padding_idx=-1`` is torch's "none"; like the
    other two flags it changes no forward value. Placements: ``F.embedding``'s.

    Example:
        >>> import dtorch
        >>> dtorch.embedding(dtorch.tensor([[1.0, 0.0], [0.0, 1.0]]), dtorch.tensor([[1]])).tolist()
        [[[0.0, 1.0]]]
    """
    if isinstance(indices, TensorBase) and indices.dtype.is_floating_point:
        raise TypeError(
            f"embedding: indices must be an integer tensor, got {indices.dtype}; "
            "dtorch.embedding takes torch.embedding's (weight, indices) order "
            "(dtorch.nn.functional.embedding takes (input, weight))"
        )
    padding = None if padding_idx < 0 else padding_idx
    return _embedding.embedding(indices, weight, padding, None, 2.0, scale_grad_by_freq, sparse)


def batch_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool = True,
) -> Tensor:
    """``torch.batch_norm`` (weight and bias before the running statistics, every argument
    given, as torch requires); ``cudnn_enabled`` is a backend hint with no effect here.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([[1.0], [3.0]])
        >>> dtorch.batch_norm(x, None, None, None, None, True, 0.1, 1e-12, True).tolist()
        [[-1.0], [1.0]]
    """
    return _norm.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.dropout(input, p, train)``: ``F.dropout`` with ``training=train`` (the same
    mask as torch's for the same seed, however ``input`` is sharded).

    Example:
        >>> import torch, dtorch
        >>> x = torch.ones(6)
        >>> _ = torch.manual_seed(0)
        >>> want = torch.dropout(x, 0.5, True)
        >>> _ = torch.manual_seed(0)
        >>> torch.equal(dtorch.dropout(dtorch.from_torch(x), 0.5, True).to_torch(), want)
        True
    """
    return _dropout.dropout(input, p, train)


def layer_norm(
    input: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    cudnn_enable: bool = True,
) -> Tensor:
    """``torch.layer_norm``: ``F.layer_norm`` plus torch's ``cudnn_enable`` hint (no effect).

    Example:
        >>> import dtorch
        >>> dtorch.layer_norm(dtorch.tensor([[1.0, 3.0]]), [2], None, None, 0.0, True).tolist()
        [[-1.0, 1.0]]
    """
    return _norm.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    cudnn_enabled: bool = True,
) -> Tensor:
    """``torch.group_norm``: ``F.group_norm`` plus torch's ``cudnn_enabled`` hint (no effect).

    Example:
        >>> import dtorch
        >>> dtorch.group_norm(dtorch.tensor([[1.0, 3.0]]), 1, None, None, 0.0, True).tolist()
        [[-1.0, 1.0]]
    """
    return _norm.group_norm(input, num_groups, weight, bias, eps)
