"""RULES, the OpKind -> rule table, and ``infer``, the one entry point the client calls.

Each rules module exports a ``RULES`` fragment; this module merges them. A new operator is one
entry in its module's fragment.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.opkind import MathKind
    >>> from dtorch.ir.params import BaseMathParam
    >>> from dtorch.ir.placement import Partial
    >>> x = Operand(1, (3,), torch.float32, init_device_mesh("cpu", 2), (Partial(),))
    >>> infer("neg", BaseMathParam(MathKind.NEG), (x,)).outputs[0].placements
    (Partial(sum),)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import torch

from dtorch.errors import (
    MeshError,
    NoRuleError,
    PlacementError,
)
from dtorch.ir.dtypes import UNSUMMABLE_DTYPES
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import OpParam
from dtorch.ir.placement import Partial, Placement
from dtorch.ir.rules import (
    attention,
    conv,
    conv_transpose,
    copy,
    create,
    einsum,
    elementwise,
    embedding,
    embedding_bag,
    fft,
    fused,
    gather,
    grid_sample,
    indexing,
    linalg,
    linalg_fn,
    norm,
    order,
    order_stats,
    reduce,
    reinterpret,
    scatter,
    search,
    select,
    setitem,
    spatial,
    unsent,
    views,
)
from dtorch.ir.rules.base import Inference, Rule
from dtorch.ir.rules.ints import check_param_ints, check_sizes
from dtorch.ir.rules.marked import MARK_RULES
from dtorch.ir.subsplit import check_unmarked

#: Every OpKind that has a shape/placement rule.
RULES: dict[OpKind, Rule] = {
    **create.RULES,
    **elementwise.RULES,
    **linalg.RULES,
    **reduce.RULES,
    **views.RULES,
    **copy.RULES,
    **select.RULES,
    **indexing.RULES,
    **gather.RULES,
    **order.RULES,
    **order_stats.RULES,
    **search.RULES,
    **linalg_fn.RULES,
    **fft.RULES,
    **embedding_bag.RULES,
    **grid_sample.RULES,
    **conv_transpose.RULES,
    **scatter.RULES,
    **einsum.RULES,
    **setitem.RULES,
    **reinterpret.RULES,
    **attention.RULES,
    **conv.RULES,
    **fused.RULES,
    **spatial.RULES,
    **norm.RULES,
    **embedding.RULES,
    **unsent.RULES,
}


def infer(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """Output shapes, dtypes and placements of operator ``name`` (and implicit redistributions).

    Checks that every input lies on one mesh, then dispatches on ``param.kind``.
    """
    if len(inputs) > 1:
        mesh = inputs[0].mesh
        for operand in inputs:
            if operand.mesh is not mesh and operand.mesh != mesh:
                raise_meshes(name, inputs)
    check_param_ints(name, param)  # before any rule computes with them
    marked = MARK_RULES.get(param.kind)
    if marked is not None:  # cat and elementwise ops make or keep sub-split marks
        answer = marked(name, param, inputs)
        if answer is not None:
            _check_outputs(name, answer, marked=True)
            return answer
    for operand in inputs:  # the ordinary rules do not understand sub-split marks
        check_unmarked(name, operand.placements)
    rule = RULES.get(param.kind)
    if rule is None:
        raise NoRuleError(f"{name}: operator kind {param.kind.name} has no shape rule")
    inference = rule(name, param, inputs)
    _check_outputs(name, inference, marked=False)
    return inference


def _check_outputs(name: str, inference: Inference, *, marked: bool) -> None:
    """Every output's sizes are int64s (repeat(2**62) of 3 elements is not); outputs of
    ordinary rules carry no marks (created tensors neither: from_torch, zeros(placements=))."""
    for out in inference.outputs:
        check_sizes(name, out.shape, "output shape")
        if not marked:
            check_unmarked(name, out.placements, "an output")
        check_summable(name, out.dtype, out.placements)


def check_summable(name: str, dtype: torch.dtype, placements: Sequence[Placement]) -> None:
    """Refuse a Partial of a dtype torch cannot add (``UNSUMMABLE_DTYPES``): it could never
    be summed, so reading it would fail on the devices; creation and ``redistribute`` ask too.

    Example:
        >>> check_summable("from_torch", torch.uint16, (Partial(),))
        Traceback (most recent call last):
        ...
        dtorch.errors.PlacementError: from_torch: a Partial torch.uint16 could never be summed \
(torch adds no torch.uint16 tensors); accepted: Replicate or Shard placements for this dtype
    """
    if dtype in UNSUMMABLE_DTYPES and any(isinstance(p, Partial) for p in placements):
        raise PlacementError(
            f"{name}: a Partial {dtype} could never be summed (torch adds no {dtype} "
            "tensors); accepted: Replicate or Shard placements for this dtype"
        )


def raise_meshes(name: str, inputs: tuple[Operand, ...]) -> NoReturn:
    """The MeshError of an operator whose inputs lie on several meshes."""
    meshes = " and ".join(sorted({repr(o.mesh) for o in inputs}))
    raise MeshError(
        f"{name}: inputs lie on different meshes ({meshes}); move them to one mesh first "
        f"(tensor.to(mesh) or redistribute(device_mesh=...))"
    )
