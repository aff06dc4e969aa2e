"""Rules of Clone, Cast and Copy: operators that copy values, possibly converting them.

``clone`` keeps any layout. ``cast`` keeps Partial only where the conversion adds up: from a
float to a floating dtype that holds every value of it exactly (a rounded part loses what the
rounding took, and parts that cancel lose it all), or from an integer to an integer no wider
(the parts sum with wrap-around in the source's width, and reducing modulo a smaller power of
two is a ring homomorphism; a wider integer or a float would not wrap: uint8 parts 200 and 100
hold 44, not 300); never to or from bool, never float -> int (truncation is not linear).
``dst.copy_(src)`` writes into dst's own shards, so dst is never redistributed: src must
have dst's layout (a Replicate src is chunked to match a sharded dst; a src dim that
broadcasts stays Replicate).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import CastParam
    >>> from dtorch.ir.placement import Partial
    >>> x = Operand(1, (3,), torch.int16, init_device_mesh("cpu", 2), (Partial(),))
    >>> cast_rule("char", CastParam(torch.int8), (x,)).outputs[0].placements
    (Partial(sum),)
"""

from __future__ import annotations

from dtorch.errors import ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import CastParam, CloneParam, CopyParam, OpParam
from dtorch.ir.rules.base import Inference, OutputMeta, Rule, all_replicate
from dtorch.ir.rules.elementwise import broadcast_labels, broadcast_shapes
from dtorch.ir.rules.promotion import cast_is_linear, tensors_dtype
from dtorch.ir.rules.signature import elementwise, expand, identity, one_output, signature

_LINEAR = elementwise(1, ["P -> P"])
_NONLINEAR_CAST = elementwise(
    1,
    hint="Partial survives a cast to an integer no wider than its own (an integer's parts "
    "sum with wrap-around) and from a float to a float holding every value of it, only "
    "(another cast would change how its parts add up): redistribute to Replicate first",
)
_COPY = signature(
    "R R -> R", "Si Si -> Si", "Si R -> Si", "P P -> P", fixed=(0,),
    legend="dst x src; i: a dim of dst",
    hint="dst.copy_(src) writes dst's shards in place: redistribute src to dst's placements",
)  # fmt: skip
_COPY_NONLINEAR = signature(
    "R R -> R", "Si Si -> Si", "Si R -> Si", fixed=(0,),
    legend="dst x src; i: a dim of dst",
    hint="copying Partial values across these dtypes does not add up: redistribute first",
)  # fmt: skip


def clone_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``clone()``: the same metadata, any layout."""
    assert isinstance(param, CloneParam)
    (x,) = inputs
    return Inference((OutputMeta(x.shape, x.dtype, x.placements),))


def cast_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``to(dtype)`` and the ``float()``/``int()``/... family."""
    assert isinstance(param, CastParam)
    (x,) = inputs
    if all_replicate(inputs) or cast_is_linear(x.dtype, param.dtype):
        return Inference((OutputMeta(x.shape, param.dtype, x.placements),))
    labels = identity(x.ndim)
    return one_output(name, _NONLINEAR_CAST, inputs, (labels,), labels, x.shape, param.dtype)


def copy_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``dst.copy_(src)``: no outputs; src broadcasts to dst's shape and converts its dtype."""
    assert isinstance(param, CopyParam)
    dst, src = inputs
    if broadcast_shapes(name, (dst.shape, src.shape)) != dst.shape:
        raise ShapeError(
            f"{name}: source {list(src.shape)} does not broadcast to destination {list(dst.shape)}"
        )
    tensors_dtype(name, OpKind.Copy, ((dst.dtype, False), (src.dtype, False)))
    if all_replicate(inputs):
        return Inference(())
    sig = _COPY if cast_is_linear(src.dtype, dst.dtype) else _COPY_NONLINEAR
    labels = broadcast_labels((dst.shape, src.shape), dst.shape)
    expansion = expand(name, sig, inputs, labels, (identity(dst.ndim),))
    return Inference((), expansion.requested)


RULES: dict[OpKind, Rule] = {
    OpKind.Clone: clone_rule,
    OpKind.Cast: cast_rule,
    OpKind.Copy: copy_rule,
}
