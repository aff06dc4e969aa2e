"""``dtorch.special``: torch.special's functions that dtorch computes, under torch.special's
names: ``torch.special.expit(t)`` on a dtorch tensor runs ``dtorch.special.expit``, which is
``dtorch.sigmoid`` (``dtorch.api.torch_function`` pairs the two namespaces by name).

Here: the aliases of dtorch's own functions (``expit`` = ``sigmoid``, ``gammaln`` =
``lgamma``, ``psi`` = ``digamma``, ``multigammaln`` = ``mvlgamma``) and the functions of the
same name (``erf erfc erfinv exp2 expm1 log1p logit sinc round i0 digamma polygamma xlogy
logsumexp softmax log_softmax``), each with its placement rules. Not here, so refused with
torch's "no counterpart" TypeError: the other special functions (``entr``, ``ndtr``, the
Bessel functions, ...).

Example:
    >>> import torch, dtorch
    >>> t = dtorch.tensor([0.0, 2.0])
    >>> torch.special.expit(t).tolist() == dtorch.sigmoid(t).tolist()
    True
"""

from __future__ import annotations

from dtorch.api.ops.composite import xlogy
from dtorch.api.ops.elementwise import sigmoid
from dtorch.api.ops.math_extra import mvlgamma, polygamma
from dtorch.api.ops.math_more import logit
from dtorch.api.ops.reduce import log_softmax, softmax
from dtorch.api.ops.statistics import logsumexp
from dtorch.api.tensor import Tensor

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

__all__ = [
    "digamma",
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
