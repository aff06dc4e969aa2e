"""One frozen param record per OpKind: what a kernel of that kind needs beyond its inputs.

Params are data (they travel on the wire and into graph files): numbers, tuples, enums,
meshes, placements, dtypes, scalars, and for ``Create`` an optional generator state and torch
value. ``PARAM_TYPES`` maps every OpKind to its record; ``param.kind`` goes the other way.
Fields that an operator's inputs already determine (e.g. whether Linear has a bias) are not
repeated here.

The records live by family, and this module re-exports every one of them: creation, layout,
shape and indexing in ``params_layout``, computation in ``params_compute``, the runtime's own
operators in ``params_control``, on the base and value records of ``params_base``. It imports
all three families before it collects ``PARAM_TYPES`` from ``OpParam.__subclasses__()``, so
the registry holds every record whichever module was imported first.

Example:
    >>> from dtorch.ir.params import MatmulParam, PARAM_TYPES
    >>> from dtorch.ir.opkind import OpKind
    >>> MatmulParam().kind is OpKind.Matmul and PARAM_TYPES[OpKind.Matmul] is MatmulParam
    True
"""

from __future__ import annotations

from dtorch.ir.opkind import OpKind
from dtorch.ir.params_base import (
    IndexEntry,
    Ints,
    OpParam,
    PromiseHandle,
    SharedInput,
    SliceIndex,
)
from dtorch.ir.params_compute import (
    ActivationParam,
    ApplyRotaryEmbParam,
    BaseMathParam,
    BatchNormParam,
    BroadcastBinaryParam,
    ClampParam,
    ConvParam,
    ConvTransposeParam,
    CumExtremeParam,
    DropoutParam,
    EinsumParam,
    EmbeddingBagParam,
    EmbeddingParam,
    FftParam,
    FoldParam,
    FuseParam,
    GridSampleParam,
    HistcParam,
    InterpolateParam,
    IsinParam,
    LayerNormMulAddParam,
    LinalgParam,
    LinearParam,
    MaskedParam,
    MatmulParam,
    MaxMinParam,
    NonzeroParam,
    NormalizationParam,
    OrderStatParam,
    OuterParam,
    PoolingParam,
    ReduceParam,
    ScanParam,
    SdpaParam,
    SearchParam,
    SiluLinearChunkParam,
    SoftmaxParam,
    SortParam,
    SplitCumExtremeParam,
    SplitOrderStatParam,
    SplitReduceParam,
    SplitScanParam,
    SplitSoftmaxParam,
    SplitSortParam,
    SplitTopKParam,
    TopKParam,
    WhereParam,
)
from dtorch.ir.params_control import (
    GetTensorParam,
    MemoryParam,
    NvtxParam,
    ProfileParam,
    SubGraphParam,
    SyncParam,
    UnsentParam,
)
from dtorch.ir.params_layout import (
    CastParam,
    ChunkParam,
    CloneParam,
    ConcatParam,
    ContiguousParam,
    ConvertParam,
    CopyParam,
    CreateParam,
    ExpandParam,
    FlattenParam,
    FlipParam,
    GatherParam,
    GetItemParam,
    IndexAddParam,
    IndexPutParam,
    IndexSelectParam,
    PadParam,
    PermuteParam,
    RepeatInterleaveParam,
    RepeatParam,
    ReshapeParam,
    ScatterParam,
    SetItemParam,
    SqueezeParam,
    TransposeParam,
    UnsqueezeParam,
    ViewDtypeParam,
    ViewParam,
    ViewPlacementsParam,
)


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

__all__ = [
    "ActivationParam",
    "ApplyRotaryEmbParam",
    "BaseMathParam",
    "BatchNormParam",
    "BroadcastBinaryParam",
    "CastParam",
    "ChunkParam",
    "ClampParam",
    "CloneParam",
    "ConcatParam",
    "ContiguousParam",
    "ConvParam",
    "ConvTransposeParam",
    "ConvertParam",
    "CopyParam",
    "CreateParam",
    "CumExtremeParam",
    "DropoutParam",
    "EinsumParam",
    "EmbeddingBagParam",
    "EmbeddingParam",
    "ExpandParam",
    "FlattenParam",
    "FlipParam",
    "FftParam",
    "FoldParam",
    "GridSampleParam",
    "FuseParam",
    "GatherParam",
    "GetItemParam",
    "GetTensorParam",
    "HistcParam",
    "IndexAddParam",
    "IndexEntry",
    "IndexPutParam",
    "IndexSelectParam",
    "InterpolateParam",
    "Ints",
    "IsinParam",
    "LayerNormMulAddParam",
    "LinalgParam",
    "LinearParam",
    "MaskedParam",
    "MatmulParam",
    "MaxMinParam",
    "MemoryParam",
    "NonzeroParam",
    "NormalizationParam",
    "NvtxParam",
    "OpParam",
    "OrderStatParam",
    "OuterParam",
    "PadParam",
    "PermuteParam",
    "PoolingParam",
    "ProfileParam",
    "PromiseHandle",
    "ReduceParam",
    "RepeatInterleaveParam",
    "RepeatParam",
    "ReshapeParam",
    "ScanParam",
    "ScatterParam",
    "SdpaParam",
    "SearchParam",
    "SetItemParam",
    "SharedInput",
    "SiluLinearChunkParam",
    "SliceIndex",
    "SoftmaxParam",
    "SplitCumExtremeParam",
    "SplitOrderStatParam",
    "SplitReduceParam",
    "SplitScanParam",
    "SplitSoftmaxParam",
    "SplitSortParam",
    "SplitTopKParam",
    "SortParam",
    "SqueezeParam",
    "SubGraphParam",
    "SyncParam",
    "TopKParam",
    "TransposeParam",
    "UnsentParam",
    "UnsqueezeParam",
    "ViewDtypeParam",
    "ViewParam",
    "ViewPlacementsParam",
    "WhereParam",
    "PARAM_TYPES",
    "PARAM_VALUE_TYPES",
]
