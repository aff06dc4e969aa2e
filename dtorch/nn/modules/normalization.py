"""Normalisation layers: ``BatchNorm1d``, ``BatchNorm2d``, ``BatchNorm3d``, ``LayerNorm``,
``RMSNorm``, ``GroupNorm``.

torch.nn's constructors (``device=`` and ``dtype=`` among them) plus ``device_mesh=``; the
mesh is ``device_mesh=``, or ``device=`` (``"cpu"``, ``"cuda:1"``, a ``torch.device``: a
one-device mesh), not both, or the default graph's default mesh. The parameters (``weight``
ones, ``bias`` zeros) and the BatchNorms' buffers (``running_mean`` zeros, ``running_var`` ones,
``num_batches_tracked`` an int64 0) have torch's names, shapes and initial values, Replicate on
every mesh dim, so a torch layer's ``state_dict`` loads. The input keeps its placements where
the operator allows them (``dtorch.nn.functional``: a batch sharded on ``dp`` stays sharded;
the BatchNorms' training statistics are over the full batch however it is sharded; they differ
only in the input they take: (N, C) or (N, C, L), (N, C, H, W), (N, C, D, H, W)).

Example:
    >>> import torch, dtorch
    >>> ref = torch.nn.LayerNorm(4)
    >>> m = dtorch.nn.LayerNorm(4)
    >>> m.load_state_dict(ref.state_dict())
    <All keys matched successfully>
    >>> x = torch.randn(2, 4)
    >>> torch.allclose(m(dtorch.from_torch(x)).to_torch(), ref(x), atol=1e-6)
    True
    >>> dtorch.nn.BatchNorm2d(3, device="cpu:1").running_mean.device_mesh
    DeviceMesh('cpu', [1])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from dtorch.api.creation import ones, tensor, zeros
from dtorch.api.ops.norm import batch_norm, group_norm, layer_norm, normalized_dims, rms_norm
from dtorch.api.tensor import Tensor
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement, Replicate
from dtorch.nn.modules.linear import Device, check_features, check_float, resolve_mesh
from dtorch.nn.modules.module import Module
from dtorch.nn.parameter import Parameter


def _filled(
    value: float, shape: tuple[int, ...], mesh: DeviceMesh, dtype: torch.dtype | None
) -> Tensor:
    # a Replicate tensor of ones or zeros on the layer's mesh
    placements: list[Placement] = [Replicate()] * mesh.ndim
    make = ones if value == 1 else zeros
    return make(shape, dtype=dtype, device_mesh=mesh, placements=placements)


def _affine(
    layer: Module,
    affine: bool,
    bias: bool,
    shape: tuple[int, ...],
    mesh: DeviceMesh,
    dtype: torch.dtype | None,
) -> None:
    """torch's ``weight`` (ones) and ``bias`` (zeros) parameters, or None where absent."""
    weight = Parameter(_filled(1, shape, mesh, dtype)) if affine else None
    layer.register_parameter("weight", weight)
    with_bias = affine and bias
    layer.register_parameter(
        "bias", Parameter(_filled(0, shape, mesh, dtype)) if with_bias else None
    )


def _ones_zeros(layer: Module) -> None:
    """torch's ``init.ones_(weight)`` and ``init.zeros_(bias)`` (a bias that is None stays)."""
    layer.weight.fill_(1)
    if layer.bias is not None:
        layer.bias.zero_()


class _BatchNorm(Module):
    """torch's batch normalisation over (N, C, *): batch statistics in training mode
    (updating the running ones, ``momentum=None`` a cumulative average as torch), the running
    ones in eval mode (or batch statistics when ``track_running_stats=False``). A subclass
    names the input ranks it takes (``_RANKS``) and torch's words for them."""

    _RANKS: tuple[int, ...] = ()
    _EXPECTED = ""
    _version = 2  # torch's: num_batches_tracked is in the state since version 2

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        bias: bool = True,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        dtype = check_float(type(self).__name__, dtype)
        (num_features,) = check_features(type(self).__name__, num_features=num_features)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        mesh = resolve_mesh(type(self).__name__, device_mesh, device)
        shape = (num_features,)
        _affine(self, affine, bias, shape, mesh, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", _filled(0, shape, mesh, dtype))
            self.register_buffer("running_var", _filled(1, shape, mesh, dtype))
            counter = tensor(0, dtype=torch.int64, device_mesh=mesh)
            self.register_buffer("num_batches_tracked", counter)
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        """torch's: running mean 0, running variance 1, ``num_batches_tracked`` 0 (when the
        layer tracks running statistics), in place.

        Example:
            >>> import dtorch
            >>> m = dtorch.nn.BatchNorm2d(2)
            >>> _ = m.running_var.fill_(5.0)
            >>> m.reset_running_stats(); m.running_var.tolist()
            [1.0, 1.0]
        """
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """torch's: ``reset_running_stats``, then weight 1 and bias 0 (when affine)."""
        self.reset_running_stats()
        if self.affine:
            _ones_zeros(self)

    def _load_from_state_dict(
        self,
        state_dict: Any,
        prefix: str,
        local_metadata: Mapping[str, Any],
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        """torch's upgrade of a checkpoint older than its layout version 2 (or without
        torch's ``_metadata``): a missing ``num_batches_tracked`` keeps the layer's own."""
        key, version = prefix + "num_batches_tracked", local_metadata.get("version")
        if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
            own = self.num_batches_tracked
            state_dict[key] = torch.tensor(0, dtype=torch.long) if own is None else own
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in self._RANKS:  # torch's message
            raise ValueError(
                f"{type(self).__name__}: expected {self._EXPECTED} input (got {input.ndim}D input)"
            )
        factor: float | Tensor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.copy_(self.num_batches_tracked + 1)
            if self.momentum is None:  # a cumulative moving average, as torch; on the
                factor = self.num_batches_tracked.double().reciprocal()  # devices: traceable
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        mean = self.running_mean if track else None
        var = self.running_var if track else None
        return batch_norm(input, mean, var, self.weight, self.bias, use_batch, factor, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """torch.nn.BatchNorm1d over (N, C) or (N, C, L) (statistics over N, and L).

    Example:
        >>> import torch, dtorch
        >>> ref = torch.nn.BatchNorm1d(3, momentum=None)
        >>> m = dtorch.nn.BatchNorm1d(3, momentum=None)
        >>> m.load_state_dict(ref.state_dict())
        <All keys matched successfully>
        >>> x = torch.randn(4, 3, 5)
        >>> torch.allclose(m(dtorch.from_torch(x)).to_torch(), ref(x), atol=1e-6)
        True
        >>> torch.allclose(m.running_var.to_torch(), ref.running_var)
        True
    """

    _RANKS, _EXPECTED = (2, 3), "2D or 3D"


class BatchNorm2d(_BatchNorm):
    """torch.nn.BatchNorm2d over (N, C, H, W).

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.BatchNorm2d(3)
        >>> m
        BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
        >>> [name for name, _ in m.named_buffers()]
        ['running_mean', 'running_var', 'num_batches_tracked']
    """

    _RANKS, _EXPECTED = (4,), "4D"


class BatchNorm3d(_BatchNorm):
    """torch.nn.BatchNorm3d over (N, C, D, H, W).

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.BatchNorm3d(2, affine=False).eval()
        >>> m(dtorch.ones(1, 2, 1, 1, 3)).shape
        torch.Size([1, 2, 1, 1, 3])
    """

    _RANKS, _EXPECTED = (5,), "5D"


class LayerNorm(Module):
    """torch.nn.LayerNorm over the trailing ``normalized_shape`` dims.

    Example:
        >>> import dtorch
        >>> dtorch.nn.LayerNorm([2, 3], bias=False)
        LayerNorm((2, 3), eps=1e-05, elementwise_affine=True, bias=False)
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        dtype = check_float(type(self).__name__, dtype)
        self.normalized_shape = normalized_dims(type(self).__name__, normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        mesh = resolve_mesh(type(self).__name__, device_mesh, device)
        _affine(self, elementwise_affine, bias, self.normalized_shape, mesh, dtype)

    def reset_parameters(self) -> None:
        """torch's: weight 1 and bias 0 (when ``elementwise_affine``), in place."""
        if self.elementwise_affine:
            _ones_zeros(self)

    def forward(self, input: Tensor) -> Tensor:
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


class RMSNorm(Module):
    """torch.nn.RMSNorm; ``eps=None`` is torch's default (the input dtype's eps).

    Example:
        >>> import dtorch
        >>> dtorch.nn.RMSNorm(4)
        RMSNorm((4,), eps=None, elementwise_affine=True)
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        dtype = check_float(type(self).__name__, dtype)
        self.normalized_shape = normalized_dims(type(self).__name__, normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        mesh = resolve_mesh(
            type(self).__name__, device_mesh, device
        )  # checked with or without weight
        if elementwise_affine:
            self.weight = Parameter(_filled(1, self.normalized_shape, mesh, dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        """torch's: weight 1 (when ``elementwise_affine``), in place."""
        if self.elementwise_affine:
            self.weight.fill_(1)

    def forward(self, input: Tensor) -> Tensor:
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class GroupNorm(Module):
    """torch.nn.GroupNorm over (N, C, *) in ``num_groups`` groups of channels.

    Example:
        >>> import dtorch
        >>> dtorch.nn.GroupNorm(2, 4)
        GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        bias: bool = True,
        device_mesh: DeviceMesh | None = None,
    ) -> None:
        super().__init__()
        dtype = check_float(type(self).__name__, dtype)
        num_groups, num_channels = check_features(
            type(self).__name__, num_groups=num_groups, num_channels=num_channels
        )
        if num_groups <= 0 or num_channels % num_groups != 0:
            raise ValueError(
                f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                f"({num_groups})"
            )
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups, num_channels, eps, affine,
        )  # fmt: skip
        mesh = resolve_mesh(type(self).__name__, device_mesh, device)
        _affine(self, affine, bias, (num_channels,), mesh, dtype)

    def reset_parameters(self) -> None:
        """torch's: weight 1 and bias 0 (when affine), in place."""
        if self.affine:
            _ones_zeros(self)

    def forward(self, input: Tensor) -> Tensor:
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "LayerNorm", "RMSNorm"]
