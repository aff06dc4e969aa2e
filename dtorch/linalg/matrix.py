"""torch.linalg's matrix functions, one Linalg operator each: ``det slogdet inv solve
solve_ex cholesky qr eigh eigvalsh svd svdvals pinv matrix_rank matrix_power matrix_exp``.

Every device runs torch's own function on its own matrices (the rule is
``dtorch.ir.rules.linalg_fn``), so values are torch's. Layouts: the batch dims (all but the last
two) may be sharded and keep their shards; the matrix dims (the last two) must be whole on
every device (redistribute them to Replicate first, or get a PlacementError that says so); a
Partial input is refused (none of these is linear). The results are Replicate elsewhere.
Functions with several results return torch's named tuples holding dtorch tensors.

Example:
    >>> import dtorch
    >>> a = dtorch.tensor([[2.0, 0.0], [0.0, 4.0]])
    >>> dtorch.linalg.det(a).item(), dtorch.linalg.inv(a).tolist()
    (8.0, [[0.5, 0.0], [0.0, 0.25]])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.dims import as_flag, as_int
from dtorch.api.record import record, record_one, tensor_arg
from dtorch.errors import ParamError, PlacementError, ShapeError
from dtorch.ir.opkind import LinalgKind
from dtorch.ir.params import LinalgParam
from dtorch.ir.placement import format_placements
from dtorch.linalg.tolerances import tolerance_call

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def one_result(name: str, param: LinalgParam, *inputs: Tensor) -> Tensor:
    # one result: the Linalg operator of ``param`` on ``inputs``
    for i, t in enumerate(inputs):
        tensor_arg(name, t, f"input {i}")
    return record_one(name, param, inputs)


def _named(name: str, kind: str, param: LinalgParam, a: Tensor) -> Any:
    # several results, as torch's named tuple ``torch.return_types.<kind>``
    tensor_arg(name, a)
    return getattr(torch.return_types, kind)(record(name, param, (a,)))


def det(A: Tensor) -> Tensor:
    """``torch.linalg.det``: the determinant of every matrix (the last two dims).

    Example:
        >>> import dtorch
        >>> dtorch.linalg.det(dtorch.tensor([[1.0, 2.0], [3.0, 4.0]])).item()
        -2.0
    """
    return one_result("linalg.det", LinalgParam(LinalgKind.DET), A)


def slogdet(A: Tensor) -> Any:
    """``torch.linalg.slogdet``: the sign and the log of the absolute determinant of every
    matrix, as ``torch.return_types.linalg_slogdet`` (``.sign``, ``.logabsdet``).

    Example:
        >>> import dtorch
        >>> dtorch.linalg.slogdet(dtorch.tensor([[0.0, 1.0], [1.0, 0.0]])).sign.item()
        -1.0
    """
    return _named("linalg.slogdet", "linalg_slogdet", LinalgParam(LinalgKind.SLOGDET), A)


def logdet(A: Tensor) -> Tensor:
    """``torch.logdet``: the log of the determinant of every matrix (NaN where it is
    negative, -inf where it is 0).

    Example:
        >>> import dtorch
        >>> round(dtorch.logdet(dtorch.tensor([[2.0, 0.0], [0.0, 0.5]])).item(), 6)
        0.0
    """
    return one_result("logdet", LinalgParam(LinalgKind.LOGDET), A)


def inv(A: Tensor) -> Tensor:
    """``torch.linalg.inv``: the inverse of every (square, invertible) matrix; a singular one
    fails when the value is computed, as torch's.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.inv(dtorch.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.25]]
    """
    return one_result("linalg.inv", LinalgParam(LinalgKind.INV), A)


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """``torch.linalg.solve``: ``X`` with ``A @ X = B`` (``left=False``: ``X @ A = B``); a
    ``B`` of one dim fewer than ``A`` shaped ``A.shape[:-1]`` (or 1-D) is a batch of vectors;
    the batch dims broadcast (a broadcast input is expanded first).

    Example:
        >>> import dtorch
        >>> a = dtorch.tensor([[2.0, 0.0], [0.0, 4.0]])
        >>> dtorch.linalg.solve(a, dtorch.tensor([2.0, 2.0])).tolist()
        [1.0, 0.5]
    """
    name = "linalg.solve"
    param = LinalgParam(LinalgKind.SOLVE, flag=as_flag(left, name, "left"))
    return _solve(name, param, A, B)[0]


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> Any:
    """``torch.linalg.solve_ex``: ``solve``'s result and the int32 ``info`` of every matrix
    (0: solved; ``k`` > 0: the matrix is singular, its ``U[k, k]`` zero), as
    ``torch.return_types.linalg_solve_ex``; ``check_errors`` raises where ``info`` is not 0.

    Example:
        >>> import dtorch
        >>> a = dtorch.tensor([[2.0, 0.0], [0.0, 4.0]])
        >>> out = dtorch.linalg.solve_ex(a, dtorch.tensor([2.0, 2.0]))
        >>> out.result.tolist(), out.info.item()
        ([1.0, 0.5], 0)
    """
    name = "linalg.solve_ex"
    flag, check = as_flag(left, name, "left"), as_flag(check_errors, name, "check_errors")
    param = LinalgParam(LinalgKind.SOLVE_EX, n=int(check), flag=flag)
    named = getattr(torch.return_types, "linalg_solve_ex")  # noqa: B009  # missing in the stubs
    result, info = _solve(name, param, A, B)
    return named((result, _unbroadcast(info, tuple(A.shape[:-2]))))


def _unbroadcast(info: Tensor, batch: tuple[int, ...]) -> Tensor:
    """``info`` of the broadcast batch back to ``A``'s own batch, as torch's: every matrix
    ``A`` broadcast along is one matrix, whose info is any copy's."""
    lead = info.ndim - len(batch)
    for _ in range(lead):  # dims B added in front: one copy
        info = info.select(0, 0)
    for d, size in enumerate(batch):
        if info.shape[d] != size:  # a dim of 1 in A, broadcast by B's
            info = info.narrow(d, 0, size)
    return info


def _solve(name: str, param: LinalgParam, A: Tensor, B: Tensor) -> tuple[Tensor, ...]:
    """``solve``'s (``solve_ex``'s) Linalg operator: a vector ``B`` made a matrix and back,
    the batch dims broadcast first; a refusal names the layouts as given."""
    tensor_arg(name, A, "A")
    tensor_arg(name, B, "B")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if vector and not param.flag:
        raise ShapeError(
            f"{name}: Vector broadcasting of the left hand side is not supported for left=False; "
            "accepted: a B of A's number of dims (B / A.squeeze(-1) for 1x1 matrices)"
        )
    b = B.unsqueeze(-1) if vector else B
    a, b = broadcast_batches(name, A, b)
    try:
        x, *info = record(name, param, (a, b))
    except PlacementError as error:
        if a is A and b is B:
            raise
        given = f"{format_placements(A.placements)} x {format_placements(B.placements)}"
        raise PlacementError(f"{error} (as given, before broadcasting: {given})") from None
    return (x.squeeze(-1) if vector else x, *info)


def broadcast_batches(name: str, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    # the batch dims of both inputs expanded to their common shape (torch broadcasts them)
    if a.ndim < 2 or b.ndim < 2:
        return a, b  # the rule refuses with torch's message
    try:
        batch = torch.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except RuntimeError as error:
        raise ParamError(f"{name}: the batch dims do not broadcast: {error}") from None
    return expanded_batches(a, tuple(batch)), expanded_batches(b, tuple(batch))


def expanded_batches(t: Tensor, batch: tuple[int, ...]) -> Tensor:
    return t if tuple(t.shape[:-2]) == batch else t.expand(*batch, *t.shape[-2:])


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """``torch.linalg.cholesky``: the lower (``upper=True``: upper) Cholesky factor of every
    symmetric positive-definite matrix.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.cholesky(dtorch.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
        [[2.0, 0.0], [1.0, 2.0]]
    """
    flag = as_flag(upper, "linalg.cholesky", "upper")
    return one_result("linalg.cholesky", LinalgParam(LinalgKind.CHOLESKY, flag=flag), A)


def qr(A: Tensor, mode: str = "reduced") -> Any:
    """``torch.linalg.qr``: ``Q`` and ``R`` of every matrix, as ``torch.return_types.linalg_qr``;
    ``mode`` 'reduced', 'complete' or 'r' (``Q`` empty).

    Example:
        >>> import dtorch
        >>> dtorch.linalg.qr(dtorch.tensor([[3.0, 0.0], [4.0, 5.0]])).R.abs().tolist()
        [[5.0, 4.0], [0.0, 3.0]]
    """
    if mode not in ("reduced", "complete", "r"):
        raise ParamError(
            f"linalg.qr: received unrecognized mode {mode!r}; accepted: 'reduced' (default), "
            f"'r', or 'complete'"
        )
    return _named("linalg.qr", "linalg_qr", LinalgParam(LinalgKind.QR, mode=mode), A)


def _uplo(name: str, UPLO: Any) -> str:
    # torch takes either case
    if not isinstance(UPLO, str) or UPLO.upper() not in ("L", "U"):
        raise ParamError(f"{name}: UPLO must be 'L' or 'U' (either case), got {UPLO!r}")
    return UPLO.upper()


def eigh(A: Tensor, UPLO: str = "L") -> Any:
    """``torch.linalg.eigh``: the eigenvalues (ascending) and eigenvectors of every symmetric
    (Hermitian) matrix, read from its ``UPLO`` triangle, as ``torch.return_types.linalg_eigh``.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.eigh(dtorch.tensor([[2.0, 1.0], [1.0, 2.0]])).eigenvalues.tolist()
        [1.0, 3.0]
    """
    param = LinalgParam(LinalgKind.EIGH, mode=_uplo("linalg.eigh", UPLO))
    return _named("linalg.eigh", "linalg_eigh", param, A)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """``torch.linalg.eigvalsh``: the eigenvalues (ascending) of every symmetric matrix.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.eigvalsh(dtorch.tensor([[2.0, 0.0], [0.0, 1.0]])).tolist()
        [1.0, 2.0]
    """
    param = LinalgParam(LinalgKind.EIGVALSH, mode=_uplo("linalg.eigvalsh", UPLO))
    return one_result("linalg.eigvalsh", param, A)


def svd(A: Tensor, full_matrices: bool = True) -> Any:
    """``torch.linalg.svd``: ``U``, ``S`` (descending) and ``Vh`` of every matrix, as
    ``torch.return_types.linalg_svd``.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.svd(dtorch.tensor([[3.0, 0.0], [0.0, -4.0]])).S.tolist()
        [4.0, 3.0]
    """
    flag = as_flag(full_matrices, "linalg.svd", "full_matrices")
    return _named("linalg.svd", "linalg_svd", LinalgParam(LinalgKind.SVD, flag=flag), A)


def svdvals(A: Tensor) -> Tensor:
    """``torch.linalg.svdvals``: the singular values (descending) of every matrix.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.svdvals(dtorch.tensor([[3.0, 0.0], [0.0, -4.0]])).tolist()
        [4.0, 3.0]
    """
    return one_result("linalg.svdvals", LinalgParam(LinalgKind.SVDVALS), A)


def pinv(
    A: Tensor, rcond: Any = None, hermitian: bool = False, *, atol: Any = None, rtol: Any = None
) -> Tensor:
    """``torch.linalg.pinv``: the pseudo-inverse of every matrix (``atol``/``rtol``: None, as
    torch's defaults, numbers, or dtorch tensors broadcast against the batch dims, see
    ``dtorch.linalg.tolerances``; torch's older ``rcond`` is ``rtol``).

    Example:
        >>> import dtorch
        >>> dtorch.linalg.pinv(dtorch.tensor([[2.0, 0.0], [0.0, 0.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.0]]
    """
    name = "linalg.pinv"
    atol, rtol = _older("rcond", rcond, atol, rtol, (0.0, rcond), name)
    param, inputs = tolerance_call(name, LinalgKind.PINV, A, atol, rtol, hermitian)
    return one_result(name, param, *inputs)


def _older(
    arg: str, value: Any, atol: Any, rtol: Any, instead: tuple[Any, Any], name: str
) -> tuple[Any, Any]:
    # torch's older tolerance argument (pinv's rcond, matrix_rank's tol) as (atol, rtol); it
    # takes neither of the newer ones beside it (torch finds no overload: a TypeError)
    if value is None:
        return atol, rtol
    if atol is not None or rtol is not None:
        raise TypeError(f"{name}: {arg} is torch's older form of the tolerances: give it or "
                        f"atol/rtol, not both")  # fmt: skip
    return instead


def matrix_rank(
    A: Tensor, tol: Any = None, hermitian: bool = False, *, atol: Any = None, rtol: Any = None
) -> Tensor:
    """``torch.linalg.matrix_rank``: the numerical rank of every matrix (int64); ``atol`` and
    ``rtol`` as ``pinv``'s; torch's older ``tol`` is ``atol`` with ``rtol=0``.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.matrix_rank(dtorch.tensor([[1.0, 2.0], [2.0, 4.0]])).item()
        1
    """
    name = "linalg.matrix_rank"
    atol, rtol = _older("tol", tol, atol, rtol, (tol, 0.0), name)
    param, inputs = tolerance_call(name, LinalgKind.MATRIX_RANK, A, atol, rtol, hermitian)
    return one_result(name, param, *inputs)


_LEAST_INT64 = -(2**63)


def matrix_power(A: Tensor, n: int) -> Tensor:
    """``torch.linalg.matrix_power``: every square matrix to the integer power ``n`` (0: the
    identity; negative: of the inverse, floating matrices only).

    Example:
        >>> import dtorch
        >>> dtorch.linalg.matrix_power(dtorch.tensor([[1, 1], [0, 1]]), 3).tolist()
        [[1, 3], [0, 1]]
    """
    power = as_int("linalg.matrix_power", "n", n)
    if power == _LEAST_INT64:  # torch negates n for the inverse's power: it loops forever
        raise ParamError(
            f"linalg.matrix_power: n={power} has no negation in int64 (torch never returns); "
            f"accepted: {_LEAST_INT64 + 1} <= n <= {-(_LEAST_INT64 + 1)}"
        )
    return one_result("linalg.matrix_power", LinalgParam(LinalgKind.MATRIX_POWER, n=power), A)


def matrix_exp(A: Tensor) -> Tensor:
    """``torch.linalg.matrix_exp``: the matrix exponential of every square matrix.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.matrix_exp(dtorch.zeros(2, 2)).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    return one_result("linalg.matrix_exp", LinalgParam(LinalgKind.MATRIX_EXP), A)
