"""Activation layers: ``ReLU``, ``GELU``, ``SiLU``, ``Sigmoid``, ``Tanh``, ``Softmax``,
``LogSoftmax``, ``Hardtanh``, ``ReLU6``.

Each is torch.nn's layer calling ``dtorch.nn.functional``; they have no parameters, so the
``device=``, ``device_mesh=`` (one of them at most) and ``dtype=`` every dtorch layer takes
are accepted and change nothing (the
output has the input's mesh, placements and dtype, by the operator's placement rule: any
placement but Partial for the elementwise ones; Softmax and LogSoftmax need ``dim``
unsharded).

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> x = dtorch.tensor([-1.0, 0.0, 2.0])
    >>> nn.ReLU()(x).tolist(), nn.Softmax(dim=0)
    ([0.0, 0.0, 2.0], Softmax(dim=0))
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from dtorch.api.ops.elementwise import gelu, sigmoid, tanh
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.nn import functional as F
from dtorch.nn.modules.linear import Device, check_mesh_or_device
from dtorch.nn.modules.module import Module


def inplace_repr(inplace: bool, sep: str = "") -> str:
    # torch's layers name inplace only when it is set (after ``sep``, behind other fields)
    return f"{sep}inplace=True" if inplace else ""


class _NoParameters(Module):
    """A layer without parameters: ``device``/``device_mesh``/``dtype`` are accepted and
    unused."""

    def __init__(
        self,
        *args: Any,
        device: Device = None,
        dtype: torch.dtype | None = None,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        if args:  # Tanh(3): torch's message, naming the layer (not this base class)
            raise TypeError(
                f"{type(self).__name__}.__init__() takes 1 positional argument but "
                f"{len(args) + 1} were given"
            )
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
        return inplace_repr(self.inplace)


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
        return F.silu(input, self.inplace)

    def extra_repr(self) -> str:
        return inplace_repr(self.inplace)


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


class LogSoftmax(_NoParameters):
    """``log(softmax(x))`` along ``dim``, computed stably.

    Example:
        >>> import dtorch
        >>> dtorch.nn.LogSoftmax(dim=1)(dtorch.zeros(1, 1)).tolist()
        [[0.0]]
    """

    def __init__(self, dim: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Hardtanh(_NoParameters):
    """``x`` clamped to ``[min_val, max_val]``; ``inplace=True`` writes the result into the
    input. torch's deprecated ``min_value``/``max_value`` replace them, with its warning.

    Example:
        >>> import dtorch
        >>> layer = dtorch.nn.Hardtanh(-2.0, 2.0)
        >>> layer, layer(dtorch.tensor([-3.0, 1.0, 3.0])).tolist()
        (Hardtanh(min_val=-2.0, max_val=2.0), [-2.0, 1.0, 2.0])
    """

    def __init__(
        self,
        min_val: float = -1.0,
        max_val: float = 1.0,
        inplace: bool = False,
        min_value: float | None = None,
        max_value: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.min_val = _deprecated("min_value", "min_val", min_value, min_val)
        self.max_val = _deprecated("max_value", "max_val", max_value, max_val)
        self.inplace = inplace
        if self.max_val <= self.min_val:
            raise ValueError(
                f"Hardtanh: max_val ({self.max_val}) must be greater than min_val ({self.min_val})"
            )

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + inplace_repr(self.inplace, ", ")


def _deprecated(old: str, new: str, given: float | None, value: float) -> float:
    # torch's Hardtanh: the old keyword wins, with its warning
    if given is None:
        return value
    warnings.warn(
        f"keyword argument `{old}` is deprecated and renamed to `{new}`",
        FutureWarning,
        stacklevel=3,
    )
    return given


class ReLU6(_NoParameters):
    """``min(max(x, 0), 6)``; ``inplace=True`` writes the result into the input (torch's
    ``Hardtanh(0, 6)``: it has its ``min_val`` and ``max_val``).

    Example:
        >>> import dtorch
        >>> dtorch.nn.ReLU6()(dtorch.tensor([-1.0, 7.0])).tolist()
        [0.0, 6.0]
    """

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.min_val, self.max_val, self.inplace = 0.0, 6.0, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu6(input, self.inplace)

    def extra_repr(self) -> str:
        return inplace_repr(self.inplace)


__all__ = ["GELU", "Hardtanh", "LogSoftmax", "ReLU", "ReLU6", "SiLU", "Sigmoid", "Softmax", "Tanh"]
