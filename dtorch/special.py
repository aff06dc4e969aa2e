"""``dtorch.special``: torch.special's functions that dtorch computes, under torch.special's
names: ``torch.special.expit(t)`` on a dtorch tensor runs ``dtorch.special.expit``, which is
``dtorch.sigmoid`` (``dtorch.api.torch_function`` pairs the two namespaces by name).

Here: the aliases of dtorch's own functions (``expit`` = ``sigmoid``, ``gammaln`` =
``lgamma``, ``psi`` = ``digamma``, ``multigammaln`` = ``mvlgamma``), the functions of the
same name (``erf erfc erfinv exp2 expm1 log1p logit sinc round i0 digamma polygamma xlogy
logsumexp softmax log_softmax``), each with its placement rules, and torch.special's own
elementwise functions of one tensor (``entr ndtr ndtri log_ndtr i0e i1 i1e erfcx bessel_j0
bessel_j1``): one BaseMath operator each, torch's kernel on every shard (torch's values
bit for bit), Shard and Replicate kept, a Partial refused (none is linear). Not here, so
refused with torch's "no counterpart" TypeError: the special functions of two tensors
(``zeta``, ``chebyshev_polynomial_t``, ...) and the rest of the Bessel family.

Example:
    >>> import torch, dtorch
    >>> t = dtorch.tensor([0.0, 2.0])
    >>> torch.special.expit(t).tolist() == dtorch.sigmoid(t).tolist()
    True
"""

from __future__ import annotations

from typing import Any

from dtorch.api.handle import is_tensor
from dtorch.api.ops.composite import xlogy
from dtorch.api.ops.elementwise import sigmoid, unary
from dtorch.api.ops.math_extra import mvlgamma, polygamma
from dtorch.api.ops.math_more import logit
from dtorch.api.ops.reduce import log_softmax, softmax
from dtorch.api.ops.statistics import logsumexp
from dtorch.api.record import not_a_tensor
from dtorch.api.tensor import Tensor
from dtorch.ir.opkind import MathKind

erf = Tensor.erf
erfc = Tensor.erfc
erfinv = Tensor.erfinv
exp2 = Tensor.exp2
expm1 = Tensor.expm1
log1p = Tensor.log1p
sinc = Tensor.sinc
round = Tensor.round
i0 = Tensor.i0
digamma = Tensor.digamma
psi = Tensor.digamma
gammaln = Tensor.lgamma
expit = sigmoid
multigammaln = mvlgamma


def _special(kind: MathKind, name: str, input: Any) -> Tensor:
    if not is_tensor(input):
        raise not_a_tensor(name, "input", input)
    return unary(kind, name, input)


def entr(input: Tensor) -> Tensor:
    """``torch.special.entr``: ``-x * log(x)`` (0 at 0, -inf below).

    Example:
        >>> import torch, dtorch
        >>> t = torch.tensor([0.0, 0.5, 1.0, -1.0])
        >>> torch.equal(dtorch.special.entr(dtorch.tensor(t)).to_torch(), torch.special.entr(t))
        True
    """
    return _special(MathKind.ENTR, "entr", input)


def ndtr(input: Tensor) -> Tensor:
    """``torch.special.ndtr``: the standard normal distribution function.

    Example:
        >>> import torch, dtorch
        >>> t = torch.tensor([-1.0, 0.0, 2.0])
        >>> torch.equal(dtorch.special.ndtr(dtorch.tensor(t)).to_torch(), torch.special.ndtr(t))
        True
    """
    return _special(MathKind.NDTR, "ndtr", input)


def ndtri(input: Tensor) -> Tensor:
    """``torch.special.ndtri``: the inverse of ``ndtr``.

    Example:
        >>> import torch, dtorch
        >>> t = torch.tensor([0.1, 0.5, 0.9])
        >>> torch.equal(dtorch.special.ndtri(dtorch.tensor(t)).to_torch(), torch.special.ndtri(t))
        True
    """
    return _special(MathKind.NDTRI, "ndtri", input)


def log_ndtr(input: Tensor) -> Tensor:
    """``torch.special.log_ndtr``: ``log(ndtr(x))``, accurate far in the lower tail.

    Example:
        >>> import torch, dtorch
        >>> t = torch.tensor([-30.0, 0.0])
        >>> torch.equal(dtorch.special.log_ndtr(dtorch.tensor(t)).to_torch(),
        ...             torch.special.log_ndtr(t))
        True
    """
    return _special(MathKind.LOG_NDTR, "log_ndtr", input)


def i0e(input: Tensor) -> Tensor:
    """``torch.special.i0e``: the exponentially scaled modified Bessel function of order 0.

    Example:
        >>> import torch, dtorch
        >>> t = torch.tensor([0.0, 1.0, 5.0])
        >>> torch.equal(dtorch.special.i0e(dtorch.tensor(t)).to_torch(), torch.special.i0e(t))
        True
    """
    return _special(MathKind.I0E, "i0e", input)


def i1(input: Tensor) -> Tensor:
    """``torch.special.i1``: the modified Bessel function of the first kind, order 1.

    Example:
        >>> import torch, dtorch
        >>> t = torch.tensor([0.0, 1.0, -2.0])
        >>> torch.equal(dtorch.special.i1(dtorch.tensor(t)).to_torch(), torch.special.i1(t))
        True
    """
    return _special(MathKind.I1, "i1", input)


def i1e(input: Tensor) -> Tensor:
    """``torch.special.i1e``: ``i1`` exponentially scaled.

    Example:
        >>> import torch, dtorch
        >>> t = torch.tensor([0.0, 1.0, 5.0])
        >>> torch.equal(dtorch.special.i1e(dtorch.tensor(t)).to_torch(), torch.special.i1e(t))
        True
    """
    return _special(MathKind.I1E, "i1e", input)


def erfcx(input: Tensor) -> Tensor:
    """``torch.special.erfcx``: the scaled complementary error function ``exp(x²)·erfc(x)``.

    Example:
        >>> import torch, dtorch
        >>> t = torch.tensor([-1.0, 0.0, 30.0])
        >>> torch.equal(dtorch.special.erfcx(dtorch.tensor(t)).to_torch(), torch.special.erfcx(t))
        True
    """
    return _special(MathKind.ERFCX, "erfcx", input)


def bessel_j0(input: Tensor) -> Tensor:
    """``torch.special.bessel_j0``: the Bessel function of the first kind, order 0.

    Example:
        >>> import torch, dtorch
        >>> t = torch.tensor([0.0, 2.5, 10.0])
        >>> torch.equal(dtorch.special.bessel_j0(dtorch.tensor(t)).to_torch(),
        ...             torch.special.bessel_j0(t))
        True
    """
    return _special(MathKind.BESSEL_J0, "bessel_j0", input)


def bessel_j1(input: Tensor) -> Tensor:
    """``torch.special.bessel_j1``: the Bessel function of the first kind, order 1.

    Example:
        >>> import torch, dtorch
        >>> t = torch.tensor([0.0, 2.5, 10.0])
        >>> torch.equal(dtorch.special.bessel_j1(dtorch.tensor(t)).to_torch(),
        ...             torch.special.bessel_j1(t))
        True
    """
    return _special(MathKind.BESSEL_J1, "bessel_j1", input)


__all__ = [
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
