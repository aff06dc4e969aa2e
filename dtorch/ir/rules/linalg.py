"""Rules of Matmul, Linear and Outer.

Labels: batch dims are the output's leading dims (broadcast as in torch), ``n`` the rows of
``a``, ``m`` the columns of ``b`` (or the out features of Linear), and ``k`` the contracted
dim. Per mesh dim: R x R -> R; a shard of a batch/row/column dim stays a shard of the output
(the other operand is chunked to match when it holds that batch dim at full size); both
operands sharded on ``k`` give Partial (a Replicate operand is chunked on ``k`` to match the
other's shard); a Partial operand times a Replicate one stays
Partial (matmul is linear in each operand).

Linear's bias is added once: with a Partial output only the partial owner (coordinate 0 on
the Partial mesh dims) adds a Replicate bias, so the sum over devices holds it exactly once;
a Partial bias (beside a Partial output) is added by every device, its pieces summing to it;
a column-parallel bias is chunked like the weight's rows.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import MatmulParam
    >>> from dtorch.ir.placement import Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> a = Operand(1, (4, 6), torch.float32, mesh, (Shard(1),))
    >>> b = Operand(2, (6, 5), torch.float32, mesh, (Shard(0),))
    >>> out = matmul_rule("matmul", MatmulParam(), (a, b)).outputs[0]
    >>> out.shape, out.placements
    ((4, 5), (Partial(sum),))
"""

from __future__ import annotations

import functools

import torch

from dtorch.errors import ShapeError, UnsupportedDtypeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import LinearParam, MatmulParam, OpParam, OuterParam
from dtorch.ir.placement import Shard
from dtorch.ir.rules.base import (
    Inference,
    Rule,
    all_replicate,
    describe_shapes,
    replicated,
)
from dtorch.ir.rules.elementwise import broadcast_labels, broadcast_or_reason
from dtorch.ir.rules.promotion import tensors_dtype
from dtorch.ir.rules.signature import Labels, identity, one_output, reject, signature

_K = 10_000  # the contracted label; output labels are the output's dim indices

_MATMUL = signature(
    "R R -> R", "Si Si -> Si", "Si R -> Si", "R Si -> Si", "Sk Sk -> P", "Sk R -> P",
    "R Sk -> P", "P R -> P", "R P -> P",
    legend="i: a batch dim, the row dim of a or the column dim of b; k: the contracted dim "
    "(a Replicate operand is chunked like the other)",
)  # fmt: skip
_LINEAR = signature(
    "R R -> R", "Si R -> Si", "R Si -> Si", "Sk Sk -> P", "Sk R -> P", "R Sk -> P", "P R -> P",
    "R P -> P",
    legend="i: a batch dim of x or the out-features dim of w; k: the in-features dim (a "
    "Replicate operand is chunked like the other)",
)  # fmt: skip
_LINEAR_BIAS = signature(
    "R R R -> R", "Si R R -> Si", "R Si R -> Si", "R Si Si -> Si", "R R Si -> Si",
    "Sk Sk R -> P", "Sk R R -> P", "R Sk R -> P", "P R R -> P", "R P R -> P",
    "Sk Sk P -> P", "Sk R P -> P", "R Sk P -> P", "P R P -> P", "R P P -> P",
    legend="i: a batch dim of x or the out-features dim of w and b; k: the in-features dim",
    hint="A Partial output adds a Replicate bias once (on the partial owner)",
)  # fmt: skip
_OUTER = signature(
    "R R -> R", "Si R -> Si", "R Si -> Si", "P R -> P", "R P -> P",
    legend="i: the dim of either vector (not both on one mesh dim)",
)  # fmt: skip


def _swap_last(dims: tuple[int, ...], swap: bool) -> tuple[int, ...]:
    """``dims`` (a shape or labels) with the last two swapped: a transposed operand."""
    return (*dims[:-2], dims[-1], dims[-2]) if swap and len(dims) >= 2 else dims


def matmul_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``torch.matmul`` of 1-D, 2-D and batched operands (with optional transposes)."""
    assert isinstance(param, MatmulParam)
    a, b = inputs
    plan = _matmul_plan(a.shape, b.shape, param.trans_a, param.trans_b)
    if plan is None:
        raise ShapeError(
            f"{name}: shapes {describe_shapes(inputs)} cannot be multiplied "
            f"(trans_a={param.trans_a}, trans_b={param.trans_b}); the last dim of a must "
            f"equal the second-to-last dim of b (the only dim of a 1-D operand), and the "
            f"batch dims must broadcast"
        )
    shape, labels = plan
    unimplemented = _batched_refusal(a.ndim, b.ndim, a.dtype, b.dtype)
    if unimplemented:
        raise UnsupportedDtypeError(f"{name}: torch rejects these dtypes: {unimplemented}")
    dtype = tensors_dtype(name, OpKind.Matmul, ((a.dtype, False), (b.dtype, False)))
    if all_replicate(inputs):
        return replicated(shape, dtype, len(a.placements))
    if _shards_a_broadcast_dim(inputs, labels):
        raise reject(name, _MATMUL, inputs, "a batch dim of size 1 that broadcasts is sharded")
    return one_output(name, _MATMUL, inputs, labels, identity(len(shape)), shape, dtype)


def _shards_a_broadcast_dim(inputs: tuple[Operand, ...], labels: tuple[Labels, ...]) -> bool:
    # such a dim (a label < 0) is kept by no output, as the contracted dim is, but "Sk R -> P"
    # holds only for the contracted dim, which the Replicate operand is chunked on
    return any(
        isinstance(p, Shard) and lab[p.dim] < 0
        for o, lab in zip(inputs, labels, strict=True)
        for p in o.placements
    )


@functools.cache
def _batched_refusal(rank_a: int, rank_b: int, a: torch.dtype, b: torch.dtype) -> str:
    """torch's NotImplementedError text for a matmul of these ranks and dtypes ('' where it
    has a kernel): the dtype probe multiplies matrices, and ``bmm`` refuses a bool first
    operand before it compares the dtypes (a RuntimeError for matrices).

    Example:
        >>> print(_batched_refusal(3, 3, torch.bool, torch.float32))
        "bmm" not implemented for 'Bool'
        >>> _batched_refusal(2, 2, torch.bool, torch.float32)
        ''
    """
    try:
        torch.matmul(torch.zeros((1,) * rank_a, dtype=a), torch.zeros((1,) * rank_b, dtype=b))
    except NotImplementedError as error:
        return str(error).split("\n", 1)[0]
    except (RuntimeError, ValueError):  # the dtype probe words torch's other refusals
        return ""
    return ""


@functools.lru_cache(maxsize=4096)
def _matmul_plan(
    a: tuple[int, ...], b: tuple[int, ...], trans_a: bool, trans_b: bool
) -> tuple[tuple[int, ...], tuple[Labels, Labels]] | None:
    """Output shape and operand labels of a matmul, or None when the shapes do not fit."""
    sa, sb = _swap_last(a, trans_a), _swap_last(b, trans_b)
    if not sa or not sb or sa[-1] != sb[-2 if len(sb) > 1 else 0]:
        return None
    batch = broadcast_or_reason((sa[:-2], sb[:-2]))
    if isinstance(batch, str):
        return None
    rows, cols = sa[-2:-1], sb[-1:] if len(sb) > 1 else ()
    nb = len(batch)
    batch_a, batch_b = broadcast_labels((sa[:-2], sb[:-2]), batch)
    la = (*batch_a, *((nb,) if rows else ()), _K)
    lb = (*batch_b, _K, *((nb + len(rows),) if cols else ()))
    return (*batch, *rows, *cols), (_swap_last(la, trans_a), _swap_last(lb, trans_b))


def linear_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``x @ w.T (+ b)`` with ``w`` of shape (out_features, in_features), or ``x @ w (+ b)``
    with a 1-D ``w`` (in_features,) and a 0-d ``b`` (torch's vector form: the last dim of x
    goes)."""
    assert isinstance(param, LinearParam)
    x, w, *bias = inputs
    _check_linear(name, x, w, bias)
    vector = w.ndim == 1
    shape = x.shape[:-1] if vector else (*x.shape[:-1], w.shape[0])
    dtype = tensors_dtype(name, OpKind.Linear, tuple((o.dtype, False) for o in inputs))
    if all_replicate(inputs):
        return replicated(shape, dtype, len(x.placements))
    o = x.ndim - 1
    w_labels = (_K,) if vector else (o, _K)
    labels: tuple[Labels, ...] = (
        (*range(o), _K),
        w_labels,
        *[_bias_labels(b, shape) for b in bias],
    )
    sig = _LINEAR_BIAS if bias else _LINEAR
    return one_output(name, sig, inputs, labels, identity(len(shape)), shape, dtype)


def _bias_labels(bias: Operand, shape: tuple[int, ...]) -> Labels:
    """A bias of the out-features (the output's last dim: its label), or one that broadcasts
    to them (a size-1 dim: a label of its own, which no shard of the output can come from;
    0-d: none)."""
    if not bias.shape:
        return ()
    return (len(shape) - 1,) if bias.shape == shape[-1:] else (-1,)


def _check_linear(name: str, x: Operand, w: Operand, bias: list[Operand]) -> None:
    # torch's shapes: x (..., in) with w (out, in) and an optional bias (out,) or one that
    # broadcasts to it ((1,), ()); or w (in,), with an optional 0-d bias (not for a 2-D x:
    # torch's addmm path refuses that one)
    vector_bias = w.ndim == 1 and bias and (bias[0].ndim != 0 or x.ndim == 2)
    fits = x.ndim >= 1 and w.ndim in (1, 2) and not vector_bias
    if not fits or x.shape[-1] != w.shape[-1]:
        raise ShapeError(
            f"{name}: x {list(x.shape)} and weight {list(w.shape)} do not match; accepted: x "
            f"(..., in_features) and weight (out_features, in_features), or weight "
            f"(in_features,) with at most a 0-d bias (and then an x that is not 2-D)"
        )
    if bias and w.ndim == 2 and bias[0].shape not in ((w.shape[0],), (1,), ()):
        raise ShapeError(
            f"{name}: bias {list(bias[0].shape)} must be [{w.shape[0]}] (or [1], or 0-d)"
        )


def outer_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``torch.outer`` of two 1-D tensors."""
    assert isinstance(param, OuterParam)
    a, b = inputs
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"{name}: needs two 1-D tensors, got {describe_shapes(inputs)}")
    shape = (a.shape[0], b.shape[0])
    dtype = tensors_dtype(name, OpKind.Outer, ((a.dtype, False), (b.dtype, False)))
    if all_replicate(inputs):
        return replicated(shape, dtype, len(a.placements))
    return one_output(name, _OUTER, inputs, ((0,), (1,)), (0, 1), shape, dtype)


RULES: dict[OpKind, Rule] = {
    OpKind.Matmul: matmul_rule,
    OpKind.Linear: linear_rule,
    OpKind.Outer: outer_rule,
}
