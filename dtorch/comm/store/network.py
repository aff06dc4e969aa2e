"""NetworkTensorStore: the TensorStore for processes on different machines, over TCP.

Why ZeroMQ and not ``torch.distributed`` point-to-point: a process has one default
``torch.distributed`` group, which the ThreadGroup's Gloo/NCCL backends already use and which
needs its own rendezvous; ``send``/``recv`` also need the peer rank of every transfer, while a
store's consumers are anonymous (any rank may ``dest_get`` a key). pyzmq is a dependency already
(the controller/worker transport), lets any number of stores live in one process, and gives a
coordinator that parks waiting requests instead of polling.

Rank 0 binds ``endpoint`` (``tcp://HOST:PORT``) and runs the ``Coordinator`` thread; every
participant, rank 0 included, talks to it through a DEALER socket. The tensor bytes go with
``SET`` (sent without copying from the contiguous tensor) and come back with ``GET`` (copied
once into a fresh tensor, which the consumer owns). Every blocking request carries its
timeout: the coordinator answers with a timeout error naming who is missing, and the client
gives up a little later if the coordinator itself is gone. Rank 0 hosts the coordinator, so it
closes last: after a barrier, a ``reset()`` or its final ``src_wait_until_get_finished``.

Example:
    >>> import torch
    >>> from dtorch.comm.namespace import CommNamespace
    >>> store = NetworkTensorStore.open("net-doc", 1, 0, CommNamespace("doc"), "tcp://127.0.0.1:0")
    >>> store.src_set("k", torch.arange(3), 1)
    >>> store.dest_get("k").tolist()
    [0, 1, 2]
    >>> store.dest_finish_get("k"); store.src_wait_until_get_finished("k"); store.close()
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import ormsgpack
import torch
import zmq

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.store.base import (
    Deadline,
    TensorStore,
    check_key,
    check_participant,
    check_set,
    finish_open,
    timeout_error,
)
from dtorch.comm.store.network_coordinator import Coordinator, Op, Status
from dtorch.errors import CommError, CommTimeoutError
from dtorch.ir.dtypes import dtype_code, dtype_from_code

#: How much longer than a request's own timeout the client waits for the coordinator's answer.
_GRACE_S = 2.0


def tensor_bytes(tensor: torch.Tensor) -> memoryview:
    """The bytes of ``tensor`` (made contiguous, on the CPU) without a further copy."""
    # conjugate and negative views keep their flag beside the bytes: resolve them first
    flat = tensor.detach().cpu().resolve_conj().resolve_neg().contiguous().reshape(-1)
    if not flat.numel():
        return memoryview(b"")
    array: Any = flat.view(torch.uint8).numpy()
    return memoryview(array)


def tensor_from_bytes(data: memoryview, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """A new tensor of ``dtype`` and ``shape`` holding a copy of ``data``."""
    out = torch.empty(shape, dtype=dtype)
    if out.numel():
        out.reshape(-1).view(torch.uint8).numpy()[:] = np.frombuffer(data, dtype=np.uint8)
    return out


class _Client:
    """One DEALER socket to the coordinator; strict request/reply, one request at a time."""

    def __init__(self, context: zmq.Context[Any], endpoint: str) -> None:
        self.endpoint = endpoint
        self._socket = context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.connect(endpoint)
        self._lock = threading.Lock()
        self._next_id = 0

    def request(
        self, header: list[Any], wait_s: float, data: memoryview | None = None
    ) -> tuple[list[Any], zmq.Frame | None]:
        """Send one request and wait up to ``wait_s`` for its answer: (header, data frame)."""
        with self._lock:
            self._next_id += 1
            request_id = self._next_id.to_bytes(8, "little")
            frames: list[Any] = [request_id, ormsgpack.packb(header)]
            if data is not None:
                frames.append(data)
            self._socket.send_multipart(frames, copy=False)
            return self._receive(request_id, time.monotonic() + wait_s)

    def _receive(self, request_id: bytes, deadline: float) -> tuple[list[Any], zmq.Frame | None]:
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0 or not self._socket.poll(remaining_ms):
                raise CommTimeoutError(
                    f"the network store coordinator at {self.endpoint} did not answer (rank 0 "
                    "never opened the store, closed it, or its process is gone)"
                )
            frames = self._socket.recv_multipart(copy=False)
            if frames[0].bytes == request_id:  # older ids: answers to requests given up on
                data = frames[2] if len(frames) > 2 else None
                return ormsgpack.unpackb(frames[1].bytes), data

    def send(self, header: list[Any]) -> None:
        """Fire and forget (LEAVE): nobody waits for an answer."""
        with self._lock:
            self._socket.send_multipart([b"\0" * 8, ormsgpack.packb(header)])

    def close(self) -> None:
        self._socket.close(0)


class NetworkTensorStore(TensorStore):
    """A TensorStore participant over TCP; see the module docstring."""

    def __init__(
        self,
        store_key: str,
        world_size: int,
        rank: int,
        client: _Client,
        coordinator: Coordinator | None,
    ) -> None:
        self.store_key = store_key
        self.world_size = world_size
        self.rank = rank
        self._client: _Client | None = client
        self._coordinator = coordinator
        self._joined = False  # only a member may leave: a refused duplicate must not

    @classmethod
    def open(
        cls,
        store_key: str,
        world_size: int,
        rank: int,
        namespace: CommNamespace,
        endpoint: str,
    ) -> NetworkTensorStore:
        """Join the store served at ``endpoint`` (rank 0 serves it; port 0 only for world 1).

        Example:
            >>> NetworkTensorStore.open("solo", 1, 0, CommNamespace("d"), "tcp://127.0.0.1:0").close()
        """
        check_participant(store_key, world_size, rank)
        if not isinstance(endpoint, str) or not endpoint.startswith("tcp://"):
            raise CommError(
                f"a network store needs an endpoint 'tcp://HOST:PORT', got {endpoint!r}"
            )
        context: zmq.Context[Any] = zmq.Context.instance()
        scoped = namespace.scoped_key(store_key)
        coordinator = Coordinator(context, endpoint, scoped, world_size) if rank == 0 else None
        address = coordinator.local_endpoint if coordinator is not None else endpoint
        store = cls(store_key, world_size, rank, _Client(context, address), coordinator)
        return finish_open(store, lambda: store._join(scoped))

    def _join(self, scoped_key: str) -> None:
        self._call("open", [Op.JOIN, scoped_key, self.world_size, self.rank], Deadline())
        self._joined = True

    def _call(
        self, call: str, header: list[Any], deadline: Deadline, data: memoryview | None = None
    ) -> tuple[list[Any], zmq.Frame | None]:
        """One request; CommError/CommTimeoutError from the coordinator's answer."""
        client = self._client
        if client is None:
            raise CommError(f"{self!r} is closed")
        reply, frame = client.request(header, deadline.remaining() + _GRACE_S, data)
        if reply[0] == Status.TIMEOUT:
            raise timeout_error(self, call, deadline.seconds, reply[1])
        if reply[0] != Status.OK:
            raise CommError(f"{call} on store {self.store_key!r}: {reply[1]}")
        return reply, frame

    def src_set(self, key: str, tensor: torch.Tensor, get_count: int) -> None:
        check_set(key, tensor, get_count, self.world_size)
        meta = [dtype_code(tensor.dtype), list(tensor.shape)]
        header = [Op.SET, key, self.rank, get_count, meta]
        self._call("src_set", header, Deadline(), tensor_bytes(tensor))

    def dest_get(self, key: str) -> torch.Tensor:
        check_key(key)
        deadline = Deadline()
        reply, frame = self._call("dest_get", [Op.GET, key, self.rank, deadline.seconds], deadline)
        code, shape = reply[1]
        assert frame is not None  # a GET answer carries the bytes
        return tensor_from_bytes(frame.buffer, dtype_from_code(code), tuple(shape))

    def dest_finish_get(self, key: str) -> None:
        check_key(key)
        self._call("dest_finish_get", [Op.FINISH, key, self.rank], Deadline())

    def src_wait_until_get_finished(self, key: str) -> None:
        check_key(key)
        deadline = Deadline()
        header = [Op.WAIT, key, self.rank, deadline.seconds]
        self._call("src_wait_until_get_finished", header, deadline)

    def barrier(self) -> None:
        deadline = Deadline()
        self._call("barrier", [Op.BARRIER, self.rank, deadline.seconds], deadline)

    def _clear_round(self) -> None:
        self._call("reset", [Op.CLEAR, self.rank], Deadline())

    def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        if self._joined:
            client.send([Op.LEAVE, self.rank])
        client.close()
        if self._coordinator is not None:
            self._coordinator.stop()
