"""``dtorch.special``: torch.special's functions on dtorch tensors, under torch.special's
names: ``torch.special.expit(t)`` on a dtorch tensor runs ``dtorch.special.expit``, which is
``dtorch.sigmoid`` (``dtorch.api.torch_function`` pairs the two namespaces by name).

Here: the aliases of dtorch's own functions (``expit`` = ``sigmoid``, ``gammaln`` =
``lgamma``, ``psi`` = ``digamma``, ``multigammaln`` = ``mvlgamma``), the functions of the
same name (``erf erfc erfinv exp2 expm1 log1p logit sinc round i0 digamma polygamma xlogy
logsumexp softmax log_softmax``), each with its placement rules, and every other function of
torch.special, each one operator running torch's kernel on every shard (torch's values bit for
bit), Shard and Replicate kept (two tensors broadcast as in ``add``), a Partial refused (none
is linear):

- of one tensor: ``entr ndtr ndtri log_ndtr i0e i1 i1e erfcx``, the Bessel functions
  ``bessel_j0 bessel_j1 bessel_y0 bessel_y1 modified_bessel_i0 modified_bessel_i1
  modified_bessel_k0 modified_bessel_k1 scaled_modified_bessel_k0 scaled_modified_bessel_k1
  spherical_bessel_j0`` and ``airy_ai``;
- of two: ``zeta``, ``xlog1py``, ``gammainc`` and ``gammaincc`` (also ``dtorch.igamma`` and
  ``dtorch.igammac``, as in torch; tensors only, as torch's), and the polynomials
  ``chebyshev_polynomial_t/u/v/w``, ``shifted_chebyshev_polynomial_t/u/v/w``,
  ``hermite_polynomial_h/he``, ``laguerre_polynomial_l`` and ``legendre_polynomial_p`` of
  ``(input, n)``.

Example:
    >>> import torch, dtorch
    >>> t = dtorch.tensor([0.0, 2.0])
    >>> torch.special.expit(t).tolist() == dtorch.sigmoid(t).tolist()
    True
"""

from __future__ import annotations

from typing import Any

from dtorch.api.ops import methods as _mk
from dtorch.api.ops.composite import xlogy
from dtorch.api.ops.elementwise import binary, sigmoid
from dtorch.api.ops.math_extra import mvlgamma, polygamma
from dtorch.api.ops.math_more import logit, tensors_only
from dtorch.api.ops.reduce import log_softmax, softmax
from dtorch.api.ops.statistics import logsumexp
from dtorch.api.record import tensor_arg
from dtorch.api.tensor import Tensor
from dtorch.errors import UnsupportedDtypeError
from dtorch.ir.opkind import BinaryKind, MathKind

erf = Tensor.erf
erfc = Tensor.erfc
erfinv = Tensor.erfinv
exp2 = Tensor.exp2
expm1 = Tensor.expm1
log1p = Tensor.log1p
sinc = Tensor.sinc
i0 = Tensor.i0
digamma = Tensor.digamma
psi = Tensor.digamma
gammaln = Tensor.lgamma
expit = sigmoid
multigammaln = mvlgamma


# torch.special's elementwise functions of one tensor: one BaseMath operator each
entr = _mk.unary(MathKind.ENTR, "entr", "special")
ndtr = _mk.unary(MathKind.NDTR, "ndtr", "special")
ndtri = _mk.unary(MathKind.NDTRI, "ndtri", "special")
log_ndtr = _mk.unary(MathKind.LOG_NDTR, "log_ndtr", "special")
i0e = _mk.unary(MathKind.I0E, "i0e", "special")
i1 = _mk.unary(MathKind.I1, "i1", "special")
i1e = _mk.unary(MathKind.I1E, "i1e", "special")
erfcx = _mk.unary(MathKind.ERFCX, "erfcx", "special")
bessel_j0 = _mk.unary(MathKind.BESSEL_J0, "bessel_j0", "special")
bessel_j1 = _mk.unary(MathKind.BESSEL_J1, "bessel_j1", "special")
bessel_y0 = _mk.unary(MathKind.BESSEL_Y0, "bessel_y0", "special")
bessel_y1 = _mk.unary(MathKind.BESSEL_Y1, "bessel_y1", "special")
modified_bessel_i0 = _mk.unary(MathKind.MODIFIED_BESSEL_I0, "modified_bessel_i0", "special")
modified_bessel_i1 = _mk.unary(MathKind.MODIFIED_BESSEL_I1, "modified_bessel_i1", "special")
modified_bessel_k0 = _mk.unary(MathKind.MODIFIED_BESSEL_K0, "modified_bessel_k0", "special")
modified_bessel_k1 = _mk.unary(MathKind.MODIFIED_BESSEL_K1, "modified_bessel_k1", "special")
scaled_modified_bessel_k0 = _mk.unary(
    MathKind.SCALED_MODIFIED_BESSEL_K0, "scaled_modified_bessel_k0", "special"
)
scaled_modified_bessel_k1 = _mk.unary(
    MathKind.SCALED_MODIFIED_BESSEL_K1, "scaled_modified_bessel_k1", "special"
)
spherical_bessel_j0 = _mk.unary(MathKind.SPHERICAL_BESSEL_J0, "spherical_bessel_j0", "special")
airy_ai = _mk.unary(MathKind.AIRY_AI, "airy_ai", "special")


# torch.special's functions of two tensors (either may be a number but for gammainc/gammaincc):
# one BroadcastBinary operator each, torch's kernel on every shard


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """``torch.special.round``: ``Tensor.round`` of a floating-point tensor; torch's refuses an
    integer or bool one (its kernel has none), where ``torch.round`` returns it.

    Example:
        >>> import dtorch
        >>> dtorch.special.round(dtorch.tensor([0.5, 1.5, 2.71])).tolist()
        [0.0, 2.0, 3.0]
    """
    tensor_arg("special.round", input)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise UnsupportedDtypeError(
            f'special.round: "round_vml_cpu" not implemented for {input.dtype}; accepted: '
            "floating-point tensors (torch.round returns an integer one as it is)"
        )
    return input.round(decimals=decimals)


def zeta(input: Any, other: Any) -> Tensor:
    """The Hurwitz zeta function ``sum((k + other) ** -input for k >= 0)``, elementwise, as
    ``torch.special.zeta`` (either argument may be a number). Shards and Replicate broadcast
    as in ``add``; a Partial input is refused (redistribute it first).

    Example:
        >>> import dtorch
        >>> dtorch.special.zeta(dtorch.tensor([2.0, 3.0]), 1.0).tolist()
        [1.644934058189392, 1.202056884765625]
    """
    return binary(BinaryKind.ZETA, "zeta", input, other)


def xlog1py(input: Any, other: Any) -> Tensor:
    """``input * log1p(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN), as
    ``torch.special.xlog1py`` (either argument may be a number). Shards and Replicate broadcast
    as in ``add``; a Partial input is refused (redistribute it first).

    Example:
        >>> import dtorch
        >>> dtorch.special.xlog1py(dtorch.tensor([0.0, 2.0]), dtorch.tensor([-1.0, 1.0])).tolist()
        [0.0, 1.3862943649291992]
    """
    return binary(BinaryKind.XLOG1PY, "xlog1py", input, other)


def gammainc(input: Any, other: Any) -> Tensor:
    """The regularized lower incomplete gamma function ``P(input, other)``, elementwise, as
    ``torch.special.gammainc`` (``torch.igamma``); both arguments are tensors, as torch's.
    Shards and Replicate broadcast as in ``add``; a Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.special.gammainc(dtorch.tensor([1.0, 2.0]), dtorch.tensor([1.0, 1.0])).tolist()
        [0.6321204304695129, 0.26424112915992737]
    """
    tensors_only("gammainc", "use a tensor", input=input, other=other)
    return binary(BinaryKind.GAMMAINC, "gammainc", input, other)


def gammaincc(input: Any, other: Any) -> Tensor:
    """The regularized upper incomplete gamma function ``Q(input, other) = 1 - P``,
    elementwise, as ``torch.special.gammaincc`` (``torch.igammac``); both arguments are
    tensors, as torch's. Shards and Replicate broadcast as in ``add``; a Partial input is
    refused.

    Example:
        >>> import dtorch
        >>> dtorch.special.gammaincc(dtorch.tensor([1.0, 2.0]), dtorch.tensor([1.0, 1.0])).tolist()
        [0.36787939071655273, 0.735758900642395]
    """
    tensors_only("gammaincc", "use a tensor", input=input, other=other)
    return binary(BinaryKind.GAMMAINCC, "gammaincc", input, other)


def _polynomial(kind: BinaryKind, name: str, summary: str, example: str) -> Any:
    """torch.special's polynomial ``name``: ``(input, n)`` of degree ``n`` (either may be a
    number), one BroadcastBinary operator."""

    def polynomial(input: Any, n: Any) -> Tensor:
        return binary(kind, name, input, n)

    polynomial.__name__ = polynomial.__qualname__ = name
    polynomial.__doc__ = (
        f"{summary} of degree ``n`` at ``input``, elementwise, as ``torch.special.{name}`` "
        "(either argument may be a number). Shards and Replicate broadcast as in ``add``; a "
        "Partial input is refused.\n\n"
        "Example:\n"
        "    >>> import dtorch\n"
        f"    >>> dtorch.special.{name}(dtorch.tensor([0.5, 2.0]), 3).tolist()\n"
        f"    {example}\n"
    )
    __test__[name] = polynomial
    return polynomial


#: The polynomials' examples, for doctest (their functions are made by ``_polynomial``).
__test__: dict[str, Any] = {}

chebyshev_polynomial_t = _polynomial(
    BinaryKind.CHEBYSHEV_T,
    "chebyshev_polynomial_t",
    "The Chebyshev polynomial of the first kind",
    "[-1.0, 26.0]",
)
chebyshev_polynomial_u = _polynomial(
    BinaryKind.CHEBYSHEV_U,
    "chebyshev_polynomial_u",
    "The Chebyshev polynomial of the second kind",
    "[-1.0, 56.0]",
)
chebyshev_polynomial_v = _polynomial(
    BinaryKind.CHEBYSHEV_V,
    "chebyshev_polynomial_v",
    "The Chebyshev polynomial of the third kind",
    "[-1.0, 41.0]",
)
chebyshev_polynomial_w = _polynomial(
    BinaryKind.CHEBYSHEV_W,
    "chebyshev_polynomial_w",
    "The Chebyshev polynomial of the fourth kind",
    "[-1.0, 71.0]",
)
shifted_chebyshev_polynomial_t = _polynomial(
    BinaryKind.SHIFTED_CHEBYSHEV_T,
    "shifted_chebyshev_polynomial_t",
    "The shifted Chebyshev polynomial of the first kind",
    "[-0.0, 99.0]",
)
shifted_chebyshev_polynomial_u = _polynomial(
    BinaryKind.SHIFTED_CHEBYSHEV_U,
    "shifted_chebyshev_polynomial_u",
    "The shifted Chebyshev polynomial of the second kind",
    "[-0.0, 204.0]",
)
shifted_chebyshev_polynomial_v = _polynomial(
    BinaryKind.SHIFTED_CHEBYSHEV_V,
    "shifted_chebyshev_polynomial_v",
    "The shifted Chebyshev polynomial of the third kind",
    "[1.0, 169.0]",
)
shifted_chebyshev_polynomial_w = _polynomial(
    BinaryKind.SHIFTED_CHEBYSHEV_W,
    "shifted_chebyshev_polynomial_w",
    "The shifted Chebyshev polynomial of the fourth kind",
    "[-1.0, 239.0]",
)
hermite_polynomial_h = _polynomial(
    BinaryKind.HERMITE_H,
    "hermite_polynomial_h",
    "The physicists' Hermite polynomial",
    "[-5.0, 40.0]",
)
hermite_polynomial_he = _polynomial(
    BinaryKind.HERMITE_HE,
    "hermite_polynomial_he",
    "The probabilists' Hermite polynomial",
    "[-1.375, 2.0]",
)
laguerre_polynomial_l = _polynomial(
    BinaryKind.LAGUERRE_L,
    "laguerre_polynomial_l",
    "The Laguerre polynomial",
    "[-0.1458333283662796, -0.3333333432674408]",
)
legendre_polynomial_p = _polynomial(
    BinaryKind.LEGENDRE_P, "legendre_polynomial_p", "The Legendre polynomial", "[-0.4375, 17.0]"
)

__all__ = [
    "bessel_y0",
    "bessel_y1",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "spherical_bessel_j0",
    "airy_ai",
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
    "zeta",
    "xlog1py",
    "gammainc",
    "gammaincc",
    "bessel_j0",
    "bessel_j1",
    "digamma",
    "entr",
    "erfcx",
    "i0e",
    "i1",
    "i1e",
    "log_ndtr",
    "ndtr",
    "ndtri",
    "erf",
    "erfc",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammaln",
    "i0",
    "log1p",
    "log_softmax",
    "logit",
    "logsumexp",
    "multigammaln",
    "polygamma",
    "psi",
    "round",
    "sinc",
    "softmax",
    "xlogy",
]
