"""``load_state_dict``: torch's walk, keys and strict rules, one tensor at a time.

``load_state_dict(module, source, strict=True, assign=False)`` takes a mapping of full torch
tensors (a ``torch.nn.Module``'s ``state_dict()``), of dtorch tensors (another dtorch
module's), or the path of a safetensors file (``str`` or ``os.PathLike``, read one tensor at a
time through ``safetensors.safe_open``). It walks the modules as torch does: each module's
``_load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
unexpected_keys, error_msgs)`` gets a mutable view of the entries under its prefix
(``dtorch.nn.modules.load_source.LoadView``, so overrides and load pre-hooks may rename or add
entries) and torch's ``_metadata`` entry of its prefix; the default method checks its own
entries (torch's messages) and plans their loads, and gives ``_extra_state`` to a class that
overrides ``set_extra_state`` (a missing one is a missing key, an unwanted one unexpected).

Then the plan runs: every torch value is sharded straight onto its target's mesh and
placements (``dtorch.from_torch``) and copied into it in place (``copy_``: the Parameter
objects, and every handle of them, see the new values); the loader waits for each tensor's own
value before it changes the target and reads the next one, so the client holds about one full
tensor at a time, never the whole model. ``assign=True`` puts the loaded value in the
module's entry instead, as torch does (a new Parameter keeping ``requires_grad``, of the
checkpoint's dtype; tied entries part; an integer or bool value for a parameter that
requires gradients is refused with the other checks). A 1-element
value loads into a 0-dim target (torch's backward compatibility).

Everything is checked before anything is loaded, so a failed load changes nothing (torch may
load part of the values before it raises): shape mismatches, values that are no tensors or hold
no loadable data (meta, sparse, quantized, nested; a safetensors dtype torch cannot read as its
header says), and dtorch values that failed on a device raise (torch's aggregated
RuntimeError). What no check can know - a safetensors file replaced or changed after its header
was read (a RuntimeError at the next read), a device failing while a value loads, a graph
closed meanwhile, a module's own ``set_extra_state`` raising (user code, run in torch's order,
after the entries before it have loaded) - raises its own error with a note naming the entry
and how many loaded before it; missing and unexpected keys raise with ``strict=True`` and are
returned with ``strict=False``. Where the module tree has load post-hooks, which may clear
those keys in place, the keys are judged after the hooks, which run after the values load (as
torch; but all of them after every value loaded, where torch runs each module's hooks once
its own subtree has loaded: a hook sees the whole load's missing keys and values). Values
are converted to the target's dtype as ``copy_`` does, except a floating-point (or complex)
value into an integer or bool tensor (or complex into real), which loses its meaning and
raises (torch casts).

Example:
    >>> import torch, dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
    >>> ref = torch.nn.Linear(4, 2)
    >>> m = dtorch.nn.ColumnParallelLinear(4, 2, device_mesh=mesh)
    >>> m.load_state_dict(ref.state_dict())
    <All keys matched successfully>
    >>> m.weight.placements, torch.equal(m.weight.to_torch(), ref.weight.detach())
    ([Shard(dim=0)], True)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.creation import create, from_torch
from dtorch.api.settled import settled
from dtorch.api.tensor import Tensor
from dtorch.ir.opkind import CreateKind
from dtorch.nn.modules.load_source import LoadView, MappingSource, Meta, SafetensorsSource
from dtorch.nn.modules.state import EXTRA_STATE_KEY, IncompatibleKeys, overrides, set_extra_state
from dtorch.nn.modules.torch_children import stateless
from dtorch.nn.parameter import Parameter
from dtorch.serialization.files import check_regular

if TYPE_CHECKING:
    from dtorch.nn.modules.module import Module
    from dtorch.nn.modules.torch_children import Child


# --- checks ---------------------------------------------------------------------------------
def _kind(dtype: torch.dtype) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex: a load may not go down this order."""
    if dtype.is_complex:
        return 3
    if dtype.is_floating_point:
        return 2
    return 0 if dtype == torch.bool else 1


def _mismatch(key: str, meta: Meta, target: Tensor, assign: bool) -> str | None:
    """torch's message for a shape mismatch, or ours for a dtype that cannot be loaded (any
    dtype can be assigned: the target takes the checkpoint's)."""
    shape, dtype = meta
    if shape != tuple(target.shape):
        return (
            f"size mismatch for {key}: copying a param with shape {torch.Size(shape)} from "
            f"checkpoint, the shape in current model is {target.shape}."
        )
    if not assign and dtype is not None and _kind(dtype) > max(_kind(target.dtype), 1):
        return (
            f"dtype mismatch for {key}: copying a param of dtype {dtype} from checkpoint, the "
            f"dtype in current model is {target.dtype}; accepted: a value of the same kind "
            "(floating point into floating point) or an integer or bool one"
        )
    if assign and _needs_inexact(target) and dtype is not None and _kind(dtype) < 2:
        return (
            f"While assigning {key}: a {dtype} value to a parameter that requires gradients: "
            "Only Tensors of floating point and complex dtype can require gradients (torch's "
            "refusal); accepted: a floating point or complex value, or requires_grad_(False)"
        )
    return None


def _needs_inexact(target: Tensor) -> bool:
    # an assigned value replaces the Parameter keeping its requires_grad
    return isinstance(target, Parameter) and target.requires_grad


def repr_key(key: str) -> str:
    """A key as torch quotes it in its messages."""
    return f'"{key}"'


# --- steps: what the plan runs once everything is checked -----------------------------------
def _placed_like(value: Any, target: Tensor, assign: bool) -> Tensor:
    """``value`` on ``target``'s mesh and placements (in its dtype unless ``assign``)."""
    if isinstance(value, Tensor):
        return value if assign else value.redistribute(target.device_mesh, target.placements)
    dtype = value.dtype if assign else target.dtype
    if not _plain_cpu(value):
        return from_torch(
            value,
            dtype=dtype,
            device_mesh=target.device_mesh,
            placements=target.placements,
            graph=target.graph,
        )
    # Without from_torch's defensive copy: the Create kernel copies each shard out of the
    # value, and the loader waits for it before the value is dropped (one full tensor less).
    return create(
        CreateKind.FROM_TENSOR,
        tuple(value.shape),
        dtype,
        graph=target.graph,
        device_mesh=target.device_mesh,
        device=None,
        placements=target.placements,
        value=(value.detach() if value.requires_grad else value).to(dtype),
    )


def _plain_cpu(value: torch.Tensor) -> bool:
    """A dense CPU tensor with data: the Create kernel can slice it as it is."""
    return (
        value.device.type == "cpu"
        and value.layout == torch.strided
        and not value.is_quantized
        and not value.is_meta
    )


@dataclass(frozen=True, slots=True)
class _Copy:
    """Load the entry ``key`` of ``view`` into ``target`` (``squeeze``: a 1-element value
    into a 0-dim target)."""

    view: LoadView
    key: str
    module: Module
    name: str  # the target's name in ``module``
    target: Tensor
    assign: bool
    squeeze: bool

    def held(self) -> Tensor | None:
        """The dtorch value to wait for first (None: a torch one, or the target itself)."""
        value = self.view.held(self.key)
        return None if value is self.target else value  # identity: == records an operator

    def run(self) -> None:
        value = self.view[self.key]
        if value is self.target:  # a default the module supplied from itself: nothing to load
            return
        placed = _placed_like(
            value.reshape(()) if self.squeeze else value, self.target, self.assign
        )
        del value
        # this value alone, made on every device: the client's full tensor can go before the
        # next one is read, and a value that failed raises before its target changes
        settled(placed).get()
        if self.assign:
            _assign(self.module, self.name, self.target, placed)
        else:
            self.target.copy_(placed)


def _assign(module: Module, name: str, target: Tensor, value: Tensor) -> None:
    """torch's ``assign=True``: the module's entry becomes the loaded value (a Parameter where
    it held one, keeping its ``requires_grad``), so entries tied before are tied no more."""
    if isinstance(target, Parameter):
        if isinstance(value, Parameter):
            value.requires_grad_(target.requires_grad)
        else:
            value = Parameter(value, requires_grad=target.requires_grad)
    setattr(module, name, value)


@dataclass(frozen=True, slots=True)
class _SetExtra:
    """Give the entry ``key`` of ``view`` to ``module.set_extra_state``."""

    view: LoadView
    key: str
    module: Module

    def held(self) -> None:
        return None

    def run(self) -> None:
        self.module.set_extra_state(self.view[self.key])


# --- the default Module._load_from_state_dict -----------------------------------------------
def _local_state(module: Module) -> dict[str, Tensor]:
    """A module's own loadable tensors: parameters and persistent buffers with values."""
    buffers = {
        k: v for k, v in module._buffers.items() if k not in module._non_persistent_buffers_set
    }
    return {k: v for k, v in {**module._parameters, **buffers}.items() if v is not None}


def _plan_copy(
    view: LoadView, entry: tuple[Module, str, Tensor], key: str, assign: bool, errors: list[str]
) -> None:
    module, name, target = entry  # the target is module's entry ``name``
    meta = view.meta(key)
    if meta is None:
        errors.append(
            f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
            f"object from checkpoint but received {type(view[key])}"
        )
        return
    why = view.refusal(key)
    if why is not None:
        errors.append(f'While copying the parameter named "{key}": {why}')
        return
    squeeze = target.ndim == 0 and meta[0] == (1,)  # torch's backward compatibility
    message = _mismatch(key, ((), meta[1]) if squeeze else meta, target, assign)
    held = view.held(key)  # assign=True takes the value as it is, its graph included
    if message is None and not assign and held is not None and held.graph != target.graph:
        message = (
            f'While copying the parameter named "{key}": the value is on Graph {held.graph.id}, '
            f"the module's tensor on Graph {target.graph.id}; accepted: a torch tensor, or a "
            "dtorch tensor of the module's graph"
        )
    if message is not None:
        errors.append(message)
    else:
        view.plan.append(_Copy(view, key, module, name, target, assign, squeeze))


def _plan_extra(module: Module, view: LoadView, prefix: str, strict: bool, keys: Any) -> None:
    missing, unexpected = keys
    key = prefix + EXTRA_STATE_KEY
    if overrides(module, "set_extra_state", set_extra_state):
        if key in view:
            view.plan.append(_SetExtra(view, key, module))
        elif strict:
            missing.append(key)
    elif strict and key in view:
        unexpected.append(key)


def _unexpected(module: Module, view: LoadView, prefix: str, local: Mapping[str, Any]) -> list:
    """torch's unexpected keys of one module: its own names it lacks, children it lacks."""
    out = []
    for key in view:
        if key.startswith(prefix) and key != prefix + EXTRA_STATE_KEY:
            head, dot, _ = key[len(prefix) :].partition(".")
            if (dot and head not in module._modules) or (not dot and head not in local):
                out.append(key)
    return out


def load_from_state_dict(
    module: Module,
    state_dict: Mapping[str, Any],
    prefix: str,
    local_metadata: Mapping[str, Any],
    strict: bool,
    missing_keys: list[str],
    unexpected_keys: list[str],
    error_msgs: list[str],
) -> None:
    """torch's default ``Module._load_from_state_dict``: the load pre-hooks, then
    ``module``'s own entries checked and planned (loaded once everything is checked; given a
    plain mapping, by an override, they load at the end of this call).

    Example:
        >>> import torch, dtorch
        >>> class Renamed(dtorch.nn.Linear):
        ...     def _load_from_state_dict(self, state_dict, prefix, *args):
        ...         state_dict[prefix + "weight"] = state_dict.pop(prefix + "kernel")
        ...         super()._load_from_state_dict(state_dict, prefix, *args)
        >>> m = dtorch.nn.Sequential(Renamed(2, 1))
        >>> m.load_state_dict({"0.kernel": torch.ones(1, 2), "0.bias": torch.zeros(1)})
        <All keys matched successfully>
        >>> m[0].weight.tolist()
        [[1.0, 1.0]]
    """
    for hook in module._load_state_dict_pre_hooks.values():
        hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
    view = (
        state_dict if isinstance(state_dict, LoadView) else LoadView(MappingSource(state_dict), [])
    )
    assign, errors_before = bool(local_metadata.get("assign_to_params_buffers")), len(error_msgs)
    local = _local_state(module)
    for name, target in local.items():
        if prefix + name in view:
            _plan_copy(view, (module, name, target), prefix + name, assign, error_msgs)
        elif strict:
            missing_keys.append(prefix + name)
    _plan_extra(module, view, prefix, strict, (missing_keys, unexpected_keys))
    if strict:
        unexpected_keys.extend(_unexpected(module, view, prefix, local))
    if view is not state_dict and len(error_msgs) == errors_before:
        _run(view.plan)


# --- the walk -------------------------------------------------------------------------------
@dataclass(slots=True)
class _Walk:
    """What walking the modules found: torch's three lists and the modules in post-order."""

    metadata: Mapping[str, Any]
    assign: bool
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visited: list[Child] = field(default_factory=list)


def _walk(module: Child, view: LoadView, prefix: str, walk: _Walk) -> None:
    # a torch child (no parameters or buffers) runs torch's own _load_from_state_dict
    local_metadata = dict(walk.metadata.get(prefix[:-1], {}))
    if walk.assign:
        local_metadata["assign_to_params_buffers"] = True
    module._load_from_state_dict(
        view, prefix, local_metadata, True, walk.missing, walk.unexpected, walk.errors
    )
    for name, child in module._modules.items():
        if child is not None:
            _walk(stateless(name, child), view.within(f"{prefix}{name}."), f"{prefix}{name}.", walk)
    walk.visited.append(module)


def _failure(module: Module, walk: _Walk, strict: bool) -> RuntimeError | None:
    """torch's aggregated error (missing, then unexpected keys with ``strict``, then the
    other messages), or None."""
    messages = list(walk.errors)
    if strict and walk.unexpected:
        quoted = ", ".join(map(repr_key, walk.unexpected))
        messages.insert(0, f"Unexpected key(s) in state_dict: {quoted}. ")
    if strict and walk.missing:
        messages.insert(
            0, f"Missing key(s) in state_dict: {', '.join(map(repr_key, walk.missing))}. "
        )
    if not messages:
        return None
    return RuntimeError(
        f"Error(s) in loading state_dict for {type(module).__name__}:\n\t" + "\n\t".join(messages)
    )


def _run(plan: list[Any]) -> None:
    """The planned steps, after waiting for every dtorch value (one that failed raises its
    failure and nothing changes)."""
    futures = [settled(value) for value in (step.held() for step in plan) if value is not None]
    for future in futures:
        future.get()
    for done, step in enumerate(plan):
        try:
            step.run()
        except Exception as error:  # what the checks could not know: name the entry
            error.add_note(
                f'(load_state_dict: while loading "{step.key}"; {done} of {len(plan)} entries '
                "were loaded before it)"
            )
            raise


def _post_hooks(walk: _Walk, keys: IncompatibleKeys) -> None:
    for module in walk.visited:
        for hook in module._load_state_dict_post_hooks.values():
            if hook(module, keys) is not None:
                raise AssertionError(
                    "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                    "expected to return new values, if incompatible_keys need to be modified, "
                    "it should be done inplace."
                )


def _load(module: Module, source: Any, metadata: Any, strict: bool, assign: bool) -> Any:
    view = LoadView(source, [])
    walk = _Walk({} if metadata is None else metadata, assign)
    _walk(module, view, "", walk)
    hooked = any(m._load_state_dict_post_hooks for m in walk.visited)
    failure = _failure(module, walk, strict and not hooked)
    if failure is not None:
        raise failure
    _run(view.plan)
    keys = IncompatibleKeys(walk.missing, walk.unexpected)
    if hooked:
        _post_hooks(walk, keys)
        failure = _failure(module, walk, strict)
        if failure is not None:
            raise failure
    return keys


def load_state_dict(
    module: Module, source: Any, strict: bool = True, assign: bool = False
) -> IncompatibleKeys:
    """Load ``source`` (a mapping of torch or dtorch tensors, or a safetensors path) into
    ``module``; see the module docstring for the rules.

    Example:
        >>> import torch, dtorch
        >>> m = dtorch.nn.Linear(2, 1)
        >>> m.load_state_dict({"weight": torch.ones(1, 2)}, strict=False)
        _IncompatibleKeys(missing_keys=['bias'], unexpected_keys=[])
    """
    if isinstance(source, (str, os.PathLike)):
        return load_safetensors(module, source, strict=strict, assign=assign)
    if not isinstance(source, Mapping):
        raise TypeError(
            f"Expected state_dict to be dict-like (or the path of a safetensors file), got "
            f"{type(source)}."
        )
    metadata = getattr(source, "_metadata", None)
    return _load(module, MappingSource(source), metadata, strict, assign)


def load_safetensors(
    module: Module, path: str | os.PathLike[str], *, strict: bool = True, assign: bool = False
) -> IncompatibleKeys:
    """Load a safetensors file into ``module``, one tensor at a time, each sharded straight
    onto its parameter's placements (``module.load_state_dict(path)`` does the same).

    Example:
        >>> import os, tempfile, torch, dtorch
        >>> from safetensors.torch import save_file
        >>> ref = torch.nn.Linear(3, 2)
        >>> path = os.path.join(tempfile.mkdtemp(), "linear.safetensors")
        >>> save_file(ref.state_dict(), path)
        >>> m = dtorch.nn.Linear(3, 2)
        >>> dtorch.nn.load_safetensors(m, path)
        <All keys matched successfully>
        >>> torch.equal(m.bias.to_torch(), ref.bias.detach())
        True
        >>> os.remove(path); os.rmdir(os.path.dirname(path))
    """
    from safetensors import SafetensorError, safe_open

    name = os.fspath(path)
    status = os.stat(name)  # a pipe first: opening one would wait for a writer
    check_regular(status, name, "a safetensors file")
    try:
        opened = safe_open(name, framework="pt")
    except (SafetensorError, OSError) as error:
        raise ValueError(
            f"load_state_dict: {name} is not a safetensors file ({error}); accepted: a "
            "safetensors file, or a mapping of torch or dtorch tensors"
        ) from error
    with opened as handle:
        return _load(module, SafetensorsSource(name, handle, status), None, strict, assign)


__all__ = ["load_from_state_dict", "load_safetensors", "load_state_dict"]
