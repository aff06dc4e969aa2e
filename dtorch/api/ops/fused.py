"""The fused operators: ``_apply_rotary_emb``, ``_silu_linear_chunk``, ``_layer_norm_mul_add``.

Each records one operator whose kernel runs ``dtorch.compiled_op``'s math (layouts and the
meaning of a tensor-parallel SwiGLU weight are defined there; placements in
``dtorch.ir.rules.fused``). A torch tensor among the secondary inputs (cos, sin, mul, add) is
distributed Replicate on x's mesh.

Example:
    >>> import torch, dtorch
    >>> import dtorch.nn.functional as F
    >>> x = dtorch.tensor([[1.0, 2.0]])
    >>> F._apply_rotary_emb(x, [torch.zeros(2), torch.ones(2)]).tolist()
    [[-2.0, 1.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.creation import from_torch
from dtorch.api.dims import as_flag
from dtorch.api.record import record_one
from dtorch.ir.params import ApplyRotaryEmbParam, LayerNormMulAddParam, SiluLinearChunkParam
from dtorch.ir.placement import Replicate

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor

_SILU = SiluLinearChunkParam()


def _on_mesh_of(x: Tensor, value: Any) -> Tensor:
    """``value`` as a dtorch tensor beside ``x`` (a torch tensor goes Replicate)."""
    if not isinstance(value, torch.Tensor):
        return value
    mesh = x.device_mesh
    return from_torch(value, graph=x.graph, device_mesh=mesh, placements=[Replicate()] * mesh.ndim)


def _apply_rotary_emb(x: Tensor, cos_sin: Sequence[Any], interleaved: bool = False) -> Tensor:
    """``x * cos + rotate_half(x) * sin`` as transformers' Llama applies rotary embeddings
    (``interleaved=True``: features ``2i``, ``2i + 1`` form the pairs); ``cos_sin`` is
    ``[cos, sin]``, each broadcasting to x (e.g. ``(seq, head_dim)`` for x of shape
    ``(batch, heads, seq, head_dim)``). The feature dim must not be sharded.

    Example:
        >>> import torch, dtorch
        >>> import dtorch.nn.functional as F
        >>> cos, sin = torch.ones(3, 4), torch.zeros(3, 4)
        >>> x = dtorch.ones(2, 3, 4)
        >>> F._apply_rotary_emb(x, [cos, sin]).to_torch().equal(torch.ones(2, 3, 4))
        True
    """
    if len(cos_sin) != 2:
        raise TypeError(f"_apply_rotary_emb: cos_sin must be [cos, sin], got {len(cos_sin)} items")
    cos, sin = (_on_mesh_of(x, t) for t in cos_sin)
    param = ApplyRotaryEmbParam(as_flag(interleaved, "_apply_rotary_emb", "interleaved"))
    return record_one("_apply_rotary_emb", param, (x, cos, sin))


def _silu_linear_chunk(x: Tensor, weight: Tensor) -> Tensor:
    """``a, b = linear(x, weight).chunk(2, -1); silu(a) * b`` (SwiGLU) in one operator.
    ``weight`` is ``(2 * out, in)`` (gate rows, then up rows), or its ``(2, out, in)`` view:
    shard that view on dim 1 for tensor parallelism (each device holds the gate and up rows
    of its own output features, and the output is sharded on its last dim).

    Example:
        >>> import torch, dtorch
        >>> import dtorch.nn.functional as F
        >>> x, w = torch.randn(3, 4), torch.randn(6, 4)
        >>> a, b = torch.nn.functional.linear(x, w).chunk(2, -1)
        >>> out = F._silu_linear_chunk(dtorch.tensor(x), dtorch.tensor(w)).to_torch()
        >>> torch.allclose(out, torch.nn.functional.silu(a) * b)
        True
    """
    return record_one("_silu_linear_chunk", _SILU, (x, _on_mesh_of(x, weight)))


def _layer_norm_mul_add(
    x: Tensor, normalized_shape: int | Sequence[int], mul: Any, add: Any, eps: float = 1e-5
) -> Tensor:
    """``layer_norm(x, normalized_shape, eps=eps) * mul + add`` in one operator (``mul``
    and ``add`` broadcast to x; the normalized dims must not be sharded).

    Example:
        >>> import torch, dtorch
        >>> import dtorch.nn.functional as F
        >>> x = dtorch.tensor([[1.0, 3.0]])
        >>> out = F._layer_norm_mul_add(x, [2], torch.full((2,), 2.0), torch.ones(2))
        >>> out.to_torch().allclose(torch.tensor([[-1.0, 3.0]]), atol=1e-4)
        True
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    param = LayerNormMulAddParam(shape, float(eps))
    inputs = (x, _on_mesh_of(x, mul), _on_mesh_of(x, add))
    return record_one("_layer_norm_mul_add", param, inputs)
