"""The runner's promise table, and the collector that turns several parties' reports into one
value.

The client registers a promise (or a collector) under its handle's name before it records the
GetTensor, Sync or Memory operator that names it; the stream resolves the handle here. A
collector waits for every party (each stream, for Sync and Memory), then sets its promise once:
with the value built from the reports, or with the first failure any party reported.

Example:
    >>> import torch
    >>> from dtorch.comm.promise import create_promise
    >>> from dtorch.ir.opkind import PromiseKind
    >>> promise = create_promise(PromiseKind.MEMORY)
    >>> collector = CountdownCollector(2, promise, lambda reports: torch.tensor(reports))
    >>> collector.add(3), collector.add(4), promise.get_future().get().tolist()
    (False, True, [3, 4])
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dtorch.errors import KernelError


@dataclass(frozen=True, slots=True)
class KernelFailure:
    """Stands in for the shards of an operator that failed; later kernels pass it on."""

    error: KernelError


class ValueSink(Protocol):
    """What a collector delivers to: a promise's setters."""

    def set_value(self, value: Any) -> None: ...

    def set_error(self, error: BaseException) -> None: ...


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

    def set_error(self, error: BaseException) -> None:
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

    def fail_all(self, error: BaseException) -> None:
        """Settle every live promise and collector with ``error`` (the runner stopped or broke:
        nothing will set them any more)."""
        with self._lock:
            items, self._items = list(self._items.values()), {}
        for target in items:
            target.set_error(error)  # type: ignore[attr-defined]
