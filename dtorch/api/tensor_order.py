# mypy: disable-error-code="misc"
# (``self: Tensor`` in a mixin of Tensor: mypy's [misc] asks a self-type to be a supertype)
"""Order statistics, running extremes and shifts as methods of ``dtorch.Tensor``, the mixin
``TensorOrder``: ``median``, ``nanmedian``, ``kthvalue``, ``mode``, ``cummax``, ``cummin``,
``logcumsumexp`` (``dtorch.api.ops.order_more``), ``bitwise_left_shift`` and
``bitwise_right_shift`` (``dtorch.api.ops.elementwise``) and the shifts' in-place forms (the
operators ``<<``, ``>>``, ``<<=``, ``>>=`` are ``Tensor``'s own, in ``dtorch.api.tensor``).
Each method is one line; the behaviour lives in ``dtorch.api.ops``.

Example:
    >>> import dtorch
    >>> t = dtorch.tensor([[3, 1, 2], [6, 4, 5]])
    >>> t.median(1).values.tolist(), t.kthvalue(3, 1).indices.tolist()
    ([2, 5], [0, 0])
    >>> t.bitwise_left_shift_(1) is t, t.tolist()
    (True, [[6, 2, 4], [12, 8, 10]])
"""

from __future__ import annotations

from dtorch.api.ops import elementwise as _ew
from dtorch.api.ops import methods as _mk
from dtorch.api.ops import order_more as _om


class TensorOrder:
    """Order statistics, running extremes and shifts of ``dtorch.Tensor`` (a mixin:
    ``Tensor`` is its only user)."""

    __slots__ = ()

    median = _om.median
    nanmedian = _om.nanmedian
    kthvalue = _om.kthvalue
    mode = _om.mode
    cummax = _om.cummax
    cummin = _om.cummin
    logcumsumexp = _om.logcumsumexp

    bitwise_left_shift = _ew.bitwise_left_shift
    bitwise_right_shift = _ew.bitwise_right_shift
    bitwise_left_shift_ = _mk.in_place("bitwise_left_shift_", _ew.bitwise_left_shift)
    bitwise_right_shift_ = _mk.in_place("bitwise_right_shift_", _ew.bitwise_right_shift)
