"""``dtorch.linalg``: torch.linalg's functions on dtorch tensors.

The matrix functions (``det slogdet inv solve solve_ex cholesky qr eigh eigvalsh svd svdvals
pinv matrix_rank matrix_power matrix_exp``, ``lu_factor lu_factor_ex lu lu_solve
solve_triangular inv_ex cholesky_ex householder_product cond eig eigvals`` of
``dtorch.linalg.more`` and ``ldl_factor ldl_factor_ex ldl_solve`` of ``dtorch.linalg.ldl``)
run torch's own function on each device's whole
matrices: the batch dims (all but the last two) may be sharded and keep their shards, the
matrix dims must be whole on every device (a PlacementError says to redistribute them), a
Partial input is refused. The norms (``vector_norm matrix_norm norm``) and products
(``matmul multi_dot vecdot cross diagonal``) are compositions of dtorch operators.

Example:
    >>> import dtorch
    >>> a = dtorch.tensor([[4.0, 2.0], [2.0, 5.0]])
    >>> dtorch.linalg.det(a).item(), dtorch.linalg.norm(a).item()
    (16.0, 7.0)
"""

from __future__ import annotations

from dtorch.linalg.ldl import ldl_factor, ldl_factor_ex, ldl_solve
from dtorch.linalg.matrix import (
    cholesky,
    det,
    eigh,
    eigvalsh,
    inv,
    matrix_exp,
    matrix_power,
    matrix_rank,
    pinv,
    qr,
    slogdet,
    solve,
    solve_ex,
    svd,
    svdvals,
)
from dtorch.linalg.more import (
    cholesky_ex,
    cond,
    eig,
    eigvals,
    householder_product,
    inv_ex,
    lstsq,
    lu,
    lu_factor,
    lu_factor_ex,
    lu_solve,
    solve_triangular,
    tensorinv,
    tensorsolve,
    vander,
)
from dtorch.linalg.norms import matrix_norm, norm, vector_norm
from dtorch.linalg.products import cross, diagonal, matmul, multi_dot, vecdot

__all__ = [
    "cholesky",
    "cholesky_ex",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "householder_product",
    "inv",
    "inv_ex",
    "lstsq",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "ldl_factor",
    "ldl_factor_ex",
    "ldl_solve",
    "matmul",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensorinv",
    "tensorsolve",
    "vander",
    "vecdot",
    "vector_norm",
]
