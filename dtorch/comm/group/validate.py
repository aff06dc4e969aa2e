"""Argument checks of the collectives: wrong ranks, tensors, dims and shard lengths fail early.

Everything a caller can get wrong without communicating is checked here, before any backend
waits on a peer, and the error says what was given and what is accepted. Mismatches between
callers (a peer's dtype or shape) are checked by the backends that see the peers' tensors.

Example:
    >>> import torch
    >>> from dtorch.comm.group.backend import GroupInfo
    >>> info = GroupInfo("cpu", (0, 1, 2), (1,))
    >>> list(check_inputs(info, {1: torch.zeros(2)}, "all_reduce"))
    [1]
    >>> resolve_sizes({1: torch.zeros(3)}, 0, 8, 3, "all_gather")
    (3, 3, 2)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import torch

from dtorch.comm.group.backend import GroupInfo, RankTensors
from dtorch.errors import CommError
from dtorch.ir.sharding import chunk_sizes


def check_inputs(info: GroupInfo, inputs: object, collective: str) -> RankTensors:
    """The caller's ``{rank: tensor}`` in rank order, after checking ranks, types and dtypes."""
    if not isinstance(inputs, Mapping):
        raise CommError(
            f"{collective} on {info}: inputs must be a dict {{rank: tensor}}, "
            f"got {type(inputs).__name__}"
        )
    _check_ranks(info, set(inputs), collective)
    tensors = {r: inputs[r] for r in info.ranks}
    for rank, tensor in tensors.items():
        _check_tensor(info, rank, tensor, collective)
    _check_common(info, {r: t.dtype for r, t in tensors.items()}, "dtype", collective)
    _check_common(info, {r: t.ndim for r, t in tensors.items()}, "ndim", collective)
    return cast(RankTensors, tensors)


def _check_ranks(info: GroupInfo, keys: set[object], collective: str) -> None:
    if keys == set(info.ranks):
        return
    accepted = f"this caller holds ranks {list(info.ranks)} of 0..{info.world_size - 1}"
    unknown = sorted(map(repr, keys - set(range(info.world_size))))
    if unknown:
        raise CommError(f"{collective} on {info}: ranks {unknown} are not in the group; {accepted}")
    foreign = sorted(cast(set[int], keys - set(info.ranks)))
    if foreign:
        raise CommError(
            f"{collective} on {info}: ranks {foreign} belong to other callers; {accepted}"
        )
    missing = sorted(set(info.ranks) - keys)
    raise CommError(f"{collective} on {info}: no tensor for ranks {missing}; {accepted}")


def _check_tensor(info: GroupInfo, rank: int, tensor: object, collective: str) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise CommError(
            f"{collective} on {info}: rank {rank} passed {type(tensor).__name__}; "
            f"accepted: a torch.Tensor"
        )
    if tensor.device.type != info.device_kind:
        raise CommError(
            f"{collective} on {info}: rank {rank}'s tensor is on {tensor.device}; "
            f"accepted: {info.device_kind} tensors"
        )


def _check_common(info: GroupInfo, values: dict[int, object], what: str, collective: str) -> None:
    """Every held rank's ``what`` (``values``, by rank) is the same."""
    if len(set(values.values())) > 1:
        raise CommError(
            f"{collective} on {info}: the ranks' tensors differ in {what}: {values}; "
            f"every rank must pass the same {what}"
        )


def check_same_shape(info: GroupInfo, tensors: RankTensors, collective: str) -> None:
    """Every held rank passed the same shape (collectives over whole, equal tensors)."""
    _check_common(info, {r: tuple(t.shape) for r, t in tensors.items()}, "shape", collective)


def resolve_sizes(
    tensors: RankTensors, dim: int, full_size: object, world_size: int, collective: str
) -> tuple[int, ...]:
    """Every rank's shard length along ``dim``: torch.chunk of ``full_size``, or even shards."""
    if full_size is None:
        lengths = {t.shape[dim] for t in tensors.values()}
        if len(lengths) > 1:
            raise CommError(
                f"{collective}: held shards differ in length along dim {dim} "
                f"({ {r: t.shape[dim] for r, t in tensors.items()} }); pass full_size=<size of "
                f"the whole tensor along dim {dim}> for uneven shards"
            )
        return (lengths.pop(),) * world_size
    if isinstance(full_size, bool) or not isinstance(full_size, int) or full_size < 0:
        raise CommError(f"{collective}: full_size must be an int >= 0 or None, got {full_size!r}")
    return chunk_sizes(full_size, world_size)


def check_shard_shapes(
    info: GroupInfo, tensors: RankTensors, dim: int, sizes: tuple[int, ...], collective: str
) -> None:
    """Each held shard has its torch.chunk length along ``dim`` and equal other dims."""
    for rank, tensor in tensors.items():
        if tensor.shape[dim] != sizes[rank]:
            raise CommError(
                f"{collective} on {info}: rank {rank}'s shard has length {tensor.shape[dim]} "
                f"along dim {dim}; torch.chunk sizes of the full tensor give {list(sizes)}"
            )
    rest = {r: tuple(t.shape[:dim]) + tuple(t.shape[dim + 1 :]) for r, t in tensors.items()}
    if len(set(rest.values())) > 1:
        raise CommError(
            f"{collective} on {info}: shards differ outside dim {dim}: "
            f"{ {r: tuple(t.shape) for r, t in tensors.items()} }"
        )


def check_rank_arg(info: GroupInfo, rank: object, what: str, collective: str) -> int:
    """``rank`` if it is a rank of the group, else a clear error."""
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < info.world_size:
        raise CommError(
            f"{collective} on {info}: {what} {rank!r} is not a rank of the group; "
            f"accepted: 0..{info.world_size - 1}"
        )
    return rank
