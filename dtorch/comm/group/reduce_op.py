"""Reduction operators of the collectives: sum, avg, max, min, and their local combination.

A reduction combines the ranks' tensors in rank order, so every rank (and every backend that
reduces locally) computes bit-identical results. ``avg`` is a sum divided by the world size and
is defined for floating and complex dtypes only; ``max`` and ``min`` are undefined for complex.

Example:
    >>> import torch
    >>> op = parse_reduce_op("max")
    >>> op
    <ReduceOp.MAX: 'max'>
    >>> reduce_tensors([torch.tensor([1.0, 5.0]), torch.tensor([3.0, 2.0])], op)
    tensor([3., 5.])
    >>> reduce_tensors([torch.tensor([1.0]), torch.tensor([2.0])], ReduceOp.AVG)
    tensor([1.5000])
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

import torch

from dtorch.errors import CommError


class ReduceOp(enum.Enum):
    """How all-reduce and reduce-scatter combine the ranks' values."""

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"


#: Names accepted wherever a ReduceOp is expected.
REDUCE_OP_NAMES: tuple[str, ...] = tuple(op.value for op in ReduceOp)


def parse_reduce_op(op: ReduceOp | str) -> ReduceOp:
    """``op`` as a ReduceOp; a string is matched case-insensitively against the names."""
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str) and op.lower() in REDUCE_OP_NAMES:
        return ReduceOp(op.lower())
    raise CommError(f"unknown reduce op {op!r}; accepted: {', '.join(REDUCE_OP_NAMES)}")


def check_reduce_dtype(op: ReduceOp, dtype: torch.dtype) -> None:
    """Raise CommError when ``op`` is not defined for tensors of ``dtype``."""
    if op is ReduceOp.AVG and not (dtype.is_floating_point or dtype.is_complex):
        raise CommError(
            f"reduce op 'avg' needs a floating or complex dtype, got {dtype}; "
            f"use 'sum' for integer and bool tensors"
        )
    if op in (ReduceOp.MAX, ReduceOp.MIN) and dtype.is_complex:
        raise CommError(
            f"reduce op {op.value!r} is undefined for complex dtype {dtype}; accepted: sum, avg"
        )


#: ``combine(a, b, out=acc)`` per op; avg sums and divides at the end. The first combination
#: writes the output directly (no clone of the first tensor), the others accumulate in place.
_COMBINE: dict[ReduceOp, Callable[..., torch.Tensor]] = {
    ReduceOp.SUM: torch.add,
    ReduceOp.AVG: torch.add,
    ReduceOp.MAX: torch.maximum,
    ReduceOp.MIN: torch.minimum,
}


def on_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` on ``device``: itself when it is there already. ``Tensor.to`` would return it
    too, but only after releasing the GIL, which a kernel stream of thread mode must then win
    back from the other threads (up to the interpreter's switch interval each time).

    Example:
        >>> t = torch.ones(2)
        >>> on_device(t, t.device) is t
        True
    """
    return tensor if tensor.device == device else tensor.to(device)


def reduce_tensors(
    tensors: Sequence[torch.Tensor], op: ReduceOp, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``tensors`` combined in order with ``op`` into ``out`` (default: a fresh contiguous
    tensor on the first tensor's device); the inputs are untouched."""
    first = tensors[0]
    acc = torch.empty(first.shape, dtype=first.dtype, device=first.device) if out is None else out
    if len(tensors) == 1:
        acc.copy_(first)
    else:
        combine = _COMBINE[op]
        device = acc.device
        combine(on_device(first, device), on_device(tensors[1], device), out=acc)
        for value in tensors[2:]:
            combine(acc, on_device(value, device), out=acc)
    finish_average(acc, op, len(tensors))
    return acc


def finish_average(acc: torch.Tensor, op: ReduceOp, world_size: int) -> None:
    """Divide a summed ``acc`` in place by ``world_size`` when ``op`` is avg."""
    if op is ReduceOp.AVG:
        acc.div_(world_size)
