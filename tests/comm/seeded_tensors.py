"""Deterministic tensors of any plain dtype, rebuilt from a seed in whichever process checks."""

from __future__ import annotations

import torch

from dtorch.ir.dtypes import dtype_from_code


def make_tensor(code: int, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """A deterministic tensor of any plain dtype (the same in every process)."""
    dtype = dtype_from_code(code)
    generator = torch.Generator().manual_seed(seed)
    base = torch.randn(shape, generator=generator, dtype=torch.float64) * 50
    if dtype is torch.bool:
        return base > 0
    if dtype.is_complex:
        return torch.complex(base, -base).to(dtype)
    return base.to(dtype)
