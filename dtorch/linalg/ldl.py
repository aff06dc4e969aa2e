"""torch.linalg's LDL factorisation of symmetric (``hermitian``: Hermitian) matrices:
``ldl_factor``, ``ldl_factor_ex`` and ``ldl_solve``, one Linalg operator each.

Every device runs torch's own function on its own matrices, so values are torch's: the batch
dims may be sharded and keep their shards, the matrix dims must be whole on every device, and
the pivots (int32, of shape ``LD.shape[:-1]``) travel as one-column matrices beside them.

Example:
    >>> import dtorch
    >>> a = dtorch.tensor([[4.0, 2.0], [2.0, 3.0]])
    >>> LD, pivots = dtorch.linalg.ldl_factor(a)
    >>> dtorch.linalg.ldl_solve(LD, pivots, dtorch.tensor([[2.0], [1.0]])).tolist()
    [[0.5], [0.0]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dtorch.api.dims import as_flag
from dtorch.api.record import tensor_arg
from dtorch.ir.opkind import LinalgKind
from dtorch.ir.params import LinalgParam
from dtorch.linalg import matrix as _mx
from dtorch.linalg.more import bits, column, named, refuse_other_pivots

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def ldl_factor(A: Tensor, *, hermitian: bool = False) -> Any:
    """``torch.linalg.ldl_factor``: the compact LDL factors and the int32 pivots of every
    matrix, as ``torch.return_types.linalg_ldl_factor``; a failed factorisation fails when
    the value is computed, as torch's (``ldl_factor_ex`` does not).

    Example:
        >>> import dtorch
        >>> dtorch.linalg.ldl_factor(dtorch.tensor([[4.0, 2.0], [2.0, 3.0]])).pivots.tolist()
        [1, 2]
    """
    flag = as_flag(hermitian, "linalg.ldl_factor", "hermitian")
    param = LinalgParam(LinalgKind.LDL_FACTOR_EX, flag=flag, n=bits(True))
    return named("linalg.ldl_factor", "linalg_ldl_factor", param, A, keep=2)


def ldl_factor_ex(A: Tensor, *, hermitian: bool = False, check_errors: bool = False) -> Any:
    """``torch.linalg.ldl_factor_ex``: ``ldl_factor`` with the int32 ``info`` of every
    matrix (0: factorised), as ``torch.return_types.linalg_ldl_factor_ex``.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.ldl_factor_ex(dtorch.tensor([[4.0, 2.0], [2.0, 3.0]])).info.item()
        0
    """
    name = "linalg.ldl_factor_ex"
    flag, check = as_flag(hermitian, name, "hermitian"), as_flag(check_errors, name, "check_errors")
    param = LinalgParam(LinalgKind.LDL_FACTOR_EX, flag=flag, n=bits(check))
    return named(name, "linalg_ldl_factor_ex", param, A)


def ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *, hermitian: bool = False) -> Tensor:
    """``torch.linalg.ldl_solve``: ``X`` with ``A @ X = B`` from ``ldl_factor``'s ``LD`` and
    ``pivots``; the batch dims of ``LD`` and ``B`` broadcast, and ``pivots`` with ``LD``.

    Example:
        >>> import dtorch
        >>> LD, piv = dtorch.linalg.ldl_factor(dtorch.tensor([[2.0, 0.0], [0.0, 4.0]]))
        >>> dtorch.linalg.ldl_solve(LD, piv, dtorch.tensor([[2.0], [2.0]])).tolist()
        [[1.0], [0.5]]
    """
    name = "linalg.ldl_solve"
    for t, what in ((LD, "LD"), (pivots, "pivots"), (B, "B")):
        tensor_arg(name, t, what)
    refuse_other_pivots(name, LD, pivots)
    ld, b = _mx.broadcast_batches(name, LD, B)
    piv = column(pivots)
    if ld.ndim >= 2 and piv.ndim >= 2 and tuple(piv.shape[:-2]) != tuple(ld.shape[:-2]):
        piv = _mx.expanded_batches(piv, tuple(ld.shape[:-2]))  # LD's batch broadcast with B's
    param = LinalgParam(LinalgKind.LDL_SOLVE, flag=as_flag(hermitian, name, "hermitian"))
    return _mx.one_result(name, param, ld, piv, b)
