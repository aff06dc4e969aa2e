"""The public promise and future classes, written once over any backend's ``Cell``.

A promise validates what it is given and settles its cell; a future waits on the cell with a
timeout and turns the outcome into a value or the error that was set. ``await`` asks the cell
for an asyncio future of the running loop (the cell decides how it is woken) and arms a timer
with the comm timeout, so an await never waits forever either.

Example:
    >>> from dtorch.comm.promise.memory import MemoryCell
    >>> from dtorch.ir.opkind import PromiseKind
    >>> from dtorch.ir.params import PromiseHandle
    >>> cell = MemoryCell("doc")
    >>> promise = CellVoidPromise(cell, PromiseHandle(PromiseKind.MEMORY, "doc"))
    >>> future = promise.get_future(); promise.set_value()
    >>> future.get() is None and future.wait_for(0)
    True
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Generator
from typing import Any

import torch

from dtorch.comm.promise.base import (
    Cell,
    PromiseStateError,
    TensorFuture,
    TensorPromise,
    VoidFuture,
    VoidPromise,
    future_timeout,
    resolve_timeout,
    resolve_timeout_ms,
)
from dtorch.ir.params import PromiseHandle


def _check_error(error: BaseException) -> BaseException:
    if not isinstance(error, BaseException):
        raise TypeError(f"set_error needs an exception, got {type(error).__name__}")
    return error


class _CellPromise:
    """What both cell promises share: the handle, the cell, ``set_error`` and handing out the
    future once (``has_future`` is False on the attaching side: an attached promise only sets)."""

    def __init__(self, cell: Cell, handle: PromiseHandle, *, has_future: bool = True) -> None:
        self.handle = handle
        self._cell = cell
        self._taken = not has_future

    def set_error(self, error: BaseException) -> None:
        self._cell.settle(None, _check_error(error))

    def _take_future(self) -> Cell:
        if self._taken:
            raise PromiseStateError(
                f"the future of promise {self._cell.name!r} was already taken (or this side of "
                "the promise has none: an attached promise only sets)"
            )
        self._taken = True
        return self._cell

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.handle!r})"


class CellTensorPromise(_CellPromise, TensorPromise):
    """A TensorPromise over a cell; ``has_future`` is False on the attaching side."""

    def set_value(self, tensor: torch.Tensor) -> None:
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"set_value needs a torch.Tensor, got {type(tensor).__name__}")
        self._cell.settle(tensor, None)

    def get_future(self) -> TensorFuture:
        return CellTensorFuture(self._take_future())


class CellVoidPromise(_CellPromise, VoidPromise):
    """A VoidPromise over a cell; ``has_future`` is False on the attaching side."""

    def set_value(self) -> None:
        self._cell.settle(None, None)

    def get_future(self) -> VoidFuture:
        return CellVoidFuture(self._take_future())


def settled_outcome(cell: Cell, timeout_s: float | None) -> torch.Tensor | None:
    """Wait for ``cell`` up to the timeout, then its value (or raise its error)."""
    seconds = resolve_timeout(timeout_s)
    if not cell.wait(seconds):
        raise future_timeout(cell.name, seconds)
    return cell.outcome()


def wait_for_ms(cell: Cell, timeout_ms: int) -> bool:
    """``wait_for``: True once settled; any number is a valid timeout (negative: 0, ``inf``:
    clamped to ``MAX_WAIT_SECOND``), a non-number or nan is refused (resolve_timeout_ms)."""
    return cell.wait(resolve_timeout_ms(timeout_ms))


def await_cell(cell: Cell) -> Generator[Any, None, torch.Tensor | None]:
    """The body of ``__await__``: wait on the running loop, then the outcome."""
    if not cell.is_ready():
        loop = asyncio.get_running_loop()
        waiter = cell.loop_waiter(loop)
        seconds = resolve_timeout(None)
        timer = loop.call_later(seconds, _expire, waiter, cell.name, seconds)
        try:
            yield from waiter
        finally:
            timer.cancel()
            if not waiter.done():  # closed without a cancel: the cell drops its callback
                with contextlib.suppress(RuntimeError):  # the loop is closed already
                    waiter.cancel()
    return cell.outcome()


def _expire(waiter: asyncio.Future[None], name: str, seconds: float) -> None:
    if not waiter.done():
        waiter.set_exception(future_timeout(name, seconds))


class _CellFuture:
    """What both cell futures share: waiting on the cell without a value, readiness, callbacks."""

    __slots__ = ("_cell",)

    def __init__(self, cell: Cell) -> None:
        self._cell = cell

    def wait(self, timeout_s: float | None = None) -> None:
        settled_outcome(self._cell, timeout_s)

    def wait_for(self, timeout_ms: int) -> bool:
        return wait_for_ms(self._cell, timeout_ms)

    def is_ready(self) -> bool:
        return self._cell.is_ready()

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        self._cell.add_callback(lambda: fn(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._cell.name!r}, ready={self.is_ready()})"


class CellTensorFuture(_CellFuture, TensorFuture):
    """A TensorFuture over a cell."""

    __slots__ = ()

    def get(self, timeout_s: float | None = None) -> torch.Tensor:
        return _tensor(settled_outcome(self._cell, timeout_s))

    def __await__(self) -> Generator[Any, None, torch.Tensor]:
        return _tensor((yield from await_cell(self._cell)))


class CellVoidFuture(_CellFuture, VoidFuture):
    """A VoidFuture over a cell."""

    __slots__ = ()

    def get(self, timeout_s: float | None = None) -> None:
        settled_outcome(self._cell, timeout_s)

    def __await__(self) -> Generator[Any, None, None]:
        yield from await_cell(self._cell)


def _tensor(value: torch.Tensor | None) -> torch.Tensor:
    assert value is not None  # a tensor promise settles with a tensor or an error
    return value
