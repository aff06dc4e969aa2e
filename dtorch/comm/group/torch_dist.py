"""The torch.distributed backend: one rank per process, Gloo for CPU tensors, NCCL for CUDA.

Each group builds its own process group object (``ProcessGroupGloo`` / ``ProcessGroupNCCL``)
directly from its rendezvous store (``GroupRendezvous``: a ``FileStore`` whose path carries the
manager's namespace on one machine, a prefix of a shared c10d store across hosts), so no global
default process group is touched and any number of groups coexist in one process. Gloo binds the
rendezvous's ``host_address`` (loopback unless the caller names its interface); NCCL's own
bootstrap picks its interface itself (``NCCL_SOCKET_IFNAME``). Uneven shards are padded to
``ceil(n / world)`` and unpadded after the exchange; avg is a sum divided locally.

CUDA groups (NCCL) run on the process's current CUDA device, which the worker sets.

Waiting: every collective is started asynchronously and first waited on for a short probe. A
rank still waiting after the probe writes its arrival mark (``arrived/<rank>``: the last
collective it waited in, one key per rank, overwritten: a shared store lives as long as the
program) to the rendezvous store, so when the collective finally times out (the process group's
timeout is ``GlobalOption.get_comm_timeout_second()``) the ranks whose mark is older are the
ones that never came. Fast collectives never touch the store. The rest of the wait is cut into
half-second slices, and between two of them the rank looks at its peers' processes
(``torch_peers``: Gloo itself tells only the ranks that exchange with a dead peer): a dead peer
fails the collective with a ``PeerDiedError`` naming its rank and pid, as does a Gloo failure
seen while a peer is dead. A rank whose collective fails otherwise publishes the failure
(``failed/<seq>``), and the ranks still waiting fail with it at their next look: that is how
the death of a peer on another host, whose pid nobody here can look up, reaches every survivor.

Failures outside a collective (a rank whose kernel fails before it calls the collective the
others wait in) cannot be told to Gloo or NCCL: a started collective cannot be withdrawn. The
runtime's scopes are told through the rendezvous store instead (``abort``: ``aborted/<scope>``),
and a rank waiting in a collective of that scope fails with ``PeerFailedError`` at its next
look (within half a second). Its process group still holds the abandoned collective, which
would pair with the next one, so any abort breaks the group on every rank that hears of it
(the failing rank included): its later collectives fail at once, telling their scope in turn,
and ``reset`` (every rank idle, a worker handed to a new graph) rebuilds the process group
under a fresh prefix of the store on every rank where one of them broke it
(``rebuild/<epoch>``).

Example (one process, world size 1):
    >>> import tempfile, torch
    >>> from dtorch.comm.group.backend import GroupInfo
    >>> from dtorch.comm.group.reduce_op import ReduceOp
    >>> from dtorch.comm.group.rendezvous import GroupRendezvous
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     rendezvous = GroupRendezvous.in_directory("rdv", tmp)
    ...     backend = TorchDistBackend(GroupInfo("cpu", (0,), (0,)), rendezvous)
    ...     print(backend.all_reduce({0: torch.ones(2)}, ReduceOp.SUM))
    ...     backend.close()
    {0: tensor([1., 1.])}
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from dtorch.comm.group.backend import GroupBackend, GroupInfo, RankTensors, ScopeSource
from dtorch.comm.group.carriers import moved, reduced
from dtorch.comm.group.chunks import (
    chunk_piece,
    pad_dim,
    padded_chunk,
    split_chunks,
    with_dim,
)
from dtorch.comm.group.reduce_op import ReduceOp, finish_average
from dtorch.comm.group.rendezvous import GroupRendezvous
from dtorch.comm.group.torch_peers import DeadRank, RankPeers, hello_key, hello_text
from dtorch.comm.store.base import PeerFailedError, cut_message
from dtorch.errors import CommError, CommTimeoutError, PeerDiedError
from dtorch.ir.sharding import chunk_sizes
from dtorch.options import GlobalOption

#: How long a collective runs before its rank records its arrival in the store.
_PROBE_SECONDS = 0.05

#: The slices of a longer wait, between which the peers' processes are looked at.
_RECHECK_SECONDS = 0.5

#: How long a rank keeps waiting past the process group's own timeout before it gives up.
_GRACE_SECONDS = 5.0

#: How long a Gloo failure waits to see a peer's death (its exit may show a moment later).
_DEATH_SHOWS_SECONDS = 0.3

#: Avg is reduced as a sum and divided locally (not every backend implements AVG).
_DIST_OPS: dict[ReduceOp, Any] = {
    ReduceOp.SUM: dist.ReduceOp.SUM,
    ReduceOp.AVG: dist.ReduceOp.SUM,
    ReduceOp.MAX: dist.ReduceOp.MAX,
    ReduceOp.MIN: dist.ReduceOp.MIN,
}


def _gloo(store: Any, rank: int, size: int, timeout: timedelta, host: str) -> Any:
    options = dist.ProcessGroupGloo._Options()  # type: ignore[attr-defined]  # not in the stubs
    options._timeout = timeout
    # the listener on this host's interface only (the default binds what the hostname names)
    options._devices = [dist.ProcessGroupGloo.create_device(hostname=host)]
    return dist.ProcessGroupGloo(store, rank, size, options)


def _nccl(store: Any, rank: int, size: int, timeout: timedelta, host: str) -> Any:
    if not dist.is_nccl_available():
        raise CommError(
            "NCCL is not available in this torch build; cuda groups across "
            "processes need it (use threads or DTORCH_DTENSOR_IN_SAME_DEVICE)"
        )
    options = dist.ProcessGroupNCCL.Options()
    options._timeout = timeout
    return dist.ProcessGroupNCCL(store, rank, size, options)


#: The collective library per device kind.
_PROCESS_GROUPS: dict[str, Callable[[Any, int, int, timedelta, str], Any]] = {
    "cpu": _gloo,
    "cuda": _nccl,
}


def _arrival_key(rank: int) -> str:
    return f"arrived/{rank}"


def _failed_key(epoch: int, seq: int) -> str:
    return f"failed/{epoch}.{seq}"


def _aborted_key(scope: str) -> str:
    return f"aborted/{scope}"


def _rebuild_key(epoch: int) -> str:
    return f"rebuild/{epoch}"


class TorchDistBackend(GroupBackend):
    """One rank of a group whose ranks live in different processes (see the module doc)."""

    def __init__(
        self, info: GroupInfo, rendezvous: GroupRendezvous, scopes: ScopeSource | None = None
    ) -> None:
        if len(info.ranks) != 1:
            raise CommError(
                f"{info}: the torch.distributed backend serves one rank per process; "
                f"use the same-device backend for callers holding several ranks"
            )
        self._info = info
        self._rank = info.ranks[0]
        self._timeout = timedelta(seconds=GlobalOption.get_comm_timeout_second())
        self._scopes = scopes
        self._seq = 0
        self._epoch = 0  # process groups rebuilt so far (``reset``)
        self._broken = ""
        self._retired: list[Any] = []  # broken process groups, shut down at close
        self._path = rendezvous.path
        self._host = rendezvous.host_address
        self._store: Any = rendezvous.open(info.world_size, self._rank, self._timeout)
        try:
            self._await_peers(self._host)
            self._peers = RankPeers.read(self._store, self._rank, info.world_size, self._host)
            self._pg: Any = self._build("pg")
        except BaseException as error:
            self._abandon(error)
            raise

    def _abandon(self, error: BaseException) -> None:
        # A failed creation gives up its use of the file as a close does: the failed frames'
        # locals (a PrefixStore of the FileStore) are dropped first, so its destructor runs now.
        _clear_frames(error)
        self._store = None
        if self._path is not None:
            with contextlib.suppress(OSError):
                RankPeers(self._rank, self._info.world_size, ()).leave(self._path)

    def _build(self, prefix: str) -> Any:
        """A process group of this rank, meeting the others under ``prefix`` of the store."""
        make = _PROCESS_GROUPS[self._info.device_kind]
        world = self._info.world_size
        try:
            return make(dist.PrefixStore(prefix, self._store), self._rank, world, self._timeout,
                        self._host)  # fmt: skip
        except RuntimeError as error:
            # the failed frames hold the store: cleared, so that a close destroys it
            _clear_frames(error)
            raise CommError(f"{self._info}: creating the process group failed: {error}") from error

    def _await_peers(self, host: str) -> None:
        # Named hellos first: a rank that never creates the group is reported by rank; each
        # hello says which process the rank is, for the others to watch.
        self._store.set(hello_key(self._rank), hello_text(host))
        keys = [hello_key(r) for r in range(self._info.world_size)]
        try:
            self._store.wait(keys, self._timeout)
        except RuntimeError:
            missing = [r for r, k in enumerate(keys) if not self._store.check([k])]
            raise CommTimeoutError(
                f"creating {self._info}: ranks {missing} never came within "
                f"{self._timeout.total_seconds()} s (DTORCH_COMM_TIMEOUT_SECOND)"
            ) from None

    # --- waiting -------------------------------------------------------------------------

    def _run(self, collective: str, start: Callable[[], Any]) -> None:
        scope = self._scopes.current_scope() if self._scopes is not None else ""
        if self._broken:
            raise self._refused(collective, scope)
        seq, self._seq = self._seq, self._seq + 1
        started = False
        try:
            work = start()
            started = True
            if not self._probe(work, _PROBE_SECONDS):
                self._store.set(_arrival_key(self._rank), str(self._mark(seq)))
                self._await(collective, seq, scope, work)
        except PeerFailedError:  # the collective is abandoned: the process group is not sound
            self._break(f"{collective} was abandoned: another rank failed")
            raise
        except CommError as error:
            self._break_if(started, collective)
            self._published(seq, error)
            raise
        except (RuntimeError, ValueError) as error:
            self._break_if(started, collective)
            # no local names the failure: one would tie it to its own traceback (a cycle that
            # keeps ``work``, and so the process group's connections, alive until a gc)
            raise self._published(seq, self._failure(collective, seq, error)) from error

    def _await(self, collective: str, seq: int, scope: str, work: Any) -> None:
        """Wait for ``work`` in slices, looking at the peers' processes, at failures
        published by the other ranks and at an abort of ``scope`` between them."""
        deadline = time.monotonic() + self._timeout.total_seconds() + _GRACE_SECONDS
        failed = _failed_key(self._epoch, seq)
        while not self._probe(work, _RECHECK_SECONDS):
            dead = self._peers.dead()
            if dead:
                raise self._died(collective, dead, "seen while this rank waited in the collective")
            if self._store.check([failed]):
                text = self._store.get(failed).decode()
                raise CommError(f"{collective} on {self._info} failed on another rank: {text}")
            if scope and self._store.check([_aborted_key(scope)]):
                text = self._store.get(_aborted_key(scope)).decode()
                raise PeerFailedError(
                    f"{collective} on {self._info}: another rank failed: {text}", text
                )
            if time.monotonic() > deadline:  # Gloo's own timeout should have come first
                raise RuntimeError("timed out: the collective outlasted the group's timeout")

    def _mark(self, seq: int) -> int:
        """Collective ``seq`` of the current process group, as arrival marks order them."""
        return (self._epoch << 32) | seq

    def _refused(self, collective: str, scope: str) -> CommError:
        """The error of a collective on a broken group; its scope is told to the others."""
        error = CommError(
            f"{collective} on {self._info}: the group is unusable after an earlier failure "
            f"({self._broken}) until the runtime resets it"
        )
        if scope and self._scopes is not None:
            self._scopes.fail_scope(error)
        return error

    def _break(self, why: str) -> None:
        """The process group may hold a collective some rank abandoned: no further collective
        until every rank rebuilds it (``reset``), which this records for all of them."""
        if self._broken:
            return
        self._broken = why
        with contextlib.suppress(RuntimeError):  # a store gone with its host: nothing to record
            self._store.set(_rebuild_key(self._epoch + 1), why)

    def _break_if(self, started: bool, collective: str) -> None:
        """A collective that failed once started may be left half done in the process group:
        break it (nothing was sent when it failed to start)."""
        if started:
            self._break(f"{collective} failed")

    def abort(self, scope: str, message: str) -> None:
        if self._store is None:
            return
        with contextlib.suppress(RuntimeError):
            key = _aborted_key(scope)
            if not self._store.check([key]):
                self._store.set(key, cut_message(message))
        self._break(f"scope {scope} failed")

    def reset(self) -> None:
        """Rebuild the process group if any rank broke it (every rank idle and resetting)."""
        if self._store is None:
            return
        try:
            rebuild = bool(self._store.check([_rebuild_key(self._epoch + 1)]))
        except RuntimeError:
            return
        if not rebuild:
            return
        self._retired.append(self._pg)  # an abandoned collective may still hold it
        self._epoch += 1
        self._seq = 0
        self._pg = self._build(f"pg{self._epoch}")
        self._broken = ""

    def _published(self, seq: int, error: CommError) -> CommError:
        """``error``, once the ranks still waiting in collective ``seq`` are told why it failed
        here (timeouts come to every rank anyway; the first failure told is the one that
        stays)."""
        if isinstance(error, CommTimeoutError):
            return error
        key = _failed_key(self._epoch, seq)
        with contextlib.suppress(RuntimeError):  # a store gone with its host: nothing to tell
            if not self._store.check([key]):
                self._store.set(key, f"rank {self._rank}: {error}")
        return error

    @staticmethod
    def _probe(work: Any, seconds: float) -> bool:
        """True when ``work`` finished within ``seconds``; re-raises a real failure."""
        try:
            work.wait(timedelta(seconds=seconds))
        except RuntimeError:
            if work.is_completed():  # it may have finished just after the slice ran out:
                return bool(work.wait())  # its own outcome (a real failure raises here)
            return False
        return True

    def _died(self, collective: str, dead: list[DeadRank], detail: str) -> PeerDiedError:
        who = ", ".join(f"rank {rank} (pid {pid})" for rank, pid in dead)
        return PeerDiedError(
            f"{collective} on {self._info} failed: {who} died ({detail})", tuple(dead)
        )

    def _failure(self, collective: str, seq: int, error: Exception) -> CommError:
        text = str(error)
        timed_out = "timed out" in text.lower()
        dead = self._peers.dead_within(0.0 if timed_out else _DEATH_SHOWS_SECONDS)
        if dead:
            return self._died(collective, dead, text)
        if not timed_out:
            return CommError(f"{collective} on {self._info} failed: {text}")
        missing = [
            r for r in range(self._info.world_size) if r != self._rank and not self._came(r, seq)
        ]
        return CommTimeoutError(
            f"{collective} on {self._info} timed out after {self._timeout.total_seconds()} s "
            f"(DTORCH_COMM_TIMEOUT_SECOND); ranks that never came: {missing} ({text})"
        )

    def _came(self, rank: int, seq: int) -> bool:
        """Whether ``rank`` marked its arrival in collective ``seq`` (or a later one)."""
        key = _arrival_key(rank)
        return bool(self._store.check([key])) and int(self._store.get(key)) >= self._mark(seq)

    # --- collectives ---------------------------------------------------------------------

    def all_reduce(self, inputs: RankTensors, op: ReduceOp) -> RankTensors:
        local, op_in, back = reduced(inputs[self._rank], op)
        out = local.clone(memory_format=torch.contiguous_format)
        options = dist.AllreduceOptions()
        options.reduceOp = _DIST_OPS[op_in]
        self._run("all_reduce", lambda: self._pg.allreduce([out], options))
        finish_average(out, op_in, self._info.world_size)
        return {self._rank: back(out)}

    def all_gather(self, inputs: RankTensors, dim: int, sizes: tuple[int, ...]) -> RankTensors:
        local, back = moved(inputs[self._rank])
        if dim == 0 and len(set(sizes)) == 1:
            out = local.new_empty(with_dim(local.shape, 0, sizes[0] * len(sizes)))
            self._run("all_gather", lambda: self._pg._allgather_base(out, local.contiguous()))
            return {self._rank: back(out)}
        pieces = self._gather_padded("all_gather", local, dim, sizes)
        return {self._rank: back(torch.cat(pieces, dim))}

    def all_gather_list(
        self, inputs: RankTensors, dim: int, sizes: tuple[int, ...]
    ) -> dict[int, list[torch.Tensor]]:
        local, back = moved(inputs[self._rank])
        pieces = self._gather_padded("all_gather_into_list", local, dim, sizes)
        return {self._rank: [back(p.contiguous()) for p in pieces]}

    def _gather_padded(
        self, collective: str, local: torch.Tensor, dim: int, sizes: tuple[int, ...]
    ) -> list[torch.Tensor]:
        width = max(sizes)
        padded = pad_dim(local, dim, width) if local.shape[dim] != width else local.contiguous()
        outs = [torch.empty_like(padded) for _ in sizes]
        self._run(collective, lambda: self._pg.allgather([outs], [padded]))
        return [o.narrow(dim, 0, n) for o, n in zip(outs, sizes, strict=True)]

    def reduce_scatter(self, inputs: RankTensors, dim: int, op: ReduceOp) -> RankTensors:
        world = self._info.world_size
        local, op, back = reduced(inputs[self._rank], op)
        front = local.movedim(dim, 0)
        width = padded_chunk(front.shape[0], world)
        padded = pad_dim(front, 0, width * world) if front.shape[0] != width * world else front
        padded = padded.contiguous()
        out = padded.new_empty(with_dim(padded.shape, 0, width))
        options = dist.ReduceScatterOptions()
        options.reduceOp = _DIST_OPS[op]
        self._run("reduce_scatter", lambda: self._pg._reduce_scatter_base(out, padded, options))
        finish_average(out, op, world)
        mine = out.narrow(0, 0, chunk_sizes(front.shape[0], world)[self._rank])
        return {self._rank: back(mine.movedim(0, dim).contiguous())}

    def all_to_all(
        self, inputs: RankTensors, src_dim: int, dst_dim: int, src_sizes: tuple[int, ...]
    ) -> RankTensors:
        local, back = moved(inputs[self._rank])
        dst_sizes = chunk_sizes(local.shape[dst_dim], self._info.world_size)
        send = self._pack_for_all_to_all(local, src_dim, dst_dim, max(src_sizes))
        recv = torch.empty_like(send)
        options = dist.AllToAllOptions()
        self._run("all_to_all", lambda: self._pg.alltoall_base(recv, send, [], [], options))
        pieces = [
            recv[s].narrow(src_dim, 0, src_sizes[s]).narrow(dst_dim, 0, dst_sizes[self._rank])
            for s in range(self._info.world_size)
        ]
        return {self._rank: back(torch.cat(pieces, src_dim))}

    def _pack_for_all_to_all(
        self, local: torch.Tensor, src_dim: int, dst_dim: int, src_width: int
    ) -> torch.Tensor:
        """``[world, ...]``: slot s holds the piece for rank s, padded to common extents."""
        world = self._info.world_size
        chunks = split_chunks(local, dst_dim, world)
        if local.shape[src_dim] == src_width and len({c.shape[dst_dim] for c in chunks}) == 1:
            return torch.stack(chunks)
        dst_width = padded_chunk(local.shape[dst_dim], world)
        shape = with_dim(with_dim(local.shape, src_dim, src_width), dst_dim, dst_width)
        send = local.new_zeros((world, *shape))
        for s in range(world):
            piece = chunk_piece(local, dst_dim, world, s)
            slot = send[s].narrow(src_dim, 0, piece.shape[src_dim])
            slot.narrow(dst_dim, 0, piece.shape[dst_dim]).copy_(piece)
        return send

    def broadcast(self, inputs: RankTensors, src: int) -> RankTensors:
        local, back = moved(inputs[self._rank])
        out = local.clone(memory_format=torch.contiguous_format)
        options = dist.BroadcastOptions()
        options.rootRank = src
        options.rootTensor = 0
        self._run("broadcast", lambda: self._pg.broadcast([out], options))
        return {self._rank: back(out)}

    def barrier(self) -> None:
        # A one-element all-reduce: Gloo's barrier has no per-call timeout hook to probe.
        flag = torch.zeros(1, device=self._info.device_kind)
        self._run("barrier", lambda: self._pg.allreduce([flag]))

    def close(self) -> None:
        self._shut_down()
        self._store = None  # its last reference: the FileStore's destructor has run now
        path, self._path = self._path, None  # once: a later group may use the name again
        if path is not None:
            with contextlib.suppress(OSError):  # cleanup only: never fail a close for it
                self._peers.leave(path)

    def _shut_down(self) -> None:
        # its own frame: the process groups (which hold the store) are dropped at its return
        pg, self._pg = getattr(self, "_pg", None), None
        for each in [*getattr(self, "_retired", ()), pg]:
            if each is not None and hasattr(each, "shutdown"):
                each.shutdown()
        self._retired = []


def _clear_frames(error: BaseException | None) -> None:
    """Drop the locals of the finished frames of ``error`` and of the errors it chains."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        traceback.clear_frames(error.__traceback__)
        error = error.__cause__ or error.__context__
