# mypy: disable-error-code="misc"
# (``self: Tensor`` in a mixin of Tensor: mypy's [misc] asks a self-type to be a supertype)
"""More linear algebra and indexing methods of ``dtorch.Tensor``, as the mixin
``TensorMore``: ``dot``, ``vdot``, ``mv``, ``addmv``, ``baddbmm``, ``addbmm``, ``inner``,
``kron``, ``diag``, ``diagonal``, ``diag_embed``, ``trace``, ``index_fill``, ``index_copy``,
``take``, ``aminmax``, ``masked_select``, ``remainder``, ``index_put`` and torch's in-place
forms of them (``tril_`` and ``triu_`` too). The behaviour lives in ``dtorch.api.ops``'s
``linalg_more``, ``index_more``, ``index``, ``elementwise`` and ``fill``; each method is one
line.

Example:
    >>> import dtorch
    >>> m = dtorch.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> m.trace().item(), m.mv(dtorch.ones(2)).tolist(), m.diag().tolist()
    (5.0, [3.0, 7.0], [1.0, 4.0])
"""

from __future__ import annotations

from dtorch.api.ops import elementwise as _ew
from dtorch.api.ops import fill as _fl
from dtorch.api.ops import grid as _gr
from dtorch.api.ops import grid_more as _gm
from dtorch.api.ops import index as _ix
from dtorch.api.ops import index_more as _im
from dtorch.api.ops import linalg_more as _lm
from dtorch.api.ops import math_extra as _mx
from dtorch.api.ops import methods as _mk
from dtorch.api.ops import search as _se
from dtorch.linalg import aliases as _lg


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
    take = _im.take
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

    # --- in place: the operator above, its result written back as ``addmm_`` writes it ------
    addmv_ = _mk.in_place("addmv_", addmv, elementwise=False)
    baddbmm_ = _mk.in_place("baddbmm_", baddbmm, elementwise=False)
    addbmm_ = _mk.in_place("addbmm_", addbmm, elementwise=False)
    index_fill_ = _im.index_fill_
    index_copy_ = _im.index_copy_
    index_put_ = _ix.index_put_
    tril_ = _mk.in_place("tril_", _fl.tril)
    triu_ = _mk.in_place("triu_", _fl.triu)
    put_ = _mk.in_place("put_", _mx.put, elementwise=False)
    renorm_ = _mk.in_place("renorm_", _mx.renorm, elementwise=False)
    polygamma_ = _mk.in_place("polygamma_", _mx.polygamma_method)
    mvlgamma_ = _mk.in_place("mvlgamma_", _mx.mvlgamma)
