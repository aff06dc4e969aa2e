"""A Module's ``state_dict`` (torch's keys, order, hooks and ``_metadata``) and the hook
points both directions of the state share.

``state_dict`` follows torch's recursion: each module records its metadata (``{"version":
module._version}``, under its prefix without the last dot, in the returned dict's
``_metadata``), runs its state-dict pre-hooks, saves its own entries
(``_save_to_state_dict``: parameters, persistent buffers, then ``_extra_state`` when its class
overrides ``get_extra_state``), then calls each child's own ``state_dict`` (so a subclass's
override is used wherever the module sits), then its post-hooks. Values share the module's
(``detach``ed handles unless ``keep_vars``). Loading is ``dtorch.nn.modules.loading``.

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> class Counter(nn.Linear):
    ...     calls = 0
    ...     def get_extra_state(self):
    ...         return {"calls": self.calls}
    ...     def set_extra_state(self, state):
    ...         self.calls = state["calls"]
    >>> sd = nn.Sequential(Counter(2, 2)).state_dict()
    >>> list(sd), sd["0._extra_state"]
    (['0.weight', '0.bias', '0._extra_state'], {'calls': 0})
    >>> dict(sd._metadata)
    {'': {'version': 1}, '0': {'version': 1}}
"""

from __future__ import annotations

import warnings
from collections import OrderedDict, namedtuple
from typing import TYPE_CHECKING, Any

from torch.utils.hooks import RemovableHandle

from dtorch.nn.modules.hooks import Hook
from dtorch.nn.modules.torch_children import stateless

if TYPE_CHECKING:
    from dtorch.nn.modules.module import Module

#: The key suffix of a module's extra state (torch's ``_EXTRA_STATE_KEY_SUFFIX``).
EXTRA_STATE_KEY = "_extra_state"


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns: torch's ``_IncompatibleKeys``, with its name and
    repr (public as ``IncompatibleKeys``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


IncompatibleKeys = _IncompatibleKeys


def _never(method: str) -> RuntimeError:
    return RuntimeError(
        f"Reached a code path in Module.{method}() that should never be called. Please file "
        "an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml to "
        "report this bug."
    )


def get_extra_state(module: Module) -> Any:
    """torch's default ``Module.get_extra_state``: never called, since ``state_dict`` only
    asks modules whose class overrides it (torch's RuntimeError otherwise).

    Example:
        >>> import dtorch
        >>> dtorch.nn.ReLU().get_extra_state()
        Traceback (most recent call last):
        RuntimeError: Reached a code path in Module.get_extra_state() that should never ...
    """
    raise _never("get_extra_state")


def set_extra_state(module: Module, state: Any) -> None:
    """torch's default ``Module.set_extra_state``: never called, since ``load_state_dict``
    only gives extra state to modules whose class overrides it (RuntimeError otherwise).

    Example:
        >>> import dtorch
        >>> dtorch.nn.ReLU().set_extra_state({})
        Traceback (most recent call last):
        RuntimeError: Reached a code path in Module.set_extra_state() that should never ...
    """
    raise _never("set_extra_state")


def overrides(module: Module, name: str, default: Any) -> bool:
    """torch's test for extra state: ``module``'s class overrides the method ``default``."""
    return getattr(type(module), name, default) is not default


def save_to_state_dict(module: Module, destination: Any, prefix: str, keep_vars: bool) -> None:
    """torch's ``Module._save_to_state_dict``: ``module``'s own entries (not its children's)
    into ``destination``; subclasses may override it.

    Example:
        >>> import dtorch
        >>> out = {}
        >>> dtorch.nn.Linear(2, 1)._save_to_state_dict(out, "l.", False)
        >>> list(out)
        ['l.weight', 'l.bias']
    """
    for name, param in module._parameters.items():
        if param is not None:
            destination[prefix + name] = param if keep_vars else param.detach()
    for name, buffer in module._buffers.items():
        if buffer is not None and name not in module._non_persistent_buffers_set:
            destination[prefix + name] = buffer if keep_vars else buffer.detach()
    if overrides(module, "get_extra_state", get_extra_state):
        destination[prefix + EXTRA_STATE_KEY] = module.get_extra_state()


def _positional(args: tuple, destination: Any, prefix: str, keep_vars: bool) -> tuple:
    # torch's deprecated positional (destination, prefix, keep_vars), with its FutureWarning
    warnings.warn(
        "Positional args are being deprecated, use kwargs instead. Refer to "
        "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module.state_dict"
        " for details.",
        FutureWarning,
        stacklevel=3,
    )
    if destination is None:
        destination = args[0]
    if len(args) > 1 and prefix == "":
        prefix = args[1]
    if len(args) > 2 and keep_vars is False:
        keep_vars = args[2]
    return destination, prefix, keep_vars


def state_dict(
    module: Module, *args: Any, destination: Any = None, prefix: str = "", keep_vars: bool = False
) -> Any:
    """torch's ``Module.state_dict``: parameters and persistent buffers (and extra state) by
    dotted name, in torch's order, with torch's ``_metadata``; see the module docstring.

    Example:
        >>> import dtorch
        >>> sd = dtorch.nn.Sequential(dtorch.nn.BatchNorm2d(2)).state_dict(prefix="m.")
        >>> list(sd)[-1], sd._metadata["m.0"]
        ('m.0.num_batches_tracked', {'version': 2})
    """
    if args:
        destination, prefix, keep_vars = _positional(args, destination, prefix, keep_vars)
    if destination is None:
        destination = OrderedDict()
        destination._metadata = OrderedDict()  # torch's too
    local_metadata = {"version": module._version}
    if hasattr(destination, "_metadata"):
        destination._metadata[prefix[:-1]] = local_metadata
    for pre_hook in module._state_dict_pre_hooks.values():
        pre_hook(module, prefix, keep_vars)
    module._save_to_state_dict(destination, prefix, keep_vars)
    for name, child in module._modules.items():
        if child is not None:
            stateless(name, child).state_dict(
                destination=destination, prefix=f"{prefix}{name}.", keep_vars=keep_vars
            )
    for hook in module._state_dict_hooks.values():
        result = hook(module, destination, prefix, local_metadata)
        if isinstance(hook, _PublicPostHook) and result is not None:
            raise RuntimeError("state_dict post-hook must return None")
        if result is not None:  # torch's private hooks may return a new dict (kept at the root)
            destination = result
    return destination


class _PublicPostHook:
    """A hook given to ``register_state_dict_post_hook``: torch requires it to return None,
    where one given to the private ``_register_state_dict_hook`` may return a new dict."""

    __slots__ = ("hook",)

    def __init__(self, hook: Hook) -> None:
        self.hook = hook

    def __call__(self, *args: Any) -> Any:
        return self.hook(*args)


def _register(hooks: OrderedDict, hook: Hook) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def register_state_dict_pre_hook(module: Module, hook: Hook) -> RemovableHandle:
    """torch's: ``hook(module, prefix, keep_vars)`` before ``module`` saves its state.

    Example:
        >>> import dtorch
        >>> m, seen = dtorch.nn.Linear(2, 2), []
        >>> _ = m.register_state_dict_pre_hook(lambda mod, prefix, keep: seen.append(prefix))
        >>> _ = m.state_dict(prefix="x."); seen
        ['x.']
    """
    return _register(module._state_dict_pre_hooks, hook)


def register_state_dict_post_hook(module: Module, hook: Hook) -> RemovableHandle:
    """torch's: ``hook(module, state_dict, prefix, local_metadata)`` after ``module`` and its
    children saved their state; it may change ``state_dict`` in place and returns None.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.Linear(2, 2)
        >>> _ = m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: sd.clear())
        >>> m.state_dict()
        OrderedDict()
    """
    return _register(module._state_dict_hooks, _PublicPostHook(hook))


def register_state_dict_hook(module: Module, hook: Hook) -> RemovableHandle:
    """torch's private ``_register_state_dict_hook``: ``hook(module, state_dict, prefix,
    local_metadata)`` after ``module`` saved its state; a dict it returns replaces the state
    dict (only the root's return reaches the caller, as in torch).

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.Linear(2, 2)
        >>> _ = m._register_state_dict_hook(lambda mod, sd, prefix, meta: {"n": len(sd)})
        >>> m.state_dict()
        {'n': 2}
    """
    public = module._state_dict_hooks.values()
    if any(isinstance(h, _PublicPostHook) and h.hook is hook for h in public):
        raise RuntimeError(
            "Cannot register the same function as the state dict post hook that was "
            "previously registered via register_state_dict_post_hook"
        )
    return _register(module._state_dict_hooks, hook)


def register_load_state_dict_pre_hook(module: Module, hook: Hook) -> RemovableHandle:
    """torch's: ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
    unexpected_keys, error_msgs)`` at the start of ``module``'s ``_load_from_state_dict``
    (``state_dict`` is the mutable view of the entries; see ``dtorch.nn.modules.loading``).

    Example:
        >>> import torch, dtorch
        >>> m = dtorch.nn.Linear(2, 1)
        >>> def rename(mod, sd, prefix, *rest):
        ...     sd[prefix + "weight"] = sd.pop(prefix + "w")
        >>> _ = m.register_load_state_dict_pre_hook(rename)
        >>> m.load_state_dict({"w": torch.ones(1, 2), "bias": torch.zeros(1)})
        <All keys matched successfully>
    """
    return load_state_dict_pre_hook(module, hook, with_module=True)


def load_state_dict_pre_hook(
    module: Module, hook: Hook, with_module: bool = False
) -> RemovableHandle:
    """torch's private ``_register_load_state_dict_pre_hook``: the public hook's arguments,
    without the module unless ``with_module``.

    Example:
        >>> import torch, dtorch
        >>> m, seen = dtorch.nn.Linear(2, 1), []
        >>> _ = m._register_load_state_dict_pre_hook(lambda sd, prefix, *rest: seen.append(prefix))
        >>> _ = m.load_state_dict({"weight": torch.ones(1, 2), "bias": torch.zeros(1)}); seen
        ['']
    """
    hooks = module._load_state_dict_pre_hooks
    handle = RemovableHandle(hooks)
    # torch's _WrappedHook(with_module)
    hooks[handle.id] = (lambda *args: hook(module, *args)) if with_module else hook
    return handle


def register_load_state_dict_post_hook(module: Module, hook: Hook) -> RemovableHandle:
    """torch's: ``hook(module, incompatible_keys)`` after the load, before ``strict`` judges
    the keys (a hook may clear them in place; it returns None).

    Example:
        >>> import torch, dtorch
        >>> m = dtorch.nn.Linear(2, 1)
        >>> _ = m.register_load_state_dict_post_hook(lambda mod, keys: keys.missing_keys.clear())
        >>> m.load_state_dict({"weight": torch.ones(1, 2)})
        <All keys matched successfully>
    """
    return _register(module._load_state_dict_post_hooks, hook)


__all__ = [
    "EXTRA_STATE_KEY",
    "IncompatibleKeys",
    "get_extra_state",
    "register_load_state_dict_post_hook",
    "register_load_state_dict_pre_hook",
    "register_state_dict_post_hook",
    "register_state_dict_pre_hook",
    "save_to_state_dict",
    "set_extra_state",
    "state_dict",
]
