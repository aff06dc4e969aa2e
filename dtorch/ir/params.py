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
    ScanKind,
)
from dtorch.ir.placement import Placement
from dtorch.ir.scalar import Scalar

Ints = tuple[int, ...]


class OpParam:
    """Base of every param record; ``kind`` names the OpKind it belongs to."""

    __slots__ = ()
    kind: ClassVar[OpKind]


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


@dataclass(frozen=True, slots=True)
class ActivationParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Activation
    activation: ActivationKind
    approximate: str = "none"  # GELU: "none" or "tanh"
    alpha: float = 0.0  # LEAKY_RELU's negative_slope, ELU's alpha


@dataclass(frozen=True, slots=True)
class BatchNormParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.BatchNorm
    eps: float = 1e-5
    momentum: float = 0.1
    training: bool = False
    has_weight: bool = True
    has_bias: bool = True
    has_running_stats: bool = True


@dataclass(frozen=True, slots=True)
class BroadcastBinaryParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.BroadcastBinary
    """``a <op> b``; with ``scalar`` set, the one input is combined with that Python number,
    on the left when ``scalar_first`` (``2 - t``). ``alpha`` (ADD and SUB of two tensors only)
    scales ``b`` inside torch's own kernel, in the result dtype: ``torch.add(a, b, alpha=)``."""

    binary: BinaryKind
    scalar: Scalar | None = None
    scalar_first: bool = False
    alpha: Scalar | None = None


@dataclass(frozen=True, slots=True)
class ConvParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Conv
    dilations: Ints = (1, 1)
    group: int = 1
    kernel_size: Ints = ()
    padding_type: PaddingType = PaddingType.EXPLICIT
    pads: Ints = (0, 0)
    strides: Ints = (1, 1)
    format: OperatorFormat = OperatorFormat.NCHW


@dataclass(frozen=True, slots=True)
class ConvertParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Convert
    """Redistribute to ``mesh`` and ``placements`` (the output operand's layout)."""

    mesh: DeviceMesh
    placements: tuple[Placement, ...]


@dataclass(frozen=True, slots=True, eq=False)
class DropoutParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Dropout
    p: float = 0.5
    training: bool = True
    generator: torch.Generator | None = None


@dataclass(frozen=True, slots=True)
class ExpandParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Expand
    shape: Ints


@dataclass(frozen=True, slots=True)
class FlattenParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Flatten
    start_dim: int = 0
    end_dim: int = -1


@dataclass(frozen=True, slots=True)
class FuseParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Fuse
    """Elementwise steps applied in order to one input (each a unary-form param)."""

    steps: tuple[OpParam, ...]


@dataclass(frozen=True, slots=True)
class LinearParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Linear
    """``x @ w.T (+ b)``; a bias is present when the operator has three inputs."""


@dataclass(frozen=True, slots=True)
class PoolingParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Pooling
    pool: PoolKind
    kernel_size: Ints = ()
    strides: Ints = ()
    pads: Ints = (0, 0)
    dilations: Ints = (1, 1)
    ceil_mode: bool = False
    count_include_pad: bool = True
    output_size: Ints = ()
    divisor_override: int | None = None  # AVG: torch's divisor_override
    return_indices: bool = False  # MAX: a second output, the int64 argmax of every window


@dataclass(frozen=True, slots=True)
class ReduceParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Reduce
    """Reduce over ``dims`` (None: every dim); ARGMAX/ARGMIN take at most one dim."""

    reduce: ReduceKind
    dims: Ints | None = None
    keepdim: bool = False
    dtype: torch.dtype | None = None


@dataclass(frozen=True, slots=True)
class ReshapeParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Reshape
    shape: Ints


@dataclass(frozen=True, slots=True)
class BaseMathParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.BaseMath
    math: MathKind


@dataclass(frozen=True, slots=True)
class SqueezeParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Squeeze
    dims: Ints


@dataclass(frozen=True, slots=True)
class UnsqueezeParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Unsqueeze
    dim: int


@dataclass(frozen=True, slots=True)
class EmbeddingParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Embedding
    padding_idx: int | None = None


@dataclass(frozen=True, slots=True)
class NormalizationParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Normalization
    """Layer, RMS or group norm; weight and bias are optional inputs, named by the flags."""

    norm: NormKind
    normalized_shape: Ints = ()
    eps: float | None = None
    num_groups: int = 1
    has_weight: bool = False
    has_bias: bool = False


@dataclass(frozen=True, slots=True)
class ConcatParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Concat
    """``torch.cat`` along ``dim``; ``stack`` inserts the new dim first (``torch.stack``)."""

    dim: int
    stack: bool = False


@dataclass(frozen=True, slots=True)
class TransposeParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Transpose
    dim0: int
    dim1: int


@dataclass(frozen=True, slots=True)
class ViewParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.View
    shape: Ints


@dataclass(frozen=True, slots=True)
class ContiguousParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Contiguous


@dataclass(frozen=True, slots=True)
class GetItemParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.GetItem
    index: tuple[IndexEntry, ...]


@dataclass(frozen=True, slots=True)
class SdpaParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Sdpa
    is_causal: bool = False
    scale: float | None = None
    dropout_p: float = 0.0
    has_mask: bool = False
    enable_gqa: bool = False
    #: the mesh dim of ring attention (q/k/v sharded on their sequence dim there), or -1
    ring_dim: int = -1


@dataclass(frozen=True, slots=True)
class SharedInput:
    """Where a worker process maps the bytes of a large FROM_TENSOR value instead of reading
    them from the message: the controller's anonymous segment (owner pid, fd, inode, size),
    and the token the worker hands back once it ran the batch
    (``dtorch.runtime.process.inputs``)."""

    pid: int
    fd: int
    inode: int
    size: int
    token: int


@dataclass(frozen=True, slots=True, eq=False)
class CreateParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Create
    """A new tensor on ``mesh``: kind, shape, dtype, placements, and the kind's arguments.

    ``args`` holds FULL's fill value, ARANGE's (start, end, step), RAND/RANDN's nothing and
    RANDINT's and UNIFORM's (low, high). ``generator`` is a snapshot of the user's generator
    (random kinds) and ``value`` the full torch tensor to distribute (FROM_TENSOR); on its way
    to worker processes a large ``value`` is in shared memory instead (``shared``).
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


@dataclass(frozen=True, slots=True)
class CopyParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Copy
    """``dst.copy_(src)``: inputs are (dst, src); dst's shards change in place."""


@dataclass(frozen=True, slots=True)
class ChunkParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Chunk
    chunks: int
    dim: int = 0


@dataclass(frozen=True, slots=True)
class EinsumParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Einsum
    equation: str


@dataclass(frozen=True, slots=True)
class PermuteParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Permute
    dims: Ints


@dataclass(frozen=True, slots=True)
class InterpolateParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Interpolate
    size: Ints | None = None
    scale_factor: tuple[float, ...] | None = None
    mode: str = "nearest"
    align_corners: bool | None = None
    recompute_scale_factor: bool | None = None
    antialias: bool = False


@dataclass(frozen=True, slots=True)
class RepeatParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Repeat
    repeats: Ints


@dataclass(frozen=True, slots=True)
class PadParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Pad
    pads: Ints
    mode: str = "constant"
    value: float = 0.0


@dataclass(frozen=True, slots=True)
class ClampParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Clamp
    min: Scalar | None = None
    max: Scalar | None = None


@dataclass(frozen=True, slots=True)
class NvtxParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Nvtx
    """Push (``push=True``) or pop a named profiler range on every device."""

    message: str = ""
    push: bool = True


@dataclass(frozen=True, slots=True)
class WhereParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Where
    """``where(cond, x, y)``; ``x``/``y`` set when that side is a Python number."""

    x: Scalar | None = None
    y: Scalar | None = None


@dataclass(frozen=True, slots=True)
class MaxMinParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.MaxMin
    """``max/min(t, dim, keepdim)`` with two outputs: values and int64 indices."""

    maxmin: MaxMinKind
    dim: int
    keepdim: bool = False


@dataclass(frozen=True, slots=True)
class MatmulParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Matmul
    trans_a: bool = False
    trans_b: bool = False


@dataclass(frozen=True, slots=True)
class SoftmaxParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Softmax
    dim: int
    log: bool = False
    dtype: torch.dtype | None = None


@dataclass(frozen=True, slots=True)
class OuterParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Outer


@dataclass(frozen=True, slots=True)
class RepeatInterleaveParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.RepeatInterleave
    repeats: int
    dim: int | None = None


@dataclass(frozen=True, slots=True)
class ApplyRotaryEmbParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.ApplyRotaryEmb
    """Rotary embedding of x by (cos, sin); ``interleaved`` pairs even/odd features."""

    interleaved: bool = False


@dataclass(frozen=True, slots=True)
class SiluLinearChunkParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.SiluLinearChunk
    """``a, b = linear(x, w).chunk(2, dim); silu(a) * b`` (SwiGLU) in one kernel."""

    dim: int = -1


@dataclass(frozen=True, slots=True)
class LayerNormMulAddParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.LayerNormMulAdd
    """``layer_norm(x) * mul + add`` in one kernel."""

    normalized_shape: Ints = ()
    eps: float = 1e-5


@dataclass(frozen=True, slots=True)
class MemoryParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Memory
    memory: MemoryKind
    reset_peak: bool = False
    promise: PromiseHandle | None = None


@dataclass(frozen=True, slots=True)
class SetItemParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.SetItem
    """``t[index] = value``: inputs (t,) with ``scalar`` set, else (t, value)."""

    index: tuple[IndexEntry, ...]
    scalar: Scalar | None = None


@dataclass(frozen=True, slots=True)
class CloneParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Clone


@dataclass(frozen=True, slots=True)
class GetTensorParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.GetTensor
    """Set ``promise`` to the (single-device) input's value."""

    promise: PromiseHandle


@dataclass(frozen=True, slots=True)
class MaskedParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Masked
    """``masked_fill(mask, value)`` (``value`` scalar) or ``masked_scatter(mask, source)``."""

    masked: MaskedKind
    value: Scalar | None = None
    in_place: bool = False


@dataclass(frozen=True, slots=True)
class SyncParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Sync
    """Every device sets ``promise`` when it reaches this point of the stream."""

    promise: PromiseHandle


@dataclass(frozen=True, slots=True)
class ProfileParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Profile
    """Every stream starts (``start``) or stops recording kernel events; a stop reports them
    to ``promise`` (``dtorch.profile``)."""

    start: bool
    promise: PromiseHandle | None = None


@dataclass(frozen=True, slots=True)
class CastParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Cast
    dtype: torch.dtype


@dataclass(frozen=True, slots=True)
class NonzeroParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Nonzero


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
class ViewPlacementsParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.ViewPlacements
    """``view([placements])``: every device's local shard kept as it is, read under
    ``placements`` (one per mesh dim); the global shape follows from the local shapes."""

    placements: tuple[Placement, ...]


@dataclass(frozen=True, slots=True)
class UnsentParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Unsent
    """In place of an operator that the process runner could not send to its workers (the
    codec cannot write it: an int beyond 64 bits, say): the original's kind and why. Its
    kernel raises that reason, so its outputs fail on every device as a failed kernel's do,
    and the rest of the batch runs. Only the runner makes one: no rule accepts it, so the
    client cannot record it and a program file cannot hold it."""

    original: OpKind
    reason: str


@dataclass(frozen=True, slots=True)
class ScanParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Scan
    """``cumsum``/``cumprod`` along ``dim`` (normalised); ``dtype``: the input is cast to it
    first (torch's ``dtype=`` argument), else integers and bools accumulate in int64."""

    scan: ScanKind
    dim: int
    dtype: torch.dtype | None = None


@dataclass(frozen=True, slots=True)
class SortParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Sort
    """``sort(dim, descending, stable)`` with two outputs: values and int64 indices."""

    dim: int
    descending: bool = False
    stable: bool = False


@dataclass(frozen=True, slots=True)
class TopKParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.TopK
    """``topk(k, dim, largest, sorted)`` with two outputs: values and int64 indices."""

    k: int
    dim: int
    largest: bool = True
    sorted: bool = True


@dataclass(frozen=True, slots=True)
class FlipParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Flip
    """``flip(dims)``: the order of every one of ``dims`` reversed."""

    dims: Ints


@dataclass(frozen=True, slots=True)
class GatherParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Gather
    """Inputs (x, index): ``torch.gather(x, dim, index)``, the output shaped like the index."""

    dim: int


@dataclass(frozen=True, slots=True)
class SubGraphParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.SubGraph
    """A recorded sub-computation (a traced program, ``dtorch.program``): its operators, the
    metadata of every operand local to it (``operands``: input placeholders and what the
    operators make; freed after each run), the placeholder ids its inputs are bound to (one
    per leading input of the SubGraph operator, whose other inputs are the constants the
    operators read under their own ids), the local ids its outputs are taken from (one per
    output of the operator), and the positions among the inputs that the operators change in
    place (written back after each run).

    ``program`` names the body in the devices' cache: the first SubGraph operator of a
    program on a graph carries the body (``by_name`` False), which the devices compile and
    cache however empty it is; later ones carry the name alone (``by_name`` True, every other
    field empty) and run the cached body. The name is an id of the graph's operand ids (never
    an operand's): released like an operand's when the program goes, it makes the devices
    drop the cached body."""

    operators: tuple[Operator, ...]
    operands: tuple[Operand, ...] = ()
    inputs: Ints = ()
    outputs: Ints = ()
    program: int = 0
    writes: Ints = ()
    by_name: bool = False


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
