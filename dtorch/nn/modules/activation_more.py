"""torch.nn's remaining activation layers: ``Softplus``, ``LogSigmoid``, ``Hardswish``,
``Hardsigmoid``, ``Mish``, ``SELU``, ``CELU``, ``Softsign``, ``Tanhshrink``, ``Hardshrink``,
``Softshrink``, ``Threshold``, ``Softmin`` and ``GLU``.

Each is torch.nn's layer (its constructor arguments and ``extra_repr``) calling
``dtorch.nn.functional``; like the other activation layers they have no parameters, so the
``device=``, ``device_mesh=`` (one of them at most) and ``dtype=`` every dtorch layer takes
are accepted and change nothing. The elementwise ones keep the input's shards (Partial is
refused); ``Softmin`` needs ``dim`` unsharded; ``GLU`` keeps a shard of ``dim`` only where both
halves stay chunked over the same devices.

Example:
    >>> import dtorch
    >>> from dtorch import nn
    >>> nn.Hardshrink(1.0)(dtorch.tensor([-2.0, 0.5])).tolist(), nn.CELU(alpha=2.0)
    ([-2.0, 0.0], CELU(alpha=2.0))
"""

from __future__ import annotations

from typing import Any

from dtorch.api.tensor import Tensor
from dtorch.nn import functional as F
from dtorch.nn.modules.activation import _NoParameters, inplace_repr


class Softplus(_NoParameters):
    """``log(1 + exp(beta * x)) / beta``; ``x`` where ``beta * x > threshold``.

    Example:
        >>> import dtorch
        >>> dtorch.nn.Softplus(beta=2.0)
        Softplus(beta=2.0, threshold=20.0)
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class LogSigmoid(_NoParameters):
    """``log(sigmoid(x))``, computed stably."""

    def forward(self, input: Tensor) -> Tensor:
        return F.logsigmoid(input)


class Hardswish(_NoParameters):
    """``x * relu6(x + 3) / 6``; ``inplace=True`` writes the result into the input (torch's
    repr does not show it)."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardswish(input, self.inplace)


class Hardsigmoid(_NoParameters):
    """``relu6(x + 3) / 6``; ``inplace=True`` writes the result into the input (torch's repr
    does not show it)."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardsigmoid(input, self.inplace)


class Mish(_NoParameters):
    """``x * tanh(softplus(x))``; ``inplace=True`` writes the result into the input.

    Example:
        >>> import dtorch
        >>> dtorch.nn.Mish(inplace=True)
        Mish(inplace=True)
    """

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.mish(input, self.inplace)

    def extra_repr(self) -> str:
        return inplace_repr(self.inplace)


class SELU(_NoParameters):
    """``scale * elu(x, alpha)`` with torch's fixed constants; ``inplace=True`` writes the
    result into the input."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.selu(input, self.inplace)

    def extra_repr(self) -> str:
        return inplace_repr(self.inplace)


class CELU(_NoParameters):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``; ``inplace=True`` writes the
    result into the input. ``alpha=0`` is refused when called, as torch refuses it.

    Example:
        >>> import dtorch
        >>> dtorch.nn.CELU(inplace=True)
        CELU(alpha=1.0, inplace=True)
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + inplace_repr(self.inplace, ", ")


class Softsign(_NoParameters):
    """``x / (1 + |x|)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softsign(input)


class Tanhshrink(_NoParameters):
    """``x - tanh(x)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanhshrink(input)


class Hardshrink(_NoParameters):
    """``x`` where ``|x| > lambd``, else 0.

    Example:
        >>> import dtorch
        >>> dtorch.nn.Hardshrink()
        Hardshrink(0.5)
    """

    def __init__(self, lambd: float = 0.5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(_NoParameters):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0; a negative
    ``lambd`` is refused when called, as torch refuses it.

    Example:
        >>> import dtorch
        >>> dtorch.nn.Softshrink(1.0)(dtorch.tensor([-3.0, 0.5])).tolist()
        [-2.0, 0.0]
    """

    def __init__(self, lambd: float = 0.5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Threshold(_NoParameters):
    """``x`` where ``x > threshold``, else ``value``; ``inplace=True`` writes the result into
    the input.

    Example:
        >>> import dtorch
        >>> dtorch.nn.Threshold(0.1, 20)
        Threshold(threshold=0.1, value=20)
    """

    def __init__(
        self, threshold: float, value: float, inplace: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        inplace = inplace_repr(self.inplace, ", ")
        return f"threshold={self.threshold}, value={self.value}{inplace}"


class Softmin(_NoParameters):
    """``softmax(-x)`` along ``dim`` (``dim=None``: torch's legacy implicit dim, warned).

    Example:
        >>> import dtorch
        >>> dtorch.nn.Softmin(dim=1)(dtorch.zeros(1, 2)).tolist()
        [[0.5, 0.5]]
    """

    def __init__(self, dim: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        # torch's frames: the warning of an implicit dim names the line that called the module
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class GLU(_NoParameters):
    """The gated linear unit: ``a * sigmoid(b)``, ``a`` and ``b`` the halves of ``dim``.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.GLU()
        >>> m, m(dtorch.tensor([[2.0, 0.0]])).tolist()
        (GLU(dim=-1), [[1.0]])
    """

    def __init__(self, dim: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


__all__ = [
    "CELU",
    "GLU",
    "SELU",
    "Hardshrink",
    "Hardsigmoid",
    "Hardswish",
    "LogSigmoid",
    "Mish",
    "Softmin",
    "Softplus",
    "Softshrink",
    "Softsign",
    "Tanhshrink",
    "Threshold",
]
