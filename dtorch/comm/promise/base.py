"""TensorPromise/TensorFuture and VoidPromise/VoidFuture: one value, handed over once (spec 4).

A promise is set once, with a value or an error; its future (taken once) waits for it. Every
backend implements one small ``Cell`` (the shared state of a promise and its future); the
public classes in ``dtorch.comm.promise.futures`` are written once on top of it::

    promise.set_value(t) / set_error(e)  -->  Cell  -->  future.get() / wait() / await future

Waiting honours a timeout (None: ``GlobalOption.get_comm_timeout_second()``) and raises
``FutureTimeoutError`` when it runs out; ``wait_for`` and ``is_ready`` never raise.

Example:
    >>> import torch
    >>> from dtorch.comm.promise import create_promise
    >>> from dtorch.ir.opkind import PromiseKind
    >>> promise = create_promise(PromiseKind.MEMORY)
    >>> future = promise.get_future()
    >>> future.is_ready()
    False
    >>> promise.set_value(torch.ones(2)); future.get().tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

import asyncio
import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from typing import Any, Protocol

import torch

from dtorch.errors import (
    FutureTimeoutError,
    PromiseStateError,  # noqa: F401 - re-exported: it lived here first
)
from dtorch.ir.params import PromiseHandle
from dtorch.options import MAX_WAIT_SECOND, GlobalOption


class Cell(Protocol):
    """The shared state of one promise and its future; what each backend implements."""

    name: str

    def settle(self, value: torch.Tensor | None, error: BaseException | None) -> None:
        """Set the outcome once (``PromiseStateError`` the second time) and wake the waiters."""

    def wait(self, timeout_s: float) -> bool:
        """Block up to ``timeout_s`` until settled; True if settled. Never raises."""

    def is_ready(self) -> bool:
        """True once settled (with a value or an error), without blocking."""

    def outcome(self) -> torch.Tensor | None:
        """The value of a settled cell, or raise its error."""

    def add_callback(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` once settled (at once, in this thread, if it already is)."""

    def loop_waiter(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """An asyncio future of ``loop`` that completes once settled (never blocks the loop)."""


class TensorPromise(ABC):
    """The producing side of one tensor value: ``set_value`` or ``set_error``, once."""

    handle: PromiseHandle

    @abstractmethod
    def set_value(self, tensor: torch.Tensor) -> None:
        """Settle with ``tensor`` (once)."""

    @abstractmethod
    def set_error(self, error: BaseException) -> None:
        """Settle with ``error`` instead of a value (once); the future re-raises it."""

    @abstractmethod
    def get_future(self) -> TensorFuture:
        """The future of this promise (once)."""


class VoidPromise(ABC):
    """The producing side of a completion without a value (``Graph.sync_future``)."""

    handle: PromiseHandle

    @abstractmethod
    def set_value(self) -> None:
        """Settle as done (once)."""

    @abstractmethod
    def set_error(self, error: BaseException) -> None:
        """Settle with ``error`` (once); the future re-raises it."""

    @abstractmethod
    def get_future(self) -> VoidFuture:
        """The future of this promise (once)."""


class TensorFuture(ABC):
    """The waiting side of one tensor value."""

    @abstractmethod
    def get(self, timeout_s: float | None = None) -> torch.Tensor:
        """Block until settled; return the value or re-raise the error."""

    @abstractmethod
    def wait(self, timeout_s: float | None = None) -> None:
        """Like ``get`` without returning the value."""

    @abstractmethod
    def wait_for(self, timeout_ms: int) -> bool:
        """Wait up to ``timeout_ms``; True once settled (value or error). Never raises."""

    @abstractmethod
    def is_ready(self) -> bool:
        """True once settled, without blocking."""

    @abstractmethod
    def add_done_callback(self, fn: Callable[[TensorFuture], None]) -> None:
        """Call ``fn(self)`` once settled."""

    @abstractmethod
    def __await__(self) -> Generator[Any, None, torch.Tensor]:
        """``await future`` inside asyncio: the value, without blocking the event loop."""


class VoidFuture(ABC):
    """The waiting side of a completion without a value."""

    @abstractmethod
    def get(self, timeout_s: float | None = None) -> None:
        """Block until settled; re-raise the error if there is one."""

    @abstractmethod
    def wait(self, timeout_s: float | None = None) -> None:
        """The same as ``get`` (there is no value)."""

    @abstractmethod
    def wait_for(self, timeout_ms: int) -> bool:
        """Wait up to ``timeout_ms``; True once settled. Never raises."""

    @abstractmethod
    def is_ready(self) -> bool:
        """True once settled, without blocking."""

    @abstractmethod
    def add_done_callback(self, fn: Callable[[VoidFuture], None]) -> None:
        """Call ``fn(self)`` once settled."""

    @abstractmethod
    def __await__(self) -> Generator[Any, None, None]:
        """``await future`` inside asyncio, without blocking the event loop."""


def resolve_timeout(timeout_s: float | None) -> float:
    """``timeout_s`` checked and clamped to ``MAX_WAIT_SECOND`` (``inf``: as long as that), or
    the comm timeout in force when it is None; a non-number is a TypeError, nan or a negative
    number a ValueError."""
    if timeout_s is None:
        return GlobalOption.get_comm_timeout_second()
    seconds = _number("timeout_s", timeout_s, "a number of seconds >= 0 or None")
    if seconds < 0:
        raise ValueError(f"timeout_s must be a number of seconds >= 0 or None, got {timeout_s!r}")
    return min(seconds, MAX_WAIT_SECOND)


def resolve_timeout_ms(timeout_ms: float) -> float:
    """``wait_for``'s milliseconds as seconds: negative counts as 0, huge and ``inf`` are clamped
    to ``MAX_WAIT_SECOND``; a non-number is a TypeError, nan a ValueError."""
    milliseconds = _number("timeout_ms", timeout_ms, "a number of milliseconds")
    return min(max(0.0, milliseconds / 1000.0), MAX_WAIT_SECOND)


def _number(name: str, value: object, accepted: str) -> float:
    # bool is an int to Python but never a timeout; nan would time out at once, silently
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's numbers too
        raise TypeError(f"{name} must be {accepted}, got {type(value).__name__} {value!r}")
    value = int(value) if isinstance(value, numbers.Integral) else float(value)
    if isinstance(value, float) and math.isnan(value):
        raise ValueError(f"{name} must be {accepted}, got nan")
    return float(value) if abs(value) < 2**1000 else (math.inf if value > 0 else -math.inf)


def future_timeout(name: str, timeout_s: float) -> FutureTimeoutError:
    """The error of a future that was not settled within ``timeout_s``."""
    return FutureTimeoutError(
        f"the future of promise {name!r} was not ready after {timeout_s:g}s (it is set when "
        "the devices have run what it waits for: wait longer, or, if they should have by "
        "now, look for a worker that stopped)"
    )
