"""Shard geometry of the collectives: torch.chunk pieces, padding and unpadding along a dim.

Uneven shards follow ``torch.chunk`` sizes (``dtorch.ir.sharding.chunk_bounds``): ``n`` elements
over ``k`` ranks give ``ceil(n / k)`` to each rank until they run out, so trailing ranks may hold
fewer or none. Unlike ``torch.chunk``, ``split_chunks`` always returns exactly ``k`` pieces
(empty ones included), so piece ``r`` always belongs to rank ``r``.

Example:
    >>> import torch
    >>> [p.shape[0] for p in split_chunks(torch.zeros(5, 2), 0, 4)]
    [2, 2, 1, 0]
    >>> pad_dim(torch.ones(1, 2), 0, 3).tolist()
    [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]
    >>> normalize_dim(-1, 3, "all_gather")
    2
"""

from __future__ import annotations

import torch

from dtorch.errors import CommError
from dtorch.ir.sharding import chunk_bounds


def normalize_dim(dim: object, ndim: int, collective: str) -> int:
    """``dim`` counted from the front of an ``ndim``-D tensor; a clear error when out of range."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise CommError(f"{collective}: dim must be an int, got {dim!r}")
    if ndim == 0 or not -ndim <= dim < ndim:
        raise CommError(
            f"{collective}: dim {dim} is out of range for a {ndim}-D tensor; "
            f"accepted: {-ndim}..{ndim - 1}"
        )
    return dim % ndim


def chunk_piece(tensor: torch.Tensor, dim: int, parts: int, index: int) -> torch.Tensor:
    """The view of chunk ``index`` of ``parts`` along ``dim`` (torch.chunk sizes, maybe empty)."""
    start, length = chunk_bounds(tensor.shape[dim], parts, index)
    return tensor.narrow(dim, start, length)


def split_chunks(tensor: torch.Tensor, dim: int, parts: int) -> list[torch.Tensor]:
    """Exactly ``parts`` views along ``dim`` with torch.chunk sizes."""
    return [chunk_piece(tensor, dim, parts, i) for i in range(parts)]


def padded_chunk(full_size: int, world_size: int) -> int:
    """The common length every shard is padded to: ``ceil(full_size / world_size)``."""
    return -(-full_size // world_size)


def pad_dim(tensor: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    """``tensor`` zero-padded at the end of ``dim`` to ``size`` (a fresh contiguous tensor)."""
    out = tensor.new_zeros(with_dim(tensor.shape, dim, size))
    out.narrow(dim, 0, tensor.shape[dim]).copy_(tensor)
    return out


def with_dim(shape: torch.Size | tuple[int, ...], dim: int, size: int) -> tuple[int, ...]:
    """``shape`` with its ``dim`` entry replaced by ``size``."""
    out = list(shape)
    out[dim] = size
    return tuple(out)
