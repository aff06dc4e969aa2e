# mypy: disable-error-code="misc"
# (``self: Tensor`` in a mixin of Tensor: mypy's [misc] asks a self-type to be a supertype)
"""More linear algebra and indexing methods of ``dtorch.Tensor``, as the mixin
``TensorMore``: ``dot``, ``vdot``, ``mv``, ``addmv``, ``baddbmm``, ``addbmm``, ``inner``,
``kron``, ``diag``, ``diagonal``, ``diag_embed``, ``trace``, ``index_fill``, ``index_copy``,
``index_reduce``, ``take``, ``aminmax``, ``masked_select``, ``remainder``, ``index_put``,
``prelu`` and torch's in-place forms of them (``tril_`` and ``triu_`` too). The behaviour
lives in ``dtorch.api.ops``'s ``linalg_more``, ``index_more``, ``index``, ``elementwise``,
``fill`` and ``nn_more``; each method is one line.

Example:
    >>> import dtorch
    >>> m = dtorch.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> m.trace().item(), m.mv(dtorch.ones(2)).tolist(), m.diag().tolist()
    (5.0, [3.0, 7.0], [1.0, 4.0])
"""

from __future__ import annotations

from dtorch.api.ops import aliases_in_place as _ai
from dtorch.api.ops import aliases_more as _al
from dtorch.api.ops import elementwise as _ew
from dtorch.api.ops import fill as _fl
from dtorch.api.ops import grid as _gr
from dtorch.api.ops import grid_more as _gm
from dtorch.api.ops import index as _ix
from dtorch.api.ops import index_more as _im
from dtorch.api.ops import linalg_more as _lm
from dtorch.api.ops import math_extra as _mx
from dtorch.api.ops import methods as _mk
from dtorch.api.ops import nn_more as _nm
from dtorch.api.ops import random_more as _rm
from dtorch.api.ops import search as _se
from dtorch.ir.opkind import MathKind
from dtorch.linalg import aliases as _lg
from dtorch.linalg import older as _lo


class TensorMore:
    """More linear algebra and indexing methods of ``dtorch.Tensor`` (a mixin: ``Tensor`` is
    its only user)."""

    __slots__ = ()

    dot = _lm.dot
    vdot = _lm.vdot
    mv = _lm.mv
    addmv = _lm.addmv
    baddbmm = _lm.baddbmm
    addbmm = _lm.addbmm
    inner = _lm.inner
    kron = _lm.kron
    diag = _im.diag
    diagonal = _im.diagonal
    diag_embed = _im.diag_embed
    trace = _im.trace
    index_fill = _im.index_fill
    index_copy = _im.index_copy
    index_reduce = _im.index_reduce
    take = _im.take
    prelu = _nm.prelu
    # shapes and geometry (dtorch.api.ops.grid)
    ravel = _gr.ravel
    hsplit = _gr.split_method(_gr.hsplit)
    vsplit = _gr.split_method(_gr.vsplit)
    dsplit = _gr.split_method(_gr.dsplit)
    rot90 = _gr.rot90
    unfold = _gr.unfold
    cross = _gm.cross
    cov = _gm.cov
    corrcoef = _gm.corrcoef
    select_scatter = _gm.select_scatter
    slice_scatter = _gm.slice_scatter
    diagonal_scatter = _gm.diagonal_scatter
    aminmax = _im.aminmax
    masked_select = _im.masked_select
    remainder = _ew.remainder
    index_put = _ix.index_put
    det = _lg.det
    logdet = _lg.logdet
    slogdet = _lg.slogdet
    inverse = _lg.inverse
    # torch's older linear algebra names (dtorch.linalg.older)
    cholesky = _lo.cholesky
    cholesky_inverse = _lo.cholesky_inverse
    cholesky_solve = _lo.cholesky_solve
    qr = _lo.qr
    svd = _lo.svd
    pinverse = _lo.pinverse
    matrix_power = _lo.matrix_power
    matrix_exp = _lo.matrix_exp
    lu = _lo.lu
    lu_solve = _lo.lu_solve
    triangular_solve = _lo.triangular_solve
    geqrf = _lo.geqrf
    orgqr = _lo.orgqr
    ormqr = _lo.ormqr
    norm = _lo.norm  # its p='nuc' needs dtorch.linalg, above dtorch.api.ops
    histc = _se.histc
    bincount = _se.bincount
    unique = _se.unique
    unique_consecutive = _se.unique_consecutive
    # more math (dtorch.api.ops.math_extra)
    quantile = _mx.quantile
    nanquantile = _mx.nanquantile
    histogram = _mx.histogram
    argwhere = _mx.argwhere
    renorm = _mx.renorm
    logaddexp2 = _mx.logaddexp2
    polygamma = _mx.polygamma_method
    mvlgamma = _mx.mvlgamma
    frexp = _mx.frexp
    put = _mx.put
    # torch's aliases and small operators (dtorch.api.ops.aliases_more)
    divide = _ew.div
    multiply = _ew.mul
    subtract = _ew.sub
    not_equal = _ew.ne
    floor_divide = _al.floor_divide
    absolute = _mk.unary(MathKind.ABS, "abs")
    arcsin = _mk.unary(MathKind.ASIN, "asin")
    fmax = _al.fmax
    fmin = _al.fmin
    dist = _al.dist
    addr = _al.addr
    ger = _al.ger
    diagflat = _al.diagflat
    fill_diagonal_ = _al.fill_diagonal_
    sum_to_size = _al.sum_to_size
    split_with_sizes = _al.split_with_sizes
    unsafe_split_with_sizes = _al.split_with_sizes  # torch's, without its view checks
    get_device = _al.get_device
    layout = property(_al.layout)
    divide_ = _ai.divide_
    multiply_ = _ai.multiply_
    subtract_ = _ai.subtract_
    not_equal_ = _ai.not_equal_
    absolute_ = _ai.absolute_
    arcsin_ = _ai.arcsin_
    eq_, ne_, ge_, gt_, le_, lt_ = _ai.eq_, _ai.ne_, _ai.ge_, _ai.gt_, _ai.le_, _ai.lt_
    greater_equal_, greater_ = _ai.greater_equal_, _ai.greater_
    less_equal_, less_ = _ai.less_equal_, _ai.less_
    logical_and_, logical_or_ = _ai.logical_and_, _ai.logical_or_
    cumsum_, cumprod_ = _ai.cumsum_, _ai.cumprod_
    addr_ = _ai.addr_

    # --- in place: the operator above, its result written back as ``addmm_`` writes it ------
    addmv_ = _mk.in_place("addmv_", addmv, elementwise=False)
    baddbmm_ = _mk.in_place("baddbmm_", baddbmm, elementwise=False)
    addbmm_ = _mk.in_place("addbmm_", addbmm, elementwise=False)
    index_fill_ = _im.index_fill_
    index_copy_ = _im.index_copy_
    index_reduce_ = _im.index_reduce_
    index_put_ = _ix.index_put_
    tril_ = _mk.in_place("tril_", _fl.tril)
    triu_ = _mk.in_place("triu_", _fl.triu)
    put_ = _mk.in_place("put_", _mx.put, elementwise=False)
    renorm_ = _mk.in_place("renorm_", _mx.renorm, elementwise=False)
    polygamma_ = _mk.in_place("polygamma_", _mx.polygamma_method)
    mvlgamma_ = _mk.in_place("mvlgamma_", _mx.mvlgamma)
    # random draws (dtorch.api.ops.random_more)
    bernoulli = _rm.bernoulli
    multinomial = _rm.multinomial
    bernoulli_ = _rm.bernoulli_
    random_ = _rm.random_
    exponential_ = _rm.exponential_
    geometric_ = _rm.geometric_
    log_normal_ = _rm.log_normal_
    cauchy_ = _rm.cauchy_
