"""``Module``'s conversions: ``to``, ``to_empty``, ``type``, ``cpu``/``cuda`` and the dtype
casts, as torch has them; each rebinds every parameter and buffer in place (``Tensor.data``),
so a parameter keeps its identity and the attributes a program set on it. ``Module`` takes
these functions as its methods (``Module.to is conversion.to``); they call each other through
the module (``module._apply``, ``module.to``), so a subclass's override of one is used.

Example:
    >>> import torch, dtorch
    >>> layer = dtorch.nn.Linear(2, 2)
    >>> weight = layer.weight
    >>> layer.double().weight is weight, weight.dtype
    (True, torch.float64)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.creation import empty_like
from dtorch.api.ops.convert import cuda_device
from dtorch.api.tensor import Tensor
from dtorch.nn.parameter import Parameter

if TYPE_CHECKING:
    from dtorch.nn.modules.module import Module


def _rebind(tensor: Tensor, fn: Callable[[Tensor], Tensor]) -> None:
    converted = fn(tensor)
    if converted is not tensor:
        tensor.data = converted


def _check_memory_format(memory_format: Any) -> None:
    """``Module.to``'s ``memory_format``: dtorch lays values out row-major (it keeps no
    channels-last layout), so only the formats that ask for none are accepted."""
    if memory_format in (None, torch.preserve_format, torch.contiguous_format):
        return
    raise ValueError(
        f"to: memory_format={memory_format} is not supported: dtorch keeps no channels-last "
        "layout; accepted: torch.preserve_format, torch.contiguous_format"
    )


def apply_to_tensors(
    module: Module, fn: Callable[[Tensor], Tensor], recurse: bool = True
) -> Module:
    """Rebind every parameter (and a ``grad`` set on it, as torch) and buffer to ``fn``
    of it, in place (identity, and the attributes a program set, kept); those of this
    module only without ``recurse``."""
    for each in module.modules() if recurse else (module,):
        if isinstance(each, torch.nn.Module):  # a torch child holds no tensors (Module._modules)
            continue
        for store in (each._parameters, each._buffers):
            for tensor in store.values():
                if tensor is not None:
                    _rebind(tensor, fn)
                    if isinstance(tensor, Parameter) and tensor.grad is not None:
                        _rebind(tensor.grad, fn)
    return module


def to(module: Module, *args: Any, **kwargs: Any) -> Module:
    """``to(mesh_or_device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)`` as
    ``Tensor.to``; a dtype converts the floating-point tensors only (torch's rule).
    ``memory_format=``: dtorch values have no strides, so torch's preserve and contiguous
    formats change nothing and ``channels_last`` is refused."""
    _check_memory_format(kwargs.pop("memory_format", None))
    target, dtype = Tensor.parser_tensor_to_function_arg(args, kwargs)
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        raise TypeError(
            f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
            f"dtype={dtype}"
        )

    def convert(t: Tensor) -> Tensor:
        moved = t if target is None else t.to(target)
        return moved.to(dtype) if dtype is not None and t.is_floating_point() else moved

    return module._apply(convert)


def to_empty(module: Module, *, device: Any, recurse: bool = True) -> Module:
    """torch's ``to_empty``: every parameter and buffer (of this module only, without
    ``recurse``) becomes an uninitialised tensor of its shape and dtype on ``device`` (a
    device or a mesh, as ``to``), its placements kept on the same mesh or one of its
    shape; no value is copied. Fill them next (``load_state_dict``, ``nn.init``).

    Example:
        >>> from dtorch import nn
        >>> layer = nn.Linear(2, 3).to_empty(device="cpu")
        >>> layer.weight.shape, layer.weight.device_mesh
        (torch.Size([3, 2]), DeviceMesh('cpu', [0]))
    """
    target, _ = Tensor.parser_tensor_to_function_arg((device,), {})
    return module._apply(lambda t: empty_like(t).to(target), recurse)


def to_type(module: Module, dst_type: Any) -> Module:
    """torch's: every parameter and buffer as ``dst_type`` (a dtype or a type name, see
    ``Tensor.type``), floating point or not.

    Example:
        >>> import torch, dtorch
        >>> dtorch.nn.Linear(2, 2).type(torch.float64).weight.dtype
        torch.float64
    """
    return module._apply(lambda t: t.type(dst_type))


def share_memory(module: Module) -> Module:
    """Refused: torch moves CPU storage to shared memory for ``torch.multiprocessing``;
    a dtorch value lives on its mesh's devices (worker threads or processes), not in the
    client, so there is no storage to share (each process reaches a value through the
    graph)."""
    raise NotImplementedError(
        "share_memory: dtorch values live on the devices of their graph (worker threads or "
        "processes), not in this process, so there is no storage to move to shared memory"
    )


def cpu(module: Module) -> Module:
    return module.to("cpu")


def cuda(module: Module, device: Any = None) -> Module:
    """torch's ``cuda(device)``: ``to`` that GPU (an index, ``"cuda:1"`` or a CUDA
    ``torch.device``; a MeshError where the graph cannot run there)."""
    return module.to(cuda_device(device))


def to_float(module: Module) -> Module:
    return _cast(module, Tensor.float)


def to_double(module: Module) -> Module:
    return _cast(module, Tensor.double)


def to_half(module: Module) -> Module:
    return _cast(module, Tensor.half)


def to_bfloat16(module: Module) -> Module:
    return _cast(module, Tensor.bfloat16)


def _cast(module: Module, method: Callable[[Tensor], Tensor]) -> Module:
    return module._apply(lambda t: method(t) if t.is_floating_point() else t)
