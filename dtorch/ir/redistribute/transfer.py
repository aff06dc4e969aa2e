"""Moves between two different meshes: which piece of which source shard each destination
device copies.

The source layout has no Partial (the planner reduces it first), so every element lives in
exactly one distinct source shard, possibly replicated. Shards form a grid: along each tensor
dim the distinct intervals partition the dim, and every combination of intervals is a shard.
So a destination box meets the source shards whose interval overlaps it in every dim, found
dim by dim. Of several replicas the destination's own device is preferred (a local copy),
else replicas take turns by destination rank so no single device serves everyone. A
destination device that is not the owner on its Partial mesh dims receives nothing: it holds
zeros.

Between two meshes of one shape a transfer can also *relay*: every device sends its local
value, whatever it is, to the device at the same coordinate (``relay_moves``).

Example:
    >>> from dtorch.ir.mesh import DeviceMesh, init_device_mesh
    >>> from dtorch.ir.placement import Shard, Replicate
    >>> moves = plan_moves((5,), init_device_mesh("cpu", 2), (Shard(0),),
    ...                    DeviceMesh("cpu", [2, 3]), (Replicate(),))
    >>> [(m.src_device, m.dst_device, m.start, m.size) for m in moves]
    [(0, 2, (0,), (3,)), (1, 2, (3,), (2,)), (0, 3, (0,), (3,)), (1, 3, (3,), (2,))]
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement
from dtorch.ir.redistribute.steps import Move
from dtorch.ir.sharding import ShardSpec, device_shard

Interval = tuple[int, int]
Box = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class _Sources:
    """The source side of a transfer: devices by the box they hold, and the distinct
    non-empty intervals of every tensor dim."""

    boxes: dict[Box, list[int]]
    intervals: list[list[Interval]]
    same_kind: bool

    @classmethod
    def of(
        cls, shape: tuple[int, ...], mesh: DeviceMesh, layout: Sequence[Placement], same_kind: bool
    ) -> _Sources:
        boxes: dict[Box, list[int]] = {}
        for device in mesh.device_ids:  # row-major, so replica lists are in mesh order
            spec = device_shard(shape, mesh, layout, device)
            boxes.setdefault((spec.offset, spec.shape), []).append(device)
        intervals = [
            sorted({(start[d], size[d]) for start, size in boxes if size[d] > 0})
            for d in range(len(shape))
        ]
        return cls(boxes, intervals, same_kind)

    def pick(self, box: Box, dst_device: int, dst_rank: int) -> int:
        """The replica of ``box`` that serves ``dst_device``: itself, else one by turns."""
        devices = self.boxes[box]
        if self.same_kind and dst_device in devices:
            return dst_device
        return devices[dst_rank % len(devices)]

    def moves_into(self, spec: ShardSpec, dst_device: int, dst_rank: int) -> list[Move]:
        """The pieces that fill ``spec`` (the destination box of ``dst_device``)."""
        per_dim = [
            _overlaps(ivs, o, n)
            for ivs, o, n in zip(self.intervals, spec.offset, spec.shape, strict=True)
        ]
        moves = []
        for combo in itertools.product(*per_dim):
            box = (tuple(s for s, _ in combo), tuple(n for _, n in combo))
            lo, size = _intersect(combo, spec)
            moves.append(Move(self.pick(box, dst_device, dst_rank), dst_device, lo, size))
        return moves


def _overlaps(intervals: list[Interval], start: int, size: int) -> list[Interval]:
    return [(s, n) for s, n in intervals if s < start + size and start < s + n]


def _intersect(
    combo: tuple[Interval, ...], spec: ShardSpec
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Start and size of the overlap of a source box with a destination box."""
    pairs = zip(combo, spec.offset, spec.shape, strict=True)
    bounds = [(max(s, o), min(s + n, o + k)) for (s, n), o, k in pairs]
    return tuple(lo for lo, _ in bounds), tuple(hi - lo for lo, hi in bounds)


def plan_moves(
    shape: tuple[int, ...],
    src_mesh: DeviceMesh,
    src: Sequence[Placement],
    dst_mesh: DeviceMesh,
    dst: Sequence[Placement],
) -> tuple[Move, ...]:
    """Every piece each destination device copies, destination devices in row-major order.

    ``src`` must hold no Partial; empty pieces are left out.
    """
    sources = _Sources.of(shape, src_mesh, src, src_mesh.device_kind == dst_mesh.device_kind)
    moves: list[Move] = []
    for rank, device in enumerate(dst_mesh.device_ids):
        spec = device_shard(shape, dst_mesh, dst, device)
        if spec.partial_owner and all(spec.shape):
            moves += sources.moves_into(spec, device, rank)
    return tuple(moves)


def relay_moves(
    shape: tuple[int, ...], src_mesh: DeviceMesh, dst_mesh: DeviceMesh, layout: Sequence[Placement]
) -> tuple[Move, ...]:
    """Moves that copy every local value (Partial summands too) to the device at the same
    coordinate of an equally shaped mesh; the layout stays the same."""
    moves = []
    for src_device, dst_device in zip(src_mesh.device_ids, dst_mesh.device_ids, strict=True):
        spec = device_shard(shape, src_mesh, layout, src_device)
        if all(spec.shape):
            moves.append(Move(src_device, dst_device, spec.offset, spec.shape))
    return tuple(moves)
