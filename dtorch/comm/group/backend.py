"""The backend seam of ThreadGroup: what every backend implements, on already-checked inputs.

A backend serves one caller of one group. Each method receives the tensors of every rank the
caller holds (``{rank: tensor}``, ranks ascending, shapes and dims already validated by
ThreadGroup) and returns a fresh output per held rank: outputs never alias the inputs, each
other, or a peer's memory, because the runtime may later write any device's tensor in place.
Uneven shard lengths arrive as ``sizes`` (one torch.chunk length per rank), derived from the
full size the caller passed, so no backend has to exchange shapes.

Scopes: the runtime runs each group kernel inside a *scope* of the caller's manager
(``ScopeSource``: the scope's name, and how to report a failure in it). A backend names its
exchanges after the scope, counting them from zero in each, so callers whose earlier scope
ended early (one failed, the others gave up) line up again at the next one; a collective that
fails on this caller reports it (``fail_scope``), and the manager then ``abort``-s the scope on
every group of the caller, so peers waiting on it anywhere stop at once. ``reset`` makes a
group usable again once every caller is idle (a worker handed to a new graph).

Example:
    >>> info = GroupInfo("cpu", (4, 5, 6), (0, 2))
    >>> info.world_size, info.device_of(2), str(info)
    (3, 6, 'group cpu[4, 5, 6] (this caller holds ranks [0, 2])')
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol

import torch

from dtorch.comm.group.reduce_op import ReduceOp

#: One tensor per rank held by the caller.
RankTensors = dict[int, torch.Tensor]


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """Who the group is: device kind, device ids in rank order, and this caller's ranks."""

    device_kind: str
    device_ids: tuple[int, ...]
    ranks: tuple[int, ...]

    @property
    def world_size(self) -> int:
        return len(self.device_ids)

    def device_of(self, rank: int) -> int:
        """The device id of group rank ``rank``."""
        return self.device_ids[rank]

    def __str__(self) -> str:
        return (
            f"group {self.device_kind}{list(self.device_ids)} "
            f"(this caller holds ranks {list(self.ranks)})"
        )


class ScopeSource(Protocol):
    """The runtime's operator scopes, per calling thread (the manager implements it)."""

    def current_scope(self) -> str:
        """The calling thread's scope ("": none; each exchange is then a scope of its own)."""

    def fail_scope(self, error: BaseException) -> None:
        """A collective of the current scope failed here: tell every peer (once per scope)."""


class GroupBackend(ABC):
    """The collectives of one group for one caller; see the module doc for the contract."""

    @abstractmethod
    def all_reduce(self, inputs: RankTensors, op: ReduceOp) -> RankTensors:
        """Every rank gets the reduction of all ranks' equally shaped tensors."""

    @abstractmethod
    def all_gather(self, inputs: RankTensors, dim: int, sizes: tuple[int, ...]) -> RankTensors:
        """Every rank gets all ranks' shards concatenated along ``dim``."""

    @abstractmethod
    def all_gather_list(
        self, inputs: RankTensors, dim: int, sizes: tuple[int, ...]
    ) -> dict[int, list[torch.Tensor]]:
        """Every rank gets the list of all ranks' shards, in rank order."""

    @abstractmethod
    def reduce_scatter(self, inputs: RankTensors, dim: int, op: ReduceOp) -> RankTensors:
        """Rank r gets chunk r (along ``dim``) of the reduction of all ranks' tensors."""

    @abstractmethod
    def all_to_all(
        self, inputs: RankTensors, src_dim: int, dst_dim: int, src_sizes: tuple[int, ...]
    ) -> RankTensors:
        """Shards along ``src_dim`` become shards along ``dst_dim`` (torch.chunk sizes)."""

    @abstractmethod
    def broadcast(self, inputs: RankTensors, src: int) -> RankTensors:
        """Every rank gets a copy of rank ``src``'s tensor."""

    @abstractmethod
    def barrier(self) -> None:
        """Return once every rank of the group has entered the barrier."""

    @abstractmethod
    def abort(self, scope: str, message: str) -> None:
        """Tell this group's other callers that ``scope`` failed here: their collectives of
        that scope raise instead of waiting for this caller."""

    def give_up(self) -> None:  # noqa: B027  (Gloo and NCCL cannot be interrupted)
        """The group is abandoned: end this caller's waits on peers that may be gone, where
        the backend can (``TensorStore.give_up``)."""

    @abstractmethod
    def reset(self) -> None:
        """Make the group usable again after failures, once every caller is idle."""

    @abstractmethod
    def close(self) -> None:
        """Release what the backend holds; idempotent."""
