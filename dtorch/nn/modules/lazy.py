"""Lazy layers: ``LazyLinear``, ``LazyConv1d/2d/3d``, ``LazyConvTranspose1d/2d/3d``,
``LazyBatchNorm1d/2d/3d``, ``LazyInstanceNorm1d/2d/3d``: torch.nn's layers whose input size
(``in_features``, ``in_channels``, ``num_features``) is read from the first input.

Each takes torch's constructor without that size (plus ``device_mesh=``). Until the first
call it holds no parameters (torch's hold uninitialized ones; ``has_uninitialized_params()``
is True); the first call reads the size from the input as torch does (the last dim for
``LazyLinear``, the channel dim - dim 1, or dim 0 of an unbatched input - for the
convolutions, dim 1 for the norms), builds the plain layer's parameters and buffers, drawn
from torch's default generator right then as torch draws them (so the same seed gives the
same weights), and the layer becomes the plain layer (``type(m)`` is then ``dtorch.nn.Linear``
and so on, as torch's ``cls_to_become``); its hooks and train/eval mode are kept. Placements
are the plain layer's. Not supported: loading a ``state_dict`` before the first call (torch
materializes from the checkpoint's shapes).

Example:
    >>> import dtorch
    >>> m = dtorch.nn.LazyLinear(3)
    >>> m.has_uninitialized_params(), list(m.parameters())
    (True, [])
    >>> m(dtorch.ones(2, 5)).shape, type(m).__name__, m.weight.shape
    (torch.Size([2, 3]), 'Linear', torch.Size([3, 5]))
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import torch

from dtorch.api.tensor import Tensor
from dtorch.errors import ShapeError
from dtorch.nn.modules.conv import Conv1d, Conv2d
from dtorch.nn.modules.linear import Linear
from dtorch.nn.modules.module import Module
from dtorch.nn.modules.nn_more import (
    ConvTranspose1d,
    ConvTranspose2d,
    InstanceNorm1d,
    InstanceNorm2d,
)
from dtorch.nn.modules.normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d
from dtorch.nn.modules.volumetric import Conv3d, ConvTranspose3d, InstanceNorm3d

#: What a plain Module keeps of its own (mode, hooks): the lazy layer's are kept as they are.
_BOOKKEEPING = frozenset(vars(Module())) - {
    "_parameters",
    "_buffers",
    "_non_persistent_buffers_set",
}
#: Arguments that are no attribute of the layer (``bias`` names the parameter, None until built).
_SETTINGS = ("device", "dtype", "device_mesh", "bias")


class _LazyModule(Module):
    """A layer whose first call builds ``cls_to_become`` with the input's size and becomes it.
    A subclass names the plain layer and how the size is read (``_size``)."""

    #: The plain layer: its constructor takes the size first, then the lazy one's arguments.
    cls_to_become: ClassVar[Callable[..., Module]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        plain = inspect.signature(self.cls_to_become.__init__)
        try:  # torch's TypeError for arguments its constructor does not take, now
            bound = plain.bind(self, 0, *args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{type(self).__name__}: {error}") from None
        self._lazy_args, self._lazy_kwargs = args, kwargs
        bound.apply_defaults()
        for name, value in list(bound.arguments.items())[1:]:
            if name not in _SETTINGS:  # torch's attributes (the size 0 until the first call)
                object.__setattr__(self, name, value)
        self.register_parameter("weight", None)
        self.register_parameter("bias", None)

    def _size(self, input: Tensor) -> int:
        raise NotImplementedError

    def has_uninitialized_params(self) -> bool:
        """True until the first call (torch's ``LazyModuleMixin`` method).

        Example:
            >>> import dtorch
            >>> dtorch.nn.LazyConv2d(4, 3).has_uninitialized_params()
            True
        """
        return True

    def initialize_parameters(self, input: Tensor) -> None:
        """Build the plain layer for ``input``'s size (drawing its weights) and become it.

        Example:
            >>> import dtorch
            >>> m = dtorch.nn.LazyBatchNorm1d()
            >>> m.initialize_parameters(dtorch.ones(2, 3))
            >>> type(m).__name__, m.num_features
            ('BatchNorm1d', 3)
        """
        plain = self.cls_to_become(self._size(input), *self._lazy_args, **self._lazy_kwargs)
        state = {k: v for k, v in vars(plain).items() if k not in _BOOKKEEPING}
        for name in ("_lazy_args", "_lazy_kwargs"):
            del self.__dict__[name]
        self.__dict__.update(state)
        object.__setattr__(self, "__class__", type(plain))

    def forward(self, input: Tensor, *args: Any, **kwargs: Any) -> Any:
        self.initialize_parameters(input)
        return self.forward(input, *args, **kwargs)  # the plain layer's, from now on

    def extra_repr(self) -> str:
        """The plain layer's text for a size of 0, as torch's lazy layer (an instance of the
        plain class, its parameters placeholders) prints; the empty stand-in draws nothing
        from the generator it leaves untouched."""
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # init's "zero-element tensor" warning
            plain = self.cls_to_become(0, *self._lazy_args, **self._lazy_kwargs)
        return plain.extra_repr()


def _channels(layer: _LazyModule, input: Tensor, spatial: int) -> int:
    """The channel count of a batched or unbatched input (torch's ``_get_in_channels``)."""
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ShapeError(
            f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input to "
            f"{type(layer).__name__}, but got input of size: {list(input.shape)}"
        )
    return input.shape[1] if input.ndim == spatial + 2 else input.shape[0]


def _batch_features(layer: _LazyModule, input: Tensor) -> int:
    # torch's lazy norms read dim 1 (an unbatched instance-norm input too)
    if input.ndim < 2:
        raise ShapeError(f"{type(layer).__name__}: needs an input of at least 2 dims, the "
                         f"features on dim 1; got {list(input.shape)}")  # fmt: skip
    return input.shape[1]


class LazyLinear(_LazyModule):
    """torch.nn.LazyLinear(out_features, bias=True): ``in_features`` is the first input's
    last dim.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyLinear(2, bias=False)
        >>> m(dtorch.ones(4)).shape, m
        (torch.Size([2]), Linear(in_features=4, out_features=2, bias=False))
    """

    cls_to_become = Linear

    def _size(self, input: Tensor) -> int:
        if input.ndim < 1:
            raise ShapeError("LazyLinear: needs an input of at least 1 dim; got a 0-d tensor")
        return input.shape[-1]


class _LazyConv(_LazyModule):
    _SPATIAL: ClassVar[int]

    def _size(self, input: Tensor) -> int:
        return _channels(self, input, self._SPATIAL)


class LazyConv1d(_LazyConv):
    """torch.nn.LazyConv1d(out_channels, kernel_size, ...): ``in_channels`` from the input.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyConv1d(4, 3)
        >>> m(dtorch.ones(1, 2, 5)).shape, m.weight.shape
        (torch.Size([1, 4, 3]), torch.Size([4, 2, 3]))
    """

    cls_to_become, _SPATIAL = Conv1d, 1


class LazyConv2d(_LazyConv):
    """torch.nn.LazyConv2d(out_channels, kernel_size, ...): ``in_channels`` from the input.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyConv2d(4, 3, padding=1)
        >>> m(dtorch.ones(2, 3, 3)).shape, m.in_channels
        (torch.Size([4, 3, 3]), 2)
    """

    cls_to_become, _SPATIAL = Conv2d, 2


class LazyConv3d(_LazyConv):
    """torch.nn.LazyConv3d(out_channels, kernel_size, ...): ``in_channels`` from the input.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyConv3d(4, 2)
        >>> m(dtorch.ones(1, 3, 2, 2, 2)).shape, type(m).__name__
        (torch.Size([1, 4, 1, 1, 1]), 'Conv3d')
    """

    cls_to_become, _SPATIAL = Conv3d, 3


class LazyConvTranspose1d(_LazyConv):
    """torch.nn.LazyConvTranspose1d(out_channels, kernel_size, ...): ``in_channels`` from
    the input.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyConvTranspose1d(4, 3, stride=2)
        >>> m(dtorch.ones(1, 2, 5)).shape, m.weight.shape
        (torch.Size([1, 4, 11]), torch.Size([2, 4, 3]))
    """

    cls_to_become, _SPATIAL = ConvTranspose1d, 1


class LazyConvTranspose2d(_LazyConv):
    """torch.nn.LazyConvTranspose2d(out_channels, kernel_size, ...): ``in_channels`` from
    the input.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyConvTranspose2d(4, 2, stride=2)
        >>> m(dtorch.ones(1, 3, 2, 2)).shape
        torch.Size([1, 4, 4, 4])
    """

    cls_to_become, _SPATIAL = ConvTranspose2d, 2


class LazyConvTranspose3d(_LazyConv):
    """torch.nn.LazyConvTranspose3d(out_channels, kernel_size, ...): ``in_channels`` from
    the input.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyConvTranspose3d(4, 2)
        >>> m(dtorch.ones(3, 1, 1, 1)).shape
        torch.Size([4, 2, 2, 2])
    """

    cls_to_become, _SPATIAL = ConvTranspose3d, 3


class _LazyNorm(_LazyModule):
    def _size(self, input: Tensor) -> int:
        return _batch_features(self, input)


class LazyBatchNorm1d(_LazyNorm):
    """torch.nn.LazyBatchNorm1d(eps=1e-5, momentum=0.1, affine=True, ...): ``num_features``
    is the first input's dim 1.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyBatchNorm1d()
        >>> m(dtorch.tensor([[1.0], [3.0]])).shape, m.running_mean.shape
        (torch.Size([2, 1]), torch.Size([1]))
    """

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNorm):
    """torch.nn.LazyBatchNorm2d: ``num_features`` is the first input's dim 1.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyBatchNorm2d(momentum=0.2)
        >>> _ = m(dtorch.ones(2, 3, 2, 2)); m
        BatchNorm2d(3, eps=1e-05, momentum=0.2, affine=True, bias=True, track_running_stats=True)
    """

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNorm):
    """torch.nn.LazyBatchNorm3d: ``num_features`` is the first input's dim 1.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyBatchNorm3d().eval()
        >>> m(dtorch.ones(1, 2, 1, 1, 2)).shape, m.training
        (torch.Size([1, 2, 1, 1, 2]), False)
    """

    cls_to_become = BatchNorm3d


class _LazyInstanceNorm(_LazyNorm):
    """torch's lazy instance norms default to ``affine`` and ``track_running_stats`` True
    (the plain ones to False)."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, *args: Any, **kwargs: Any) -> None:  # fmt: skip
        super().__init__(eps, momentum, affine, track_running_stats, *args, **kwargs)


class LazyInstanceNorm1d(_LazyInstanceNorm):
    """torch.nn.LazyInstanceNorm1d (torch's lazy defaults: ``affine`` and
    ``track_running_stats`` True): ``num_features`` is the first input's dim 1.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyInstanceNorm1d(eps=0.0)
        >>> m(dtorch.tensor([[[1.0, 3.0]]])).tolist(), m.weight.shape
        ([[[-1.0, 1.0]]], torch.Size([1]))
    """

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm):
    """torch.nn.LazyInstanceNorm2d (``affine`` and ``track_running_stats`` True by default).

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyInstanceNorm2d()
        >>> m(dtorch.ones(1, 3, 2, 2)).shape, m.running_var.shape
        (torch.Size([1, 3, 2, 2]), torch.Size([3]))
    """

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm):
    """torch.nn.LazyInstanceNorm3d (``affine`` and ``track_running_stats`` True by default).

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LazyInstanceNorm3d(affine=False)
        >>> m(dtorch.ones(1, 3, 2, 2, 2)).shape, m.weight
        (torch.Size([1, 3, 2, 2, 2]), None)
    """

    cls_to_become = InstanceNorm3d


__all__ = [
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
    "LazyLinear",
]
