"""``dtorch.tensor``: the module path of ``Tensor``, ``tensor`` and ``TensorFuture``.

It is also callable, so ``dtorch.tensor(data, ...)`` keeps working after ``import
dtorch.tensor`` binds this module to the package attribute of the same name.

Example:
    >>> import dtorch
    >>> from dtorch.tensor import Tensor, TensorFuture
    >>> isinstance(dtorch.tensor([1, 2]), Tensor)
    True
"""

from __future__ import annotations

import sys
import types
from typing import Any

from dtorch.api.creation import tensor
from dtorch.api.future import TensorFuture
from dtorch.api.redistribute import tensors_redistribute_by_dict
from dtorch.api.tensor import Tensor

__all__ = ["Tensor", "TensorFuture", "tensor", "tensors_redistribute_by_dict"]


class _CallableModule(types.ModuleType):
    """This module, callable as ``dtorch.tensor(data, ...)``."""

    def __call__(self, data: Any, **kwargs: Any) -> Tensor:
        return tensor(data, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
