"""torch.linalg's norms: ``vector_norm``, ``matrix_norm`` and ``norm``, as compositions.

``vector_norm`` is ``dtorch.norm``'s vector norm (sharded reduced dims are all-reduced there);
the matrix norms 'fro', 1, -1, inf and -inf are sums and extremes of magnitudes over the two
matrix dims (a sharded summed dim is all-reduced before the extreme is taken); 'nuc', 2 and
-2 are sums and extremes of the singular values (``dtorch.linalg.svdvals``: the matrix dims
must then be whole on every device).

Example:
    >>> import dtorch
    >>> a = dtorch.tensor([[1.0, -2.0], [3.0, 4.0]])
    >>> dtorch.linalg.matrix_norm(a, 1).item(), dtorch.linalg.vector_norm(a, 1).item()
    (6.0, 10.0)
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.dims import as_flag, normalize_dim, normalize_dims
from dtorch.api.ops import statistics as _st
from dtorch.api.record import composite, tensor_arg
from dtorch.api.redistribute import sum_partials
from dtorch.errors import DtypeError, ParamError, ShapeError
from dtorch.ir.dtypes import as_dtype, scalar_type_name
from dtorch.linalg.matrix import svdvals

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def _number(name: str, ord: Any) -> float:
    # a vector norm's order: a real number (torch refuses a string with a TypeError)
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real):
        raise TypeError(f"{name}: ord must be a number (inf, -inf, 0 or any real), got {ord!r}")
    return float(ord)


@composite("linalg.vector_norm")
def vector_norm(
    x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,
    dtype: torch.dtype | None = None,
) -> Tensor:  # fmt: skip
    """``torch.linalg.vector_norm``: the ``ord``-norm over ``dim`` (None: every element) of a
    floating tensor; ``dtype`` computes (and returns) in that floating dtype.

    Example:
        >>> import dtorch
        >>> dtorch.linalg.vector_norm(dtorch.tensor([[3.0, 4.0], [0.0, 0.0]]), dim=1).tolist()
        [5.0, 0.0]
    """
    order = _number("linalg.vector_norm", ord)
    tensor_arg("linalg.vector_norm", x)
    if dtype is not None:
        dtype = _floating("linalg.vector_norm", dtype, x.dtype)
    return _st.norm(x, order, dim, keepdim, dtype)


def _floating(name: str, dtype: Any, input_dtype: torch.dtype) -> torch.dtype:
    # the dtype= of a norm: floating or complex, complex exactly where the input is (torch's)
    dtype = as_dtype(name, dtype)
    if not (dtype.is_floating_point or dtype.is_complex):
        raise DtypeError(f"{name}: dtype should be floating point or complex, but got {dtype}")
    if input_dtype.is_complex != dtype.is_complex:
        kind = "complex for complex" if input_dtype.is_complex else "real for real"
        raise DtypeError(
            f"{name}: dtype should be {kind} inputs, but got {scalar_type_name(dtype)}"
        )
    return dtype


def _check_input(name: str, a: Tensor, dtype: Any) -> torch.dtype | None:
    # torch's refusals of a matrix norm's input: not floating, or narrowed by ``dtype``; the
    # dtype to compute in (None: the input's)
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        raise DtypeError(
            f"{name}: Expected a floating point or complex tensor as input. Got {a.dtype}"
        )
    wanted = None if dtype is None else _floating(name, dtype, a.dtype)
    if wanted is not None and torch.promote_types(a.dtype, wanted) != wanted:
        raise DtypeError(
            f"{name}: the dtype of the input ({a.dtype}) should be convertible without "
            f"narrowing to the specified dtype ({wanted})"
        )
    return wanted


def _matrix_dims(name: str, a: Tensor, dim: Any) -> tuple[int, int]:
    # the two matrix dims, normalised and different
    if a.ndim < 2:
        raise ShapeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise ParamError(f"{name}: dim must be a 2-tuple of ints, got {dim!r}")
    d0, d1 = (normalize_dim(d, a.ndim, op=name) for d in dim)
    if d0 == d1:
        raise ParamError(f"{name}: dims must be different, got {tuple(dim)}")
    return d0, d1


@composite("linalg.matrix_norm")
def matrix_norm(
    A: Tensor, ord: Any = "fro", dim: Any = (-2, -1), keepdim: bool = False, *,
    dtype: torch.dtype | None = None,
) -> Tensor:  # fmt: skip
    """``torch.linalg.matrix_norm`` over the two dims ``dim``: ``ord`` 'fro', 'nuc', 1, -1
    (largest/smallest column sum of magnitudes), inf, -inf (row sums), 2, -2 (largest/smallest
    singular value). 'nuc', 2 and -2 need the matrix dims whole on every device.

    Example:
        >>> import dtorch
        >>> a = dtorch.tensor([[1.0, -2.0], [3.0, 4.0]])
        >>> dtorch.linalg.matrix_norm(a, float("inf")).item()
        7.0
    """
    name = "linalg.matrix_norm"
    tensor_arg(name, A)
    dims = _matrix_dims(name, A, dim)
    keep = as_flag(keepdim, name, "keepdim")
    wanted = _check_input(name, A, dtype)
    if isinstance(ord, str) and ord == "fro":
        return vector_norm(A, 2, dims, keep, dtype=dtype)
    if wanted is not None:  # torch computes in dtype: the input cast first
        A = A.to(wanted)
    empty = 0 in (A.shape[d] for d in dims)
    if empty and ord in (2, 1, math.inf, "nuc"):
        return A.abs().sum(dims, keepdim=keep)  # torch's 0 for every empty matrix (its
        # negative orders take a minimum over the empty dim and raise, as they do here)
    if ord in _BY_SINGULAR_VALUES:
        return _by_singular_values(A, _BY_SINGULAR_VALUES[ord], dims, keep)
    if ord in _BY_SUMS:
        return _by_sums(A, ord, dims, keep)
    raise ParamError(
        f"{name}: Order {ord} not supported; accepted: 'fro', 'nuc', inf, -inf, 1, -1, 2, -2"
    )


#: The orders read from the singular values: the reduction combining them (over the last dim).
_BY_SINGULAR_VALUES: dict[Any, str] = {"nuc": "sum", 2: "amax", -2: "amin"}
#: The orders read from sums of magnitudes: (the dim summed, the extreme) as indexes of dims.
_BY_SUMS: dict[Any, tuple[int, str]] = {
    1: (0, "amax"),
    -1: (0, "amin"),
    math.inf: (1, "amax"),
    -math.inf: (1, "amin"),
}


def _by_singular_values(a: Tensor, combine: str, dims: tuple[int, int], keep: bool) -> Tensor:
    # the singular values of the matrices moved last, combined, the dims put back if kept
    out: Tensor = getattr(svdvals(a.movedim(dims, (-2, -1))), combine)(-1)
    for d in sorted(dims) if keep else ():
        out = out.unsqueeze(d)
    return out


def _by_sums(a: Tensor, ord: Any, dims: tuple[int, int], keep: bool) -> Tensor:
    # the extreme over one matrix dim of the magnitudes summed over the other
    summed, extreme = _BY_SUMS[ord]
    other = dims[1 - summed]
    sums = sum_partials(a.abs().sum(dims[summed], keepdim=True))  # a sharded sum: all-reduced
    out = getattr(sums, extreme)(other, keepdim=True)
    return out if keep else out.squeeze(dims)


@composite("linalg.norm")
def norm(
    A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *,
    dtype: torch.dtype | None = None,
) -> Tensor:  # fmt: skip
    """``torch.linalg.norm``: a vector norm over one dim (or every element when ``ord`` and
    ``dim`` are None), a matrix norm over two dims (or of a 2-D input when ``dim`` is None).

    Example:
        >>> import dtorch
        >>> a = dtorch.tensor([[3.0, 0.0], [0.0, 4.0]])
        >>> dtorch.linalg.norm(a).item(), dtorch.linalg.norm(a, 2).item()
        (5.0, 4.0)
    """
    name = "linalg.norm"
    tensor_arg(name, A)
    if isinstance(dim, int):
        dim = (dim,)
    if dim is None and ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if dim is None:
        if A.ndim not in (1, 2):
            raise ShapeError(
                f"{name}: If dim is not specified but ord is, the input must be 1D or 2D. "
                f"Got {A.ndim}D."
            )
        dim = tuple(range(A.ndim))
    normalize_dims(dim, A.ndim)
    if len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if len(dim) == 1 and isinstance(ord, str):  # torch: a RuntimeError, as a ParamError is
        raise ParamError(f"{name}: ord={ord!r} is a matrix norm: dim must be a 2-tuple, got {dim}")
    if len(dim) == 1:
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    raise ParamError(f"{name}: dim must be an int or a tuple of 1 or 2 ints, got {dim!r}")
