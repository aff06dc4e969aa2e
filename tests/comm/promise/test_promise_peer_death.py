"""A FILE promise whose setter process is killed after attaching: ``get``, ``await`` and the
done callbacks fail within a second or so with a PeerDiedError naming the setter's pid, although
they would wait 60 s; a setter that set the value and then exited is no death."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import torch
from promise_scenarios import attach_and_sleep, set_tensor

from dtorch.comm.promise import create_promise
from dtorch.errors import PeerDiedError
from dtorch.ir.dtypes import dtype_code
from dtorch.ir.opkind import PromiseKind
from dtorch.options import GlobalOption
from dtorch.serialization import serialize
from tests.comm.seeded_tensors import make_tensor
from tests.process_pool import kill_process, start_process

pytestmark = pytest.mark.timeout(60)

#: Far below the 60 s the futures would wait: the setter is looked at every half second.
FAST_S = 5.0


def _attached_setter(namespace):
    """A pending FILE promise's future and a child process that attached to it and sleeps."""
    promise = create_promise(PromiseKind.FILE, namespace=namespace)
    future = promise.get_future()
    setter = start_process(attach_and_sleep, serialize(promise.handle))
    deadline = time.monotonic() + 30
    while namespace.leftovers():  # attaching records the setter, then removes the name
        assert time.monotonic() < deadline, "the setter never attached"
        time.sleep(0.02)
    return future, setter


def _names_setter(error: BaseException, pid: int) -> None:
    assert isinstance(error, PeerDiedError), error
    assert f"its setter, process {pid}, died before it set a value" in str(error)
    assert error.peers == ((None, pid),)


def test_get_fails_when_the_setter_dies(namespace):
    future, setter = _attached_setter(namespace)
    threading.Timer(0.3, kill_process, (setter,)).start()
    start = time.monotonic()
    with pytest.raises(PeerDiedError) as caught:
        future.get(timeout_s=60)
    assert time.monotonic() - start < FAST_S
    _names_setter(caught.value, setter.pid)
    assert future.is_ready() and future.wait_for(0)
    with pytest.raises(PeerDiedError):  # the same error every time after
        future.wait()


def test_await_and_callbacks_fail_when_the_setter_dies(namespace):
    future, setter = _attached_setter(namespace)
    called = threading.Event()
    future.add_done_callback(lambda f: called.set() if f.is_ready() else None)

    async def main() -> float:
        start = time.monotonic()
        with pytest.raises(PeerDiedError) as caught:
            await future
        _names_setter(caught.value, setter.pid)
        return time.monotonic() - start

    killer = threading.Timer(0.3, kill_process, (setter,))
    killer.start()
    with GlobalOption.override(comm_timeout_second=60):
        seconds = asyncio.run(main())
    killer.join()
    assert seconds < FAST_S
    assert called.wait(FAST_S)


def test_a_setter_that_set_the_value_and_exited_is_not_dead(namespace):
    promise = create_promise(PromiseKind.FILE, namespace=namespace)
    future = promise.get_future()
    code = dtype_code(torch.float32)
    setter = start_process(set_tensor, serialize(promise.handle), code, (3,), 4, 0.0)
    setter.join(30)
    assert setter.exitcode == 0
    assert torch.equal(future.get(timeout_s=5), make_tensor(code, (3,), 4))
