# mypy: disable-error-code="misc"
# (``self: Tensor`` in a mixin of Tensor: mypy's [misc] asks a self-type to be a supertype)
"""The in-place arithmetic of ``dtorch.Tensor``, as the mixin ``TensorInPlace``: the augmented
assignments (``t += x``, ``t //= x``, ``t <<= x``, ...), ``add_``/``sub_``/``mul_``/``div_``/
``floor_divide_``/``remainder_``/``pow_``, the bitwise ones, ``clamp_``/``clip_``,
``fill_``/``zero_`` and ``normal_``/``uniform_``. Each changes ``self``'s values in place,
seen by every alias and view of it. The binary arithmetic is one operator whose devices write
``self``'s shards where the result has ``self``'s dtype, shape and placements
(``dtorch.api.ops.elementwise.binary_in_place``); otherwise, and for the others, the
out-of-place operator runs and its result is written back in ``self``'s placements
(``dtorch.api.ops.convert.assign``).

Example:
    >>> import dtorch
    >>> t = dtorch.arange(4.0)
    >>> t += 1
    >>> t.clamp_(max=3.0).tolist()
    [1.0, 2.0, 3.0, 3.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dtorch.api.ops import clamp as _clamp
from dtorch.api.ops import convert as _cv
from dtorch.api.ops import elementwise as _ew
from dtorch.api.ops import fill as _fl
from dtorch.api.ops import random_fill as _rf
from dtorch.ir.opkind import BinaryKind

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


class TensorInPlace:
    """The in-place arithmetic methods of ``dtorch.Tensor`` (a mixin: ``Tensor`` is its only
    user)."""

    __slots__ = ()

    def __iadd__(self: Tensor, o: Any) -> Tensor:
        return self.add_(o)

    def __isub__(self: Tensor, o: Any) -> Tensor:
        return self.sub_(o)

    def __imul__(self: Tensor, o: Any) -> Tensor:
        return self.mul_(o)

    def __itruediv__(self: Tensor, o: Any) -> Tensor:
        return self.div_(o)

    def __ifloordiv__(self: Tensor, o: Any) -> Tensor:
        return self.floor_divide_(o)

    def __imod__(self: Tensor, o: Any) -> Tensor:
        return self.remainder_(o)

    def __ipow__(self: Tensor, o: Any) -> Tensor:
        return self.pow_(o)

    def __iand__(self: Tensor, o: Any) -> Tensor:
        return self.bitwise_and_(o)

    def __ior__(self: Tensor, o: Any) -> Tensor:
        return self.bitwise_or_(o)

    def __ixor__(self: Tensor, o: Any) -> Tensor:
        return self.bitwise_xor_(o)

    def __ilshift__(self: Tensor, o: Any) -> Tensor:
        return self.bitwise_left_shift_(o)

    def __irshift__(self: Tensor, o: Any) -> Tensor:
        return self.bitwise_right_shift_(o)

    @_cv.writer
    def add_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
        """``self + alpha * other`` in place, as torch's ``add_`` (``t += other``): each
        device adds into its shard where the sum has ``self``'s dtype, shape and placements;
        otherwise the sum is written back in ``self``'s placements (a Replicate ``self`` plus
        a sharded ``other`` is redistributed back to Replicate). Every alias and view of
        ``self`` sees it, and a result dtype that does not cast back to ``self``'s is refused.
        Returns ``self``.

        Example:
            >>> import dtorch
            >>> t = dtorch.arange(3.0)
            >>> t.add_(1) is t, t.tolist()
            (True, [1.0, 2.0, 3.0])
        """
        return _ew.binary_in_place("add_", BinaryKind.ADD, "add", self, other, alpha)

    @_cv.writer
    def sub_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
        """``self - alpha * other`` in place (``t -= other``), written back as ``add_`` writes.

        Example:
            >>> import dtorch
            >>> t = dtorch.arange(3.0)
            >>> t.sub_(1, alpha=2) is t, t.tolist()
            (True, [-2.0, -1.0, 0.0])
        """
        return _ew.binary_in_place("sub_", BinaryKind.SUB, "sub", self, other, alpha)

    @_cv.writer
    def mul_(self: Tensor, other: Any) -> Tensor:
        """``self * other`` in place (``t *= other``), written back as ``add_`` writes: in
        ``self``'s placements (a Partial product, by a Partial ``other``, is redistributed
        back first).

        Example:
            >>> import dtorch
            >>> t = dtorch.arange(3)
            >>> t.mul_(2) is t, t.tolist()
            (True, [0, 2, 4])
        """
        return _ew.binary_in_place("mul_", BinaryKind.MUL, "mul", self, other)

    @_cv.writer
    def div_(self: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """``self / other`` in place (``t /= other``), rounded as ``rounding_mode`` says
        (``None``, ``"trunc"``, ``"floor"``), written back as ``add_`` writes: a true
        division of an integer tensor is refused, as in torch (its result is a float).

        Example:
            >>> import dtorch
            >>> t = dtorch.tensor([5.0, -5.0])
            >>> t.div_(2, rounding_mode="floor") is t, t.tolist()
            (True, [2.0, -3.0])
        """
        found = _ew.division(rounding_mode)
        if found is None:  # div's own ValueError names what is accepted
            _cv.fits("div_", self, other)
            return _cv.assign("div_", self, _ew.div(self, other, rounding_mode=rounding_mode))
        return _ew.binary_in_place("div_", found[0], found[1], self, other)

    @_cv.writer
    def floor_divide_(self: Tensor, other: Any) -> Tensor:
        """``self // other`` in place (``t //= other``; rounded down, as torch's), written
        back as ``add_`` writes.

        Example:
            >>> import dtorch
            >>> t = dtorch.tensor([5, -5])
            >>> t.floor_divide_(2) is t, t.tolist()
            (True, [2, -3])
        """
        return _ew.binary_in_place(
            "floor_divide_", BinaryKind.FLOOR_DIV, "floor_divide", self, other
        )

    @_cv.writer
    def remainder_(self: Tensor, other: Any) -> Tensor:
        """``self % other`` in place (``t %= other``; the sign of ``other``, as Python's and
        torch's), written back as ``add_`` writes.

        Example:
            >>> import dtorch
            >>> t = dtorch.tensor([5, -5])
            >>> t.remainder_(3) is t, t.tolist()
            (True, [2, 1])
        """
        return _ew.binary_in_place("remainder_", BinaryKind.REMAINDER, "remainder", self, other)

    @_cv.writer
    def pow_(self: Tensor, exponent: Any) -> Tensor:
        """``self ** exponent`` in place (``t **= exponent``), written back as ``add_`` writes.

        Example:
            >>> import dtorch
            >>> t = dtorch.arange(4)
            >>> t.pow_(2) is t, t.tolist()
            (True, [0, 1, 4, 9])
        """
        return _ew.binary_in_place("pow_", BinaryKind.POW, "pow", self, exponent)

    @_cv.writer
    def bitwise_and_(self: Tensor, other: Any) -> Tensor:
        """``self & other`` in place (``t &= other``): bitwise on integers, logical on
        bools, refused on floats, as in torch; written back as ``add_`` writes.

        Example:
            >>> import dtorch
            >>> t = dtorch.tensor([12, 10])
            >>> t.bitwise_and_(6) is t, t.tolist()
            (True, [4, 2])
        """
        return _ew.binary_in_place(
            "bitwise_and_", BinaryKind.BITWISE_AND, "bitwise_and", self, other
        )

    @_cv.writer
    def bitwise_or_(self: Tensor, other: Any) -> Tensor:
        """``self | other`` in place (``t |= other``): bitwise on integers, logical on
        bools, refused on floats, as in torch; written back as ``add_`` writes.

        Example:
            >>> import dtorch
            >>> t = dtorch.tensor([12, 10])
            >>> t.bitwise_or_(6) is t, t.tolist()
            (True, [14, 14])
        """
        return _ew.binary_in_place("bitwise_or_", BinaryKind.BITWISE_OR, "bitwise_or", self, other)

    @_cv.writer
    def bitwise_xor_(self: Tensor, other: Any) -> Tensor:
        """``self ^ other`` in place (``t ^= other``): bitwise on integers, logical on
        bools, refused on floats, as in torch; written back as ``add_`` writes.

        Example:
            >>> import dtorch
            >>> t = dtorch.tensor([12, 10])
            >>> t.bitwise_xor_(6) is t, t.tolist()
            (True, [10, 12])
        """
        return _ew.binary_in_place(
            "bitwise_xor_", BinaryKind.BITWISE_XOR, "bitwise_xor", self, other
        )

    @_cv.writer
    def clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:
        """``clamp(min, max)`` in place (also ``clip_``), written back as ``add_`` writes; the
        shards are clamped where they are (a Partial is refused: redistribute it first).

        Example:
            >>> import dtorch
            >>> t = dtorch.tensor([-2.0, 0.5, 3.0])
            >>> t.clamp_(-1, 1) is t, t.tolist()
            (True, [-1.0, 0.5, 1.0])
        """
        _cv.fits("clamp_", self, min, max)
        param = _clamp.number_bounds(min, max)
        if param is not None and _cv.wrote("clamp_", "clamp", param, (self,)):
            return self
        return _cv.assign("clamp_", self, _clamp.clamp(self, min, max))

    clip_ = clamp_

    fill_ = _fl.fill_
    zero_ = _fl.zero_
    normal_ = _rf.normal_
    uniform_ = _rf.uniform_
