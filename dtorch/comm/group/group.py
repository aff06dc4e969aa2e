"""ThreadGroup: the collectives of one communication group, called once per caller.

A group is a list of devices; a device's position in it is its *rank*. A caller (a worker
process, or a thread running several logical devices) calls each collective once for all the
ranks it holds: ``outputs = group.all_reduce({rank: tensor, ...})``, keys exactly the caller's
ranks, and gets one fresh output per held rank (never a view of an input). All callers of a
group together cover every rank once and call the group's collectives in the same order.

Uneven shards follow torch.chunk sizes along the collective's dim: pass the full size along
that dim (``full_size``) and the group derives every rank's shard length from it; without it
the shards must be equal. Every check that needs no communication happens before any wait.

Example (one caller holding all three ranks: runs without waiting):
    >>> import torch
    >>> from dtorch.comm.group import CommTopology, ThreadGroupManager
    >>> manager = ThreadGroupManager(CommTopology.threads([[0, 1, 2]]))
    >>> group = manager.get_group("cpu", [0, 1, 2], [0, 1, 2])
    >>> shards = {0: torch.tensor([0, 1]), 1: torch.tensor([2, 3]), 2: torch.tensor([4])}
    >>> group.all_gather(shards, dim=0, full_size=5)[2]
    tensor([0, 1, 2, 3, 4])
    >>> group.all_reduce({r: torch.tensor([r]) for r in range(3)}, op="max")[0]
    tensor([2])
    >>> group.reduce_scatter({r: torch.arange(5) for r in range(3)})[2]
    tensor([12])
    >>> manager.close()
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from dtorch.comm.group.backend import GroupBackend, GroupInfo, RankTensors
from dtorch.comm.group.chunks import chunk_piece, normalize_dim
from dtorch.comm.group.reduce_op import ReduceOp, check_reduce_dtype, parse_reduce_op
from dtorch.comm.group.topology import BackendKind
from dtorch.comm.group.validate import (
    check_inputs,
    check_rank_arg,
    check_same_shape,
    check_shard_shapes,
    resolve_sizes,
)
from dtorch.errors import CommError


class ThreadGroup:
    """One caller's handle on a communication group; see the module doc for the model."""

    def __init__(self, info: GroupInfo, backend: GroupBackend, backend_kind: BackendKind) -> None:
        self.info = info
        self.backend_kind = backend_kind
        self._backend: GroupBackend | None = backend

    @property
    def device_kind(self) -> str:
        return self.info.device_kind

    @property
    def device_ids(self) -> tuple[int, ...]:
        return self.info.device_ids

    @property
    def ranks(self) -> tuple[int, ...]:
        """The group ranks this caller holds (ascending)."""
        return self.info.ranks

    @property
    def world_size(self) -> int:
        return self.info.world_size

    def rank_of(self, device_id: int) -> int:
        """The rank of ``device_id`` in this group."""
        if device_id not in self.info.device_ids:
            raise CommError(f"device {device_id} is not in {self.info}")
        return self.info.device_ids.index(device_id)

    def _checked(self, inputs: Mapping[int, torch.Tensor], collective: str) -> RankTensors:
        if self._backend is None:
            raise CommError(f"{collective} on {self.info}: the group is closed")
        return check_inputs(self.info, inputs, collective)

    def _live(self) -> GroupBackend:
        assert self._backend is not None  # _checked ran first
        return self._backend

    def all_reduce(
        self, inputs: Mapping[int, torch.Tensor], op: ReduceOp | str = ReduceOp.SUM
    ) -> RankTensors:
        """Every rank gets the reduction (sum, avg, max, min) of all ranks' equal tensors."""
        tensors = self._checked(inputs, "all_reduce")
        reduce_op = parse_reduce_op(op)
        check_reduce_dtype(reduce_op, next(iter(tensors.values())).dtype)
        check_same_shape(self.info, tensors, "all_reduce")
        return self._live().all_reduce(tensors, reduce_op)

    def all_gather(
        self, inputs: Mapping[int, torch.Tensor], dim: int = 0, full_size: int | None = None
    ) -> RankTensors:
        """Every rank gets all shards concatenated along ``dim`` (uneven: pass ``full_size``)."""
        tensors, dim, sizes = self._shards(inputs, dim, full_size, "all_gather")
        return self._live().all_gather(tensors, dim, sizes)

    def all_gather_into_list(
        self, inputs: Mapping[int, torch.Tensor], dim: int = 0, full_size: int | None = None
    ) -> dict[int, list[torch.Tensor]]:
        """Every rank gets the list of all ranks' shards (rank order, unpadded)."""
        tensors, dim, sizes = self._shards(inputs, dim, full_size, "all_gather_into_list")
        return self._live().all_gather_list(tensors, dim, sizes)

    def _shards(
        self, inputs: Mapping[int, torch.Tensor], dim: int, full_size: int | None, name: str
    ) -> tuple[RankTensors, int, tuple[int, ...]]:
        tensors = self._checked(inputs, name)
        dim = normalize_dim(dim, next(iter(tensors.values())).ndim, name)
        sizes = resolve_sizes(tensors, dim, full_size, self.world_size, name)
        check_shard_shapes(self.info, tensors, dim, sizes, name)
        return tensors, dim, sizes

    def reduce_scatter(
        self, inputs: Mapping[int, torch.Tensor], dim: int = 0, op: ReduceOp | str = ReduceOp.SUM
    ) -> RankTensors:
        """Rank r gets torch.chunk piece r along ``dim`` of the reduction of all ranks."""
        tensors = self._checked(inputs, "reduce_scatter")
        reduce_op = parse_reduce_op(op)
        first = next(iter(tensors.values()))
        check_reduce_dtype(reduce_op, first.dtype)
        dim = normalize_dim(dim, first.ndim, "reduce_scatter")
        check_same_shape(self.info, tensors, "reduce_scatter")
        return self._live().reduce_scatter(tensors, dim, reduce_op)

    def all_to_all(
        self,
        inputs: Mapping[int, torch.Tensor],
        src_dim: int,
        dst_dim: int,
        full_size: int | None = None,
    ) -> RankTensors:
        """Shards along ``src_dim`` become torch.chunk shards along ``dst_dim``.

        Each rank passes its shard along ``src_dim`` (the whole extent along ``dst_dim``) and
        gets the whole extent along ``src_dim`` of its chunk along ``dst_dim``. ``full_size``
        is the full size along ``src_dim``; without it the source shards must be equal.
        """
        tensors = self._checked(inputs, "all_to_all")
        ndim = next(iter(tensors.values())).ndim
        src = normalize_dim(src_dim, ndim, "all_to_all")
        dst = normalize_dim(dst_dim, ndim, "all_to_all")
        if src == dst:
            raise CommError(
                f"all_to_all on {self.info}: src_dim and dst_dim are both {src}; "
                f"accepted: two different dims of the {ndim}-D tensor"
            )
        sizes = resolve_sizes(tensors, src, full_size, self.world_size, "all_to_all")
        check_shard_shapes(self.info, tensors, src, sizes, "all_to_all")
        return self._live().all_to_all(tensors, src, dst, sizes)

    def replicate_to_shard(
        self,
        inputs: Mapping[int, torch.Tensor],
        dim: int,
        pieces: Mapping[int, int] | None = None,
    ) -> RankTensors:
        """Each rank keeps its torch.chunk piece of its own (replicated) tensor: no exchange.

        By default rank r keeps piece r of ``world_size`` along ``dim``. ``pieces`` maps
        held ranks to the piece each keeps instead (its place in the split order), for a local
        tensor whose ``dim`` is already split by other mesh dims and is split further here.
        """
        tensors = self._checked(inputs, "replicate_to_shard")
        dim = normalize_dim(dim, next(iter(tensors.values())).ndim, "replicate_to_shard")
        kept = self._pieces(pieces)
        return {
            r: chunk_piece(t, dim, self.world_size, kept[r]).clone(
                memory_format=torch.contiguous_format
            )
            for r, t in tensors.items()
        }

    def _pieces(self, pieces: Mapping[int, int] | None) -> dict[int, int]:
        if pieces is None:
            return {r: r for r in self.ranks}
        if not isinstance(pieces, Mapping) or set(pieces) != set(self.ranks):
            raise CommError(
                f"replicate_to_shard on {self.info}: pieces must map each held rank "
                f"{list(self.ranks)} to a piece index, got {pieces!r}"
            )
        for rank, piece in pieces.items():
            check_rank_arg(self.info, piece, f"pieces[{rank}]", "replicate_to_shard")
        return dict(pieces)

    def broadcast(self, inputs: Mapping[int, torch.Tensor], src: int = 0) -> RankTensors:
        """Every rank gets a copy of rank ``src``'s tensor; the others pass same-shaped tensors."""
        tensors = self._checked(inputs, "broadcast")
        src = check_rank_arg(self.info, src, "src", "broadcast")
        check_same_shape(self.info, tensors, "broadcast")
        return self._live().broadcast(tensors, src)

    def barrier(self) -> None:
        """Return once every caller of the group has entered the barrier."""
        if self._backend is None:
            raise CommError(f"barrier on {self.info}: the group is closed")
        self._backend.barrier()

    def abort(self, scope: str, message: str) -> None:
        """Tell the other callers that ``scope`` failed on this one (``GroupBackend.abort``)."""
        if self._backend is not None:
            self._backend.abort(scope, message)

    def give_up(self) -> None:
        """End this caller's waits on peers that may be gone (``GroupBackend.give_up``)."""
        if self._backend is not None:
            self._backend.give_up()

    def reset(self) -> None:
        """Repair the group once every caller is idle (``GroupBackend.reset``)."""
        if self._backend is not None:
            self._backend.reset()

    def close(self) -> None:
        """Release the backend (idempotent); the manager calls it in its destroy order."""
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()

    def __repr__(self) -> str:
        return f"ThreadGroup({self.info}, backend={self.backend_kind.value})"
