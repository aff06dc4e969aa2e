"""Functions of the ``dtorch`` namespace that are not a single operator: ``equal``,
``nonzero``, ``concat``.

Example:
    >>> import dtorch
    >>> dtorch.nonzero(dtorch.tensor([0, 3, 0, 5])).tolist()
    [[1], [3]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from dtorch.api.create import distribute
from dtorch.api.ops.shape import cat

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def equal(a: Tensor, b: Tensor) -> bool:
    """True when both have the same shape and values (waits for both)."""
    return a.equal(b)


def nonzero(t: Tensor) -> Tensor:
    """Indices of the non-zero elements, ``torch.nonzero`` layout, replicated on ``t``'s mesh.

    The output's shape depends on the values, so this waits for ``t`` (like a value fetch).
    """
    indices = torch.nonzero(t.to_torch())
    return distribute(type(t), indices, graph=t.graph, device_mesh=t.device_mesh)


def concat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Alias of ``cat``."""
    return cat(tensors, dim)
