"""OpKind: the closed enumeration of operator kinds, and the small enums their params use.

The integer values are stable (they travel on the wire and in graph files): append, never
renumber. Every kind has exactly one param record in ``dtorch.ir.params.PARAM_TYPES``.

Example:
    >>> from dtorch.ir.opkind import OpKind
    >>> OpKind.Matmul.value, OpKind(0).name
    (36, 'Activation')
"""

from __future__ import annotations

import enum


class OpKind(enum.IntEnum):
    """Every operator kind of DTorch (the first 50), then dtorch's additions."""

    Activation = 0
    BatchNorm = 1
    BroadcastBinary = 2
    Conv = 3
    Convert = 4
    Dropout = 5
    Expand = 6
    Flatten = 7
    Fuse = 8
    Linear = 9
    Pooling = 10
    Reduce = 11
    Reshape = 12
    BaseMath = 13
    Squeeze = 14
    Unsqueeze = 15
    Embedding = 16
    Normalization = 17
    Concat = 18
    Transpose = 19
    View = 20
    Contiguous = 21
    GetItem = 22
    Sdpa = 23
    Create = 24
    Copy = 25
    Chunk = 26
    Einsum = 27
    Permute = 28
    Interpolate = 29
    Repeat = 30
    Pad = 31
    Clamp = 32
    Nvtx = 33
    Where = 34
    MaxMin = 35
    Matmul = 36
    Softmax = 37
    Outer = 38
    RepeatInterleave = 39
    ApplyRotaryEmb = 40
    SiluLinearChunk = 41
    LayerNormMulAdd = 42
    SubGraph = 43
    Memory = 44
    SetItem = 45
    Clone = 46
    GetTensor = 47
    Masked = 48
    Sync = 49
    # dtorch's additions
    Cast = 50
    Nonzero = 51
    IndexSelect = 52
    IndexPut = 53
    ViewPlacements = 54
    Profile = 55
    Unsent = 56  # made by the process runner alone, never recorded or loaded (UnsentParam)
    Scan = 57  # cumsum/cumprod along one dim (ScanParam)
    Sort = 58
    TopK = 59
    Flip = 60
    Gather = 61
    ViewDtype = 62  # view(dtype): the bits read as another dtype (ViewDtypeParam)
    Scatter = 63  # scatter, scatter_add, scatter_reduce along one dim (ScatterParam)
    IndexAdd = 64  # index_add: slices of a source added along one dim (IndexAddParam)
    OrderStat = 65  # median, nanmedian, kthvalue, mode along one dim or all (OrderStatParam)
    CumExtreme = 66  # cummax/cummin along one dim: values and indices (CumExtremeParam)
    SplitSoftmax = 67  # softmax over a sharded dim: all-reduced maxima and sums (SplitSoftmaxParam)
    SplitReduce = 68  # max/min/arg*/any/all/prod over sharded dims: blocks' results combined
    SplitTopK = 69  # topk along a sharded dim: every block's top k, gathered and picked from
    SplitScan = 70  # cumsum/cumprod/logcumsumexp along a sharded dim: blocks' totals carried
    SplitCumExtreme = 71  # cummax/cummin along a sharded dim: the blocks' last extremes carried
    Search = 72  # searchsorted/bucketize of each value in a whole sorted row (SearchParam)
    Isin = 73  # isin: each element tested against whole test elements (IsinParam)
    Histc = 74  # histc of the local shard, summed over shards as a Partial (HistcParam)
    Linalg = 75  # torch.linalg's matrix functions on whole matrices, batch dims kept (LinalgParam)
    ConvTranspose = 76  # conv_transpose1d/2d/3d: torch's own on each device's shards
    Fold = 77  # fold (col2im): torch's own on each device's shards (FoldParam)
    SplitSort = 78  # sort along a sharded dim: the blocks gathered, sorted whole, each kept
    SplitOrderStat = 79  # median/kthvalue/mode along a sharded dim: the blocks gathered
    Fft = 80  # torch.fft's transforms over whole dims, the other dims' shards kept (FftParam)
    EmbeddingBag = 81  # embedding_bag: sums, means or maxima of bags of rows (EmbeddingBagParam)
    GridSample = 82  # grid_sample: an input sampled at a grid's points (GridSampleParam)


class ActivationKind(enum.IntEnum):
    RELU = 0
    GELU = 1
    SILU = 2
    SIGMOID = 3
    TANH = 4
    LEAKY_RELU = 5
    ELU = 6
    SOFTPLUS = 7
    LOGSIGMOID = 8
    HARDSWISH = 9
    HARDSIGMOID = 10
    MISH = 11
    SELU = 12
    CELU = 13
    SOFTSIGN = 14
    TANHSHRINK = 15
    HARDSHRINK = 16
    SOFTSHRINK = 17
    THRESHOLD = 18


class BinaryKind(enum.IntEnum):
    ADD = 0
    SUB = 1
    MUL = 2
    DIV = 3
    POW = 4
    EQ = 5
    NE = 6
    GT = 7
    LT = 8
    GE = 9
    LE = 10
    LOGICAL_AND = 11
    LOGICAL_OR = 12
    MAXIMUM = 13
    MINIMUM = 14
    FLOOR_DIV = 15
    REMAINDER = 16
    BITWISE_AND = 17
    BITWISE_OR = 18
    BITWISE_XOR = 19
    ATAN2 = 20
    HYPOT = 21
    TRUNC_DIV = 22
    FMOD = 23
    COPYSIGN = 24
    HEAVISIDE = 25
    FLOAT_POWER = 26
    GCD = 27
    LCM = 28
    LOGICAL_XOR = 29
    NEXTAFTER = 30
    LDEXP = 31
    LEFT_SHIFT = 32
    RIGHT_SHIFT = 33
    ZETA = 34  # torch.special.zeta(x, q), Hurwitz's: polygamma's n >= 1 (math_extra)
    FMAX = 35  # torch.fmax: maximum where the non-NaN operand wins (aliases_more)
    FMIN = 36  # torch.fmin: minimum where the non-NaN operand wins (aliases_more)
    COMPLEX = 37  # torch.complex(real, imag): a complex tensor of two real ones
    XLOG1PY = 38  # torch.special.xlog1py
    GAMMAINC = 39  # torch.special.gammainc
    GAMMAINCC = 40  # torch.special.gammaincc
    CHEBYSHEV_T = 41  # torch.special.chebyshev_polynomial_t
    CHEBYSHEV_U = 42  # torch.special.chebyshev_polynomial_u
    CHEBYSHEV_V = 43  # torch.special.chebyshev_polynomial_v
    CHEBYSHEV_W = 44  # torch.special.chebyshev_polynomial_w
    SHIFTED_CHEBYSHEV_T = 45  # torch.special.shifted_chebyshev_polynomial_t
    SHIFTED_CHEBYSHEV_U = 46  # torch.special.shifted_chebyshev_polynomial_u
    SHIFTED_CHEBYSHEV_V = 47  # torch.special.shifted_chebyshev_polynomial_v
    SHIFTED_CHEBYSHEV_W = 48  # torch.special.shifted_chebyshev_polynomial_w
    HERMITE_H = 49  # torch.special.hermite_polynomial_h
    HERMITE_HE = 50  # torch.special.hermite_polynomial_he
    LAGUERRE_L = 51  # torch.special.laguerre_polynomial_l
    LEGENDRE_P = 52  # torch.special.legendre_polynomial_p


class MathKind(enum.IntEnum):
    NEG = 0
    RECIPROCAL = 1
    EXP = 2
    LOG = 3
    LOG2 = 4
    LOG10 = 5
    SQRT = 6
    RSQRT = 7
    SQUARE = 8
    ABS = 9
    ROUND = 10
    FLOOR = 11
    SIN = 12
    COS = 13
    ASIN = 14
    ISINF = 15
    ISNAN = 16
    CEIL = 17
    LOGICAL_NOT = 18
    BITWISE_NOT = 19
    SIGN = 20
    SGN = 21
    ERF = 22
    ERFC = 23
    EXPM1 = 24
    LOG1P = 25
    TRUNC = 26
    TAN = 27
    ATAN = 28
    ACOS = 29
    SINH = 30
    COSH = 31
    EXP2 = 32
    ISFINITE = 33
    ISPOSINF = 34
    ISNEGINF = 35
    LGAMMA = 36
    DIGAMMA = 37
    ERFINV = 38
    LOGIT = 39
    SINC = 40
    DEG2RAD = 41
    RAD2DEG = 42
    SIGNBIT = 43
    I0 = 44
    ASINH = 45
    ACOSH = 46
    ATANH = 47
    TRIGAMMA = 48  # polygamma(1, x), torch's own kernel (math_extra's polygamma)
    CONJ = 49  # the complex conjugate, materialised (torch.conj_physical)
    REAL = 50  # the real part, a copy (torch.real is a view)
    IMAG = 51  # the imaginary part, a copy
    ANGLE = 52  # torch.angle
    ENTR = 53  # torch.special.entr
    NDTR = 54  # torch.special.ndtr
    NDTRI = 55  # torch.special.ndtri
    LOG_NDTR = 56  # torch.special.log_ndtr
    I0E = 57  # torch.special.i0e
    I1 = 58  # torch.special.i1
    I1E = 59  # torch.special.i1e
    ERFCX = 60  # torch.special.erfcx
    BESSEL_J0 = 61  # torch.special.bessel_j0
    BESSEL_J1 = 62  # torch.special.bessel_j1
    BESSEL_Y0 = 63  # torch.special.bessel_y0
    BESSEL_Y1 = 64  # torch.special.bessel_y1
    MODIFIED_BESSEL_I0 = 65  # torch.special.modified_bessel_i0
    MODIFIED_BESSEL_I1 = 66  # torch.special.modified_bessel_i1
    MODIFIED_BESSEL_K0 = 67  # torch.special.modified_bessel_k0
    MODIFIED_BESSEL_K1 = 68  # torch.special.modified_bessel_k1
    SCALED_MODIFIED_BESSEL_K0 = 69  # torch.special.scaled_modified_bessel_k0
    SCALED_MODIFIED_BESSEL_K1 = 70  # torch.special.scaled_modified_bessel_k1
    SPHERICAL_BESSEL_J0 = 71  # torch.special.spherical_bessel_j0
    AIRY_AI = 72  # torch.special.airy_ai


class ReduceKind(enum.IntEnum):
    SUM = 0
    MEAN = 1
    MAX = 2
    MIN = 3
    ANY = 4
    ALL = 5
    PROD = 6
    ARGMAX = 7
    ARGMIN = 8


class CreateKind(enum.IntEnum):
    ZEROS = 0
    ONES = 1
    EMPTY = 2
    FULL = 3
    ARANGE = 4
    RAND = 5
    RANDN = 6
    RANDINT = 7
    FROM_TENSOR = 8
    UNIFORM = 9
    NORMAL = 10
    TRUNC_NORMAL = 11
    # the random fills of dtorch.api.ops.random_more (their draws: dtorch.ir.random_draw)
    EXPONENTIAL = 12
    GEOMETRIC = 13
    LOG_NORMAL = 14
    CAUCHY = 15
    RANDOM = 16
    BERNOULLI = 17
    RANDPERM = 18


class NormKind(enum.IntEnum):
    LAYER = 0
    RMS = 1
    GROUP = 2


class PoolKind(enum.IntEnum):
    MAX = 0
    AVG = 1
    ADAPTIVE_AVG = 2
    ADAPTIVE_MAX = 3


class PaddingType(enum.IntEnum):
    EXPLICIT = 0
    SAME = 1
    VALID = 2


class OperatorFormat(enum.IntEnum):
    NCHW = 0
    NHWC = 1


class MaskedKind(enum.IntEnum):
    FILL = 0
    SCATTER = 1


class MemoryKind(enum.IntEnum):
    EMPTY_CACHE = 0
    STATS = 1


class MaxMinKind(enum.IntEnum):
    MAX = 0
    MIN = 1


class ScanKind(enum.IntEnum):
    SUM = 0
    PROD = 1
    LOGSUMEXP = 2


class OrderStatKind(enum.IntEnum):
    """The order statistics of OrderStat (torch's functions of the same names)."""

    MEDIAN = 0
    NANMEDIAN = 1
    KTHVALUE = 2
    MODE = 3


class LinalgKind(enum.IntEnum):
    """The matrix functions of Linalg (torch.linalg's functions of the same names; LOGDET is
    ``torch.logdet``)."""

    DET = 0
    SLOGDET = 1
    LOGDET = 2
    INV = 3
    SOLVE = 4
    CHOLESKY = 5
    QR = 6
    EIGH = 7
    EIGVALSH = 8
    SVD = 9
    SVDVALS = 10
    PINV = 11
    MATRIX_RANK = 12
    MATRIX_POWER = 13
    MATRIX_EXP = 14
    # torch's older names and more of torch.linalg (dtorch/linalg/older.py, more.py)
    CHOLESKY_INVERSE = 15
    CHOLESKY_SOLVE = 16
    SVD_OLD = 17
    LU_FACTOR_EX = 18
    LU = 19
    LU_UNPACK = 20
    LU_SOLVE = 21
    SOLVE_TRIANGULAR = 22
    TRIANGULAR_SOLVE = 23
    INV_EX = 24
    CHOLESKY_EX = 25
    HOUSEHOLDER_PRODUCT = 26
    GEQRF = 27
    ORMQR = 28
    COND = 29
    EIG = 30
    EIGVALS = 31
    SOLVE_EX = 32
    LDL_FACTOR_EX = 33
    LDL_SOLVE = 34


class FftKind(enum.IntEnum):
    """The transforms of Fft (torch.fft's functions of the same names)."""

    FFT = 0
    IFFT = 1
    FFT2 = 2
    IFFT2 = 3
    FFTN = 4
    IFFTN = 5
    RFFT = 6
    IRFFT = 7
    RFFT2 = 8
    IRFFT2 = 9
    RFFTN = 10
    IRFFTN = 11
    HFFT = 12
    IHFFT = 13
    HFFT2 = 14
    IHFFT2 = 15
    HFFTN = 16
    IHFFTN = 17


class ScatterReduceKind(enum.IntEnum):
    """How Scatter combines what it writes: NONE overwrites (``scatter``); the others are
    ``scatter_reduce``'s reductions (SUM is also ``scatter_add``)."""

    NONE = 0
    SUM = 1
    PROD = 2
    MEAN = 3
    AMAX = 4
    AMIN = 5


class PromiseKind(enum.IntEnum):
    MEMORY = 0
    FILE = 1
    NETWORK = 2
