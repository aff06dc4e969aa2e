"""Dtypes a collective library cannot carry, and how they travel anyway.

Gloo (and NCCL) move and reduce only some dtypes: Gloo refuses int16, the unsigned types
beyond uint8, the float8 types, and gathers of complex numbers ("Invalid scalar type"). A
collective that only moves data carries any other dtype as its raw bytes (a trailing byte
dimension: the other dims, which the collective's arithmetic uses, are unchanged); a
reduction runs in a dtype the library reduces whose result casts back exactly as torch's own
arithmetic on the narrow dtype would come out (sums of int16 in int32 wrap the same way
modulo 2**16; complex numbers as pairs of reals; bool sums are logical or, a max of bytes).

Example:
    >>> import torch
    >>> carried, back = moved(torch.tensor([1, -2], dtype=torch.int16))
    >>> carried.dtype, tuple(carried.shape), back(carried).tolist()
    (torch.uint8, (2, 2), [1, -2])
    >>> reduced(torch.tensor([True, False]), ReduceOp.SUM)[0].dtype
    torch.uint8
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from dtorch.comm.group.reduce_op import ReduceOp
from dtorch.errors import CommError

Restore = Callable[[torch.Tensor], torch.Tensor]

#: Dtypes every collective library dtorch uses moves and reduces as they are.
NATIVE = frozenset(
    {
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int8,
        torch.uint8,
        torch.int32,
        torch.int64,
    }
)

#: Narrow dtypes reduced in a wider one, then cast back.
_WIDER: dict[torch.dtype, torch.dtype] = {
    torch.int16: torch.int32,
    torch.uint16: torch.int32,
    torch.uint32: torch.int64,
    **{
        getattr(torch, name): torch.float32
        for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
        if hasattr(torch, name)
    },
}


def _identity(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def moved(tensor: torch.Tensor) -> tuple[torch.Tensor, Restore]:
    """``tensor`` in a dtype the library moves, and how to turn a received one back."""
    dtype = tensor.dtype
    if dtype in NATIVE:
        return tensor, _identity
    carried = tensor.contiguous().unsqueeze(-1).view(torch.uint8)

    def back(received: torch.Tensor) -> torch.Tensor:
        return received.contiguous().view(dtype).squeeze(-1)

    return carried, back


def reduced(tensor: torch.Tensor, op: ReduceOp) -> tuple[torch.Tensor, ReduceOp, Restore]:
    """``tensor`` in a dtype the library reduces, the op to reduce it with, and the way back."""
    dtype = tensor.dtype
    if dtype in NATIVE:
        return tensor, op, _identity
    if dtype is torch.bool:  # or = max, and = min, of 0/1 bytes
        as_max = ReduceOp.MAX if op in (ReduceOp.SUM, ReduceOp.AVG) else op
        return tensor.to(torch.uint8), as_max, lambda r: r.to(torch.bool)
    if dtype.is_complex:
        if op not in (ReduceOp.SUM, ReduceOp.AVG):
            raise CommError(f"{op.name} of complex tensors is not defined")
        return torch.view_as_real(tensor.contiguous()), op, torch.view_as_complex
    if dtype is torch.uint64 and op is ReduceOp.SUM:  # two's complement: the same bits
        return tensor.view(torch.int64), op, lambda r: r.view(torch.uint64)
    wider = _WIDER.get(dtype)
    if wider is None:
        raise CommError(f"the collective library cannot reduce {dtype} with {op.name}")
    return tensor.to(wider), op, lambda r: r.to(dtype)
