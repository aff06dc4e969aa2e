"""One frozen param record per OpKind: what a kernel of that kind needs beyond its inputs.

Params are data (they travel on the wire and into graph files): numbers, tuples, enums,
meshes, placements, dtypes, scalars, and for ``Create`` an optional generator state and torch
value. ``PARAM_TYPES`` maps every OpKind to its record; ``param.kind`` goes the other way.
Fields that an operator's inputs already determine (e.g. whether Linear has a bias) are not
repeated here.

Example:
    >>> from dtorch.ir.params import MatmulParam, PARAM_TYPES
    >>> from dtorch.ir.opkind import OpKind
    >>> MatmulParam().kind is OpKind.Matmul and PARAM_TYPES[OpKind.Matmul] is MatmulParam
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Union

import torch

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import (
    ActivationKind,
    BinaryKind,
    CreateKind,
    MaskedKind,
    MathKind,
    MaxMinKind,
    MemoryKind,
    NormKind,
    OperatorFormat,
    OpKind,
    PaddingType,
    PoolKind,
    PromiseKind,
    ReduceKind,
)
from dtorch.ir.placement import Placement
from dtorch.ir.scalar import Scalar

Ints = tuple[int, ...]


class OpParam:
    """Base of every param record; ``kind`` names the OpKind it belongs to."""

    __slots__ = ()
    kind: ClassVar[OpKind]


def _param(kind: OpKind, *, eq: bool = True):  # type: ignore[no-untyped-def]
    """Class decorator: a frozen slotted dataclass bound to ``kind``."""

    def wrap(cls: type) -> type:
        cls.kind = kind  # type: ignore[attr-defined]
        return dataclass(frozen=True, slots=True, eq=eq)(cls)

    return wrap


@dataclass(frozen=True, slots=True)
class SliceIndex:
    """``start:stop:step`` of one indexed dimension, already clipped to its size."""

    start: int
    stop: int
    step: int = 1


#: One entry of a normalised index: an int (selects and drops the dim), a slice, or None
#: (inserts a new dim). Ellipsis is expanded away at record time.
IndexEntry = Union[int, SliceIndex, None]  # noqa: UP007 - a runtime alias, used in isinstance-free code


@dataclass(frozen=True, slots=True)
class PromiseHandle:
    """Names a promise that a GetTensor/Sync/Memory kernel sets: data, never a live object.

    MEMORY promises live in the controller's process and are found by ``name`` in its table;
    FILE promises are shared-memory segments that another process attaches to by ``name``.
    """

    kind: PromiseKind
    name: str


@_param(OpKind.Activation)
class ActivationParam(OpParam):
    activation: ActivationKind
    approximate: str = "none"  # GELU: "none" or "tanh"


@_param(OpKind.BatchNorm)
class BatchNormParam(OpParam):
    eps: float = 1e-5
    momentum: float = 0.1
    training: bool = False
    has_weight: bool = True
    has_bias: bool = True
    has_running_stats: bool = True


@_param(OpKind.BroadcastBinary)
class BroadcastBinaryParam(OpParam):
    """``a <op> b``; with ``scalar`` set, the one input is combined with that Python number,
    on the left when ``scalar_first`` (``2 - t``)."""

    binary: BinaryKind
    scalar: Scalar | None = None
    scalar_first: bool = False


@_param(OpKind.Conv)
class ConvParam(OpParam):
    dilations: Ints = (1, 1)
    group: int = 1
    kernel_size: Ints = ()
    padding_type: PaddingType = PaddingType.EXPLICIT
    pads: Ints = (0, 0)
    strides: Ints = (1, 1)
    format: OperatorFormat = OperatorFormat.NCHW


@_param(OpKind.Convert)
class ConvertParam(OpParam):
    """Redistribute to ``mesh`` and ``placements`` (the output operand's layout)."""

    mesh: DeviceMesh
    placements: tuple[Placement, ...]


@_param(OpKind.Dropout, eq=False)
class DropoutParam(OpParam):
    p: float = 0.5
    training: bool = True
    generator: torch.Generator | None = None


@_param(OpKind.Expand)
class ExpandParam(OpParam):
    shape: Ints


@_param(OpKind.Flatten)
class FlattenParam(OpParam):
    start_dim: int = 0
    end_dim: int = -1


@_param(OpKind.Fuse)
class FuseParam(OpParam):
    """Elementwise steps applied in order to one input (each a unary-form param)."""

    steps: tuple[OpParam, ...]


@_param(OpKind.Linear)
class LinearParam(OpParam):
    """``x @ w.T (+ b)``; a bias is present when the operator has three inputs."""


@_param(OpKind.Pooling)
class PoolingParam(OpParam):
    pool: PoolKind
    kernel_size: Ints = ()
    strides: Ints = ()
    pads: Ints = (0, 0)
    dilations: Ints = (1, 1)
    ceil_mode: bool = False
    count_include_pad: bool = True
    output_size: Ints = ()


@_param(OpKind.Reduce)
class ReduceParam(OpParam):
    """Reduce over ``dims`` (None: every dim); ARGMAX/ARGMIN take at most one dim."""

    reduce: ReduceKind
    dims: Ints | None = None
    keepdim: bool = False
    dtype: torch.dtype | None = None


@_param(OpKind.Reshape)
class ReshapeParam(OpParam):
    shape: Ints


@_param(OpKind.BaseMath)
class BaseMathParam(OpParam):
    math: MathKind


@_param(OpKind.Squeeze)
class SqueezeParam(OpParam):
    dims: Ints


@_param(OpKind.Unsqueeze)
class UnsqueezeParam(OpParam):
    dim: int


@_param(OpKind.Embedding)
class EmbeddingParam(OpParam):
    padding_idx: int | None = None


@_param(OpKind.Normalization)
class NormalizationParam(OpParam):
    """Layer, RMS or group norm; weight and bias are optional inputs, named by the flags."""

    norm: NormKind
    normalized_shape: Ints = ()
    eps: float | None = None
    num_groups: int = 1
    has_weight: bool = False
    has_bias: bool = False


@_param(OpKind.Concat)
class ConcatParam(OpParam):
    """``torch.cat`` along ``dim``; ``stack`` inserts the new dim first (``torch.stack``)."""

    dim: int
    stack: bool = False


@_param(OpKind.Transpose)
class TransposeParam(OpParam):
    dim0: int
    dim1: int


@_param(OpKind.View)
class ViewParam(OpParam):
    shape: Ints


@_param(OpKind.Contiguous)
class ContiguousParam(OpParam):
    pass


@_param(OpKind.GetItem)
class GetItemParam(OpParam):
    index: tuple[IndexEntry, ...]


@_param(OpKind.Sdpa)
class SdpaParam(OpParam):
    is_causal: bool = False
    scale: float | None = None
    dropout_p: float = 0.0
    has_mask: bool = False
    enable_gqa: bool = False


@_param(OpKind.Create, eq=False)
class CreateParam(OpParam):
    """A new tensor on ``mesh``: kind, shape, dtype, placements, and the kind's arguments.

    ``args`` holds FULL's fill value, ARANGE's (start, end, step), RAND/RANDN's nothing and
    RANDINT's (low, high). ``generator`` is a snapshot of the user's generator (random kinds)
    and ``value`` the full torch tensor to distribute (FROM_TENSOR).
    """

    create: CreateKind
    shape: Ints
    dtype: torch.dtype
    mesh: DeviceMesh
    placements: tuple[Placement, ...]
    args: tuple[int | float | bool, ...] = ()
    generator: torch.Generator | None = None
    value: torch.Tensor | None = None


@_param(OpKind.Copy)
class CopyParam(OpParam):
    """``dst.copy_(src)``: inputs are (dst, src); dst's shards change in place."""


@_param(OpKind.Chunk)
class ChunkParam(OpParam):
    chunks: int
    dim: int = 0


@_param(OpKind.Einsum)
class EinsumParam(OpParam):
    equation: str


@_param(OpKind.Permute)
class PermuteParam(OpParam):
    dims: Ints


@_param(OpKind.Interpolate)
class InterpolateParam(OpParam):
    size: Ints | None = None
    scale_factor: tuple[float, ...] | None = None
    mode: str = "nearest"
    align_corners: bool | None = None


@_param(OpKind.Repeat)
class RepeatParam(OpParam):
    repeats: Ints


@_param(OpKind.Pad)
class PadParam(OpParam):
    pads: Ints
    mode: str = "constant"
    value: float = 0.0


@_param(OpKind.Clamp)
class ClampParam(OpParam):
    min: Scalar | None = None
    max: Scalar | None = None


@_param(OpKind.Nvtx)
class NvtxParam(OpParam):
    """Push (``push=True``) or pop a named profiler range on every device."""

    message: str = ""
    push: bool = True


@_param(OpKind.Where)
class WhereParam(OpParam):
    """``where(cond, x, y)``; ``x``/``y`` set when that side is a Python number."""

    x: Scalar | None = None
    y: Scalar | None = None


@_param(OpKind.MaxMin)
class MaxMinParam(OpParam):
    """``max/min(t, dim, keepdim)`` with two outputs: values and int64 indices."""

    maxmin: MaxMinKind
    dim: int
    keepdim: bool = False


@_param(OpKind.Matmul)
class MatmulParam(OpParam):
    trans_a: bool = False
    trans_b: bool = False


@_param(OpKind.Softmax)
class SoftmaxParam(OpParam):
    dim: int
    log: bool = False
    dtype: torch.dtype | None = None


@_param(OpKind.Outer)
class OuterParam(OpParam):
    pass


@_param(OpKind.RepeatInterleave)
class RepeatInterleaveParam(OpParam):
    repeats: int
    dim: int | None = None


@_param(OpKind.ApplyRotaryEmb)
class ApplyRotaryEmbParam(OpParam):
    """Rotary embedding of x by (cos, sin); ``interleaved`` pairs even/odd features."""

    interleaved: bool = False


@_param(OpKind.SiluLinearChunk)
class SiluLinearChunkParam(OpParam):
    """``a, b = linear(x, w).chunk(2, dim); silu(a) * b`` (SwiGLU) in one kernel."""

    dim: int = -1


@_param(OpKind.LayerNormMulAdd)
class LayerNormMulAddParam(OpParam):
    """``layer_norm(x) * mul + add`` in one kernel."""

    normalized_shape: Ints = ()
    eps: float = 1e-5


@_param(OpKind.Memory)
class MemoryParam(OpParam):
    memory: MemoryKind
    reset_peak: bool = False
    promise: PromiseHandle | None = None


@_param(OpKind.SetItem)
class SetItemParam(OpParam):
    """``t[index] = value``: inputs (t,) with ``scalar`` set, else (t, value)."""

    index: tuple[IndexEntry, ...]
    scalar: Scalar | None = None


@_param(OpKind.Clone)
class CloneParam(OpParam):
    pass


@_param(OpKind.GetTensor)
class GetTensorParam(OpParam):
    """Set ``promise`` to the (single-device) input's value."""

    promise: PromiseHandle


@_param(OpKind.Masked)
class MaskedParam(OpParam):
    """``masked_fill(mask, value)`` (``value`` scalar) or ``masked_scatter(mask, source)``."""

    masked: MaskedKind
    value: Scalar | None = None
    in_place: bool = False


@_param(OpKind.Sync)
class SyncParam(OpParam):
    """Every device sets ``promise`` when it reaches this point of the stream."""

    promise: PromiseHandle


@_param(OpKind.Cast)
class CastParam(OpParam):
    dtype: torch.dtype


@_param(OpKind.Nonzero)
class NonzeroParam(OpParam):
    pass


@_param(OpKind.SubGraph)
class SubGraphParam(OpParam):
    """A recorded sub-computation: its operators, the operands they make, and which operand
    ids are its inputs and outputs."""

    operators: tuple[Operator, ...]
    operands: tuple[Operand, ...] = ()
    inputs: Ints = ()
    outputs: Ints = ()


def _collect() -> dict[OpKind, type[OpParam]]:
    table = {cls.kind: cls for cls in OpParam.__subclasses__()}
    missing = [k.name for k in OpKind if k not in table]
    if missing:
        raise RuntimeError(f"OpKinds without a param record: {missing}")
    return dict(sorted(table.items()))


#: Every OpKind's param record.
PARAM_TYPES: dict[OpKind, type[OpParam]] = _collect()

#: Records that params nest (they register with the codec beside the params).
PARAM_VALUE_TYPES: tuple[type, ...] = (SliceIndex, PromiseHandle)
