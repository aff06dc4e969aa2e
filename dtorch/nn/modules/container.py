"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict`` (torch.nn's, on dtorch modules).

Children are registered under their index (``"0"``, ``"1"``, ...) or key, so parameter names
and ``state_dict`` keys are torch's (``0.weight``); deleting renumbers, as torch does.

Example:
    >>> from dtorch import nn
    >>> seq = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> len(seq), type(seq[1]).__name__, len(seq[1:]), list(seq.state_dict())[-1]
    (3, 'ReLU', 2, '2.bias')
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch

from dtorch.nn.modules.module import Module, _addindent, _torch_member
from dtorch.nn.modules.torch_children import Child


def _index(container: Module, idx: Any) -> int:
    """``idx`` (any int-like, negative from the end) as a position; torch's IndexError."""
    size = len(container._modules)
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range")
    return idx % size


def _delete(container: Module, idx: Any) -> None:
    """``del container[idx]`` (an index or a slice) for Sequential and ModuleList, renumbered."""
    keys = list(container._modules)
    for key in keys[idx] if isinstance(idx, slice) else [keys[_index(container, idx)]]:
        delattr(container, key)
    _renumber(container)


def _renumber(container: Module) -> None:
    """Keys ``"0"..`` in order again, after a deletion (torch keeps the numbering dense)."""
    modules = list(container._modules.values())
    container._modules.clear()
    container._modules.update((str(i), m) for i, m in enumerate(modules))


def _factor(container: Module, other: Any) -> int:
    """torch's checks of the factor of ``Sequential * n``: a positive int."""
    if not isinstance(other, int):  # a bool is an int to torch too
        raise TypeError(f"unsupported operand type(s) for *: {type(container)} and {type(other)}")
    if other <= 0:
        raise ValueError(f"Non-positive multiplication factor {other} for {type(container)}")
    return other


def _check_child(name: str, module: Any) -> None:
    # the refusal add_module would raise, before an insert takes the children apart
    if isinstance(module, torch.nn.Module) and (refused := _torch_member(name, module)):
        raise refused


class Sequential(Module):
    """Modules called in order, each on the previous one's output: ``Sequential(*modules)``
    or ``Sequential(OrderedDict(name=module, ...))``.

    Example:
        >>> import dtorch
        >>> from dtorch import nn
        >>> seq = nn.Sequential(nn.ReLU(), nn.Tanh())
        >>> seq.append(nn.Identity())[2]
        Identity()
        >>> seq(dtorch.tensor([-1.0, 0.0])).tolist()
        [0.0, 0.0]
    """

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx: Any) -> Any:
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return type(self)(OrderedDict(items[idx]))
        return items[_index(self, idx)][1]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules)[_index(self, idx)]
        self.add_module(key, module)

    def __delitem__(self, idx: Any) -> None:
        _delete(self, idx)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Any]:
        """What ``_modules`` holds, a None entry included (torch's: calling the Sequential
        then raises torch's TypeError at it)."""
        return iter(self._modules.values())

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(
                "add operator supports only objects of Sequential class, but "
                f"{type(other)} is given."
            )
        return Sequential(*self, *other)

    def __iadd__(self, other: Sequential) -> Sequential:
        """torch's ``seq += other``: ``other``'s modules appended in place."""
        if not isinstance(other, Sequential):
            raise ValueError(
                "add operator supports only objects of Sequential class, but "
                f"{type(other)} is given."
            )
        return self.extend(list(other))

    def __mul__(self, other: int) -> Sequential:
        """torch's ``seq * n``: a new Sequential of the modules ``n`` times over - the same
        module objects (shared, not copied, as torch shares them).

        Example:
            >>> from dtorch import nn
            >>> seq = nn.Sequential(nn.ReLU()) * 3
            >>> len(seq), seq[0] is seq[2]
            (3, True)
        """
        return Sequential(*(list(self) * _factor(self, other)))

    def __rmul__(self, other: int) -> Sequential:
        return self.__mul__(other)

    def __imul__(self, other: int) -> Sequential:
        """torch's ``seq *= n``: the modules repeated in place (shared objects)."""
        return self.extend(list(self) * (_factor(self, other) - 1))

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Sequential:
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Child) -> Sequential:
        _check_child(str(index), module)  # before the children are taken apart
        if not isinstance(module, Module | torch.nn.Module):
            raise AssertionError(f"module should be of type: {Module}")
        modules = list(self._modules.values())
        size = len(modules)
        if not -size <= index <= size:
            raise IndexError(f"Index out of range: {index}")
        modules.insert(index + size if index < 0 else index, module)
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)
        return self

    def pop(self, key: int | slice) -> Any:
        value = self[key]
        del self[key]
        return value

    def forward(self, input: Any) -> Any:
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered under their index: ``ModuleList(modules=None)``.

    Example:
        >>> from dtorch import nn
        >>> layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
        >>> _ = layers.append(nn.ReLU())
        >>> print(layers)
        ModuleList(
          (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)
          (3): ReLU()
        )
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx: Any) -> Any:
        values: list[Any] = list(self._modules.values())
        if isinstance(idx, slice):
            return type(self)(values[idx])
        return values[_index(self, idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(_index(self, idx)), module)

    def __delitem__(self, idx: Any) -> None:
        _delete(self, idx)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """torch's: append every module of an iterable (a list, a ModuleList, a Sequential).

        Example:
            >>> from dtorch import nn
            >>> layers = nn.ModuleList([nn.ReLU()]).extend(nn.Sequential(nn.Tanh()))
            >>> len(layers), type(layers[1]).__name__
            (2, 'Tanh')
        """
        if not isinstance(modules, Iterable):
            raise TypeError(
                "ModuleList.extend should be called with an iterable, but got "
                + type(modules).__name__
            )
        for module in list(modules):  # a list first: ``layers += layers`` doubles them
            self.append(module)
        return self

    def insert(self, index: int, module: Child) -> None:
        _check_child(str(index), module)  # before the children are taken apart
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def pop(self, key: int | slice) -> Any:
        value = self[key]
        del self[key]
        return value

    def __repr__(self) -> str:
        """torch's repr: runs of equal children print once, as ``(0-2): 3 x ...``."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return f"{self._get_name()}()"
        runs: list[list[Any]] = []  # [first index, last index, repr]
        for i, text in enumerate(reprs):
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        lines = [
            _addindent(f"({a}): {t}" if a == b else f"({a}-{b}): {b - a + 1} x {t}", 2)
            for a, b, t in runs
        ]
        return f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules, registered under their keys: ``ModuleDict(modules=None)``.

    Example:
        >>> from dtorch import nn
        >>> d = nn.ModuleDict({"act": nn.ReLU(), "proj": nn.Linear(2, 1)})
        >>> list(d), "act" in d, list(d.state_dict())
        (['act', 'proj'], True, ['proj.weight', 'proj.bias'])
    """

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]  # type: ignore[return-value]  # None only when set so

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        value = self[key]
        del self[key]
        return value

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def items(self) -> Iterable[tuple[str, Child | None]]:
        return self._modules.items()

    def values(self) -> Iterable[Child | None]:
        return self._modules.values()

    def update(self, modules: Any) -> None:
        """torch's: the pairs of a mapping (a ModuleDict too, as torch) or of an iterable of
        key/value pairs, in order.

        Example:
            >>> from dtorch import nn
            >>> d = nn.ModuleDict(nn.ModuleDict({"a": nn.ReLU()}))
            >>> d.update(nn.ModuleDict({"b": nn.Tanh()})); list(d)
            ['a', 'b']
        """
        if isinstance(modules, (Mapping, ModuleDict)):
            pairs = list(modules.items())
        elif isinstance(modules, Iterable):
            pairs = [tuple(pair) for pair in modules]
        else:
            raise TypeError(
                "ModuleDict.update should be called with an iterable of key/value pairs, but got "
                + type(modules).__name__
            )
        for pair in pairs:
            if len(pair) != 2:
                raise ValueError(
                    f"ModuleDict update sequence element has length {len(pair)}; 2 is required"
                )
            self[pair[0]] = pair[1]


__all__ = ["ModuleDict", "ModuleList", "Sequential"]
