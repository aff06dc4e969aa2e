"""Selection by a condition: ``where`` (``input`` where ``condition`` holds, else
``other``), ``masked_fill`` and ``masked_scatter`` (values written where a mask holds), and
their in-place forms. Elementwise operators: the shards of the operands are kept as the
other elementwise operators (``dtorch.api.ops.elementwise``) keep them.

Example:
    >>> import dtorch
    >>> t = dtorch.arange(4.0)
    >>> dtorch.where(t > 1, t, 0.0).tolist(), t.masked_fill(t < 2, 9.0).tolist()
    ([0.0, 0.0, 2.0, 3.0], [9.0, 9.0, 2.0, 3.0])
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.functions import nonzero
from dtorch.api.handle import TensorBase, is_tensor
from dtorch.api.ops.convert import assign, cast, writable, writer
from dtorch.api.ops.elementwise import zero_dim
from dtorch.api.ops.scalars import as_scalar
from dtorch.api.record import record
from dtorch.errors import ParamError, PlacementError, ShapeError
from dtorch.ir.opkind import MaskedKind, OpKind
from dtorch.ir.params import MaskedParam, WhereParam
from dtorch.ir.rules.promotion import tensors_dtype

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_ABSENT: Any = object()  # ``where(condition)``: no input and no other given


def where(condition: Tensor, input: Any = _ABSENT, other: Any = _ABSENT) -> Any:
    """``input`` where ``condition`` holds, else ``other``; either may be a number.
    ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)`` (as in torch).

    Example:
        >>> import dtorch
        >>> c = dtorch.tensor([True, False, True])
        >>> dtorch.where(c, 1.0, 0.0).tolist(), [i.tolist() for i in dtorch.where(c)]
        ([1.0, 0.0, 1.0], [[0, 2]])
    """
    if input is _ABSENT and other is _ABSENT:
        return nonzero(condition, as_tuple=True)
    if input is _ABSENT or other is _ABSENT:
        raise TypeError("where: give both input and other, or neither (where(condition))")
    return select("where", condition, input, other)


def select(name: str, condition: Tensor, input: Any, other: Any) -> Tensor:
    """``where(condition, input, other)`` recorded as ``name`` (composites name their parts
    after themselves, so a refusal names what the user called)."""
    tensor = TensorBase
    like = next((v for v in (condition, input, other) if isinstance(v, tensor)), None)
    if like is not None:  # a 0-d torch tensor is a tensor to torch: its dtype promotes
        input, other = (zero_dim(v, like) for v in (input, other))
    inputs = [condition] + [v for v in (input, other) if isinstance(v, tensor)]
    param = WhereParam(
        None if isinstance(input, tensor) else as_scalar(input),
        None if isinstance(other, tensor) else as_scalar(other),
    )
    return record(name, param, tuple(inputs))[0]


def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:
    """``input`` with ``value`` where ``mask`` is True, as ``torch.masked_fill`` (``value`` a
    number or a 0-d tensor; ``mask`` broadcasts). A Partial ``input`` stays Partial when
    the value is the number 0 or a 0-d tensor Partial on the same mesh dims (with a
    Replicate ``mask``): the fill is linear then; any other value refuses it. A number the
    dtype cannot hold (300 for uint8, NaN for int32) is refused at the call, as torch refuses
    it; so is a complex 0-d tensor for a real ``input`` (torch refuses one whose imaginary
    part is not 0; its value is on the devices).

    Example:
        >>> import dtorch
        >>> mask = dtorch.tensor([True, False, True, False])
        >>> dtorch.masked_fill(dtorch.arange(4.0), mask, -1.0).tolist()
        [-1.0, 1.0, -1.0, 3.0]
    """
    if is_tensor(value):  # a 0-d tensor on the devices: torch takes it too
        sides = ((input.dtype, not input.shape), (mask.dtype, not mask.shape))
        tensors_dtype("masked_fill", OpKind.Masked, sides)  # torch's kernel takes the dtypes
        _check_complex_fill("masked_fill", input, value)
        value = cast(_fill_value("masked_fill", value), input.dtype)
        _check_partial_fill(input, value)
        return select("masked_fill", mask, value, input)
    param = MaskedParam(MaskedKind.FILL, as_scalar(value))
    return record("masked_fill", param, (input, mask))[0]


def _fill_value(name: str, value: Tensor) -> Tensor:
    """A dtorch tensor given as the fill value: 0-d only, as torch has it."""
    if value.shape:
        raise ShapeError(  # torch's RuntimeError
            f"{name} only supports a 0-dimensional value tensor, but got tensor with "
            f"{len(value.shape)} dimension(s)."
        )
    return value


def _check_complex_fill(name: str, input: Tensor, value: Tensor) -> None:
    """torch refuses a complex fill value whose imaginary part is not 0 for a real tensor;
    the value is on the devices, so every complex one is refused there (``value.real`` is
    what torch would write where it takes one). A bool tensor takes any, as in torch."""
    if not value.dtype.is_complex:
        return
    refusal = _complex_refusal(input.dtype)
    if refusal is not None:
        raise ParamError(
            f"{name}: a complex value tensor for a {input.dtype} tensor is refused: torch "
            "takes one whose imaginary part is 0 and refuses the others, but dtorch does not "
            f"read the value from the devices to check (torch's words: {refusal}); accepted: "
            "value.real, or a complex input"
        )


@functools.lru_cache(maxsize=64)
def _complex_refusal(dtype: torch.dtype) -> str | None:
    # torch's message filling a ``dtype`` tensor with 1j, or None where it takes one
    try:
        torch.ones(1, dtype=dtype).masked_fill(torch.ones(1, dtype=torch.bool), torch.tensor(1j))
    except RuntimeError as error:
        return str(error).split("\n", 1)[0]
    return None


def _check_partial_fill(input: Tensor, value: Tensor) -> None:
    """Summing the parts of a Partial input filled with a value gives the sum of the value's
    parts where the mask holds: the value must be Partial where the input is (a Replicate
    value would be counted once per device; only the number 0 needs no check)."""
    for d, (p, q) in enumerate(zip(input.placements, value.placements, strict=False)):
        if p.is_partial() and not q.is_partial():
            raise PlacementError(
                f"masked_fill: the input is Partial on mesh dim {d} and the 0-d value tensor is "
                f"{q} there: every device would write the value and the sum would hold it "
                f"{input.device_mesh.shape[d]} times; accepted: the number 0 (the result stays "
                "Partial), a value Partial on the same mesh dims, or redistribute the input to "
                "Replicate first"
            )


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """``input`` with ``source``'s elements, in order, where ``mask`` is True, as
    ``torch.masked_scatter``. Unlike other elementwise operators it takes Replicate
    inputs only (the source is read in mask order): redistribute shards first.

    Example:
        >>> import dtorch
        >>> mask = dtorch.tensor([False, True, False, True])
        >>> dtorch.masked_scatter(dtorch.zeros(4), mask, dtorch.tensor([7.0, 8.0])).tolist()
        [0.0, 7.0, 0.0, 8.0]
    """
    return record("masked_scatter", MaskedParam(MaskedKind.SCATTER), (input, mask, source))[0]


@writer
def masked_fill_(input: Tensor, mask: Tensor, value: Any) -> Tensor:
    """``masked_fill`` in place: the devices change ``input``'s shards; returns ``input``.

    Example:
        >>> import dtorch
        >>> t = dtorch.arange(4.0)
        >>> _ = t.masked_fill_(t > 1, -1.0)
        >>> t.tolist()
        [0.0, 1.0, -1.0, -1.0]
    """
    if is_tensor(value):
        return assign("masked_fill_", input, masked_fill(input, mask, value), overlapping=True)
    param = MaskedParam(MaskedKind.FILL, as_scalar(value), in_place=True)
    record("masked_fill_", param, (input, mask))
    return input


@writer
def masked_scatter_(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """``masked_scatter`` in place: the devices change ``input``'s shards; returns ``input``.

    Example:
        >>> import dtorch
        >>> t = dtorch.zeros(4)
        >>> _ = t.masked_scatter_(dtorch.tensor([True, False, True, False]), dtorch.ones(4) * 7)
        >>> t.tolist()
        [7.0, 0.0, 7.0, 0.0]
    """
    writable("masked_scatter_", input)
    param = MaskedParam(MaskedKind.SCATTER, in_place=True)
    record("masked_scatter_", param, (input, mask, source))
    return input
