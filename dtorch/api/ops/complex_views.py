"""torch's complex layouts: ``view_as_real`` (a complex tensor as its parts on a new last dim
of 2), ``view_as_complex`` (the inverse) and ``polar`` (magnitudes and angles to complex).

torch's first two are views of the same memory; dtorch's are copies made of the parts
(``real``/``imag``, ``complex``), as dtorch's ``real`` and ``imag`` are: writing into the
result does not change the input (docs/compatibility.md). Rotary embeddings written with
them (LLaMA's reference ``apply_rotary_emb``) only read them, and run unchanged. The new
last dim of ``view_as_real`` is whole on every device; ``view_as_complex`` reads a last dim
of size 2 that no mesh dim shards.

Example:
    >>> import dtorch
    >>> z = dtorch.view_as_complex(dtorch.tensor([[1.0, 2.0], [3.0, -1.0]]))
    >>> z.tolist(), dtorch.view_as_real(z).tolist()
    ([(1+2j), (3-1j)], [[1.0, 2.0], [3.0, -1.0]])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from dtorch.api.handle import is_tensor
from dtorch.api.ops.elementwise import binary, unary
from dtorch.api.ops.math_more import complex, imag, real
from dtorch.api.ops.shape import stack
from dtorch.api.ops.slices import select
from dtorch.api.record import not_a_tensor
from dtorch.errors import DtypeError, ShapeError
from dtorch.ir.opkind import BinaryKind, MathKind

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

#: The real dtypes ``view_as_complex`` takes (torch's: float, double, half).
_COMPLEXABLE = (torch.float32, torch.float64, torch.float16)


def view_as_real(input: Tensor) -> Tensor:
    """``torch.view_as_real``: a complex tensor's real and imaginary parts on a new last dim
    of size 2, in the matching real dtype (a copy: see the module docstring).

    Example:
        >>> import dtorch
        >>> dtorch.view_as_real(dtorch.tensor([1 + 2j])).tolist()
        [[1.0, 2.0]]
    """
    if not is_tensor(input):
        raise not_a_tensor("view_as_real", "input", input)
    if not input.dtype.is_complex:
        raise DtypeError(
            f"view_as_real is only supported for complex tensors, got {input.dtype}; "
            "accepted: complex32, complex64, complex128"
        )
    return stack([real(input), imag(input)], -1)


def view_as_complex(input: Tensor) -> Tensor:
    """``torch.view_as_complex``: a float/double/half tensor whose last dim (of size 2) holds
    real and imaginary parts, as complex numbers (a copy: see the module docstring).

    Example:
        >>> import dtorch
        >>> dtorch.view_as_complex(dtorch.tensor([[0.5, -1.0]])).tolist()
        [(0.5-1j)]
    """
    if not is_tensor(input):
        raise not_a_tensor("view_as_complex", "input", input)
    if input.dtype not in _COMPLEXABLE:
        raise DtypeError(
            f"view_as_complex is only supported for float, double and half tensors, but got "
            f"a tensor of scalar type: {input.dtype}"
        )
    if input.ndim == 0 or input.shape[-1] != 2:
        raise ShapeError(
            f"view_as_complex: Tensor must have a last dimension of size 2, got shape "
            f"{list(input.shape)}"
        )
    return complex(select(input, -1, 0), select(input, -1, 1))


def polar(abs: Tensor, angle: Tensor) -> Tensor:
    """``torch.polar``: ``abs * (cos(angle) + i sin(angle))`` of two real tensors of one
    floating dtype (float32 gives complex64), broadcast; torch's own kernel computes the
    float32 parts by other cos/sin code, so some differ from torch's in the last bit.

    Example:
        >>> import dtorch
        >>> dtorch.polar(dtorch.tensor([2.0]), dtorch.tensor([0.0])).tolist()
        [(2+0j)]
    """
    for arg, value in (("abs", abs), ("angle", angle)):
        if not is_tensor(value):
            raise not_a_tensor("polar", arg, value)
    if abs.dtype != angle.dtype or abs.dtype not in (torch.float32, torch.float64):
        raise DtypeError(
            f"polar: expected abs and angle of one dtype, float or double, got {abs.dtype} "
            f"and {angle.dtype}"
        )
    cos, sin = unary(MathKind.COS, "polar", angle), unary(MathKind.SIN, "polar", angle)
    return complex(
        binary(BinaryKind.MUL, "polar", abs, cos), binary(BinaryKind.MUL, "polar", abs, sin)
    )
