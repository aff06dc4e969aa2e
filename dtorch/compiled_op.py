"""``dtorch.compiled_op``: the fused operators' computations as plain torch functions.

The same math the fused dtorch operators run on each device's shards (``F._apply_rotary_emb``,
``F._silu_linear_chunk``, ``F._layer_norm_mul_add``), usable on ordinary torch tensors.

They run eagerly. ``torch.compile`` works with this CPU torch (2.13, with gcc), but compiling
even one elementwise function took 22 s on this 2-core machine, more than every dtorch test
together spends on these operators, so nothing here compiles implicitly; ``compiled(fn)``
returns the ``torch.compile``d form for callers who run a function often enough to repay it.

Layouts:

* rotary embedding: ``x * cos + rotate_half(x) * sin`` as transformers' Llama applies it
  (``apply_rotary_pos_emb``): ``cos``/``sin`` broadcast to ``x`` (for q of shape
  ``(batch, heads, seq, head_dim)`` they are ``(batch, 1, seq, head_dim)`` or
  ``(seq, head_dim)``), and ``rotate_half`` pairs feature ``i`` with ``i + head_dim / 2``.
  ``interleaved=True`` pairs features ``2i`` and ``2i + 1`` instead (GPT-J / Meta's layout;
  cos and sin then hold each frequency twice, at ``2i`` and ``2i + 1``).
* ``silu_linear_chunk(x, w)``: ``a, b = linear(x, w).chunk(2, -1); silu(a) * b`` (SwiGLU with
  ``w = cat([w_gate, w_up])``); ``w`` may also be the ``(2, out, in)`` view of those rows.
* ``layer_norm_mul_add(x, normalized_shape, mul, add, eps)``: ``layer_norm(x) * mul + add``
  (no affine parameters of its own: ``mul`` and ``add`` are the scale and shift).

Example:
    >>> import torch
    >>> x, w = torch.randn(3, 4), torch.randn(10, 4)
    >>> a, b = torch.nn.functional.linear(x, w).chunk(2, -1)
    >>> torch.allclose(silu_linear_chunk(x, w), torch.nn.functional.silu(a) * b)
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """transformers' ``rotate_half``: ``cat(-x2, x1)`` of the two halves of the last dim."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotate_interleaved(x: torch.Tensor) -> torch.Tensor:
    """The interleaved rotation: ``(x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...)``."""
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((-odd, even), dim=-1).flatten(-2)


def apply_rotary_emb(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False
) -> torch.Tensor:
    """``x * cos + rotate(x) * sin`` (see the module for the two layouts).

    Example:
        >>> import torch
        >>> apply_rotary_emb(torch.tensor([1.0, 2.0]), torch.zeros(2), torch.ones(2)).tolist()
        [-2.0, 1.0]
    """
    rotated = rotate_interleaved(x) if interleaved else rotate_half(x)
    return x * cos + rotated * sin


def silu_linear_chunk(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``silu(a) * b`` with ``a, b = linear(x, weight).chunk(2, -1)``; a 3-D ``weight`` is
    the ``(2, out, in)`` view of the 2-D one (gate rows, then up rows)."""
    if weight.ndim == 3:
        return F.silu(F.linear(x, weight[0])) * F.linear(x, weight[1])
    a, b = F.linear(x, weight).chunk(2, dim=-1)
    return F.silu(a) * b


def layer_norm_mul_add(
    x: torch.Tensor,
    normalized_shape: Sequence[int],
    mul: torch.Tensor,
    add: torch.Tensor,
    eps: float = 1e-5,
) -> torch.Tensor:
    """``layer_norm(x, normalized_shape, eps=eps) * mul + add``."""
    return F.layer_norm(x, tuple(normalized_shape), eps=eps) * mul + add


def compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile(fn)``: compiles at its first call (tens of seconds on a small CPU)."""
    return torch.compile(fn)


__all__ = [
    "apply_rotary_emb",
    "compiled",
    "layer_norm_mul_add",
    "rotate_half",
    "rotate_interleaved",
    "silu_linear_chunk",
]
