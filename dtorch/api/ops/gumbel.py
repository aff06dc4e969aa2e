"""``gumbel_softmax`` with torch.nn.functional's signature: torch's arithmetic on dtorch's
operators, its Gumbel noise drawn as torch draws it (an ``exponential_`` fill of the default
generator, bit for bit torch's however the tensor is sharded, the generator left where torch
leaves it). The values are torch's where the softmax dim is whole on every device; a sharded
one is dtorch's split softmax (within rounding), and ``hard`` then refuses it (its one-hot is
a scatter along that dim). A Partial is refused (the noise is added to the whole value).

Example:
    >>> import torch, dtorch
    >>> x = torch.randn(2, 3)
    >>> _ = torch.manual_seed(4)
    >>> ours = dtorch.nn.functional.gumbel_softmax(dtorch.tensor(x), tau=0.5).to_torch()
    >>> _ = torch.manual_seed(4)
    >>> torch.equal(ours, torch.nn.functional.gumbel_softmax(x, tau=0.5))
    True
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from dtorch.api.creation import empty_like, zeros_like
from dtorch.api.record import named_as, tensor_arg

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def gumbel_softmax(
    logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1
) -> Tensor:
    """``torch.nn.functional.gumbel_softmax``: ``softmax((logits + g) / tau)`` over ``dim``
    with ``g`` Gumbel noise drawn as torch draws it (``-log`` of an ``exponential_`` fill of
    the default generator), so one seed gives torch's noise however ``logits`` is sharded;
    ``hard``: the one-hot of each row's maximum (``y_hard - y_soft + y_soft``, torch's
    arithmetic). ``eps`` is deprecated and unused, with torch's warning.

    Example:
        >>> import torch, dtorch
        >>> _ = torch.manual_seed(0)
        >>> dtorch.nn.functional.gumbel_softmax(dtorch.zeros(1, 3), hard=True).sum().item()
        1.0
    """
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    tensor_arg("gumbel_softmax", logits)
    with named_as("gumbel_softmax"):
        gumbels = -empty_like(logits).exponential_().log()  # ~Gumbel(0, 1), torch's draw
        y_soft = ((logits + gumbels) / tau).softmax(dim)
        if not hard:  # torch's truthiness: hard=1 is True
            return y_soft
        index = y_soft.max(dim, keepdim=True)[1]
        y_hard = zeros_like(logits).scatter_(dim, index, 1.0)
        return y_hard - y_soft + y_soft
