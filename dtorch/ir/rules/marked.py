"""Rules that understand sub-split marks (``Shard(d, sub_split_coordinates=c)``).

* ``cat`` along a dim that one mesh dim shards on every input (the other mesh dims placed
  alike) keeps each device's pieces where they are: the kernel is the local cat, the result is
  ``Shard(d, sub_split_coordinates=...)`` with the boundaries between the parts (an input's
  own marks shifted into place). On every mesh dim a Replicate input beside a Shard is chunked
  to it first (a local slice, no communication); other mixes are refused.
* elementwise operators (BroadcastBinary, BaseMath, Activation, Where, Clamp; Cast, Clone,
  Contiguous, ViewDtype; Copy, so in-place forms such as ``add_`` and ``exp_`` work on marked
  tensors): operands sharded on a mesh dim that some operand marks must carry the same mark;
  Replicate operands are chunked to the marked layout (``redistribute`` to it, a local slice
  per segment); the outputs keep the mark.
* ``t[a:b]`` with ``a`` and ``b`` on segment boundaries (0, the coordinates, the size) and the
  other dims whole: the pieces of those segments, a plain ``Shard(d)`` for one segment.
* ``view([placements])`` (ViewPlacements, ``dtorch.ir.rules.reinterpret``): the marked shards
  read as plain ones where every local size is the plain chunk size (the mark is dropped).
* creation (Create: ``zeros_like`` of a marked tensor) in marks that ``check_marks`` accepts:
  the Create rule's output (its kernel slices each segment of a marked dim).

Each rule returns None where it does not apply; ``dtorch.ir.rules.registry.infer`` then runs
the ordinary rule, which refuses marks (``check_unmarked``).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.params import ConcatParam
    >>> from dtorch.ir.placement import Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> a = Operand(1, (4,), torch.float32, mesh, (Shard(0),))
    >>> b = Operand(2, (6,), torch.float32, mesh, (Shard(0),))
    >>> concat_marked("cat", ConcatParam(0), (a, b)).outputs[0].placements
    (Shard(dim=0, sub_split_coordinates=(4,)),)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from dtorch.errors import PlacementError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import ConcatParam, CreateParam, GetItemParam, OpParam, SliceIndex
from dtorch.ir.placement import Placement, Replicate, Shard
from dtorch.ir.rules import copy, elementwise, indexing, select, views
from dtorch.ir.rules.base import Inference, OutputMeta, Rule, describe_inputs, norm_dim
from dtorch.ir.rules.create import create_rule
from dtorch.ir.rules.reinterpret import view_dtype_rule, view_placements_rule
from dtorch.ir.subsplit import check_marks, is_marked, marks_problem

#: ``rule(name, param, inputs) -> Inference``, or None where the ordinary rule applies.
MarkRule = Callable[[str, OpParam, tuple[Operand, ...]], Inference | None]


def concat_marked(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference | None:
    """``cat`` along a dim one mesh dim shards: the local cat, marked with the boundaries."""
    assert isinstance(param, ConcatParam)
    if param.stack or not inputs or any(o.ndim != inputs[0].ndim or not o.ndim for o in inputs):
        return None
    dim = norm_dim(name, param.dim, inputs[0].ndim)
    mesh_dims = {m for o in inputs for m, p in enumerate(o.placements) if p.is_shard(dim)}
    if len(mesh_dims) != 1:
        return None  # not sharded, or on several mesh dims: the ordinary rule decides
    (m,) = mesh_dims
    plain = tuple(dataclasses.replace(o, placements=(Replicate(),) * o.mesh.ndim) for o in inputs)
    out = indexing.concat_rule(name, param, plain).outputs[0]  # shape and dtype checks
    wanted = tuple(_wanted(name, inputs, m, k) for k in range(inputs[0].mesh.ndim))
    requested = tuple(None if _strip_at(o.placements, m) == wanted else wanted for o in inputs)
    shard = wanted[m]
    assert isinstance(shard, Shard)
    placements = list(wanted)
    placements[m] = Shard(dim, shard.split_order, _cat_coordinates(inputs, dim, m))
    meta = OutputMeta(out.shape, out.dtype, tuple(placements))
    return Inference((meta,), requested if any(r is not None for r in requested) else ())


# What every input must be on mesh dim k (marks on the cat's mesh dim m aside): the one
# placement other than Replicate the inputs have there; Replicate inputs get chunked to it.
def _wanted(name: str, inputs: tuple[Operand, ...], m: int, k: int) -> Placement:
    found = {_strip_at(o.placements, m)[k] for o in inputs}
    others = found - {Replicate()}
    if not others:
        return Replicate()
    if len(others) == 1 and isinstance(next(iter(others)), Shard):
        return others.pop()
    if len(found) == 1:
        return found.pop()  # all Partial alike
    raise PlacementError(
        f"{name}: got {describe_inputs(inputs)}, concatenated along a dim that mesh dim {m} "
        f"shards; on mesh dim {k} they are {sorted(map(repr, found))}; accepted: on every "
        f"mesh dim one placement for all inputs, Replicate() inputs beside a Shard (chunked). "
        f"Redistribute the inputs alike first"
    )


def _strip_at(placements: tuple[Placement, ...], m: int) -> tuple[Placement, ...]:
    p = placements[m]
    return (
        placements
        if not isinstance(p, Shard)
        else (*placements[:m], p.plain(), *placements[m + 1 :])
    )


# The boundaries between the parts, and each part's own marks shifted to its offset.
def _cat_coordinates(inputs: tuple[Operand, ...], dim: int, m: int) -> tuple[int, ...]:
    total = sum(o.shape[dim] for o in inputs)
    coords: set[int] = set()
    offset = 0
    for o in inputs:
        coords.add(offset)
        p = o.placements[m]
        own = p.get_sub_split_coordinates() if isinstance(p, Shard) else ()
        coords.update(offset + c for c in own)
        offset += o.shape[dim]
    return tuple(sorted(c for c in coords if 0 < c < total))


def elementwise_marked(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference | None:
    """The ordinary rule of an elementwise kind on the plain layouts (every device computes its
    elements where they lie, so the local layout does not matter), its outputs and
    conversions marked."""
    marks = _marks(name, inputs)
    if not marks:
        return None
    plain = tuple(dataclasses.replace(o, placements=_strip(o.placements)) for o in inputs)
    inference = _ELEMENTWISE[param.kind](name, param, plain)
    outputs = tuple(
        dataclasses.replace(out, placements=_remark(out.placements, marks))
        for out in inference.outputs
    )
    for out in outputs:
        _check_remarked(name, inputs, out)
    requested = tuple(None if r is None else _remark(r, marks) for r in inference.input_placements)
    return Inference(outputs, requested)


def _check_remarked(name: str, inputs: tuple[Operand, ...], out: OutputMeta) -> None:
    # the plain rule may shard the marked dim on another mesh dim too, which no mark can hold
    problem = marks_problem(out.shape, out.placements)
    if problem is not None:
        raise PlacementError(
            f"{name}: got {' x '.join(repr(i.placements) for i in inputs)}: the result would "
            f"be laid out as {out.placements!r}, where {problem}; accepted: operands "
            f"that shard the concatenated dim on the marked mesh dim only. Redistribute "
            f"the concatenated operand to plain placements first"
        )


# Mesh dim -> coordinates of the operands marked on it; every Shard on that mesh dim must match.
def _marks(name: str, inputs: tuple[Operand, ...]) -> dict[int, tuple[int, ...]]:
    marks: dict[int, tuple[int, ...]] = {}
    for o in inputs:
        for m, p in enumerate(o.placements):
            if isinstance(p, Shard) and p.has_sub_split_coordinates():
                marks.setdefault(m, p.sub_split_coordinates)
    for o in inputs:
        for m, coords in marks.items():
            p = o.placements[m]
            if isinstance(p, Shard) and p.sub_split_coordinates != coords:
                raise PlacementError(
                    f"{name}: got {' x '.join(repr(i.placements) for i in inputs)}: operands "
                    f"sharded on mesh dim {m} lie in different layouts; accepted: the same "
                    f"sub_split_coordinates {coords} on every sharded operand, or Replicate(). "
                    f"Redistribute one operand to the other's placements first"
                )
    return marks


def _strip(placements: tuple[Placement, ...]) -> tuple[Placement, ...]:
    return tuple(p.plain() if isinstance(p, Shard) else p for p in placements)


def _remark(placements: tuple[Placement, ...], marks: dict[int, tuple[int, ...]]) -> tuple:
    out = list(placements)
    for m, coords in marks.items():
        p = out[m]
        if isinstance(p, Shard):
            out[m] = Shard(p.dim, p.split_order, coords)
    return tuple(out)


def getitem_marked(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference | None:
    """``t[a:b]`` from one segment boundary to another on a marked dim, the rest whole."""
    assert isinstance(param, GetItemParam)
    (x,) = inputs
    if not is_marked(x.placements):
        return None
    entries, shape, _ = indexing.plan_index(name, x.shape, param.index)
    cut = _cut_dim(name, x, entries)
    placements = list(x.placements)
    if cut is not None:
        m, start, stop = cut
        p = placements[m]
        assert isinstance(p, Shard)
        inner = tuple(c - start for c in p.sub_split_coordinates if start < c < stop)
        placements[m] = Shard(p.dim, p.split_order, inner)
    return Inference((OutputMeta(shape, x.dtype, tuple(placements)),))


# (mesh dim, start, stop) of the one marked dim the index cuts; None when it cuts nothing.
def _cut_dim(name: str, x: Operand, entries: tuple) -> tuple[int, int, int] | None:
    cuts = []
    for d, entry in enumerate(entries):
        if not isinstance(entry, SliceIndex):
            _refuse_index(name, x)
        if (entry.start, entry.stop, entry.step) != (0, x.shape[d], 1):
            cuts.append((d, entry))
    if not cuts:
        return None
    (d, entry), *more = cuts
    m = next((m for m, p in enumerate(x.placements) if p.is_shard(d)), None)
    p = None if m is None else x.placements[m]
    if more or not isinstance(p, Shard) or entry.step != 1 or entry.start >= entry.stop:
        _refuse_index(name, x)
    assert m is not None and isinstance(p, Shard)
    bounds = {0, *p.sub_split_coordinates, x.shape[d]}
    if entry.start not in bounds or entry.stop not in bounds:
        _refuse_index(name, x)
    return m, entry.start, entry.stop


def _refuse_index(name: str, x: Operand) -> None:
    marked = next(p for p in x.placements if isinstance(p, Shard) and p.has_sub_split_coordinates())
    n = x.shape[marked.dim]
    raise PlacementError(
        f"{name}: indexing a tensor of shape {list(x.shape)} placed {x.placements} (a "
        f"concatenation of separately sharded parts); accepted: one slice of dim {marked.dim} "
        f"from one part boundary to another (0, {', '.join(map(str, marked.sub_split_coordinates))}"
        f", {n}), step 1, every other dim whole. Redistribute to plain placements first"
    )


def create_marked(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference | None:
    """A creation in marked placements: the Create rule's output, its marks checked."""
    assert isinstance(param, CreateParam)
    if not is_marked(param.placements):
        return None
    inference = create_rule(name, param, inputs)
    check_marks(name, param.shape, inference.outputs[0].placements)
    return inference


#: The ordinary rules of the kinds whose kernels work element by element on the local shards.
_ELEMENTWISE: dict[OpKind, Rule] = {
    **elementwise.RULES,
    OpKind.Cast: copy.cast_rule,
    OpKind.Clone: copy.clone_rule,
    OpKind.Copy: copy.copy_rule,  # in-place forms write their result back elementwise
    OpKind.Contiguous: views.contiguous_rule,
    OpKind.ViewDtype: view_dtype_rule,  # bits read where they lie (the last dim unsharded)
    OpKind.Where: select.where_rule,
    OpKind.Clamp: select.clamp_rule,
}

#: OpKind -> its mark rule, tried before the ordinary rule.
MARK_RULES: dict[OpKind, MarkRule] = {
    OpKind.Concat: concat_marked,
    OpKind.Create: create_marked,
    OpKind.GetItem: getitem_marked,
    OpKind.ViewPlacements: view_placements_rule,  # reads marked shards as plain ones
    **dict.fromkeys(_ELEMENTWISE, elementwise_marked),
}
