"""The runner's promise table and the collectors that turn per-device results into one value.

The client registers a promise under its handle's name before it records the GetTensor, Sync
or Memory operator that names it; the kernel resolves the handle here. A collector waits for
every device of the operator, then sets the promise once: with the assembled tensor, or with
the first failure any device reported.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.placement import Shard
    >>> a = Operand(1, (5,), torch.float32, init_device_mesh("cpu", 2), (Shard(0),))
    >>> assemble(a, {0: torch.zeros(3), 1: torch.ones(2)}).tolist()
    [0.0, 0.0, 0.0, 1.0, 1.0]
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from dtorch.errors import KernelError
from dtorch.ir.operator import Operand
from dtorch.ir.sharding import is_replica_leader


@dataclass(frozen=True, slots=True)
class KernelFailure:
    """Stands in for the shards of an operator that failed; later kernels pass it on."""

    error: KernelError


class ValueSink(Protocol):
    """What a collector delivers to: a promise's setters."""

    def set_value(self, value: Any) -> None: ...

    def set_error(self, error: BaseException) -> None: ...


def assemble(operand: Operand, shards: Mapping[int, torch.Tensor]) -> torch.Tensor:
    """The full tensor from every device's shard: Shard concatenated, Replicate one copy,
    Partial summed (in device order)."""
    mesh, placements = operand.mesh, operand.placements
    partial = any(p.is_partial() for p in placements)
    full = torch.zeros(operand.shape, dtype=operand.dtype)
    for device in mesh.device_ids:
        coordinate = mesh.coordinate_of(device)
        if not is_replica_leader(placements, coordinate):
            continue
        index = operand.shard(device).slices()
        full[index] = full[index] + shards[device] if partial else shards[device]
    return full


class ShardCollector:
    """Collects one operand's shards from every device, then sets ``sink`` once."""

    def __init__(self, operand: Operand, sink: ValueSink) -> None:
        self._operand = operand
        self._sink = sink
        self._lock = threading.Lock()
        self._shards: dict[int, torch.Tensor] = {}
        self._failure: KernelFailure | None = None
        self._expected = operand.mesh.size()
        self._arrived = 0

    def add(self, device: int, shard: torch.Tensor | KernelFailure) -> bool:
        """Report ``device``'s shard (each device reports exactly once); True when complete."""
        with self._lock:
            if isinstance(shard, KernelFailure):
                self._failure = self._failure or shard
            else:
                self._shards[device] = shard
            self._arrived += 1
            done = self._arrived == self._expected
        if done:
            self._finish()
        return done

    def fail(self, error: BaseException) -> None:
        """Settle with ``error`` now (the runner stopped before every device reported)."""
        with self._lock:
            if self._arrived >= self._expected:
                return
            self._arrived = self._expected
        self._sink.set_error(error)

    def _finish(self) -> None:
        if self._failure is not None:
            self._sink.set_error(self._failure.error)
            return
        try:
            value = assemble(self._operand, self._shards)
        except Exception as error:  # assembly is our code: surface it on the future
            self._sink.set_error(error)
            return
        self._sink.set_value(value)


class CountdownCollector:
    """Sets ``sink`` once ``expected`` parties reported; ``finish`` builds the value."""

    def __init__(
        self,
        expected: int,
        sink: ValueSink,
        finish: Callable[[list[object]], Any],
    ) -> None:
        self._expected = expected
        self._sink = sink
        self._finish = finish
        self._lock = threading.Lock()
        self._reports: list[object] = []
        self._failure: BaseException | None = None

    def add(self, report: object, failure: BaseException | None = None) -> bool:
        """Report one party's result (and its failure, if any); True when complete."""
        with self._lock:
            self._reports.append(report)
            self._failure = self._failure or failure
            done = len(self._reports) == self._expected
        if not done:
            return False
        if self._failure is not None:
            self._sink.set_error(self._failure)
        else:
            self._settle()
        return True

    def fail(self, error: BaseException) -> None:
        """Settle with ``error`` now (the runner stopped before every party reported)."""
        with self._lock:
            if len(self._reports) >= self._expected:
                return
            self._reports.extend([None] * (self._expected - len(self._reports)))
        self._sink.set_error(error)

    def _settle(self) -> None:
        try:
            value = self._finish(self._reports)
        except Exception as error:  # building the value is our code: surface it on the future
            self._sink.set_error(error)
            return
        self._sink.set_value(value)


class PromiseTable:
    """Live promises and collectors of one runner, by handle name (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, object] = {}

    def add(self, name: str, target: object) -> None:
        with self._lock:
            if name in self._items:
                raise KeyError(f"promise {name!r} is already registered")
            self._items[name] = target

    def get(self, name: str) -> object:
        with self._lock:
            return self._items[name]

    def pop(self, name: str) -> object:
        with self._lock:
            return self._items.pop(name)

    def drain(self) -> list[object]:
        """Remove and return every live target (the runner fails them when it stops)."""
        with self._lock:
            items, self._items = list(self._items.values()), {}
        return items
