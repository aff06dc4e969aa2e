"""Rules of the fused operators: ApplyRotaryEmb, SiluLinearChunk, LayerNormMulAdd.

Their math is ``dtorch.compiled_op``'s (layouts defined there). Placements per mesh dim:

* ApplyRotaryEmb ``(x, cos, sin)``: cos and sin broadcast to x; elementwise except on the
  last (feature) dim, which the rotation mixes and which must not be sharded; ``P R R -> P``
  (linear in x).
* SiluLinearChunk ``(x, w)``: ``w`` is ``(2 * out, in)`` as torch's ``chunk`` reads it, or
  its ``(2, out, in)`` view. A batch dim of x, or the ``out`` dim of the 3-D view (each
  device then holds the gate rows and the up rows of its own features: that is what a
  tensor-parallel weight means here), shards the output's last dim or batch dim. The rows of
  the 2-D form, the in-features and the gate/up dim cannot be sharded (silu is not linear).
* LayerNormMulAdd ``(x, mul, add)``: mul and add broadcast to x; any dim outside
  ``normalized_shape`` may be sharded; ``R P P -> P`` (linear in mul and add together).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import SiluLinearChunkParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> x = Operand(1, (4, 8), torch.float32, mesh, (Replicate(),))
    >>> w = Operand(2, (2, 6, 8), torch.float32, mesh, (Shard(1),))
    >>> silu_linear_chunk_rule("f", SiluLinearChunkParam(), (x, w)).outputs[0].placements
    (Shard(dim=1),)
"""

from __future__ import annotations

from dtorch.errors import DtypeError, ParamError, ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import (
    ApplyRotaryEmbParam,
    LayerNormMulAddParam,
    OpParam,
    SiluLinearChunkParam,
)
from dtorch.ir.rules.base import Inference, Rule, all_replicate, describe_shapes, replicated
from dtorch.ir.rules.elementwise import broadcast_labels, broadcast_or_reason
from dtorch.ir.rules.signature import (
    Signature,
    elementwise,
    fresh_labels,
    one_output,
    signature,
)

_ROTARY = elementwise(
    3, ["P R R -> P"], legend="i: a dim of x other than the feature (last) dim",
    hint="the rotation mixes the feature dim: redistribute it to Replicate first",
)  # fmt: skip
_SILU = signature(
    "R R -> R", "Si R -> Si", "R Si -> Si",
    legend="i: a batch dim of x, or the out-features dim of the (2, out, in) weight view",
    hint="shard the weight's (2, out, in) view on dim 1 for tensor parallelism",
)  # fmt: skip
_LN = elementwise(
    3, ["R P P -> P"], legend="i: a dim of x outside normalized_shape",
    hint="redistribute the normalized dims to Replicate first",
)  # fmt: skip
_K = 30_000  # contracted labels


def _same_float(name: str, inputs: tuple[Operand, ...]) -> None:
    dtypes = {o.dtype for o in inputs}
    if len(dtypes) != 1 or not inputs[0].dtype.is_floating_point:
        got = ", ".join(str(o.dtype) for o in inputs)
        raise DtypeError(f"{name}: inputs have dtypes {got}; accepted: one floating dtype")


def _broadcast_to_x(name: str, inputs: tuple[Operand, ...], what: str) -> tuple[int, ...]:
    x = inputs[0]
    shape = broadcast_or_reason(tuple(o.shape for o in inputs))
    if shape != x.shape:
        raise ShapeError(
            f"{name}: shapes {describe_shapes(inputs)}; accepted: {what} broadcasting to x's "
            f"shape {list(x.shape)}"
        )
    return x.shape


def _elementwise_except(
    name: str, sig: Signature, inputs: tuple[Operand, ...], fixed: int
) -> Inference:
    """An elementwise inference whose last ``fixed`` dims cannot be sharded."""
    x = inputs[0]
    _same_float(name, inputs)
    if all_replicate(inputs):
        return replicated(x.shape, x.dtype, len(x.placements))
    labels = broadcast_labels(tuple(o.shape for o in inputs), x.shape)
    out = fresh_labels(x.ndim, range(x.ndim - fixed, x.ndim))
    return one_output(name, sig, inputs, labels, out, x.shape, x.dtype)


def rotary_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``x * cos + rotate(x) * sin`` (``dtorch.compiled_op.apply_rotary_emb``)."""
    assert isinstance(param, ApplyRotaryEmbParam)
    x = inputs[0]
    _broadcast_to_x(name, inputs, "cos and sin")
    if x.ndim == 0 or x.shape[-1] % 2:
        raise ShapeError(f"{name}: x of shape {list(x.shape)} needs an even last (feature) dim")
    return _elementwise_except(name, _ROTARY, inputs, 1)


def layer_norm_mul_add_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``layer_norm(x, normalized_shape) * mul + add``."""
    assert isinstance(param, LayerNormMulAddParam)
    x, n = inputs[0], len(param.normalized_shape)
    if n == 0 or x.shape[x.ndim - n :] != tuple(param.normalized_shape) or n > x.ndim:
        raise ShapeError(
            f"{name}: normalized_shape {list(param.normalized_shape)} is not the trailing "
            f"shape of x {list(x.shape)}"
        )
    _broadcast_to_x(name, inputs, "mul and add")
    return _elementwise_except(name, _LN, inputs, n)


def silu_linear_chunk_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``silu(a) * b`` with ``a, b = linear(x, w).chunk(2, -1)``."""
    assert isinstance(param, SiluLinearChunkParam)
    x, w = inputs
    if param.dim not in (-1, x.ndim - 1):
        raise ParamError(f"{name}: chunks the last dim only, got dim={param.dim}")
    out = _silu_out(name, x, w)
    _same_float(name, inputs)
    shape = (*x.shape[:-1], out)
    if all_replicate(inputs):
        return replicated(shape, x.dtype, len(x.placements))
    o = x.ndim - 1
    w_labels = (_K + 1, _K) if w.ndim == 2 else (_K + 1, o, _K)
    labels = ((*range(o), _K), w_labels)
    return one_output(name, _SILU, inputs, labels, tuple(range(x.ndim)), shape, x.dtype)


def _silu_out(name: str, x: Operand, w: Operand) -> int:
    """The output features; ShapeError unless w is (2 * out, in) or (2, out, in)."""
    fits = x.ndim >= 1 and w.ndim in (2, 3) and w.shape[-1] == x.shape[-1]
    fits = fits and (w.shape[0] % 2 == 0 if w.ndim == 2 else w.shape[0] == 2)
    if not fits:
        raise ShapeError(
            f"{name}: x {list(x.shape)} and weight {list(w.shape)} do not fit; accepted: x "
            "(..., in) and weight (2 * out, in) or (2, out, in)"
        )
    return w.shape[0] // 2 if w.ndim == 2 else w.shape[1]


RULES: dict[OpKind, Rule] = {
    OpKind.ApplyRotaryEmb: rotary_rule,
    OpKind.SiluLinearChunk: silu_linear_chunk_rule,
    OpKind.LayerNormMulAdd: layer_norm_mul_add_rule,
}
