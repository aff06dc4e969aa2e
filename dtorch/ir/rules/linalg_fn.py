"""Rule of Linalg: torch.linalg's matrix functions (``det``, ``slogdet``, ``inv``, ``solve``,
``cholesky``, ``qr``, ``eigh``, ``eigvalsh``, ``svd``, ``svdvals``, ``pinv``, ``matrix_rank``,
``matrix_power``, ``matrix_exp``) and ``torch.logdet``, on every matrix of a batch.

Each matrix is the last two dims of an input; it must be whole on every device (a factor, an
inverse or a determinant of a block is not a block of the full one), so those dims may not be
sharded and a Partial input is refused (none of these functions is linear). The batch dims (all
the others) keep their shards: each device runs torch's function on its own matrices. Two-input
functions (``solve``) take equal batch shapes (the API broadcasts them first). Shapes and dtypes
of the results are torch's own, found by running the function on meta tensors; the dtypes that
torch's CPU kernels refuse (half, integers) are learned by running it once on a 1x1 matrix.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.opkind import LinalgKind
    >>> from dtorch.ir.params import LinalgParam
    >>> from dtorch.ir.placement import Shard
    >>> x = Operand(1, (4, 3, 3), torch.float32, init_device_mesh("cpu", 2), (Shard(0),))
    >>> out = linalg_rule("slogdet", LinalgParam(LinalgKind.SLOGDET), (x,))
    >>> [(o.shape, o.dtype, o.placements) for o in out.outputs]
    [((4,), torch.float32, (Shard(dim=0),)), ((4,), torch.float32, (Shard(dim=0),))]
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from dtorch.errors import DtypeError, ShapeError, UnsupportedDtypeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import LinalgKind, OpKind
from dtorch.ir.params import LinalgParam, OpParam
from dtorch.ir.placement import Replicate
from dtorch.ir.rules.base import Inference, OutputMeta, Rule, all_replicate
from dtorch.ir.rules.signature import Labels, expand, identity, signature

_ONE = signature(
    "R -> R", "Si -> Si", legend="i: a batch dim (any but the last two, the matrix dims)",
    hint="redistribute the matrix dims (the last two) to Replicate first: each matrix must be "
    "whole on every device, and a Partial input is refused (the function is not linear)",
)  # fmt: skip
_TWO = signature(
    "R R -> R", "Si Si -> Si", "Si R -> Si", "R Si -> Si",
    legend="i: a batch dim (any but the last two, the matrix dims)",
    hint="redistribute the matrix dims (the last two) to Replicate first: each matrix must be "
    "whole on every device, and a Partial input is refused (the function is not linear)",
)  # fmt: skip
_THREE = signature(  # lu_solve, ormqr: a batch dim sharded by some inputs, the others R
    "R R R -> R", "Si Si Si -> Si", "Si R R -> Si", "R Si R -> Si", "R R Si -> Si",
    "Si Si R -> Si", "Si R Si -> Si", "R Si Si -> Si",
    legend="i: a batch dim (any but the last two, the matrix dims)",
    hint="redistribute the matrix dims (the last two) to Replicate first: each matrix must be "
    "whole on every device, and a Partial input is refused (the function is not linear)",
)  # fmt: skip
_SIGS = {1: _ONE, 2: _TWO, 3: _THREE}

Tensors = tuple[torch.Tensor, ...]
LinalgFn = Callable[[Sequence[torch.Tensor], LinalgParam], Tensors]


def _tuple(value: torch.Tensor | Sequence[torch.Tensor]) -> Tensors:
    # torch returns one tensor or a named tuple; the kernels hand on a plain tuple
    return (value,) if isinstance(value, torch.Tensor) else tuple(value)


def _bit(param: LinalgParam, i: int) -> bool:
    # the extra flags of lu_solve, solve_triangular, ...: packed in ``n`` (dtorch.linalg.more.bits)
    return bool(param.n >> i & 1)


def _order(param: LinalgParam) -> float | str | None:
    # cond's ``p``: a str in ``mode``, a number in ``atol``, or None (both empty)
    return param.mode or param.atol


def _tolerances(a: Sequence[torch.Tensor], p: LinalgParam) -> dict[str, Any]:
    """pinv's and matrix_rank's ``atol`` and ``rtol``: the inputs after the matrix where bits
    0 and 1 of ``n`` say so (``(*batch, 1, 1)``: dtorch.linalg.tolerances), else the param's
    numbers. Beside a tensor a number is a float64 0-d tensor, as torch makes of its number
    forms (torch's own arguments take no mix)."""
    given = iter(a[1:])
    atol = next(given)[..., 0, 0] if _bit(p, 0) else p.atol
    rtol = next(given)[..., 0, 0] if _bit(p, 1) else p.rtol
    if p.n:
        atol, rtol = (_as_tensor(x, a[0]) for x in (atol, rtol))
    return {"atol": atol, "rtol": rtol}


def _as_tensor(value: torch.Tensor | float | None, like: torch.Tensor) -> torch.Tensor | None:
    # a number tolerance as torch holds one: float64, on the matrix's device (meta included)
    if value is None or isinstance(value, torch.Tensor):
        return value
    return like.new_full((), value, dtype=torch.float64)


def _geqrf(a: torch.Tensor) -> Tensors:
    # torch has no meta kernel of geqrf: its shapes are (a's, a's batch + min(m, n))
    if a.is_meta:
        return torch.empty_like(a), a.new_empty((*a.shape[:-2], min(a.shape[-2:])))
    return _tuple(torch.geqrf(a))


def _eigvals(a: torch.Tensor) -> torch.Tensor:
    """torch's ``eigvals`` after the check its ``eig`` makes: without it, LAPACK (MKL) given
    a NaN or an infinity crashes the process (a SIGSEGV in torch 2.13), not just the call."""
    if a.device.type != "meta" and not bool(torch.isfinite(a).all()):
        raise RuntimeError("linalg.eigvals: input tensor should not contain infs or NaNs.")
    return torch.linalg.eigvals(a)


#: torch's function of each kind: ``(inputs, param) -> outputs``.
LINALG: dict[LinalgKind, LinalgFn] = {
    LinalgKind.DET: lambda a, p: _tuple(torch.linalg.det(a[0])),
    LinalgKind.SLOGDET: lambda a, p: _tuple(torch.linalg.slogdet(a[0])),
    LinalgKind.LOGDET: lambda a, p: _tuple(torch.logdet(a[0])),
    LinalgKind.INV: lambda a, p: _tuple(torch.linalg.inv(a[0])),
    LinalgKind.SOLVE: lambda a, p: _tuple(torch.linalg.solve(a[0], a[1], left=p.flag)),
    LinalgKind.SOLVE_EX: lambda a, p: _tuple(
        torch.linalg.solve_ex(a[0], a[1], left=p.flag, check_errors=_bit(p, 0))
    ),
    LinalgKind.CHOLESKY: lambda a, p: _tuple(torch.linalg.cholesky(a[0], upper=p.flag)),
    LinalgKind.QR: lambda a, p: _tuple(torch.linalg.qr(a[0], mode=p.mode)),
    LinalgKind.EIGH: lambda a, p: _tuple(torch.linalg.eigh(a[0], UPLO=p.mode)),
    LinalgKind.EIGVALSH: lambda a, p: _tuple(torch.linalg.eigvalsh(a[0], UPLO=p.mode)),
    LinalgKind.SVD: lambda a, p: _tuple(torch.linalg.svd(a[0], full_matrices=p.flag)),
    LinalgKind.SVDVALS: lambda a, p: _tuple(torch.linalg.svdvals(a[0])),
    LinalgKind.PINV: lambda a, p: _tuple(
        torch.linalg.pinv(a[0], **_tolerances(a, p), hermitian=p.flag)
    ),
    LinalgKind.MATRIX_RANK: lambda a, p: _tuple(
        torch.linalg.matrix_rank(a[0], **_tolerances(a, p), hermitian=p.flag)
    ),
    LinalgKind.MATRIX_POWER: lambda a, p: _tuple(torch.linalg.matrix_power(a[0], p.n)),
    LinalgKind.MATRIX_EXP: lambda a, p: _tuple(torch.linalg.matrix_exp(a[0])),
    LinalgKind.CHOLESKY_INVERSE: lambda a, p: _tuple(torch.cholesky_inverse(a[0], upper=p.flag)),
    LinalgKind.CHOLESKY_SOLVE: lambda a, p: _tuple(torch.cholesky_solve(a[0], a[1], p.flag)),
    LinalgKind.SVD_OLD: lambda a, p: _tuple(torch.svd(a[0], p.flag, _bit(p, 0))),
    LinalgKind.LU_FACTOR_EX: lambda a, p: _tuple(
        torch.linalg.lu_factor_ex(a[0], pivot=p.flag, check_errors=_bit(p, 0))
    ),
    LinalgKind.LU: lambda a, p: _tuple(torch.linalg.lu(a[0], pivot=p.flag)),
    LinalgKind.LU_UNPACK: lambda a, p: _tuple(
        torch.lu_unpack(a[0], a[1].squeeze(-1), _bit(p, 0), _bit(p, 1))
    ),
    LinalgKind.LU_SOLVE: lambda a, p: _tuple(
        torch.linalg.lu_solve(a[0], a[1].squeeze(-1), a[2], left=_bit(p, 0), adjoint=_bit(p, 1))
    ),
    LinalgKind.SOLVE_TRIANGULAR: lambda a, p: _tuple(
        torch.linalg.solve_triangular(
            a[0], a[1], upper=_bit(p, 0), left=_bit(p, 1), unitriangular=_bit(p, 2)
        )
    ),
    LinalgKind.TRIANGULAR_SOLVE: lambda a, p: _tuple(
        torch.triangular_solve(a[0], a[1], _bit(p, 0), _bit(p, 1), _bit(p, 2))
    ),
    LinalgKind.INV_EX: lambda a, p: _tuple(torch.linalg.inv_ex(a[0], check_errors=p.flag)),
    LinalgKind.CHOLESKY_EX: lambda a, p: _tuple(
        torch.linalg.cholesky_ex(a[0], upper=p.flag, check_errors=_bit(p, 0))
    ),
    LinalgKind.HOUSEHOLDER_PRODUCT: lambda a, p: _tuple(
        torch.linalg.householder_product(a[0], a[1].squeeze(-1))
    ),
    LinalgKind.GEQRF: lambda a, p: _geqrf(a[0]),
    LinalgKind.ORMQR: lambda a, p: _tuple(
        torch.ormqr(a[0], a[1].squeeze(-1), a[2], _bit(p, 0), _bit(p, 1))
    ),
    LinalgKind.COND: lambda a, p: _tuple(torch.linalg.cond(a[0], _order(p))),
    LinalgKind.EIG: lambda a, p: _tuple(torch.linalg.eig(a[0])),
    LinalgKind.EIGVALS: lambda a, p: _tuple(_eigvals(a[0])),
    LinalgKind.LDL_FACTOR_EX: lambda a, p: _tuple(
        torch.linalg.ldl_factor_ex(a[0], hermitian=p.flag, check_errors=_bit(p, 0))
    ),
    LinalgKind.LDL_SOLVE: lambda a, p: _tuple(
        torch.linalg.ldl_solve(a[0], a[1].squeeze(-1), a[2], hermitian=p.flag)
    ),
}


def run_linalg(param: LinalgParam, inputs: Sequence[torch.Tensor]) -> Tensors:
    """torch's function of ``param`` on ``inputs`` (local blocks, or meta tensors)."""
    return LINALG[param.fn](inputs, param)


@functools.cache
def _refusal(param: LinalgParam, dtypes: tuple[torch.dtype, ...]) -> tuple[str, bool]:
    """torch's message when its CPU kernel refuses these dtypes for ``param`` ('' if it
    takes them), and whether torch said "not implemented" (no kernel for the dtype)."""
    try:
        run_linalg(param, [torch.ones(1, 1, dtype=d) for d in dtypes])
    except (RuntimeError, TypeError) as error:
        return str(error).strip().split("\n", 1)[0], isinstance(error, NotImplementedError)
    return "", False


def _metas(name: str, param: LinalgParam, inputs: Sequence[Operand]) -> Tensors:
    """The outputs' shapes and dtypes: torch's function on meta tensors (its own checks)."""
    for x in inputs:
        if x.ndim < 2:
            raise ShapeError(
                f"{name}: the input must have at least 2 dimensions (a matrix or a batch of "
                f"them), got shape {list(x.shape)}"
            )
    message, missing = _refusal(param, tuple(x.dtype for x in inputs))
    if message:
        error = UnsupportedDtypeError if missing else DtypeError
        raise error(f"{name}: {message}; accepted: float32, float64 (and complex)")
    metas = [torch.empty(x.shape, dtype=x.dtype, device="meta") for x in inputs]
    try:
        return run_linalg(param, metas)
    except (RuntimeError, ValueError) as error:  # torch's shape checks
        raise ShapeError(f"{name}: {str(error).strip()}") from None


def _keeps(batch: tuple[int, ...], out: torch.Tensor) -> bool:
    # whether an output has the batch dims (qr's mode="r" Q is an empty (0,): it has not)
    return out.ndim >= len(batch) and tuple(out.shape[: len(batch)]) == batch


def _out_labels(batch: tuple[int, ...], out: torch.Tensor) -> Labels:
    # batch dims keep their labels; the matrix dims get new ones
    return tuple(d if d < len(batch) else -1 - d for d in range(out.ndim))


def linalg_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """torch.linalg's ``param.fn`` on every matrix: batch shards kept, matrix dims whole."""
    assert isinstance(param, LinalgParam)
    outs = _metas(name, param, inputs)
    if all_replicate(inputs):  # every output Replicate, as every input
        rep = inputs[0].placements
        return Inference(tuple(OutputMeta(tuple(o.shape), o.dtype, rep) for o in outs))
    batch = tuple(inputs[0].shape[:-2])
    if any(tuple(x.shape[:-2]) != batch for x in inputs):
        raise ShapeError(f"{name}: the inputs' batch shapes differ: {[x.shape for x in inputs]}")
    in_labels = tuple(_in_labels(len(batch), i) for i in range(len(inputs)))
    kept = [o for o in outs if _keeps(batch, o)]
    sig = _SIGS[len(inputs)]
    expansion = expand(name, sig, inputs, in_labels, tuple(_out_labels(batch, o) for o in kept))
    placed = iter(expansion.outputs)
    whole = tuple(Replicate() for _ in inputs[0].placements)  # the same (empty) value everywhere
    metas = [(o, next(placed) if _keeps(batch, o) else whole) for o in outs]
    return Inference(
        tuple(OutputMeta(tuple(o.shape), o.dtype, p) for o, p in metas), expansion.requested
    )


def _in_labels(nb: int, i: int) -> Labels:
    # batch dims shared by every input; each input's matrix dims its own (never kept)
    return (*identity(nb), 1000 + 2 * i, 1001 + 2 * i)


RULES: dict[OpKind, Rule] = {OpKind.Linalg: linalg_rule}
