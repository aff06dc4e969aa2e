"""The same-device backend: every collective built from the TensorStore handshake (spec 2.3).

The participants of the store are the group's *callers* (threads or processes), not its ranks:
a caller that holds several ranks opens the store once and runs each collective in phases over
its ranks, so it never waits on itself:

1. publish: ``src_set`` every held rank's input for the other callers (never blocks);
2. read: ``dest_get`` every other rank's input (blocks only on other callers, which publish
   before they read anything), check it, and compute the held ranks' outputs directly from all
   ranks' tensors (``dtorch.comm.group.compute``: whole-tensor torch calls);
3. release: ``end_exchange``: ``dest_finish_get`` what was read, wait until what was
   published is finished, and forget those keys. Every exchange has keys of its own (the
   collective's sequence number is in them), so no barrier is needed between collectives:
   a caller that runs ahead publishes keys nobody confuses with the previous exchange's.

A large all-reduce runs as two such rounds, a reduce-scatter of the flattened tensors then an
all-gather, when that moves fewer bytes per caller than every caller reducing every tensor
(``split_all_reduce_pays``: three or more callers, or two callers holding two ranks or more).
A caller that holds every rank opens no store and computes at once. Each caller reads every
published tensor once for all its ranks, so with a memory store a collective costs the output
copies and nothing else; with a file store the producer's one copy into shared memory is added.
A mismatch found in a peer's tensor is raised only after the handshake is complete, so the
other callers are never left waiting. A caller that times out, or sees another caller's process
die (the file store's ``PeerDiedError``, within about a second), breaks the group: its rounds
can no longer line up with the others'. Across hosts (the network store) a dead caller is seen
at the comm timeout only: no pid of another host can be looked at.

Example (one caller holding every rank: no store, no waiting):
    >>> import torch
    >>> from dtorch.comm.group.backend import GroupInfo
    >>> backend = SameDeviceBackend(GroupInfo("cpu", (0, 1), (0, 1)), ((0, 1),), None)
    >>> backend.all_gather({0: torch.zeros(1), 1: torch.ones(1)}, 0, (1, 1))
    {0: tensor([0., 1.]), 1: tensor([0., 1.])}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

from dtorch.comm.group import compute
from dtorch.comm.group.backend import GroupBackend, GroupInfo, RankTensors
from dtorch.comm.group.buffers import EmptyFn, torch_empty
from dtorch.comm.group.reduce_op import ReduceOp
from dtorch.comm.store import TensorStore
from dtorch.errors import CommError, CommTimeoutError, PeerDiedError
from dtorch.ir.sharding import chunk_sizes

T = TypeVar("T")

#: all-reduce may become reduce-scatter + all-gather from this many elements on (one more
#: handshake, worth it only for large tensors).
_SPLIT_MIN_NUMEL = 1 << 18

#: Opens this caller's participant of the group's store: ``opener(world_size, rank)``.
StoreOpener = Callable[[int, int], TensorStore]

#: ``check(rank, tensor)`` raises CommError when a peer's tensor does not fit the collective.
PeerCheck = Callable[[int, torch.Tensor], None]

#: The store failures that break the group (a timeout, a dead caller).
_BREAKING = (CommTimeoutError, PeerDiedError)


def split_all_reduce_pays(callers: tuple[tuple[int, ...], ...]) -> bool:
    """Whether reduce-scatter + all-gather moves fewer bytes than a direct all-reduce on the
    busiest caller (``k`` ranks of ``w``; costs in tensor sizes read + written, copies for the
    caller's other ranks included): direct ``2w - 1 + 2(k - 1)``, split ``k + k(w - 1)/w`` to
    reduce the caller's chunks plus ``2k`` to gather. Every caller decides the same.

    Example:
        >>> split_all_reduce_pays(((0,), (1,))), split_all_reduce_pays(((0, 2), (1, 3)))
        (False, True)
    """
    if len(callers) < 2:
        return False
    world, k = sum(len(c) for c in callers), max(len(c) for c in callers)
    direct = 2 * world - 1 + 2 * (k - 1)
    return k + k * (world - 1) / world + 2 * k < direct


class SameDeviceBackend(GroupBackend):
    """The collectives of one caller over a TensorStore shared with the group's other callers.

    ``callers`` lists every caller's ranks (ascending, ordered by their first rank); this
    caller's are ``info.ranks``. ``opener`` is None only when this caller holds every rank.
    ``empty`` allocates the outputs (the manager passes its BufferPool's).
    """

    def __init__(
        self,
        info: GroupInfo,
        callers: tuple[tuple[int, ...], ...],
        opener: StoreOpener | None,
        empty: EmptyFn = torch_empty,
    ) -> None:
        self._info = info
        self._empty = empty
        self._callers = callers
        self._seq = 0
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
        publish: RankTensors,
        need: tuple[int, ...],
        check: PeerCheck,
        finish: Callable[[dict[int, torch.Tensor]], T],
    ) -> T:
        """Publish ``publish``, read ``need`` from other callers, return ``finish(all)``."""
        store = self._live_store(collective)
        if store is None:
            return finish(dict(publish))
        seq, self._seq = self._seq, self._seq + 1
        keys = {r: f"{collective}#{seq}/rank{r}" for r in (*publish, *need)}
        for rank, tensor in publish.items():
            store.src_set(keys[rank], tensor, len(self._callers) - 1)
        got = {r: self._read(store, collective, keys[r], r) for r in need}
        try:
            for rank, tensor in got.items():
                check(rank, tensor)
            return finish({**publish, **got})
        finally:
            self._release(store, collective, [keys[r] for r in got], [keys[r] for r in publish])

    def _live_store(self, collective: str) -> TensorStore | None:
        if self._broken:
            raise CommError(
                f"{collective} on {self._info}: the group is unusable after "
                f"an earlier failure ({self._broken})"
            )
        return self._store

    def _read(self, store: TensorStore, collective: str, key: str, rank: int) -> torch.Tensor:
        try:
            return store.dest_get(key)
        except _BREAKING as error:
            raise self._broken_by(collective, self._caller_of(rank), error) from None

    def _release(
        self, store: TensorStore, collective: str, read: list[str], published: list[str]
    ) -> None:
        try:
            store.end_exchange(read, published)  # every key is unique to its exchange
        except _BREAKING as error:
            raise self._broken_by(collective, (), error) from None

    def _caller_of(self, rank: int) -> tuple[int, ...]:
        return next(c for c in self._callers if rank in c)

    def _broken_by(
        self, collective: str, missing: tuple[int, ...], error: CommTimeoutError | PeerDiedError
    ) -> CommError:
        """The group-level error; the group's rounds can no longer line up, so it breaks."""
        self.close()
        if isinstance(error, PeerDiedError):
            self._broken = f"{collective} failed: a caller died"
            return self._died(collective, error)
        self._broken = f"{collective} timed out"
        return self._timeout(collective, missing, error)

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
        """The store names dead participants, which are callers: name their group ranks."""
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
        return [tensors[r].to(device) for r in range(self._info.world_size)]

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
            if tensor.dtype != mine.dtype or list(tensor.shape) != expected:
                raise CommError(
                    f"{collective} on {self._info}: rank {rank} passed {tensor.dtype} "
                    f"{list(tensor.shape)}; this caller expected {mine.dtype} {expected}"
                )

        return check

    def _first(self, inputs: RankTensors) -> torch.Tensor:
        return inputs[self._info.ranks[0]]

    # --- collectives ---------------------------------------------------------------------

    def all_reduce(self, inputs: RankTensors, op: ReduceOp) -> RankTensors:
        first = self._first(inputs)
        check = self._like("all_reduce", first)
        if first.numel() >= _SPLIT_MIN_NUMEL and split_all_reduce_pays(self._callers):
            return self._split_all_reduce(inputs, op, check)
        return self._exchange(
            "all_reduce",
            inputs,
            self._remote,
            check,
            lambda all_: compute.all_reduce_outputs(
                self._local(all_), op, self._info.ranks, self._empty
            ),
        )

    def _split_all_reduce(self, inputs: RankTensors, op: ReduceOp, check: PeerCheck) -> RankTensors:
        """Reduce-scatter over the flattened tensors, then all-gather: each caller reduces
        only its ranks' chunks, so the work is spread instead of repeated by every caller."""
        shape = self._first(inputs).shape
        flat = {r: t.contiguous() for r, t in inputs.items()}
        world, ranks = self._info.world_size, self._info.ranks
        partial = self._exchange(
            "all_reduce",
            flat,
            self._remote,
            check,
            lambda all_: compute.reduce_scatter_outputs(
                [t.reshape(-1) for t in self._local(all_)], 0, op, ranks, self._empty
            ),
        )
        sizes = chunk_sizes(shape.numel(), world)
        gathered = self.all_gather(partial, 0, sizes)
        return {r: t.view(shape) for r, t in gathered.items()}

    def all_gather(self, inputs: RankTensors, dim: int, sizes: tuple[int, ...]) -> RankTensors:
        check = self._like("all_gather", self._first(inputs), dim, sizes)
        return self._exchange(
            "all_gather",
            inputs,
            self._remote,
            check,
            lambda all_: compute.all_gather_outputs(
                self._local(all_), dim, self._info.ranks, self._empty
            ),
        )

    def all_gather_list(
        self, inputs: RankTensors, dim: int, sizes: tuple[int, ...]
    ) -> dict[int, list[torch.Tensor]]:
        check = self._like("all_gather_into_list", self._first(inputs), dim, sizes)
        return self._exchange(
            "all_gather_into_list",
            inputs,
            self._remote,
            check,
            lambda all_: compute.all_gather_list_outputs(
                self._local(all_), self._info.ranks, self._empty
            ),
        )

    def reduce_scatter(self, inputs: RankTensors, dim: int, op: ReduceOp) -> RankTensors:
        check = self._like("reduce_scatter", self._first(inputs))
        return self._exchange(
            "reduce_scatter",
            inputs,
            self._remote,
            check,
            lambda all_: compute.reduce_scatter_outputs(
                self._local(all_), dim, op, self._info.ranks, self._empty
            ),
        )

    def all_to_all(
        self, inputs: RankTensors, src_dim: int, dst_dim: int, src_sizes: tuple[int, ...]
    ) -> RankTensors:
        check = self._like("all_to_all", self._first(inputs), src_dim, src_sizes)
        return self._exchange(
            "all_to_all",
            inputs,
            self._remote,
            check,
            lambda all_: compute.all_to_all_outputs(
                self._local(all_), src_dim, dst_dim, self._info.ranks, self._empty
            ),
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
                all_[src].to(device), self._info.ranks, self._empty
            ),
        )

    def barrier(self) -> None:
        store = self._live_store("barrier")
        if store is None:
            return
        try:
            store.barrier()
        except _BREAKING as error:
            raise self._broken_by("barrier", (), error) from None

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()
