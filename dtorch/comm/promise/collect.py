"""VoidFutureCollect: several VoidFutures (one per device or stream) waited on as one.

``get``/``wait`` share one deadline across the futures and raise the first error in order;
``is_ready`` is true when all are settled; ``await`` awaits each in turn on the running loop.

Example:
    >>> from dtorch.comm.promise import create_void_promise
    >>> from dtorch.ir.opkind import PromiseKind
    >>> promises = [create_void_promise(PromiseKind.MEMORY) for _ in range(2)]
    >>> collect = VoidFutureCollect([p.get_future() for p in promises])
    >>> promises[0].set_value(); collect.is_ready()
    False
    >>> promises[1].set_value(); collect.is_ready(), collect.get()
    (True, None)
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable
from typing import Any

from dtorch.comm.promise.base import VoidFuture, resolve_timeout
from dtorch.errors import FutureTimeoutError


class VoidFutureCollect:
    """Waits for every future of ``futures``; see the module docstring."""

    __slots__ = ("_futures",)

    def __init__(self, futures: Iterable[VoidFuture]) -> None:
        self._futures = tuple(futures)
        for future in self._futures:
            if not isinstance(future, VoidFuture):
                raise TypeError(f"VoidFutureCollect takes VoidFutures, got {type(future).__name__}")

    def __len__(self) -> int:
        return len(self._futures)

    def get(self, timeout_s: float | None = None) -> None:
        """Block until all are settled (one deadline for all); raise the first error."""
        seconds = resolve_timeout(timeout_s)
        deadline = time.monotonic() + seconds
        for index, future in enumerate(self._futures):
            if not future.wait_for(int(max(0.0, deadline - time.monotonic()) * 1000)):
                raise FutureTimeoutError(
                    f"VoidFutureCollect: future {index} of {len(self._futures)} was not ready "
                    f"after {seconds:g}s"
                )
        for future in self._futures:
            future.get(0)

    def wait(self, timeout_s: float | None = None) -> None:
        """The same as ``get``."""
        self.get(timeout_s)

    def is_ready(self) -> bool:
        """True once every future is settled."""
        return all(future.is_ready() for future in self._futures)

    def __await__(self) -> Generator[Any, None, None]:
        for future in self._futures:
            yield from future.__await__()
