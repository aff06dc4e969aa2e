"""``dtorch.type``: the enums of DTorch's layer options (data layout, padding, pooling).

Example:
    >>> from dtorch.type import OperatorFormat, PaddingType, PoolingKind
    >>> OperatorFormat.nchw, PaddingType("same"), PoolingKind.max.value
    (<OperatorFormat.nchw: 'nchw'>, <PaddingType.same: 'same'>, 'max')
"""

from __future__ import annotations

from enum import Enum


class OperatorFormat(Enum):
    """Memory layout of an image tensor: batch, channels, height, width in that order."""

    nchw = "nchw"
    nhwc = "nhwc"


class PaddingType(Enum):
    """Convolution/pooling padding: explicit numbers (not_set), ``same`` or ``valid``."""

    not_set = "not_set"
    same = "same"
    valid = "valid"


class PoolingKind(Enum):
    """Pooling reduction."""

    avg = "avg"
    max = "max"


__all__ = ["OperatorFormat", "PaddingType", "PoolingKind"]
