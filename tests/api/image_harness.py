"""Helpers of the image operator tests: Partial tensors whose devices hold different random
summands (linearity tests), and layouts drawn from a one-mesh-dim table (N-D mesh samples).

``dtorch.from_torch(..., placements=[Partial()])`` puts the whole value on the first rank and
zeros elsewhere: an operator that is not linear (max pooling) still gives the right sum on
such a tensor, so it cannot tell a linear operator from one that is not. ``split_partial``
places the summands as the chunks of a ``Shard(0)`` tensor and reads them as a Partial
(``Tensor.view([placements])``), so every device on the Partial mesh dim holds a summand of its
own.

Example:
    >>> import torch, dtorch
    >>> g = dtorch.Graph()
    >>> mesh = dtorch.init_device_mesh("cpu", (2, 2))
    >>> t, parts = split_partial(torch.ones(3, 2), mesh, 1, g)
    >>> t.placements, len(parts), torch.allclose(t.to_torch(), torch.ones(3, 2))
    ([Replicate(), Partial(sum)], 2, True)
    >>> g.close()
    >>> table = {(Replicate(),): Replicate(), (Shard(0),): Shard(0)}
    >>> len(table_combos(table, 2, [torch.ones(2)], 3, seed=0))
    6
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

import dtorch
from dtorch import Partial, Placement, Replicate, Shard
from tests.api.ops_harness import row_combos
from tests.simulate import layout_combos

Combo = tuple[tuple[Placement, ...], ...]


def split_partial(
    full: torch.Tensor, mesh: dtorch.DeviceMesh, mesh_dim: int, graph: Any, seed: int = 0
) -> tuple[dtorch.Tensor, list[torch.Tensor]]:
    """``full`` as a Partial on ``mesh_dim`` (Replicate elsewhere) made of random summands;
    returns the tensor and the summands (one per device along ``mesh_dim``)."""
    n = mesh.shape[mesh_dim]
    gen = torch.Generator().manual_seed(seed)
    parts = [torch.randn(full.shape, generator=gen, dtype=full.dtype) for _ in range(n - 1)]
    parts.append(full - sum(parts, torch.zeros_like(full)))
    placements: list[Any] = [Replicate()] * mesh.ndim
    placements[mesh_dim] = Shard(0)
    stacked = dtorch.from_torch(
        torch.cat(parts, 0), device_mesh=mesh, placements=placements, graph=graph
    )
    placements[mesh_dim] = Partial()
    return stacked.view(placements), parts


def table_combos(
    table: Mapping[tuple[Placement, ...], Placement],
    mesh_ndim: int,
    fulls: Sequence[torch.Tensor],
    n: int,
    seed: int,
) -> list[Combo]:
    """``n`` layouts whose every mesh dim is a row of ``table`` (accepted unless the rows
    conflict), then ``n`` drawn from all layouts (mostly rejected): a random sample of all
    layouts of an N-D mesh alone holds few accepted ones."""
    accepted = row_combos(table, mesh_ndim, len(fulls), n, seed)
    return [*accepted, *layout_combos(mesh_ndim, fulls, limit=n + 1, seed=seed)[1:]]
