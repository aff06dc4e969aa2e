"""A Module's state: ``state_dict`` and ``load_state_dict`` (torch's keys and strict rules).

``load_state_dict(module, source, strict=True, assign=False)`` takes a mapping of full torch
tensors (a ``torch.nn.Module``'s ``state_dict()``), of dtorch tensors (another dtorch
module's), or the path of a safetensors file (``str`` or ``os.PathLike``, read one tensor at a
time through ``safetensors.safe_open``). Every torch value is sharded straight onto its
target's mesh and placements (``dtorch.from_torch``) and copied into it in place
(``copy_``: the Parameter objects, and every handle of them, see the new values); the loader
waits for each tensor's own value (not the graph, whose earlier failures are not the load's)
before it changes the target and reads the next one, so the client holds about one full
tensor at a time, never the whole model. ``assign=True`` rebinds each target to the loaded
value instead (``Tensor.data``: identity kept, the checkpoint's dtype kept).

Everything is checked before anything is loaded, so a failed load changes nothing (torch may
load part of the values before it raises): keys the module lacks (``unexpected``, e.g. a
``num_batches_tracked`` the module does not have) and keys the source lacks (``missing``)
raise with ``strict=True`` and are returned with ``strict=False``, as torch's
``_IncompatibleKeys``; a shape mismatch raises in both modes, with torch's message; a dtorch
value that failed on a device raises its failure (only a device failing while the values
load, out of memory say, can stop a load part way). Values are converted to the target's dtype
as ``copy_`` does, except a floating-point (or complex) value into an integer or bool tensor
(or complex into real), which loses its meaning and raises.

Before the checks, each module may supply entries an older checkpoint lacks
(``Module._load_defaults``, in the spirit of torch's ``_load_from_state_dict``: BatchNorm2d
keeps its own ``num_batches_tracked`` for a checkpoint of torch's layout version 1, or one
without torch's ``_metadata``).

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
from collections import OrderedDict, namedtuple
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.creation import create, from_torch
from dtorch.api.settled import settled
from dtorch.api.tensor import Tensor
from dtorch.ir.opkind import CreateKind

if TYPE_CHECKING:
    from dtorch.nn.modules.module import Module


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


def state_dict(module: Module, destination: Any, prefix: str, keep_vars: bool) -> dict[str, Tensor]:
    """torch's ``state_dict``: each module's parameters, then its persistent buffers, then
    its children's entries, depth first; shared tensors appear under every name."""
    out: dict[str, Tensor] = OrderedDict() if destination is None else destination
    for name, param in module._parameters.items():
        if param is not None:
            out[prefix + name] = param if keep_vars else param.detach()
    for name, buffer in module._buffers.items():
        if buffer is not None and name not in module._non_persistent_buffers_set:
            out[prefix + name] = buffer if keep_vars else buffer.detach()
    for name, child in module._modules.items():
        if child is not None:
            state_dict(child, out, f"{prefix}{name}.", keep_vars)
    return out


# --- sources: what a checkpoint offers, one tensor at a time --------------------------------
_SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


class _MappingSource:
    """A mapping of torch or dtorch tensors."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = values

    def keys(self) -> list[str]:
        return list(self._values.keys())

    def meta(self, key: str) -> tuple[tuple[int, ...], torch.dtype]:
        value = self._values[key]
        if not isinstance(value, (torch.Tensor, Tensor)):
            raise TypeError(
                f'While copying the parameter named "{key}", expected torch.Tensor or '
                f"dtorch.Tensor from checkpoint but received {type(value)}"
            )
        return tuple(value.shape), value.dtype

    def read(self, key: str) -> Any:
        return self._values[key]

    def held(self, key: str) -> Tensor | None:
        """The dtorch tensor under ``key`` (None for a torch one: it cannot have failed)."""
        value = self._values[key]
        return value if isinstance(value, Tensor) else None

    def metadata(self, prefix: str) -> Mapping[str, Any]:
        """torch's ``_metadata`` entry of the module at ``prefix`` ({} when there is none)."""
        found = getattr(self._values, "_metadata", None)
        return {} if found is None else found.get(prefix[:-1], {})


class _SafetensorsSource:
    """A safetensors file: shapes and dtypes from its header, tensors read on demand."""

    def __init__(self, path: str, handle: Any) -> None:
        self._path, self._file = path, handle

    def keys(self) -> list[str]:
        return list(self._file.keys())

    def meta(self, key: str) -> tuple[tuple[int, ...], torch.dtype | None]:
        view = self._file.get_slice(key)
        return tuple(view.get_shape()), _SAFETENSORS_DTYPES.get(view.get_dtype())

    def read(self, key: str) -> torch.Tensor:
        # A handle per tensor: safetensors maps the file, and the pages a read touched stay
        # resident (and counted in the client's RSS) until that handle is closed.
        from safetensors import safe_open

        with safe_open(self._path, framework="pt") as handle:
            return handle.get_tensor(key)

    def held(self, key: str) -> Tensor | None:
        return None  # torch tensors only

    def metadata(self, prefix: str) -> Mapping[str, Any]:
        return {}  # the file has no torch metadata


class _WithDefaults:
    """A source and the entries the modules supply for keys it lacks (``_load_defaults``)."""

    def __init__(self, source: Any, defaults: Mapping[str, Any]) -> None:
        self._source, self._defaults = source, _MappingSource(defaults)
        self._supplied = set(defaults)

    def _of(self, key: str) -> Any:
        return self._defaults if key in self._supplied else self._source

    def keys(self) -> list[str]:
        return [*self._source.keys(), *self._defaults.keys()]

    def meta(self, key: str) -> tuple[tuple[int, ...], torch.dtype | None]:
        return self._of(key).meta(key)

    def read(self, key: str) -> Any:
        return self._of(key).read(key)

    def held(self, key: str) -> Tensor | None:
        return self._of(key).held(key)


def _with_defaults(module: Module, source: Any) -> Any:
    """``source`` with what each module's ``_load_defaults`` supplies (itself if nothing)."""
    keys = set(source.keys())
    defaults: dict[str, Any] = {}
    for prefix, sub in module.named_modules(remove_duplicate=False):
        start = f"{prefix}." if prefix else ""
        defaults.update(sub._load_defaults(start, keys, source.metadata(start)))
    return _WithDefaults(source, defaults) if defaults else source


# --- checks ---------------------------------------------------------------------------------
def _kind(dtype: torch.dtype) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex: a load may not go down this order."""
    if dtype.is_complex:
        return 3
    if dtype.is_floating_point:
        return 2
    return 0 if dtype == torch.bool else 1


def _mismatch(
    key: str, meta: tuple[tuple[int, ...], torch.dtype | None], target: Tensor, assign: bool
) -> str | None:
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
    return None


def _unexpected(module: Module, keys: list[str]) -> list[str]:
    """The keys no module claims, in torch's order: by module (depth first), a module
    claiming its own entries and the dotted keys of its children."""
    out = []
    for prefix, sub in module.named_modules(remove_duplicate=False):
        start = f"{prefix}." if prefix else ""
        own = _own_keys(sub)
        for key in keys:
            if not key.startswith(start):
                continue
            head, dot, _ = key[len(start) :].partition(".")
            if (dot and head not in sub._modules) or (not dot and head not in own):
                out.append(key)
    return out


def _own_keys(module: Module) -> set[str]:
    """A module's own state_dict names (parameters and persistent buffers with values)."""
    params = {k for k, v in module._parameters.items() if v is not None}
    buffers = {k for k, v in module._buffers.items() if v is not None}
    return params | (buffers - module._non_persistent_buffers_set)


def _errors(
    module: Module, source: Any, targets: dict[str, Tensor], strict: bool, assign: bool
) -> tuple[list[str], list[str], list[str]]:
    """(missing keys, unexpected keys, error messages) of loading ``source``."""
    keys = source.keys()
    present = set(keys)
    missing = [k for k in targets if k not in present]
    unexpected = _unexpected(module, keys)
    errors = []
    if strict and missing:
        errors.append(f"Missing key(s) in state_dict: {', '.join(map(repr_key, missing))}. ")
    if strict and unexpected:
        quoted = ", ".join(map(repr_key, unexpected))
        errors.append(f"Unexpected key(s) in state_dict: {quoted}. ")
    for key, target in targets.items():
        if key in present:
            message = _mismatch(key, source.meta(key), target, assign)
            if message is not None:
                errors.append(message)
    return missing, unexpected, errors


def repr_key(key: str) -> str:
    """A key as torch quotes it in its messages."""
    return f'"{key}"'


# --- loading --------------------------------------------------------------------------------
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


def _await_held(source: Any, loading: list[tuple[str, Tensor]]) -> None:
    """The dtorch values to load, awaited before anything is loaded: one that failed
    raises its failure, and the module keeps every value it had."""
    held = [(source.held(key), target) for key, target in loading]
    # identity, not ``in``: ``==`` on tensors records an operator
    futures = [settled(v) for v, target in held if v is not None and v is not target]
    for future in futures:
        future.get()


def _load_one(source: Any, key: str, target: Tensor, assign: bool) -> None:
    value = source.read(key)
    if value is target:  # a default the module supplied from itself: nothing to load
        return
    placed = _placed_like(value, target, assign)
    del value
    # this value alone, made on every device: the client's full tensor can go before the next
    # one is read, and a value that failed raises before its target changes
    settled(placed).get()
    if assign:
        target.data = placed
    else:
        target.copy_(placed)


def _load(module: Module, source: Any, strict: bool, assign: bool) -> IncompatibleKeys:
    targets = state_dict(module, None, "", keep_vars=True)
    source = _with_defaults(module, source)
    missing, unexpected, errors = _errors(module, source, targets, strict, assign)
    if errors:
        raise RuntimeError(
            f"Error(s) in loading state_dict for {type(module).__name__}:\n\t" + "\n\t".join(errors)
        )
    present = set(source.keys())
    loading = [(key, target) for key, target in targets.items() if key in present]
    _await_held(source, loading)
    for key, target in loading:
        _load_one(source, key, target, assign)
    return IncompatibleKeys(missing, unexpected)


def load_state_dict(
    module: Module, source: Any, *, strict: bool = True, assign: bool = False
) -> IncompatibleKeys:
    """Load ``source`` (a mapping of torch or dtorch tensors, or a safetensors path) into
    ``module``; see the module docstring for the rules."""
    if isinstance(source, (str, os.PathLike)):
        return load_safetensors(module, source, strict=strict, assign=assign)
    if not isinstance(source, Mapping):
        raise TypeError(
            f"Expected state_dict to be dict-like (or the path of a safetensors file), got "
            f"{type(source)}."
        )
    return _load(module, _MappingSource(source), strict, assign)


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
    try:
        opened = safe_open(name, framework="pt")
    except SafetensorError as error:
        raise ValueError(
            f"load_state_dict: {name} is not a safetensors file ({error}); accepted: a "
            "safetensors file, or a mapping of torch or dtorch tensors"
        ) from error
    with opened as handle:
        return _load(module, _SafetensorsSource(name, handle), strict, assign)


__all__ = ["IncompatibleKeys", "load_safetensors", "load_state_dict", "state_dict"]
