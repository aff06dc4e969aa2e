"""Activation layers with a slope parameter: ``LeakyReLU`` and ``ELU`` (torch.nn's
constructors; the ``device=``/``device_mesh=`` (one of them at most) and ``dtype=`` every
dtorch layer takes are accepted and unused: they have no parameters). Elementwise: the output
keeps the input's shards.

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> nn.LeakyReLU(0.5)(dtorch.tensor([-2.0, 1.0])).tolist(), nn.ELU(alpha=2.0)
    ([-1.0, 1.0], ELU(alpha=2.0))
"""

from __future__ import annotations

import torch

from dtorch.api.ops.activations import elu, leaky_relu
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.nn.modules.activation import inplace_repr
from dtorch.nn.modules.linear import Device, check_mesh_or_device
from dtorch.nn.modules.module import Module


class LeakyReLU(Module):
    """``x`` where positive, else ``negative_slope * x``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.LeakyReLU(inplace=True)
        LeakyReLU(negative_slope=0.01, inplace=True)
    """

    def __init__(
        self,
        negative_slope: float = 0.01,
        inplace: bool = False,
        *,
        device: Device = None,
        dtype: torch.dtype | None = None,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        check_mesh_or_device(type(self).__name__, device_mesh, device)  # as layers with weights
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + inplace_repr(self.inplace, ", ")


class ELU(Module):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.ELU()(dtorch.tensor([0.0])).tolist()
        [0.0]
    """

    def __init__(
        self,
        alpha: float = 1.0,
        inplace: bool = False,
        *,
        device: Device = None,
        dtype: torch.dtype | None = None,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        check_mesh_or_device(type(self).__name__, device_mesh, device)  # as layers with weights
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        return elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + inplace_repr(self.inplace, ", ")


__all__ = ["ELU", "LeakyReLU"]
