"""The executor of transfer steps (Scatter, Gather, SendRecv) between two meshes.

Each destination device starts from zeros of its local shape (so Partial non-owners, which
no move names, hold zeros) and copies in the pieces the plan lists. Pieces between two
different devices travel through a two-device ThreadGroup ``(source, destination)``: the
source broadcasts its pieces for that destination packed into one flat tensor. A pair group
moves exactly the bytes the destination needs, whichever backend the manager picks (memory
store for threads, torch.distributed for one device per process); the manager caches it, so
a pair pays its rendezvous once. ThreadGroup has no send/recv, and a group over the union of
both meshes would have to hand every piece to every device. A move between two devices with
the same id (the same device, or CPU and CUDA of one caller) is a local copy. Pairs are
visited in one global order (sorted), so callers never wait on each other in a cycle.

Example (devices 0 and 1 swap their halves):
    >>> import torch
    >>> from dtorch.comm.group import CommTopology, ThreadGroupManager
    >>> from dtorch.ir.mesh import DeviceMesh, init_device_mesh
    >>> from dtorch.ir.placement import Shard
    >>> from dtorch.ir.redistribute import plan_redistribute
    >>> from dtorch.kernels.convert.execution import Execution
    >>> plan = plan_redistribute((4,), init_device_mesh("cpu", 2), (Shard(0),),
    ...                          DeviceMesh("cpu", [1, 0]), (Shard(0),))
    >>> with ThreadGroupManager(CommTopology.threads([[0, 1]])) as groups:
    ...     ex = Execution(plan, (0, 1), groups, torch.int64)
    ...     run_transfer(ex, 0, plan.steps[0], {0: torch.tensor([0, 1]), 1: torch.tensor([2, 3])})
    {1: tensor([0, 1]), 0: tensor([2, 3])}
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import groupby

import torch

from dtorch.ir.redistribute import Move, Transfer
from dtorch.kernels.convert.execution import Execution, Shards
from dtorch.kernels.device import torch_device_of


def _region(move: Move, offset: Sequence[int]) -> tuple[slice, ...]:
    """The box of ``move`` in the local coordinates of a shard at global ``offset``."""
    return tuple(
        slice(s - o, s - o + n) for s, n, o in zip(move.start, move.size, offset, strict=True)
    )


def _outputs(ex: Execution, index: int) -> Shards:
    """Zeros of every held destination device's local shape, on that device."""
    mesh = ex.plan.dst_mesh
    return {
        d: ex.empty(ex.spec(index + 1, d).shape, torch_device_of(mesh.device_kind, d)).zero_()
        for d in ex.held(mesh)
    }


def _pack(ex: Execution, index: int, moves: list[Move], local: torch.Tensor) -> torch.Tensor:
    offset = ex.spec(index, moves[0].src_device).offset
    return torch.cat([local[_region(m, offset)].reshape(-1) for m in moves])


def _unpack(
    ex: Execution, index: int, moves: list[Move], flat: torch.Tensor, out: torch.Tensor
) -> None:
    offset = ex.spec(index + 1, moves[0].dst_device).offset
    start = 0
    for m in moves:
        n = math.prod(m.size)
        out[_region(m, offset)] = flat[start : start + n].view(m.size).to(out.device)
        start += n


def _pair_kind(ex: Execution) -> str:
    """The device kind of the pair groups: a group holds one device kind."""
    src, dst = ex.plan.src_mesh.device_kind, ex.plan.dst_mesh.device_kind
    return src if src == dst else "cpu"


def transfer_groups(ex: Execution, index: int, step: Transfer) -> list[tuple[str, tuple[int, ...]]]:
    """The pair groups ``run_transfer`` calls for this caller, in the order it calls them."""
    sources = set(ex.held(ex.plan.mesh_before(index)))
    targets = set(ex.held(ex.plan.dst_mesh))
    pairs = sorted({(m.src_device, m.dst_device) for m in step.moves})
    kind = _pair_kind(ex)
    return [(kind, (s, d)) for s, d in pairs if s != d and (s in sources or d in targets)]


def _exchange(ex: Execution, index: int, moves: list[Move], shards: Shards, out: Shards) -> None:
    """Move one (source, destination) pair's pieces through the pair's group."""
    src, dst = moves[0].src_device, moves[0].dst_device
    kind = _pair_kind(ex)
    numel = sum(math.prod(m.size) for m in moves)
    held: Shards = {}
    if src in shards:
        held[0] = _pack(ex, index, moves, shards[src]).to(torch_device_of(kind, src))
    if dst in out:
        held[1] = torch.empty(numel, dtype=ex.dtype, device=torch_device_of(kind, dst))
    result = ex.group(kind, (src, dst)).broadcast(held, src=0)
    if dst in out:
        _unpack(ex, index, moves, result[1], out[dst])


def _copy_local(ex: Execution, index: int, moves: list[Move], shards: Shards, out: Shards) -> None:
    """Pieces whose source and destination share an id: one caller holds both."""
    src_offset = ex.spec(index, moves[0].src_device).offset
    dst_offset = ex.spec(index + 1, moves[0].dst_device).offset
    local, target = shards[moves[0].src_device], out[moves[0].dst_device]
    for m in moves:
        target[_region(m, dst_offset)] = local[_region(m, src_offset)].to(target.device)


def run_transfer(ex: Execution, index: int, step: Transfer, shards: Shards) -> Shards:
    """Execute a transfer step for this caller: its destination devices' new local values."""
    out = _outputs(ex, index)
    pairs = sorted(step.moves, key=lambda m: (m.src_device, m.dst_device))
    for (src, dst), grouped in groupby(pairs, key=lambda m: (m.src_device, m.dst_device)):
        if src not in shards and dst not in out:
            continue
        moves = list(grouped)
        if src == dst:
            _copy_local(ex, index, moves, shards, out)
        else:
            _exchange(ex, index, moves, shards, out)
    return out
