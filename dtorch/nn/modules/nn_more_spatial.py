"""Layers of torch.nn without parameters that move or pick values: ``PixelShuffle``,
``PixelUnshuffle``, ``AdaptiveMaxPool1d``, ``AdaptiveMaxPool2d``, ``Unfold`` and ``Fold``,
each calling its ``dtorch.nn.functional`` operator (``dtorch.api.ops.nn_more``,
``conv_transpose``: their placements) with torch's constructor arguments and repr.

Example:
    >>> import dtorch
    >>> dtorch.nn.PixelShuffle(2)
    PixelShuffle(upscale_factor=2)
"""

from __future__ import annotations

from typing import Any

from dtorch.api.ops.conv_transpose import fold, unfold
from dtorch.api.ops.nn_more import (
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    pixel_shuffle,
    pixel_unshuffle,
)
from dtorch.api.tensor import Tensor
from dtorch.nn.modules.linear import placement_keywords
from dtorch.nn.modules.module import Module


@placement_keywords
class PixelShuffle(Module):
    """``pixel_shuffle`` by ``upscale_factor``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.PixelShuffle(2)(dtorch.ones(1, 4, 2, 2)).shape
        torch.Size([1, 1, 4, 4])
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


@placement_keywords
class PixelUnshuffle(Module):
    """``pixel_unshuffle`` by ``downscale_factor``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.PixelUnshuffle(2)(dtorch.ones(1, 1, 4, 4)).shape
        torch.Size([1, 4, 2, 2])
    """

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


@placement_keywords
class AdaptiveMaxPool2d(Module):
    """``adaptive_max_pool2d`` to ``output_size`` (with ``return_indices``, the indices too).

    Example:
        >>> import dtorch
        >>> dtorch.nn.AdaptiveMaxPool2d((1, None))(dtorch.arange(4.0).view(1, 2, 2)).tolist()
        [[[2.0, 3.0]]]
    """

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Tensor) -> Any:
        return adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


@placement_keywords
class AdaptiveMaxPool1d(Module):
    """``adaptive_max_pool1d`` to ``output_size`` (with ``return_indices``, the indices too).

    Example:
        >>> import dtorch
        >>> dtorch.nn.AdaptiveMaxPool1d(2)(dtorch.arange(4.0).view(1, 4)).tolist()
        [[1.0, 3.0]]
    """

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Tensor) -> Any:
        return adaptive_max_pool1d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


@placement_keywords
class Unfold(Module):
    """``unfold`` (im2col) with ``kernel_size``, ``dilation``, ``padding`` and ``stride``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.Unfold(2)(dtorch.ones(1, 3, 4, 4)).shape
        torch.Size([1, 12, 9])
    """

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")  # fmt: skip


@placement_keywords
class Fold(Module):
    """``fold`` (col2im) to ``output_size`` with ``kernel_size``, ``dilation``, ``padding``
    and ``stride``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.Fold(3, 2)(dtorch.ones(1, 4, 4)).sum().item()
        16.0
    """

    def __init__(
        self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
        stride: Any = 1,
    ) -> None:  # fmt: skip
        super().__init__()
        self.output_size, self.kernel_size, self.dilation = output_size, kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                    self.stride)  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
            f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}"
        )


__all__ = [
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "Fold",
    "PixelShuffle",
    "PixelUnshuffle",
    "Unfold",
]
