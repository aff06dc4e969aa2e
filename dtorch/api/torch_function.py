"""torch's functions on dtorch tensors: ``torch.add(t, 1)`` runs ``dtorch.add(t, 1)``.

A dtorch.Tensor is not a torch.Tensor, but torch finds it among a call's arguments through the
``__torch_function__`` protocol (``torch.overrides``), as it finds any tensor-like type. A call
of ``torch.<name>``, ``torch.nn.functional.<name>`` or ``torch.linalg.<name>`` with a dtorch
tensor among its arguments runs dtorch's function of the same name in the same namespace
(``dtorch.<name>``, ``dtorch.nn.functional.<name>``, ...) with the same arguments, so code
written with torch's functions - as DTensor users write it - runs on dtorch tensors unchanged,
with dtorch's placement rules. A torch function dtorch has no counterpart of raises TypeError
naming it, and so does a torch tensor's method given a dtorch tensor (``torch_tensor + t``:
Python then tries ``t.__radd__``, which refuses the torch tensor); a call that mixes dtorch and
torch tensors gets dtorch's own refusal (convert the torch tensor with ``dtorch.tensor``, or
gather the dtorch one with ``to_torch()``). ``torch.Tensor.add(t)`` itself never gets here:
torch's methods check their ``self`` first.

torch passes a Python function's keyword arguments on in full (``F.softmax`` passes
``_stacklevel``); one that dtorch's counterpart does not take is dropped when it holds torch's
default, and refused otherwise, so no argument is silently ignored.

Example:
    >>> import torch, dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2)
    >>> t = dtorch.from_torch(torch.arange(4.0), device_mesh=mesh, placements=[dtorch.Shard(0)])
    >>> r = torch.add(t, 1)
    >>> type(r).__name__, r.placements, r.tolist()
    ('Tensor', [Shard(dim=0)], [1.0, 2.0, 3.0, 4.0])
    >>> torch.nn.functional.relu(t - 2).tolist()
    [0.0, 0.0, 0.0, 1.0]
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True, slots=True)
class Counterpart:
    """dtorch's function for one torch function, with what it does with torch's keywords:
    ``takes`` (None: any), and torch's defaults of those it does not take."""

    function: Callable[..., Any]
    name: str  # its public name, ``dtorch.nn.functional.relu``
    takes: frozenset[str] | None
    defaults: Mapping[str, Any]


def dispatch(
    tensor_type: type,
    func: Callable[..., Any],
    types_: tuple[type, ...],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
) -> Any:
    """Run ``func`` (a torch function called with a ``tensor_type`` among its arguments) as
    its dtorch counterpart; NotImplemented when another tensor-like type is involved too."""
    if not all(issubclass(t, tensor_type) for t in types_):
        return NotImplemented
    counterpart = counterparts().get(func)
    if counterpart is None:  # a torch tensor's method, given a dtorch tensor: a mix
        mixed = bool(args) and isinstance(args[0], torch.Tensor)
        raise TypeError(_mixed(func, args) if mixed else _no_counterpart(func))
    keywords = _keywords(func, counterpart, dict(kwargs or {}))
    return counterpart.function(*args, **keywords)


@functools.cache
def counterparts() -> dict[Any, Counterpart]:
    """Every torch function that has a dtorch counterpart -> that counterpart (built once).

    Example:
        >>> import torch, dtorch
        >>> counterparts()[torch.matmul].function is dtorch.matmul
        True
    """
    # The one import against DESIGN's direction (api below nn): the table spans every public
    # namespace, which exists only once the package is imported - always the case here, since
    # a dtorch tensor exists only after ``import dtorch`` finished.
    import dtorch
    from dtorch.nn import functional

    table: dict[Any, Counterpart] = {}
    for theirs, ours in (
        (torch, dtorch),
        (torch.nn.functional, functional),
        (torch.linalg, dtorch.linalg),
    ):
        table.update(_same_names(theirs, ours))
    return table


def _same_names(theirs: Any, ours: Any) -> Iterator[tuple[Any, Counterpart]]:
    """(torch function, counterpart) for each public name both namespaces have as a function
    (a dtorch name that *is* torch's own object, such as ``dtorch.broadcast_shapes``, needs
    none)."""
    for name in dir(ours):
        mine, torch_one = getattr(ours, name), getattr(theirs, name, None)
        if name.startswith("_") or torch_one is None or mine is torch_one:
            continue
        if _is_function(mine) and _is_function(torch_one):
            public = f"{ours.__name__}.{name}"
            yield torch_one, Counterpart(mine, public, _parameters(mine), _defaults(torch_one))


def _is_function(value: Any) -> bool:
    return callable(value) and not isinstance(value, (type, types.ModuleType))


def _parameters(function: Callable[..., Any]) -> frozenset[str] | None:
    """The keyword names ``function`` takes; None when it takes any (``**kwargs``) or its
    signature cannot be read."""
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL)


def _defaults(torch_one: Any) -> Mapping[str, Any]:
    """torch's default of each keyword of a Python-level torch function (builtins have no
    readable signature, and torch passes their keywords on as the caller gave them)."""
    try:
        params = inspect.signature(torch_one).parameters.values()
    except (TypeError, ValueError):
        return types.MappingProxyType({})
    empty = inspect.Parameter.empty
    return types.MappingProxyType({p.name: p.default for p in params if p.default is not empty})


def _keywords(func: Any, counterpart: Counterpart, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` less those the counterpart does not take and that hold torch's default."""
    takes = counterpart.takes
    if takes is None:
        return kwargs
    for name in [k for k in kwargs if k not in takes]:
        default = counterpart.defaults.get(name, inspect.Parameter.empty)
        if not _same_value(kwargs[name], default):
            raise TypeError(
                f"{_name(func)}(..., {name}={kwargs[name]!r}) on a dtorch tensor: "
                f"dtorch's counterpart {counterpart.name} takes no "
                f"{name!r} (accepted: {', '.join(sorted(takes)) or 'positional arguments only'})"
            )
        del kwargs[name]
    return kwargs


def _same_value(value: Any, default: Any) -> bool:
    """Whether ``value`` is torch's default (identity first: a tensor has no plain ==)."""
    if value is default:
        return True
    return (
        isinstance(value, (bool, int, float, str))
        and type(value) is type(default)
        and (value == default)
    )


def _name(func: Any) -> str:
    """The ``torch.nn.functional.relu``-style name of a torch function, for messages."""
    resolved = torch.overrides.resolve_name(func)
    if resolved:
        return str(resolved)
    return f"{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', repr(func))}"


def _no_counterpart(func: Any) -> str:
    return (
        f"{_name(func)} got a dtorch.Tensor, and dtorch has no counterpart of it. dtorch "
        "runs the functions of torch, torch.nn.functional, torch.linalg and torch.Tensor that "
        "it has under the same name (dtorch.<name>, dtorch.nn.functional.<name>, ...); for "
        "anything else, gather the full torch tensor with .to_torch() first"
    )


def _mixed(func: Any, args: tuple[Any, ...]) -> str:
    kind = type(args[0])
    return (
        f"{_name(func)} on a {kind.__module__}.{kind.__qualname__} with a dtorch.Tensor "
        "argument: dtorch does not mix torch and dtorch tensors; convert the torch tensor "
        "with dtorch.tensor(...), or gather the dtorch one with .to_torch()"
    )
