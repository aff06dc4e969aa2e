"""Dotted paths into a module tree: torch's ``get_submodule``, ``set_submodule``,
``get_parameter`` and ``get_buffer`` (Module's methods of those names), with torch's errors.

Example:
    >>> from dtorch import nn
    >>> model = nn.Sequential(nn.Linear(2, 2))
    >>> model.set_submodule("0", nn.Linear(2, 3))
    >>> model.get_parameter("0.weight").shape
    torch.Size([3, 2])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.tensor import Tensor
from dtorch.nn.parameter import Parameter

if TYPE_CHECKING:
    from dtorch.nn.modules.module import Module


def _is_module(value: Any) -> bool:
    from dtorch.nn.modules.module import Module  # here: module.py imports this file

    return isinstance(value, Module | torch.nn.Module)  # a stateless torch child too


def get_submodule(self: Module, target: str) -> Module:
    """The descendant at dotted path ``target`` (``""``: this module); torch's
    AttributeError naming the first missing (or non-module) step.

    Example:
        >>> from dtorch import nn
        >>> nn.Sequential(nn.Sequential(nn.ReLU())).get_submodule("0.0")
        ReLU()
    """
    module: Module = self
    for item in target.split(".") if target else []:
        if not hasattr(module, item):
            raise AttributeError(f"{module._get_name()} has no attribute `{item}`")
        module = getattr(module, item)
        if not _is_module(module):
            raise AttributeError(f"`{item}` is not an nn.Module")
    return module


def set_submodule(self: Module, target: str, module: Module, strict: bool = False) -> None:
    """torch's: set the submodule at dotted path ``target`` to ``module`` (its parent must
    exist; with ``strict`` the submodule too; an attribute there must be a module).

    Example:
        >>> from dtorch import nn
        >>> seq = nn.Sequential(nn.Linear(2, 2))
        >>> seq.set_submodule("0", nn.ReLU()); seq
        Sequential(
          (0): ReLU()
        )
    """
    if target == "":
        raise ValueError("Cannot set the submodule without a target name!")
    if not _is_module(module):
        raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
    path, _, name = target.rpartition(".")
    parent = self.get_submodule(path)
    if strict and not hasattr(parent, name):
        raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
    if hasattr(parent, name) and not _is_module(getattr(parent, name)):
        raise AttributeError(f"`{name}` is not an nn.Module")
    setattr(parent, name, module)


def get_parameter(self: Module, target: str) -> Parameter:
    """The parameter at dotted path ``target`` (torch's AttributeError otherwise).

    Example:
        >>> from dtorch import nn
        >>> nn.Sequential(nn.Linear(2, 3)).get_parameter("0.bias").shape
        torch.Size([3])
    """
    module, name = _owner_of(self, target)
    param = getattr(module, name)
    if not isinstance(param, Parameter):
        raise AttributeError(f"`{name}` is not an nn.Parameter")
    return param


def get_buffer(self: Module, target: str) -> Tensor:
    """The buffer at dotted path ``target`` (torch's AttributeError otherwise).

    Example:
        >>> from dtorch import nn
        >>> nn.Sequential(nn.BatchNorm2d(2)).get_buffer("0.running_var").tolist()
        [1.0, 1.0]
    """
    module, name = _owner_of(self, target)
    if name not in module._buffers:
        raise AttributeError(f"`{name}` is not a buffer")
    return getattr(module, name)


def _owner_of(self: Module, target: str) -> tuple[Module, str]:
    # the module holding the last step of ``target``, which must be an attribute of it
    path, _, name = target.rpartition(".")
    module = self.get_submodule(path)
    if not hasattr(module, name):
        raise AttributeError(f"{module._get_name()} has no attribute `{name}`")
    return module, name


__all__ = ["get_buffer", "get_parameter", "get_submodule", "set_submodule"]
