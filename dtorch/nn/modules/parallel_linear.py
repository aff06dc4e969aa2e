"""Tensor-parallel Linears: torch.nn.Linear's computation with the weight split over one mesh
dim, the tp dim, found by name (``tp_dim="tp"``).

Every layer takes ``(in_features, out_features, bias=True, device=None, dtype=None, *,
device_mesh=None, tp_dim="tp")``, has torch.nn.Linear's parameters (``weight`` (out, in),
``bias`` (out); a torch Linear's ``state_dict`` loads into it, sharded on the way) and computes
``x @ weight.T + bias``. On the tp mesh dim (x is the input, y the output):

    layer                                          weight     bias       x               y
    ColumnParallelLinear                           Shard(0)   Shard(0)   Replicate       Shard(-1)
    ColumnParallelLinearWithReplicateOutput        Shard(0)   Shard(0)   Replicate       Replicate
    ColumnParallelLinearWithReplicateInputOutput   Shard(0)   Shard(0)   -> Replicate    Replicate
    RowParallelLinear                              Shard(1)   Replicate  -> Shard(-1)    Partial
    RowParallelLinearWithReplicateOutput           Shard(1)   Replicate  -> Shard(-1)    Replicate
    ReplicateParallelLinear                        Replicate  Replicate  -> Replicate    Replicate

"Replicate": x is not redistributed and must be Replicate on tp (a column-parallel
weight cannot meet a sharded x; the error names ``linear`` and the placements). "->":
``forward``'s input is redistributed to that placement on tp first (``redistribute_input``);
a Replicate output of a column layer is an all-gather, of a row layer an all-reduce
(``redistribute_output``). A row layer's bias is added once (the Partial sum holds it once).
On every other mesh dim the parameters are Replicate and x and y keep their placements (a
batch sharded on ``dp`` stays sharded). A mesh without the tp dim: every parameter is
Replicate and nothing is redistributed (the layer is a plain Linear). Feature counts need not
divide the tp size (shards follow ``torch.chunk``; devices past the last chunk hold none); a
feature count of 1 is not split: the parameters' Shard of it is Replicate, as the input hook
makes the input's (``redistribute_by_dict``), so a row layer with ``in_features=1`` computes
a Replicate output, not a Partial one. ``device=`` (``"cpu"``, ``"cuda:1"``, a
``torch.device``; not with ``device_mesh=``) is a one-device mesh, which has no tp dim: the
layer is a plain Linear there, as on the default mesh when neither is given.

Example:
    >>> import torch, dtorch
    >>> from dtorch import nn
    >>> mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
    >>> up = nn.ColumnParallelLinear(4, 8, device_mesh=mesh)
    >>> down = nn.RowParallelLinearWithReplicateOutput(8, 4, device_mesh=mesh)
    >>> x = dtorch.randn(3, 4, device_mesh=mesh)
    >>> h = up(x); h.placements, down.weight.placements
    ([Shard(dim=1)], [Shard(dim=1)])
    >>> y = down(h); y.placements
    [Replicate()]
    >>> full = torch.nn.functional.linear
    >>> ref = full(full(x.to_torch(), up.weight.to_torch(), up.bias.to_torch()),
    ...            down.weight.to_torch(), down.bias.to_torch())
    >>> torch.allclose(y.to_torch(), ref, atol=1e-6)
    True
"""

from __future__ import annotations

import torch

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Replicate, Shard
from dtorch.nn.modules.linear import Device, Linear, TpPlan, check_tp_dim

_R = Replicate()


class _TpLinear(Linear):
    """A Linear whose placements on the ``tp_dim`` mesh dim follow its class's ``tp_plan``."""

    tp_plan: TpPlan | None = TpPlan(_R, _R)

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Device = None,
        dtype: torch.dtype | None = None,
        *,
        device_mesh: DeviceMesh | None = None,
        tp_dim: str = "tp",
    ) -> None:
        # before Linear.__init__, which places the weights by it
        self.tp_dim = check_tp_dim(type(self).__name__, tp_dim)
        super().__init__(in_features, out_features, bias, device, dtype, device_mesh=device_mesh)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, tp_dim={self.tp_dim!r}"


class ColumnParallelLinear(_TpLinear):
    """Weight Shard(0) on tp, input Replicate on tp, output Shard(-1); see the module
    docstring.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.ColumnParallelLinear(4, 6, device="cpu")  # one device: no tp dim
        >>> m.weight.device_mesh, m.weight.placements
        (DeviceMesh('cpu', [0]), [Replicate()])
    """

    tp_plan = TpPlan(weight=Shard(0), bias=Shard(0))


class ColumnParallelLinearWithReplicateOutput(_TpLinear):
    """ColumnParallelLinear with its output all-gathered to Replicate on tp."""

    tp_plan = TpPlan(weight=Shard(0), bias=Shard(0), output=_R)


class ColumnParallelLinearWithReplicateInputOutput(_TpLinear):
    """ColumnParallelLinear with its input first made Replicate on tp and its output
    all-gathered to Replicate."""

    tp_plan = TpPlan(weight=Shard(0), bias=Shard(0), input=_R, output=_R)


class RowParallelLinear(_TpLinear):
    """Weight Shard(1) on tp, bias Replicate, input made Shard(-1), output Partial."""

    tp_plan = TpPlan(weight=Shard(1), bias=_R, input=Shard(-1))


class RowParallelLinearWithReplicateOutput(_TpLinear):
    """RowParallelLinear with its Partial output all-reduced to Replicate."""

    tp_plan = TpPlan(weight=Shard(1), bias=_R, input=Shard(-1), output=_R)


class ReplicateParallelLinear(_TpLinear):
    """Weight and bias Replicate on tp; input made Replicate on tp, output Replicate."""

    tp_plan = TpPlan(weight=_R, bias=_R, input=_R)


#: Every tensor-parallel Linear (the tests walk them).
PARALLEL_LINEARS = (
    ColumnParallelLinear,
    ColumnParallelLinearWithReplicateOutput,
    ColumnParallelLinearWithReplicateInputOutput,
    RowParallelLinear,
    RowParallelLinearWithReplicateOutput,
    ReplicateParallelLinear,
)

__all__ = [
    "ColumnParallelLinear",
    "ColumnParallelLinearWithReplicateInputOutput",
    "ColumnParallelLinearWithReplicateOutput",
    "ReplicateParallelLinear",
    "RowParallelLinear",
    "RowParallelLinearWithReplicateOutput",
]
