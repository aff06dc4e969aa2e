"""Padding layers: ``ZeroPad1d/2d``, ``ConstantPad1d/2d``, ``ReflectionPad1d/2d``,
``ReplicationPad1d/2d``, ``CircularPad1d/2d``: torch.nn's layers on ``dtorch.nn.functional.pad``.

``padding`` is an int (every side) or torch's tuple, (left, right) for the 1-D layers and
(left, right, top, bottom) for the 2-D ones, kept as a tuple (``ZeroPad2d(1).padding`` is
``(1, 1, 1, 1)``, as torch's). They have no parameters: ``device=``, ``device_mesh=`` (one of
them at most) and ``dtype=`` are accepted and change nothing. Placements are ``pad``'s: a dim
that is padded must not be sharded, every other dim keeps its shard; Partial stays Partial
except under a nonzero constant fill (see ``dtorch.ir.rules.spatial``).

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> x = dtorch.tensor([[[1.0, 2.0, 3.0]]])
    >>> nn.ReflectionPad1d(2)(x).tolist(), nn.ConstantPad1d((1, 0), 9.0)(x).tolist()
    ([[[3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]]], [[[9.0, 1.0, 2.0, 3.0]]])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from dtorch.api.ops.spatial import pad
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.nn.modules.linear import Device, check_mesh_or_device
from dtorch.nn.modules.module import Module


def _sides(padding: int | Sequence[int], count: int) -> tuple[int, ...]:
    # torch's ``_pair``/``_quadruple``: an int on every side, a sequence as a tuple
    return tuple(padding) if isinstance(padding, Sequence) else (padding,) * count


class _Pad(Module):
    """``pad(input, padding, _MODE)`` with ``_SIDES`` numbers; torch's repr ``Name(padding)``."""

    _MODE = "constant"
    _SIDES = 2

    def __init__(
        self,
        padding: int | Sequence[int],
        *,
        device: Device = None,
        dtype: torch.dtype | None = None,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        check_mesh_or_device(type(self).__name__, device_mesh, device)  # as layers with weights
        self.padding = _sides(padding, self._SIDES)

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, self._MODE)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ConstantPad1d(_Pad):
    """Pads the last dim with ``value``.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.ConstantPad1d(1, 3.5)
        >>> m, m(dtorch.zeros(1, 2)).tolist()
        (ConstantPad1d(padding=(1, 1), value=3.5), [[3.5, 0.0, 0.0, 3.5]])
    """

    def __init__(self, padding: int | Sequence[int], value: float, **kwargs: Any) -> None:
        super().__init__(padding, **kwargs)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad2d(_Pad):
    """Pads the last two dims with ``value``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.ConstantPad2d((1, 0, 0, 1), -1.0)(dtorch.zeros(1, 1, 1)).tolist()
        [[[-1.0, 0.0], [-1.0, -1.0]]]
    """

    _SIDES = 4

    def __init__(self, padding: int | Sequence[int], value: float, **kwargs: Any) -> None:
        super().__init__(padding, **kwargs)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ZeroPad1d(_Pad):
    """Pads the last dim with zeros.

    Example:
        >>> import dtorch
        >>> dtorch.nn.ZeroPad1d((0, 2))(dtorch.ones(1, 1)).tolist()
        [[1.0, 0.0, 0.0]]
    """

    value = 0.0  # torch's attribute


class ZeroPad2d(_Pad):
    """Pads the last two dims with zeros.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.ZeroPad2d((1, 0, 0, 1))
        >>> m, m(dtorch.ones(1, 1, 1)).tolist()
        (ZeroPad2d((1, 0, 0, 1)), [[[0.0, 1.0], [0.0, 0.0]]])
    """

    _SIDES = 4
    value = 0.0


class ReflectionPad1d(_Pad):
    """Pads the last dim with its reflection (the edge value not repeated).

    Example:
        >>> import dtorch
        >>> dtorch.nn.ReflectionPad1d((1, 0))(dtorch.tensor([[1.0, 2.0]])).tolist()
        [[2.0, 1.0, 2.0]]
    """

    _MODE = "reflect"


class ReflectionPad2d(_Pad):
    """Pads the last two dims with their reflection.

    Example:
        >>> import dtorch
        >>> dtorch.nn.ReflectionPad2d(1)
        ReflectionPad2d((1, 1, 1, 1))
    """

    _MODE, _SIDES = "reflect", 4


class ReplicationPad1d(_Pad):
    """Pads the last dim with copies of its edge values.

    Example:
        >>> import dtorch
        >>> dtorch.nn.ReplicationPad1d((2, 1))(dtorch.tensor([[1.0, 2.0]])).tolist()
        [[1.0, 1.0, 1.0, 2.0, 2.0]]
    """

    _MODE = "replicate"


class ReplicationPad2d(_Pad):
    """Pads the last two dims with copies of their edge values.

    Example:
        >>> import dtorch
        >>> dtorch.nn.ReplicationPad2d((0, 1, 0, 0))(dtorch.tensor([[[1.0, 2.0]]])).tolist()
        [[[1.0, 2.0, 2.0]]]
    """

    _MODE, _SIDES = "replicate", 4


class CircularPad1d(_Pad):
    """Pads the last dim with its values from the other end (wrapped around).

    Example:
        >>> import dtorch
        >>> dtorch.nn.CircularPad1d(1)(dtorch.tensor([[1.0, 2.0, 3.0]])).tolist()
        [[3.0, 1.0, 2.0, 3.0, 1.0]]
    """

    _MODE = "circular"


class CircularPad2d(_Pad):
    """Pads the last two dims with their values from the other end (wrapped around).

    Example:
        >>> import dtorch
        >>> dtorch.nn.CircularPad2d(1)
        CircularPad2d((1, 1, 1, 1))
    """

    _MODE, _SIDES = "circular", 4


__all__ = [
    "CircularPad1d",
    "CircularPad2d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ZeroPad1d",
    "ZeroPad2d",
]
