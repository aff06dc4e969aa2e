"""Collective results computed directly from every rank's tensor, for the ranks a caller holds.

The same-device backend gathers the peers' tensors through a TensorStore (or already holds all
of them when one caller runs the whole group) and then calls these functions: each is a few
whole-tensor torch calls (``torch.cat``, in-place adds), so bytes move at memory-copy speed.
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

from collections.abc import Sequence

import torch

from dtorch.comm.group.backend import RankTensors
from dtorch.comm.group.chunks import chunk_piece
from dtorch.comm.group.reduce_op import ReduceOp, reduce_tensors


def fan_out(result: torch.Tensor, ranks: Sequence[int]) -> RankTensors:
    """``result`` for the first rank and a private copy for every other rank."""
    return {r: result if i == 0 else result.clone() for i, r in enumerate(ranks)}


def all_reduce_outputs(
    tensors: Sequence[torch.Tensor], op: ReduceOp, ranks: Sequence[int]
) -> RankTensors:
    return fan_out(reduce_tensors(tensors, op), ranks)


def all_gather_outputs(
    tensors: Sequence[torch.Tensor], dim: int, ranks: Sequence[int]
) -> RankTensors:
    return fan_out(torch.cat(list(tensors), dim), ranks)


def all_gather_list_outputs(
    tensors: Sequence[torch.Tensor], ranks: Sequence[int]
) -> dict[int, list[torch.Tensor]]:
    return {r: [t.clone(memory_format=torch.contiguous_format) for t in tensors] for r in ranks}


def reduce_scatter_outputs(
    tensors: Sequence[torch.Tensor], dim: int, op: ReduceOp, ranks: Sequence[int]
) -> RankTensors:
    world = len(tensors)
    return {r: reduce_tensors([chunk_piece(t, dim, world, r) for t in tensors], op) for r in ranks}


def all_to_all_outputs(
    tensors: Sequence[torch.Tensor], src_dim: int, dst_dim: int, ranks: Sequence[int]
) -> RankTensors:
    world = len(tensors)
    return {
        r: torch.cat([chunk_piece(t, dst_dim, world, r) for t in tensors], src_dim) for r in ranks
    }


def broadcast_outputs(value: torch.Tensor, ranks: Sequence[int]) -> RankTensors:
    return {r: value.clone(memory_format=torch.contiguous_format) for r in ranks}
