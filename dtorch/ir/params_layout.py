"""Param records of the operators that make, place, copy, reshape and index tensors.

Creation and distribution (``Create``, ``Convert``, ``ViewPlacements``), copies and casts
(``ViewDtype`` too, which reads the bits as another dtype), shape and view changes, and
indexing (``GetItem``, ``SetItem``, ``IndexSelect``, ``IndexPut``, ``Gather``, and its inverses
``Scatter`` and ``IndexAdd``): operators that move or select values rather than compute new
ones. Split out of ``dtorch.ir.params``
(which re-exports every record here and registers it in ``PARAM_TYPES``) to keep each file to
one family of records; import them from ``dtorch.ir.params``.

Example:
    >>> from dtorch.ir import params, params_layout
    >>> params.ReshapeParam is params_layout.ReshapeParam
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.opkind import CreateKind, OpKind, ScatterReduceKind
from dtorch.ir.params_base import IndexEntry, Ints, OpParam, SharedInput
from dtorch.ir.placement import Placement
from dtorch.ir.scalar import Scalar


@dataclass(frozen=True, slots=True, eq=False)
class CreateParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Create
    """A new tensor on ``mesh``: kind, shape, dtype, placements, and the kind's arguments.

    ``args`` holds FULL's fill value, ARANGE's (start, end, step), RAND/RANDN's nothing,
    RANDINT's and UNIFORM's (low, high), NORMAL's (mean, std) and TRUNC_NORMAL's (mean, std,
    a, b); the fills of ``random_more`` their method's arguments (RANDOM: (), (from,) for
    to=None, or (from, to); RANDPERM: none). ``generator`` is a snapshot of the user's generator
    (random kinds) and ``value`` the full torch tensor to distribute (FROM_TENSOR); on its way
    to worker processes a large ``value`` is in shared memory instead (``shared``).
    ``strides``: for a random fill of a view torch holds strided, that view's strides: the full
    tensor is drawn into that layout, as torch's fill draws in it (some of its kernels draw
    differently, or in another order, for a tensor that is not contiguous); () otherwise.
    """

    create: CreateKind
    shape: Ints
    dtype: torch.dtype
    mesh: DeviceMesh
    placements: tuple[Placement, ...]
    args: tuple[int | float | bool, ...] = ()
    generator: torch.Generator | None = None
    value: torch.Tensor | None = None
    shared: SharedInput | None = None
    strides: Ints = ()


@dataclass(frozen=True, slots=True)
class ConvertParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Convert
    """Redistribute to ``mesh`` and ``placements`` (the output operand's layout)."""

    mesh: DeviceMesh
    placements: tuple[Placement, ...]


@dataclass(frozen=True, slots=True)
class ViewPlacementsParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.ViewPlacements
    """``view([placements])``: every device's local shard kept as it is, read under
    ``placements`` (one per mesh dim); the global shape follows from the local shapes."""

    placements: tuple[Placement, ...]


@dataclass(frozen=True, slots=True)
class ViewDtypeParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.ViewDtype
    """``view(dtype)``: every device's local shard, its bits read as ``dtype`` (torch's
    ``Tensor.view(dtype)``; where the element size differs, the last dim's size changes)."""

    dtype: torch.dtype


@dataclass(frozen=True, slots=True)
class CopyParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Copy
    """``dst.copy_(src)``: inputs are (dst, src); dst's shards change in place."""


@dataclass(frozen=True, slots=True)
class CloneParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Clone


@dataclass(frozen=True, slots=True)
class ContiguousParam(OpParam):
    """``copy``: copy whatever the shards look like (the global strides, known at record
    time, say torch copies; ``dtorch.api.strides``). ``view``: they say torch returns the
    tensor itself, so every device returns its shard, whatever the shard looks like (one
    row of a dim can be strided as torch pleases). Neither: each device judges its shard."""

    kind: ClassVar[OpKind] = OpKind.Contiguous
    copy: bool = False
    view: bool = False


@dataclass(frozen=True, slots=True)
class CastParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Cast
    dtype: torch.dtype


@dataclass(frozen=True, slots=True)
class ExpandParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Expand
    shape: Ints


@dataclass(frozen=True, slots=True)
class FlattenParam(OpParam):
    """``view``: the global strides, known at record time, say torch views (a device views
    wherever torch can view its shard; ``dtorch.api.strides``). The same in Reshape/View."""

    kind: ClassVar[OpKind] = OpKind.Flatten
    start_dim: int = 0
    end_dim: int = -1
    view: bool = False


@dataclass(frozen=True, slots=True)
class ReshapeParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Reshape
    shape: Ints
    view: bool = False  # as FlattenParam's


@dataclass(frozen=True, slots=True)
class SqueezeParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Squeeze
    dims: Ints


@dataclass(frozen=True, slots=True)
class UnsqueezeParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Unsqueeze
    dim: int


@dataclass(frozen=True, slots=True)
class TransposeParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Transpose
    dim0: int
    dim1: int


@dataclass(frozen=True, slots=True)
class ViewParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.View
    shape: Ints
    view: bool = False  # as FlattenParam's


@dataclass(frozen=True, slots=True)
class PermuteParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Permute
    dims: Ints


@dataclass(frozen=True, slots=True)
class ConcatParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Concat
    """``torch.cat`` along ``dim``; ``stack`` inserts the new dim first (``torch.stack``)."""

    dim: int
    stack: bool = False


@dataclass(frozen=True, slots=True)
class ChunkParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Chunk
    chunks: int
    dim: int = 0


@dataclass(frozen=True, slots=True)
class RepeatParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Repeat
    repeats: Ints


@dataclass(frozen=True, slots=True)
class RepeatInterleaveParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.RepeatInterleave
    repeats: int
    dim: int | None = None


@dataclass(frozen=True, slots=True)
class FlipParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Flip
    """``flip(dims)``: the order of every one of ``dims`` reversed."""

    dims: Ints


@dataclass(frozen=True, slots=True)
class PadParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Pad
    pads: Ints
    mode: str = "constant"
    value: float = 0.0


@dataclass(frozen=True, slots=True)
class GetItemParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.GetItem
    index: tuple[IndexEntry, ...]


@dataclass(frozen=True, slots=True)
class SetItemParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.SetItem
    """``t[index] = value``: inputs (t,) with ``scalar`` set, else (t, value)."""

    index: tuple[IndexEntry, ...]
    scalar: Scalar | None = None


@dataclass(frozen=True, slots=True)
class IndexSelectParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.IndexSelect
    """Inputs (x, index): ``x`` indexed along ``dim`` by an integer tensor of any shape (its
    dims replace ``dim``); ``wrap``: negative indices count from the end (``t[index]``),
    else they are out of range (``index_select``)."""

    dim: int
    wrap: bool = True


@dataclass(frozen=True, slots=True)
class IndexPutParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.IndexPut
    """Inputs (x, index) with ``scalar`` set, else (x, index, value): in place,
    ``x[(:,) * dim, index] = value`` (torch's ``index_put_``, accumulate=False)."""

    dim: int
    scalar: Scalar | None = None


@dataclass(frozen=True, slots=True)
class GatherParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Gather
    """Inputs (x, index): ``torch.gather(x, dim, index)``, the output shaped like the index."""

    dim: int


@dataclass(frozen=True, slots=True)
class ScatterParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Scatter
    """Inputs (x, index, src), or (x, index) with ``value`` set (a number written at every
    entry of the index): a copy of ``x`` where, along ``dim``, ``out[index[j]][k] = src[j][k]``
    (for ``dim`` 0; likewise for the others). ``reduce`` NONE overwrites (``torch.scatter``);
    the others combine the written entries (and, when ``include_self``, ``x``'s own) as
    ``torch.scatter_reduce`` does; SUM and PROD of a ``value`` are ``scatter(value,
    reduce="add"/"multiply")``."""

    dim: int
    reduce: ScatterReduceKind = ScatterReduceKind.NONE
    include_self: bool = True
    value: Scalar | None = None


@dataclass(frozen=True, slots=True)
class IndexAddParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.IndexAdd
    """Inputs (x, index, source): ``torch.index_add(x, dim, index, source, alpha=alpha)``, a
    copy of ``x`` with ``alpha * source[j]`` added to ``x[index[j]]`` along ``dim`` (``index``
    a vector; ``alpha`` None: 1)."""

    dim: int
    alpha: Scalar | None = None
