"""The 3-D (volumetric) layers of torch.nn: ``Conv3d``, ``ConvTranspose3d``, ``MaxPool3d``,
``AvgPool3d``, ``AdaptiveAvgPool3d``, ``AdaptiveMaxPool3d``, ``InstanceNorm3d`` and the
padding layers ``ZeroPad3d``, ``ConstantPad3d``, ``ReflectionPad3d``, ``ReplicationPad3d``,
``CircularPad3d``, over (N, C, D, H, W) or (C, D, H, W).

Each has torch's constructor (plus ``device_mesh=``), attributes and repr, and calls its
``dtorch.nn.functional`` operator (``dtorch.api.ops.volumetric``: their placements, a sharded
batch kept, a sharded D, H or W refused; ``pad``'s for the padding layers). The convolutions'
weight and bias are Replicate on the layer's mesh, drawn as torch draws them (kaiming-uniform,
from torch's default generator), so a torch layer's ``state_dict`` loads and the same seed
gives the same weights; the layers without parameters accept ``device=``, ``device_mesh=``
and ``dtype=`` and change nothing.

Example:
    >>> import torch, dtorch
    >>> ref = torch.nn.Conv3d(2, 3, 3, padding=1)
    >>> m = dtorch.nn.Conv3d(2, 3, 3, padding=1)
    >>> m.load_state_dict(ref.state_dict())
    <All keys matched successfully>
    >>> x = torch.randn(1, 2, 4, 4, 4)
    >>> torch.allclose(m(dtorch.from_torch(x)).to_torch(), ref(x), atol=1e-5)
    True
"""

from __future__ import annotations

from typing import Any

import torch

from dtorch.api.ops.spatial import pad
from dtorch.api.ops.volumetric import (
    adaptive_avg_pool3d,
    adaptive_max_pool3d,
    avg_pool3d,
    conv3d,
    conv_transpose3d,
    int_triple,
    max_pool3d,
)
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.nn.modules.conv import _ConvNd, check_groups, checked_padding_mode, index_ints
from dtorch.nn.modules.linear import Device, check_features, check_float
from dtorch.nn.modules.nn_more import _ConvTransposeNd, _InstanceNorm
from dtorch.nn.modules.padding import _Pad
from dtorch.nn.modules.pooling import _Pool


def _padding(padding: Any, stride: tuple[int, ...]) -> str | tuple[int, int, int]:
    """``"same"``/``"valid"`` or a (D, H, W) triple, checked as torch checks them."""
    if not isinstance(padding, str):
        return int_triple("Conv3d", "padding", padding, low=0)
    if padding not in ("same", "valid"):
        raise ValueError(f"Conv3d: padding must be 'same', 'valid' or numbers, got {padding!r}")
    if padding == "same" and stride != (1, 1, 1):
        raise ValueError("Conv3d: padding='same' is not supported for strided convolutions")
    return padding


def _reversed_padding(padding: Any, kernel: tuple[int, ...], dilation: tuple[int, ...]) -> tuple:
    """``F.pad``'s (left, right, top, bottom, front, back) for a non-zeros ``padding_mode``
    (torch's ``_reversed_padding_repeated_twice``; ``same`` puts the odd one at the end)."""
    if padding == "valid":
        return (0,) * 6
    if isinstance(padding, tuple):
        pairs = [(p, p) for p in padding]
    else:
        totals = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        pairs = [(t // 2, t - t // 2) for t in totals]
    return tuple(v for pair in reversed(pairs) for v in pair)


class Conv3d(_ConvNd):
    """3-D convolution with learnable weight and bias; see the module docstring.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.Conv3d(4, 8, (1, 3, 3), groups=2, bias=False)
        >>> m.weight.shape
        torch.Size([8, 2, 1, 3, 3])
        >>> m
        Conv3d(4, 8, kernel_size=(1, 3, 3), stride=(1, 1, 1), groups=2, bias=False)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        name = "Conv3d"
        in_channels, out_channels = check_features(
            name, in_channels=in_channels, out_channels=out_channels
        )
        kernel_size, stride, padding, dilation, groups = map(
            index_ints, (kernel_size, stride, padding, dilation, groups)
        )
        dtype = check_float(name, dtype)
        check_groups(name, in_channels, out_channels, groups)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = int_triple(name, "kernel_size", kernel_size)
        self.stride = int_triple(name, "stride", stride)
        self.dilation = int_triple(name, "dilation", dilation)
        self.padding = _padding(padding, self.stride)
        self.padding_mode = checked_padding_mode(padding_mode, name)
        self.transposed, self.output_padding = False, (0, 0, 0)  # torch's _ConvNd attributes
        self._reversed_padding_repeated_twice = _reversed_padding(
            self.padding, self.kernel_size, self.dilation
        )
        self._make_parameters(name, bias, dtype, device_mesh, device)

    _function = staticmethod(conv3d)


class ConvTranspose3d(_ConvTransposeNd):
    """torch.nn.ConvTranspose3d: ``conv_transpose3d`` with a learnable weight and bias.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.ConvTranspose3d(2, 4, 3, stride=2, output_padding=1)
        >>> m(dtorch.ones(1, 2, 2, 3, 3)).shape
        torch.Size([1, 4, 6, 8, 8])
        >>> m
        ConvTranspose3d(2, 4, kernel_size=(3, 3, 3), stride=(2, 2, 2), output_padding=(1, 1, 1))
    """

    _rank = 3
    _function = staticmethod(conv_transpose3d)


class MaxPool3d(_Pool):
    """The maximum of every window; with ``return_indices`` also where it lies.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.MaxPool3d(2)
        >>> m, m(dtorch.arange(8.0).view(1, 2, 2, 2)).item()
        (MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False), 7.0)
    """

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor) -> Any:
        return max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices)  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool3d(_Pool):
    """The mean of every window.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.AvgPool3d(2)
        >>> m, m(dtorch.arange(8.0).view(1, 2, 2, 2)).item()
        (AvgPool3d(kernel_size=2, stride=2, padding=0), 3.5)
    """

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
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
        return avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool3d(_Pool):
    """The mean over windows that cut each volume into ``output_size`` (None keeps a size).

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.AdaptiveAvgPool3d((1, None, 1))
        >>> m, m(dtorch.arange(8.0).view(1, 2, 2, 2)).flatten().tolist()
        (AdaptiveAvgPool3d(output_size=(1, None, 1)), [2.5, 4.5])
    """

    def __init__(self, output_size: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return adaptive_avg_pool3d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool3d(_Pool):
    """``adaptive_max_pool3d`` to ``output_size`` (with ``return_indices``, the indices too).

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.AdaptiveMaxPool3d(1)
        >>> m, m(dtorch.arange(8.0).view(1, 2, 2, 2)).item()
        (AdaptiveMaxPool3d(output_size=1), 7.0)
    """

    def __init__(self, output_size: Any, return_indices: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Tensor) -> Any:
        return adaptive_max_pool3d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class InstanceNorm3d(_InstanceNorm):
    """torch.nn.InstanceNorm3d over (N, C, D, H, W) or (C, D, H, W).

    Example:
        >>> import torch, dtorch
        >>> ref = torch.nn.InstanceNorm3d(2, affine=True, track_running_stats=True)
        >>> m = dtorch.nn.InstanceNorm3d(2, affine=True, track_running_stats=True)
        >>> m.load_state_dict(ref.state_dict())
        <All keys matched successfully>
        >>> x = torch.randn(3, 2, 2, 3, 3)
        >>> torch.allclose(m(dtorch.from_torch(x)).to_torch(), ref(x), atol=1e-5)
        True
    """

    _RANKS, _EXPECTED = (4, 5), "4D or 5D"


# --- padding ------------------------------------------------------------------------------------
class ConstantPad3d(_Pad):
    """Pads the last three dims with ``value``.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.ConstantPad3d((1, 0, 0, 0, 0, 0), 2.0)
        >>> m, m(dtorch.zeros(1, 1, 1, 1)).flatten().tolist()
        (ConstantPad3d(padding=(1, 0, 0, 0, 0, 0), value=2.0), [2.0, 0.0])
    """

    _SIDES = 6

    def __init__(self, padding: Any, value: float, **kwargs: Any) -> None:
        super().__init__(padding, **kwargs)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ZeroPad3d(_Pad):
    """Pads the last three dims with zeros.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.ZeroPad3d((0, 1, 0, 0, 0, 0))
        >>> m, m(dtorch.ones(1, 1, 1, 1)).flatten().tolist()
        (ZeroPad3d((0, 1, 0, 0, 0, 0)), [1.0, 0.0])
    """

    _SIDES = 6
    value = 0.0  # torch's attribute


class ReflectionPad3d(_Pad):
    """Pads the last three dims with their reflection.

    Example:
        >>> import dtorch
        >>> dtorch.nn.ReflectionPad3d(1)(dtorch.ones(1, 2, 2, 2)).shape
        torch.Size([1, 4, 4, 4])
    """

    _MODE, _SIDES = "reflect", 6


class ReplicationPad3d(_Pad):
    """Pads the last three dims with copies of their edge values.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.ReplicationPad3d((1, 0, 0, 0, 0, 0))
        >>> m(dtorch.tensor([[[[1.0, 2.0]]]])).flatten().tolist()
        [1.0, 1.0, 2.0]
    """

    _MODE, _SIDES = "replicate", 6


class CircularPad3d(_Pad):
    """Pads the last three dims with their values from the other end (wrapped around).

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.CircularPad3d((1, 0, 0, 0, 0, 0))
        >>> m, m(dtorch.tensor([[[[1.0, 2.0]]]])).flatten().tolist()
        (CircularPad3d((1, 0, 0, 0, 0, 0)), [2.0, 1.0, 2.0])
    """

    _MODE, _SIDES = "circular", 6


__all__ = [
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool3d",
    "AvgPool3d",
    "CircularPad3d",
    "ConstantPad3d",
    "Conv3d",
    "ConvTranspose3d",
    "InstanceNorm3d",
    "MaxPool3d",
    "ReflectionPad3d",
    "ReplicationPad3d",
    "ZeroPad3d",
]
