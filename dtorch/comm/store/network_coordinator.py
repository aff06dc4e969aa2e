"""The coordinator of a network store: one thread in rank 0's process, a ZeroMQ ROUTER socket.

It holds the state every participant shares (members, barrier, this round's slots with their
tensor bytes as received ZeroMQ frames) and answers requests. A request that has to wait
(``GET`` before the key is set, ``WAIT`` before every consumer finished, ``BARRIER`` before
everyone arrived) is parked and answered when the state allows, or with a timeout error naming
who is missing once its own deadline passes. Nothing polls: the thread sleeps in
``zmq.Poller`` until a message comes or the nearest deadline.

Frames: request ``[identity, request id, header]`` (+ ``[data]`` for SET); reply
``[identity, request id, header]`` (+ ``[data]`` for GET). Headers are MessagePack lists, the
first element the operation (request) or the status (reply).

Example:
    >>> import zmq
    >>> coordinator = Coordinator(zmq.Context.instance(), "tcp://127.0.0.1:0", "ns/key", 1)
    >>> coordinator.endpoint.startswith("tcp://127.0.0.1:")
    True
    >>> coordinator.stop()
"""

from __future__ import annotations

import enum
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ormsgpack
import zmq

from dtorch.comm.store.base import all_finished, count_finish, finish_detail, missing_ranks
from dtorch.errors import CommError


class Op(enum.IntEnum):
    """Request operations (the first element of a request header)."""

    JOIN = 0
    SET = 1
    GET = 2
    FINISH = 3
    WAIT = 4
    BARRIER = 5
    CLEAR = 6
    LEAVE = 7


class Status(enum.IntEnum):
    """Reply statuses (the first element of a reply header)."""

    OK = 0
    ERROR = 1
    TIMEOUT = 2


@dataclass(slots=True)
class _Slot:
    producer: int
    meta: list[Any]  # dtype code, shape
    data: zmq.Frame
    target: int
    finished_by: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _Parked:
    """A request that waits for the state to change, until its deadline."""

    op: Op
    ident: bytes
    request_id: bytes
    key: str
    rank: int
    deadline: float


Reply = tuple[list[Any], zmq.Frame | None]


class Coordinator:
    """The shared state of one network store, served from a thread; see the module docstring."""

    def __init__(self, context: zmq.Context[Any], endpoint: str, scoped_key: str, world: int):
        self.scoped_key = scoped_key
        self.world_size = world
        self._router = context.socket(zmq.ROUTER)
        self._router.setsockopt(zmq.LINGER, 0)
        self.endpoint = _bind(self._router, endpoint)
        # rank 0's own client talks to it in-process: its tensors are handed over, not copied
        self.local_endpoint = f"inproc://dtorch-store-{secrets.token_hex(8)}"
        self._router.bind(self.local_endpoint)
        stop_address = f"inproc://dtorch-store-stop-{secrets.token_hex(8)}"
        self._stop_rx = context.socket(zmq.PAIR)
        self._stop_rx.bind(stop_address)
        self._stop_tx = context.socket(zmq.PAIR)
        self._stop_tx.connect(stop_address)
        self._members: set[int] = set()
        self._generation = 0
        self._arrived: dict[int, _Parked] = {}
        self._slots: dict[str, _Slot] = {}
        self._parked: list[_Parked] = []
        self._handlers: dict[Op, Callable[[bytes, bytes, list[Any], zmq.Frame | None], None]] = {
            Op.JOIN: self._join,
            Op.SET: self._set,
            Op.GET: self._get,
            Op.FINISH: self._finish,
            Op.WAIT: self._wait,
            Op.BARRIER: self._barrier,
            Op.CLEAR: self._clear,
            Op.LEAVE: self._leave,
        }
        self._thread = threading.Thread(target=self._run, name="dtorch-store-coord", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket (rank 0's close)."""
        if self._thread.is_alive():
            self._stop_tx.send(b"stop")
            self._thread.join(10)
        self._stop_tx.close(0)

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._router, zmq.POLLIN)
        poller.register(self._stop_rx, zmq.POLLIN)
        try:
            while True:
                events = dict(poller.poll(self._poll_ms()))
                if self._stop_rx in events:
                    return
                if self._router in events:
                    self._dispatch(self._router.recv_multipart(copy=False))
                self._expire()
        finally:
            self._router.close(0)
            self._stop_rx.close(0)

    def _poll_ms(self) -> int | None:
        if not self._parked and not self._arrived:
            return None
        deadlines = [p.deadline for p in self._parked] + [
            p.deadline for p in self._arrived.values()
        ]
        return max(0, int((min(deadlines) - time.monotonic()) * 1000) + 1)

    def _dispatch(self, frames: list[zmq.Frame]) -> None:
        if len(frames) < 3:
            return  # not a request of ours: nothing to answer
        ident, request_id, header = frames[0].bytes, frames[1].bytes, frames[2].bytes
        data = frames[3] if len(frames) > 3 else None
        try:
            fields = ormsgpack.unpackb(header)
            handler = self._handlers[Op(fields[0])]
        except (ValueError, KeyError, IndexError, TypeError, ormsgpack.MsgpackDecodeError):
            self._reply(ident, request_id, [Status.ERROR, "malformed store request"])
            return
        handler(ident, request_id, fields[1:], data)

    def _reply(self, ident: bytes, request_id: bytes, header: list[Any], data: Any = None) -> None:
        frames: list[Any] = [ident, request_id, ormsgpack.packb([int(header[0]), *header[1:]])]
        if data is not None:
            frames.append(data)
        self._router.send_multipart(frames, copy=False)

    def _join(self, ident: bytes, rid: bytes, args: list[Any], data: Any) -> None:
        scoped_key, world_size, rank = args
        if scoped_key != self.scoped_key or world_size != self.world_size:
            message = (
                f"the coordinator serves store {self.scoped_key!r} with world_size="
                f"{self.world_size}; rank {rank} asked for {scoped_key!r} with world_size="
                f"{world_size}"
            )
            self._reply(ident, rid, [Status.ERROR, message])
        elif rank in self._members:
            self._reply(ident, rid, [Status.ERROR, f"rank {rank} is already open"])
        else:
            self._members.add(rank)
            self._reply(ident, rid, [Status.OK])

    def _set(self, ident: bytes, rid: bytes, args: list[Any], data: zmq.Frame | None) -> None:
        key, rank, target, meta = args
        if key in self._slots:
            message = (
                f"src_set({key!r}): the key is already set in this round; call reset() "
                "between rounds"
            )
            self._reply(ident, rid, [Status.ERROR, message])
            return
        assert data is not None  # SET always carries the bytes
        self._slots[key] = _Slot(rank, meta, data, target)
        self._reply(ident, rid, [Status.OK])
        self._serve_parked(key)

    def _get(self, ident: bytes, rid: bytes, args: list[Any], data: Any) -> None:
        key, rank, timeout_s = args
        slot = self._slots.get(key)
        if slot is not None:
            self._reply(ident, rid, [Status.OK, slot.meta], slot.data)
        else:
            self._park(Op.GET, ident, rid, key, rank, timeout_s)

    def _finish(self, ident: bytes, rid: bytes, args: list[Any], data: Any) -> None:
        key, rank = args
        try:
            count_finish(key, self._slots.get(key), rank)
        except CommError as error:
            self._reply(ident, rid, [Status.ERROR, str(error)])
            return
        self._reply(ident, rid, [Status.OK])
        self._serve_parked(key)

    def _wait(self, ident: bytes, rid: bytes, args: list[Any], data: Any) -> None:
        key, rank, timeout_s = args
        slot = self._slots.get(key)
        if slot is None:
            message = f"src_wait_until_get_finished({key!r}): the key was never set"
            self._reply(ident, rid, [Status.ERROR, message])
        elif all_finished(slot):
            self._reply(ident, rid, [Status.OK])
        else:
            self._park(Op.WAIT, ident, rid, key, rank, timeout_s)

    def _barrier(self, ident: bytes, rid: bytes, args: list[Any], data: Any) -> None:
        rank, timeout_s = args
        if rank in self._arrived:
            message = f"barrier(): rank {rank} entered the barrier twice"
            self._reply(ident, rid, [Status.ERROR, message])
            return
        deadline = time.monotonic() + timeout_s
        self._arrived[rank] = _Parked(Op.BARRIER, ident, rid, "", rank, deadline)
        if len(self._arrived) == self.world_size:
            arrived, self._arrived = self._arrived, {}
            self._generation += 1
            for parked in arrived.values():
                self._reply(parked.ident, parked.request_id, [Status.OK])

    def _clear(self, ident: bytes, rid: bytes, args: list[Any], data: Any) -> None:
        (rank,) = args
        for key in [k for k, slot in self._slots.items() if slot.producer == rank]:
            del self._slots[key]
        self._reply(ident, rid, [Status.OK])

    def _leave(self, ident: bytes, rid: bytes, args: list[Any], data: Any) -> None:
        (rank,) = args
        self._members.discard(rank)
        self._arrived.pop(rank, None)
        self._parked = [p for p in self._parked if p.rank != rank]

    def _park(
        self, op: Op, ident: bytes, rid: bytes, key: str, rank: int, timeout_s: float
    ) -> None:
        self._parked.append(_Parked(op, ident, rid, key, rank, time.monotonic() + timeout_s))

    def _serve_parked(self, key: str) -> None:
        """Answer the parked requests on ``key`` that the state now satisfies."""
        slot = self._slots.get(key)
        if slot is None:
            return
        still = []
        for parked in self._parked:
            if parked.key != key:
                still.append(parked)
            elif parked.op is Op.GET:
                self._reply(parked.ident, parked.request_id, [Status.OK, slot.meta], slot.data)
            elif all_finished(slot):
                self._reply(parked.ident, parked.request_id, [Status.OK])
            else:
                still.append(parked)
        self._parked = still

    def _expire(self) -> None:
        now = time.monotonic()
        for parked in [p for p in self._parked if p.deadline <= now]:
            self._parked.remove(parked)
            self._reply(parked.ident, parked.request_id, [Status.TIMEOUT, self._detail(parked)])
        late = [p for p in self._arrived.values() if p.deadline <= now]
        for parked in late:
            detail = f"ranks {missing_ranks(self.world_size, self._arrived)} never arrived"
            self._reply(parked.ident, parked.request_id, [Status.TIMEOUT, detail])
        for parked in late:
            del self._arrived[parked.rank]

    def _detail(self, parked: _Parked) -> str:
        slot = self._slots.get(parked.key)
        if parked.op is Op.GET or slot is None:
            return f"no participant called src_set({parked.key!r})"
        return finish_detail(parked.key, slot)


def _bind(socket: zmq.Socket[Any], endpoint: str) -> str:
    """Bind ``endpoint`` (port 0: any free port) and return the endpoint actually bound."""
    try:
        socket.bind(endpoint)
    except zmq.ZMQError as error:
        socket.close(0)
        raise CommError(
            f"rank 0 cannot serve the network store at {endpoint}: {error} (is another store "
            "or program using that address?)"
        ) from None
    bound = socket.getsockopt(zmq.LAST_ENDPOINT)
    return bound.decode() if isinstance(bound, bytes) else str(bound)
