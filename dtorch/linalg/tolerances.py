"""The tolerances of ``linalg.pinv`` and ``linalg.matrix_rank`` (and the ``rcond`` of
``pinverse`` and ``lstsq``): Python numbers, held by the operator's param, or - pinv's and
matrix_rank's ``atol``/``rtol`` - dtorch tensors, one tolerance per matrix.

A tensor tolerance broadcasts against ``A``'s batch shape (``A.shape[:-2]``), as torch's
does; both become inputs of the Linalg operator, expanded to the common batch shape (a
tolerance as ``(*batch, 1, 1)``: each device then holds the tolerances of its own matrices).
It must lie on ``A``'s mesh, be real, and on each mesh dim be Replicate or sharded like the
batch dim of ``A`` it lines up with (from the right); bits 0 and 1 of the param's ``n`` say
which of ``atol`` and ``rtol`` are inputs (``dtorch.ir.rules.linalg_fn`` reads them back). A
number beside a tensor is taken too (torch refuses that mix): it counts as torch's number
forms do, a float64 tolerance for every matrix. A 0-d torch tensor is a number, as in
torch's argument parsing; any other torch tensor is refused (convert it with
``dtorch.from_torch`` on ``A``'s mesh).

Example:
    >>> import dtorch
    >>> a = dtorch.tensor([[[1.0, 0.0], [0.0, 0.1]], [[1.0, 0.0], [0.0, 0.1]]])
    >>> dtorch.linalg.matrix_rank(a, atol=dtorch.tensor([0.05, 0.5])).tolist()
    [2, 1]
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.dims import as_flag
from dtorch.api.ops.scalars import python_number
from dtorch.api.record import is_handle, tensor_arg
from dtorch.errors import DtypeError, PlacementError, ShapeError
from dtorch.ir.opkind import LinalgKind
from dtorch.ir.params import LinalgParam
from dtorch.ir.placement import Replicate, Shard, format_placements
from dtorch.ir.rules.registry import raise_meshes

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

#: The bit of LinalgParam.n that says a tolerance is an input (the kernel reads the same).
TENSOR_BITS = {"atol": 1, "rtol": 2}


def checked_tolerance(
    name: str, arg: str, value: Any, accepted: str = "None or a float"
) -> float | None:
    """A tolerance given as a number: None, a real number, or a 0-d torch tensor (torch
    reads one as a number); anything else is a TypeError saying what ``accepted`` is."""
    if isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_complex():
        value = python_number(value)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: {arg} must be {accepted}, got {_kind(value)}")
    return float(value)


def _kind(value: Any) -> str:
    # what a refused tolerance is, saying whose tensor it is
    if isinstance(value, torch.Tensor):
        return f"a torch.Tensor of shape {list(value.shape)} (dtorch.from_torch makes it one)"
    return "a dtorch.Tensor" if is_handle(value) else type(value).__name__


def tolerance_call(
    name: str, kind: LinalgKind, A: Tensor, atol: Any, rtol: Any, hermitian: Any
) -> tuple[LinalgParam, tuple[Tensor, ...]]:
    """The param and the inputs of pinv's or matrix_rank's Linalg operator: ``A`` alone, or
    ``A`` and the tensor tolerances, all expanded to one batch shape."""
    tensor_arg(name, A, "A")
    given = {"atol": atol, "rtol": rtol}
    tensors = {arg: t for arg, t in given.items() if is_handle(t)}
    accepted = "None, a float or a dtorch tensor on A's mesh"
    floats = {arg: checked_tolerance(name, arg, v, accepted) for arg, v in given.items()
              if arg not in tensors}  # fmt: skip
    param = LinalgParam(
        kind,
        n=sum(TENSOR_BITS[arg] for arg in tensors),
        flag=as_flag(hermitian, name, "hermitian"),
        atol=floats.get("atol"),
        rtol=floats.get("rtol"),
    )
    if not tensors or A.ndim < 2:  # the rule refuses a matrix of fewer dims
        return param, (A,)
    batch = _batch(name, A, tensors)
    for arg, t in tensors.items():
        _check_tensor(name, arg, A, t)
    a = A if tuple(A.shape[:-2]) == batch else A.expand(*batch, *A.shape[-2:])
    return param, (a, *(_as_matrices(t, batch) for t in tensors.values()))


def _check_tensor(name: str, arg: str, A: Tensor, t: Tensor) -> None:
    # a tolerance tensor: on A's mesh, real, placed so that each device holds its matrices'
    if t.device_mesh != A.device_mesh:
        raise_meshes(name, (A._operand, t._operand))
    if t.dtype.is_complex:  # torch's refusal, when the value is computed
        raise DtypeError(
            f"{name}: {arg} tensor of complex type is not supported, got {t.dtype}; "
            f"accepted: a real (floating, integer or bool) tensor"
        )
    for m, p in enumerate(t.placements):
        if not (isinstance(p, Replicate) or _lines_up(A, t, m)):
            raise PlacementError(
                f"{name}: {arg} {format_placements(t.placements)} of shape {list(t.shape)} "
                f"does not fit A {format_placements(A.placements)} of shape "
                f"{list(A.shape)} on mesh dim {m}; accepted on each mesh dim: R, or S(d) "
                f"of the dim that lines up (from the right) with a batch dim of A that A "
                f"shards there, of the same size. Redistribute {arg} to Replicate first"
            )


def _lines_up(A: Tensor, t: Tensor, m: int) -> bool:
    # whether t's shard on mesh dim m splits the batch dim of A that A splits there
    p = t.placements[m]
    if not isinstance(p, Shard):
        return False
    k = p.dim + (A.ndim - 2) - t.ndim  # A's batch dim that t's dim broadcasts against
    return k >= 0 and A.placements[m] == Shard(k) and A.shape[k] == t.shape[p.dim]


def _batch(name: str, A: Tensor, tensors: dict[str, Tensor]) -> tuple[int, ...]:
    # the batch shape of the result: A's broadcast with the tolerances' shapes, as torch's
    try:
        return tuple(
            torch.broadcast_shapes(tuple(A.shape[:-2]), *(t.shape for t in tensors.values()))
        )
    except RuntimeError:
        shapes = ", ".join(f"{arg} {list(t.shape)}" for arg, t in tensors.items())
        raise ShapeError(
            f"{name}: the tolerances ({shapes}) do not broadcast against A's batch shape "
            f"{list(A.shape[:-2])}; accepted: shapes that broadcast with it (torch's rule), "
            f"such as () or the batch shape"
        ) from None


def _as_matrices(t: Tensor, batch: tuple[int, ...]) -> Tensor:
    # a tolerance as a batch of 1x1 matrices: the Linalg rule's inputs are all matrices
    whole = t if tuple(t.shape) == batch else t.expand(*batch)
    return whole.unsqueeze(-1).unsqueeze(-1)
