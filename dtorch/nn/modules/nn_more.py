"""More layers of torch.nn: ``PReLU``, ``InstanceNorm1d``, ``InstanceNorm2d``, ``Dropout1d``,
``Dropout2d``, ``Dropout3d``, ``PairwiseDistance``, ``ConvTranspose1d`` and
``ConvTranspose2d`` (the layers without parameters that move values are in
``nn_more_spatial``).

torch.nn's constructors (``device=`` and ``dtype=`` among them) plus ``device_mesh=``, each
calling its ``dtorch.nn.functional`` operator (``dtorch.api.ops.nn_more``,
``nn_more_losses``, ``conv_transpose``: their placements). Parameters and buffers have
torch's names, shapes and initial values, Replicate on every mesh dim of the layer's mesh
(``device_mesh=``, or ``device=``, or the default graph's default mesh), so a torch layer's
``state_dict`` loads; ``PReLU``'s weight is ``init`` everywhere, the transposed convolutions
draw theirs as torch does (kaiming-uniform, from torch's default generator).

Example:
    >>> import torch, dtorch
    >>> ref = torch.nn.ConvTranspose2d(2, 3, 3, stride=2)
    >>> m = dtorch.nn.ConvTranspose2d(2, 3, 3, stride=2)
    >>> m.load_state_dict(ref.state_dict())
    <All keys matched successfully>
    >>> x = torch.randn(1, 2, 4, 4)
    >>> torch.allclose(m(dtorch.from_torch(x)).to_torch(), ref(x), atol=1e-5)
    True
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from dtorch.api.creation import empty, full
from dtorch.api.ops.conv import int_pair
from dtorch.api.ops.conv_transpose import conv_transpose1d, conv_transpose2d
from dtorch.api.ops.nn_more import (
    dropout1d,
    dropout2d,
    dropout3d,
    instance_norm,
    prelu,
)
from dtorch.api.ops.nn_more_losses import pairwise_distance
from dtorch.api.ops.spatial_1d import int_one
from dtorch.api.ops.volumetric import int_triple
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Replicate
from dtorch.nn.modules.conv import check_groups, index_ints
from dtorch.nn.modules.dropout import Dropout
from dtorch.nn.modules.linear import (
    Device,
    check_features,
    check_float,
    placement_keywords,
    resolve_mesh,
    uniform_,
)
from dtorch.nn.modules.module import Module
from dtorch.nn.modules.normalization import _BatchNorm
from dtorch.nn.parameter import Parameter


class PReLU(Module):
    """``prelu`` with a learnable ``weight`` of ``num_parameters`` slopes (1, or one per
    channel), each ``init`` at first.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.PReLU()
        >>> m(dtorch.tensor([-4.0, 1.0])).tolist(), m
        ([-1.0, 1.0], PReLU(num_parameters=1))
    """

    def __init__(
        self,
        num_parameters: int = 1,
        init: float = 0.25,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        (num_parameters,) = check_features("PReLU", num_parameters=num_parameters)
        dtype = check_float("PReLU", dtype)
        mesh = resolve_mesh("PReLU", device_mesh, device)
        self.num_parameters, self.init = num_parameters, init
        placements = [Replicate()] * mesh.ndim
        slopes = full((num_parameters,), float(init), dtype=dtype, device_mesh=mesh,
                      placements=placements)  # fmt: skip
        self.weight = Parameter(slopes)

    def reset_parameters(self) -> None:
        """torch's: every slope ``init`` again."""
        self.weight.fill_(self.init)

    def forward(self, input: Tensor) -> Tensor:
        return prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class _InstanceNorm(_BatchNorm):
    """torch's instance normalisation: ``_BatchNorm``'s parameters, buffers and repr, with
    torch's defaults (``affine`` and ``track_running_stats`` False) and each (n, c) plane's
    own statistics; an unbatched input (one dim fewer) runs as a batch of one."""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        bias: bool = True,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype,
                         bias=bias, device_mesh=device_mesh)  # fmt: skip

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in self._RANKS:  # torch's message
            raise ValueError(f"expected {self._EXPECTED} input (got {input.ndim}D input)")
        unbatched = input.ndim == self._RANKS[0]
        feature_dim = 0 if unbatched else 1
        if input.shape[feature_dim] != self.num_features:
            _check_features(self, feature_dim, input.shape[feature_dim])
        x = input.unsqueeze(0) if unbatched else input
        out = instance_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0, self.eps,
        )  # fmt: skip
        return out.squeeze(0) if unbatched else out


def _check_features(layer: _InstanceNorm, dim: int, size: int) -> None:
    # torch's: refused with affine parameters, else a warning
    if layer.affine:
        raise ValueError(f"expected input's size at dim={dim} to match num_features "
                         f"({layer.num_features}), but got: {size}.")  # fmt: skip
    warnings.warn(
        f"input's size at dim={dim} does not match num_features. You can silence this warning "
        "by not passing in num_features, which is not used because affine=False",
        stacklevel=3,
    )


class InstanceNorm1d(_InstanceNorm):
    """torch.nn.InstanceNorm1d over (N, C, L) or (C, L).

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.InstanceNorm1d(1, eps=0.0)
        >>> m(dtorch.tensor([[[1.0, 3.0]]])).tolist()
        [[[-1.0, 1.0]]]
    """

    _RANKS, _EXPECTED = (2, 3), "2D or 3D"


class InstanceNorm2d(_InstanceNorm):
    """torch.nn.InstanceNorm2d over (N, C, H, W) or (C, H, W).

    Example:
        >>> import torch, dtorch
        >>> ref = torch.nn.InstanceNorm2d(2, affine=True, track_running_stats=True)
        >>> m = dtorch.nn.InstanceNorm2d(2, affine=True, track_running_stats=True)
        >>> m.load_state_dict(ref.state_dict())
        <All keys matched successfully>
        >>> x = torch.randn(3, 2, 4, 4)
        >>> torch.allclose(m(dtorch.from_torch(x)).to_torch(), ref(x), atol=1e-5)
        True
    """

    _RANKS, _EXPECTED = (3, 4), "3D or 4D"


class Dropout1d(Dropout):
    """``dropout1d``: whole channels zeroed in training mode (torch's draws).

    Example:
        >>> import dtorch
        >>> dtorch.nn.Dropout1d(1.0)(dtorch.ones(2, 3)).tolist(), dtorch.nn.Dropout1d()
        ([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], Dropout1d(p=0.5, inplace=False))
    """

    def forward(self, input: Tensor) -> Tensor:
        return dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    """``dropout2d``: whole channels zeroed in training mode (torch's draws).

    Example:
        >>> import dtorch
        >>> dtorch.nn.Dropout2d(0.3).eval()(dtorch.ones(1, 2, 2, 2)).sum().item()
        8.0
    """

    def forward(self, input: Tensor) -> Tensor:
        return dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(Dropout):
    """``dropout3d``: whole channels zeroed in training mode (torch's draws).

    Example:
        >>> import dtorch
        >>> dtorch.nn.Dropout3d(1.0)(dtorch.ones(1, 2, 1, 1, 1)).sum().item()
        0.0
    """

    def forward(self, input: Tensor) -> Tensor:
        return dropout3d(input, self.p, self.training, self.inplace)


@placement_keywords
class PairwiseDistance(Module):
    """``pairwise_distance`` with ``p``, ``eps`` and ``keepdim``.

    Example:
        >>> import dtorch
        >>> a, b = dtorch.tensor([[3.0, 4.0]]), dtorch.zeros(1, 2)
        >>> dtorch.nn.PairwiseDistance(eps=0.0)(a, b).tolist()
        [5.0]
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


# --- transposed convolutions --------------------------------------------------------------------
def _sizes(rank: int, layer: str, what: str, value: Any, low: int) -> tuple[int, ...]:
    """A layer's size argument as ``rank`` ints, each at least ``low`` (torch's ``_single``,
    ``_pair``, ``_triple``)."""
    value = index_ints(value)
    if rank == 1:
        return (int_one(layer, what, value, low=low),)
    return (int_pair if rank == 2 else int_triple)(layer, what, value, low=low)


class _ConvTransposeNd(Module):
    """What ConvTranspose1d and ConvTranspose2d share, as torch's ``_ConvTransposeNd``: the
    weight (in, out / groups, *kernel) and bias drawn as torch draws them, ``output_size`` in
    ``forward``, and the repr. A subclass sets its sizes (tuples), then calls ``_build``."""

    _function: Any
    _rank: int  # the spatial dims: 1, 2 or 3
    in_channels: int
    out_channels: int
    groups: int
    kernel_size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    output_padding: tuple[int, ...]
    dilation: tuple[int, ...]

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        name, rank = f"ConvTranspose{self._rank}d", self._rank
        self.kernel_size = _sizes(rank, name, "kernel_size", kernel_size, 1)
        self.stride = _sizes(rank, name, "stride", stride, 1)
        self.padding = _sizes(rank, name, "padding", padding, 0)
        self.output_padding = _sizes(rank, name, "output_padding", output_padding, 0)
        self.dilation = _sizes(rank, name, "dilation", dilation, 1)
        how = {"groups": groups, "bias": bias, "padding_mode": padding_mode, "device": device,
               "dtype": dtype, "device_mesh": device_mesh}  # fmt: skip
        self._build(name, (in_channels, out_channels), how)

    def _build(self, layer: str, sizes: tuple[Any, ...], how: dict[str, Any]) -> None:
        in_channels, out_channels, groups = check_features(
            layer, in_channels=sizes[0], out_channels=sizes[1], groups=how["groups"]
        )
        check_groups(layer, in_channels, out_channels, groups)
        if how["padding_mode"] != "zeros":  # torch's message
            raise ValueError(f'Only "zeros" padding mode is supported for {layer}')
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.padding_mode, self.transposed = "zeros", True
        dtype = check_float(layer, how["dtype"])
        mesh = resolve_mesh(layer, how["device_mesh"], how["device"])
        placements = [Replicate()] * mesh.ndim
        shape = (in_channels, out_channels // groups, *self.kernel_size)
        self.weight = Parameter(empty(shape, dtype=dtype, device_mesh=mesh, placements=placements))
        bias = empty(out_channels, dtype=dtype, device_mesh=mesh, placements=placements)
        self.register_parameter("bias", Parameter(bias) if how["bias"] else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and the bias again, as torch's transposed convolutions do (the
        fan-in is the weight's dim 1 times the kernel's size)."""
        fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
        gain = math.sqrt(2.0 / (1 + 5))  # kaiming_uniform_(a=sqrt(5)), computed as torch
        uniform_(self.weight, math.sqrt(3.0) * (gain / math.sqrt(fan_in)) if fan_in else 0.0)
        if self.bias is not None:
            uniform_(self.bias, 1 / math.sqrt(fan_in) if fan_in else 0.0)

    def forward(self, input: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        extra = self.output_padding
        if output_size is not None:
            extra = self._padding_for(input, output_size)
        fn = type(self)._function
        return fn(input, self.weight, self.bias, self.stride, self.padding, extra, self.groups,
                  self.dilation)  # fmt: skip

    def _padding_for(self, input: Tensor, output_size: Sequence[int]) -> tuple[int, ...]:
        """torch's ``_output_padding``: what ``output_size`` needs, checked against the sizes
        the layer can give."""
        n = len(self.kernel_size)
        lead = 2 if input.ndim == n + 2 else 1
        sizes = list(output_size)[lead:] if len(output_size) == n + lead else list(output_size)
        if len(sizes) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.ndim}D input, output_size must have "
                             f"{n} or {n + lead} elements (got {len(output_size)})")  # fmt: skip
        low = [(input.shape[d + lead] - 1) * self.stride[d] - 2 * self.padding[d]
               + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]  # fmt: skip
        high = [m + s - 1 for m, s in zip(low, self.stride, strict=True)]
        if any(not lo <= s <= hi for s, lo, hi in zip(sizes, low, high, strict=True)):
            raise ValueError(f"requested an output size of {sizes}, but valid sizes range from "
                             f"{low} to {high} (for an input of {input.shape[lead:]})")  # fmt: skip
        return tuple(s - lo for s, lo in zip(sizes, low, strict=True))

    def extra_repr(self) -> str:
        n = len(self.kernel_size)
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")  # fmt: skip
        for what, default in (("padding", 0), ("dilation", 1), ("output_padding", 0)):
            if getattr(self, what) != (default,) * n:
                text += f", {what}={getattr(self, what)}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        return text + (", bias=False" if self.bias is None else "")


class ConvTranspose2d(_ConvTransposeNd):
    """torch.nn.ConvTranspose2d: ``conv_transpose2d`` with a learnable weight and bias.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.ConvTranspose2d(2, 4, 3, stride=2, output_padding=1)
        >>> m(dtorch.ones(1, 2, 3, 3)).shape
        torch.Size([1, 4, 8, 8])
        >>> m
        ConvTranspose2d(2, 4, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))
    """

    _rank = 2
    _function = staticmethod(conv_transpose2d)


class ConvTranspose1d(_ConvTransposeNd):
    """torch.nn.ConvTranspose1d: ``conv_transpose1d`` with a learnable weight and bias.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.ConvTranspose1d(2, 4, 3, stride=2)
        >>> m(dtorch.ones(1, 2, 5)).shape, m.weight.shape
        (torch.Size([1, 4, 11]), torch.Size([2, 4, 3]))
    """

    _rank = 1
    _function = staticmethod(conv_transpose1d)


__all__ = [
    "ConvTranspose1d",
    "ConvTranspose2d",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "PReLU",
    "PairwiseDistance",
]
