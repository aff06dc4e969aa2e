"""NetworkTensorStore: the TensorStore for processes on different machines, over TCP.

Why ZeroMQ and not ``torch.distributed`` point-to-point: a process has one default
``torch.distributed`` group, which the ThreadGroup's Gloo/NCCL backends already use and which
needs its own rendezvous; ``send``/``recv`` also need the peer rank of every transfer, while a
store's consumers are anonymous (any rank may ``dest_get`` a key). pyzmq is a dependency already
(the controller/worker transport), lets any number of stores live in one process, and gives a
coordinator that parks waiting requests instead of polling.

Rank 0 binds ``endpoint`` (``tcp://HOST:PORT``) and runs the ``Coordinator`` thread; every
participant, rank 0 included, talks to it through a DEALER socket. Bind ``tcp://127.0.0.1:PORT``
unless the program spans machines, then the address of the interface the other machines
reach; a wildcard host (``*``, ``0.0.0.0``) listens on every interface and is used only where
the caller names it (``store.endpoint`` then names the wildcard: the caller tells the others
its address instead). With port 0 rank 0 binds a free port: ``store.endpoint`` is the endpoint
bound, for the caller to pass to the other ranks (through the rendezvous); rank 0's ``open``
then returns once the coordinator serves, and its construction barrier completes in its first
call.

Every connection passes a gate first: ZeroMQ PLAIN with a password derived from the program's
secret, checked by a ZAP handler at the handshake (``network_gate``), so a peer without the
secret is refused before ZeroMQ buffers any of its frames. Every message is then
authenticated with the secret (``namespace.secret``; the scheme, and why HMAC rather than
CURVE, in ``network_auth``); the coordinator serves members only, each as
the rank it joined as, checks every header and every declared tensor size against the bytes,
and caps the bytes it holds (``network_coordinator``). The tensor bytes go with ``SET`` (sent
without copying from the contiguous tensor, in frames of at most ``FRAME_BYTES``: the largest
frame the gate lets anyone send before the handshake) and come back with ``GET`` (checked
against their declared dtype and shape, then copied once into a fresh tensor, which the
consumer owns).
Every call has a deadline, rank 0's own included: the coordinator answers with a timeout error
naming who is missing, a client gives up a little later if the coordinator is gone (and from
then on fails every call at once), and rank 0 fails at once if its coordinator thread died.
Rank 0 hosts the coordinator: its close leaves the coordinator serving until every other
participant has closed too (at most the comm timeout), so the others can still end the
exchanges rank 0 already ended.

Aborts travel like the rest: ``abort(scope, message)`` tells the coordinator, which answers
every waiting ``dest_get`` and ``src_wait_until_get_finished`` on a key of that scope at once,
and each raises ``PeerFailedError`` with the message. An abort goes over a connection of its
own, authenticated like every other (a thread may abort the scope another thread of this
participant is waiting in: the manager aborts on every group it holds). ``end_exchange``
drops this participant's finished keys without a barrier (``DROP``), as the memory and file
stores do, so the participants of an aborted exchange never wait for each other.

Example:
    >>> import torch
    >>> from dtorch.comm.namespace import CommNamespace
    >>> ns = CommNamespace.create()
    >>> store = NetworkTensorStore.open("net-doc", 1, 0, ns, "tcp://127.0.0.1:0")
    >>> store.endpoint.startswith("tcp://127.0.0.1:")
    True
    >>> store.src_set("k", torch.arange(3), 1)
    >>> store.dest_get("k").tolist()
    [0, 1, 2]
    >>> store.dest_finish_get("k"); store.src_wait_until_get_finished("k")
    >>> store.abort("op1", "rank 0 failed"), store.aborted("op1")
    (True, 'rank 0 failed')
    >>> store.close()
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
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
    check_scope,
    check_set,
    cut_message,
    finish_open,
    peer_failed_error,
    timeout_error,
)
from dtorch.comm.store.network_auth import ClientAuth, Refused, derive_key
from dtorch.comm.store.network_coordinator import Coordinator
from dtorch.comm.store.network_gate import client_options, store_context
from dtorch.comm.store.network_protocol import (
    FRAME_BYTES,
    MAX_STORE_BYTES,
    Op,
    Status,
    is_scope,
    tensor_meta,
)
from dtorch.errors import CommError, CommTimeoutError
from dtorch.ir.dtypes import dtype_code
from dtorch.options import GlobalOption

_LOG = logging.getLogger(__name__)

#: How much longer than a request's own timeout the client waits for the coordinator's answer.
_GRACE_S = 2.0
#: How long an abort waits for the coordinator's answer (plus the grace).
_ABORT_S = 1.0
#: How often a waiting client looks whether its in-process coordinator still runs.
_HEALTH_SLICE_S = 0.2

Health = Callable[[], str | None]
_STATUSES = frozenset(int(status) for status in Status)


def tensor_bytes(tensor: torch.Tensor) -> memoryview:
    """The bytes of ``tensor`` (made contiguous, on the CPU) without a further copy."""
    # conjugate and negative views keep their flag beside the bytes: resolve them first
    flat = tensor.detach().cpu().resolve_conj().resolve_neg().contiguous().reshape(-1)
    if not flat.numel():
        return memoryview(b"")
    array: Any = flat.view(torch.uint8).numpy()
    return memoryview(array)


def tensor_from_bytes(data: Sequence[Any], meta: Any) -> torch.Tensor:
    """A new tensor holding a copy of the bytes of the frames ``data`` (buffers, in order), of
    the dtype and shape ``meta`` declares (checked against the bytes before anything is
    allocated)."""
    raws = [np.frombuffer(frame, dtype=np.uint8) for frame in data]
    dtype, shape = tensor_meta(meta, sum(raw.size for raw in raws))
    if dtype is torch.bool and any(raw.size and int(raw.max()) > 1 for raw in raws):
        raise CommError("a bool tensor from the store holds bytes other than 0 and 1")
    out = torch.empty(shape, dtype=dtype)
    if out.numel():
        target, start = out.reshape(-1).view(torch.uint8).numpy(), 0
        for raw in raws:
            target[start : start + raw.size] = raw
            start += raw.size
    return out


class _Client:
    """One DEALER socket to the coordinator; strict request/reply, one request at a time."""

    def __init__(
        self,
        context: zmq.Context[Any],
        endpoint: str,
        key: bytes,
        health: Health,
    ) -> None:
        self.endpoint = endpoint
        self._opened_with = (context, key, health)
        # set once the coordinator let a request go unanswered: later calls fail at once
        # (and aborts are not tried) instead of each waiting out its own timeout
        self._silenced = threading.Event()
        self._socket = context.socket(zmq.DEALER)
        for option, value in client_options(key).items():  # the gate's password
            self._socket.setsockopt(option, value)
        self._socket.connect(endpoint)
        self._auth = ClientAuth(key)
        self._health = health
        self._lock = threading.Lock()
        self._counter = 0

    @property
    def silenced(self) -> bool:
        """Whether the coordinator let a request of this connection go unanswered."""
        return self._silenced.is_set()

    def silence(self) -> None:
        """Take the coordinator for silent: waits end within a health slice."""
        self._silenced.set()

    def revive(self) -> None:
        """Try the coordinator again (a repaired group: it may only have been slow)."""
        self._silenced.clear()

    def twin(self) -> _Client:
        """A new connection to the same coordinator (it still has to say hello), whose
        silence is its own: a short abort that times out must not silence the store."""
        context, key, health = self._opened_with
        return _Client(context, self.endpoint, key, health)

    def hello(self, wait_s: float) -> None:
        """The handshake: a session with the coordinator, or CommTimeoutError."""
        with self._lock:
            deadline = time.monotonic() + wait_s
            frames, nonce = self._auth.hello()
            self._send(frames, deadline)
            while not self._auth.accept_hello(nonce, self._next(deadline)):
                _LOG.warning("network store client at %s ignored a bad hello", self.endpoint)

    def start(self, header: list[Any], wait_s: float, data: memoryview | None = None) -> int:
        """Send one request; its counter, to ``finish`` it with."""
        raw = _packed(header)
        with self._lock:
            self._counter += 1
            frames = self._auth.seal(self._counter, raw, data)
            self._send(frames, time.monotonic() + wait_s)
            return self._counter

    def finish(self, counter: int, wait_s: float) -> tuple[bytes, list[zmq.Frame] | None]:
        """Wait up to ``wait_s`` for the answer to request ``counter``: (header, data)."""
        with self._lock:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    answer = self._auth.open_reply(counter, self._next(deadline))
                except Refused as refusal:
                    _LOG.warning("network store client at %s: %s", self.endpoint, refusal)
                    continue
                if answer is not None:  # None: the answer to a request given up on
                    return answer

    def _send(self, frames: list[Any], deadline: float) -> None:
        """Send by ``deadline``, looking at the coordinator's health while the socket is full
        or has no peer (an in-process coordinator that died leaves none)."""
        while True:
            self._check_health()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._silent()
            self._socket.setsockopt(zmq.SNDTIMEO, int(min(remaining, _HEALTH_SLICE_S) * 1000) + 1)
            try:
                self._socket.send_multipart(frames, copy=False)
                return
            except zmq.Again:  # nothing was queued: the first frame is the one that waits
                continue

    def _next(self, deadline: float) -> list[zmq.Frame]:
        """The next message, looking at the coordinator's health while it waits."""
        while True:
            self._check_health()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._silent()
            if self._socket.poll(int(min(remaining, _HEALTH_SLICE_S) * 1000) + 1):
                return self._socket.recv_multipart(copy=False)

    def _check_health(self) -> None:
        problem = self._health()
        if problem is not None:
            raise CommError(f"the network store served at {self.endpoint} is gone: {problem}")
        if self._silenced.is_set():
            raise self._silent()

    def _silent(self) -> CommTimeoutError:
        self._silenced.set()
        return CommTimeoutError(
            f"the network store coordinator at {self.endpoint} did not answer (rank 0 "
            "never opened the store, closed it, or its process is gone)"
        )

    def send(self, header: list[Any]) -> None:
        """Fire and forget (LEAVE): nobody waits for an answer; dropped if it cannot go."""
        with self._lock:
            self._counter += 1
            frames = self._auth.seal(self._counter, ormsgpack.packb(header), None)
            try:
                self._socket.send_multipart(frames, flags=zmq.NOBLOCK)
            except zmq.Again:
                _LOG.debug("network store client at %s: LEAVE not sent", self.endpoint)

    def close(self) -> None:
        self._socket.close(0)


def _packed(header: list[Any]) -> bytes:
    """``header`` as MessagePack; CommError if it is larger than one frame may be (the
    coordinator would drop the connection)."""
    raw = ormsgpack.packb(header)
    if len(raw) > FRAME_BYTES:
        raise CommError(
            f"a network store request of {len(raw)} bytes (op {header[0]}): a request header "
            f"holds at most {FRAME_BYTES} bytes (fewer or shorter keys)"
        )
    return raw


def _parse_reply(raw: bytes) -> list[Any]:
    """A reply header ``[status, ...]`` (authenticated, but still checked)."""
    try:
        reply = ormsgpack.unpackb(raw)
    except ormsgpack.MsgpackDecodeError:
        reply = None
    if type(reply) is not list or not reply or type(reply[0]) is not int:
        reply = None
    if reply is None or reply[0] not in _STATUSES:
        raise CommError(f"the network store coordinator sent a malformed reply {raw[:80]!r}")
    return reply


def _message(reply: list[Any]) -> str | None:
    """The message of an ``ABORTED`` query's answer: ``[OK, message or nil]``."""
    message = reply[1] if len(reply) == 2 else None
    if len(reply) != 2 or not (message is None or type(message) is str):
        raise CommError(f"the network store coordinator sent a malformed reply {reply!r:.80}")
    return message


def _detail(reply: list[Any]) -> str:
    """The text an ERROR or TIMEOUT reply carries."""
    return str(reply[1]) if len(reply) > 1 else "no detail given"


def _check_endpoint(endpoint: Any, rank: int) -> None:
    """``tcp://HOST:PORT``; other ranks need rank 0's actual port (not 0)."""
    if not isinstance(endpoint, str) or not endpoint.startswith("tcp://"):
        raise CommError(f"a network store needs an endpoint 'tcp://HOST:PORT', got {endpoint!r}")
    host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise CommError(f"a network store needs an endpoint 'tcp://HOST:PORT', got {endpoint!r}")
    if rank != 0 and int(port) == 0:
        raise CommError(
            f"rank {rank} cannot connect to {endpoint}: port 0 is for rank 0, which binds a free "
            "port and reports it as store.endpoint for the caller to pass on"
        )


class NetworkTensorStore(TensorStore):
    """A TensorStore participant over TCP; see the module docstring.

    ``endpoint`` is where the coordinator serves: on rank 0 the endpoint actually bound.
    """

    carries_aborts = True
    reads_move_bytes = True

    def __init__(
        self,
        store_key: str,
        world_size: int,
        rank: int,
        client: _Client,
        coordinator: Coordinator | None,
        endpoint: str,
    ) -> None:
        self.store_key = store_key
        self.world_size = world_size
        self.rank = rank
        self.endpoint = endpoint
        self._client: _Client | None = client
        self._coordinator = coordinator
        self._joined = False  # only a member may leave: a refused duplicate must not
        self._defer_barrier = False  # rank 0 on port 0: the construction barrier completes later
        self._pending: tuple[str, int, Deadline] | None = None

    @classmethod
    def open(
        cls,
        store_key: str,
        world_size: int,
        rank: int,
        namespace: CommNamespace,
        endpoint: str,
        *,
        max_bytes: int = MAX_STORE_BYTES,
    ) -> NetworkTensorStore:
        """Join the store served at ``endpoint`` by rank 0; ``namespace.secret`` authenticates
        (every participant passes the program's namespace). Rank 0 may bind port 0 and tell the
        others ``store.endpoint``; ``max_bytes`` (rank 0) caps the tensor bytes held.

        Example:
            >>> ns = CommNamespace.create()
            >>> NetworkTensorStore.open("solo", 1, 0, ns, "tcp://127.0.0.1:0").close()
        """
        check_participant(store_key, world_size, rank)
        _check_endpoint(endpoint, rank)
        key = derive_key(namespace.secret)
        context = store_context()  # its ZAP handler is the coordinators' gate
        scoped = namespace.scoped_key(store_key)
        coordinator = None
        if rank == 0:
            coordinator = Coordinator(context, endpoint, scoped, world_size, key, max_bytes)
        health: Health = coordinator.failure_text if coordinator is not None else lambda: None
        address = coordinator.local_endpoint if coordinator is not None else endpoint
        client = _Client(context, address, key, health)
        served = coordinator.endpoint if coordinator is not None else endpoint
        store = cls(store_key, world_size, rank, client, coordinator, served)
        store._defer_barrier = rank == 0 and world_size > 1 and endpoint.endswith(":0")
        return finish_open(store, lambda: store._join(scoped))

    def _join(self, scoped_key: str) -> None:
        deadline = Deadline()
        assert self._client is not None  # just opened
        self._client.hello(deadline.remaining() + _GRACE_S)
        self._call("open", [Op.JOIN, self.rank, scoped_key, self.world_size], deadline)
        self._joined = True

    def _call(
        self,
        call: str,
        header: list[Any],
        deadline: Deadline,
        data: memoryview | None = None,
        key: str = "",
    ) -> tuple[list[Any], list[zmq.Frame] | None]:
        """One request (on ``key``) and its answer; CommError, CommTimeoutError or
        PeerFailedError from the coordinator's."""
        self._settle()
        counter = self._live_client().start(header, deadline.remaining() + _GRACE_S, data)
        return self._answer(call, counter, deadline, key)

    def _answer(
        self,
        call: str,
        counter: int,
        deadline: Deadline,
        key: str = "",
        client: _Client | None = None,
    ) -> tuple[list[Any], list[zmq.Frame] | None]:
        client = client or self._live_client()
        raw, frame = client.finish(counter, deadline.remaining() + _GRACE_S)
        reply = _parse_reply(raw)
        if reply[0] == Status.TIMEOUT:
            raise timeout_error(self, call, deadline.seconds, _detail(reply))
        if reply[0] == Status.ABORTED:
            raise peer_failed_error(self, call, key, _detail(reply))
        if reply[0] != Status.OK:
            raise CommError(f"{call} on store {self.store_key!r}: {_detail(reply)}")
        return reply, frame

    def _settle(self) -> None:
        """Collect the answer of a deferred construction barrier before anything else."""
        if self._pending is not None:
            (call, counter, deadline), self._pending = self._pending, None
            self._answer(call, counter, deadline)

    def _live_client(self) -> _Client:
        if self._client is None:
            raise CommError(f"{self!r} is closed")
        return self._client

    def src_set(self, key: str, tensor: torch.Tensor, get_count: int) -> None:
        check_set(key, tensor, get_count, self.world_size)
        meta = [dtype_code(tensor.dtype), list(tensor.shape)]
        header = [Op.SET, self.rank, key, get_count, meta]
        self._call("src_set", header, Deadline(), tensor_bytes(tensor), key)

    def dest_get(self, key: str) -> torch.Tensor:
        check_key(key)
        deadline = Deadline()
        header = [Op.GET, self.rank, key, deadline.seconds]
        reply, frame = self._call("dest_get", header, deadline, key=key)
        if frame is None or len(reply) != 2:
            raise CommError(f"dest_get({key!r}): the coordinator's answer carries no tensor")
        return tensor_from_bytes([part.buffer for part in frame], reply[1])

    def dest_finish_get(self, key: str) -> None:
        check_key(key)
        self._call("dest_finish_get", [Op.FINISH, self.rank, key], Deadline())

    def src_wait_until_get_finished(self, key: str) -> None:
        check_key(key)
        deadline = Deadline()
        header = [Op.WAIT, self.rank, key, deadline.seconds]
        self._call("src_wait_until_get_finished", header, deadline, key=key)

    def _forget_exchange(self, published: Sequence[str]) -> None:
        """Drop ``published``, finished by every consumer (or aborted): no barrier."""
        if published:
            self._call("end_exchange", [Op.DROP, self.rank, list(published)], Deadline())

    def abort(self, scope: str, message: str) -> bool:
        """Tell the coordinator over a connection of its own (this participant's may be
        waiting, on another thread, for an answer the abort brings)."""
        check_scope(scope)
        client = self._live_client()
        if client.silenced:  # the coordinator is known not to answer: nobody to tell
            return False
        line = client.twin()
        try:  # a courtesy to the peers, never worth the comm timeout (one per group held)
            deadline = Deadline(min(_ABORT_S, GlobalOption.get_comm_timeout_second()))
            line.hello(deadline.remaining() + _GRACE_S)
            header = [Op.ABORT, self.rank, scope, cut_message(message)]
            counter = line.start(header, deadline.remaining() + _GRACE_S)
            self._answer("abort", counter, deadline, client=line)
        finally:
            line.close()
        return True

    def give_up(self) -> None:
        """Silence the coordinator's connection: a call waiting for it raises within
        ``_HEALTH_SLICE_S`` and later ones at once (an abort cannot end a wait whose
        coordinator is gone)."""
        client = self._client
        if client is not None:
            client.silence()

    def aborted(self, scope: str) -> str | None:
        if not is_scope(scope):  # no key has it as its scope: never aborted
            return None
        header = [Op.ABORTED, self.rank, scope]
        return _message(self._call("aborted", header, Deadline())[0])

    def barrier(self) -> None:
        deadline = Deadline()
        header = [Op.BARRIER, self.rank, deadline.seconds]
        if self._defer_barrier:  # rank 0 on port 0: the caller must learn the port first
            self._defer_barrier = False
            counter = self._live_client().start(header, deadline.remaining() + _GRACE_S)
            self._pending = ("barrier", counter, deadline)
            return
        self._call("barrier", header, deadline)

    def discard(self) -> None:
        """As the base's. A coordinator that went silent is tried again first, briefly: if
        it answers (it was only slow) the store serves again; else this fails at once."""
        client = self._live_client()
        if client.silenced and self._answers(client):
            client.revive()
        super().discard()

    def _answers(self, client: _Client) -> bool:
        """Whether the coordinator takes a fresh connection's hello within seconds."""
        line = client.twin()
        try:
            line.hello(_ABORT_S + _GRACE_S)
        except CommError:  # CommTimeoutError included: it is silent indeed
            return False
        finally:
            line.close()
        return True

    def _clear_round(self) -> None:
        self._call("reset", [Op.CLEAR, self.rank], Deadline())

    def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        if self._joined:
            client.send([Op.LEAVE, self.rank])
        client.close()
        if self._coordinator is not None:  # the others may still be ending an exchange
            self._coordinator.retire(GlobalOption.get_comm_timeout_second())
