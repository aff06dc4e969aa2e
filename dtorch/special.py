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

from dtorch.api.ops import methods as _mk
from dtorch.api.ops.composite import xlogy
from dtorch.api.ops.elementwise import sigmoid
from dtorch.api.ops.math_extra import mvlgamma, polygamma
from dtorch.api.ops.math_more import logit
from dtorch.api.ops.reduce import log_softmax, softmax
from dtorch.api.ops.statistics import logsumexp
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
