"""Pooling layers: ``MaxPool2d``, ``AvgPool2d``, ``AdaptiveAvgPool2d``, ``GlobalAvgPool2d``,
and the 1-D ``MaxPool1d``, ``AvgPool1d``, ``AdaptiveAvgPool1d`` (over (N, C, L) or (C, L)).

Each is torch.nn's layer (same constructor, attributes and repr) calling
``dtorch.nn.functional``; ``GlobalAvgPool2d`` (dtorch's) averages every (H, W) plane into a
1 x 1 one, like ``AdaptiveAvgPool2d(1)``. They have no parameters, so the ``device=``,
``device_mesh=`` (one of them at most) and ``dtype=`` every dtorch layer takes are accepted
and change nothing: the output has the
input's mesh and dtype, and keeps its batch and channel shards (a Partial input stays Partial
for the average pools and is refused by max pooling; see ``dtorch.ir.rules.spatial``).

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> x = dtorch.arange(16.0).view(1, 1, 4, 4)
    >>> nn.MaxPool2d(2)(x).tolist(), nn.GlobalAvgPool2d()(x).item()
    ([[[[5.0, 7.0], [13.0, 15.0]]]], 7.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from dtorch.api.ops.conv import IntOrPair
from dtorch.api.ops.spatial import adaptive_avg_pool2d, avg_pool2d, global_avg_pool2d, max_pool2d
from dtorch.api.ops.spatial_1d import adaptive_avg_pool1d, avg_pool1d, max_pool1d
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.nn.modules.linear import Device, check_mesh_or_device
from dtorch.nn.modules.module import Module


class _Pool(Module):
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


class MaxPool2d(_Pool):
    """The maximum of every window; with ``return_indices`` also where it lies.

    Example:
        >>> import dtorch
        >>> dtorch.nn.MaxPool2d(3, stride=2, padding=1)
        MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)
    """

    def __init__(
        self,
        kernel_size: IntOrPair,
        stride: IntOrPair | None = None,
        padding: IntOrPair = 0,
        dilation: IntOrPair = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        return max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices)  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool2d(_Pool):
    """The mean of every window.

    Example:
        >>> import dtorch
        >>> dtorch.nn.AvgPool2d(2, count_include_pad=False)
        AvgPool2d(kernel_size=2, stride=2, padding=0)
    """

    def __init__(
        self,
        kernel_size: IntOrPair,
        stride: IntOrPair | None = None,
        padding: IntOrPair = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(_Pool):
    """The mean over windows that cut each plane into ``output_size`` (None keeps a size).

    Example:
        >>> import dtorch
        >>> dtorch.nn.AdaptiveAvgPool2d((None, 3))
        AdaptiveAvgPool2d(output_size=(None, 3))
    """

    def __init__(self, output_size: int | Sequence[int | None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class GlobalAvgPool2d(_Pool):
    """The mean of every (H, W) plane, kept as a 1 x 1 plane: ``(N, C, H, W) -> (N, C, 1, 1)``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.GlobalAvgPool2d()(dtorch.ones(2, 3, 4, 5)).shape
        torch.Size([2, 3, 1, 1])
    """

    def forward(self, input: Tensor) -> Tensor:
        return global_avg_pool2d(input)


class MaxPool1d(_Pool):
    """The maximum of every window along L; with ``return_indices`` also where it lies.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.MaxPool1d(2)
        >>> m, m(dtorch.tensor([[1.0, 3.0, 4.0, 2.0]])).tolist()
        (MaxPool1d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False), [[3.0, 4.0]])
    """

    def __init__(
        self,
        kernel_size: int | tuple[int],
        stride: int | tuple[int] | None = None,
        padding: int | tuple[int] = 0,
        dilation: int | tuple[int] = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kernel_size = kernel_size  # as given, as torch keeps them
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        return max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices)  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


def _single(value: Any) -> tuple[Any, ...]:
    # torch's ``_single``: a sequence as a tuple, anything else as a one-element tuple
    return tuple(value) if isinstance(value, Sequence) else (value,)


class AvgPool1d(_Pool):
    """The mean of every window along L (torch keeps the sizes as one-element tuples).

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.AvgPool1d(2, count_include_pad=False)
        >>> m, m(dtorch.tensor([[1.0, 3.0, 4.0, 2.0]])).tolist()
        (AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,)), [[2.0, 3.0]])
    """

    def __init__(
        self,
        kernel_size: int | tuple[int],
        stride: int | tuple[int] | None = None,
        padding: int | tuple[int] = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad)  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool1d(_Pool):
    """The mean over ``output_size`` windows that cut the length.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.AdaptiveAvgPool1d(2)
        >>> m, m(dtorch.arange(6.0).view(1, 6)).tolist()
        (AdaptiveAvgPool1d(output_size=2), [[1.0, 4.0]])
    """

    def __init__(self, output_size: int | tuple[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return adaptive_avg_pool1d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


__all__ = [
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AvgPool1d",
    "AvgPool2d",
    "GlobalAvgPool2d",
    "MaxPool1d",
    "MaxPool2d",
]
