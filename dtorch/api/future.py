"""Futures the user holds: ``TensorFuture`` (a value) and ``VoidFutureCollect`` (a sync).

A ``TensorFuture`` wraps the communication layer's future and keeps the ``Tensor`` it came from
alive, so the operand is not released before its value arrived. Waiting raises the kernel
failure that produced the value, naming the operator and the user's line. A wait that times
out (``FutureTimeoutError``) says whom it waited for: the runner names the worker that owes
the value - its index, pid, devices and process state - and any worker process that is
stopped (``Runner.waiting_on``); so does a sync's.

Example:
    >>> import asyncio, dtorch
    >>> future = dtorch.arange(4).to_torch_async()
    >>> future.get().tolist()
    [0, 1, 2, 3]
    >>> future.is_ready(), future.wait_for(10)
    (True, True)
    >>> asyncio.run(_await(future)).tolist()
    [0, 1, 2, 3]
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import torch

from dtorch.comm.promise import TensorFuture as CommTensorFuture
from dtorch.comm.promise import VoidFutureCollect as CommVoidFutureCollect
from dtorch.comm.promise import create_promise, create_void_promise
from dtorch.errors import FutureTimeoutError, KernelError
from dtorch.ir.opkind import PromiseKind
from dtorch.ir.params import PromiseHandle
from dtorch.runtime.settle import CountdownCollector, RaisedFailures, SyncCollector

if TYPE_CHECKING:
    from dtorch.api.graph import Graph

#: Says whom a wait that timed out waits for (``Runner.waiting_on`` of some parties), or ''.
Waiting = Callable[[], str]


def explain_timeout(error: FutureTimeoutError, waiting: Waiting | None) -> None:
    """Add to ``error``'s message whom the wait waited for (a stopped or hung worker)."""
    if waiting is None:
        return
    try:
        detail = waiting()
    except Exception:  # the timeout is the news: a failing diagnosis must not replace it
        return
    if detail:
        error.args = (f"{error}; {detail}",)


class TensorFuture:
    """The value of a Tensor, on its way: ``get``, ``wait``, ``wait_for``, ``is_ready``,
    ``await``. ``waiting`` names, should a wait time out, whom it waits for."""

    __slots__ = ("_future", "_guard", "_raised", "_waiting")

    def __init__(
        self,
        future: CommTensorFuture,
        guard: object,
        raised: RaisedFailures,
        waiting: Waiting | None = None,
    ) -> None:
        self._future = future
        self._guard = guard  # the Tensor: its operand must outlive the fetch
        self._raised = raised  # the graph's: a failure raised here is not raised by sync()
        self._waiting = waiting

    def get(self, timeout_s: float | None = None) -> torch.Tensor:
        """Block until the value is there and return it (raises a kernel failure, or a
        FutureTimeoutError that names the worker the value waits for)."""
        try:
            return self._future.get(timeout_s)
        except KernelError as error:
            self._raised.note(error)
            raise
        except FutureTimeoutError as error:
            explain_timeout(error, self._waiting)
            raise

    def wait(self, timeout_s: float | None = None) -> None:
        """Block until the value is there (raises as ``get`` does)."""
        try:
            self._future.wait(timeout_s)
        except KernelError as error:
            self._raised.note(error)
            raise
        except FutureTimeoutError as error:
            explain_timeout(error, self._waiting)
            raise

    def wait_for(self, timeout_ms: int) -> bool:
        """Wait up to ``timeout_ms``; True if the value (or its failure) is there."""
        return self._future.wait_for(timeout_ms)

    def is_ready(self) -> bool:
        return self._future.is_ready()

    def __await__(self) -> Generator[Any, None, torch.Tensor]:
        try:
            return (yield from self._future.__await__())
        except KernelError as error:
            self._raised.note(error)
            raise
        except FutureTimeoutError as error:
            explain_timeout(error, self._waiting)
            raise


class VoidFutureCollect:
    """Completion of a ``Graph.sync_future()``: ``get``, ``wait``, ``is_ready``, ``await``.
    ``waiting`` names, should a wait time out, whom it waits for."""

    __slots__ = ("_collect", "_waiting")

    def __init__(self, futures: list[Any], waiting: Waiting | None = None) -> None:
        self._collect = CommVoidFutureCollect(futures)
        self._waiting = waiting

    def get(self, timeout_s: float | None = None) -> None:
        """Block until every operator recorded before the sync ran; raise the first failure
        (or a FutureTimeoutError that names the workers that did not report)."""
        try:
            self._collect.get(timeout_s)
        except FutureTimeoutError as error:
            explain_timeout(error, self._waiting)
            raise

    def wait(self, timeout_s: float | None = None) -> None:
        """The same as ``get``."""
        self.get(timeout_s)

    def is_ready(self) -> bool:
        return self._collect.is_ready()

    def __await__(self) -> Generator[Any, None, None]:
        try:
            yield from self._collect.__await__()
        except FutureTimeoutError as error:
            explain_timeout(error, self._waiting)
            raise


class _VoidSink:
    """Adapts a void promise to a collector's ``set_value(value)``."""

    __slots__ = ("_promise",)

    def __init__(self, promise: Any) -> None:
        self._promise = promise

    def set_value(self, value: object) -> None:
        self._promise.set_value()

    def set_error(self, error: BaseException) -> None:
        self._promise.set_error(error)


def tensor_future(graph: Graph, name: str) -> tuple[PromiseHandle, CommTensorFuture]:
    """Register promise ``name`` (``graph.new_promise_name()``) that a GetTensor operator
    settles; return its handle and future. The caller records the operator in the block of
    ``graph.promise_name()`` that gave ``name`` (an interrupted recording drops the promise)."""
    handle = PromiseHandle(PromiseKind.MEMORY, name)
    promise = create_promise(PromiseKind.MEMORY, name=handle.name)  # named: no uuid per fetch
    graph.executor.register(handle.name, promise)
    return handle, promise.get_future()


def make_void_future(graph: Graph, name: str) -> tuple[PromiseHandle, Any, Waiting]:
    """Register collector ``name`` that completes when every stream reported; handle, future,
    and whom a wait for it waits for (the parties that have not reported yet). The caller
    records the Sync operator in the ``graph.promise_name()`` block that gave ``name``."""
    handle = PromiseHandle(PromiseKind.MEMORY, name)
    promise = create_void_promise(PromiseKind.MEMORY, name=handle.name)
    raised = graph.executor.settlements.raised
    collector = SyncCollector(graph.runner.parties, _VoidSink(promise), raised)
    graph.executor.register(handle.name, collector)
    runner = graph.runner
    return handle, promise.get_future(), lambda: runner.waiting_on(collector.unreported())


def memory_stats_future(graph: Graph, name: str) -> tuple[PromiseHandle, TensorFuture]:
    """A future of an int64 [devices, 3] tensor of (device, bytes held, peak bytes), whose
    collector is registered as ``name`` (from the caller's ``graph.promise_name()`` block);
    a wait that times out names the workers that have not reported."""
    handle = PromiseHandle(PromiseKind.MEMORY, name)
    promise = create_promise(PromiseKind.MEMORY, name=handle.name)
    collector = CountdownCollector(graph.runner.parties, promise, _stats_tensor)
    graph.executor.register(handle.name, collector)
    runner, raised = graph.runner, graph.executor.settlements.raised
    waiting = lambda: runner.waiting_on(collector.unreported())  # noqa: E731
    return handle, TensorFuture(promise.get_future(), None, raised, waiting)


def _stats_tensor(reports: list[object]) -> torch.Tensor:
    """Every party's flattened (device, bytes held, peak bytes) rows as one [n, 3] tensor."""
    rows = [value for report in reports for value in report]  # type: ignore[attr-defined]
    return torch.tensor(rows, dtype=torch.int64).reshape(-1, 3)


async def _await(future: TensorFuture) -> torch.Tensor:
    return await future
