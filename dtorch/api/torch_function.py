"""torch's functions on dtorch tensors: ``torch.add(t, 1)`` runs ``dtorch.add(t, 1)``.

A dtorch.Tensor is not a torch.Tensor, but torch finds it among a call's arguments through the
``__torch_function__`` protocol (``torch.overrides``), as it finds any tensor-like type. A call
of ``torch.<name>``, ``torch.nn.functional.<name>``, ``torch.linalg.<name>``,
``torch.nn.init.<name>``, ``torch.special.<name>`` or ``torch.fft.<name>`` with a dtorch
tensor among its arguments runs dtorch's function of the same name in the same namespace
(``dtorch.<name>``, ``dtorch.nn.functional.<name>``, ``dtorch.special.<name>``, ...) with the
same arguments, so code written with torch's functions - as DTensor users write it - runs on
dtorch tensors unchanged, with dtorch's placement rules. A torch function dtorch has no
counterpart of raises TypeError naming it, and so does a torch tensor's method given a dtorch
tensor (``torch_tensor + t``: Python then tries ``t.__radd__``, which refuses the torch tensor).
A call that mixes dtorch and torch tensors is dtorch's function's to judge, as if called as
``dtorch.<name>``: most refuse the torch tensor (convert it with ``dtorch.tensor``, or gather
the dtorch one with ``to_torch()``); a few take one where dtorch takes it (an index table, a 0-d
scalar). torch asks nobody for what it never lets be overridden (``torch.tensor(t)``,
``torch.as_tensor(t)``, the creation functions: most of
``torch.overrides.get_ignored_functions()``, though it does ask for ``torch.rand_like(t)`` and
``F.hardswish(t)`` there), nor for a torch method called on a dtorch tensor
(``torch.Tensor.add(t, 1)``: torch checks ``self`` first): call ``t.to_torch()`` or dtorch's own
function there.

torch passes a Python function's keyword arguments on in full (``F.softmax`` passes
``_stacklevel``, ``torch.lu`` ``out=None``); one that dtorch's counterpart does not take is
dropped when it holds torch's default (None where torch's cannot be read), and refused
otherwise, so no argument is silently ignored. ``torch.trace`` is the matrix trace
(``Tensor.trace``; ``dtorch.trace`` traces programs), the list forms ``torch.meshgrid([a,
b])`` and ``torch.atleast_2d((a, b))`` work as the argument-list ones do, and a torch function
of a Tensor method's name that no namespace pairs is that method (``torch.exp_(t)`` is
``t.exp_()``).

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
    method: bool  # a Tensor method (its first parameter ``self``, torch's ``input``)


#: torch's C++ functions (``torch._VF``) that torch's Python wrappers of these names call with
#: their list forms (``torch.meshgrid([a, b])``, ``torch.atleast_2d((a, b))``): the wrapper's
#: own check does not look inside the list. dtorch's function of the name takes the list too.
_LIST_FORMS = ("meshgrid", "atleast_1d", "atleast_2d", "atleast_3d")

#: Tensor types a call may hold beside dtorch's: torch's own (the counterpart refuses them, or
#: takes them where dtorch takes a torch tensor); any other tensor-like type has its say first.
_TORCH_TENSORS = (torch.Tensor, torch.nn.Parameter)


def dispatch(
    tensor_type: type,
    func: Callable[..., Any],
    types_: tuple[type, ...],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
) -> Any:
    """Run ``func`` (a torch function called with a ``tensor_type`` among its arguments) as
    its dtorch counterpart; NotImplemented when another tensor-like type is involved too."""
    if not all(issubclass(t, tensor_type) or t in _TORCH_TENSORS for t in types_):
        return NotImplemented
    counterpart = counterparts().get(func)
    if counterpart is None:  # a torch tensor's method, given a dtorch tensor: a mix
        mixed = bool(args) and isinstance(args[0], torch.Tensor)
        raise TypeError(_mixed(func, args) if mixed else _no_counterpart(func))
    keywords = _keywords(func, counterpart, dict(kwargs or {}))
    if "input" in keywords and not _takes(counterpart, "input"):
        args = (keywords.pop("input"), *args)  # torch.numel(input=t): t.numel(); linalg's A
    if counterpart.method and not (args and isinstance(args[0], tensor_type)):
        raise TypeError(_mixed(func, args))  # torch.clamp_(torch_t, min=t)
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
    from dtorch.nn import functional, init

    table: dict[Any, Counterpart] = {}
    for theirs, ours in (
        (torch, dtorch),
        (torch.nn.functional, functional),
        (torch.linalg, dtorch.linalg),
        (torch.nn.init, init),
        (torch.special, dtorch.special),
        (torch.fft, dtorch.fft),
    ):
        table.update(_same_names(theirs, ours))
    # dtorch.trace traces programs; torch.trace is the matrix trace, dtorch's Tensor.trace
    table[torch.trace] = _counterpart(dtorch.Tensor.trace, "dtorch.Tensor.trace", torch.trace)
    table.update(_methods(table, dtorch.Tensor))
    for name in _LIST_FORMS:
        table[getattr(torch._C._VariableFunctions, name)] = table[getattr(torch, name)]
    # torch.overrides.get_ignored_functions() lists some that torch does ask for (its Python
    # ``hardswish``, ``rand_like``): every counterpart stays, in case torch asks
    table[torch.eye] = _counterpart(_eye_into, "dtorch.nn.init.eye_", torch.eye)
    return table


def _eye_into(n: int, m: int | None = None, *, out: Any = None, **keywords: Any) -> Any:
    """``torch.eye(n, m, out=t)``, the one form of ``torch.eye`` that torch lets a dtorch
    tensor reach (``torch.nn.init.eye_`` calls it): ``t``, of shape (n, m), becomes the
    identity (``dtorch.nn.init.eye_``); for a new identity matrix call ``dtorch.eye``."""
    from dtorch.nn.init import eye_

    shape = (n, n if m is None else m)
    dtype = keywords.pop("dtype", None)
    if out is None or tuple(out.shape) != shape or dtype not in (None, out.dtype):
        got = "no out" if out is None else f"out of shape {list(out.shape)}, {out.dtype}"
        raise TypeError(
            f"torch.eye{shape} with {got} and dtype={dtype} on a dtorch tensor: accepted is "
            f"out= a dtorch tensor of shape {list(shape)}, of the dtype given if any (for a "
            "new matrix call dtorch.eye)"
        )
    for torch_checked in ("layout", "device", "requires_grad"):  # out's own: torch passes
        keywords.pop(torch_checked, None)  # them as eye_ reads them off the tensor
    if keywords:
        raise TypeError(f"torch.eye(..., out=t) on a dtorch tensor: unexpected {sorted(keywords)}")
    return eye_(out)


def _same_names(theirs: Any, ours: Any) -> Iterator[tuple[Any, Counterpart]]:
    """(torch function, counterpart) for each public name both namespaces have as a function
    (a dtorch name that *is* torch's own object, such as ``dtorch.broadcast_shapes``, needs
    none)."""
    for name in dir(ours):
        mine, torch_one = getattr(ours, name), getattr(theirs, name, None)
        if name.startswith("_") or torch_one is None or mine is torch_one:
            continue
        if _is_function(mine) and _is_function(torch_one):
            yield torch_one, _counterpart(mine, f"{ours.__name__}.{name}", torch_one)


def _counterpart(mine: Callable[..., Any], name: str, torch_one: Any) -> Counterpart:
    takes = _parameters(mine)
    method = takes is not None and "self" in takes
    return Counterpart(mine, name, takes, _defaults(torch_one), method)


def _methods(
    table: Mapping[Any, Counterpart], tensor_type: type
) -> Iterator[tuple[Any, Counterpart]]:
    """(torch function, method) for the torch functions of ``tensor_type``'s method names that
    no namespace pairs (the in-place ``torch.exp_(t)`` is ``t.exp_()``)."""
    for name in dir(tensor_type):
        torch_one, mine = getattr(torch, name, None), getattr(tensor_type, name)
        if name.startswith("_") or torch_one is None or torch_one in table:
            continue
        if _is_function(torch_one) and isinstance(mine, types.FunctionType):
            yield torch_one, _counterpart(mine, f"dtorch.Tensor.{name}", torch_one)


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
    """``kwargs`` less those the counterpart does not take and that hold torch's default
    (for a C++ function, whose defaults cannot be read: None, its "not given"); a method's
    ``input`` stays, for ``dispatch`` to pass first."""
    takes = counterpart.takes
    if takes is None:
        return kwargs
    for alias in [k for k in kwargs if k not in takes and k in _NUMPY_NAMES]:
        name = _NUMPY_NAMES[alias]  # torch's parser takes NumPy's spelling of its own names
        if name not in kwargs and (name in takes or name == "input"):
            kwargs[name] = kwargs.pop(alias)
    for name in [k for k in kwargs if k not in takes]:
        if name == "input":  # torch's name of the first argument: passed first by dispatch
            continue
        if not _same_value(kwargs[name], counterpart.defaults.get(name)):  # None: unreadable
            raise TypeError(
                f"{_name(func)}(..., {name}={_short(kwargs[name])}) on a dtorch tensor: "
                f"dtorch's counterpart {counterpart.name} takes no "
                f"{name!r} (accepted: {', '.join(sorted(takes)) or 'positional arguments only'})"
            )
        del kwargs[name]
    return kwargs


#: NumPy's keyword names that torch's argument parser takes for its own (``torch.sum(t,
#: axis=1, keepdims=True)``, ``torch.maximum(x1=a, x2=b)``).
_NUMPY_NAMES = {
    "axis": "dim",
    "axis0": "dim0",
    "axis1": "dim1",
    "keepdims": "keepdim",
    "x": "input",
    "a": "input",
    "x1": "input",
    "x2": "other",
}


def _takes(counterpart: Counterpart, name: str) -> bool:
    """Whether the counterpart takes keyword ``name`` (any, where it takes ``**kwargs``)."""
    return counterpart.takes is None or name in counterpart.takes


def _short(value: Any) -> str:
    """``value`` for a message: a tensor by its kind, dtype and shape, not its elements."""
    if isinstance(value, torch.Tensor):
        return f"a torch.Tensor {value.dtype} {list(value.shape)}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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
        "runs the functions of torch, torch.nn.functional, torch.linalg, torch.nn.init, "
        "torch.special, torch.fft and torch.Tensor that "
        "it has under the same name (dtorch.<name>, dtorch.nn.functional.<name>, ...); for "
        "anything else, gather the full torch tensor with .to_torch() first"
    )


def _mixed(func: Any, args: tuple[Any, ...]) -> str:
    kind = type(args[0])
    return (
        f"{_name(func)} on a {kind.__module__}.{kind.__qualname__} with a dtorch.Tensor "
        "argument: dtorch does not mix torch and dtorch tensors; gather the dtorch one with "
        ".to_torch(), or, where dtorch has the function, convert the torch one with "
        "dtorch.tensor(...)"
    )
