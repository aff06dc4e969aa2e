# mypy: disable-error-code="misc"
# (``self: TensorBase`` in a base of TensorBase: mypy's [misc] asks a self-type to be a supertype)
"""Python's number protocols on a dtorch tensor of one element, as torch's: ``bool(t)``
(and ``is_nonzero()``), ``int(t)``, ``float(t)``, ``complex(t)``, ``operator.index(t)`` and
``format(t, spec)``.
Each waits for the value (``item()``); torch's errors for more elements or an imaginary part
that an int or float cannot hold.

Example:
    >>> import dtorch
    >>> t = dtorch.tensor(2.5)
    >>> bool(t), int(t), float(t), complex(t), f"{t:.1f}"
    (True, 2, 2.5, (2.5+0j), '2.5')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from dtorch.errors import ParamError, ShapeError

if TYPE_CHECKING:
    from dtorch.api.handle import TensorBase


class PythonNumbers:
    """The number protocols of ``TensorBase`` (its base: every handle has them)."""

    __slots__ = ()

    #: ``format(t, spec)`` of a 0-d tensor formats its value; torch's Parameter does not.
    _FORMATS_VALUE: ClassVar[bool] = True

    def __bool__(self: TensorBase) -> bool:
        if self.numel() != 1:
            raise ShapeError(  # torch's RuntimeError
                "Boolean value of Tensor with no values is ambiguous"
                if self.numel() == 0
                else "Boolean value of Tensor with more than one value is ambiguous"
            )
        return bool(self.item())

    def is_nonzero(self: TensorBase) -> bool:
        """torch's ``is_nonzero``: ``bool(t)`` of a one-element tensor (waits for it)."""
        return self.__bool__()

    def __int__(self: TensorBase) -> int:
        return int(self._one_value("int64_t"))

    def __float__(self: TensorBase) -> float:
        return float(self._one_value("double"))

    def __complex__(self: TensorBase) -> complex:
        return complex(self._one_value(""))

    def _one_value(self: TensorBase, real: str) -> Any:
        """``item()``, with torch's messages for ``int(t)``, ``float(t)`` and ``complex(t)``
        of more elements, and for a complex value with an imaginary part where ``real`` (the
        C type torch converts it to) is asked for."""
        if self.numel() != 1:
            raise ShapeError(
                "only one element tensors can be converted to Python scalars; this one has "
                f"shape {list(self.shape)}"
            )
        value = self.item()
        if real and isinstance(value, complex):
            if value.imag:
                raise ParamError(f"value cannot be converted to type {real} without overflow")
            return value.real
        return value

    def __index__(self: TensorBase) -> int:
        if self.dtype.is_floating_point or self.dtype.is_complex:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __format__(self: TensorBase, format_spec: str) -> str:
        """torch's rule: a 0-d tensor formats its value (waits for it); any other tensor, and
        a Parameter (as torch's), takes only the empty spec (``str``), else TypeError.

        Example:
            >>> import dtorch
            >>> f"{dtorch.tensor(2.0) / 3:.3f}", format(dtorch.tensor(7), "04d")
            ('0.667', '0007')
        """
        if self.ndim == 0 and self._FORMATS_VALUE:
            return format(self.item(), format_spec)
        return object.__format__(self, format_spec)
