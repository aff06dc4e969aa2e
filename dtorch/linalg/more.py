"""More of torch.linalg: ``lu_factor lu_factor_ex lu lu_solve solve_triangular inv_ex
cholesky_ex householder_product cond eig eigvals`` (each one Linalg operator running torch's own
function on every device's whole matrices: batch dims may be sharded and keep their shards, the
matrix dims must be whole, a Partial input is refused), ``tensorinv tensorsolve vander``
(compositions of dtorch operators) and ``lstsq`` (waits for its inputs: the shape of its
residuals depends on the values).

Vector arguments (``pivots``, ``tau``) travel as one-column matrices, so their batch dims shard
as the matrices' do.

Example:
    >>> import dtorch
    >>> a = dtorch.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> dtorch.linalg.solve_triangular(a, dtorch.tensor([[2.0], [2.0]]), upper=False).tolist()
    [[1.0], [1.0]]
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_flag, as_int, normalize_dims
from dtorch.api.ops.shape import cat
from dtorch.api.record import composite, record, tensor_arg
from dtorch.errors import DTorchError, DtypeError, KernelError, ParamError, ShapeError
from dtorch.ir.opkind import LinalgKind
from dtorch.ir.params import LinalgParam
from dtorch.linalg import matrix as _mx
from dtorch.linalg.tolerances import checked_tolerance

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def bits(*flags: bool) -> int:
    """Flags packed into LinalgParam's ``n`` (bit i: the i-th flag; the rule's ``_bit``).

    Example:
        >>> bits(True, False, True)
        5
    """
    return sum(int(f) << i for i, f in enumerate(flags))


def flag_bits(name: str, **flags: Any) -> int:
    """``flags`` checked as bools (a refusal naming ``name`` and the keyword) and packed as
    ``bits`` in keyword order: the first keyword is bit 0.

    Example:
        >>> flag_bits("linalg.solve_triangular", upper=True, left=False, unitriangular=True)
        5
    """
    return bits(*(as_flag(value, name, word) for word, value in flags.items()))


def named(name: str, kind: str, param: LinalgParam, *inputs: Tensor, keep: int = 0) -> Any:
    """The Linalg operator of ``param`` on ``inputs`` as ``torch.return_types.<kind>`` (its
    first ``keep`` results, all where 0).

    Example:
        >>> import dtorch
        >>> p = LinalgParam(LinalgKind.INV_EX)
        >>> named("linalg.inv_ex", "linalg_inv_ex", p, dtorch.eye(2)).info.item()
        0
    """
    for i, t in enumerate(inputs):
        tensor_arg(name, t, f"input {i}")
    outs = record(name, param, inputs)
    return getattr(torch.return_types, kind)(outs[:keep] if keep else outs)


def column(v: Tensor) -> Tensor:
    """A vector argument (pivots, tau) as a one-column matrix: its batch dims line up with
    the matrices' (the rule shards batch dims only).

    Example:
        >>> import dtorch
        >>> column(dtorch.tensor([1, 2])).shape
        torch.Size([2, 1])
    """
    return v.unsqueeze(-1)


def pivoting(name: str, pivot: Any) -> bool:
    """``pivot`` as a flag, True only: torch's CPU kernel has no LU without pivoting (and
    the rule learns dtypes and shapes from it).

    Example:
        >>> pivoting("linalg.lu", True)
        True
    """
    if not as_flag(pivot, name, "pivot"):
        raise ParamError(f"{name}: LU without pivoting is not implemented (torch's CPU kernel "
                         f"has none); accepted: pivot=True")  # fmt: skip
    return True


def lu_factor(A: Tensor, *, pivot: bool = True) -> Any:
    """``torch.linalg.lu_factor``: the packed LU factors and the int32 pivots of every matrix,
    as ``torch.return_types.linalg_lu_factor``; a singular matrix fails when the value is
    computed, as torch's (``lu_factor_ex`` does not).

    Example:
        >>> import dtorch
        >>> dtorch.linalg.lu_factor(dtorch.tensor([[1.0, 2.0], [3.0, 4.0]])).pivots.tolist()
        [2, 2]
    """
    flag = pivoting("linalg.lu_factor", pivot)
    param = LinalgParam(LinalgKind.LU_FACTOR_EX, flag=flag, n=bits(True))
    return named("linalg.lu_factor", "linalg_lu_factor", param, A, keep=2)


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False) -> Any:
    """``torch.linalg.lu_factor_ex``: ``lu_factor`` with the int32 ``info`` of every matrix
    (0, or the index of a zero pivot), as ``torch.return_types.linalg_lu_factor_ex``.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.lu_factor_ex(dtorch.zeros(2, 2)).info.item()
        1
    """
    name = "linalg.lu_factor_ex"
    check = as_flag(check_errors, name, "check_errors")
    param = LinalgParam(LinalgKind.LU_FACTOR_EX, flag=pivoting(name, pivot), n=bits(check))
    return named(name, "linalg_lu_factor_ex", param, A)


def lu(A: Tensor, *, pivot: bool = True) -> Any:
    """``torch.linalg.lu``: ``P``, ``L`` and ``U`` of every matrix (``A = P @ L @ U``), as
    ``torch.return_types.linalg_lu``.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.lu(dtorch.tensor([[0.0, 1.0], [1.0, 0.0]])).P.tolist()
        [[0.0, 1.0], [1.0, 0.0]]
    """
    param = LinalgParam(LinalgKind.LU, flag=pivoting("linalg.lu", pivot))
    return named("linalg.lu", "linalg_lu", param, A)


def lu_solve(
    LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False
) -> Tensor:
    """``torch.linalg.lu_solve``: ``X`` with ``A @ X = B`` from ``lu_factor``'s ``LU`` and
    ``pivots`` (``left=False``: ``X @ A = B``; ``adjoint``: with ``A``'s adjoint); the batch
    dims of ``LU`` and ``B`` broadcast, and ``pivots`` (of shape ``LU.shape[:-1]``, as torch
    takes them) with ``LU``.

    Example:
        >>> import dtorch
        >>> LU, piv = dtorch.linalg.lu_factor(dtorch.tensor([[2.0, 0.0], [0.0, 4.0]]))
        >>> dtorch.linalg.lu_solve(LU, piv, dtorch.tensor([[2.0], [2.0]])).tolist()
        [[1.0], [0.5]]
    """
    name = "linalg.lu_solve"
    for t, what in ((LU, "LU"), (pivots, "pivots"), (B, "B")):
        tensor_arg(name, t, what)
    flags = flag_bits(name, left=left, adjoint=adjoint)
    refuse_other_pivots(name, LU, pivots)
    lu_, b = _mx.broadcast_batches(name, LU, B)
    piv = column(pivots)
    if lu_.ndim >= 2 and piv.ndim >= 2 and tuple(piv.shape[:-2]) != tuple(lu_.shape[:-2]):
        piv = _mx.expanded_batches(piv, tuple(lu_.shape[:-2]))  # LU's batch broadcast with B's
    return _mx.one_result(name, LinalgParam(LinalgKind.LU_SOLVE, n=flags), lu_, piv, b)


def refuse_other_pivots(name: str, LU: Tensor, pivots: Tensor) -> None:
    """torch's refusal of pivots not of shape ``LU.shape[:-1]`` (``lu_solve``'s, and
    ``ldl_solve``'s of ``LD``): it broadcasts them with nothing (a 1-D or 0-D ``LU`` is left
    to the rule, which words its own refusal).

    Example:
        >>> import dtorch
        >>> refuse_other_pivots("linalg.lu_solve", dtorch.eye(2), dtorch.tensor([1, 2]))
    """
    if LU.ndim >= 2 and tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise ShapeError(f"{name}: Expected LU.shape[:-1] and pivots.shape to be the same, but "
                         f"got pivots with shape {list(pivots.shape)} instead; accepted: pivots "
                         f"of shape {list(LU.shape[:-1])}")  # fmt: skip


def solve_triangular(
    A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False
) -> Tensor:
    """``torch.linalg.solve_triangular``: ``X`` with ``A @ X = B`` (``left=False``:
    ``X @ A = B``) for triangular ``A`` (its ``upper`` or lower triangle; ``unitriangular``:
    ones on the diagonal assumed); the batch dims broadcast.

    Example:
        >>> import dtorch
        >>> a = dtorch.tensor([[1.0, 1.0], [0.0, 2.0]])
        >>> dtorch.linalg.solve_triangular(a, dtorch.tensor([[3.0], [4.0]]), upper=True).tolist()
        [[1.0], [2.0]]
    """
    name = "linalg.solve_triangular"
    tensor_arg(name, A, "A")
    tensor_arg(name, B, "B")
    flags = flag_bits(name, upper=upper, left=left, unitriangular=unitriangular)
    a, b = _mx.broadcast_batches(name, A, B)
    return _mx.one_result(name, LinalgParam(LinalgKind.SOLVE_TRIANGULAR, n=flags), a, b)


def inv_ex(A: Tensor, *, check_errors: bool = False) -> Any:
    """``torch.linalg.inv_ex``: the inverse and the int32 ``info`` (0: invertible) of every
    matrix, as ``torch.return_types.linalg_inv_ex``.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.inv_ex(dtorch.tensor([[2.0, 0.0], [0.0, 4.0]])).inverse.tolist()
        [[0.5, 0.0], [0.0, 0.25]]
    """
    flag = as_flag(check_errors, "linalg.inv_ex", "check_errors")
    return named("linalg.inv_ex", "linalg_inv_ex", LinalgParam(LinalgKind.INV_EX, flag=flag), A)


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> Any:
    """``torch.linalg.cholesky_ex``: the Cholesky factor and the int32 ``info`` (0: positive
    definite) of every matrix, as ``torch.return_types.linalg_cholesky_ex``.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.cholesky_ex(dtorch.tensor([[4.0, 0.0], [0.0, -1.0]])).info.item()
        2
    """
    name = "linalg.cholesky_ex"
    check = flag_bits(name, check_errors=check_errors)
    param = LinalgParam(LinalgKind.CHOLESKY_EX, flag=as_flag(upper, name, "upper"), n=check)
    return named(name, "linalg_cholesky_ex", param, A)


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """``torch.linalg.householder_product``: the first columns of the product of the
    Householder reflectors in ``A``'s columns with scales ``tau`` (``geqrf``'s results).

    Example:
        >>> import dtorch
        >>> a, tau = dtorch.geqrf(dtorch.tensor([[3.0, 1.0], [4.0, 2.0]]))
        >>> [round(v, 4) for v in dtorch.linalg.householder_product(a, tau)[:, 0].tolist()]
        [-0.6, -0.8]
    """
    name = "linalg.householder_product"
    tensor_arg(name, tau, "tau")
    return _mx.one_result(name, LinalgParam(LinalgKind.HOUSEHOLDER_PRODUCT), A, column(tau))


_ORDERS = ("fro", "nuc")


def cond(A: Tensor, p: Any = None) -> Tensor:
    """``torch.linalg.cond``: the condition number of every matrix in the norm ``p`` (None or
    2: the 2-norm; -2, 1, -1, inf, -inf, 'fro', 'nuc'; only 2 and -2 take non-square ones).

    Example:
        >>> import dtorch
        >>> dtorch.linalg.cond(dtorch.tensor([[4.0, 0.0], [0.0, 2.0]])).item()
        2.0
    """
    name = "linalg.cond"
    if isinstance(p, str):
        if p not in _ORDERS:
            raise ParamError(f"{name}: got an invalid norm type {p!r}; accepted: None, 2, -2, "
                             f"1, -1, inf, -inf, 'fro', 'nuc'")  # fmt: skip
        return _mx.one_result(name, LinalgParam(LinalgKind.COND, mode=p), A)
    if isinstance(p, bool):  # torch reads a bool as the number
        p = int(p)
    if p is not None and p not in (2, -2, 1, -1, math.inf, -math.inf):
        raise ParamError(f"{name}: got an invalid norm type {p!r}; accepted: None, 2, -2, 1, "
                         f"-1, inf, -inf, 'fro', 'nuc'")  # fmt: skip
    atol = None if p is None else float(p)
    return _mx.one_result(name, LinalgParam(LinalgKind.COND, atol=atol), A)


def eig(A: Tensor) -> Any:
    """``torch.linalg.eig``: the complex eigenvalues and eigenvectors of every square
    matrix, as ``torch.return_types.linalg_eig``.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.eig(dtorch.tensor([[2.0, 0.0], [0.0, 3.0]])).eigenvalues.tolist()
        [(2+0j), (3+0j)]
    """
    return named("linalg.eig", "linalg_eig", LinalgParam(LinalgKind.EIG), A)


def eigvals(A: Tensor) -> Tensor:
    """``torch.linalg.eigvals``: the complex eigenvalues of every square matrix.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.eigvals(dtorch.tensor([[2.0, 0.0], [0.0, 3.0]])).tolist()
        [(2+0j), (3+0j)]
    """
    return _mx.one_result("linalg.eigvals", LinalgParam(LinalgKind.EIGVALS), A)


def lstsq(A: Tensor, B: Tensor, rcond: Any = None, *, driver: str | None = None) -> Any:
    """``torch.linalg.lstsq``: the least-squares solution of ``A @ X = B``, as
    ``torch.return_types.linalg_lstsq`` (``solution residuals rank singular_values``),
    replicated on ``A``'s mesh. The shape of ``residuals`` depends on the values, so this
    waits for ``A`` and ``B`` (like a value fetch). torch's refusals keep its words, as a
    DtypeError (dtypes), ShapeError (shapes) or KernelError (LAPACK failed on the values).

    Example:
        >>> import dtorch
        >>> a = dtorch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
        >>> dtorch.linalg.lstsq(a, dtorch.tensor([[1.0], [2.0], [3.0]])).solution.tolist()
        [[1.0], [2.0]]
    """
    name = "linalg.lstsq"
    tensor_arg(name, A, "A")
    tensor_arg(name, B, "B")
    rc = checked_tolerance(name, "rcond", rcond)
    if driver is not None and driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise ParamError(f"{name}: parameter `driver` should be one of (gels, gelsy, gelsd, "
                         f"gelss), got {driver!r}")  # fmt: skip
    a, b = A.to_torch(), B.to_torch()
    try:
        out = torch.linalg.lstsq(a, b, rc, driver=driver)
    except RuntimeError as error:
        raise _lstsq_refusal(name, str(error).strip(), a, b, rc, driver) from None
    named_tuple = getattr(torch.return_types, "linalg_lstsq")  # noqa: B009 (not in the stubs)
    return named_tuple(tuple(beside(A, t) for t in out))


def _lstsq_refusal(
    name: str, text: str, a: torch.Tensor, b: torch.Tensor, rcond: float | None, driver: Any
) -> DTorchError:
    """torch's refusal ``text`` of lstsq of ``a`` and ``b`` as the dtorch class of what it
    refused, in torch's words: the dtypes where torch refuses one-element matrices of them
    alike, the shapes where it refuses zeros of them alike, else the values (a LAPACK
    failure: a KernelError, as a Linalg kernel that fails on a device raises)."""
    tiny = (torch.zeros(1, 1, dtype=a.dtype), torch.zeros(1, 1, dtype=b.dtype))
    if _refuses_alike(text, *tiny):
        return DtypeError(f"{name}: {text}")
    if _refuses_alike(text, torch.zeros_like(a), torch.zeros_like(b), rcond, driver=driver):
        return ShapeError(f"{name}: {text}")
    return KernelError(f"{name}: {text}")


def _refuses_alike(text: str, *args: Any, **kw: Any) -> bool:
    # whether torch's lstsq of these arguments refuses them with the words ``text``
    try:
        torch.linalg.lstsq(*args, **kw)
    except RuntimeError as error:
        return str(error).strip() == text
    return False


@composite("linalg.tensorinv")
def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """``torch.linalg.tensorinv``: the inverse of ``A`` seen as a matrix of its first ``ind``
    dims by the others (reshaped, ``linalg.inv``, reshaped: its layouts are theirs).

    Example:
        >>> import dtorch
        >>> dtorch.linalg.tensorinv(dtorch.eye(4).reshape(4, 2, 2), ind=1).shape
        torch.Size([2, 2, 4])
    """
    name = "linalg.tensorinv"
    tensor_arg(name, A)
    ind = as_int(name, "ind", ind)
    if ind <= 0:
        raise ParamError(f"{name}: Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if math.prod(rows) != math.prod(cols):
        raise ShapeError(f"{name}: Expected self to satisfy the requirement prod(self.shape["
                         f"ind:]) == prod(self.shape[:ind]), but got {math.prod(cols)} != "
                         f"{math.prod(rows)}")  # fmt: skip
    n = math.prod(rows)
    return _mx.inv(A.reshape(n, n)).reshape(*cols, *rows)


@composite("linalg.tensorsolve")
def tensorsolve(A: Tensor, B: Tensor, dims: Any = None) -> Tensor:
    """``torch.linalg.tensorsolve``: ``X`` with ``tensordot(A, X, X.ndim) = B`` (``dims``:
    dims of ``A`` moved last first); reshaped to a matrix and solved with ``linalg.solve``.

    Example:
        >>> import dtorch
        >>> a = dtorch.eye(4).reshape(2, 2, 4) * 2
        >>> dtorch.linalg.tensorsolve(a, dtorch.ones(2, 2)).tolist()
        [0.5, 0.5, 0.5, 0.5]
    """
    name = "linalg.tensorsolve"
    tensor_arg(name, A, "A")
    tensor_arg(name, B, "B")
    if dims is not None:
        moved = list(normalize_dims(dims, A.ndim, op=name))
        rest = [d for d in range(A.ndim) if d not in moved]
        A = A.permute(*rest, *moved)
    rows, cols = tuple(A.shape[: B.ndim]), tuple(A.shape[B.ndim :])
    if math.prod(rows) != math.prod(cols):  # torch's one check (B's size: the solve's)
        raise ShapeError(f"{name}: Expected self to satisfy the requirement prod(self.shape["
                         f"other.ndim:]) == prod(self.shape[:other.ndim]), but got "
                         f"{math.prod(cols)} != {math.prod(rows)}")  # fmt: skip
    n = math.prod(rows)
    return _mx.solve(A.reshape(n, n), B.reshape(n)).reshape(*cols)


@composite("linalg.vander")
def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """``torch.linalg.vander``: the Vandermonde matrix of the last dim of ``x``: its powers
    0 to ``N - 1`` (``x``'s size by default, at least 2) in a new last dim, as torch's
    cumulative product.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.vander(dtorch.tensor([1, 2, 3]), N=3).tolist()
        [[1, 1, 1], [1, 2, 4], [1, 3, 9]]
    """
    name = "linalg.vander"
    tensor_arg(name, x)
    if x.ndim == 0:
        raise ShapeError(f"{name}: x must have at least one dimension, got a 0-d tensor")
    if x.dtype in (torch.bool, torch.float16, torch.bfloat16):
        raise DtypeError(f"{name}: linalg.vander supports floating point, complex, and integer "
                         f"tensors, but got {x.dtype}; accepted: integers, float32, float64, "
                         f"complex")  # fmt: skip
    n = x.shape[-1] if N is None else as_int(name, "N", N)
    if n <= 1:
        raise ParamError(f"{name}: N must be greater than 1, got {n}")
    powers = x.unsqueeze(-1).expand(*x.shape, n - 1).cumprod(-1)
    return _cat_ones(powers)


def _cat_ones(powers: Tensor) -> Tensor:
    # torch's vander: ones (power 0: 1 for every value, NaN included) then the cumulative
    # products (pow, not ones_like: dtorch.api.creation imports this module via Tensor)
    return cat([powers.narrow(-1, 0, 1).pow(0), powers], -1)
