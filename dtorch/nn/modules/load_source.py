"""What ``load_state_dict`` reads from: a checkpoint's entries, one tensor at a time.

A source (a mapping of torch or dtorch tensors, or a safetensors file) offers its keys, each
entry's shape and dtype without reading it (``meta``), and the entry itself on demand
(``read``). ``LoadView`` is the ``state_dict`` argument that ``Module._load_from_state_dict``
gets, as torch's: a mutable mapping over a source, so that an override may rename, add or
drop entries (``state_dict[new] = state_dict.pop(old)``) before the default method plans the
loads; entries nobody touched stay unread in the source until their turn to load, so the
client holds about one full tensor at a time. A view also carries the plan the default
method appends to (see ``dtorch.nn.modules.state``).

Example:
    >>> import torch
    >>> view = LoadView(MappingSource({"a.w": torch.ones(2), "b": torch.zeros(1)}), [])
    >>> view["a.v"] = view.pop("a.w")
    >>> list(view), view.meta("a.v"), list(view.within("a."))
    (['b', 'a.v'], ((2,), torch.float32), ['a.v'])
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import torch

from dtorch.api.tensor import Tensor

#: What ``meta`` gives: (shape, dtype), the dtype None where torch has none for the file's.
Meta = tuple[tuple[int, ...], torch.dtype | None]

#: The safetensors dtypes loaded (safetensors' own table for torch); the others (sub-byte
#: floats: a shape in the header that is not the tensor's) are refused before anything loads.
_SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E4M3FNUZ": torch.float8_e4m3fnuz,
    "F8_E5M2": torch.float8_e5m2,
    "F8_E5M2FNUZ": torch.float8_e5m2fnuz,
    "C64": torch.complex64,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U64": torch.uint64,
    "U32": torch.uint32,
    "U16": torch.uint16,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def meta_of(value: Any) -> Meta | None:
    """A torch or dtorch tensor's (shape, dtype); None for anything else."""
    if not isinstance(value, (torch.Tensor, Tensor)):
        return None
    if isinstance(value, torch.Tensor) and value.is_nested:  # no shape to ask for
        return (), value.dtype
    return tuple(value.shape), value.dtype


def unloadable(value: Any) -> str | None:
    """Why a torch tensor holds no values to load (torch's load fails on it half-way); None
    for one that loads (any other value is judged by ``meta_of``)."""
    if not isinstance(value, torch.Tensor):
        return None
    if value.is_nested:
        return "a nested tensor has no one shape to load"
    if value.is_meta:
        return "a tensor on the meta device holds no values"
    if value.layout != torch.strided:
        return f"a {value.layout} tensor is not loaded; accepted: a dense one (to_dense())"
    if value.is_quantized:
        return "a quantized tensor is not loaded as it is; accepted: .dequantize() of it"
    return None


def held_of(value: Any) -> Tensor | None:
    """``value`` when it is a dtorch tensor (which may have failed on its devices)."""
    return value if isinstance(value, Tensor) else None


class MappingSource:
    """A mapping of torch or dtorch tensors (other values are reported by the loader)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = values

    def keys(self) -> list[str]:
        return list(self._values.keys())

    def meta(self, key: str) -> Meta | None:
        return meta_of(self._values[key])

    def refusal(self, key: str) -> str | None:
        return unloadable(self._values[key])

    def read(self, key: str) -> Any:
        return self._values[key]


class SafetensorsSource:
    """A safetensors file: shapes and dtypes from its header, tensors read on demand.

    Each read opens the file again (see ``read``), so the file must stay the one whose header
    was checked: a read refuses a file replaced or changed since (another inode, size or
    modification time) and a tensor unlike its header entry, rather than load it."""

    def __init__(self, path: str, handle: Any, status: os.stat_result) -> None:
        self._path, self._file, self._identity = path, handle, _identity(status)

    def keys(self) -> list[str]:
        return list(self._file.keys())

    def meta(self, key: str) -> Meta | None:
        view = self._file.get_slice(key)
        return tuple(view.get_shape()), _SAFETENSORS_DTYPES.get(view.get_dtype())

    def refusal(self, key: str) -> str | None:
        dtype = self._file.get_slice(key).get_dtype()
        if dtype in _SAFETENSORS_DTYPES:
            return None
        return f"its dtype {dtype} is not loaded; accepted: {', '.join(_SAFETENSORS_DTYPES)}"

    def read(self, key: str) -> torch.Tensor:
        # A handle per tensor: safetensors maps the file, and the pages a read touched stay
        # resident (and counted in the client's RSS) until that handle is closed.
        from safetensors import safe_open

        with safe_open(self._path, framework="pt") as handle:
            if _identity(os.stat(self._path)) != self._identity:
                raise RuntimeError(
                    f"{self._path!r} changed while it was being loaded (before {key!r} was "
                    "read); the entries loaded before it are loaded. Load it again"
                )
            tensor: torch.Tensor = handle.get_tensor(key)
        if (tuple(tensor.shape), tensor.dtype) != self.meta(key):
            raise RuntimeError(f"{self._path!r}: {key!r} is not the tensor its header declares")
        return tensor


def _identity(status: os.stat_result) -> tuple[int, ...]:
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


class _Unread:
    """The mark of an entry still in the source (read when it loads)."""


_UNREAD = _Unread()


class LoadView(MutableMapping[str, Any]):
    """A source's entries as a mutable mapping (see the module docstring); ``plan`` is the
    list of load steps the modules add to, shared by every view of one load."""

    def __init__(self, source: Any, plan: list[Any], entries: dict[str, Any] | None = None):
        self._source, self.plan = source, plan
        self._entries = dict.fromkeys(source.keys(), _UNREAD) if entries is None else entries

    def __getitem__(self, key: str) -> Any:
        value = self._entries[key]
        return self._source.read(key) if value is _UNREAD else value

    def __setitem__(self, key: str, value: Any) -> None:
        self._entries[key] = value

    def __delitem__(self, key: str) -> None:
        del self._entries[key]

    def __contains__(self, key: object) -> bool:
        return key in self._entries  # without reading the entry

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def meta(self, key: str) -> Meta | None:
        """``key``'s (shape, dtype), read from the source's header where it is unread."""
        value = self._entries[key]
        return self._source.meta(key) if value is _UNREAD else meta_of(value)

    def refusal(self, key: str) -> str | None:
        """Why ``key``'s tensor cannot load (None: it can), known before anything loads."""
        value = self._entries[key]
        return self._source.refusal(key) if value is _UNREAD else unloadable(value)

    def held(self, key: str) -> Tensor | None:
        """The dtorch tensor under ``key`` (None for a torch one: it cannot have failed)."""
        value = self._entries[key]
        if value is _UNREAD:
            value = self._source.read(key) if isinstance(self._source, MappingSource) else None
        return held_of(value)

    def within(self, prefix: str) -> LoadView:
        """The entries under ``prefix`` in a view of their own (torch gives each child a
        copy of its entries), on the same source and plan."""
        entries = {k: v for k, v in self._entries.items() if k.startswith(prefix)}
        return LoadView(self._source, self.plan, entries)


__all__ = ["LoadView", "MappingSource", "Meta", "SafetensorsSource", "meta_of", "unloadable"]
