"""InferenceCache: ``infer`` answers remembered per operator param and input metadata.

A loop records the same operators on operands of the same shapes, dtypes, meshes and
placements again and again; running the rule each time costs more than the rest of recording.
Rules are pure functions of the param, the inputs' metadata and torch's default dtype (scalar
promotion), so an answer can be reused whenever those are the same.

The key holds ``id()`` of the param, the mesh and the placements tuple, not their values:
hashing and comparing those dataclasses would cost most of what the cache saves. The entry
keeps those objects alive, so an id in a live key always names the object it was taken from.
Equal but distinct objects only miss (and add an entry); they never get another's answer.
Outputs' placements come from the cached answer, so in a loop the next operator's inputs carry
the very objects of the key. The table is cleared when it reaches ``limit`` entries; errors
are never cached (the rule raises again).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.opkind import MathKind
    >>> from dtorch.ir.params import BaseMathParam
    >>> from dtorch.ir.placement import Shard
    >>> cache = InferenceCache()
    >>> x = Operand(1, (4,), torch.float32, init_device_mesh("cpu", 2), (Shard(0),))
    >>> neg = BaseMathParam(MathKind.NEG)
    >>> cache.infer("neg", neg, (x,)) is cache.infer("neg", neg, (x,))
    True
    >>> len(cache)
    1
"""

from __future__ import annotations

from typing import Any

import torch

from dtorch.ir.operator import Operand
from dtorch.ir.params import OpParam
from dtorch.ir.rules.base import Inference
from dtorch.ir.rules.registry import infer as infer_uncached

_default_dtype = torch.get_default_dtype


class InferenceCache:
    """Remembered ``infer`` answers (see the module docstring); one per graph."""

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int = 4096) -> None:
        if limit < 1:
            raise ValueError(f"an InferenceCache needs a limit of at least 1 entry, got {limit}")
        # key -> (answer, the objects whose ids the key holds)
        self._entries: dict[tuple[Any, ...], tuple[Inference, tuple[Any, ...]]] = {}
        self._limit = limit

    def __len__(self) -> int:
        return len(self._entries)

    def infer(self, name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
        """``dtorch.ir.rules.infer(name, param, inputs)``, from the table when it can be."""
        # The usual arities without a loop: this is the per-operator hot path.
        if len(inputs) == 2:  # binary operators
            a, b = inputs
            key: tuple[Any, ...] = (
                id(param), _default_dtype(),
                a.shape, a.dtype, id(a.mesh), id(a.placements),
                b.shape, b.dtype, id(b.mesh), id(b.placements),
            )  # fmt: skip
        elif len(inputs) == 1:  # unary operators and views
            x = inputs[0]
            key = (id(param), _default_dtype(), x.shape, x.dtype, id(x.mesh), id(x.placements))
        else:
            key = _key(param, inputs)
        entry = self._entries.get(key)
        if entry is not None:
            return entry[0]
        answer = infer_uncached(name, param, inputs)
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[key] = (answer, _held(param, inputs))
        return answer


def _key(param: OpParam, inputs: tuple[Operand, ...]) -> tuple[Any, ...]:
    key: list[Any] = [id(param), _default_dtype()]
    for o in inputs:
        key += (o.shape, o.dtype, id(o.mesh), id(o.placements))
    return tuple(key)


def _held(param: OpParam, inputs: tuple[Operand, ...]) -> tuple[Any, ...]:
    """The objects a key names by id: kept alive by the entry so no id is reused meanwhile."""
    return (param, *[o.mesh for o in inputs], *[o.placements for o in inputs])
