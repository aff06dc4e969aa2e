"""More elementwise math: the binary operators of one kind each (``fmod``, ``copysign``,
``heaviside``, ``float_power``, ``gcd``, ``lcm``, ``logical_xor``, ``nextafter``, ``ldexp``,
``igamma``, ``igammac``),
and the small ones built on existing operators (``true_divide``, ``clamp_min``,
``clamp_max``, ``logit``, ``positive``), and the complex parts: ``conj``,
``conj_physical``, ``real``, ``imag``, ``angle``, ``isreal`` and ``complex``
(``resolve_conj``/``resolve_neg``: dtorch has no lazy bits).

Dtypes are torch's, learned by running the torch function on one-element tensors (its
refusals too, raised at the call as a DtypeError naming the operator). Shards pass through as
for every elementwise operator; none of these keeps a Partial (none is linear), except
``positive``, which returns its input, and the conjugate. A Python number is accepted on
either side, also
where torch takes a tensor only; there it computes as torch's 0-d tensor of it would
(``gcd(t, 4)`` is ``torch.gcd(t, torch.tensor(4))``), except ``heaviside``, which takes
tensors only, as in torch (its dtypes must be equal, so a number would fit one dtype).

Example:
    >>> import dtorch
    >>> a = dtorch.tensor([-7, 7])
    >>> dtorch.fmod(a, 3).tolist(), (a % 3).tolist(), dtorch.gcd(a, 21).tolist()
    ([-1, 1], [2, 1], [7, 7])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.handle import TensorBase, is_tensor
from dtorch.api.ops.elementwise import binary, sub, unary
from dtorch.api.ops.masked import select
from dtorch.api.ops.scalars import as_scalar, is_scalar, not_a_number, python_number
from dtorch.api.record import not_a_tensor, record_one
from dtorch.errors import DtypeError, UnsupportedDtypeError
from dtorch.ir.opkind import BinaryKind, MathKind
from dtorch.ir.params import ClampParam

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def fmod(input: Any, other: Any) -> Tensor:
    """The C-style remainder, ``input - trunc(input / other) * other``: the sign of
    ``input`` (``remainder`` takes the divisor's), as ``torch.fmod``. Integers stay integers
    (an integer divided by 0 is refused: by a number at the call, as torch does, by a tensor
    holding 0 when the value is fetched; an empty tensor stays empty); floats give NaN for a 0
    divisor.

    Example:
        >>> import dtorch
        >>> dtorch.fmod(dtorch.tensor([-7.5, 7.5]), 2).tolist()
        [-1.5, 1.5]
    """
    return binary(BinaryKind.FMOD, "fmod", input, other)


def copysign(input: Any, other: Any) -> Tensor:
    """``|input|`` with the sign of ``other`` (``-0.0`` counts as negative), as
    ``torch.copysign``; integers and bools promote to the default float.

    Example:
        >>> import dtorch
        >>> dtorch.copysign(dtorch.tensor([1.5, -2.0]), dtorch.tensor([-0.0, 3.0])).tolist()
        [-1.5, 2.0]
    """
    return binary(BinaryKind.COPYSIGN, "copysign", input, other)


def heaviside(input: Any, values: Any) -> Tensor:
    """The step function: 0 where ``input < 0``, 1 where ``input > 0`` and ``values`` where
    it is 0, as ``torch.heaviside``; both tensors (a 0-d torch tensor too) of one dtype, as
    torch requires (a DtypeError otherwise).

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([-1.5, 0.0, 2.0])
        >>> dtorch.heaviside(x, dtorch.tensor([0.5])).tolist()
        [0.0, 0.5, 1.0]
    """
    tensors_only("heaviside", "use a tensor of the other's dtype", input=input, values=values)
    return binary(BinaryKind.HEAVISIDE, "heaviside", input, values)


def tensors_only(name: str, advice: str, **values: Any) -> None:
    """torch's refusal of a number where its function takes tensors only (``heaviside``,
    ``igamma``): a TypeError naming the argument, and ``advice``.

    Example:
        >>> try:
        ...     tensors_only("igamma", "use a tensor", other=2.0)
        ... except TypeError as error:
        ...     print(str(error)[:41])
        igamma: other must be a tensor, got float
    """
    for label, value in values.items():
        if not isinstance(value, (TensorBase, torch.Tensor)):
            raise TypeError(
                f"{name}: {label} must be a tensor, got {type(value).__name__} (as in torch, "
                f"whose {name} takes no number: {advice})"
            )


def igamma(input: Any, other: Any) -> Tensor:
    """The regularized lower incomplete gamma function ``P(input, other)``, elementwise, as
    ``torch.igamma`` (``torch.special.gammainc``); both tensors, as torch's.

    Example:
        >>> import dtorch
        >>> dtorch.igamma(dtorch.tensor([1.0, 2.0]), dtorch.tensor([1.0, 1.0])).tolist()
        [0.6321204304695129, 0.26424112915992737]
    """
    tensors_only("igamma", "use a tensor", input=input, other=other)
    return binary(BinaryKind.GAMMAINC, "igamma", input, other)


def igammac(input: Any, other: Any) -> Tensor:
    """The regularized upper incomplete gamma function ``Q(input, other) = 1 - P``,
    elementwise, as ``torch.igammac`` (``torch.special.gammaincc``); both tensors, as torch's.

    Example:
        >>> import dtorch
        >>> dtorch.igammac(dtorch.tensor([1.0, 2.0]), dtorch.tensor([1.0, 1.0])).tolist()
        [0.36787939071655273, 0.735758900642395]
    """
    tensors_only("igammac", "use a tensor", input=input, other=other)
    return binary(BinaryKind.GAMMAINCC, "igammac", input, other)


def float_power(input: Any, exponent: Any) -> Tensor:
    """``input ** exponent`` computed in double precision, as ``torch.float_power``: the
    result is always float64 (complex128 for complex operands), whatever the dtypes.

    Example:
        >>> import dtorch
        >>> out = dtorch.float_power(dtorch.tensor([2, 3]), -1)
        >>> out.dtype, out.tolist()
        (torch.float64, [0.5, 0.3333333333333333])
    """
    return binary(BinaryKind.FLOAT_POWER, "float_power", input, exponent)


def true_divide(input: Any, other: Any) -> Tensor:
    """``input / other``, true division: ``div`` without a rounding mode (an alias, as
    in torch); integers give the default float.

    Example:
        >>> import dtorch
        >>> dtorch.true_divide(dtorch.tensor([7, -7]), 2).tolist()
        [3.5, -3.5]
    """
    return binary(BinaryKind.DIV, "true_divide", input, other)


def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``other - alpha * input``, as ``torch.rsub`` (``sub`` with the operands swapped, so
    ``alpha`` scales ``input``); either may be a number.

    Example:
        >>> import dtorch
        >>> dtorch.rsub(dtorch.tensor([1.0, 2.0]), 5, alpha=2).tolist()
        [3.0, 1.0]
    """
    return sub(other, input, alpha=alpha)


def gcd(input: Any, other: Any) -> Tensor:
    """The greatest common divisor (non-negative; ``gcd(0, 0) = 0``), as ``torch.gcd``;
    integer dtypes only (torch refuses floats and two bools).

    Example:
        >>> import dtorch
        >>> dtorch.gcd(dtorch.tensor([12, -18, 0]), dtorch.tensor([8, 12, 0])).tolist()
        [4, 6, 0]
    """
    return binary(BinaryKind.GCD, "gcd", input, other)


def lcm(input: Any, other: Any) -> Tensor:
    """The least common multiple (non-negative; 0 where either is 0), as ``torch.lcm``;
    integer dtypes only, wrapping on overflow as torch does.

    Example:
        >>> import dtorch
        >>> dtorch.lcm(dtorch.tensor([4, -6, 0]), dtorch.tensor([6, 4, 5])).tolist()
        [12, 12, 0]
    """
    return binary(BinaryKind.LCM, "lcm", input, other)


def logical_xor(input: Any, other: Any) -> Tensor:
    """True where exactly one is non-zero (a bool tensor), as ``torch.logical_xor``; unlike
    torch, ``other`` may be a number.

    Example:
        >>> import dtorch
        >>> dtorch.logical_xor(dtorch.tensor([0, 1, 2]), dtorch.tensor([0.0, 0.0, 3.0])).tolist()
        [False, True, False]
    """
    return binary(BinaryKind.LOGICAL_XOR, "logical_xor", input, other)


def nextafter(input: Any, other: Any) -> Tensor:
    """The next floating-point value after ``input`` towards ``other``, as
    ``torch.nextafter``; floating-point dtypes only.

    Example:
        >>> import dtorch
        >>> one = dtorch.tensor([1.0], dtype=dtorch.float64)
        >>> (dtorch.nextafter(one, 2.0) - 1).tolist()
        [2.220446049250313e-16]
    """
    return binary(BinaryKind.NEXTAFTER, "nextafter", input, other)


def ldexp(input: Any, other: Any) -> Tensor:
    """``input * 2 ** other``, as ``torch.ldexp``; integers promote to the default float.

    Example:
        >>> import dtorch
        >>> dtorch.ldexp(dtorch.tensor([1.0, 3.0]), dtorch.tensor([3, -1])).tolist()
        [8.0, 1.5]
    """
    return binary(BinaryKind.LDEXP, "ldexp", input, other)


def clamp_min(input: Tensor, min: Any) -> Tensor:
    """``input`` clamped from below, as ``torch.clamp_min``: ``clamp(input, min=min)`` for a
    number (one operator), ``maximum(input, min)`` for a tensor (broadcast, promoted as
    torch does, NaN where either is NaN); a Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.clamp_min(dtorch.tensor([-2, 0, 5]), 1).tolist()
        [1, 1, 5]
    """
    return _clamp_one("clamp_min", input, min, BinaryKind.MAXIMUM)


def clamp_max(input: Tensor, max: Any) -> Tensor:
    """``input`` clamped from above, as ``torch.clamp_max``: ``clamp(input, max=max)`` for a
    number (one operator), ``minimum(input, max)`` for a tensor; a Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.clamp_max(dtorch.tensor([-2.0, 0.0, 5.0]), dtorch.tensor(1.0)).tolist()
        [-2.0, 0.0, 1.0]
    """
    return _clamp_one("clamp_max", input, max, BinaryKind.MINIMUM)


def _clamp_one(name: str, input: Any, bound: Any, kind: BinaryKind) -> Tensor:
    """One bound: a tensor (a 0-d torch tensor too) through ``kind``, a number as ``clamp``."""
    if not is_tensor(input):
        raise not_a_tensor(name, "input", input)
    if isinstance(bound, (TensorBase, torch.Tensor)):
        if input.dtype.is_complex or bound.dtype.is_complex:  # maximum's is a RuntimeError
            raise UnsupportedDtypeError(
                f"{name}: torch has no kernel for complex tensors (got {input.dtype} and "
                f"{bound.dtype}); accepted: real dtypes"
            )
        return binary(kind, name, input, bound)
    if not is_scalar(bound):
        raise not_a_number(f"{name}: the bound", bound, "a number or a tensor")
    low, high = (as_scalar(bound), None) if kind is BinaryKind.MAXIMUM else (None, as_scalar(bound))
    return record_one(name, ClampParam(low, high), (input,))


def logit(input: Tensor, eps: Any = None) -> Tensor:
    """``log(x / (1 - x))``, as ``torch.logit``; with ``eps`` (>= 0) ``x`` is first clamped
    to ``[eps, 1 - eps]`` as torch's kernel clamps it (below ``eps``: ``eps``; else above
    ``1 - eps``: ``1 - eps``; NaN stays NaN); integers promote to the default float. A
    Partial input is refused.

    Example:
        >>> import dtorch
        >>> x = dtorch.tensor([0.0, 0.5, 0.75])
        >>> x.logit().tolist(), [round(v, 4) for v in x.logit(eps=0.25).tolist()]
        ([-inf, 0.0, 1.0986123085021973], [-1.0986, 0.0, 1.0986])
    """
    if not is_tensor(input):
        raise not_a_tensor("logit", "input", input)
    if eps is not None and (isinstance(eps, TensorBase) or not is_scalar(eps)):
        raise not_a_number("logit: eps", eps, "a number or None")
    low = None if eps is None else float(python_number(eps))
    if low is None or not low >= 0:  # torch's kernel clamps for eps >= 0 only (NaN: none)
        return unary(MathKind.LOGIT, "logit", input)
    high = record_one("logit", ClampParam(None, as_scalar(1 - low)), (input,))
    clamped = select("logit", binary(BinaryKind.LT, "logit", input, low), low, high)
    return unary(MathKind.LOGIT, "logit", clamped)


def positive(input: Tensor) -> Tensor:
    """``input`` itself, as ``torch.positive`` (``+x``); a bool tensor is refused, as in
    torch. The placements (a Partial too) are the input's.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([-1.0, 2.0])
        >>> dtorch.positive(t) is t
        True
    """
    if not is_tensor(input):
        raise not_a_tensor("positive", "input", input)
    if input.dtype == torch.bool:
        raise DtypeError(
            "positive: The `+` operator, on a bool tensor is not supported (as in torch); "
            "accepted: every other dtype"
        )
    return input


def conj(input: Tensor) -> Tensor:
    """The complex conjugate, as ``torch.conj``: a real tensor is returned itself (torch's
    ``conj`` of one is the tensor); a complex one is one CONJ operator, a copy where torch
    gives a lazy view (writing into the result does not change ``input``), with the input's
    placements (a Partial too: the conjugate is linear).

    Example:
        >>> import dtorch
        >>> dtorch.tensor([1 + 2j, 3 - 1j]).conj().tolist()
        [(1-2j), (3+1j)]
    """
    if not is_tensor(input):
        raise not_a_tensor("conj", "input", input)
    return unary(MathKind.CONJ, "conj", input) if input.dtype.is_complex else input


def conj_physical(input: Tensor) -> Tensor:
    """``torch.conj_physical``: the conjugate, computed (a copy of a real tensor too).

    Example:
        >>> import dtorch
        >>> dtorch.conj_physical(dtorch.tensor([2j])).tolist()
        [-2j]
    """
    if not is_tensor(input):
        raise not_a_tensor("conj_physical", "input", input)
    return unary(MathKind.CONJ, "conj_physical", input)


def resolve_conj(input: Tensor) -> Tensor:
    """``input`` itself: a dtorch tensor never carries torch's lazy conjugate bit (``conj``
    computes), so there is nothing to resolve; ``is_conj()`` is always False.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([1j])
        >>> dtorch.resolve_conj(t) is t, t.conj().is_conj()
        (True, False)
    """
    if not is_tensor(input):
        raise not_a_tensor("resolve_conj", "input", input)
    return input


def resolve_neg(input: Tensor) -> Tensor:
    """``input`` itself: a dtorch tensor never carries torch's lazy negative bit.

    Example:
        >>> import dtorch
        >>> t = dtorch.tensor([1.0])
        >>> dtorch.resolve_neg(t) is t, t.is_neg()
        (True, False)
    """
    if not is_tensor(input):
        raise not_a_tensor("resolve_neg", "input", input)
    return input


def real(input: Tensor) -> Tensor:
    """The real part, as ``torch.real``: a real tensor is returned itself; a complex one's is
    one REAL operator, a copy where torch gives a view (writing into it does not change
    ``input``), with the input's placements (a Partial too: the real part is linear).

    Example:
        >>> import dtorch
        >>> dtorch.tensor([1 + 2j, 3 - 1j]).real.tolist()
        [1.0, 3.0]
    """
    if not is_tensor(input):
        raise not_a_tensor("real", "input", input)
    return unary(MathKind.REAL, "real", input) if input.dtype.is_complex else input


def imag(input: Tensor) -> Tensor:
    """The imaginary part, as ``torch.imag`` (a copy, as ``real``); a real tensor is refused,
    as torch refuses it.

    Example:
        >>> import dtorch
        >>> dtorch.tensor([1 + 2j, 3 - 1j]).imag.tolist()
        [2.0, -1.0]
    """
    if not is_tensor(input):
        raise not_a_tensor("imag", "input", input)
    if not input.dtype.is_complex:
        raise DtypeError("imag is not implemented for tensors with non-complex dtypes.")
    return unary(MathKind.IMAG, "imag", input)


def angle(input: Tensor) -> Tensor:
    """``torch.angle``: the argument of each complex number (0 or pi for a real one; an
    integer tensor gives the default float dtype). A Partial input is refused.

    Example:
        >>> import dtorch
        >>> dtorch.angle(dtorch.tensor([-2.0, 3.0])).tolist()
        [3.1415927410125732, 0.0]
    """
    if not is_tensor(input):
        raise not_a_tensor("angle", "input", input)
    return unary(MathKind.ANGLE, "angle", input)


def isreal(input: Tensor) -> Tensor:
    """``torch.isreal``: True where the imaginary part is 0 (everywhere for a real tensor).

    Example:
        >>> import dtorch
        >>> dtorch.isreal(dtorch.tensor([1 + 0j, 2j])).tolist()
        [True, False]
    """
    if not is_tensor(input):
        raise not_a_tensor("isreal", "input", input)
    if not input.dtype.is_complex:  # True everywhere, NaN too: x == x or x != x
        same = binary(BinaryKind.EQ, "isreal", input, input)
        return binary(
            BinaryKind.LOGICAL_OR, "isreal", same, binary(BinaryKind.NE, "isreal", input, input)
        )
    return binary(BinaryKind.EQ, "isreal", imag(input), 0)


def complex(real: Tensor, imag: Tensor) -> Tensor:
    """``torch.complex``: the complex tensor ``real + imag * 1j`` of two real tensors of one
    floating dtype (float32 gives complex64), broadcast; two Partials give a Partial.

    Example:
        >>> import dtorch
        >>> dtorch.complex(dtorch.tensor([1.0, 2.0]), dtorch.tensor([0.5, -1.0])).tolist()
        [(1+0.5j), (2-1j)]
    """
    for arg, value in (("real", real), ("imag", imag)):
        if not is_tensor(value):
            raise not_a_tensor("complex", arg, value)
    return binary(BinaryKind.COMPLEX, "complex", real, imag)
