"""Rules of the value-selecting elementwise kinds: Where, Clamp, Masked.

They broadcast like the other elementwise operators. Partial survives only where selecting
is linear: ``where(c, P, P)`` (both branches partial, condition replicated), ``where(c, P,
0)``, and ``masked_fill(mask, 0)`` of a Partial tensor; ``clamp`` never keeps it.
``masked_scatter`` consumes its source in mask order, which shards cannot reproduce
locally: it accepts Replicate inputs only.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import WhereParam
    >>> from dtorch.ir.placement import Partial, Replicate
    >>> from dtorch.ir.scalar import Scalar
    >>> mesh = init_device_mesh("cpu", 2)
    >>> c = Operand(1, (3,), torch.bool, mesh, (Replicate(),))
    >>> x = Operand(2, (3,), torch.float32, mesh, (Partial(),))
    >>> where_rule("where", WhereParam(y=Scalar.of(0)), (c, x)).outputs[0].placements
    (Partial(sum),)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import torch

from dtorch.errors import ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import MaskedKind, OpKind
from dtorch.ir.params import ClampParam, MaskedParam, OpParam, WhereParam
from dtorch.ir.rules.base import DtypeError, Inference, ParamError, Rule
from dtorch.ir.rules.elementwise import (
    broadcast_shapes,
    elementwise_placements,
    in_place_inference,
)
from dtorch.ir.rules.ints import numbers_refusal
from dtorch.ir.rules.promotion import (
    NUMBERS,
    ProbeOperand,
    Side,
    clamp_dtype,
    function_dtype,
    tensors_dtype,
)
from dtorch.ir.rules.signature import elementwise, signature
from dtorch.ir.rules.torch_ops import SCALAR_DTYPES
from dtorch.ir.scalar import Scalar, ScalarKind

_NOT_LINEAR = "Partial is accepted only where selecting is linear in it; redistribute first"
_WHERE = {
    3: elementwise(3, ["R P P -> P"], legend="cond x input x other", hint=_NOT_LINEAR),
    2: elementwise(2, legend="cond x the tensor branch", hint=_NOT_LINEAR),
    1: elementwise(1, legend="cond", hint=_NOT_LINEAR),
}
_WHERE_ZERO = elementwise(2, ["R P -> P"], legend="cond x the tensor branch", hint=_NOT_LINEAR)
_CLAMP = elementwise(1, hint=_NOT_LINEAR)
_FILL = elementwise(2, legend="tensor x mask", hint=_NOT_LINEAR)
_FILL_ZERO = elementwise(2, ["P R -> P"], legend="tensor x mask", hint=_NOT_LINEAR)
_FILL_IN_PLACE = elementwise(2, fixed=(0,), legend="tensor x mask", hint=_NOT_LINEAR)
_FILL_ZERO_IN_PLACE = elementwise(
    2, ["P R -> P"], fixed=(0,), legend="tensor x mask", hint=_NOT_LINEAR
)
_SCATTER = signature(
    "R R R -> R", legend="tensor x mask x source",
    hint="masked_scatter reads its source in mask order: redistribute to Replicate first",
)  # fmt: skip


def scalar_side(name: str, scalar: Scalar) -> Side:
    """The dtype side of a Python scalar operand (a 0-d tensor of its scalar dtype)."""
    if scalar.kind is ScalarKind.NONE:
        raise DtypeError(f"{name}: a scalar operand is None; accepted: int, float, bool")
    return SCALAR_DTYPES[scalar.kind] or torch.get_default_dtype(), True


def _number(name: str, scalar: Scalar) -> bool | int | float:
    """A Python-number branch of ``where``: a sample number of its kind (it promotes as a
    number)."""
    scalar_side(name, scalar)  # refuses None
    return NUMBERS[scalar.kind]


def _bound_kind(name: str, scalar: Scalar) -> ScalarKind:
    scalar_side(name, scalar)  # refuses None
    return scalar.kind


def _is_zero(scalar: Scalar | None) -> bool:
    return scalar is not None and scalar.kind is not ScalarKind.NONE and scalar.value == 0


def where_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``where(cond, x, y)``; inputs are cond, then x and y unless the param holds them."""
    assert isinstance(param, WhereParam)
    cond, *rest = inputs
    tensors, numbers = iter(rest), (param.x, param.y)
    sides = tuple(None if s is not None else _side(next(tensors)) for s in numbers)
    x, y = (_branch(name, s, side) for s, side in zip(numbers, sides, strict=True))
    shape = broadcast_shapes(name, tuple(o.shape for o in inputs))
    dtype = function_dtype(name, torch.where, (_side(cond), x, y))
    _refuse_numbers(name, _where_probe, (_side(cond), *sides), numbers, dtype)
    zero_other = _is_zero(param.x) or _is_zero(param.y)
    sig = _WHERE_ZERO if len(inputs) == 2 and zero_other else _WHERE[len(inputs)]
    return elementwise_placements(name, sig, inputs, shape, dtype)


def _branch(name: str, scalar: Scalar | None, side: Side | None) -> ProbeOperand:
    """A branch of ``where`` as the dtype probe takes it: a tensor's side, or a number."""
    if side is not None:
        return side
    assert scalar is not None  # the param holds the branch that is no input
    return _number(name, scalar)


def _side(operand: Operand) -> Side:
    return operand.dtype, not operand.shape


def clamp_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``clamp(x, min, max)`` with Python-number bounds (at least one); in place
    (``clamp_``), only where the result is the input's (``in_place_inference``)."""
    assert isinstance(param, ClampParam)
    if param.in_place:
        return in_place_inference(name, clamp_rule, param, inputs)
    (x,) = inputs
    if param.min is None and param.max is None:
        raise ParamError(f"{name}: needs min or max (or both); got neither")
    low, high = (None if b is None else _bound_kind(name, b) for b in (param.min, param.max))
    dtype = clamp_dtype(name, _side(x), low, high)
    _refuse_numbers(name, _clamp_probe, _side(x), (param.min, param.max), dtype)
    return elementwise_placements(name, _CLAMP, inputs, x.shape, dtype)


def masked_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``masked_fill(mask, value)`` / ``masked_scatter(mask, source)`` (``_`` forms in place)."""
    assert isinstance(param, MaskedParam)
    t, mask, *source = inputs
    tensors_dtype(name, OpKind.Masked, (_side(t), _side(mask)))
    shape = broadcast_shapes(name, (t.shape, mask.shape))
    if param.in_place and shape != t.shape:
        raise ShapeError(
            f"{name}: mask {list(mask.shape)} does not broadcast to the tensor {list(t.shape)}"
        )
    if param.masked is MaskedKind.SCATTER:
        if not source or source[0].dtype != t.dtype:
            raise DtypeError(f"{name}: needs a source tensor of the tensor's dtype {t.dtype}")
        return elementwise_placements(name, _SCATTER, inputs, shape, t.dtype)
    if param.value is None:
        raise ParamError(f"{name}: masked_fill needs a fill value")
    _refuse_numbers(name, _fill_probe, t.dtype, (param.value,), t.dtype)
    zero = _is_zero(param.value)
    if param.in_place:
        sig = _FILL_ZERO_IN_PLACE if zero else _FILL_IN_PLACE
    else:
        sig = _FILL_ZERO if zero else _FILL
    return elementwise_placements(name, sig, inputs, shape, t.dtype)


def _refuse_numbers(
    name: str,
    probe: Callable[..., object],
    context: Hashable,
    numbers: tuple[Scalar | None, ...],
    dtype: torch.dtype,
) -> None:
    """torch's refusal of numbers the result ``dtype`` cannot hold, raised at the call."""
    refusal = numbers_refusal(probe, context, numbers, dtype)
    if refusal is not None:
        given = ", ".join(repr(n.value) for n in numbers if n is not None)
        raise ParamError(
            f"{name}: the number(s) {given} for a {dtype} result: {refusal} (torch's refusal); "
            f"accepted: numbers {dtype} holds"
        )


def _ones(side: Side) -> torch.Tensor:
    return torch.ones(() if side[1] else 1, dtype=side[0])


def _where_probe(
    sides: tuple[Side, Side | None, Side | None], *numbers: bool | int | float | None
) -> object:
    # torch's where on one-element tensors of the sides, the numbers where a side is None
    cond, *branches = sides
    values = [n if s is None else _ones(s) for s, n in zip(branches, numbers, strict=True)]
    return torch.where(_ones(cond), *values)


def _clamp_probe(
    x: Side, low: bool | int | float | None, high: bool | int | float | None
) -> object:
    return torch.clamp(_ones(x), low, high)


def _fill_probe(dtype: torch.dtype, value: bool | int | float) -> object:
    return torch.ones(1, dtype=dtype).masked_fill(torch.ones(1, dtype=torch.bool), value)


RULES: dict[OpKind, Rule] = {
    OpKind.Where: where_rule,
    OpKind.Clamp: clamp_rule,
    OpKind.Masked: masked_rule,
}
