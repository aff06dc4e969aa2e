"""The SetItem rule: ``t[index] = value`` writes into t's own shards, in place.

t is never redistributed. Each device writes the part of the slot it holds: an integer index
on a sharded dim is written by the device that owns it, a slice by every device for its own
elements (no chunk-alignment is needed, unlike reading). The value may be a Python number or
a Replicate tensor (each device takes the part of it its slot needs) in any t layout, or a
tensor laid out exactly like ``t[index]`` would be (each device writes its local value). For
a Partial t, only the partial owner writes a number or a Replicate value (the others write
zeros), so the sum holds the value once; a Partial value needs a Partial t.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import SetItemParam, SliceIndex
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> from dtorch.ir.scalar import Scalar
    >>> mesh = init_device_mesh("cpu", 2)
    >>> t = Operand(1, (8, 3), torch.float32, mesh, (Shard(0),))
    >>> setitem_rule("setitem", SetItemParam((1, SliceIndex(0, 2)), Scalar.of(0.5)), (t,))
    Inference(outputs=(), input_placements=())
"""

from __future__ import annotations

from dtorch.errors import PlacementError, ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import GetItemParam, OpParam, SetItemParam
from dtorch.ir.placement import Placement
from dtorch.ir.rules.base import DtypeError, Inference, Rule, all_replicate, describe_inputs
from dtorch.ir.rules.elementwise import broadcast_or_reason
from dtorch.ir.rules.indexing import getitem_rule, plan_index
from dtorch.ir.rules.promotion import cast_is_linear, tensors_dtype
from dtorch.ir.scalar import ScalarKind

_NONE = Inference(())
#: Why a value with leading size-1 dims (which torch drops) still does not fit: a mesh dim
#: shards one of them (``dtorch.api.ops.index.without_leading_ones`` keeps those).
_SHARDED_ONES = (
    "; torch drops a value's leading size-1 dims, but a mesh dim shards one of these: "
    "redistribute the value to Replicate on that dim first"
)


def setitem_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``t[index] = value`` (value: the param's scalar, or the second input)."""
    assert isinstance(param, SetItemParam)
    t, *rest = inputs
    _, slot, _ = plan_index(name, t.shape, param.index)
    if not rest:
        if param.scalar is None or param.scalar.kind is ScalarKind.NONE:
            raise DtypeError(f"{name}: needs a value: a number or a tensor")
        return _NONE
    value = rest[0]
    if broadcast_or_reason((slot, value.shape)) != slot:
        extra = value.shape[: max(len(value.shape) - len(slot), 0)]
        raise ShapeError(
            f"{name}: value {list(value.shape)} does not broadcast to the slot {list(slot)}"
            + (_SHARDED_ONES if extra and set(extra) == {1} else "")
        )
    tensors_dtype(name, OpKind.Copy, ((t.dtype, False), (value.dtype, False)))
    if all_replicate((value,)) or all_replicate(inputs):
        return _NONE
    if value.shape == slot and value.placements == _slot_placements(name, t, param):
        if cast_is_linear(value.dtype, t.dtype) or not any(p.is_partial() for p in t.placements):
            return _NONE
        raise PlacementError(
            f"{name}: got {describe_inputs(inputs)} on mesh {t.mesh.shape}; writing Partial "
            f"{value.dtype} values into {t.dtype} converts each part, which does not add up "
            "to the converted sum; accepted: a value of the tensor's dtype, or a Replicate "
            "value. Redistribute the value (or the tensor) to Replicate first"
        )
    raise PlacementError(
        f"{name}: got {describe_inputs(inputs)} on mesh {t.mesh.shape}; accepted: a number or "
        f"a Replicate value with any layout of the tensor, or a value of the slot's shape laid "
        f"out like tensor[index] (tensor x value: P x P, S(i) x S(i) of the slot's dims). "
        f"Redistribute the value first"
    )


def _slot_placements(name: str, t: Operand, param: SetItemParam) -> tuple[Placement, ...] | None:
    """How ``t[index]`` would be laid out, or None where reading it would be rejected."""
    try:
        return getitem_rule(name, GetItemParam(param.index), (t,)).outputs[0].placements
    except PlacementError:
        return None


RULES: dict[OpKind, Rule] = {OpKind.SetItem: setitem_rule}
