"""Functions of the ``dtorch`` namespace that are not a single operator: ``equal``,
``nonzero``, ``concat``.

Example:
    >>> import dtorch
    >>> dtorch.nonzero(dtorch.tensor([0, 3, 0, 5])).tolist()
    [[1], [3]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_flag, as_int, numpy_names
from dtorch.api.handle import TensorBase
from dtorch.api.ops.elementwise import probe
from dtorch.api.ops.shape import cat
from dtorch.api.record import tensor_arg

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def equal(input: Tensor, other: Tensor) -> bool:
    """True when both have the same shape and values (waits for both: their values are
    fetched and compared on the client, whatever their placements).

    Example:
        >>> import dtorch
        >>> a = dtorch.tensor([1, 2])
        >>> dtorch.equal(a, dtorch.tensor([1, 2])), dtorch.equal(a, dtorch.tensor([1, 3]))
        (True, False)
    """
    tensor_arg("equal", input)
    return input.equal(other)


def manual_seed(seed: int) -> torch.Generator:
    """``torch.manual_seed``: seeds torch's default generator, which dtorch's random
    functions draw from when given none (so ``dtorch.randn`` then holds torch's values).
    A call, not torch's object: torch's compiler swaps ``torch.manual_seed`` for a wrapper
    once it is imported, and this follows whichever is current.

    Example:
        >>> import torch, dtorch
        >>> _ = dtorch.manual_seed(5)
        >>> drawn = dtorch.randn(3).to_torch()
        >>> _ = torch.manual_seed(5)
        >>> torch.equal(drawn, torch.randn(3))
        True
    """
    return torch.manual_seed(seed)


def is_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a dtorch tensor, as ``torch.is_tensor`` asks of a torch one (a torch
    tensor is not: it names no mesh).

    Example:
        >>> import torch, dtorch
        >>> dtorch.is_tensor(dtorch.zeros(2)), dtorch.is_tensor(torch.zeros(2))
        (True, False)
    """
    return isinstance(obj, TensorBase)


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Any:
    """Indices of the non-zero elements, ``torch.nonzero`` layout (``as_tuple``: a tuple of
    one 1-D index tensor per dim, as torch's), replicated on ``input``'s mesh.

    The output's shape depends on the values, so this waits for ``input`` (like a value
    fetch).

    Example:
        >>> import dtorch
        >>> [i.tolist() for i in dtorch.tensor([[0, 1], [2, 0]]).nonzero(as_tuple=True)]
        [[0, 1], [1, 0]]
    """
    tensor_arg("nonzero", input)
    as_tuple = as_flag(as_tuple, "nonzero", "as_tuple")
    value = input.to_torch()
    if not as_tuple:
        return beside(input, torch.nonzero(value))
    return tuple(beside(input, i) for i in torch.nonzero(value, as_tuple=True))


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """``torch.nonzero_static``: the indices of the first ``size`` non-zero elements (as
    ``nonzero``), padded with rows of ``fill_value`` to ``size`` rows, replicated on
    ``input``'s mesh. It waits for ``input``, as ``nonzero`` does.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([0, 3, 0, 4]).nonzero_static(size=3).tolist()
        [[1], [3], [-1]]
    """
    tensor_arg("nonzero_static", input)
    size = as_int("nonzero_static", "size", size)
    fill_value = as_int("nonzero_static", "fill_value", fill_value)
    value = input.to_torch()
    return beside(input, torch.nonzero_static(value, size=size, fill_value=fill_value))


@numpy_names
def concat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Alias of ``cat`` (``axis=`` for ``dim=`` too, as torch's).

    Example:
        >>> import dtorch
        >>> dtorch.concat([dtorch.tensor([[1, 2]]), dtorch.tensor([[3, 4]])], dim=1).tolist()
        [[1, 2, 3, 4]]
    """
    return cat(tensors, dim)


def result_type(tensor: Any, other: Any) -> torch.dtype:
    """``torch.result_type``: the dtype torch's arithmetic gives ``tensor`` and ``other``
    (tensors or numbers), from their dtypes and whether each has dims (a 0-d tensor promotes
    as less than a tensor with dims of its category); no value is read.

    Example:
        >>> import torch, dtorch
        >>> dtorch.result_type(dtorch.tensor([1, 2], dtype=torch.int8), 2.5)
        torch.float32
    """
    return torch.result_type(probe(tensor), probe(other))  # numbers and torch's: as they are
