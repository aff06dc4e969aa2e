# mypy: disable-error-code="misc"
# (``self: Tensor`` in a mixin of Tensor: mypy's [misc] asks a self-type to be a supertype)
"""More elementwise math methods of ``dtorch.Tensor``, as the mixin ``TensorMath``: the
special functions (``lgamma``, ``digamma``, ``erfinv``, ``i0``, ``sinc``, ``logit``), the
inverse hyperbolic functions, angle conversions, ``signbit``, the aliases ``negative`` and
``positive``, the binary operators of ``dtorch.api.ops.math_more`` (``fmod``, ``gcd``, ...),
and torch's in-place forms of them all. The behaviour lives in ``dtorch.api.ops``; each
method is one line, as in ``dtorch.api.tensor``.

Example:
    >>> import dtorch
    >>> t = dtorch.tensor([180.0, -90.0])
    >>> t.deg2rad().rad2deg().tolist(), t.fmod_(100) is t, t.tolist()
    ([180.0, -90.0], True, [80.0, -90.0])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.ops import composite as _cm
from dtorch.api.ops import math_more as _mm
from dtorch.api.ops import methods as _mk
from dtorch.errors import DtypeError
from dtorch.ir.opkind import MathKind as M

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

#: ``float_power_`` once its dtype is checked.
_float_power = _mk.in_place("float_power_", _mm.float_power)


class TensorMath:
    """More elementwise math methods of ``dtorch.Tensor`` (a mixin: ``Tensor`` is its only
    user)."""

    __slots__ = ()

    lgamma = _mk.unary(M.LGAMMA, "lgamma")
    digamma = _mk.unary(M.DIGAMMA, "digamma")
    erfinv = _mk.unary(M.ERFINV, "erfinv")
    i0 = _mk.unary(M.I0, "i0")
    sinc = _mk.unary(M.SINC, "sinc")
    logit = _mm.logit
    deg2rad = _mk.unary(M.DEG2RAD, "deg2rad")
    rad2deg = _mk.unary(M.RAD2DEG, "rad2deg")
    signbit = _mk.unary(M.SIGNBIT, "signbit")
    asinh = _mk.unary(M.ASINH, "asinh")
    arcsinh = asinh
    acosh = _mk.unary(M.ACOSH, "acosh")
    arccosh = acosh
    atanh = _mk.unary(M.ATANH, "atanh")
    arctanh = atanh
    negative = _mk.unary(M.NEG, "negative")
    positive = _mm.positive
    conj = _mm.conj
    conj_physical = _mm.conj_physical
    resolve_conj = _mm.resolve_conj
    resolve_neg = _mm.resolve_neg
    real = property(_mm.real, doc="The real part (``dtorch.real``): a copy of a complex one.")
    imag = property(_mm.imag, doc="The imaginary part (``dtorch.imag``), a copy.")
    angle = _mm.angle
    isreal = _mm.isreal

    cfloat = _mk.cast(torch.complex64, "cfloat")  # torch's memory_format= too, as half's
    cdouble = _mk.cast(torch.complex128, "cdouble")
    chalf = _mk.cast(torch.complex32, "chalf")

    def is_conj(self: Tensor) -> bool:
        """False: dtorch has no lazy conjugate (``conj`` computes the values)."""
        return False

    def is_neg(self: Tensor) -> bool:
        """False: dtorch has no lazy negation."""
        return False

    conj_physical_ = _mk.in_place("conj_physical_", _mm.conj_physical)

    fmod = _mm.fmod
    copysign = _mm.copysign
    heaviside = _mm.heaviside
    float_power = _mm.float_power
    true_divide = _mm.true_divide
    gcd = _mm.gcd
    lcm = _mm.lcm
    logical_xor = _mm.logical_xor
    nextafter = _mm.nextafter
    ldexp = _mm.ldexp
    igamma = _mm.igamma
    igammac = _mm.igammac
    clamp_min = _mm.clamp_min
    clamp_max = _mm.clamp_max

    # --- in place: the operator above, its result written back as ``add_`` writes it --------
    lgamma_ = _mk.in_place("lgamma_", lgamma)
    digamma_ = _mk.in_place("digamma_", digamma)
    erfinv_ = _mk.in_place("erfinv_", erfinv)
    i0_ = _mk.in_place("i0_", i0)
    sinc_ = _mk.in_place("sinc_", sinc)
    logit_ = _mk.in_place("logit_", logit)
    deg2rad_ = _mk.in_place("deg2rad_", deg2rad)
    rad2deg_ = _mk.in_place("rad2deg_", rad2deg)
    asinh_ = _mk.in_place("asinh_", asinh)
    arcsinh_ = _mk.in_place("arcsinh_", asinh)
    acosh_ = _mk.in_place("acosh_", acosh)
    arccosh_ = _mk.in_place("arccosh_", acosh)
    atanh_ = _mk.in_place("atanh_", atanh)
    arctanh_ = _mk.in_place("arctanh_", atanh)
    negative_ = _mk.in_place("negative_", negative)
    frac_ = _mk.in_place("frac_", _cm.frac)

    fmod_ = _mk.in_place("fmod_", fmod)
    copysign_ = _mk.in_place("copysign_", copysign)
    heaviside_ = _mk.in_place("heaviside_", heaviside)
    true_divide_ = _mk.in_place("true_divide_", true_divide)
    gcd_ = _mk.in_place("gcd_", gcd)
    lcm_ = _mk.in_place("lcm_", lcm)
    logical_xor_ = _mk.in_place("logical_xor_", logical_xor)
    nextafter_ = _mk.in_place("nextafter_", nextafter)
    ldexp_ = _mk.in_place("ldexp_", ldexp)
    igamma_ = _mk.in_place("igamma_", igamma)
    igammac_ = _mk.in_place("igammac_", igammac)
    clamp_min_ = _mk.in_place("clamp_min_", clamp_min)
    clamp_max_ = _mk.in_place("clamp_max_", clamp_max)

    def float_power_(self: Tensor, exponent: Any) -> Tensor:
        """``float_power`` in place, as ``torch.Tensor.float_power_``: the tensor must already
        be float64 (or complex128), the dtype of every ``float_power`` result; torch refuses
        others rather than round the result back, and so does dtorch (a DtypeError).

        Example:
            >>> import dtorch
            >>> t = dtorch.tensor([2.0, 4.0], dtype=dtorch.float64)
            >>> t.float_power_(2) is t, t.tolist()
            (True, [4.0, 16.0])
        """
        if self.dtype not in (torch.float64, torch.complex128):
            raise DtypeError(
                f"float_power_: the base given to float_power_ has dtype {self.dtype} but the "
                "operation's result requires dtype torch.float64; accepted: a float64 (or "
                "complex128) tensor, or float_power out of place"
            )
        return _float_power(self, exponent)
