"""TensorPromise/TensorFuture, VoidPromise/VoidFuture and VoidFutureCollect (spec 002 section 4).

Example:
    >>> import torch
    >>> from dtorch.comm.promise import create_promise
    >>> from dtorch.ir.opkind import PromiseKind
    >>> promise = create_promise(PromiseKind.MEMORY)
    >>> future = promise.get_future()
    >>> promise.set_value(torch.tensor([7])); future.get().tolist()
    [7]
"""

from dtorch.comm.promise.base import (
    PromiseStateError,
    TensorFuture,
    TensorPromise,
    VoidFuture,
    VoidPromise,
)
from dtorch.comm.promise.collect import VoidFutureCollect
from dtorch.comm.promise.factory import (
    attach_promise,
    attach_void_promise,
    create_promise,
    create_void_promise,
)

__all__ = [
    "PromiseStateError",
    "TensorFuture",
    "TensorPromise",
    "VoidFuture",
    "VoidFutureCollect",
    "VoidPromise",
    "attach_promise",
    "attach_void_promise",
    "create_promise",
    "create_void_promise",
]
