"""Miscellaneous layers of torch.nn, each calling its ``dtorch.nn.functional`` form
(``dtorch.api.ops.nn_misc``, ``nn_misc_pool``: their placements) with torch's constructor
arguments and repr: ``Bilinear`` (weights drawn as torch draws them), ``CosineSimilarity``,
``Upsample``, ``UpsamplingNearest2d``, ``UpsamplingBilinear2d``, ``Softmax2d``,
``ChannelShuffle``, ``LocalResponseNorm``, ``LPPool1d``, ``LPPool2d``, ``LPPool3d``,
``MaxUnpool1d``, ``MaxUnpool2d``, ``MaxUnpool3d``, ``RReLU``, ``AlphaDropout``,
``FeatureAlphaDropout`` and ``SyncBatchNorm``.

``SyncBatchNorm`` is ``BatchNorm`` over inputs of any rank from 2: a dtorch tensor is one
tensor however its batch is sharded, so its training statistics are already those of the
full batch (summed across the mesh), which is what torch's SyncBatchNorm synchronises
processes for; ``process_group`` is accepted and unused.

Example:
    >>> import dtorch
    >>> dtorch.nn.ChannelShuffle(2)
    ChannelShuffle(groups=2)
"""

from __future__ import annotations

import math
from typing import Any

import torch

from dtorch.api.creation import empty
from dtorch.api.ops import nn_misc as fn
from dtorch.api.ops import nn_misc_pool as pool
from dtorch.api.ops.activations import softmax
from dtorch.api.ops.spatial import interpolate
from dtorch.api.ops.vector_norms import cosine_similarity
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Replicate
from dtorch.nn.modules.activation import _NoParameters
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


class Bilinear(Module):
    """``bilinear`` with a learnable ``weight`` (out, in1, in2) and ``bias`` (out), drawn
    uniform on ``[-1 / sqrt(in1), 1 / sqrt(in1)]`` from torch's generator, as torch's.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.Bilinear(2, 3, 4)
        >>> m(dtorch.ones(5, 2), dtorch.ones(5, 3)).shape
        torch.Size([5, 4])
    """

    def __init__(
        self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
        device: Device = None, dtype: torch.dtype | None = None, *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        sizes = check_features("Bilinear", in1_features=in1_features,
                               in2_features=in2_features, out_features=out_features)  # fmt: skip
        self.in1_features, self.in2_features, self.out_features = sizes
        dtype = check_float("Bilinear", dtype)
        mesh = resolve_mesh("Bilinear", device_mesh, device)
        placements = [Replicate()] * mesh.ndim
        shape = (self.out_features, self.in1_features, self.in2_features)
        self.weight = Parameter(empty(shape, dtype=dtype, device_mesh=mesh, placements=placements))
        if bias:
            value = empty(self.out_features, dtype=dtype, device_mesh=mesh, placements=placements)
            self.bias = Parameter(value)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and the bias again, as torch.nn.Bilinear does."""
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] > 0 else 0.0
        uniform_(self.weight, bound)
        if self.bias is not None:
            uniform_(self.bias, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return fn.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")  # fmt: skip


class CosineSimilarity(_NoParameters):
    """``cosine_similarity`` along ``dim``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.CosineSimilarity()(dtorch.ones(1, 2), dtorch.zeros(1, 2)).tolist()
        [0.0]
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return cosine_similarity(x1, x2, self.dim, self.eps)


@placement_keywords
class Upsample(Module):
    """``interpolate`` to ``size`` or by ``scale_factor`` in ``mode``.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.Upsample(scale_factor=2)
        >>> m(dtorch.ones(1, 1, 2)).shape, m
        (torch.Size([1, 1, 4]), Upsample(scale_factor=2.0, mode='nearest'))
    """

    def __init__(
        self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
        align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):  # torch's: floats, kept as given otherwise
            self.scale_factor: Any = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           recompute_scale_factor=self.recompute_scale_factor)  # fmt: skip

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return f"{info}, mode={self.mode!r}"


@placement_keywords
class UpsamplingNearest2d(Upsample):
    """``Upsample`` in ``"nearest"`` mode.

    Example:
        >>> import dtorch
        >>> dtorch.nn.UpsamplingNearest2d(scale_factor=2)(dtorch.ones(1, 1, 1, 1)).shape
        torch.Size([1, 1, 2, 2])
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


@placement_keywords
class UpsamplingBilinear2d(Upsample):
    """``Upsample`` in ``"bilinear"`` mode with ``align_corners=True``.

    Example:
        >>> import dtorch
        >>> up = dtorch.nn.UpsamplingBilinear2d((1, 3))
        >>> up(dtorch.tensor([[[[0.0, 2.0]]]])).flatten().tolist()
        [0.0, 1.0, 2.0]
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class Softmax2d(_NoParameters):
    """``softmax`` over the channels of a (N, C, H, W) or (C, H, W) input.

    Example:
        >>> import dtorch
        >>> dtorch.nn.Softmax2d()(dtorch.zeros(2, 1, 1)).flatten().tolist()
        [0.5, 0.5]
    """

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D "
                             f"instead")  # fmt: skip
        return softmax(input, -3)


@placement_keywords
class ChannelShuffle(Module):
    """``channel_shuffle`` in ``groups``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.ChannelShuffle(2)(dtorch.arange(4.0).view(1, 4, 1)).flatten().tolist()
        [0.0, 2.0, 1.0, 3.0]
    """

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return fn.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


@placement_keywords
class LocalResponseNorm(Module):
    """``local_response_norm`` over ``size`` neighbouring channels.

    Example:
        >>> import dtorch
        >>> dtorch.nn.LocalResponseNorm(2)
        LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1.0)
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return pool.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class _LPPoolNd(Module):
    """torch's ``_LPPoolNd``: the pool's arguments and repr."""

    def __init__(
        self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
    ) -> None:
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")  # fmt: skip


@placement_keywords
class LPPool1d(_LPPoolNd):
    """``lp_pool1d``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.LPPool1d(1, 2)(dtorch.tensor([[1.0, 2.0]])).tolist()
        [[3.0]]
    """

    def forward(self, input: Tensor) -> Tensor:
        return pool.lp_pool1d(input, self.norm_type, self.kernel_size, self.stride,
                              self.ceil_mode)  # fmt: skip


@placement_keywords
class LPPool2d(_LPPoolNd):
    """``lp_pool2d``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.LPPool2d(1, 2)(dtorch.ones(1, 2, 2)).tolist()
        [[[4.0]]]
    """

    def forward(self, input: Tensor) -> Tensor:
        return pool.lp_pool2d(input, self.norm_type, self.kernel_size, self.stride,
                              self.ceil_mode)  # fmt: skip


@placement_keywords
class LPPool3d(_LPPoolNd):
    """``lp_pool3d``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.LPPool3d(1, 2)(dtorch.ones(1, 2, 2, 2)).tolist()
        [[[[8.0]]]]
    """

    def forward(self, input: Tensor) -> Tensor:
        return pool.lp_pool3d(input, self.norm_type, self.kernel_size, self.stride,
                              self.ceil_mode)  # fmt: skip


def _ntuple(value: Any, n: int) -> tuple[Any, ...]:
    # torch's _single/_pair: a sequence kept, a number repeated
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class _MaxUnpoolNd(Module):
    """torch's ``_MaxUnpoolNd``: ``kernel_size``, ``stride`` (default the kernel) and
    ``padding`` as tuples of the layer's rank."""

    _N = 1

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, self._N)
        self.stride = _ntuple(stride if stride is not None else kernel_size, self._N)
        self.padding = _ntuple(padding, self._N)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


@placement_keywords
class MaxUnpool1d(_MaxUnpoolNd):
    """``max_unpool1d``: ``forward(input, indices, output_size=None)``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.MaxUnpool1d(2)(dtorch.tensor([[5.0]]), dtorch.tensor([[0]])).tolist()
        [[5.0, 0.0]]
    """

    def forward(self, input: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return pool.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding,
                                 output_size)  # fmt: skip


@placement_keywords
class MaxUnpool2d(_MaxUnpoolNd):
    """``max_unpool2d``: ``forward(input, indices, output_size=None)``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.MaxUnpool2d(2)
        MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))
    """

    _N = 2

    def forward(self, input: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return pool.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding,
                                 output_size)  # fmt: skip


@placement_keywords
class MaxUnpool3d(_MaxUnpoolNd):
    """``max_unpool3d``: ``forward(input, indices, output_size=None)``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.MaxUnpool3d(2)
        MaxUnpool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0))
    """

    _N = 3

    def forward(self, input: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return pool.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding,
                                 output_size)  # fmt: skip


@placement_keywords
class RReLU(Module):
    """``rrelu`` with ``lower``/``upper``: random slopes in training mode (waits for the
    input, torch's draws), the mean slope in eval mode.

    Example:
        >>> import dtorch
        >>> dtorch.nn.RReLU(0.5, 0.5)(dtorch.tensor([-2.0])).tolist()
        [-1.0]
    """

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Tensor) -> Tensor:
        return fn.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"lower={self.lower}, upper={self.upper}{inplace}"


class AlphaDropout(Dropout):
    """``alpha_dropout`` in training mode (torch's draws), the identity in eval mode.

    Example:
        >>> import dtorch
        >>> dtorch.nn.AlphaDropout(0.2).eval()(dtorch.ones(2)).tolist()
        [1.0, 1.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        # torch's module passes no ``inplace`` (it keeps the flag for its repr only)
        return fn.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(Dropout):
    """``feature_alpha_dropout`` in training mode, the identity in eval mode.

    Example:
        >>> import dtorch
        >>> dtorch.nn.FeatureAlphaDropout(0.0)(dtorch.ones(1, 2)).tolist()
        [[1.0, 1.0]]
    """

    def forward(self, input: Tensor) -> Tensor:
        return fn.feature_alpha_dropout(input, self.p, self.training)  # as torch: no inplace


class SyncBatchNorm(_BatchNorm):
    """torch.nn.SyncBatchNorm: ``BatchNorm`` over (N, C, *) (see the module docstring:
    dtorch's batch statistics are already the full batch's).

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.SyncBatchNorm(2)
        >>> m(dtorch.tensor([[1.0, 2.0], [3.0, 2.0]])).tolist()
        [[-0.9999949932098389, 0.0], [0.9999949932098389, 0.0]]
    """

    _RANKS, _EXPECTED = tuple(range(2, 65)), "at least 2D"

    def __init__(
        self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
        affine: bool = True, track_running_stats: bool = True, process_group: Any = None,
        device: Device = None, dtype: torch.dtype | None = None, *, bias: bool = True,
        device_mesh: DeviceMesh | None = None,
    ) -> None:  # fmt: skip
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias, device_mesh=device_mesh)  # fmt: skip
        self.process_group = process_group

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """torch's: every ``BatchNorm*d`` in ``module`` (or ``module`` itself) replaced by a
        ``SyncBatchNorm`` holding the same parameters, buffers and mode.

        Example:
            >>> import dtorch
            >>> net = dtorch.nn.Sequential(dtorch.nn.Linear(2, 2), dtorch.nn.BatchNorm1d(2))
            >>> type(dtorch.nn.SyncBatchNorm.convert_sync_batchnorm(net)[1]).__name__
            'SyncBatchNorm'
        """
        out = module
        if isinstance(module, _BatchNorm):
            out = _synced(cls, module, process_group)
        for name, child in module.named_children():
            synced = child  # a torch child has no batch norm (it holds no buffers)
            if isinstance(child, Module):
                synced = cls.convert_sync_batchnorm(child, process_group)
            out.add_module(name, synced)
        return out


def _synced(cls: type[SyncBatchNorm], module: _BatchNorm, process_group: Any) -> SyncBatchNorm:
    """A SyncBatchNorm on ``module``'s mesh sharing its parameters and buffers."""
    held = [*module.buffers(), *module.parameters()]
    mesh = held[0].device_mesh if held else None
    out = cls(module.num_features, module.eps, module.momentum, module.affine,
              module.track_running_stats, process_group, bias=module.bias is not None,
              device_mesh=mesh)  # fmt: skip
    if module.affine:
        out.weight, out.bias = module.weight, module.bias
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        setattr(out, name, getattr(module, name))
    out.training = module.training
    return out


__all__ = [
    "AlphaDropout",
    "Bilinear",
    "ChannelShuffle",
    "CosineSimilarity",
    "FeatureAlphaDropout",
    "LPPool1d",
    "LPPool2d",
    "LocalResponseNorm",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "RReLU",
    "Softmax2d",
    "SyncBatchNorm",
    "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
]
