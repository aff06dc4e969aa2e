"""``Conv2d`` and ``Conv1d``: torch.nn.Conv2d and torch.nn.Conv1d on a mesh.

``Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
bias=True, padding_mode="zeros", device=None, dtype=None, *, device_mesh=None)`` holds
``weight``
(out_channels, in_channels / groups, kH, kW) and ``bias`` (out_channels) Replicate on every
mesh dim, drawn as torch draws them (kaiming-uniform with ``a=sqrt(5)``, i.e. uniform on
``[-1/sqrt(fan_in), 1/sqrt(fan_in)]``, from torch's default generator), and torch's
attributes (``transposed`` False, ``output_padding`` (0, 0) among them). The input passes as
given: a batch sharded on a ``dp`` mesh dim stays sharded (see ``dtorch.ir.rules.conv`` for
every layout). ``padding_mode`` other than ``"zeros"`` pads first (``dtorch.nn.functional.
pad``) and convolves without padding, as torch does. The mesh: ``device_mesh=``, or
``device=`` (``"cpu"``, ``"cuda:1"``, a ``torch.device``: a one-device mesh), not both;
neither is the default graph's default mesh. ``Conv1d`` is the same layer over (N, C, L) with a
weight (out_channels, in_channels / groups, kL) and torch's one-element tuples
(``kernel_size=(3,)``); it calls ``dtorch.nn.functional.conv1d`` (conv2d's placements).

Example:
    >>> import torch, dtorch
    >>> ref = torch.nn.Conv2d(2, 3, 3, padding=1)
    >>> m = dtorch.nn.Conv2d(2, 3, 3, padding=1)
    >>> m.load_state_dict(ref.state_dict())
    <All keys matched successfully>
    >>> x = torch.randn(1, 2, 5, 5)
    >>> torch.allclose(m(dtorch.from_torch(x)).to_torch(), ref(x), atol=1e-6)
    True
    >>> m
    Conv2d(2, 3, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch

from dtorch.api.creation import empty
from dtorch.api.ops.conv import IntOrPair, conv2d, int_pair
from dtorch.api.ops.spatial import pad
from dtorch.api.ops.spatial_1d import conv1d, int_one
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Replicate
from dtorch.nn.modules.linear import (
    Device,
    check_features,
    check_float,
    resolve_mesh,
    uniform_,
)
from dtorch.nn.modules.module import Module
from dtorch.nn.parameter import Parameter

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """What Conv1d and Conv2d share, as torch's ``_ConvNd``: the weight and bias (built on the
    layer's mesh, drawn as torch draws them), the forward through a non-zeros padding mode,
    and the repr. A subclass sets its attributes, then calls ``_make_parameters``."""

    #: The functional convolution of the layer's rank (``conv1d``, ``conv2d``).
    _function: Any
    in_channels: int
    out_channels: int
    groups: int
    kernel_size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: str | tuple[int, ...]
    dilation: tuple[int, ...]
    padding_mode: str
    _reversed_padding_repeated_twice: tuple[int, ...]

    def _make_parameters(
        self,
        layer: str,
        bias: bool,
        dtype: torch.dtype | None,
        device_mesh: DeviceMesh | None,
        device: Device,
    ) -> None:
        """The weight and (if ``bias``) the bias, Replicate on the layer's mesh, drawn."""
        mesh = resolve_mesh(layer, device_mesh, device)
        placements = [Replicate()] * mesh.ndim
        shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        self.weight = Parameter(empty(shape, dtype=dtype, device_mesh=mesh, placements=placements))
        if bias:
            b = empty(self.out_channels, dtype=dtype, device_mesh=mesh, placements=placements)
            self.bias = Parameter(b)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and the bias again, as torch's convolutions do."""
        fan_in = (self.in_channels // self.groups) * math.prod(self.kernel_size)
        a = math.sqrt(5)  # kaiming_uniform_(a=sqrt(5)) with torch's leaky_relu gain, computed
        gain = math.sqrt(2.0 / (1 + a**2))  # as torch computes it (same bound to the last bit)
        uniform_(self.weight, math.sqrt(3.0) * (gain / math.sqrt(fan_in)) if fan_in else 0.0)
        if self.bias is not None:
            uniform_(self.bias, 1 / math.sqrt(fan_in) if fan_in else 0.0)

    def forward(self, input: Tensor) -> Tensor:
        conv = type(self)._function
        if self.padding_mode != "zeros":
            padded = pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(padded, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                    self.groups)  # fmt: skip

    def extra_repr(self) -> str:
        rank = len(self.kernel_size)
        text = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0,) * rank:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * rank:
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class Conv2d(_ConvNd):
    """2-D convolution with learnable weight and bias; see the module docstring.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.Conv2d(4, 8, 3, groups=4, bias=False, dtype=dtorch.float64)
        >>> m.weight.shape, m.weight.dtype, m.bias
        (torch.Size([8, 1, 3, 3]), torch.float64, None)
        >>> dtorch.nn.Conv2d(1, 2, 3, device="cpu:1").weight.device_mesh
        DeviceMesh('cpu', [1])
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrPair,
        stride: IntOrPair = 1,
        padding: str | IntOrPair = 0,
        dilation: IntOrPair = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        in_channels, out_channels = check_features(
            "Conv2d", in_channels=in_channels, out_channels=out_channels
        )
        kernel_size, stride, padding, dilation, groups = map(
            index_ints, (kernel_size, stride, padding, dilation, groups)
        )
        dtype = check_float("Conv2d", dtype)
        check_groups("Conv2d", in_channels, out_channels, groups)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = int_pair("Conv2d", "kernel_size", kernel_size)
        self.stride = int_pair("Conv2d", "stride", stride)
        self.dilation = int_pair("Conv2d", "dilation", dilation)
        self.padding = _padding(padding, self.stride)
        self.padding_mode = checked_padding_mode(padding_mode)
        self.transposed, self.output_padding = False, (0, 0)  # torch's _ConvNd attributes
        self._reversed_padding_repeated_twice = _reversed_padding(
            self.padding, self.kernel_size, self.dilation
        )
        self._make_parameters("Conv2d", bias, dtype, device_mesh, device)

    _function = staticmethod(conv2d)


def index_ints(value: Any) -> Any:
    """Sizes torch takes (a numpy int, or a tuple of them: ``operator.index``) as ints;
    anything else as given, for the checks to refuse."""
    if hasattr(value, "__index__"):
        return operator.index(value)
    if isinstance(value, (tuple, list)):
        return tuple(index_ints(v) for v in value)
    return value


def check_groups(layer: str, in_channels: int, out_channels: int, groups: int) -> None:
    # torch's messages, at construction
    if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
        raise ValueError(f"{layer}: groups must be a positive integer, got {groups!r}")
    if in_channels % groups or out_channels % groups:
        raise ValueError(
            f"{layer}: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
            f"divisible by groups ({groups})"
        )


def _padding(padding: str | IntOrPair, stride: tuple[int, int]) -> str | tuple[int, int]:
    """``"same"``/``"valid"`` or an (H, W) pair, checked as torch checks them."""
    if not isinstance(padding, str):
        return int_pair("Conv2d", "padding", padding, low=0)
    if padding not in ("same", "valid"):
        raise ValueError(f"Conv2d: padding must be 'same', 'valid' or numbers, got {padding!r}")
    if padding == "same" and stride != (1, 1):
        raise ValueError("Conv2d: padding='same' is not supported for strided convolutions")
    return padding


def checked_padding_mode(mode: str, layer: str = "Conv2d") -> str:
    # torch refuses other modes at construction
    if mode not in _PADDING_MODES:
        raise ValueError(f"{layer}: padding_mode must be one of {_PADDING_MODES}, got {mode!r}")
    return mode


def _reversed_padding(
    padding: str | tuple[int, int], kernel: tuple[int, int], dilation: tuple[int, int]
) -> tuple[int, int, int, int]:
    """``F.pad``'s (left, right, top, bottom) for a non-zeros ``padding_mode`` (torch's
    ``_reversed_padding_repeated_twice``; ``same`` puts the odd pixel on the right/bottom)."""
    if padding == "valid":
        return (0, 0, 0, 0)
    if isinstance(padding, tuple):
        return (padding[1], padding[1], padding[0], padding[0])
    totals = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
    (th, tw) = totals
    return (tw // 2, tw - tw // 2, th // 2, th - th // 2)


class Conv1d(_ConvNd):
    """1-D convolution with learnable weight and bias over (N, C, L) or (C, L); see the
    module docstring.

    Example:
        >>> import torch, dtorch
        >>> ref = torch.nn.Conv1d(2, 4, 3, stride=2, padding=1, padding_mode="reflect")
        >>> m = dtorch.nn.Conv1d(2, 4, 3, stride=2, padding=1, padding_mode="reflect")
        >>> m.load_state_dict(ref.state_dict())
        <All keys matched successfully>
        >>> x = torch.randn(3, 2, 7)
        >>> torch.allclose(m(dtorch.from_torch(x)).to_torch(), ref(x), atol=1e-6)
        True
        >>> m
        Conv1d(2, 4, kernel_size=(3,), stride=(2,), padding=(1,), padding_mode=reflect)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int],
        stride: int | tuple[int] = 1,
        padding: str | int | tuple[int] = 0,
        dilation: int | tuple[int] = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        in_channels, out_channels = check_features(
            "Conv1d", in_channels=in_channels, out_channels=out_channels
        )
        kernel_size, stride, padding, dilation, groups = map(
            index_ints, (kernel_size, stride, padding, dilation, groups)
        )
        dtype = check_float("Conv1d", dtype)
        check_groups("Conv1d", in_channels, out_channels, groups)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = (_single("kernel_size", kernel_size),)
        self.stride = (_single("stride", stride),)
        self.dilation = (_single("dilation", dilation),)
        self.padding = _padding_1d(padding, self.stride)
        self.padding_mode = checked_padding_mode(padding_mode, "Conv1d")
        self.transposed, self.output_padding = False, (0,)  # torch's _ConvNd attributes
        self._reversed_padding_repeated_twice = _reversed_padding_1d(
            self.padding, self.kernel_size, self.dilation
        )
        self._make_parameters("Conv1d", bias, dtype, device_mesh, device)

    _function = staticmethod(conv1d)


def _single(what: str, value: Any, low: int = 1) -> int:
    # a size of Conv1d (an int or a sequence of one), checked at construction
    return int_one("Conv1d", what, value, low)


def _padding_1d(padding: str | int | tuple[int], stride: tuple[int]) -> str | tuple[int]:
    """``"same"``/``"valid"`` or a one-element tuple, checked as torch checks them."""
    if not isinstance(padding, str):
        return (_single("padding", padding, low=0),)
    if padding not in ("same", "valid"):
        raise ValueError(f"Conv1d: padding must be 'same', 'valid' or numbers, got {padding!r}")
    if padding == "same" and stride != (1,):
        raise ValueError("Conv1d: padding='same' is not supported for strided convolutions")
    return padding


def _reversed_padding_1d(
    padding: str | tuple[int], kernel: tuple[int], dilation: tuple[int]
) -> tuple[int, int]:
    """``F.pad``'s (left, right) for a non-zeros ``padding_mode`` (``same`` puts the odd one
    on the right, as torch)."""
    if padding == "valid":
        return (0, 0)
    if isinstance(padding, tuple):
        return (padding[0], padding[0])
    total = dilation[0] * (kernel[0] - 1)
    return (total // 2, total - total // 2)


__all__ = ["Conv1d", "Conv2d"]
