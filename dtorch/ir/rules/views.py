"""Rules of the shape operators: View, Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
Permute, Expand, Contiguous.

All are linear, so Partial stays Partial. Dim moves (squeeze, unsqueeze, transpose, permute,
expand) move the shard index with the dim. A view that merges or splits dims keeps a shard
only on the outermost (non-1) dim of such a group, and only when every device's local view is
exactly its slice of the global result: the flat range a device holds before the view must be
the chunk it holds after it (e.g. flattening (8, 3) sharded on dim 0 over 4 devices is fine,
(6, 3) is not: 6 rows split 2, 2, 2, 0 but 18 elements split 5, 5, 5, 3).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import FlattenParam
    >>> from dtorch.ir.placement import Shard
    >>> x = Operand(1, (8, 3, 2), torch.float32, init_device_mesh("cpu", 4), (Shard(0),))
    >>> flatten_rule("flatten", FlattenParam(0, 1), (x,)).outputs[0]
    OutputMeta(shape=(24, 2), dtype=torch.float32, placements=(Shard(dim=0),))
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from dtorch.errors import PlacementError, ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import (
    ContiguousParam,
    ExpandParam,
    FlattenParam,
    OpParam,
    PermuteParam,
    ReshapeParam,
    SqueezeParam,
    TransposeParam,
    UnsqueezeParam,
    ViewParam,
)
from dtorch.ir.placement import Placement, format_placements
from dtorch.ir.rules.base import (
    Inference,
    OutputMeta,
    Rule,
    all_replicate,
    norm_dim,
    norm_dims,
    replicated,
)
from dtorch.ir.rules.layout import Group, check_groups
from dtorch.ir.rules.signature import Labels, expand, identity, one_output, signature

_MOVE = signature("R -> R", "Si -> Si", "P -> P", legend="i: a dim the output keeps")
_VIEW = signature(
    "R -> R", "Si -> Si", "P -> P",
    legend="i: a dim kept as is, or the outermost dim of merged or split dims",
    hint="redistribute the sharded dim to Replicate first",
)  # fmt: skip


def _moved(name: str, x: Operand, shape: tuple[int, ...], out_labels: Labels) -> Inference:
    """Placements of a dim-moving operator: the shard follows its label."""
    if all_replicate((x,)):
        return replicated(shape, x.dtype, len(x.placements))
    return one_output(name, _MOVE, (x,), (identity(x.ndim),), out_labels, shape, x.dtype)


def view_shape(name: str, shape: tuple[int, ...], target: Sequence[int]) -> tuple[int, ...]:
    """``target`` with its one -1 inferred; ShapeError when the element counts differ.

    Example:
        >>> view_shape("view", (4, 6), (-1, 3))
        (8, 3)
    """
    if -1 not in target and target == shape:
        return shape
    known = math.prod(s for s in target if s != -1)
    holes = [i for i, s in enumerate(target) if s == -1]
    numel = math.prod(shape)
    if len(holes) > 1 or any(s < -1 for s in target) or (holes and known == 0):
        raise ShapeError(f"{name}: shape {list(target)} is invalid (one -1 at most, sizes >= 0)")
    out = list(target)
    if holes:
        out[holes[0]] = numel // known if numel % known == 0 else -1
    if out.count(-1) or math.prod(out) != numel:
        raise ShapeError(f"{name}: shape {list(target)} is invalid for input of size {numel}")
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def view_groups(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[Group, ...]:
    """Pairs (input dims, output dims) whose sizes multiply to the same number, ignoring size-1
    dims; each group's first dims are the ones a shard may stay on."""
    ia = [d for d, s in enumerate(a) if s != 1]
    ib = [d for d, s in enumerate(b) if s != 1]
    if 0 in a:  # no element: one group holds every dim, nothing can stay sharded across it
        return (Group(tuple(ia), tuple(ib)),) if ia or ib else ()
    groups, j = [], 0
    i = 0
    while i < len(ia):
        gi, gj = [ia[i]], [ib[j]]
        pa, pb = a[ia[i]], b[ib[j]]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                gi.append(ia[i])
                pa, i = pa * a[ia[i]], i + 1
            else:
                gj.append(ib[j])
                pb, j = pb * b[ib[j]], j + 1
        groups.append(Group(tuple(gi), tuple(gj)))
    return tuple(groups)


@functools.lru_cache(maxsize=4096)
def _view_labels(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[Labels, Labels]:
    """Input and output labels of a view: a group's first dims share a label, the rest (and
    size-1 dims) get labels of their own."""
    la = [-1 - d for d in range(len(a))]
    lb = [-1001 - d for d in range(len(b))]
    groups = view_groups(a, b)
    for g, group in enumerate(groups):
        if group.src and group.dst:
            la[group.src[0]] = lb[group.dst[0]] = g
    for k, (d, e) in enumerate(_kept_ones(a, b)):
        la[d] = lb[e] = len(groups) + k
    return tuple(la), tuple(lb)


def _kept_ones(a: tuple[int, ...], b: tuple[int, ...]) -> list[tuple[int, int]]:
    """Size-1 dims a view keeps: the i-th one of ``a`` and of ``b`` with as many elements
    before them. A shard of a size-1 dim is everything on its first device and nothing on
    the others, so it stays a shard of the kept dim (a batch of one sharded on dp)."""

    def ones(shape: tuple[int, ...]) -> dict[int, list[int]]:
        found: dict[int, list[int]] = {}
        for d, size in enumerate(shape):
            if size == 1:
                found.setdefault(math.prod(shape[:d]), []).append(d)
        return found

    theirs = ones(b)
    return [
        pair
        for before, dims in ones(a).items()
        for pair in zip(dims, theirs.get(before, ()), strict=False)
    ]


def _viewed(name: str, x: Operand, shape: tuple[int, ...]) -> Inference:
    if all_replicate((x,)):
        return replicated(shape, x.dtype, len(x.placements))
    if shape == x.shape:
        return Inference((OutputMeta(shape, x.dtype, x.placements),))
    la, lb = _view_labels(x.shape, shape)
    expansion = expand(name, _VIEW, (x,), (la,), (lb,))
    placements = expansion.outputs[0]
    _check_view_layout(name, x, shape, placements)
    return Inference((OutputMeta(shape, x.dtype, placements),))


def _check_view_layout(
    name: str, x: Operand, shape: tuple[int, ...], placements: tuple[Placement, ...]
) -> None:
    groups = view_groups(x.shape, shape)
    bad = check_groups(x.shape, shape, x.mesh.shape, x.placements, placements, groups)
    if bad is not None:
        raise PlacementError(
            f"{name}: got {format_placements(x.placements)} on mesh {x.mesh.shape}; "
            f"viewing {list(x.shape)} as "
            f"{list(shape)} would give device {bad} a local view that is not its chunk of the "
            f"result (the sharded dim's size must divide evenly); accepted: R, P, or a shard of "
            f"a dim kept as is. Redistribute the sharded dim to Replicate first"
        )


def view_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``view``/``reshape`` to ``param.shape`` (one -1 allowed)."""
    assert isinstance(param, (ViewParam, ReshapeParam))
    (x,) = inputs
    return _viewed(name, x, view_shape(name, x.shape, param.shape))


def flatten_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``flatten(start_dim, end_dim)``."""
    assert isinstance(param, FlattenParam)
    (x,) = inputs
    if x.ndim == 0:
        norm_dim(name, param.start_dim, 0), norm_dim(name, param.end_dim, 0)
        return _viewed(name, x, (1,))
    start, end = norm_dim(name, param.start_dim, x.ndim), norm_dim(name, param.end_dim, x.ndim)
    if start > end:
        raise ShapeError(f"{name}: start_dim {param.start_dim} comes after end_dim {param.end_dim}")
    merged = math.prod(x.shape[start : end + 1])
    return _viewed(name, x, (*x.shape[:start], merged, *x.shape[end + 1 :]))


def squeeze_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``squeeze(dims)``: drops the listed dims that have size 1 (others stay, as in torch)."""
    assert isinstance(param, SqueezeParam)
    (x,) = inputs
    dims = set(norm_dims(name, param.dims, x.ndim)) if x.ndim else set()
    gone = {d for d in dims if x.shape[d] == 1}
    keep = [d for d in range(x.ndim) if d not in gone]
    return _moved(name, x, tuple(x.shape[d] for d in keep), tuple(keep))


def unsqueeze_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``unsqueeze(dim)``: a new size-1 dim at ``dim`` (counted in the output)."""
    assert isinstance(param, UnsqueezeParam)
    (x,) = inputs
    dim = norm_dim(name, param.dim, x.ndim + 1)
    labels = (*range(dim), -1, *range(dim, x.ndim))
    return _moved(name, x, (*x.shape[:dim], 1, *x.shape[dim:]), labels)


def transpose_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``transpose(dim0, dim1)``."""
    assert isinstance(param, TransposeParam)
    (x,) = inputs
    order = list(range(x.ndim))
    if x.ndim:
        d0, d1 = norm_dim(name, param.dim0, x.ndim), norm_dim(name, param.dim1, x.ndim)
        order[d0], order[d1] = order[d1], order[d0]
    else:
        norm_dim(name, param.dim0, 0), norm_dim(name, param.dim1, 0)
    return _moved(name, x, tuple(x.shape[d] for d in order), tuple(order))


def permute_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``permute(dims)``: ``dims`` must name every dim once."""
    assert isinstance(param, PermuteParam)
    (x,) = inputs
    if len(param.dims) != x.ndim:
        raise ShapeError(f"{name}: dims {param.dims} do not match a {x.ndim}-D tensor")
    order = norm_dims(name, param.dims, x.ndim) if x.ndim else ()
    return _moved(name, x, tuple(x.shape[d] for d in order), order)


def expand_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``expand(sizes)``: size-1 dims repeat, -1 keeps a size, new dims go in front."""
    assert isinstance(param, ExpandParam)
    (x,) = inputs
    lead = len(param.shape) - x.ndim
    if lead < 0:
        raise ShapeError(f"{name}: {len(param.shape)} sizes for a {x.ndim}-D tensor")
    shape, labels = list(param.shape), [-1 - j for j in range(len(param.shape))]
    for d, size in enumerate(x.shape):
        want = param.shape[lead + d]
        if want in (-1, size):
            shape[lead + d], labels[lead + d] = size, d
        elif size != 1 or want < 0:
            raise ShapeError(
                f"{name}: cannot expand {list(x.shape)} to {list(param.shape)}: dim {d} has "
                f"size {size}; only size-1 dims expand"
            )
    if any(s < 0 for s in shape[:lead]):
        raise ShapeError(f"{name}: new leading dims need sizes >= 0, got {list(param.shape)}")
    return _moved(name, x, tuple(shape), tuple(labels))


def contiguous_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``contiguous()``: the same tensor."""
    assert isinstance(param, ContiguousParam)
    (x,) = inputs
    return Inference((OutputMeta(x.shape, x.dtype, x.placements),))


RULES: dict[OpKind, Rule] = {
    OpKind.View: view_rule,
    OpKind.Reshape: view_rule,
    OpKind.Flatten: flatten_rule,
    OpKind.Squeeze: squeeze_rule,
    OpKind.Unsqueeze: unsqueeze_rule,
    OpKind.Transpose: transpose_rule,
    OpKind.Permute: permute_rule,
    OpKind.Expand: expand_rule,
    OpKind.Contiguous: contiguous_rule,
}
