"""The steps of a redistribution plan, the plan itself, and how many collectives it issues.

A step is a frozen value that names its collective and the mesh dimension it runs along (the
1-D groups of devices that differ only in that coordinate). Steps that move no data between
devices (``LocalChunk``, ``ZeroNonOwner``, ``ShardToPartial``) name no collective. Transfers
between two different meshes list the pieces each destination device needs (``Move``): a
``Scatter`` when one device sends, a ``Gather`` when one device receives, otherwise
``SendRecv`` point-to-point messages.

Example:
    >>> plan_steps = (AllGather(0, 0), AllGather(1, 1), LocalChunk(0, 1))
    >>> [s.collective for s in plan_steps], sum(s.count for s in plan_steps)
    (['all_gather', 'all_gather', ''], 2)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement, format_placements


class Step:
    """Base of every plan step: ``collective`` is the collective's name ("" for local steps)."""

    __slots__ = ()
    collective: ClassVar[str] = ""

    @property
    def count(self) -> int:
        """How many collectives this step issues (as PyTorch's CommDebugMode counts them)."""
        return 1 if self.collective else 0


@dataclass(frozen=True, slots=True)
class AllGather(Step):
    """S(tensor_dim) -> R along ``mesh_dim``: concatenate the group's shards (innermost split)."""

    collective: ClassVar[str] = "all_gather"
    mesh_dim: int
    tensor_dim: int


@dataclass(frozen=True, slots=True)
class AllToAll(Step):
    """S(src_dim) -> S(dst_dim) along ``mesh_dim``: chunk along dst_dim, swap, concat src_dim."""

    collective: ClassVar[str] = "all_to_all"
    mesh_dim: int
    src_dim: int
    dst_dim: int


@dataclass(frozen=True, slots=True)
class ReduceScatter(Step):
    """P -> S(tensor_dim) along ``mesh_dim``: sum the group's values, keep this device's chunk."""

    collective: ClassVar[str] = "reduce_scatter"
    mesh_dim: int
    tensor_dim: int


@dataclass(frozen=True, slots=True)
class AllReduce(Step):
    """P -> R along ``mesh_dim``: every device gets the sum of the group's values."""

    collective: ClassVar[str] = "all_reduce"
    mesh_dim: int


@dataclass(frozen=True, slots=True)
class LocalChunk(Step):
    """R -> S(tensor_dim) along ``mesh_dim``: keep chunk ``coordinate[mesh_dim]``; no traffic."""

    mesh_dim: int
    tensor_dim: int


@dataclass(frozen=True, slots=True)
class ZeroNonOwner(Step):
    """R -> P along ``mesh_dim``: coordinate 0 keeps the value, the others hold zeros."""

    mesh_dim: int


@dataclass(frozen=True, slots=True)
class ShardToPartial(Step):
    """S(tensor_dim) -> P along ``mesh_dim``: each device places its shard in a zero block of
    the unsplit size; the group's sum is the unsplit block, so no data moves."""

    mesh_dim: int
    tensor_dim: int


@dataclass(frozen=True, slots=True)
class Move:
    """One piece of a transfer: the box ``start``/``size`` (global coordinates of the full
    tensor) that ``dst_device`` of the destination mesh copies from ``src_device`` of the
    source mesh."""

    src_device: int
    dst_device: int
    start: tuple[int, ...]
    size: tuple[int, ...]


def crossing(moves: tuple[Move, ...], same_kind: bool) -> tuple[Move, ...]:
    """Moves whose two ends are different devices (equal ids of one device type are local)."""
    return tuple(m for m in moves if not (same_kind and m.src_device == m.dst_device))


# The three transfer steps share their fields: ``moves`` between a Partial-free source and the
# destination, and ``same_kind`` (both meshes hold one device type, so a move between equal ids
# is a local copy). Destination devices that no move names (Partial non-owners) get zeros.


@dataclass(frozen=True, slots=True)
class Scatter(Step):
    """A transfer where one source device sends to several destination devices."""

    collective: ClassVar[str] = "scatter"
    moves: tuple[Move, ...]
    same_kind: bool


@dataclass(frozen=True, slots=True)
class Gather(Step):
    """A transfer where several source devices send to one destination device."""

    collective: ClassVar[str] = "gather"
    moves: tuple[Move, ...]
    same_kind: bool


@dataclass(frozen=True, slots=True)
class SendRecv(Step):
    """A transfer of point-to-point messages, one per crossing move (local copies are free)."""

    collective: ClassVar[str] = "send_recv"
    moves: tuple[Move, ...]
    same_kind: bool

    @property
    def count(self) -> int:
        return len(crossing(self.moves, self.same_kind))


Transfer = Scatter | Gather | SendRecv
TRANSFER_TYPES: tuple[type[Step], ...] = (Scatter, Gather, SendRecv)


def transfer_step(moves: tuple[Move, ...], same_kind: bool) -> Step:
    """The transfer step class that fits ``moves``: Scatter, Gather or SendRecv."""
    crossed = crossing(moves, same_kind)
    senders = {m.src_device for m in crossed}
    receivers = {m.dst_device for m in crossed}
    if len(senders) == 1 and len(receivers) > 1:
        return Scatter(moves, same_kind)
    if len(receivers) == 1 and len(senders) > 1:
        return Gather(moves, same_kind)
    return SendRecv(moves, same_kind)


Layouts = tuple[tuple[Placement, ...], ...]


@dataclass(frozen=True, slots=True)
class RedistributePlan:
    """How to turn a tensor of ``shape`` laid out as ``src`` on ``src_mesh`` into ``dst`` on
    ``dst_mesh``.

    ``steps`` run in order. ``layouts[i]`` is the layout before ``steps[i]`` and
    ``layouts[-1]`` the final one; every layout before a transfer step is on ``src_mesh``,
    after it on ``dst_mesh``. Layouts are *effective*: a mesh dimension of size 1 is written
    ``R`` (one device holds the whole value whatever the placement says), so the last layout
    holds the same data as ``dst`` on every device.
    """

    shape: tuple[int, ...]
    src_mesh: DeviceMesh
    src: tuple[Placement, ...]
    dst_mesh: DeviceMesh
    dst: tuple[Placement, ...]
    steps: tuple[Step, ...]
    layouts: Layouts

    def mesh_before(self, index: int) -> DeviceMesh:
        """The mesh that holds the data before ``steps[index]``."""
        crossed = any(isinstance(s, TRANSFER_TYPES) for s in self.steps[:index])
        return self.dst_mesh if crossed else self.src_mesh

    def describe(self) -> str:
        """One line per step, for logs and error messages."""
        head = f"{format_placements(self.src)} -> {format_placements(self.dst)} {self.shape}"
        return "\n".join([head, *(f"  {s!r}" for s in self.steps)])


def collective_counts(plan: RedistributePlan) -> dict[str, int]:
    """How many collectives of each kind the plan issues, e.g. ``{"all_gather": 2}``, by name.

    Example:
        >>> from dtorch.ir.mesh import init_device_mesh
        >>> from dtorch.ir.placement import Shard, Replicate
        >>> from dtorch.ir.redistribute import plan_redistribute
        >>> mesh = init_device_mesh("cpu", (2, 2))
        >>> plan = plan_redistribute((4, 4), mesh, (Shard(0), Shard(1)),
        ...                          mesh, (Replicate(), Replicate()))
        >>> collective_counts(plan)
        {'all_gather': 2}
    """
    counts: Counter[str] = Counter()
    for step in plan.steps:
        if step.count:
            counts[step.collective] += step.count
    return dict(sorted(counts.items()))
