"""torch's older top-level linear algebra names (also Tensor methods): ``cholesky
cholesky_inverse cholesky_solve qr svd pinverse matrix_power matrix_exp lu lu_unpack lu_solve
triangular_solve geqrf orgqr ormqr`` run torch's own function on every device's whole
matrices (one Linalg operator: batch dims may be sharded and keep their shards, the matrix dims
must be whole, a Partial input is refused); ``chain_matmul frobenius_norm nuclear_norm`` are
compositions (``linalg.multi_dot``, ``linalg.vector_norm``, ``linalg.matrix_norm``), and so is
``norm`` (``torch.norm``: the vector norms of ``dtorch.api.ops.statistics``, and ``p='nuc'``).

Example:
    >>> import dtorch
    >>> a = dtorch.tensor([[4.0, 2.0], [2.0, 5.0]])
    >>> a.cholesky().tolist(), dtorch.svd(a.diag().diag()).S.tolist()
    ([[2.0, 0.0], [1.0, 2.0]], [5.0, 4.0])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.create import beside
from dtorch.api.dims import as_flag
from dtorch.api.ops import statistics as _st
from dtorch.api.record import composite, named_as, tensor_arg, with_inputs
from dtorch.errors import ParamError, ShapeError
from dtorch.ir.opkind import LinalgKind
from dtorch.ir.params import LinalgParam
from dtorch.linalg import matrix as _mx
from dtorch.linalg import more as _more
from dtorch.linalg import norms as _nm
from dtorch.linalg import products as _pr
from dtorch.linalg.tolerances import checked_tolerance

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


@composite("cholesky")  # refusals name the function called
def cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky``: ``linalg.cholesky`` with ``upper`` positional.

    Example:
        >>> import dtorch
        >>> dtorch.cholesky(dtorch.tensor([[4.0, 2.0], [2.0, 5.0]]), True).tolist()
        [[2.0, 1.0], [0.0, 2.0]]
    """
    return _mx.cholesky(input, upper=upper)


def cholesky_inverse(input: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky_inverse``: the inverse of ``L @ L.mT`` (``upper``: ``U.mT @ U``) from
    its Cholesky factor ``input``.

    Example:
        >>> import dtorch
        >>> dtorch.cholesky_inverse(dtorch.tensor([[2.0, 0.0], [0.0, 1.0]])).abs().tolist()
        [[0.25, 0.0], [0.0, 1.0]]
    """
    flag = as_flag(upper, "cholesky_inverse", "upper")
    param = LinalgParam(LinalgKind.CHOLESKY_INVERSE, flag=flag)
    return _mx.one_result("cholesky_inverse", param, input)


def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky_solve``: ``X`` with ``A @ X = input`` from ``A``'s Cholesky factor
    ``input2`` (lower; ``upper``: upper); the batch dims broadcast.

    Example:
        >>> import dtorch
        >>> L = dtorch.tensor([[2.0, 0.0], [0.0, 1.0]])
        >>> dtorch.tensor([[4.0], [1.0]]).cholesky_solve(L).tolist()
        [[1.0], [1.0]]
    """
    name = "cholesky_solve"
    tensor_arg(name, input, "input")
    tensor_arg(name, input2, "input2")
    param = LinalgParam(LinalgKind.CHOLESKY_SOLVE, flag=as_flag(upper, name, "upper"))
    b, a = _mx.broadcast_batches(name, input, input2)
    return _mx.one_result(name, param, b, a)


@composite("qr")  # refusals name the function called
def qr(input: Tensor, some: bool = True) -> Any:
    """``torch.qr``: ``linalg.qr`` (``some=False``: mode 'complete'), as
    ``torch.return_types.qr``.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([[3.0, 0.0], [4.0, 5.0]]).qr().R.abs().tolist()
        [[5.0, 4.0], [0.0, 3.0]]
    """
    some = as_flag(some, "qr", "some")
    return torch.return_types.qr(tuple(_mx.qr(input, "reduced" if some else "complete")))


def svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> Any:
    """``torch.svd``: ``U``, ``S`` and ``V`` (not ``Vh``) of every matrix, as
    ``torch.return_types.svd``; ``compute_uv=False``: ``U`` and ``V`` zero-filled, as torch's.

    Example:
        >>> import dtorch
        >>> dtorch.svd(dtorch.tensor([[3.0, 0.0], [0.0, -4.0]])).S.tolist()
        [4.0, 3.0]
    """
    name = "svd"
    uv = _more.flag_bits(name, compute_uv=compute_uv)
    param = LinalgParam(LinalgKind.SVD_OLD, flag=as_flag(some, name, "some"), n=uv)
    return _more.named(name, "svd", param, input)


@composite("pinverse")  # refusals name the function called
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse``: ``linalg.pinv`` with ``rcond`` as its relative tolerance.

    Example:
        >>> import dtorch
        >>> dtorch.pinverse(dtorch.tensor([[2.0, 0.0], [0.0, 0.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.0]]
    """
    return _mx.pinv(input, checked_tolerance("pinverse", "rcond", rcond))


@composite("matrix_power")  # refusals name the function called
def matrix_power(input: Tensor, n: int) -> Tensor:
    """``torch.matrix_power``: ``linalg.matrix_power``.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([[1, 1], [0, 1]]).matrix_power(2).tolist()
        [[1, 2], [0, 1]]
    """
    return _mx.matrix_power(input, n)


@composite("matrix_exp")  # refusals name the function called
def matrix_exp(input: Tensor) -> Tensor:
    """``torch.matrix_exp``: ``linalg.matrix_exp``.

    Example:
        >>> import dtorch
        >>> dtorch.zeros(2, 2).matrix_exp().tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    return _mx.matrix_exp(input)


def lu(A: Tensor, pivot: bool = True, get_infos: bool = False) -> Any:
    """``torch.lu``: the packed LU factors and int32 pivots of every matrix (``get_infos``:
    and the int32 infos), as a tuple; a singular matrix is no error, as torch's.

    Example:
        >>> import dtorch
        >>> LU, piv = dtorch.tensor([[1.0, 2.0], [3.0, 4.0]]).lu()
        >>> piv.tolist()
        [2, 2]
    """
    name = "lu"
    infos = as_flag(get_infos, name, "get_infos")
    param = LinalgParam(LinalgKind.LU_FACTOR_EX, flag=_more.pivoting(name, pivot))
    out = tuple(_more.named(name, "linalg_lu_factor_ex", param, A))
    return out if infos else out[:2]


def lu_unpack(
    LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True
) -> Any:
    """``torch.lu_unpack``: ``P``, ``L`` and ``U`` from ``lu``'s results, as
    ``torch.return_types.lu_unpack`` (the ones not unpacked are empty, as torch's).

    Example:
        >>> import dtorch
        >>> LU, piv = dtorch.linalg.lu_factor(dtorch.tensor([[0.0, 1.0], [1.0, 0.0]]))
        >>> dtorch.lu_unpack(LU, piv).P.tolist()
        [[0.0, 1.0], [1.0, 0.0]]
    """
    name = "lu_unpack"
    tensor_arg(name, LU_pivots, "LU_pivots")
    flags = _more.flag_bits(name, unpack_data=unpack_data, unpack_pivots=unpack_pivots)
    if not flags:  # nothing unpacked: three empty tensors, nothing to run on the devices
        tensor_arg(name, LU_data, "LU_data")
        empty = torch.empty(0, dtype=LU_data.dtype)
        empties: Any = tuple(beside(LU_data, empty) for _ in range(3))
        return torch.return_types.lu_unpack(empties)
    _refuse_unfit_pivots(name, LU_data, LU_pivots)
    param = LinalgParam(LinalgKind.LU_UNPACK, n=flags)
    return _more.named(name, "lu_unpack", param, LU_data, _more.column(LU_pivots))


def _refuse_unfit_pivots(name: str, LU: Tensor, pivots: Tensor) -> None:
    """Pivots not shaped ``LU.shape[:-2] + (min(m, n),)`` refused: torch's ``lu_unpack``
    does not check them and reads past them (a wrong index error, or a corrupted heap that
    aborts the process). A 1-D or 0-D LU is left to the rule, which words its refusal."""
    tensor_arg(name, LU, "LU_data")
    if LU.ndim < 2:
        return
    fit = (*LU.shape[:-2], min(LU.shape[-2:]))
    if tuple(pivots.shape) != fit:
        raise ShapeError(
            f"{name}: LU_pivots of shape {list(pivots.shape)} do not fit LU_data of shape "
            f"{list(LU.shape)}; accepted: pivots of shape {list(fit)} (LU_data's batch dims "
            "and min(m, n))"
        )


@composite("lu_solve")  # refusals name the function called
def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """``torch.lu_solve``: ``linalg.lu_solve(LU_data, LU_pivots, b)``.

    Example:
        >>> import dtorch
        >>> LU, piv = dtorch.linalg.lu_factor(dtorch.tensor([[2.0, 0.0], [0.0, 4.0]]))
        >>> dtorch.tensor([[2.0], [2.0]]).lu_solve(LU, piv).tolist()
        [[1.0], [0.5]]
    """
    return _more.lu_solve(LU_data, LU_pivots, b)


def triangular_solve(
    input: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
    unitriangular: bool = False,
) -> Any:  # fmt: skip
    """``torch.triangular_solve``: ``X`` with ``A @ X = input`` (``transpose``: ``A.mT``) for
    triangular ``A``, and a copy of ``A``, as ``torch.return_types.triangular_solve``.

    Example:
        >>> import dtorch
        >>> a = dtorch.tensor([[1.0, 1.0], [0.0, 2.0]])
        >>> dtorch.tensor([[3.0], [4.0]]).triangular_solve(a).solution.tolist()
        [[1.0], [2.0]]
    """
    name = "triangular_solve"
    tensor_arg(name, input, "input")
    tensor_arg(name, A, "A")
    flags = _more.flag_bits(name, upper=upper, transpose=transpose, unitriangular=unitriangular)
    b, a = _mx.broadcast_batches(name, input, A)
    param = LinalgParam(LinalgKind.TRIANGULAR_SOLVE, n=flags)
    return _more.named(name, "triangular_solve", param, b, a)


def geqrf(input: Tensor) -> Any:
    """``torch.geqrf``: LAPACK's QR of every matrix, the reflectors below the diagonal of
    ``a`` and their scales ``tau``, as ``torch.return_types.geqrf``.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([[3.0, 1.0], [4.0, 2.0]]).geqrf().a[0, 0].item()
        -5.0
    """
    return _more.named("geqrf", "geqrf", LinalgParam(LinalgKind.GEQRF), input)


@composite("orgqr")  # refusals name the function called
def orgqr(input: Tensor, input2: Tensor) -> Tensor:
    """``torch.orgqr``: ``linalg.householder_product``.

    Example:
        >>> import dtorch
        >>> a, tau = dtorch.geqrf(dtorch.eye(2))
        >>> a.orgqr(tau).abs().tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    return _more.householder_product(input, input2)


def ormqr(
    input: Tensor, input2: Tensor, input3: Tensor, left: bool = True, transpose: bool = False
) -> Tensor:
    """``torch.ormqr``: ``input3`` multiplied by the Householder product of ``input`` and
    ``input2`` (``geqrf``'s results), from the ``left`` or right, ``transpose``d or not.

    Example:
        >>> import dtorch
        >>> a, tau = dtorch.geqrf(dtorch.tensor([[3.0, 1.0], [4.0, 2.0]]))
        >>> [round(v, 4) for v in dtorch.ormqr(a, tau, dtorch.eye(2))[:, 0].tolist()]
        [-0.6, -0.8]
    """
    name = "ormqr"
    tensor_arg(name, input2, "input2")
    flags = _more.flag_bits(name, left=left, transpose=transpose)
    param = LinalgParam(LinalgKind.ORMQR, n=flags)
    return _mx.one_result(name, param, input, _more.column(input2), input3)


@composite("chain_matmul")
def chain_matmul(*matrices: Tensor) -> Tensor:
    """``torch.chain_matmul`` (deprecated in torch): the product of 2-D matrices, left to
    right (``linalg.multi_dot``; one matrix: itself).

    Example:
        >>> import dtorch
        >>> m = dtorch.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> dtorch.chain_matmul(m, dtorch.eye(2), m).tolist()
        [[7.0, 10.0], [15.0, 22.0]]
    """
    for i, t in enumerate(matrices):
        tensor_arg("chain_matmul", t, f"matrix {i}")
        if t.ndim != 2:
            raise _shape(f"chain_matmul(): Expected tensor {i} to be 2D, but got {t.ndim}D")
    if not matrices:
        raise _shape("chain_matmul(): Expected one or more matrices")
    return matrices[0].clone() if len(matrices) == 1 else _pr.multi_dot(list(matrices))


def _shape(message: str) -> Exception:
    # torch's RuntimeError, as dtorch's ShapeError
    return ShapeError(f"{message}; accepted: one or more 2-D matrices")


@composite("frobenius_norm")
def frobenius_norm(input: Tensor, dim: Sequence[int], keepdim: bool = False) -> Tensor:
    """``torch.frobenius_norm`` (deprecated in torch): the 2-norm of the elements over
    ``dim`` (one or two dims; ``linalg.vector_norm``).

    Example:
        >>> import dtorch
        >>> dtorch.frobenius_norm(dtorch.tensor([[3.0, 4.0]]), (0, 1)).item()
        5.0
    """
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise ParamError(f"frobenius_norm: Expected at most 2 dimensions, but got {len(dims)} "
                         f"dimensions instead.")  # fmt: skip
    keep = as_flag(keepdim, "frobenius_norm", "keepdim")
    return _nm.vector_norm(input, 2, dims, keepdim=keep)


@composite("nuclear_norm")
def nuclear_norm(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """``torch.nuclear_norm``: the sum of the singular values of the matrix in ``dim`` (the
    last two dims by default, any before them a batch; ``linalg.matrix_norm(..., 'nuc')``). A
    bool second argument is ``keepdim``, as torch's ``nuclear_norm(input, keepdim)``.

    Example:
        >>> import dtorch
        >>> dtorch.nuclear_norm(dtorch.tensor([[3.0, 0.0], [0.0, -4.0]])).item()
        7.0
    """
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    if dim is None:  # the last two dims, a batch before them (matrix_norm refuses a 1-D input)
        dim = (-2, -1)
    elif isinstance(dim, int):  # torch reads one int as that dim twice (then refused)
        dim = (dim, dim)
    keep = as_flag(keepdim, "nuclear_norm", "keepdim")
    return _nm.matrix_norm(input, "nuc", tuple(dim), keepdim=keep)


def norm(
    input: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False,
    dtype: torch.dtype | None = None,
) -> Tensor:  # fmt: skip
    """``torch.norm`` (and ``Tensor.norm``): the vector norms of ``dtorch.api.ops.statistics``'s
    ``norm``, and ``p='nuc'``, the nuclear norm of the matrices in ``dim`` (a 2-tuple; None:
    a 2-D input's two dims), as torch's ``linalg.matrix_norm(input, 'nuc', dim)``: the matrix
    dims must then be whole on every device (the batch dims may be sharded).

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([[3.0, 0.0], [0.0, -4.0]])
        >>> t.norm().item(), t.norm(p="nuc").item(), dtorch.norm(t, 1, dim=0).tolist()
        (5.0, 7.0, [3.0, 4.0])
    """
    # here, not in dtorch.api.ops.statistics: the nuclear norm needs svdvals, of this layer
    if isinstance(p, str) and p == "nuc":
        return _nuclear(input, dim, keepdim, dtype)
    return _st.norm(input, "fro" if p is None else p, dim, keepdim, dtype)  # None: torch's 'fro'


@with_inputs  # placement refusals end with the caller's tensors
def _nuclear(input: Tensor, dim: Any, keepdim: Any, dtype: Any) -> Tensor:
    # torch.norm's p='nuc': matrix_norm over dim (None: every dim), which must be two dims
    tensor_arg("norm", input)
    if input.ndim < 2:
        raise ShapeError(
            f"norm: p='nuc' is the nuclear norm of a matrix: the input must have at least 2 "
            f"dims, got shape {list(input.shape)}"
        )
    dims, keep = _nuclear_dims(input, dim), as_flag(keepdim, "norm", "keepdim")
    with named_as("norm", "linalg.matrix_norm"):
        return _nm.matrix_norm(input, "nuc", dims, keep, dtype=dtype)


def _nuclear_dims(input: Tensor, dim: Any) -> tuple[int, ...]:
    # torch reads dim None as every dim and one int as one dim: only two dims are a matrix
    dims = tuple(range(input.ndim)) if dim is None else (dim,) if isinstance(dim, int) else dim
    if not isinstance(dims, (tuple, list)) or len(dims) != 2:
        given = f"dim=None for a {input.ndim}-D input" if dim is None else f"dim={dim!r}"
        raise ParamError(
            f"norm: p='nuc' takes two dims (the matrix's), got {given}; accepted: dim=None "
            f"for a 2-D input, or a 2-tuple of dims"
        )
    return tuple(dims)
