"""Param records of the operators that compute: elementwise, linear algebra, nn and fused.

Activations, binary and unary math, reductions, scans, sorts, matmul/linear/einsum,
convolution, pooling, normalisation, attention, dropout and the fused kernels (``Fuse``,
``ApplyRotaryEmb``, ``SiluLinearChunk``, ``LayerNormMulAdd``). Split out of
``dtorch.ir.params`` (which re-exports every record here and registers it in ``PARAM_TYPES``)
to keep each file to one family of records; import them from ``dtorch.ir.params``.

Example:
    >>> from dtorch.ir import params, params_compute
    >>> params.MatmulParam is params_compute.MatmulParam
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from dtorch.ir.opkind import (
    ActivationKind,
    BinaryKind,
    FftKind,
    LinalgKind,
    MaskedKind,
    MathKind,
    MaxMinKind,
    NormKind,
    OperatorFormat,
    OpKind,
    OrderStatKind,
    PaddingType,
    PoolKind,
    ReduceKind,
    ScanKind,
)
from dtorch.ir.params_base import Ints, OpParam
from dtorch.ir.scalar import Scalar


@dataclass(frozen=True, slots=True)
class ActivationParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Activation
    """``activation`` of one tensor. The kinds that take numbers (``torch_ops.NUMBERED``)
    read ``alpha`` and ``beta``; the others ignore them."""

    activation: ActivationKind
    approximate: str = "none"  # GELU: "none" or "tanh"
    # LEAKY_RELU's negative_slope; ELU's and CELU's alpha; SOFTPLUS's beta;
    # HARDSHRINK's and SOFTSHRINK's lambd; THRESHOLD's threshold
    alpha: float = 0.0
    beta: float = 0.0  # SOFTPLUS's threshold; THRESHOLD's value
    # torch's ``inplace=True`` / ``relu_``: the devices write the result into the input's
    # shard (its one output is that shard), sparing the temporary and the write-back copy
    in_place: bool = False


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
    scales ``b`` inside torch's own kernel, in the result dtype: ``torch.add(a, b, alpha=)``.
    ``in_place`` (torch's ``add_``, ``t *= 2``): the devices write the result into the first
    input's shard, whose dtype, shape and placements the result must have (its one output is
    that shard), sparing the temporary and the write-back copy."""

    binary: BinaryKind
    scalar: Scalar | None = None
    scalar_first: bool = False
    alpha: Scalar | None = None
    in_place: bool = False


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
class ConvTransposeParam(OpParam):
    """A transposed convolution over ``len(strides)`` spatial dims (1, 2 or 3), torch's
    arguments; the weight is (in, out / groups, *kernel)."""

    kind: ClassVar[OpKind] = OpKind.ConvTranspose
    strides: Ints = (1, 1)
    pads: Ints = (0, 0)
    output_pads: Ints = (0, 0)
    dilations: Ints = (1, 1)
    group: int = 1


@dataclass(frozen=True, slots=True)
class FoldParam(OpParam):
    """``fold`` (col2im) of (N, C * prod(kernel), L) blocks into (N, C, *output_size)."""

    kind: ClassVar[OpKind] = OpKind.Fold
    output_size: Ints = (1, 1)
    kernel_size: Ints = (1, 1)
    dilation: Ints = (1, 1)
    padding: Ints = (0, 0)
    stride: Ints = (1, 1)


@dataclass(frozen=True, slots=True, eq=False)
class DropoutParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Dropout
    p: float = 0.5
    training: bool = True
    generator: torch.Generator | None = None


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
class BaseMathParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.BaseMath
    math: MathKind


@dataclass(frozen=True, slots=True)
class EmbeddingParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Embedding
    padding_idx: int | None = None


@dataclass(frozen=True, slots=True)
class EmbeddingBagParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.EmbeddingBag
    """``embedding_bag`` of inputs (ids, weight[, offsets][, per_sample_weights]): ``mode``
    ``"sum"``, ``"mean"`` or ``"max"`` of each bag's rows, the ``padding_idx`` entries left
    out; ``offsets``/``weighted``: whether those inputs are there (1-D ids have offsets, 2-D
    ids are bags of their rows)."""

    mode: str
    padding_idx: int | None = None
    include_last_offset: bool = False
    offsets: bool = False
    weighted: bool = False


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
class EinsumParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Einsum
    equation: str


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
class GridSampleParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.GridSample
    """``grid_sample(input, grid)`` with torch's ``mode`` (``bilinear``, ``nearest``,
    ``bicubic``), ``padding_mode`` (``zeros``, ``border``, ``reflection``) and
    ``align_corners``."""

    mode: str = "bilinear"
    padding_mode: str = "zeros"
    align_corners: bool = False


@dataclass(frozen=True, slots=True)
class ClampParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Clamp
    """``clamp(x, min, max)`` with number bounds; ``in_place`` (``clamp_``, ``hardtanh_``):
    the devices clamp the input's shard itself, as ``BroadcastBinaryParam.in_place``."""

    min: Scalar | None = None
    max: Scalar | None = None
    in_place: bool = False


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
class SplitSoftmaxParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.SplitSoftmax
    """``softmax``/``log_softmax`` over a dim that some mesh dims shard (vocab-parallel)."""

    dim: int
    log: bool = False
    dtype: torch.dtype | None = None


@dataclass(frozen=True, slots=True)
class SplitReduceParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.SplitReduce
    """A non-linear reduction (``max min any all prod argmax argmin``) over ``dims`` (None:
    every dim) that some mesh dims shard: each device reduces its block, the blocks' results
    are gathered along those mesh dims and combined. ``indices``: MAX/MIN over one dim with a
    second output, the int64 index (``max(dim)``/``min(dim)``)."""

    reduce: ReduceKind
    dims: Ints | None = None
    keepdim: bool = False
    dtype: torch.dtype | None = None
    indices: bool = False


@dataclass(frozen=True, slots=True)
class OuterParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Outer


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
class MaskedParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Masked
    """``masked_fill(mask, value)`` (``value`` scalar) or ``masked_scatter(mask, source)``."""

    masked: MaskedKind
    value: Scalar | None = None
    in_place: bool = False


@dataclass(frozen=True, slots=True)
class NonzeroParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Nonzero


@dataclass(frozen=True, slots=True)
class ScanParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Scan
    """``cumsum``/``cumprod``/``logcumsumexp`` along ``dim`` (normalised); ``dtype``: the input
    is cast to it first (torch's ``dtype=`` argument), else integers and bools accumulate in
    int64 (``logcumsumexp`` takes no ``dtype``: floats only)."""

    scan: ScanKind
    dim: int
    dtype: torch.dtype | None = None


@dataclass(frozen=True, slots=True)
class SplitScanParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.SplitScan
    """``cumsum``/``cumprod``/``logcumsumexp`` along a dim that some mesh dims shard: each
    device scans its block, then adds (multiplies, log-adds) the totals of the blocks before
    it, gathered among the devices that split the dim."""

    scan: ScanKind
    dim: int
    dtype: torch.dtype | None = None


@dataclass(frozen=True, slots=True)
class LinalgParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Linalg
    """torch.linalg's ``fn`` on every matrix (the last two dims) of its inputs. ``n``:
    matrix_power's exponent; ``flag``: cholesky's ``upper``, solve's ``left``, svd's
    ``full_matrices``, pinv's and matrix_rank's ``hermitian``; ``mode``: qr's mode, eigh's
    and eigvalsh's ``UPLO``; ``atol``/``rtol``: pinv's and matrix_rank's tolerances given as
    numbers (those given as tensors are inputs after the matrix: bit 0 of ``n`` for atol, bit
    1 for rtol)."""

    fn: LinalgKind
    n: int = 0
    flag: bool = False
    mode: str = ""
    atol: float | None = None
    rtol: float | None = None


@dataclass(frozen=True, slots=True)
class FftParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Fft
    """torch.fft's ``fn`` with torch's arguments: ``s`` (the one-dim forms' ``n`` as a
    tuple of one), ``dim`` (the one-dim forms' ``dim`` as a tuple of one; None: the
    function's default) and ``norm`` (``""`` for None: ``"backward"``)."""

    fn: FftKind
    s: Ints | None = None
    dim: Ints | None = None
    norm: str = ""


@dataclass(frozen=True, slots=True)
class OrderStatParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.OrderStat
    """``median``/``nanmedian``/``kthvalue``/``mode`` along ``dim``: two outputs, values and
    int64 indices; ``dim`` None (median and nanmedian only): over every element, one 0-d
    output. ``k``: kthvalue's rank (from 1), 0 for the others."""

    stat: OrderStatKind
    dim: int | None
    k: int = 0
    keepdim: bool = False


@dataclass(frozen=True, slots=True)
class SplitOrderStatParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.SplitOrderStat
    """``median``/``nanmedian``/``kthvalue``/``mode`` along a ``dim`` that some mesh dims
    shard: the blocks gathered along those mesh dims, the statistic of the whole dim (values
    and int64 indices, Replicate there); ``dim`` None (median and nanmedian only): of every
    element of a sharded tensor, every sharded dim gathered (one 0-d value, Replicate).
    ``k``: kthvalue's rank (from 1), 0 for the others."""

    stat: OrderStatKind
    dim: int | None
    k: int = 0
    keepdim: bool = False


@dataclass(frozen=True, slots=True)
class CumExtremeParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.CumExtreme
    """``cummax``/``cummin`` along ``dim``: values and int64 indices, the input's shape."""

    extreme: MaxMinKind
    dim: int


@dataclass(frozen=True, slots=True)
class SplitCumExtremeParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.SplitCumExtreme
    """``cummax``/``cummin`` along a dim that some mesh dims shard: each device runs its
    block, then takes the running extreme of the blocks before its own where it beats its own."""

    extreme: MaxMinKind
    dim: int


@dataclass(frozen=True, slots=True)
class SearchParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Search
    """``searchsorted(sorted_sequence, values[, sorter])`` (and ``bucketize``): per value, its
    insertion index in its whole sorted row; ``right``: after equal entries; ``out_int32``:
    int32 indices, else int64."""

    right: bool = False
    out_int32: bool = False


@dataclass(frozen=True, slots=True)
class IsinParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Isin
    """``isin(elements, test_elements)``: bool, whether each element is among the (whole) test
    elements; ``invert``: whether it is not."""

    assume_unique: bool = False
    invert: bool = False


@dataclass(frozen=True, slots=True)
class HistcParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Histc
    """``histc(bins, min, max)`` of the local shard (``min < max``, finite): the histogram of
    the tensor is the sum of the shards' (Partial where the input is sharded)."""

    bins: int
    min: float
    max: float


@dataclass(frozen=True, slots=True)
class SortParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.Sort
    """``sort(dim, descending, stable)`` with two outputs: values and int64 indices."""

    dim: int
    descending: bool = False
    stable: bool = False


@dataclass(frozen=True, slots=True)
class SplitSortParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.SplitSort
    """``sort(dim, descending, stable)`` along a ``dim`` that some mesh dims shard: the blocks
    gathered along those mesh dims, the whole dim sorted, each device keeping its block of
    the result (values and int64 indices, placed as the input)."""

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
class SplitTopKParam(OpParam):
    kind: ClassVar[OpKind] = OpKind.SplitTopK
    """``topk`` along a dim that some mesh dims shard: every device's block's top ``k``
    (indices made global), gathered along those mesh dims and picked from (values sorted)."""

    k: int
    dim: int
    largest: bool = True
