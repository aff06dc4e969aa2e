"""Bodies run in spawned processes by the promise tests (importable by the workers).

Handles arrive as codec bytes (``dtorch.serialization``), exactly as they travel to a worker
inside a GetTensor operator.
"""

from __future__ import annotations

import time

import torch

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.promise import attach_promise, attach_void_promise, create_promise
from dtorch.errors import CommError, KernelError
from dtorch.ir.opkind import PromiseKind
from dtorch.serialization import deserialize
from tests.comm.seeded_tensors import make_tensor


def set_tensor(handle_bytes: bytes, code: int, shape: tuple, seed: int, delay_s: float) -> int:
    promise = attach_promise(deserialize(handle_bytes))
    time.sleep(delay_s)
    promise.set_value(make_tensor(code, shape, seed))
    return 0


def set_error(handle_bytes: bytes, dtorch_error: bool) -> int:
    promise = attach_promise(deserialize(handle_bytes))
    if dtorch_error:
        promise.set_error(KernelError("matmul failed on device 3 (model.py:12)"))
    else:
        promise.set_error(ZeroDivisionError("division by zero"))
    return 0


def set_void(handle_bytes: bytes, delay_s: float) -> int:
    promise = attach_void_promise(deserialize(handle_bytes))
    time.sleep(delay_s)
    promise.set_value()
    return 0


def drop_unset(handle_bytes: bytes) -> int:
    promise = attach_promise(deserialize(handle_bytes))
    del promise
    return 0


def attach_memory(handle_bytes: bytes) -> str:
    try:
        attach_promise(deserialize(handle_bytes))
    except CommError as error:
        return str(error)
    return "attached"


def create_and_sleep(ns_id: str) -> None:
    """Create a FILE promise and sleep until killed (the creator-dies test)."""
    promise = create_promise(PromiseKind.FILE, namespace=CommNamespace(ns_id))
    future = promise.get_future()
    time.sleep(600)
    future.get()


def attach_and_sleep(handle_bytes: bytes) -> None:
    """Attach and sleep until killed (the setter-dies test)."""
    promise = attach_promise(deserialize(handle_bytes))
    time.sleep(600)
    promise.set_value(torch.ones(1))
