"""The selection, ordering and scatter methods of ``dtorch.Tensor`` (``index_select``,
``gather``, ``sort``, ``topk``, ``flip``, ``scatter``, ``index_add``, ...), as the mixin
``TensorIndexing``: the behaviour lives in ``dtorch.api.ops.order``, ``dtorch.api.ops.take``
and ``dtorch.api.ops.scatter``, whose functions have the methods' signatures.

Example:
    >>> import dtorch
    >>> t = dtorch.tensor([[3.0, 1.0], [0.0, 2.0]])
    >>> t.sort(1).values.tolist(), t.scatter_add(1, dtorch.tensor([[0], [0]]), t).tolist()
    ([[1.0, 3.0], [0.0, 2.0]], [[6.0, 1.0], [0.0, 2.0]])
"""

from __future__ import annotations

from dtorch.api.ops import order as _od
from dtorch.api.ops import repeats as _rp
from dtorch.api.ops import scatter as _sc
from dtorch.api.ops.take import index_select


class TensorIndexing:
    """The selection, ordering and scatter methods of ``dtorch.Tensor`` (a mixin: ``Tensor``
    is its only user)."""

    __slots__ = ()

    # --- selection and its inverses ---------------------------------------------------------
    index_select = index_select
    gather = _od.gather
    take_along_dim = _od.take_along_dim
    scatter = _sc.scatter
    scatter_ = _sc.scatter_
    scatter_add = _sc.scatter_add
    scatter_add_ = _sc.scatter_add_
    scatter_reduce = _sc.scatter_reduce
    scatter_reduce_ = _sc.scatter_reduce_
    index_add = _sc.index_add
    index_add_ = _sc.index_add_

    # --- ordering ---------------------------------------------------------------------------
    sort = _od.sort
    argsort = _od.argsort
    msort = _od.msort
    topk = _od.topk
    flip = _od.flip
    fliplr = _od.fliplr
    flipud = _od.flipud
    roll = _rp.roll
