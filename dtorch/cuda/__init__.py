"""``dtorch.cuda``: the torch.cuda basics a DTorch program calls (thin forwards), and ``nvtx``.

Example:
    >>> import dtorch
    >>> dtorch.cuda.device_count() >= 0 and isinstance(dtorch.cuda.is_available(), bool)
    True
"""

from __future__ import annotations

import torch

from dtorch.cuda import nvtx


def is_available() -> bool:
    """``torch.cuda.is_available()``."""
    return torch.cuda.is_available()


def device_count() -> int:
    """``torch.cuda.device_count()``."""
    return torch.cuda.device_count()


__all__ = ["device_count", "is_available", "nvtx"]
