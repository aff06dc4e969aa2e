"""A Module's call path: its forward pre-hooks, forward hooks and placement hooks.

``Module.__call__`` runs the forward pre-hooks (which may replace the arguments),
``redistribute_input``, ``forward``, ``redistribute_output``, then the forward hooks (which
see the arguments ``forward`` got and may replace the output). This module holds how hooks
are registered (torch's ``RemovableHandle`` ids, ``prepend``, ``with_kwargs``,
``always_call``) and run, and how the placement hooks move Tensor arguments and outputs to a
module's ``input_placements``/``output_placements``. It is apart from ``module.py`` so that
the Module class keeps to its tree of members; the Module methods of the same names delegate
here, as ``state_dict``/``load_state_dict`` delegate to ``dtorch.nn.modules.state``.

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> m = nn.ReLU()
    >>> handle = m.register_forward_hook(lambda module, args, output: output * 2)
    >>> m(dtorch.ones(2)).tolist()
    [2.0, 2.0]
    >>> handle.remove()
    >>> m(dtorch.ones(2)).tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torch.utils.hooks import RemovableHandle

from dtorch.api.tensor import Tensor
from dtorch.ir.placement import Placement

if TYPE_CHECKING:
    from dtorch.nn.modules.module import Module

Hook = Callable[..., Any]


def register_forward_pre_hook(
    module: Module, hook: Hook, *, prepend: bool, with_kwargs: bool
) -> RemovableHandle:
    """Add ``hook`` to ``module``'s forward pre-hooks (``Module.register_forward_pre_hook``)."""
    hooks = module._forward_pre_hooks
    handle = RemovableHandle(hooks, extra_dict=module._forward_pre_hooks_with_kwargs)
    hooks[handle.id] = hook
    if with_kwargs:
        module._forward_pre_hooks_with_kwargs[handle.id] = True
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def register_forward_hook(
    module: Module, hook: Hook, *, prepend: bool, with_kwargs: bool, always_call: bool
) -> RemovableHandle:
    """Add ``hook`` to ``module``'s forward hooks (``Module.register_forward_hook``)."""
    hooks = module._forward_hooks
    extra = [module._forward_hooks_with_kwargs, module._forward_hooks_always_called]
    handle = RemovableHandle(hooks, extra_dict=extra)
    hooks[handle.id] = hook
    if with_kwargs:
        module._forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        module._forward_hooks_always_called[handle.id] = True
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def run_pre_hooks(
    module: Module, args: tuple, kwargs: dict, run: HookRun | None = None
) -> tuple[tuple, dict]:
    """``module``'s forward pre-hooks in order, each given the arguments the last left (kept
    in ``run`` as they change: ``always_call`` hooks get them if a later pre-hook raises)."""
    for hook_id, hook in list(module._forward_pre_hooks.items()):
        if run is not None:
            run.args, run.kwargs = args, kwargs
        if hook_id in module._forward_pre_hooks_with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        "forward pre-hook must return None or a tuple of (new_args, "
                        f"new_kwargs), but got {result}."
                    )
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    return args, kwargs


@dataclass(slots=True)
class HookRun:
    """One call's forward-hook state: the output so far and the ``always_call`` hooks that
    ran (torch runs the others, and only those, when the call raises)."""

    output: Any = None
    called: set[int] = field(default_factory=set)
    args: tuple = ()  # the arguments as the pre-hooks and placements have left them so far
    kwargs: dict = field(default_factory=dict)


def _run_one(
    module: Module, hook_id: int, hook: Hook, args: tuple, kwargs: dict, run: HookRun
) -> None:
    # one forward hook; a non-None result replaces the output
    if hook_id in module._forward_hooks_with_kwargs:
        result = hook(module, args, kwargs, run.output)
    else:
        result = hook(module, args, run.output)
    if result is not None:
        run.output = result


def run_hooks(module: Module, args: tuple, kwargs: dict, run: HookRun) -> Any:
    """``module``'s forward hooks in order, each given the output the last left."""
    for hook_id, hook in list(module._forward_hooks.items()):
        if hook_id in module._forward_hooks_always_called:
            run.called.add(hook_id)
        _run_one(module, hook_id, hook, args, kwargs, run)
    return run.output


def run_always_hooks(module: Module, args: tuple, kwargs: dict, run: HookRun) -> None:
    """After ``forward`` (or a hook) raised: the ``always_call`` hooks that did not run yet;
    one that raises too is silenced with torch's warning, so the first error propagates."""
    for hook_id, hook in list(module._forward_hooks.items()):
        if hook_id not in module._forward_hooks_always_called or hook_id in run.called:
            continue
        try:
            _run_one(module, hook_id, hook, args, kwargs, run)
        except Exception as error:
            warnings.warn(
                "module forward hook with ``always_call=True`` raised an exception that was "
                f"silenced as another error was raised in forward: {error}",
                stacklevel=3,
            )


def no_autograd(method: str) -> NotImplementedError:
    """The error of a backward-hook registration: dtorch records no gradients."""
    return NotImplementedError(
        f"{method}: dtorch has no autograd (it records no gradients and runs no backward "
        "pass, see docs/nn.md), so a backward hook would never run"
    )


def placed(value: Any, placements: Mapping[str, Placement]) -> Any:
    """``value`` redistributed to ``placements`` (by mesh dim name) when it is a Tensor."""
    if not isinstance(value, Tensor):
        return value
    return value.redistribute_by_dict(
        placements_dict=dict(placements), default_placement_mode="keep"
    )


def redistribute_input(
    wanted: Mapping[str, Placement] | None, args: tuple[Any, ...], kwargs: dict
) -> tuple[tuple[Any, ...], dict]:
    """Every Tensor of ``args`` and ``kwargs`` on ``wanted`` (None or empty: unchanged)."""
    if not wanted:
        return args, kwargs
    return (
        tuple(placed(a, wanted) for a in args),
        {k: placed(v, wanted) for k, v in kwargs.items()},
    )


def redistribute_output(wanted: Mapping[str, Placement] | None, output: Any) -> Any:
    """``output`` (a Tensor, or each Tensor of a tuple/list) on ``wanted`` (None or empty:
    unchanged)."""
    if not wanted:
        return output
    if isinstance(output, (tuple, list)):
        values = [placed(o, wanted) for o in output]
        if hasattr(output, "_fields"):  # a namedtuple takes its fields one by one
            return type(output)(*values)
        return type(output)(values)
    return placed(output, wanted)
