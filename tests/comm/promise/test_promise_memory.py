"""Memory promises and futures: hand-off between threads, errors, timeouts, await, collect."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import pytest
import torch

from dtorch.comm.promise import (
    PromiseStateError,
    VoidFutureCollect,
    attach_promise,
    create_promise,
    create_void_promise,
)
from dtorch.errors import CommError, FutureTimeoutError, KernelError
from dtorch.ir.opkind import PromiseKind
from dtorch.ir.params import PromiseHandle
from dtorch.options import GlobalOption
from tests.comm.promise.awaiting import await_counting_ticks

pytestmark = pytest.mark.timeout(30)
MEMORY = PromiseKind.MEMORY


def _later(seconds: float, fn) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(seconds), fn()), daemon=True)
    thread.start()
    return thread


def test_value_set_by_a_worker_thread_wakes_get():
    promise = create_promise(MEMORY)
    future = promise.get_future()
    value = torch.randn(3, 4)
    assert not future.is_ready()
    assert future.wait_for(10) is False
    thread = _later(0.05, lambda: promise.set_value(value))
    got = future.get(timeout_s=5)
    thread.join()
    assert got is value
    assert future.is_ready() and future.wait_for(0)
    future.wait()


def test_get_times_out_with_future_timeout_error():
    promise = create_promise(MEMORY, name="slow")  # kept alive: a dropped promise fails
    future = promise.get_future()
    start = time.monotonic()
    with pytest.raises(FutureTimeoutError, match=r"'slow'.*0\.2s"):
        future.get(timeout_s=0.2)
    assert time.monotonic() - start >= 0.2
    with GlobalOption.override(comm_timeout_second=0.1), pytest.raises(FutureTimeoutError):
        future.wait()


def test_error_is_reraised_by_get_wait_and_await_but_not_wait_for():
    promise = create_promise(MEMORY)
    future = promise.get_future()
    error = KernelError("add failed on device 1 (model.py:3)")
    promise.set_error(error)
    assert future.wait_for(0) is True and future.is_ready()
    with pytest.raises(KernelError) as caught:
        future.get()
    # a copy of it: the set error is raised anew each time (its traceback would grow)
    assert type(caught.value) is KernelError and str(caught.value) == str(error)
    assert caught.value is not error and error.__traceback__ is None
    with pytest.raises(KernelError):
        future.wait()

    async def consume():
        return await future

    with pytest.raises(KernelError):
        asyncio.run(consume())


def test_once_only_rules():
    promise = create_promise(MEMORY)
    promise.get_future()
    with pytest.raises(PromiseStateError, match="already taken"):
        promise.get_future()
    promise.set_value(torch.ones(1))
    with pytest.raises(PromiseStateError, match="already set"):
        promise.set_value(torch.ones(1))
    with pytest.raises(PromiseStateError, match="already set"):
        promise.set_error(KernelError("late"))


def test_bad_arguments_are_refused():
    promise = create_promise(MEMORY)
    with pytest.raises(TypeError, match=r"torch\.Tensor, got list"):
        promise.set_value([1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="exception, got str"):
        promise.set_error("boom")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout_s"):
        promise.get_future().get(timeout_s=-1)
    with pytest.raises(CommError, match="accepted: MEMORY"):
        create_promise(7)  # type: ignore[arg-type]


def test_memory_promise_cannot_be_attached():
    handle = create_promise(MEMORY, name="here").handle
    assert handle == PromiseHandle(MEMORY, "here")
    with pytest.raises(CommError, match=r"MEMORY promise.*cannot be attached"):
        attach_promise(handle)


def test_done_callbacks_run_once_before_and_after_settling(caplog):
    promise = create_promise(MEMORY)
    future = promise.get_future()
    calls = []
    future.add_done_callback(lambda f: calls.append(("early", f is future)))
    future.add_done_callback(lambda f: 1 / 0)  # logged, never raised into the setter
    promise.set_value(torch.zeros(1))
    future.add_done_callback(lambda f: calls.append(("late", f.is_ready())))
    assert calls == [("early", True), ("late", True)]
    assert "done-callback raised" in caplog.text


def test_await_does_not_block_the_event_loop():
    promise = create_promise(MEMORY)
    future = promise.get_future()
    value = torch.arange(5)

    async def main():
        _later(0.1, lambda: promise.set_value(value))
        return await await_counting_ticks(future, future.is_ready)

    got, ticks = asyncio.run(main())
    assert got is value
    assert ticks >= 5  # the loop kept running while the future waited


def test_await_times_out():
    promise = create_promise(MEMORY)
    future = promise.get_future()

    async def main():
        return await future

    with GlobalOption.override(comm_timeout_second=0.1), pytest.raises(FutureTimeoutError):
        asyncio.run(main())
    assert not future.is_ready() and promise.handle.kind is MEMORY


def test_dropped_promise_fails_its_future():
    promise = create_promise(MEMORY, name="dropped")
    future = promise.get_future()
    del promise
    gc.collect()
    with pytest.raises(CommError, match="'dropped' was dropped before a value was set"):
        future.get(timeout_s=1)


def test_void_promise_and_collect():
    promises = [create_void_promise(MEMORY) for _ in range(3)]
    collect = VoidFutureCollect([p.get_future() for p in promises])
    assert len(collect) == 3 and not collect.is_ready()
    with pytest.raises(FutureTimeoutError, match="future 0 of 3"):
        collect.get(timeout_s=0.05)
    for index, promise in enumerate(promises):
        _later(0.02 * index, promise.set_value)

    async def main():
        await collect

    asyncio.run(main())
    assert collect.is_ready()
    assert collect.get() is None
    collect.wait()


def test_collect_raises_the_first_error_and_rejects_other_futures():
    first, second = create_void_promise(MEMORY), create_void_promise(MEMORY)
    collect = VoidFutureCollect([first.get_future(), second.get_future()])
    second.set_error(KernelError("second failed"))
    first.set_value()
    with pytest.raises(KernelError, match="second failed"):
        collect.get()
    with pytest.raises(TypeError, match="VoidFutures"):
        VoidFutureCollect([create_promise(MEMORY).get_future()])  # type: ignore[list-item]
