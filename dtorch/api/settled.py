"""Waiting on one value, on every device that holds it, and on nothing else.

``graph.sync()`` waits for every operator recorded so far and raises the first failure the
user has not seen, whoever caused it; a loader (``load_state_dict``, ``load_program``) must
wait on the values it makes alone, and must learn if any device failed to make one. A fetch
(``to_torch``) reads one copy of a Replicate value only, so ``settled`` fetches the value's
sum made Partial (the first device keeps it, the others make zeros of their copies): the
gather adds every device's part, and a failure on any device fails its part and so the sum.

Example:
    >>> import dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", 2)
    >>> settled(dtorch.ones(3, device_mesh=mesh)).get().item()  # the value's sum
    3.0
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import torch

from dtorch.api.redistribute import sum_partials
from dtorch.errors import DtypeError
from dtorch.ir.opkind import ReduceKind
from dtorch.ir.placement import Partial, Shard
from dtorch.ir.rules.promotion import reduce_dtype

if TYPE_CHECKING:
    from dtorch.api.future import TensorFuture
    from dtorch.api.tensor import Tensor


def settled(value: Tensor) -> TensorFuture:
    """A future that raises if ``value`` failed on any of its devices (its value: the sum of
    ``value``, of no use). A dtype torch does not sum (float8) is summed as bools; a Partial
    whose sum promotes (int8, int32, bool: the parts would not add up) is summed first."""
    if any(p.is_partial() for p in value.placements) and _sum_promotes(value.dtype):
        value = sum_partials(value)
    parts = _plain_parts(value)
    total = _total(parts[0])
    for part in parts[1:]:
        total = total + _total(part)
    partial = total.redistribute(placements=[Partial()] * total.device_mesh.ndim)
    return partial.to_torch_async()


def _total(value: Tensor) -> Tensor:
    try:
        return value.sum()
    except DtypeError:
        return value.to(torch.bool).sum()


def _plain_parts(value: Tensor) -> list[Tensor]:
    """``value``, or a marked one (``Shard(d, sub_split_coordinates=c)``, which ``sum``
    refuses) cut at its mark's boundaries: each part is plain shards, no data moves."""
    for placement in value.placements:
        if isinstance(placement, Shard) and placement.sub_split_coordinates:
            dim, size = placement.dim, value.shape[placement.dim]
            bounds = (0, *placement.sub_split_coordinates, size)
            cut = [value.narrow(dim, a, b - a) for a, b in itertools.pairwise(bounds) if b > a]
            return [plain for part in cut for plain in _plain_parts(part)]
    return [value]


def _sum_promotes(dtype: torch.dtype) -> bool:
    """Whether ``sum`` gives another dtype than ``dtype`` (torch's rule, as the Reduce rule
    learns it), so that a Partial's parts would not add up to the sum's; a dtype ``sum``
    refuses is summed as bools."""
    try:
        return reduce_dtype("sum", ReduceKind.SUM, dtype, None) != dtype
    except DtypeError:
        return False
