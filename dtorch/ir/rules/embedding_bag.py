"""Rule of EmbeddingBag: ``embedding_bag(ids, weight[, offsets][, per_sample_weights])``.

The output is (bags, embedding_dim): one bag per row of 2-D ids, or per offset of 1-D ids
(one fewer with ``include_last_offset``). Per mesh dim:

* ids R x weight R -> R;
* 2-D ids Shard(0) (the bags) x weight R -> Shard(0): each device reduces its own bags
  (per-sample weights sharded alike; a Replicate one is chunked to match);
* ids R x weight Shard(1) (the embedding dim) -> Shard(1);
* ids R x weight Shard(0) (the vocab) -> Partial, for ``sum`` and ``mean``: each device
  reduces the entries whose rows it holds (a mean divides by the whole bag's count), the
  parts summing to the bag's value; ``max`` is refused (a maximum is not a sum of parts);
* ids R x weight Partial -> Partial, for ``sum`` and ``mean`` (linear in the weight).

Offsets are Replicate always (a bag's entries may lie on any device), and so are 1-D ids and
their weights. A device with whole bags and whole rows (the first three rows) runs torch's own
``embedding_bag`` on them, so its values are torch's bit for bit.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import EmbeddingBagParam
    >>> from dtorch.ir.placement import Replicate, Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> ids = Operand(1, (4, 5), torch.int64, mesh, (Shard(0),))
    >>> w = Operand(2, (10, 3), torch.float32, mesh, (Replicate(),))
    >>> embedding_bag_rule("embedding_bag", EmbeddingBagParam("sum"), (ids, w)).outputs[0]
    OutputMeta(shape=(4, 3), dtype=torch.float32, placements=(Shard(dim=0),))
"""

from __future__ import annotations

import functools

import torch

from dtorch.errors import DtypeError, ParamError, ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import EmbeddingBagParam, OpParam
from dtorch.ir.rules.base import Inference, Rule, all_replicate, replicated
from dtorch.ir.rules.gather import INDEX_DTYPES
from dtorch.ir.rules.signature import Labels, Signature, one_output, signature

_LEGEND = (
    "ids x weight[ x offsets][ x per_sample_weights]; i: the bags of 2-D ids or the embedding "
    "dim of the weight; k: a bag's entries, the vocab dim of the weight, the offsets"
)
_HINT = (
    "redistribute the ids (but for the bags of 2-D ids), the offsets and the per-sample weights "
    "to Replicate, or the weight, first; a vocab-sharded or Partial weight takes mode sum or mean"
)


@functools.cache
def _signature(linear: bool, offsets: bool, weighted: bool) -> Signature:
    """The table of one mesh dim: ``linear`` (sum or mean) takes a vocab-split or Partial
    weight; offsets and 1-D ids are Replicate; 2-D ids may shard their bags."""
    rest = " R" * offsets + " R" * weighted  # offsets and per-sample weights: Replicate
    rows = ["R R" + rest + " -> R", "R Si" + rest + " -> Si"]
    if not offsets:  # bags of 2-D ids: their weights sharded alike, or chunked from Replicate
        rows += ["Si R Si -> Si", "Si R R -> Si"] if weighted else ["Si R -> Si"]
    if linear:
        rows += ["R Sk" + rest + " -> P", "R P" + rest + " -> P"]
    return signature(*rows, legend=_LEGEND, hint=_HINT)


_MODES = ("sum", "mean", "max")


def embedding_bag_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``embedding_bag``: one (bags, embedding_dim) output; see the module doc."""
    assert isinstance(param, EmbeddingBagParam)
    ids, weight = inputs[:2]
    _check(name, param, inputs)
    bags = ids.shape[0] if ids.ndim == 2 else inputs[2].shape[0] - param.include_last_offset
    shape = (bags, weight.shape[1])
    if all_replicate(inputs):
        return replicated(shape, weight.dtype, len(ids.placements))
    sig = _signature(param.mode != "max", param.offsets, param.weighted)
    return one_output(name, sig, inputs, _labels(param, ids.ndim), (0, 1), shape, weight.dtype)


def _labels(param: EmbeddingBagParam, ndim: int) -> tuple[Labels, ...]:
    # bags 0 and the embedding dim 1 kept; a bag's entries, the vocab and the offsets not
    ids: Labels = (0, -1) if ndim == 2 else (-1,)
    labels: list[Labels] = [ids, (-2, 1)]
    if param.offsets:
        labels.append((-3,))
    if param.weighted:
        labels.append(ids)
    return tuple(labels)


def _check(name: str, param: EmbeddingBagParam, inputs: tuple[Operand, ...]) -> None:
    """torch's refusals of the arguments (those a value decides are the kernel's)."""
    ids, weight = inputs[:2]
    if param.mode not in _MODES:
        raise ParamError(f"{name}: mode has to be one of sum, mean or max; got {param.mode!r}")
    if ids.dtype not in INDEX_DTYPES:
        raise DtypeError(f"{name}: the ids must be int64 or int32; got {ids.dtype}")
    if weight.ndim != 2:
        raise ShapeError(
            f"{name}: the weight must be 2-D (num_embeddings, embedding_dim); got shape "
            f"{list(weight.shape)}"
        )
    if not weight.dtype.is_floating_point:
        raise DtypeError(f"{name}: the weight must be floating point; got {weight.dtype}")
    if ids.ndim != (1 if param.offsets else 2):
        raise ShapeError(
            f"{name}: the ids must be 2-D (bags of equal length) without offsets, or 1-D with "
            f"offsets; got {ids.ndim}-D ids {'with' if param.offsets else 'without'} offsets"
        )
    _check_extras(name, param, inputs)


def _check_extras(name: str, param: EmbeddingBagParam, inputs: tuple[Operand, ...]) -> None:
    ids, weight = inputs[:2]
    rest = list(inputs[2:])
    offsets = rest.pop(0) if param.offsets else None
    if offsets is not None and (offsets.ndim != 1 or offsets.dtype not in INDEX_DTYPES):
        raise ShapeError(
            f"{name}: offsets must be a 1-D int64 or int32 tensor; got {offsets.ndim}-D "
            f"{offsets.dtype}"
        )
    if offsets is not None and param.include_last_offset and offsets.shape[0] < 1:
        raise ShapeError(f"{name}: include_last_offset needs at least one offset")
    psw = rest.pop(0) if param.weighted else None
    if psw is not None and param.mode != "sum":
        raise ParamError(
            f"{name}: per_sample_weights is only supported for mode='sum' (got mode='{param.mode}')"
        )
    if psw is not None and (psw.shape != ids.shape or psw.dtype != weight.dtype):
        raise ShapeError(
            f"{name}: per_sample_weights must have the ids' shape {list(ids.shape)} and the "
            f"weight's dtype {weight.dtype}; got {list(psw.shape)} {psw.dtype}"
        )
    rows = weight.shape[0]
    if param.padding_idx is not None and not 0 <= param.padding_idx < rows:
        raise ParamError(
            f"{name}: Padding_idx must be within num_embeddings: got {param.padding_idx} for "
            f"{rows} embeddings; accepted: {-rows} to {rows - 1} or None"
        )


def check_offsets(offsets: torch.Tensor, entries: int, include_last_offset: bool) -> None:
    """torch's checks of the offsets, and one of its own: with ``include_last_offset`` the last
    offset must be the number of entries (torch's kernels read it differently else: some run
    the last bag to the end, some stop at it).

    Example:
        >>> check_offsets(torch.tensor([0, 2]), 3, include_last_offset=False)
    """
    if include_last_offset and offsets.numel() and int(offsets[-1]) != entries:
        raise RuntimeError(
            f"embedding_bag: with include_last_offset=True the last offset must be the input's "
            f"length {entries} (it ends the last bag), got {int(offsets[-1])}"
        )
    if offsets.numel() and int(offsets[0]) != 0:
        raise RuntimeError(
            "embedding_bag: offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
            f"has to start from position 0. However, got {int(offsets[0])}"
        )
    if offsets.numel() and int(offsets[-1]) > entries:
        raise RuntimeError(
            f"embedding_bag: offsets[-1] can not be greater than input's length {entries} but "
            f"got offsets[-1] of {int(offsets[-1])}"
        )
    if offsets.numel() > 1 and bool((offsets[1:] < offsets[:-1]).any()):
        raise RuntimeError("embedding_bag: offsets must be non-decreasing")


RULES: dict[OpKind, Rule] = {OpKind.EmbeddingBag: embedding_bag_rule}
