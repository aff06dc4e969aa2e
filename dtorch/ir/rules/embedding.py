"""Rules of Embedding and Dropout.

Embedding: inputs (ids, weight) with ids an integer tensor of any shape and weight
(num_embeddings, embedding_dim); the output is ``ids.shape + (embedding_dim,)``. Per mesh dim:

* ids Shard(d) x weight Replicate -> Shard(d) (a sharded batch of ids);
* ids Replicate x weight Shard(1) -> Shard(-1) (the embedding dim);
* ids Replicate x weight Shard(0) -> Partial: each device looks up the ids in its own vocab
  range and writes zeros for the others (vocab-parallel, as DTensor);
* ids Replicate x weight Partial -> Partial (a lookup is linear in the weight);
* R x R -> R. Anything else is rejected.

Dropout keeps a shard of any dim (the mask is drawn for the full tensor and sliced, see
``dtorch.kernels.local.dropout``) and a Partial (every part is multiplied by the same full
mask: the operator is linear in its input).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import EmbeddingParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> ids = Operand(1, (2, 5), torch.int64, mesh, (Replicate(),))
    >>> w = Operand(2, (10, 4), torch.float32, mesh, (Shard(0),))
    >>> embedding_rule("embedding", EmbeddingParam(), (ids, w)).outputs[0]
    OutputMeta(shape=(2, 5, 4), dtype=torch.float32, placements=(Partial(sum),))
"""

from __future__ import annotations

from dtorch.errors import DtypeError, ParamError, ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import DropoutParam, EmbeddingParam, OpParam
from dtorch.ir.rules.base import Inference, OutputMeta, Rule, all_replicate, replicated
from dtorch.ir.rules.gather import INDEX_DTYPES
from dtorch.ir.rules.signature import identity, one_input, one_output, signature

_VOCAB = -1  # the weight's vocab dim: contracted (a lookup, not kept)
_EMBEDDING = signature(
    "R R -> R", "Si R -> Si", "R Si -> Si", "R Sk -> P", "R P -> P",
    legend="ids x weight; i: a dim of the ids or the embedding dim of the weight; k: the vocab "
    "dim of the weight",
    hint="redistribute the ids to Replicate, or the weight, first",
)  # fmt: skip
_DROPOUT = signature("R -> R", "Si -> Si", "P -> P", legend="i: any dim")


def embedding_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``embedding(ids, weight)``: rows of ``weight`` at ``ids``."""
    assert isinstance(param, EmbeddingParam)
    ids, weight = inputs
    if ids.dtype not in INDEX_DTYPES:
        raise DtypeError(f"{name}: the ids must be int64 or int32; got {ids.dtype}")
    if weight.ndim != 2:
        raise ShapeError(
            f"{name}: the weight must be 2-D (num_embeddings, embedding_dim); got shape "
            f"{list(weight.shape)}"
        )
    _check_padding(name, param.padding_idx, weight.shape[0])
    shape = (*ids.shape, weight.shape[1])
    if all_replicate(inputs):
        return replicated(shape, weight.dtype, len(ids.placements))
    labels = (identity(ids.ndim), (_VOCAB, ids.ndim))
    return one_output(name, _EMBEDDING, inputs, labels, identity(len(shape)), shape, weight.dtype)


def _check_padding(name: str, padding_idx: int | None, rows: int) -> None:
    # torch's check: -rows <= padding_idx < rows
    if padding_idx is not None and not -rows <= padding_idx < rows:
        raise ParamError(
            f"{name}: padding_idx {padding_idx} is out of range for {rows} embeddings; "
            f"accepted: {-rows} to {rows - 1} or None"
        )


def dropout_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``dropout(x, p)``: shape, dtype and shards of x."""
    assert isinstance(param, DropoutParam)
    (x,) = inputs
    if not 0.0 <= param.p <= 1.0:
        raise ParamError(f"{name}: dropout probability has to be between 0 and 1, got {param.p}")
    if not x.dtype.is_floating_point:
        raise DtypeError(f"{name}: needs a floating-point input; got {x.dtype}")
    return one_input(name, _DROPOUT, x, identity(x.ndim), [OutputMeta(x.shape, x.dtype, ())])


RULES: dict[OpKind, Rule] = {
    OpKind.Embedding: embedding_rule,
    OpKind.Dropout: dropout_rule,
}
