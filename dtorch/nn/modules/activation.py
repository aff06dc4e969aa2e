"""Activation layers: ``ReLU``, ``GELU``, ``SiLU``, ``Sigmoid``, ``Tanh``, ``Softmax``.

Each is torch.nn's layer calling ``dtorch.nn.functional``; they have no parameters, so the
``device=``, ``device_mesh=`` (one of them at most) and ``dtype=`` every dtorch layer takes
are accepted and change nothing (the
output has the input's mesh, placements and dtype, by the operator's placement rule: any
placement but Partial for the elementwise ones; Softmax needs ``dim`` unsharded).

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> x = dtorch.tensor([-1.0, 0.0, 2.0])
    >>> nn.ReLU()(x).tolist(), nn.Softmax(dim=0)
    ([0.0, 0.0, 2.0], Softmax(dim=0))
"""

from __future__ import annotations

from typing import Any

import torch

from dtorch.api.ops.elementwise import gelu, sigmoid, silu, tanh
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.nn import functional as F
from dtorch.nn.modules.linear import Device, check_mesh_or_device
from dtorch.nn.modules.module import Module


def _inplace_repr(inplace: bool) -> str:
    return "inplace=True" if inplace else ""


class _NoParameters(Module):
    """A layer without parameters: ``device``/``device_mesh``/``dtype`` are accepted and
    unused."""

    def __init__(
        self,
        *,
        device: Device = None,
        dtype: torch.dtype | None = None,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        check_mesh_or_device(type(self).__name__, device_mesh, device)  # as layers with weights


class ReLU(_NoParameters):
    """``max(x, 0)``; ``inplace=True`` writes the result into the input.

    Example:
        >>> import dtorch
        >>> dtorch.nn.ReLU(inplace=True)
        ReLU(inplace=True)
    """

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class GELU(_NoParameters):
    """``x * Phi(x)``; ``approximate="tanh"`` uses torch's tanh approximation.

    Example:
        >>> import dtorch
        >>> dtorch.nn.GELU("tanh")
        GELU(approximate='tanh')
    """

    def __init__(self, approximate: str = "none", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate={approximate!r}; accepted: 'none', 'tanh'")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(_NoParameters):
    """``x * sigmoid(x)``; ``inplace=True`` writes the result into the input."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        out = silu(input)
        return input.copy_(out) if self.inplace else out

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class Sigmoid(_NoParameters):
    """``1 / (1 + exp(-x))``."""

    def forward(self, input: Tensor) -> Tensor:
        return sigmoid(input)


class Tanh(_NoParameters):
    """``tanh(x)``."""

    def forward(self, input: Tensor) -> Tensor:
        return tanh(input)


class Softmax(_NoParameters):
    """``exp(x) / sum(exp(x), dim)`` along ``dim``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.Softmax(dim=1)(dtorch.zeros(1, 2)).tolist()
        [[0.5, 0.5]]
    """

    def __init__(self, dim: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        # torch's frames: the warning of an implicit dim names the line that called the module
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


__all__ = ["GELU", "ReLU", "SiLU", "Sigmoid", "Softmax", "Tanh"]
