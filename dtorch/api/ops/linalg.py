"""Linear algebra: ``matmul`` (``@``), ``mm``, ``bmm``, ``linear``, ``outer``, ``einsum``.

Example:
    >>> import dtorch
    >>> a = dtorch.ones(2, 3)
    >>> (a @ dtorch.ones(3, 4)).shape, dtorch.outer(dtorch.arange(2), dtorch.arange(3)).tolist()
    (torch.Size([2, 4]), [[0, 0, 0], [0, 1, 2]])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dtorch.api.handle import TensorBase
from dtorch.api.record import record, tensor_arg
from dtorch.errors import ShapeError
from dtorch.ir.params import EinsumParam, LinearParam, MatmulParam, OuterParam

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_MATMUL = MatmulParam()
_LINEAR = LinearParam()
_OUTER = OuterParam()


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """torch's ``matmul`` (``@``): matrix products with broadcast batch dims, vectors
    promoted as torch promotes them. A shard of a batch, row or column dim stays a shard;
    both operands sharded on the contracted dim give a Partial result.

    Example:
        >>> import dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> a = dtorch.ones(4, 6, device_mesh=mesh, placements=[dtorch.Shard(1)])
        >>> b = dtorch.ones(6, 5, device_mesh=mesh, placements=[dtorch.Shard(0)])
        >>> dtorch.matmul(a, b).placements, dtorch.matmul(a, b).to_torch()[0, 0].item()
        ([Partial(sum)], 6.0)
    """
    return record("matmul", _MATMUL, (input, other))[0]


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """torch's ``mm``: the product of two matrices (2-D only, no broadcasting, one dtype),
    one Matmul operator with ``matmul``'s placements: a shard of the rows or the columns
    stays, both operands sharded on the contracted dim give Partial.

    Example:
        >>> import dtorch
        >>> dtorch.mm(dtorch.ones(2, 3), dtorch.ones(3, 4)).tolist()[0]
        [3.0, 3.0, 3.0, 3.0]
    """
    _check_ranks("mm", (input, mat2), 2, ("self must be a matrix", "mat2 must be a matrix"))
    (n, k), (k2, p) = input.shape, mat2.shape
    if k != k2:
        raise ShapeError(f"mm: mat1 and mat2 shapes cannot be multiplied ({n}x{k} and {k2}x{p})")
    return record("mm", _MATMUL, (input, mat2))[0]


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """torch's ``bmm``: batched products of matrices ``(b, n, k) @ (b, k, p)`` (3-D only, no
    broadcasting), one Matmul operator with ``matmul``'s placements: a shard of the batch,
    row or column dim stays, both sharded on the contracted dim give Partial.

    Example:
        >>> import dtorch
        >>> dtorch.bmm(dtorch.ones(2, 1, 3), dtorch.ones(2, 3, 1)).tolist()
        [[[3.0]], [[3.0]]]
    """
    _check_ranks(
        "bmm", (input, mat2), 3, ("batch1 must be a 3D tensor", "batch2 must be a 3D tensor")
    )
    (b, _, k), (b2, k2, _) = input.shape, mat2.shape
    if (b2, k2) != (b, k):
        raise ShapeError(
            f"bmm: Expected size for first two dimensions of batch2 tensor to be: [{b}, {k}] "
            f"but got: [{b2}, {k2}]."
        )
    return record("bmm", _MATMUL, (input, mat2))[0]


def _check_ranks(
    name: str, operands: tuple[Tensor, Tensor], ndim: int, texts: tuple[str, str]
) -> None:
    # torch's messages for an operand of another rank
    for i, (t, text) in enumerate(zip(operands, texts, strict=True)):
        tensor_arg(name, t, f"input {i}")
        if t.ndim != ndim:
            raise ShapeError(f"{name}: {text}")


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` with ``weight`` of shape (out, in); a 1-D ``weight`` (in,)
    is torch's vector form, ``input @ weight`` (plus a 0-d ``bias``).

    Example:
        >>> import dtorch
        >>> dtorch.nn.functional.linear(dtorch.ones(3, 4), dtorch.arange(4.0)).tolist()
        [6.0, 6.0, 6.0]
    """
    if bias is not None:  # its ndim is read first: a str is refused as record would
        tensor_arg("linear", weight, "input 1")
        tensor_arg("linear", bias, "input 2")
    inputs = (input, weight) if bias is None else (input, weight, bias)
    return record("linear", _LINEAR, inputs)[0]


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two vectors: ``out[i, j] = input[i] * vec2[j]``; a shard of
    either vector shards its dim of the result.

    Example:
        >>> import dtorch
        >>> dtorch.outer(dtorch.tensor([1, 2]), dtorch.tensor([1, 10, 100])).tolist()
        [[1, 10, 100], [2, 20, 200]]
    """
    return record("outer", _OUTER, (input, vec2))[0]


def einsum(equation: str | Tensor, *operands: Any) -> Tensor:
    """torch's ``einsum`` (operands given one by one or as one list, or torch's sublist form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``). A shard of a letter the output keeps stays a
    shard; a shard of a summed letter gives Partial; dims that are broadcast or read
    diagonally must not be sharded.

    Example:
        >>> import dtorch
        >>> m = dtorch.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> dtorch.einsum("ij,j->i", m, dtorch.ones(2)).tolist(), dtorch.einsum("ii", m).item()
        ([3.0, 7.0], 5.0)
        >>> dtorch.einsum(m, [0, 1], dtorch.ones(2), [1], [0]).tolist()
        [3.0, 7.0]
    """
    if isinstance(equation, TensorBase):
        equation, operands = _sublist_form((equation, *operands))
    if not isinstance(equation, str):
        raise TypeError(
            f"einsum: the first argument must be the equation string (as 'ij,jk->ik') or the "
            f"first operand, got {type(equation).__module__}.{type(equation).__name__}; "
            "accepted: einsum(equation, *operands), einsum(equation, [operands]) or "
            "einsum(a, [0, 1], b, [1, 2], [0, 2])"
        )
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise TypeError(f"einsum: no operands given for the equation {equation!r}")
    return record("einsum", EinsumParam(equation.replace(" ", "")), tuple(operands))[0]


def _sublist_form(args: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """torch's ``einsum(op, sublist, op, sublist, ..., [out])`` as (equation, operands):
    subscripts 0-25 are ``A``-``Z``, 26-51 ``a``-``z``, ``...`` (Ellipsis) itself."""
    if len(args) < 2:
        raise ValueError(
            "einsum(): must specify the equation string and at least one operand, "
            "or at least one operand and its subscripts list"
        )
    pairs = args[: len(args) - len(args) % 2]
    terms = [_subscripts(s) for s in pairs[1::2]]
    equation = ",".join(terms)
    if len(args) % 2:
        equation += "->" + _subscripts(args[-1])
    return equation, tuple(pairs[0::2])


def _subscripts(sublist: Any) -> str:
    if not isinstance(sublist, (list, tuple)):
        raise TypeError(f"einsum(): a subscripts list must be a list of ints, got {sublist!r}")
    return "".join(_subscript(n) for n in sublist)


def _subscript(n: Any) -> str:
    if n is Ellipsis:
        return "..."
    if isinstance(n, int) and 0 <= n < 52:  # a bool too, as torch takes it
        return chr(ord("A") + n) if n < 26 else chr(ord("a") + n - 26)
    raise ValueError(
        f"einsum(): subscript in subscript list is not within the valid range [0, 52), got {n!r}"
    )
