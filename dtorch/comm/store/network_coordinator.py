"""The coordinator of a network store: one thread in rank 0's process, a ZeroMQ ROUTER socket.

It holds the state every participant shares (members, barrier, this round's slots with their
tensor bytes as received ZeroMQ frames) and answers requests. A request that has to wait
(``GET`` before the key is set, ``WAIT`` before every consumer finished, ``BARRIER`` before
everyone arrived) is parked and answered when the state allows, or with a timeout error naming
who is missing once its own deadline passes. Nothing polls: the thread sleeps in
``zmq.Poller`` until a message comes or the nearest deadline.

An ``ABORT`` records its scope's first message (the last ``ABORTS_KEPT`` scopes are kept, as
the other stores keep them) and answers every parked ``GET`` and ``WAIT`` on a key of that
scope with ``[ABORTED, message]`` at once; from then on a ``GET`` of a key never set, a
``WAIT`` for consumers that did not all finish and a ``SET`` of that scope get the same
answer, and a ``FINISH`` of a key its aborted producer dropped is a no-op. ``DROP`` forgets
keys their producer no longer needs (``end_exchange``, with no barrier).

What it accepts (``network_gate`` and ``network_auth`` authenticate, ``network_protocol``
parses):

* only connections that pass the gate: ZeroMQ PLAIN with the password derived from the
  program's secret, checked by the ZAP handler before any frame of the peer's is buffered;
  frames are at most ``FRAME_BYTES``; a refused handshake is logged (rate-limited, as every
  refusal here), through the ZAP handler or the socket's monitor;
* only authenticated messages of a session (a connection that completed the store's own
  hello); the rest is dropped and logged: nobody without the program's secret gets an answer;
* a ``JOIN`` binds its connection to the rank it joined as; every later request of that
  connection must name that rank, so a member sets, gets, finishes and waits only as itself;
* every header is checked field by field, a SET's declared dtype and shape against its bytes,
  and the bytes held against ``max_bytes``; a refusal is an ERROR reply and a log line;
* a member's ``LEAVE`` and its ``CLEAR`` (``reset()``) drop the slots it produced;
* an ``ABORT`` also comes from an authenticated connection that did not join (a member's
  abort line, opened while its own connection may be busy waiting): it names a rank only
  for the record, and the coordinator forgets that connection once it answered.

Rank 0's close ``retire``-s the coordinator: it keeps serving until every other member has
left (they may still be closing their last exchange), at most the comm timeout, then stops.

Nothing a peer sends ends the thread: a request that fails in any way is answered with an
error. Should the thread end anyway (a bug), ``failure`` says why and rank 0's calls fail
with that instead of waiting.

Frames: request ``[identity, nonce, counter, mac, header]`` (+ ``[digest, data...]`` for
SET); reply ``[identity, counter, mac, header]`` (+ ``[digest, data...]`` for GET): the
tensor bytes in frames of at most ``FRAME_BYTES``, kept and sent on as they came. Headers
are MessagePack lists, the first element the operation (request, then the rank) or the status
(reply).

Example:
    >>> from dtorch.comm.store.network_auth import derive_key
    >>> from dtorch.comm.store.network_gate import store_context
    >>> key = derive_key(b"s" * 32)
    >>> coordinator = Coordinator(store_context(), "tcp://127.0.0.1:0", "ns/key", 1, key)
    >>> coordinator.endpoint.startswith("tcp://127.0.0.1:")
    True
    >>> coordinator.stop()
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ormsgpack
import zmq

from dtorch.comm.store.base import (
    AbortLog,
    all_finished,
    count_finish,
    finish_detail,
    missing_ranks,
    scope_of,
)
from dtorch.comm.store.network_auth import Hello, Refused, Request, SessionTable, data_tag
from dtorch.comm.store.network_gate import Gate, password, server_options
from dtorch.comm.store.network_protocol import (
    MAX_STORE_BYTES,
    SCHEMA,
    Op,
    Status,
    parse_header,
    tensor_meta,
)
from dtorch.errors import CommError
from dtorch.transport.handshakes import HandshakeWatch, RefusalLog

_LOG = logging.getLogger(__name__)
_NO_DATA = data_tag(None)
Frames = list[zmq.Frame]


@dataclass(slots=True)
class _Slot:
    producer: int
    meta: list[Any]  # dtype code, shape
    data: Frames
    nbytes: int
    tag: bytes  # the digest the producer signed: consumers check the bytes against it
    target: int
    finished_by: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Call:
    """One authenticated request being served: who asked, its counter, its data."""

    ident: bytes
    counter: int
    rank: int
    data: Frames | None
    tag: bytes


@dataclass(slots=True)
class _Parked:
    """A request that waits for the state to change, until its deadline."""

    op: Op
    ident: bytes
    counter: int
    key: str
    rank: int
    deadline: float


class Coordinator:
    """The shared state of one network store, served from a thread; see the module docstring.

    ``key`` is the store key (``network_auth.derive_key``): the gate's password is derived
    from it. ``context`` is ``network_gate.store_context()`` (its ZAP handler is the gate);
    ``max_bytes`` caps the tensor bytes held at a time.
    """

    def __init__(
        self,
        context: zmq.Context[Any],
        endpoint: str,
        scoped_key: str,
        world: int,
        key: bytes,
        max_bytes: int = MAX_STORE_BYTES,
    ):
        self.scoped_key = scoped_key
        self.world_size = world
        self.max_bytes = max_bytes
        self.failure: BaseException | None = None
        self._stopped = False
        self._retire_at: float | None = None  # set by retire(): serve the others until then
        self._retiring = False  # the thread got retire()'s signal (only then may it end)
        self._signal_lock = threading.Lock()  # stop_tx: used by the caller, closed by the thread
        self._tx_closed = False
        self._refusals = RefusalLog(_LOG, f"network store {scoped_key!r}")
        self._gate = Gate.of(context)
        self._domain = self._gate.admit(password(key), self._refusals)
        self._router = context.socket(zmq.ROUTER)
        for option, value in server_options(self._domain).items():
            self._router.setsockopt(option, value)
        self._watch = HandshakeWatch(self._router, self._refusals)  # before any peer connects
        self.endpoint = self._bind(endpoint)
        # rank 0's own client talks to it in-process: its tensors are handed over, not copied
        self.local_endpoint = f"inproc://dtorch-store-{secrets.token_hex(8)}"
        self._router.bind(self.local_endpoint)
        stop_address = f"inproc://dtorch-store-stop-{secrets.token_hex(8)}"
        self._stop_rx = context.socket(zmq.PAIR)
        self._stop_rx.bind(stop_address)
        self._stop_tx = context.socket(zmq.PAIR)
        self._stop_tx.connect(stop_address)
        self._sessions = SessionTable(key)
        self._members: set[int] = set()
        self._arrived: dict[int, _Parked] = {}
        self._slots: dict[str, _Slot] = {}
        self._held = 0  # bytes of the slots' data
        self._parked: list[_Parked] = []
        self._aborts = AbortLog()
        self._handlers: dict[Op, Callable[[_Call, list[Any]], None]] = {
            Op.JOIN: self._join,
            Op.SET: self._set,
            Op.GET: self._get,
            Op.FINISH: self._finish,
            Op.WAIT: self._wait,
            Op.BARRIER: self._barrier,
            Op.CLEAR: self._clear,
            Op.LEAVE: self._leave,
            Op.ABORT: self._abort,
            Op.ABORTED: self._aborted,
            Op.DROP: self._drop,
        }
        self._thread = threading.Thread(target=self._run, name="dtorch-store-coord", daemon=True)
        self._thread.start()

    def _bind(self, endpoint: str) -> str:
        """Bind ``endpoint``; on failure close what __init__ opened and raise CommError."""
        try:
            return _bind(self._router, endpoint)
        except CommError:
            self._watch.close()  # before the router: see HandshakeWatch.close
            self._router.close(0)
            self._gate.release(self._domain)
            raise

    def stop(self) -> None:
        """Stop serving now and close the socket (as if rank 0's process were gone)."""
        if self._signal(b"stop"):
            self._thread.join(10)

    def retire(self, linger_s: float) -> None:
        """Rank 0 closed: serve the other members until they all left, at most ``linger_s``
        more seconds, then stop (without making rank 0's close wait)."""
        self._retire_at = time.monotonic() + linger_s
        self._signal(b"retire")

    def _signal(self, what: bytes) -> bool:
        """Tell the thread ``what`` (once: later signals are ignored); whether it was told."""
        with self._signal_lock:
            if self._stopped or self._tx_closed:
                self._stopped = True
                return False
            self._stopped = True
            with contextlib.suppress(zmq.Again):  # never waits: rx lives while tx does
                self._stop_tx.send(what, zmq.NOBLOCK)
            return True

    def _close_signal(self) -> None:
        with self._signal_lock:
            self._tx_closed = True
            self._stop_tx.close(0)

    def failure_text(self) -> str | None:
        """Why the thread stopped serving before ``stop()`` (None while it serves)."""
        if self.failure is not None:
            return f"its coordinator thread failed: {self.failure!r}"
        if not self._stopped and not self._thread.is_alive():
            return "its coordinator thread is gone"
        return None

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._router, zmq.POLLIN)
        poller.register(self._stop_rx, zmq.POLLIN)
        poller.register(self._watch.monitor, zmq.POLLIN)
        try:
            while not self._retired():
                events = dict(poller.poll(self._poll_ms()))
                if self._stop_rx in events:
                    if self._stop_rx.recv() == b"stop":
                        return
                    self._retiring = True
                if self._router in events:
                    self._dispatch(self._router.recv_multipart(copy=False))
                if self._watch.monitor in events:
                    self._watch.drain()
                self._expire()
        except BaseException as error:  # a bug: rank 0's calls report it instead of hanging
            self.failure = error
            _LOG.exception("the coordinator of network store %r stopped", self.scoped_key)
        finally:
            self._close_signal()  # first: no signal may go to a receiver that is gone
            self._watch.close()  # before the router: see HandshakeWatch.close
            self._router.close(0)
            self._gate.release(self._domain)
            self._stop_rx.close(0)

    def _retired(self) -> bool:
        """Rank 0 closed, and every other member left or the linger time is over."""
        if not self._retiring or self._retire_at is None:
            return False
        return not self._members - {0} or time.monotonic() >= self._retire_at

    def _poll_ms(self) -> int | None:
        deadlines = [p.deadline for p in self._parked]
        deadlines += [p.deadline for p in self._arrived.values()]
        if self._retiring and self._retire_at is not None:
            deadlines.append(self._retire_at)
        if not deadlines:
            return None
        return max(0, int((min(deadlines) - time.monotonic()) * 1000) + 1)

    def _dispatch(self, frames: list[zmq.Frame]) -> None:
        ident = frames[0].bytes
        try:
            message = self._sessions.receive(ident, frames[1:])
        except Refused as refusal:  # unauthenticated: no answer at all
            self._log_refusal("dropped a message", refusal)
            return
        if isinstance(message, Hello):
            self._router.send_multipart(message.reply)
            return
        self._answer_errors(ident, message)

    def _answer_errors(self, ident: bytes, request: Request) -> None:
        """Serve ``request``; whatever goes wrong becomes an ERROR reply."""
        try:
            self._serve(ident, request)
        except Refused as refusal:
            self._log_refusal("refused a request", refusal)
            self._reply(ident, request.counter, [Status.ERROR, f"refused: {refusal}"])
        except CommError as error:  # misuse by a member (a key set twice, ...)
            self._reply(ident, request.counter, [Status.ERROR, str(error)])
        except Exception as error:  # a bug in a handler: the others are still served
            _LOG.exception("network store %r failed on a request", self.scoped_key)
            self._reply(ident, request.counter, [Status.ERROR, f"internal error: {error!r}"])

    def _log_refusal(self, what: str, refusal: Refused) -> None:
        self._refusals.refused(f"{what}: {refusal}")

    def _serve(self, ident: bytes, request: Request) -> None:
        try:
            code, fields = parse_header(request.header, SCHEMA)
        except CommError as error:
            raise Refused(str(error)) from None
        op, rank = Op(code), fields[0]
        self._check_rank(ident, op, rank)
        call = _Call(ident, request.counter, rank, request.data, request.tag)
        self._handlers[op](call, fields[1:])

    def _check_rank(self, ident: bytes, op: Op, rank: int) -> None:
        """The connection may act as ``rank``: joined as it (or, for JOIN, not yet joined)."""
        if not 0 <= rank < self.world_size:
            raise Refused(f"{op.name} for rank {rank}, outside [0, {self.world_size})")
        bound = self._sessions.rank_of(ident)
        if op is Op.ABORT and bound is None:  # an abort line: authenticated, never joined
            return
        if op is Op.JOIN and bound is not None:
            raise Refused(f"JOIN as rank {rank} on a connection that joined as rank {bound}")
        if op is not Op.JOIN and bound != rank:
            raise Refused(f"{op.name} as rank {rank} from a connection of rank {bound}")

    def _reply(
        self, ident: bytes, counter: int, header: list[Any], slot: _Slot | None = None
    ) -> None:
        """Answer request ``counter`` of ``ident`` (with ``slot``'s bytes: a GET)."""
        raw = ormsgpack.packb([int(header[0]), *header[1:]])
        data, tag = (None, _NO_DATA) if slot is None else (slot.data, slot.tag)
        frames = self._sessions.seal(ident, counter, raw, data, tag)
        if frames is not None:  # None: the session left meanwhile
            self._router.send_multipart(frames, copy=False)

    def _join(self, call: _Call, args: list[Any]) -> None:
        scoped_key, world_size = args
        if scoped_key != self.scoped_key or world_size != self.world_size:
            raise CommError(
                f"the coordinator serves store {self.scoped_key!r} with world_size="
                f"{self.world_size}; rank {call.rank} asked for {scoped_key!r:.200} with "
                f"world_size={world_size}"
            )
        if call.rank in self._members:
            raise CommError(f"rank {call.rank} is already open")
        self._members.add(call.rank)
        self._sessions.bind(call.ident, call.rank)
        self._reply(call.ident, call.counter, [Status.OK])

    def _set(self, call: _Call, args: list[Any]) -> None:
        key, target, meta = args
        if call.data is None:
            raise Refused(f"SET of {key!r:.200} without data")
        if not 1 <= target <= self.world_size:
            raise Refused(f"SET of {key!r:.200} for {target} consumers of {self.world_size}")
        nbytes = sum(len(frame) for frame in call.data)
        try:
            tensor_meta(meta, nbytes)
        except CommError as error:
            raise Refused(f"SET of {key!r:.200}: {error}") from None
        if self._refuse_aborted(call, key):  # nobody would read it: the consumers failed
            return
        if key in self._slots:
            raise CommError(
                f"src_set({key!r}): the key is already set in this round; call reset() "
                "between rounds"
            )
        self._hold(key, nbytes)
        self._slots[key] = _Slot(call.rank, meta, call.data, nbytes, call.tag, target)
        self._reply(call.ident, call.counter, [Status.OK])
        self._serve_parked(key)

    def _hold(self, key: str, nbytes: int) -> None:
        """Count ``nbytes`` more held, or Refused when that passes ``max_bytes``."""
        if self._held + nbytes > self.max_bytes:
            raise Refused(
                f"src_set({key!r:.200}) of {nbytes} bytes: the store holds {self._held} bytes "
                f"and may hold at most {self.max_bytes} (MAX_STORE_BYTES); finish and reset() "
                "the keys of this round first"
            )
        self._held += nbytes

    def _get(self, call: _Call, args: list[Any]) -> None:
        key, timeout_s = args
        slot = self._slots.get(key)
        if slot is not None:
            self._reply(call.ident, call.counter, [Status.OK, slot.meta], slot)
        elif not self._refuse_aborted(call, key):
            self._park(Op.GET, call, key, timeout_s)

    def _finish(self, call: _Call, args: list[Any]) -> None:
        (key,) = args
        slot = self._slots.get(key)
        if slot is None and self._aborts.of_key(key) is not None:  # its failed producer dropped it
            self._reply(call.ident, call.counter, [Status.OK])
            return
        count_finish(key, slot, call.rank)
        self._reply(call.ident, call.counter, [Status.OK])
        self._serve_parked(key)

    def _wait(self, call: _Call, args: list[Any]) -> None:
        key, timeout_s = args
        slot = self._slots.get(key)
        if slot is None:
            raise CommError(f"src_wait_until_get_finished({key!r}): the key was never set")
        if all_finished(slot):
            self._reply(call.ident, call.counter, [Status.OK])
        elif not self._refuse_aborted(call, key):
            self._park(Op.WAIT, call, key, timeout_s)

    def _barrier(self, call: _Call, args: list[Any]) -> None:
        (timeout_s,) = args
        if call.rank in self._arrived:
            raise CommError(f"barrier(): rank {call.rank} entered the barrier twice")
        deadline = time.monotonic() + timeout_s
        parked = _Parked(Op.BARRIER, call.ident, call.counter, "", call.rank, deadline)
        self._arrived[call.rank] = parked
        if len(self._arrived) == self.world_size:
            arrived, self._arrived = self._arrived, {}
            for parked in arrived.values():
                self._reply(parked.ident, parked.counter, [Status.OK])

    def _clear(self, call: _Call, args: list[Any]) -> None:
        self._drop_slots_of(call.rank)
        self._reply(call.ident, call.counter, [Status.OK])

    def _drop_slots_of(self, rank: int) -> None:
        for key in [k for k, slot in self._slots.items() if slot.producer == rank]:
            self._held -= self._slots.pop(key).nbytes

    def _drop(self, call: _Call, args: list[Any]) -> None:
        """Forget the caller's own ``keys`` (its finished or aborted exchange): no barrier."""
        (keys,) = args
        for key in keys:
            slot = self._slots.get(key)
            if slot is not None and slot.producer == call.rank:
                self._held -= self._slots.pop(key).nbytes
        self._reply(call.ident, call.counter, [Status.OK])

    def _abort(self, call: _Call, args: list[Any]) -> None:
        scope, message = args
        if self._aborts.add(scope, message):  # the first message of a scope stays
            self._fail_parked(scope)
        self._reply(call.ident, call.counter, [Status.OK])
        if self._sessions.rank_of(call.ident) is None:  # an abort line is used once
            self._sessions.forget(call.ident)

    def _aborted(self, call: _Call, args: list[Any]) -> None:
        (scope,) = args
        self._reply(call.ident, call.counter, [Status.OK, self._aborts.get(scope)])

    def _refuse_aborted(self, call: _Call, key: str) -> bool:
        """Answer ``call`` with its scope's abort, if ``key``'s scope was aborted."""
        message = self._aborts.of_key(key)
        if message is not None:
            self._reply(call.ident, call.counter, [Status.ABORTED, message])
        return message is not None

    def _fail_parked(self, scope: str) -> None:
        """Answer every parked request on a key of the aborted ``scope`` (none will come)."""
        message = self._aborts.get(scope)
        failed = [p for p in self._parked if scope_of(p.key) == scope]
        self._parked = [p for p in self._parked if scope_of(p.key) != scope]
        for parked in failed:
            self._reply(parked.ident, parked.counter, [Status.ABORTED, message])

    def _leave(self, call: _Call, args: list[Any]) -> None:
        self._members.discard(call.rank)
        self._arrived.pop(call.rank, None)
        self._parked = [p for p in self._parked if p.rank != call.rank]
        self._drop_slots_of(call.rank)
        self._sessions.forget(call.ident)
        _LOG.debug("network store %r: rank %d left", self.scoped_key, call.rank)

    def _park(self, op: Op, call: _Call, key: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        self._parked.append(_Parked(op, call.ident, call.counter, key, call.rank, deadline))

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
                self._reply(parked.ident, parked.counter, [Status.OK, slot.meta], slot)
            elif all_finished(slot):
                self._reply(parked.ident, parked.counter, [Status.OK])
            else:
                still.append(parked)
        self._parked = still

    def _expire(self) -> None:
        now = time.monotonic()
        for parked in [p for p in self._parked if p.deadline <= now]:
            self._parked.remove(parked)
            self._reply(parked.ident, parked.counter, [Status.TIMEOUT, self._detail(parked)])
        late = [rank for rank, p in self._arrived.items() if p.deadline <= now]
        for rank in late:
            parked = self._arrived[rank]
            detail = f"ranks {missing_ranks(self.world_size, self._arrived)} never arrived"
            self._reply(parked.ident, parked.counter, [Status.TIMEOUT, detail])
        for rank in late:
            del self._arrived[rank]

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
        raise CommError(
            f"rank 0 cannot serve the network store at {endpoint}: {error} (is another store "
            "or program using that address?)"
        ) from None
    bound = socket.getsockopt(zmq.LAST_ENDPOINT)
    return bound.decode() if isinstance(bound, bytes) else str(bound)
