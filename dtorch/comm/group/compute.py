"""Collective results computed directly from every rank's tensor, for the ranks a caller holds.

The same-device backend gathers the peers' tensors through a TensorStore (or already holds all
of them when one caller runs the whole group) and then calls these functions: each is a few
whole-tensor torch calls (``torch.cat``, adds) writing into outputs from ``empty`` (the
manager's BufferPool: recycled, already-touched memory), so bytes move at memory-copy speed.
``tensors`` is always the list of all ranks' tensors in rank order; uneven shards need no
padding here because every tensor carries its own length.

Example:
    >>> import torch
    >>> shards = [torch.tensor([0, 1]), torch.tensor([2, 3]), torch.tensor([4])]
    >>> all_gather_outputs(shards, 0, (1,))
    {1: tensor([0, 1, 2, 3, 4])}
    >>> all_to_all_outputs([torch.arange(4).view(1, 4), torch.arange(4, 8).view(1, 4)], 0, 1, (0,))
    {0: tensor([[0, 1],
            [4, 5]])}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from dtorch.comm.group.backend import RankTensors
from dtorch.comm.group.buffers import EmptyFn, torch_empty
from dtorch.comm.group.chunks import chunk_piece
from dtorch.comm.group.reduce_op import ReduceOp, reduce_tensors


def _like(value: torch.Tensor, empty: EmptyFn, shape: Sequence[int] | None = None) -> torch.Tensor:
    """A fresh contiguous tensor of ``value``'s dtype and device (and shape, by default)."""
    return empty(value.shape if shape is None else shape, value.dtype, value.device)


def concatenated(
    pieces: Sequence[torch.Tensor], dim: int, empty: EmptyFn = torch_empty
) -> torch.Tensor:
    """``torch.cat`` along ``dim`` into one buffer from ``empty`` (pieces may differ in length)."""
    shape = list(pieces[0].shape)
    shape[dim] = sum(p.shape[dim] for p in pieces)
    return torch.cat(list(pieces), dim, out=_like(pieces[0], empty, shape))


def _per_rank(
    tensors: Sequence[torch.Tensor],
    dim: int,
    ranks: Sequence[int],
    combine: Callable[[list[torch.Tensor]], torch.Tensor],
) -> RankTensors:
    """For each held rank r: ``combine`` of rank r's chunk (along ``dim``) of every tensor."""
    world = len(tensors)
    return {r: combine([chunk_piece(t, dim, world, r) for t in tensors]) for r in ranks}


def fan_out(
    result: torch.Tensor, ranks: Sequence[int], empty: EmptyFn = torch_empty
) -> RankTensors:
    """``result`` for the first rank and a private copy for every other rank."""
    return {
        r: result if i == 0 else _like(result, empty).copy_(result) for i, r in enumerate(ranks)
    }


def all_reduce_outputs(
    tensors: Sequence[torch.Tensor],
    op: ReduceOp,
    ranks: Sequence[int],
    empty: EmptyFn = torch_empty,
) -> RankTensors:
    """Each held rank's copy of the reduction of all tensors."""
    return fan_out(reduce_tensors(tensors, op, _like(tensors[0], empty)), ranks, empty)


def all_gather_outputs(
    tensors: Sequence[torch.Tensor], dim: int, ranks: Sequence[int], empty: EmptyFn = torch_empty
) -> RankTensors:
    """Each held rank's copy of all tensors concatenated along ``dim``."""
    return fan_out(concatenated(tensors, dim, empty), ranks, empty)


def all_gather_list_outputs(
    tensors: Sequence[torch.Tensor], ranks: Sequence[int], empty: EmptyFn = torch_empty
) -> dict[int, list[torch.Tensor]]:
    """Each held rank's own copies of all tensors, in rank order."""
    return {r: [_like(t, empty).copy_(t) for t in tensors] for r in ranks}


def reduced(
    pieces: Sequence[torch.Tensor], op: ReduceOp, empty: EmptyFn = torch_empty
) -> torch.Tensor:
    """The reduction of ``pieces`` (alike in shape) into a fresh tensor."""
    return reduce_tensors(pieces, op, _like(pieces[0], empty))


def reduce_scatter_outputs(
    tensors: Sequence[torch.Tensor],
    dim: int,
    op: ReduceOp,
    ranks: Sequence[int],
    empty: EmptyFn = torch_empty,
) -> RankTensors:
    """For each held rank r: the reduction of every tensor's chunk r along ``dim``."""
    return _per_rank(tensors, dim, ranks, lambda pieces: reduced(pieces, op, empty))


def all_to_all_outputs(
    tensors: Sequence[torch.Tensor],
    src_dim: int,
    dst_dim: int,
    ranks: Sequence[int],
    empty: EmptyFn = torch_empty,
) -> RankTensors:
    """For each held rank r: every tensor's chunk r along ``dst_dim``, concatenated along
    ``src_dim``."""
    return _per_rank(tensors, dst_dim, ranks, lambda pieces: concatenated(pieces, src_dim, empty))


def broadcast_outputs(
    value: torch.Tensor, ranks: Sequence[int], empty: EmptyFn = torch_empty
) -> RankTensors:
    """Each held rank's own copy of ``value``."""
    return {r: _like(value, empty).copy_(value) for r in ranks}
