"""torch's top-level forms of the matrix functions: ``dtorch.det``, ``dtorch.logdet``,
``dtorch.slogdet`` and ``dtorch.inverse`` (also Tensor methods), which take ``input`` as
torch's do; each is ``dtorch.linalg``'s function (``slogdet`` returns
``torch.return_types.slogdet``, as ``torch.slogdet``).

Example:
    >>> import dtorch
    >>> a = dtorch.tensor([[2.0, 0.0], [0.0, 3.0]])
    >>> dtorch.det(a).item(), a.inverse().tolist()
    (6.0, [[0.5, 0.0], [0.0, 0.3333333432674408]])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.linalg import matrix as _mx

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def det(input: Tensor) -> Tensor:
    """``torch.det``: the determinant of every matrix (``dtorch.linalg.det``).

    Example:
        >>> import dtorch
        >>> dtorch.tensor([[1.0, 2.0], [3.0, 4.0]]).det().item()
        -2.0
    """
    return _mx.det(input)


def logdet(input: Tensor) -> Tensor:
    """``torch.logdet``: the log of the determinant of every matrix (NaN where negative).

    Example:
        >>> import dtorch
        >>> dtorch.tensor([[1.0, 0.0], [0.0, 1.0]]).logdet().item()
        0.0
    """
    return _mx.logdet(input)


def slogdet(input: Tensor) -> Any:
    """``torch.slogdet``: sign and log of the absolute determinant of every matrix, as
    ``torch.return_types.slogdet`` (``.sign``, ``.logabsdet``).

    Example:
        >>> import dtorch
        >>> dtorch.tensor([[-2.0, 0.0], [0.0, 1.0]]).slogdet().sign.item()
        -1.0
    """
    sign, logabsdet = _mx.slogdet(input)
    return torch.return_types.slogdet((sign, logabsdet))


def inverse(input: Tensor) -> Tensor:
    """``torch.inverse``: the inverse of every matrix (``dtorch.linalg.inv``).

    Example:
        >>> import dtorch
        >>> dtorch.inverse(dtorch.tensor([[4.0, 0.0], [0.0, 2.0]])).tolist()
        [[0.25, 0.0], [0.0, 0.5]]
    """
    return _mx.inv(input)
