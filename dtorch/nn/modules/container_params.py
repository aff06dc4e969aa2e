"""Parameter containers: ``ParameterList`` and ``ParameterDict`` (torch.nn's, on dtorch
parameters).

Entries are registered parameters under their index (``"0"``, ``"1"``, ...) or key, so
``named_parameters()`` and ``state_dict()`` keys are torch's, and a torch container's
``state_dict`` loads (each tensor sharded onto its parameter's mesh and placements). A dtorch
tensor or a torch tensor that is no ``Parameter`` is wrapped into one as it enters
(``Parameter(value)``: a dtorch tensor's value is shared, a torch tensor is distributed on
the default mesh, Replicate); any other object is kept as a plain attribute, as torch keeps it.

Example:
    >>> import torch, dtorch
    >>> from dtorch import nn
    >>> ref = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(2)) for _ in range(2)])
    >>> params = nn.ParameterList([dtorch.zeros(2), dtorch.zeros(2)])
    >>> params.load_state_dict(ref.state_dict())
    <All keys matched successfully>
    >>> list(params.state_dict()), torch.equal(params[1].to_torch(), ref[1].detach())
    (['0', '1'], True)
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, KeysView, Mapping
from typing import Any

import torch

from dtorch.api.tensor import Tensor
from dtorch.nn.modules.module import Module
from dtorch.nn.parameter import Parameter


def _as_parameter(value: Any) -> Any:
    # torch's rule: a tensor that is no Parameter becomes one; anything else stays as it is
    if isinstance(value, (Tensor, torch.Tensor)) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _entry(key: Any, value: Any, typename: str) -> str:
    """One line of torch's repr: ``(k): Parameter containing: [torch.float32 of size 2x3]``."""
    if not isinstance(value, (Tensor, torch.Tensor)):
        return f"  ({key}): Object of type: {type(value).__name__}"
    size = "x".join(str(s) for s in value.shape)
    device = f" ({value.device})" if value.device.type == "cuda" else ""
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    return f"  ({key}): {kind} containing: [{typename} of size {size}{device}]"


class ParameterList(Module):
    """A list of parameters, registered under their index: ``ParameterList(values=None)``.

    Example:
        >>> import dtorch
        >>> params = dtorch.nn.ParameterList([dtorch.ones(2)])
        >>> _ = params.append(dtorch.zeros(3, dtype=dtorch.float64))
        >>> print(params)
        ParameterList(
            (0): Parameter containing: [torch.float32 of size 2]
            (1): Parameter containing: [torch.float64 of size 3]
        )
        >>> [name for name, _ in params.named_parameters()]
        ['0', '1']
    """

    _size: int

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _key(self, idx: Any) -> str:
        """``idx`` (any int-like, negative from the end) as its attribute name; torch's
        IndexError."""
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError(f"index {idx} is out of range")
        return str(idx % len(self))

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):  # a new list of the same parameters, as torch
            return type(self)([self[i] for i in range(*idx.indices(len(self)))])
        return getattr(self, self._key(idx))

    def __setitem__(self, idx: int, param: Any) -> None:
        setattr(self, self._key(idx), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def __iadd__(self, parameters: Iterable[Any]) -> ParameterList:
        return self.extend(parameters)

    def __dir__(self) -> list[str]:
        return [key for key in super().__dir__() if not key.isdigit()]

    def append(self, value: Any) -> ParameterList:
        """torch's: add ``value`` at the end (a tensor made a Parameter) and return the list."""
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        """torch's: append every value of an iterable (a tensor is refused, not unpacked).

        Example:
            >>> import dtorch
            >>> len(dtorch.nn.ParameterList().extend([dtorch.ones(1), dtorch.ones(2)]))
            2
        """
        if not isinstance(values, Iterable) or isinstance(values, (Tensor, torch.Tensor)):
            raise TypeError(
                "ParameterList.extend should be called with an iterable, but got "
                + type(values).__name__
            )
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_entry(k, p, str(p.dtype) if hasattr(p, "dtype") else "")
                         for k, p in enumerate(self))  # fmt: skip

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterList should not be called.")


def _legacy_typename(value: Any) -> str:
    # torch.typename of a tensor, from its dtype: torch.FloatTensor, torch.DoubleTensor, ...
    return torch.empty(0, dtype=value.dtype).type() if hasattr(value, "dtype") else ""


class ParameterDict(Module):
    """An ordered dict of parameters, registered under their (str) keys:
    ``ParameterDict(parameters=None)``; a plain dict given to it or to ``update`` is taken
    in sorted key order, an ``OrderedDict`` or a ``ParameterDict`` in its own (torch's rule).

    Example:
        >>> import dtorch
        >>> params = dtorch.nn.ParameterDict({"scale": dtorch.ones(2), "shift": dtorch.zeros(2)})
        >>> list(params.state_dict()), "scale" in params, params["shift"].tolist()
        (['scale', 'shift'], True, [0.0, 0.0])
        >>> params
        ParameterDict(
            (scale): Parameter containing: [torch.FloatTensor of size 2]
            (shift): Parameter containing: [torch.FloatTensor of size 2]
        )
    """

    _keys: dict[str, None]

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def _key_to_attr(self, key: Any) -> str:
        if not isinstance(key, str):
            raise TypeError(
                "Index given to ParameterDict cannot be used as a key as it is not a string "
                f"(type is '{type(key).__name__}')"
            )
        return key

    def __getitem__(self, key: str) -> Any:
        return getattr(self, self._key_to_attr(key))

    def __setitem__(self, key: str, value: Any) -> None:
        attr = self._key_to_attr(key)
        setattr(self, attr, _as_parameter(value))
        self._keys[key] = None  # after the registration: a refused key is not listed

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, self._key_to_attr(key))

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def copy(self) -> ParameterDict:
        """A new ParameterDict of the same parameters (shared, as torch's copy shares them)."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key: str, default: Any = None) -> Any:
        """torch's: ``self[key]``, set to ``default`` first when absent."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        """Remove every entry."""
        for key in list(self._keys):
            del self[key]

    def pop(self, key: str) -> Any:
        """Remove ``key`` and return its value."""
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> tuple[str, Any]:
        """Remove the last entry and return its (key, value)."""
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def get(self, key: str, default: Any = None) -> Any:
        """``self[key]``, or ``default`` when absent."""
        return self[key] if key in self else default  # noqa: SIM401 (this is get)

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> ParameterDict:
        """A new ParameterDict with ``keys``, each holding ``default`` (torch's method)."""
        return ParameterDict((k, default) for k in keys)

    def keys(self) -> KeysView[str]:
        return self._keys.keys()

    def items(self) -> Iterable[tuple[str, Any]]:
        return ((k, self[k]) for k in self._keys)

    def values(self) -> Iterable[Any]:
        return (self[k] for k in self._keys)

    def update(self, parameters: Any) -> None:
        """torch's: the pairs of a mapping (sorted unless ordered) or of an iterable of
        key/value pairs, in order.

        Example:
            >>> import dtorch
            >>> params = dtorch.nn.ParameterDict()
            >>> params.update({"b": dtorch.ones(1), "a": dtorch.ones(1)}); list(params)
            ['a', 'b']
        """
        if not isinstance(parameters, Iterable):
            raise TypeError(
                "ParametersDict.update should be called with an iterable of key/value pairs, "
                "but got " + type(parameters).__name__
            )
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = list(parameters.items())
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = [_pair(j, p) for j, p in enumerate(parameters)]
        for key, value in pairs:
            self[key] = value

    def extra_repr(self) -> str:
        return "\n".join(_entry(k, p, _legacy_typename(p)) for k, p in self.items())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other: ParameterDict) -> ParameterDict:
        made = self.copy()
        made.update(other)
        return made

    def __ror__(self, other: ParameterDict) -> ParameterDict:
        made = other.copy()
        made.update(self)
        return made

    def __ior__(self, other: ParameterDict) -> ParameterDict:
        self.update(other)
        return self


def _pair(j: int, item: Any) -> tuple[Any, Any]:
    # one (key, value) element of an update sequence; torch's messages
    if not isinstance(item, Iterable):
        raise TypeError(
            f"ParameterDict update sequence element #{j} should be Iterable; is "
            f"{type(item).__name__}"
        )
    items = list(item)
    if len(items) != 2:
        raise ValueError(
            f"ParameterDict update sequence element #{j} has length {len(items)}; 2 is required"
        )
    return items[0], items[1]


__all__ = ["ParameterDict", "ParameterList"]
