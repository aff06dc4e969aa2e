"""FILE promises: set in another process (or here, through the same segment), errors crossing
by class name, void promises, await, and cleanup of /dev/shm even when a side is killed."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import pytest
import torch
from promise_scenarios import (
    attach_and_sleep,
    attach_memory,
    create_and_sleep,
    drop_unset,
    set_error,
    set_tensor,
    set_void,
)

from dtorch.comm.promise import (
    PromiseStateError,
    VoidFutureCollect,
    attach_promise,
    attach_void_promise,
    create_promise,
    create_void_promise,
)
from dtorch.comm.promise.error_table import MAX_MESSAGE, decode_error
from dtorch.errors import CommError, DTorchError, FutureTimeoutError, KernelError, PeerDiedError
from dtorch.ir.dtypes import dtype_code
from dtorch.ir.opkind import PromiseKind
from dtorch.ir.params import PromiseHandle
from dtorch.options import GlobalOption
from dtorch.serialization import serialize
from tests.comm.promise.awaiting import await_counting_ticks
from tests.comm.seeded_tensors import make_tensor
from tests.process_pool import Job, kill_process, start_process

pytestmark = pytest.mark.timeout(60)
FILE = PromiseKind.FILE


def _file_promise(namespace, void: bool = False):
    make = create_void_promise if void else create_promise
    promise = make(FILE, namespace=namespace)
    return promise, promise.get_future()


@pytest.mark.parametrize(
    ("dtype", "shape"),
    [
        (torch.float32, (3, 4)),
        (torch.bfloat16, (2, 0, 3)),
        (torch.bool, ()),
        (torch.complex64, (5,)),
        (torch.int16, (1, 1, 7)),
    ],
)
def test_value_through_the_segment(dtype, shape, namespace):
    promise, future = _file_promise(namespace)
    assert promise.handle.kind is FILE and not future.is_ready()
    expected = make_tensor(dtype_code(dtype), shape, 5)
    attach_promise(promise.handle).set_value(expected)
    assert namespace.leftovers() == []  # attaching removed the name
    got = future.get(timeout_s=5)
    assert got.dtype == dtype and got.shape == expected.shape and torch.equal(got, expected)
    assert future.get() is got  # read once, the same tensor afterwards


def test_errors_cross_as_table_classes(namespace):
    promise, future = _file_promise(namespace)
    attach_promise(promise.handle).set_error(KernelError("relu failed (net.py:4)"))
    assert future.wait_for(1000)
    with pytest.raises(KernelError, match=r"relu failed \(net\.py:4\)"):
        future.get()
    other, other_future = _file_promise(namespace)
    attach_promise(other.handle).set_error(ValueError("odd"))
    with pytest.raises(DTorchError, match="ValueError: odd"):
        other_future.wait()
    unknown = decode_error("os.system", "x")
    assert type(unknown) is DTorchError and "not a dtorch error class" in str(unknown)


def test_long_and_odd_error_messages_fit_the_header(namespace):
    """Any message crosses: cut to MAX_MESSAGE bytes of UTF-8, lone surrogates replaced."""
    promise, future = _file_promise(namespace)
    attach_promise(promise.handle).set_error(KernelError("é" * 5000))
    with pytest.raises(KernelError) as caught:
        future.get(timeout_s=5)
    assert str(caught.value) == "é" * (MAX_MESSAGE // 2)
    other, other_future = _file_promise(namespace)
    attach_promise(other.handle).set_error(KernelError("bad \udc80 name"))
    with pytest.raises(KernelError, match=r"^bad \? name$"):
        other_future.get(timeout_s=5)


def test_once_rules_and_bad_attachments(namespace):
    promise, _future = _file_promise(namespace)
    setter = attach_promise(promise.handle)
    with pytest.raises(CommError, match="attached already"):
        attach_promise(promise.handle)
    setter.set_value(torch.ones(1))
    with pytest.raises(PromiseStateError, match="already set"):
        setter.set_value(torch.ones(1))
    with pytest.raises(PromiseStateError, match="already set"):
        promise.set_error(KernelError("late"))
    with pytest.raises(PromiseStateError, match="only sets"):
        setter.get_future()
    for name in ("../../etc/passwd", "dtorch-x-store-00", ""):
        with pytest.raises(CommError, match="not the name of a dtorch FILE promise"):
            attach_promise(PromiseHandle(FILE, name))
    void, _void_future = _file_promise(namespace, void=True)
    with pytest.raises(CommError, match="is a void promise, not a tensor promise"):
        attach_promise(void.handle)
    attach_void_promise(void.handle).set_value()
    with pytest.raises(CommError, match="cannot attach"):
        attach_promise(PromiseHandle(PromiseKind.NETWORK, "x"))


def test_dropped_setter_fails_the_future(namespace):
    promise, future = _file_promise(namespace)
    setter = attach_promise(promise.handle)
    del setter
    gc.collect()
    with pytest.raises(CommError, match=r"dropped in process .* before a value was set"):
        future.get(timeout_s=5)


def test_dropped_future_removes_the_name(namespace):
    promise, future = _file_promise(namespace)
    assert len(namespace.leftovers()) == 1
    del promise, future
    gc.collect()
    assert namespace.leftovers() == []


def test_timeouts_and_wait_for(namespace):
    promise, future = _file_promise(namespace)
    assert future.wait_for(20) is False
    with pytest.raises(FutureTimeoutError, match=r"not ready after 0\.1s"):
        future.get(timeout_s=0.1)
    with GlobalOption.override(comm_timeout_second=0.1), pytest.raises(FutureTimeoutError):
        future.wait()
    promise.set_value(torch.zeros(2))
    assert future.wait_for(0) is True


def test_callbacks_and_await_from_a_setting_thread(namespace):
    promise, future = _file_promise(namespace)
    setter = attach_promise(promise.handle)
    called = threading.Event()
    future.add_done_callback(lambda f: called.set() if f.is_ready() else None)

    async def main():
        threading.Timer(0.1, lambda: setter.set_value(torch.arange(3))).start()
        return await await_counting_ticks(future, future.is_ready)

    value, ticks = asyncio.run(main())
    assert value.tolist() == [0, 1, 2] and ticks >= 5
    assert called.wait(5)


def test_await_times_out(namespace):
    _promise, future = _file_promise(namespace)

    async def main():
        await future

    with GlobalOption.override(comm_timeout_second=0.2), pytest.raises(FutureTimeoutError):
        asyncio.run(main())


def test_value_set_in_another_process_wakes_get(namespace, process_pool):
    promise, future = _file_promise(namespace)
    code, shape = dtype_code(torch.float32), (16, 1 << 20)  # 64 MiB
    run = process_pool.start([Job(set_tensor, (serialize(promise.handle), code, shape, 9, 0.2))])
    start = time.monotonic()
    got = future.get(timeout_s=30)
    assert time.monotonic() - start >= 0.2
    assert run.results(timeout_s=30) == [0]
    assert torch.equal(got, make_tensor(code, shape, 9))


@pytest.mark.parametrize("dtorch_error", [True, False])
def test_error_set_in_another_process(dtorch_error, namespace, process_pool):
    promise, future = _file_promise(namespace)
    process_pool.start([Job(set_error, (serialize(promise.handle), dtorch_error))]).results(30)
    expected = KernelError if dtorch_error else DTorchError
    pattern = "matmul failed on device 3" if dtorch_error else "ZeroDivisionError"
    with pytest.raises(expected, match=pattern):
        future.get(timeout_s=5)


def test_void_futures_from_two_processes_collected_and_awaited(namespace, process_pool):
    pairs = [_file_promise(namespace, void=True) for _ in range(2)]
    collect = VoidFutureCollect([future for _, future in pairs])
    run = process_pool.start([Job(set_void, (serialize(p.handle), 0.3)) for p, _ in pairs])

    _, ticks = asyncio.run(await_counting_ticks(collect, collect.is_ready, pause_s=0.01))
    assert ticks >= 5
    assert run.results(timeout_s=30) == [0, 0]
    assert collect.get(timeout_s=0) is None


def test_setter_process_dropping_the_promise(namespace, process_pool):
    promise, future = _file_promise(namespace)
    process_pool.start([Job(drop_unset, (serialize(promise.handle),))]).results(30)
    with pytest.raises(CommError, match="dropped in process"):
        future.get(timeout_s=5)


def test_memory_promise_cannot_cross(process_pool):
    handle = PromiseHandle(PromiseKind.MEMORY, "in-parent")
    [message] = process_pool.start([Job(attach_memory, (serialize(handle),))]).results(30)
    assert "MEMORY promise" in message and "cannot be attached" in message


@pytest.mark.timeout(120)
def test_killed_creator_and_killed_setter_leave_nothing(namespace):
    """A creator killed before anyone attached leaves its segment: the parent reclaims it by
    namespace. A setter killed after attaching leaves nothing (the name went at attach), and
    the future fails at once naming the dead setter instead of hanging (or timing out)."""
    creator = start_process(create_and_sleep, namespace.instance_id)
    promise, future = _file_promise(namespace)
    setter = start_process(attach_and_sleep, serialize(promise.handle))
    deadline = time.monotonic() + 30

    def creators_only() -> bool:  # the child created one, the setter took ours (both of it)
        names = [path.name for path in namespace.leftovers()]
        return len(names) == 1 and names[0] != promise.handle.name

    while not creators_only():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    kill_process(creator)
    kill_process(setter)
    assert len(namespace.reclaim()) == 1
    with pytest.raises(PeerDiedError, match=rf"its setter, process {setter.pid}, died"):
        future.get(timeout_s=0.2)
