"""The same-device backend: every collective built from the TensorStore handshake (spec 2.3).

The participants of the store are the group's *callers* (threads or processes), not its ranks:
a caller that holds several ranks opens the store once and runs each collective in phases over
its ranks, so it never waits on itself:

1. publish: ``src_set`` every held rank's input for the other callers (never blocks);
2. read: ``dest_get_many`` of every other rank's input (blocks only on other callers, which
   publish before they read anything), check it, and compute the held ranks' outputs
   directly from all ranks' tensors (``dtorch.comm.group.compute``: whole-tensor torch
   calls);
3. release: ``release_exchange``: ``dest_finish_get`` what was read, and forget what was
   published once its consumers have finished - the memory and network stores wait for
   them here; the file store drops the keys in a later transaction of this caller, so a
   caller whose outputs are complete does not wait for its slowest reader (its next exchange
   needs that reader's data anyway, and a caller that only publishes waits in ``src_set``
   once ``MAX_RELEASED`` exchanges are unread). Every exchange has keys of its own (the
   collective's sequence number is in them), so no barrier is needed between collectives:
   a caller that runs ahead publishes keys nobody confuses with the previous exchange's.

A large all-reduce runs as two such rounds, a reduce-scatter of the flattened tensors then an
all-gather, when that moves fewer bytes per caller than every caller reducing every tensor
(``split_all_reduce_pays``: three or more callers, or two callers holding two ranks or more).
A caller that holds every rank opens no store and computes at once. Each caller reads every
published tensor once for all its ranks, so with a memory store a collective costs the output
copies and nothing else; with a file store the producer's one copy into shared memory is added.
Failures never leave the other callers waiting: whatever fails on one caller at any point of an
exchange (its publish, a read, the check of a peer's tensor, the computation, the release)
aborts the exchange's *scope* in the store (``TensorStore.abort``) before it is raised there;
every other caller's wait on a key of that scope then raises ``PeerFailedError`` at once, and
every caller drops its keys of the exchange, so the group stays usable. The scope is the
runtime's operator (``ScopeSource``: exchanges are named ``<scope>/<collective>#<index>``,
counted from zero in each scope, so callers that left a failed operator at different points
line up again at the next one), or, outside any, the exchange itself
(``<collective>#<resets>.<n>``; both rounds of a split all-reduce share one). A peer that had
every tensor it needed before the failing caller failed may finish instead (the file store's
callers do not wait for their readers): its outputs are sound, and the failing caller keeps
taking part in later collectives (the runtime's devices do, with stand-ins for failed inputs),
so nobody waits for it there either. In a runtime scope the manager aborts it on every group of
the caller (``fail_scope``), because its peers may be waiting in a later collective of the
operator on another group. A broadcast's destinations read nothing from each other: one that
fails tells the source, not the other destinations (whose data is sound). A caller that times
out aborts the scope too, so a late peer fails at once instead of waiting in turn. A caller
that sees another caller's process die (the file store's ``PeerDiedError``, within about a
second) or a barrier time out breaks the group until the runtime resets it (``reset``, when
every caller is idle): its rounds can no longer line up with the others'. Across hosts (the
network store) a failure is told the same way, through the store's coordinator; only a dead
caller is seen at the comm timeout (no pid of another host can be looked at). A store that
carried no aborts would leave the others to see a failure at the comm timeout, and a timeout
would break the group (``_abandon_untold``).

Threads of one process (the memory store) skip the handshake for a collective whose whole tensor
times its ranks is at most ``sizing.COMBINE_MAX_BYTES``: they meet in one
``MemoryTensorStore.combine``, where the last caller to arrive checks every tensor and computes
every rank's outputs, so only the earlier callers wait, once, and there is no release phase (for
a small tensor the waits, not the arithmetic, are the cost). A failure there is told like any
other (its scope is aborted).

Example (one caller holding every rank: no store, no waiting):
    >>> import torch
    >>> from dtorch.comm.group.backend import GroupInfo
    >>> backend = SameDeviceBackend(GroupInfo("cpu", (0, 1), (0, 1)), ((0, 1),), None)
    >>> backend.all_gather({0: torch.zeros(1), 1: torch.ones(1)}, 0, (1, 1))
    {0: tensor([0., 1.]), 1: tensor([0., 1.])}
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

import torch

from dtorch.comm.group import compute
from dtorch.comm.group.backend import GroupBackend, GroupInfo, RankTensors, ScopeSource
from dtorch.comm.group.buffers import EmptyFn, torch_empty
from dtorch.comm.group.chunks import chunk_piece
from dtorch.comm.group.reduce_op import ReduceOp, on_device
from dtorch.comm.group.sizing import (
    COMBINE_MAX_BYTES,
    SPLIT_MIN_NUMEL,
    split_all_reduce_pays,
    whole_bytes,
)
from dtorch.comm.store import TensorStore
from dtorch.comm.store.base import KeysTimeoutError, MeetingTimeoutError, PeerFailedError
from dtorch.comm.store.memory import MemoryTensorStore
from dtorch.errors import CommError, CommTimeoutError, PeerDiedError
from dtorch.ir.sharding import chunk_bounds, chunk_sizes

T = TypeVar("T")
V = TypeVar("V")
#: What an exchange's values are keyed by: a rank, or a (sender, reader) pair of ranks.
K = TypeVar("K", bound=int | tuple[int, int])

#: A collective's outputs for the given ranks, from every rank's tensor.
Compute = Callable[[dict[int, torch.Tensor], tuple[int, ...]], dict[int, V]]

#: Opens this caller's participant of the group's store: ``opener(world_size, rank)``.
StoreOpener = Callable[[int, int], TensorStore]

#: ``check(rank, tensor)`` raises CommError when a peer's tensor does not fit the collective.
PeerCheck = Callable[[int, torch.Tensor], None]


class SameDeviceBackend(GroupBackend):
    """The collectives of one caller over a TensorStore shared with the group's other callers.

    ``callers`` lists every caller's ranks (ascending, ordered by their first rank); this
    caller's are ``info.ranks``. ``opener`` is None only when this caller holds every rank.
    ``empty`` allocates the outputs (the manager passes its BufferPool's); ``scopes`` (the
    manager) names the runtime scope each exchange belongs to.
    """

    def __init__(
        self,
        info: GroupInfo,
        callers: tuple[tuple[int, ...], ...],
        opener: StoreOpener | None,
        empty: EmptyFn = torch_empty,
        scopes: ScopeSource | None = None,
    ) -> None:
        self._info = info
        self._empty = empty
        self._callers = callers
        self._scopes = scopes
        self._seq = 0  # exchanges outside any runtime scope (since the last reset)
        self._resets = 0
        self._scope, self._in_scope = "", 0  # the last runtime scope, and its exchanges so far
        self._pinned = ""  # the scope of a collective of several exchanges outside any
        held = set(info.ranks)
        self._remote = tuple(r for r in range(info.world_size) if r not in held)
        self._store: TensorStore | None = None
        self._broken = ""
        if self._remote:
            if opener is None:
                raise CommError(
                    f"{info}: other callers hold ranks {list(self._remote)}, "
                    "so the same-device backend needs a TensorStore"
                )
            self._store = opener(len(callers), callers.index(info.ranks))

    # --- the handshake -------------------------------------------------------------------

    def _exchange(
        self,
        collective: str,
        publish: Mapping[K, torch.Tensor],
        need: tuple[K, ...],
        check: Callable[[K, torch.Tensor], None],
        finish: Callable[[dict[K, torch.Tensor]], T],
    ) -> T:
        """Publish ``publish``, read ``need`` from other callers, return ``finish(all)``.
        Values are keyed by rank, each read by every other caller, or (``_addressed``) by
        (sender, reader) rank pairs, each read by the reader's caller alone.

        Whatever fails on this caller, at any point, is told to the others through the store
        (``_abandon``) before it is raised here, and this caller's keys are dropped."""
        if not self._remote:
            return finish(dict(publish))
        store = self._store
        scope, name = self._next(collective)
        if self._broken or store is None:
            raise self._refused(store, collective, scope)
        keys: dict[K, str] = {k: _key_name(name, k) for k in publish}
        keys.update((k, _key_name(name, k)) for k in need)
        read: list[str] = []
        published: list[str] = []
        try:
            for rank, tensor in publish.items():
                readers = 1 if isinstance(rank, tuple) else len(self._callers) - 1
                self._publish(store, collective, keys[rank], tensor, readers)
                published.append(keys[rank])
            wanted = {r: keys[r] for r in need}
            got = dict(zip(need, self._read(store, collective, wanted), strict=True))
            read.extend(wanted.values())
            for rank, tensor in got.items():
                check(rank, tensor)
            result = finish({**publish, **got})
        except BaseException as error:
            self._abandon(store, scope, error, read, published)
            raise
        self._release(store, collective, scope, read, published)
        return result

    def _symmetric(
        self,
        collective: str,
        inputs: RankTensors,
        check: PeerCheck,
        compute: Compute[V],
        size: int,
    ) -> dict[int, V]:
        """An exchange in which every rank needs every other's tensor: threads meet in one
        ``combine`` when the collective is small (``sizing.COMBINE_MAX_BYTES``, from ``size``,
        its whole tensor's bytes, which every caller computes alike), else the
        publish/read/release handshake."""
        store = self._store
        work = size * self._info.world_size  # what the last arrival writes, about
        small = work <= COMBINE_MAX_BYTES and self._info.device_kind == "cpu"
        if small and self._remote and isinstance(store, MemoryTensorStore):
            return self._combined(store, collective, inputs, check, compute)
        ranks = self._info.ranks
        return self._exchange(
            collective, inputs, self._remote, check, lambda all_: compute(all_, ranks)
        )

    def _addressed(
        self,
        collective: str,
        inputs: RankTensors,
        dim: int,
        check: Callable[[tuple[int, int], torch.Tensor], None],
        combine: Callable[[list[torch.Tensor]], torch.Tensor],
        shapes: tuple[dict[int, torch.Tensor], PeerCheck] | None = None,
    ) -> RankTensors:
        """An exchange in which rank r uses only chunk r (along ``dim``) of every rank's tensor
        (reduce-scatter, all-to-all), on a store whose reads move bytes: each chunk is
        published for its reader alone, so each byte crosses once instead of every caller
        reading every whole tensor. ``combine(chunk r of every rank, in rank order)`` is rank
        r's output. ``shapes`` (held rank -> its input's shape as a tensor, and their check) go
        to every other caller too: flattened inputs' chunks alone do not show a peer's shape."""
        world, ranks = self._info.world_size, self._info.ranks
        publish: dict[int | tuple[int, int], torch.Tensor] = {
            (s, r): chunk_piece(t, dim, world, r) for s, t in inputs.items() for r in self._remote
        }
        need: tuple[int | tuple[int, int], ...] = tuple((s, r) for r in ranks for s in self._remote)
        if shapes is not None:
            publish.update(shapes[0].items())
            need += self._remote
        device = self._first(inputs).device

        def finish(pieces: dict[int | tuple[int, int], torch.Tensor]) -> RankTensors:
            def piece(s: int, r: int) -> torch.Tensor:
                got = pieces.get((s, r))
                return chunk_piece(inputs[s], dim, world, r) if got is None else got

            return {
                r: combine([on_device(piece(s, r), device) for s in range(world)]) for r in ranks
            }

        def either(key: int | tuple[int, int], tensor: torch.Tensor) -> None:
            if isinstance(key, tuple):
                check(key, tensor)
            elif shapes is not None:
                shapes[1](key, tensor)

        return self._exchange(collective, publish, need, either, finish)

    def _addresses(self) -> bool:
        """Whether chunk-wise exchanges take ``_addressed`` (alike on every caller: the
        group's store kind is)."""
        return self._store is not None and self._store.reads_move_bytes

    def _combined(
        self,
        store: MemoryTensorStore,
        collective: str,
        inputs: RankTensors,
        check: PeerCheck,
        compute: Compute[V],
    ) -> dict[int, V]:
        """``_exchange`` between threads, as one ``combine``: the last caller to arrive checks
        every tensor and computes every rank's output; a failure anywhere is told as there."""
        scope, name = self._next(collective)
        if self._broken:
            raise self._refused(store, collective, scope)
        everyone = tuple(range(self._info.world_size))

        def finish(all_: dict[int, torch.Tensor]) -> dict[int, V]:
            for rank, tensor in all_.items():
                check(rank, tensor)
            return compute(all_, everyone)

        try:
            outputs = store.combine(f"{name}/all", inputs, finish)  # the scope's key
        except PeerFailedError as error:
            failure: BaseException = self._peer_failed(collective, error)
        except MeetingTimeoutError as error:  # nobody missing: the last arrival was too slow
            late = self._callers[error.missing[0]] if error.missing else ()
            failure = self._timeout(collective, late, error)
        except BaseException as error:
            self._abandon(store, scope, error, [], [])
            raise
        else:
            return {r: outputs[r] for r in self._info.ranks}
        self._abandon(store, scope, failure, [], [])
        raise failure from None

    def _next(self, collective: str) -> tuple[str, str]:
        """The scope of the next exchange and its name (the prefix of its keys): in a
        runtime scope its collective and index there; outside any, its own sequence number."""
        scope = self._runtime_scope() or self._pinned
        if not scope:  # named after the resets too: no abort of before one reaches it
            name = self._own_name(collective)
            return name, name
        if scope != self._scope:
            self._scope, self._in_scope = scope, 0
        index, self._in_scope = self._in_scope, self._in_scope + 1
        return scope, f"{scope}/{collective}#{index}"

    def _runtime_scope(self) -> str:
        return self._scopes.current_scope() if self._scopes is not None else ""

    def _own_name(self, collective: str) -> str:
        """The name of an exchange outside any runtime scope: its own sequence number."""
        seq, self._seq = self._seq, self._seq + 1
        return f"{collective}#{self._resets}.{seq}"

    @contextlib.contextmanager
    def _one_scope(self, collective: str) -> Iterator[None]:
        """The exchanges of the block share one scope, also outside a runtime scope (where
        each exchange would be a scope of its own): a caller that fails in the first aborts
        the scope, and so reaches peers that already went on to the next - a peer need not
        wait for its readers (``release_exchange``), so it may not see the abort in the first.
        """
        if self._runtime_scope():
            yield
            return
        self._pinned = self._own_name(collective)
        try:
            yield
        finally:
            self._pinned = ""

    def _publish(
        self, store: TensorStore, collective: str, key: str, tensor: torch.Tensor, consumers: int
    ) -> None:
        try:
            store.src_set(key, tensor, consumers)
        except PeerFailedError as error:  # a consumer failed before this caller published
            raise self._peer_failed(collective, error) from None

    def _read(
        self, store: TensorStore, collective: str, keys: Mapping[K, str]
    ) -> list[torch.Tensor]:
        """The tensors of ``keys`` (rank, or (sender, reader) -> key), all at once: one store
        transaction when they are there already, instead of one per key."""
        try:
            return store.dest_get_many(list(keys.values()))
        except PeerFailedError as error:
            raise self._peer_failed(collective, error) from None
        except KeysTimeoutError as error:
            late = [_sender(k) for k, key in keys.items() if key in error.keys]
            first = late[0] if late else _sender(next(iter(keys)))
            raise self._timeout(collective, self._caller_of(first), error) from None
        except PeerDiedError as error:
            raise self._died(collective, error) from None

    def _abandon(
        self,
        store: TensorStore,
        scope: str,
        error: BaseException,
        read: list[str],
        published: list[str],
    ) -> None:
        """This caller failed (or learnt that another did) in the middle of an exchange: the
        others are told first, so nobody waits for what it will not publish or finish; then
        its keys are dropped without waiting for consumers (the scope is aborted). A dead
        caller is not told: every survivor sees the death itself (``PeerDiedError``)."""
        if not isinstance(error, (PeerFailedError, PeerDiedError)):  # a death shows by itself
            self._tell(store, scope, error)
        if not store.carries_aborts:
            self._abandon_untold(store, error, read, published)
            return
        if read:
            with contextlib.suppress(CommError):  # PeerFailedError: the scope is aborted
                store.end_exchange(read, ())
        for key in published:  # each on its own: one that fails leaves the others
            with contextlib.suppress(CommError):
                store.end_exchange((), (key,))

    def _abandon_untold(
        self, store: TensorStore, error: BaseException, read: list[str], published: list[str]
    ) -> None:
        """``_abandon`` on a store that carries no aborts (none of dtorch's: the default of
        ``TensorStore``): nobody could be told, so a timeout or a dead caller breaks the
        group (its rounds can no longer line up with the others'), and another failure still
        completes the handshake."""
        if isinstance(error, (CommTimeoutError, PeerDiedError)):
            self._broken = self._broken or f"{type(error).__name__}: {error}"
            self.close()
            return
        with contextlib.suppress(CommError):
            store.end_exchange(read, published)

    def _release(
        self,
        store: TensorStore,
        collective: str,
        scope: str,
        read: list[str],
        published: list[str],
    ) -> None:
        try:  # every key is unique to its exchange; a store may drop published ones later
            store.release_exchange(read, published)
        except PeerFailedError as error:  # keys dropped already
            raise self._peer_failed(collective, error) from None
        except (CommTimeoutError, PeerDiedError) as error:  # a consumer never finished
            failure: CommError = (
                self._timeout(collective, (), error)
                if isinstance(error, CommTimeoutError)
                else self._died(collective, error)
            )
            self._abandon(store, scope, failure, [], published)
            raise failure from None

    def _tell(self, store: TensorStore, scope: str, error: BaseException) -> None:
        """Abort ``scope``: in a runtime scope through the manager (every group of this caller,
        after the runtime has recorded the failure), else in this group's store."""
        scopes = self._scopes
        if scopes is not None and scope == scopes.current_scope():
            scopes.fail_scope(error)
            return
        with contextlib.suppress(CommError):  # a closed store: nobody to tell
            store.abort(scope, f"{self._info}: {type(error).__name__}: {error}")

    def _refused(self, store: TensorStore | None, collective: str, scope: str) -> CommError:
        """The error of a collective on a broken or closed group (told to the others too)."""
        why = self._broken or "the group is closed"
        error = CommError(
            f"{collective} on {self._info}: the group is unusable after an earlier failure "
            f"({why}) until the runtime resets it"
        )
        if store is not None:
            self._tell(store, scope, error)
        return error

    def _caller_of(self, rank: int) -> tuple[int, ...]:
        return next(c for c in self._callers if rank in c)

    def _peer_failed(self, collective: str, error: PeerFailedError) -> PeerFailedError:
        return PeerFailedError(
            f"{collective} on {self._info}: another caller failed: {error.reason}", error.reason
        )

    def _timeout(
        self, collective: str, missing: tuple[int, ...], error: CommTimeoutError
    ) -> CommTimeoutError:
        who = (
            f"ranks {list(missing)} (one caller) never came"
            if missing
            else f"a peer stalled; store participants are callers {self._caller_table()}"
        )
        return CommTimeoutError(f"{collective} on {self._info} timed out: {who} ({error})")

    def _died(self, collective: str, error: PeerDiedError) -> PeerDiedError:
        """The store names dead participants, which are callers: name their group ranks. A
        dead caller breaks the group (its rounds can no longer line up with the others')."""
        self._broken = f"{collective} failed: a caller died"
        dead = [(self._callers[i], pid) for i, pid in error.peers if i is not None]
        who = ", ".join(f"the caller of ranks {list(ranks)} (pid {pid})" for ranks, pid in dead)
        peers = tuple((rank, pid) for ranks, pid in dead for rank in ranks)
        return PeerDiedError(f"{collective} on {self._info} failed: {who} died ({error})", peers)

    def _caller_table(self) -> str:
        table = {i: list(c) for i, c in enumerate(self._callers)}
        text = str(table)
        return text if len(text) <= 300 else text[:297] + "..."

    def _local(self, tensors: dict[int, torch.Tensor]) -> list[torch.Tensor]:
        """All ranks' tensors in rank order, moved to the device of this caller's first rank."""
        device = tensors[self._info.ranks[0]].device
        return [on_device(tensors[r], device) for r in range(self._info.world_size)]

    # --- peer checks ---------------------------------------------------------------------

    def _like(
        self,
        collective: str,
        mine: torch.Tensor,
        free_dim: int | None = None,
        sizes: tuple[int, ...] = (),
    ) -> PeerCheck:
        """A check that a peer's tensor has ``mine``'s dtype and shape (``free_dim`` aside)."""

        def check(rank: int, tensor: torch.Tensor) -> None:
            expected = list(mine.shape)
            if free_dim is not None:
                expected[free_dim] = sizes[rank]
            what = f"rank {rank} passed"
            self._refuse_unlike(collective, what, tensor.dtype, tensor.shape, mine.dtype, expected)

        return check

    def _piece_like(
        self,
        collective: str,
        mine: torch.Tensor,
        dim: int,
        free_dim: int | None = None,
        sizes: tuple[int, ...] = (),
    ) -> Callable[[tuple[int, int], torch.Tensor], None]:
        """``_like`` for ``_addressed``: the piece rank s sent for rank r is chunk r (along
        ``dim``) of a tensor like ``mine`` (``free_dim`` as long as ``sizes[s]``)."""
        world = self._info.world_size

        def check(key: tuple[int, int], tensor: torch.Tensor) -> None:
            sender, reader = key
            expected = list(mine.shape)
            if free_dim is not None:
                expected[free_dim] = sizes[sender]
            expected[dim] = chunk_bounds(expected[dim], world, reader)[1]
            what = f"rank {sender} sent rank {reader}"
            self._refuse_unlike(collective, what, tensor.dtype, tensor.shape, mine.dtype, expected)

        return check

    def _refuse_unlike(
        self,
        collective: str,
        what: str,
        dtype: torch.dtype,
        shape: Sequence[int],
        mine: torch.dtype,
        expected: list[int],
    ) -> None:
        """CommError unless a peer's value (``what`` says whose) is ``mine`` ``expected``."""
        if dtype != mine or list(shape) != expected:
            raise CommError(
                f"{collective} on {self._info}: {what} {dtype} {list(shape)}; this caller "
                f"expected {mine} {expected}"
            )

    def _first(self, inputs: RankTensors) -> torch.Tensor:
        return inputs[self._info.ranks[0]]

    # --- collectives ---------------------------------------------------------------------

    def all_reduce(self, inputs: RankTensors, op: ReduceOp) -> RankTensors:
        first = self._first(inputs)
        check = self._like("all_reduce", first)
        if first.numel() >= SPLIT_MIN_NUMEL and split_all_reduce_pays(self._callers):
            return self._split_all_reduce(inputs, op, check)
        return self._symmetric(
            "all_reduce",
            inputs,
            check,
            lambda all_, ranks: compute.all_reduce_outputs(
                self._local(all_), op, ranks, self._empty
            ),
            whole_bytes(first),
        )

    def _split_all_reduce(self, inputs: RankTensors, op: ReduceOp, check: PeerCheck) -> RankTensors:
        """Reduce-scatter over the flattened tensors, then all-gather: each caller reduces
        only its ranks' chunks, so the work is spread instead of repeated by every caller."""
        shape = self._first(inputs).shape
        flat = {r: t.contiguous() for r, t in inputs.items()}
        world, ranks = self._info.world_size, self._info.ranks
        if self._addresses():
            lines = {r: t.view(-1) for r, t in flat.items()}
            shapes = {r: torch.tensor(t.shape, dtype=torch.int64) for r, t in flat.items()}
            dtype = lines[ranks[0]].dtype

            def shape_check(rank: int, shape: torch.Tensor) -> None:  # as ``check``'s
                expected = list(flat[ranks[0]].shape)
                self._refuse_unlike(
                    "all_reduce", f"rank {rank} passed", dtype, shape.tolist(), dtype, expected
                )

            with self._one_scope("all_reduce"):
                partial = self._addressed(
                    "all_reduce",
                    lines,
                    0,
                    self._piece_like("all_reduce", lines[ranks[0]], 0),
                    lambda pieces: compute.reduced(pieces, op, self._empty),
                    (shapes, shape_check),
                )
                gathered = self.all_gather(partial, 0, chunk_sizes(shape.numel(), world))
            return {r: t.view(shape) for r, t in gathered.items()}
        with self._one_scope("all_reduce"):
            partial = self._exchange(
                "all_reduce",
                flat,
                self._remote,
                check,
                lambda all_: compute.reduce_scatter_outputs(
                    [t.reshape(-1) for t in self._local(all_)], 0, op, ranks, self._empty
                ),
            )
            gathered = self.all_gather(partial, 0, chunk_sizes(shape.numel(), world))
        return {r: t.view(shape) for r, t in gathered.items()}

    def all_gather(self, inputs: RankTensors, dim: int, sizes: tuple[int, ...]) -> RankTensors:
        first = self._first(inputs)
        return self._symmetric(
            "all_gather",
            inputs,
            self._like("all_gather", first, dim, sizes),
            lambda all_, ranks: compute.all_gather_outputs(
                self._local(all_), dim, ranks, self._empty
            ),
            whole_bytes(first, dim, sizes),
        )

    def all_gather_list(
        self, inputs: RankTensors, dim: int, sizes: tuple[int, ...]
    ) -> dict[int, list[torch.Tensor]]:
        first = self._first(inputs)
        return self._symmetric(
            "all_gather_into_list",
            inputs,
            self._like("all_gather_into_list", first, dim, sizes),
            lambda all_, ranks: compute.all_gather_list_outputs(
                self._local(all_), ranks, self._empty
            ),
            whole_bytes(first, dim, sizes),
        )

    def reduce_scatter(self, inputs: RankTensors, dim: int, op: ReduceOp) -> RankTensors:
        first = self._first(inputs)
        if self._addresses():
            return self._addressed(
                "reduce_scatter",
                inputs,
                dim,
                self._piece_like("reduce_scatter", first, dim),
                lambda pieces: compute.reduced(pieces, op, self._empty),
            )
        return self._symmetric(
            "reduce_scatter",
            inputs,
            self._like("reduce_scatter", first),
            lambda all_, ranks: compute.reduce_scatter_outputs(
                self._local(all_), dim, op, ranks, self._empty
            ),
            whole_bytes(first),
        )

    def all_to_all(
        self, inputs: RankTensors, src_dim: int, dst_dim: int, src_sizes: tuple[int, ...]
    ) -> RankTensors:
        first = self._first(inputs)
        if self._addresses():
            return self._addressed(
                "all_to_all",
                inputs,
                dst_dim,
                self._piece_like("all_to_all", first, dst_dim, src_dim, src_sizes),
                lambda pieces: compute.concatenated(pieces, src_dim, self._empty),
            )
        return self._symmetric(
            "all_to_all",
            inputs,
            self._like("all_to_all", first, src_dim, src_sizes),
            lambda all_, ranks: compute.all_to_all_outputs(
                self._local(all_), src_dim, dst_dim, ranks, self._empty
            ),
            whole_bytes(first, src_dim, src_sizes),
        )

    def broadcast(self, inputs: RankTensors, src: int) -> RankTensors:
        publish = {src: inputs[src]} if src in inputs else {}
        need = () if publish else (src,)
        check = self._like("broadcast", self._first(inputs))
        device = self._first(inputs).device
        return self._exchange(
            "broadcast",
            publish,
            need,
            check,
            lambda all_: compute.broadcast_outputs(
                on_device(all_[src], device), self._info.ranks, self._empty
            ),
        )

    def barrier(self) -> None:
        if not self._remote:
            return
        store = self._store
        if self._broken or store is None:
            raise self._refused(None, "barrier", "")
        try:
            store.barrier()
        except CommTimeoutError as error:  # the barrier's rounds no longer line up
            self._broken = "barrier timed out"
            raise self._timeout("barrier", (), error) from None
        except PeerDiedError as error:
            raise self._died("barrier", error) from None

    def abort(self, scope: str, message: str) -> None:
        if self._store is not None:
            self._store.abort(scope, message)

    def give_up(self) -> None:
        if self._store is not None:
            self._store.give_up()

    def reset(self) -> None:
        """Every caller is idle: forget the failures, drop any key left by a broken exchange,
        count exchanges from zero again (every caller resets together). Idle here means this
        caller's work is done; a peer may still be reading what its last exchanges published
        (``release_exchange`` did not wait for that), so those keys are waited for first -
        dropped at once if their scope failed, given up if a reader died."""
        self._broken = ""
        self._seq, self._scope, self._in_scope = 0, "", 0
        self._resets += 1
        if self._store is not None:
            with contextlib.suppress(CommError):
                self._store.flush()
            with contextlib.suppress(CommError):
                self._store.discard()

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()


def _key_name(name: str, key: int | tuple[int, int]) -> str:
    """The store key of an exchange's value: ``<name>/rank<s>``, or ``<name>/rank<s>/for<r>``
    for the piece rank s publishes for rank r alone."""
    if isinstance(key, tuple):
        return f"{name}/rank{key[0]}/for{key[1]}"
    return f"{name}/rank{key}"


def _sender(key: int | tuple[int, int]) -> int:
    """The rank that publishes the value of ``key``."""
    return key[0] if isinstance(key, tuple) else key
