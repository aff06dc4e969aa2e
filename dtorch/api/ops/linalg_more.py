"""More linear algebra, composed of ``matmul``, ``einsum`` and elementwise operators: ``dot``,
``vdot``, ``mv``, ``addmv``, ``baddbmm``, ``addbmm``, ``tensordot``, ``inner``, ``kron``.

Each checks torch's shapes and dtypes at the call (torch's refusal as a ShapeError or
DtypeError naming the function) and records its parts under its own name, so a placement
refusal names what the user called. Placements are those of the operator composed: a
product sharded on its contracted dim on both sides gives a Partial result, a shard of a
kept dim stays (``dtorch.api.ops.linalg``). ``addmv``, ``baddbmm`` and ``addbmm`` follow
``addmm``: ``beta=0`` ignores ``input``'s values (NaN included), ``alpha=0`` the product's,
numbers are truncated for integer tensors, float16/bfloat16 are computed in float32 and
rounded once.

Example:
    >>> import dtorch
    >>> v = dtorch.tensor([1.0, 2.0])
    >>> dtorch.dot(v, v).item(), dtorch.mv(dtorch.ones(3, 2), v).tolist()
    (5.0, [3.0, 3.0, 3.0])
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.dims import normalize_dim
from dtorch.api.handle import TensorBase
from dtorch.api.ops.composite import applied_number
from dtorch.api.ops.convert import cast, clone
from dtorch.api.ops.elementwise import binary
from dtorch.api.ops.math_more import conj
from dtorch.api.ops.scalars import is_scalar, python_number
from dtorch.api.ops.shape import expand, reshape, unsqueeze
from dtorch.api.record import named_as, record
from dtorch.errors import DtypeError, ParamError, PlacementError, ShapeError, UnsupportedDtypeError
from dtorch.ir.opkind import BinaryKind
from dtorch.ir.params import EinsumParam, MatmulParam
from dtorch.ir.placement import format_placements

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_MATMUL = MatmulParam()
_REDUCED = (torch.float16, torch.bfloat16)  # computed in float32 by torch's kernels (opmath)
_LETTERS = string.ascii_letters  # einsum's subscripts
_SIDES = ("dims_self", "dims_other")  # torch's names of tensordot's two lists of dims


def _tensor(name: str, arg: str, value: Any) -> Tensor:
    if not isinstance(value, TensorBase):
        raise TypeError(f"{name}: {arg} must be a dtorch.Tensor, got {type(value).__name__}")
    return value  # type: ignore[return-value]


def _number(name: str, arg: str, value: Any) -> bool | int | float:
    if isinstance(value, TensorBase) or not is_scalar(value):
        raise TypeError(f"{name}: {arg} must be a number (bool, int, float), got {type(value)}")
    return python_number(value)


def _short(dtype: torch.dtype) -> str:
    # torch's names in its messages: Float, Double, Long
    return str(torch.empty(0, dtype=dtype).type()).removeprefix("torch.").removesuffix("Tensor")


def _same_dtype(name: str, *tensors: Tensor) -> torch.dtype:
    """The one dtype of ``tensors`` (torch's products refuse mixed dtypes and bools)."""
    dtypes = [t.dtype for t in tensors]
    if len(set(dtypes)) > 1:
        got = ", ".join(_short(d) for d in dtypes)
        raise DtypeError(f"{name}: expected tensors of one dtype, but got {got}")
    if dtypes[0] == torch.bool:
        raise UnsupportedDtypeError(f"{name}: \"{name}\" not implemented for 'Bool'; cast first")
    return dtypes[0]


def _ndims(name: str, tensors: Sequence[tuple[str, Tensor]], ndims: Sequence[int]) -> None:
    for (arg, t), n in zip(tensors, ndims, strict=True):
        if t.ndim != n:
            raise ShapeError(f"{name}: {arg} must be a {n}-D tensor, got a {t.ndim}-D tensor")


def dot(input: Tensor, tensor: Tensor) -> Tensor:
    """The dot product of two 1-D tensors of one dtype and length (a 0-d result), as
    ``torch.dot`` (complex ones too, without a conjugate); both sharded alike give a
    Partial result.

    Example:
        >>> import dtorch
        >>> dtorch.dot(dtorch.tensor([1, 2, 3]), dtorch.tensor([4, 5, 6])).item()
        32
    """
    return _dot("dot", input, tensor)


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """``torch.vdot``: the dot product of the first vector's complex conjugate with the second
    (``dot`` for real tensors).

    Example:
        >>> import dtorch
        >>> dtorch.vdot(dtorch.tensor([1.0, 2.0]), dtorch.tensor([3.0, 4.0])).item()
        11.0
    """
    return _dot("vdot", input, other)


def _dot(name: str, a: Any, b: Any) -> Tensor:
    x, y = _tensor(name, "input", a), _tensor(name, "other", b)
    if x.ndim != 1 or y.ndim != 1:
        raise ShapeError(f"{name}: 1D tensors expected, but got {x.ndim}D and {y.ndim}D tensors")
    if x.dtype != y.dtype:
        raise DtypeError(
            f"{name}: expected both vectors to have same dtype, but found {_short(x.dtype)} and "
            f"{_short(y.dtype)}"
        )
    if x.dtype.is_complex and name == "vdot":
        x = conj(x)
    _same_dtype(name, x, y)
    if x.shape[0] != y.shape[0]:
        raise ShapeError(
            f"{name}: inconsistent tensor size, expected tensor [{x.shape[0]}] and src "
            f"[{y.shape[0]}] to have the same number of elements"
        )
    return record(name, _MATMUL, (x, y))[0]


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """The product of a matrix (n, m) and a vector (m,), as ``torch.mv``: a shard of the rows
    stays, the matrix's columns and the vector sharded alike give Partial.

    Example:
        >>> import dtorch
        >>> dtorch.mv(dtorch.tensor([[1, 2], [3, 4]]), dtorch.tensor([1, 1])).tolist()
        [3, 7]
    """
    return _mv("mv", input, vec)


def _mv(name: str, mat: Any, vec: Any) -> Tensor:
    m, v = _tensor(name, "mat", mat), _tensor(name, "vec", vec)
    _check_mv(name, m, v)
    return record(name, _MATMUL, (m, v))[0]


def _check_mv(name: str, m: Tensor, v: Tensor, *more: Tensor) -> None:
    _ndims(name, (("mat", m), ("vec", v)), (2, 1))
    _same_dtype(name, *more, m, v)
    if m.shape[1] != v.shape[0]:
        raise ShapeError(
            f"{name}: size mismatch, got mat ({m.shape[0]}x{m.shape[1]}), vec ({v.shape[0]})"
        )


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)``, ``input`` broadcast to (n,), all three of one
    dtype, as ``torch.addmv`` (see the module for ``beta=0`` and ``alpha=0``).

    Example:
        >>> import dtorch
        >>> m = dtorch.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> dtorch.addmv(dtorch.ones(2), m, dtorch.ones(2), beta=0.5, alpha=2).tolist()
        [6.5, 14.5]
    """
    name = "addmv"
    x, m, v = (_tensor(name, a, t) for a, t in (("input", input), ("mat", mat), ("vec", vec)))
    _check_mv(name, m, v, x)
    size = _fits(name, x, (int(m.shape[0]),))
    return _add_product(name, x, (m, v), size, (beta, alpha), lambda a, b: _mm(name, a, b))


def baddbmm(
    input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1
) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)``, ``input`` broadcast to (b, n, p), all
    three of one dtype, as ``torch.baddbmm`` (see the module for ``beta=0`` and ``alpha=0``).

    Example:
        >>> import dtorch
        >>> out = dtorch.baddbmm(dtorch.ones(2), dtorch.ones(3, 2, 4), dtorch.ones(3, 4, 2))
        >>> out.shape, out[0].tolist()
        (torch.Size([3, 2, 2]), [[5.0, 5.0], [5.0, 5.0]])
    """
    name = "baddbmm"
    x, b1, b2 = _batches(name, input, batch1, batch2)
    size = _fits(name, x, (int(b1.shape[0]), int(b1.shape[1]), int(b2.shape[2])))
    return _add_product(name, x, (b1, b2), size, (beta, alpha), lambda a, b: _mm(name, a, b))


def addbmm(
    input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1
) -> Tensor:
    """``beta * input + alpha * sum(bmm(batch1, batch2), 0)``, ``input`` broadcast to
    (n, p), all three of one dtype, as ``torch.addbmm``; the product is one ``einsum``
    (``bij,bjk->ik``), so a shard of the batch dim on both sides gives a Partial product.

    Example:
        >>> import dtorch
        >>> dtorch.addbmm(dtorch.zeros(2, 2), dtorch.ones(3, 2, 4), dtorch.ones(3, 4, 2)).tolist()
        [[12.0, 12.0], [12.0, 12.0]]
    """
    name = "addbmm"
    x, b1, b2 = _batches(name, input, batch1, batch2)
    size = _fits(name, x, (int(b1.shape[1]), int(b2.shape[2])))
    param = EinsumParam("bij,bjk->ik")
    return _add_product(
        name, x, (b1, b2), size, (beta, alpha), lambda a, b: _einsum(name, param, a, b)
    )


def _batches(name: str, input: Any, batch1: Any, batch2: Any) -> tuple[Tensor, Tensor, Tensor]:
    args = (("input", input), ("batch1", batch1), ("batch2", batch2))
    x, b1, b2 = (_tensor(name, a, t) for a, t in args)
    _ndims(name, (("batch1", b1), ("batch2", b2)), (3, 3))
    _same_dtype(name, x, b1, b2)
    if b1.shape[0] != b2.shape[0]:
        raise ShapeError(
            f"{name}: batch1 and batch2 must have same number of batches, got {b1.shape[0]} "
            f"and {b2.shape[0]}"
        )
    if b1.shape[2] != b2.shape[1]:
        raise ShapeError(
            f"{name}: batch1 and batch2 shapes cannot be multiplied "
            f"({'x'.join(map(str, b1.shape))} and {'x'.join(map(str, b2.shape))})"
        )
    return x, b1, b2


def _fits(name: str, x: Tensor, size: tuple[int, ...]) -> tuple[int, ...]:
    """``size``, where ``input`` broadcasts to it (torch expands ``input`` to the product)."""
    try:
        fits = tuple(torch.broadcast_shapes(tuple(x.shape), size)) == size
    except RuntimeError:
        fits = False
    if not fits:
        raise ShapeError(
            f"{name}: input of shape {list(x.shape)} does not broadcast to {list(size)}"
        )
    return size


def _mm(name: str, a: Tensor, b: Tensor) -> Tensor:
    return record(name, _MATMUL, (a, b))[0]


def _einsum(name: str, param: EinsumParam, a: Tensor, b: Tensor) -> Tensor:
    return record(name, param, (a, b))[0]


def _add_product(
    name: str,
    x: Tensor,
    factors: tuple[Tensor, Tensor],
    size: tuple[int, ...],
    scales: tuple[Any, Any],
    product: Any,
) -> Tensor:
    """``beta * x + alpha * product(*factors)`` at ``size``, as ``addmm`` computes it."""
    beta, alpha = (_number(name, arg, v) for arg, v in zip(("beta", "alpha"), scales, strict=True))
    dtype = x.dtype
    beta, alpha = applied_number(dtype, beta), applied_number(dtype, alpha)
    work = torch.float32 if dtype in _REDUCED else dtype
    x = cast(x, work)
    if alpha == 0:
        return cast(_scaled_input(name, x, size, beta), dtype)
    out = product(cast(factors[0], work), cast(factors[1], work))
    if alpha != 1:
        out = binary(BinaryKind.MUL, name, out, alpha)
    if beta != 0:
        base = x if beta == 1 else binary(BinaryKind.MUL, name, x, beta)
        out = binary(BinaryKind.ADD, name, base, out)
    return cast(out, dtype)


def _scaled_input(name: str, x: Tensor, size: tuple[int, ...], beta: Any) -> Tensor:
    """``alpha=0``: ``beta * input`` at the output's shape (zeros for 0)."""
    with named_as(name, "expand"):
        full = expand(x, size)
    if beta == 0:
        return full.new_zeros(size)
    return clone(full) if beta == 1 else binary(BinaryKind.MUL, name, full, beta)


def tensordot(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    """``torch.tensordot``: the sum of products over ``a``'s last ``dims`` dims and ``b``'s
    first ``dims`` (an int), or over the dims of two lists ``dims=([a's], [b's])``; the
    result holds ``a``'s other dims then ``b``'s. One ``einsum`` (its placements: a shard of
    a kept dim stays, a contracted dim sharded on both sides gives Partial). As in torch, each
    list must be a list or tuple (``dims=(1, 0)`` is a TypeError) and bools are refused
    unless an operand is empty and the result is not 0-d (no product to sum).

    Example:
        >>> import dtorch
        >>> a, b = dtorch.ones(2, 3, 4), dtorch.ones(4, 3, 5)
        >>> dtorch.tensordot(a, b, dims=([1, 2], [1, 0])).shape, dtorch.tensordot(a, b, 1).shape
        (torch.Size([2, 5]), torch.Size([2, 3, 3, 5]))
    """
    x, y = _tensor("tensordot", "a", a), _tensor("tensordot", "b", b)
    if x.dtype != y.dtype:
        raise DtypeError("tensordot: both inputs should have same dtype")
    if x.dtype == torch.bool and not _no_products(x, y, dims):
        raise UnsupportedDtypeError(
            "tensordot: \"tensordot\" not implemented for 'Bool' (as in torch, which takes "
            "bools only where no product is summed); accepted: other dtypes, cast first"
        )
    return _tensordot("tensordot", x, y, dims)


def _no_products(x: Tensor, y: Tensor, dims: Any) -> bool:
    """Whether torch's bool tensordot computes: an empty operand (an empty result, or an empty
    contraction) where the result is not 0-d (that one is a ``dot``, refused even empty)."""
    left, _ = _contracted(x, y, dims)
    return x.ndim + y.ndim > 2 * len(left) and (x.numel() == 0 or y.numel() == 0)


def _tensordot(name: str, x: Tensor, y: Tensor, dims: Any) -> Tensor:
    """tensordot's einsum, recorded as ``name``."""
    left, right = _contracted(x, y, dims)
    for i, j in zip(left, right, strict=True):
        if x.shape[i] != y.shape[j]:
            raise ShapeError(
                f"tensordot: contracted dimensions need to match, but first has size "
                f"{x.shape[i]} in dim {i} and second has size {y.shape[j]} in dim {j}"
            )
    if x.ndim + y.ndim - len(left) > len(_LETTERS):
        raise ShapeError(f"tensordot: at most {len(_LETTERS)} dims in all are supported")
    sa = _LETTERS[: x.ndim]
    sb = [_LETTERS[x.ndim + j] for j in range(y.ndim)]
    for i, j in zip(left, right, strict=True):
        sb[j] = sa[i]
    kept = [c for i, c in enumerate(sa) if i not in left]
    kept += [c for j, c in enumerate(sb) if j not in right]
    equation = f"{sa},{''.join(sb)}->{''.join(kept)}"
    return record(name, EinsumParam(equation), (x, y))[0]


def _contracted(x: Tensor, y: Tensor, dims: Any) -> tuple[list[int], list[int]]:
    """tensordot's contracted dims of each side, normalised (torch's rules and words)."""
    if isinstance(dims, torch.Tensor):
        dims = dims.item() if dims.ndim == 0 else dims.tolist()
    if isinstance(dims, int) and not isinstance(dims, bool):
        if dims < 0:
            raise ParamError(f"tensordot: tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(x.ndim, y.ndim):
            raise ParamError(
                f"tensordot: tensordot expects dims < ndim_a or ndim_b, but got dims={dims}"
            )
        return list(range(x.ndim - dims, x.ndim)), list(range(dims))
    if not isinstance(dims, (list, tuple)) or len(dims) != 2:
        raise TypeError(f"tensordot: dims must be an int or a pair of lists of dims, got {dims!r}")
    left, right = (_dim_list(d, arg) for d, arg in zip(dims, _SIDES, strict=True))
    if len(left) != len(right):
        raise ShapeError("tensordot: both dimension lists should have same length")
    return _dims(x, left), _dims(y, right)


def _dim_list(dims: Any, arg: str) -> list[int]:
    """One side of ``dims=(a's, b's)``: a list or tuple of ints (torch's TypeError for an
    int, ``(1, 0)`` included, or a bool)."""
    if not isinstance(dims, (list, tuple)):
        raise TypeError(
            f"tensordot: argument '{arg}' must be tuple of ints, not {type(dims).__name__}; "
            "accepted: dims=([a's dims], [b's dims]) or an int"
        )
    for d in dims:
        if isinstance(d, bool) or not hasattr(d, "__index__"):  # numpy ints too
            raise TypeError(
                f"tensordot: argument '{arg}' must be tuple of ints, but found element of type "
                f"{type(d).__name__}"
            )
    return list(dims)


def _dims(t: Tensor, dims: list[int]) -> list[int]:
    out = [normalize_dim(d, t.ndim, op="tensordot") for d in dims]
    if len(set(out)) != len(out):
        raise ShapeError(f"tensordot: dim {dims} appears multiple times in the list of dims")
    return out


def inner(input: Tensor, other: Tensor) -> Tensor:
    """``torch.inner``: sums of products over the last dim of both, the result holding
    ``input``'s other dims then ``other``'s (a 0-d operand multiplies instead). One
    ``einsum`` (a shard of the last dim on both sides gives Partial).

    Example:
        >>> import dtorch
        >>> a = dtorch.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> dtorch.inner(a, dtorch.tensor([1.0, 1.0])).tolist(), dtorch.inner(a, a).tolist()
        ([3.0, 7.0], [[5.0, 11.0], [11.0, 25.0]])
    """
    x, y = _tensor("inner", "input", input), _tensor("inner", "other", other)
    if x.ndim == 0 or y.ndim == 0:
        return binary(BinaryKind.MUL, "inner", x, y)
    if x.dtype != y.dtype:
        raise DtypeError("inner: both inputs should have same dtype")
    _same_dtype("inner", x, y)
    if x.shape[-1] != y.shape[-1]:
        raise ShapeError(
            f"inner: the last dimension must match on both input tensors but got shapes "
            f"{list(x.shape)} and {list(y.shape)}"
        )
    return _tensordot("inner", x, y, ([-1], [-1]))


def kron(input: Tensor, other: Tensor) -> Tensor:
    """``torch.kron``, the Kronecker product: a block ``input[i, j] * other`` at each
    position ``(i, j)`` (the smaller tensor padded with leading size-1 dims), in torch's
    promoted dtype. A broadcast ``mul`` and a ``reshape``: a shard of ``input`` stays a shard
    of the result (the outer part of each merged dim); a sharded ``other`` would be the inner
    part, and is refused by the reshape (a PlacementError naming ``kron``).

    Example:
        >>> import dtorch
        >>> dtorch.kron(dtorch.tensor([[1, 2]]), dtorch.tensor([1, 10])).tolist()
        [[1, 10, 2, 20]]
    """
    x, y = _tensor("kron", "input", input), _tensor("kron", "other", other)
    n = max(x.ndim, y.ndim)
    xs = (1,) * (n - x.ndim) + tuple(x.shape)
    ys = (1,) * (n - y.ndim) + tuple(y.shape)
    for _ in range(n - x.ndim):
        x = unsqueeze(x, 0)
    for _ in range(n - y.ndim):
        y = unsqueeze(y, 0)
    for d in range(n):  # x's dim d then a size-1 dim; y's size-1 dim then its dim d
        x = unsqueeze(x, 2 * d + 1)
        y = unsqueeze(y, 2 * d)
    out = binary(BinaryKind.MUL, "kron", x, y)
    try:
        return reshape(out, tuple(a * b for a, b in zip(xs, ys, strict=True)))
    except PlacementError as error:
        raise _kron_refusal(input, other, str(error)) from None


def _kron_refusal(x: Tensor, y: Tensor, why: str) -> PlacementError:
    """The reshape's refusal, in the placements the user gave ``kron``."""
    return PlacementError(
        f"kron: got {format_placements(x.placements)} and {format_placements(y.placements)} on "
        f"mesh {tuple(x.device_mesh.shape)}; merging each dim of input with other's ({why}); "
        "accepted per mesh dimension: other R with input R, P or S(i) where each device keeps "
        "its chunk of the merged dim i, or other P with input R; redistribute first"
    )
